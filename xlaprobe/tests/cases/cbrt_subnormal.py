"""cbrt of float32 subnormals: XLA:CPU returns a wrong constant (even negative); op by op too."""
import jax.numpy as jnp
import numpy as np

KIND = "cbrt"
FAULTY_CONFIG = "xla"
#: Releases measured to compute it wrongly (benchmarks/release_matrix.py; 0.4.13 from the shared
#: cases' table).
FAILS_ON = ("0.4.13", "0.4.28", "0.4.33", "0.5.3", "0.6.2", "0.7.2", "0.10.1", "0.10.2", "0.11.2", "0.12.0.1")
ALSO_OP_BY_OP = True


def program(x):
    return jnp.cbrt(x)


def inputs():
    smallest_normal = np.finfo(np.float32).tiny
    return (np.array([smallest_normal / 2, 3e-41, 2e-44, 8.0], np.float32),)


def expected():
    # cbrt(5.877e-39) = 1.8047e-13, cbrt(3e-41) = 3.1072e-14, cbrt(2e-44) = 2.7144e-15, cbrt(8) = 2
    (x,) = inputs()
    return (np.cbrt(x.astype(np.float64)).astype(np.float32),)
