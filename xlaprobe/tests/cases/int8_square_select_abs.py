"""int8 square that wraps, then where(p < 0, abs(p), p): XLA treats the multiply as non-wrapping,
folds p < 0 to false and returns the negative wrapped values."""
import jax.numpy as jnp
import numpy as np

KIND = "select"
FAULTY_CONFIG = "xla"
#: Releases measured to compute it wrongly (benchmarks/release_matrix.py; 0.4.13 from the shared
#: cases' table).
FAILS_ON = ("0.4.13", "0.4.28", "0.4.33", "0.5.3", "0.6.2", "0.7.2", "0.10.1", "0.10.2")
ALSO_OP_BY_OP = False


def program(b):
    p = b * b
    return jnp.where(p < 0, jnp.abs(p), p)


def inputs():
    return (np.array([13, 9, 21, 3, 16], np.int8),)


def expected():
    # squares 169, 81, 441, 9, 256 wrap to -87, 81, -71, 9, 0; abs gives 87, 81, 71, 9, 0
    return (np.array([87, 81, 71, 9, 0], np.int8),)
