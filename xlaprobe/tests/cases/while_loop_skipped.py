"""while i < 1: i += 3, n += 1 from (0, 0): the loop runs once, XLA's loop simplifier says zero times."""
import jax.numpy as jnp
from jax import lax
import numpy as np

KIND = "while"
FAULTY_CONFIG = "xla"
#: Releases measured to compute it wrongly (benchmarks/release_matrix.py; 0.4.13 from the shared
#: cases' table).
FAILS_ON = ("0.4.28", "0.4.33", "0.5.3", "0.6.2", "0.7.2", "0.10.1", "0.10.2", "0.11.2")
ALSO_OP_BY_OP = False


def program():
    return lax.while_loop(lambda c: c[0] < 1, lambda c: (c[0] + 3, c[1] + 1),
                          (jnp.int32(0), jnp.int32(0)))


def inputs():
    return ()


def expected():
    return (np.int32(3), np.int32(1))
