"""int8 square that wraps, then where(p < 0, abs(p), p): XLA treats the multiply as non-wrapping,
folds p < 0 to false and returns the negative wrapped values."""
import jax.numpy as jnp
import numpy as np

KIND = "select"
FAULTY_CONFIG = "xla"
ALSO_OP_BY_OP = False


def program(b):
    p = b * b
    return jnp.where(p < 0, jnp.abs(p), p)


def inputs():
    return (np.array([13, 9, 21, 3, 16], np.int8),)


def expected():
    # squares 169, 81, 441, 9, 256 wrap to -87, 81, -71, 9, 0; abs gives 87, 81, 71, 9, 0
    return (np.array([87, 81, 71, 9, 0], np.int8),)
