"""In-place update of rows 1..3 with rows 0..2 of the same buffer, then a reshape: XLA:CPU's fused
update reads rows it has already overwritten."""
import numpy as np
from jax import lax

KIND = "dynamic_update_slice"
FAULTY_CONFIG = "xla"
#: Releases measured to compute it wrongly (benchmarks/release_matrix.py; 0.4.13 from the shared
#: cases' table).
FAILS_ON = ("0.5.3", "0.6.2", "0.7.2", "0.10.1", "0.10.2", "0.11.2", "0.12.0.1")
ALSO_OP_BY_OP = False


def program(x):
    y = x + np.int32(1)
    shifted = lax.dynamic_update_slice(y, y[:3], (1, 0, 0))
    return shifted.reshape((1, 4, 1))


def inputs():
    return (np.arange(4, dtype=np.int32).reshape(4, 1, 1),)


def expected():
    # y = [1, 2, 3, 4]; rows 1..3 <- [1, 2, 3]
    return (np.array([1, 1, 2, 3], np.int32).reshape(1, 4, 1),)
