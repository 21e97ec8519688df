"""pow of a float32 subnormal base with a float32 exponent array: XLA:CPU returns a constant
2.646978e-23 for every subnormal base (pow(1e-39, 0.5) should be 3.16e-20, pow(1e-45, 0.5)
3.74e-23), in jit and op by op alike; a normal base is right. With the exponent a literal 0.5
XLA rewrites pow to sqrt and flushes instead (0, which flush-to-zero allows). The same family as
cbrt_subnormal (tests/cases). The generator does not keep subnormal bases out of pow (it asks
only for an exact exponent), so hunts keep finding it: a campaign labels it known by its bug key
(`xlaprobe.known_bugs`). Found by `xlaprobe fuzz` on jaxlib 0.12.0.1."""
import numpy as np
from jax import lax

KIND = "pow"
FAULTY_CONFIG = "xla"
#: Releases measured to compute it wrongly: the newest of each minor line from 0.4.26, and 0.12.0.1
#: (no release fixed it).
FAILS_ON = ("0.4.26", "0.4.38", "0.5.3", "0.6.2", "0.7.2", "0.8.3", "0.9.2", "0.10.2", "0.11.2", "0.12.0.1")


def program(x, y):
    return lax.pow(x, y)


def inputs():
    return (np.array([1e-39, 5.877471754111438e-39, 1e-45, 4.0], np.float32),
            np.full(4, 0.5, np.float32))


def expected():
    x, y = (a.astype(np.float64) for a in inputs())
    return (np.power(x, y).astype(np.float32),)
