"""log(rsqrt(x)) at x = -0.0: rsqrt(-0) is -inf (IEEE 754) and log(-inf) is NaN, as op by op and
in float64; XLA:CPU's algebraic simplifier rewrites log(rsqrt(A)) into -0.5 * log(A), which gives
-0.5 * -inf = +inf there (right at +0, positive and negative values; float16 and float32 alike;
`xla_disable_hlo_passes=algsimp` gives NaN). The rewrite holds on the reals, not at a signed zero.
Found by `xlaprobe fuzz --steer coverage` on jaxlib 0.12.0.1 (seed 8991 of a plain program:
log(rsqrt(ceil(x))) in float16, ceil(-0.008) = -0.0), reduced by hand."""
import jax.numpy as jnp
import numpy as np
from jax import lax

KIND = "log"
FAULTY_CONFIG = "xla"
#: NaN where XLA gives +inf.
VERDICT = "nan-mismatch"
#: Releases measured to compute it wrongly: the newest of each minor line from 0.4.26, and 0.12.0.1
#: (no release fixed it).
FAILS_ON = ("0.4.26", "0.4.38", "0.5.3", "0.6.2", "0.7.2", "0.8.3", "0.9.2", "0.10.2", "0.11.2", "0.12.0.1")


def program(x):
    return jnp.log(lax.rsqrt(x))


def inputs():
    return (np.array([-0.0, 0.0, 4.0, 0.25], np.float32),)


def expected():
    return (np.array([np.nan, np.inf, -0.6931472, 0.6931472], np.float32),)
