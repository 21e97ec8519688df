"""scatter-add with a uint8 index 200 into 300 elements: valid, but XLA:CPU checks bounds in the
index dtype and drops the update. Op by op too."""
import numpy as np
from jax import lax

KIND = "scatter"
FAULTY_CONFIG = "xla"
#: Releases measured to compute it wrongly (benchmarks/release_matrix.py; 0.4.13 from the shared
#: cases' table).
FAILS_ON = ("0.4.13", "0.4.28", "0.4.33", "0.5.3", "0.6.2", "0.7.2", "0.10.1", "0.10.2", "0.11.2")
ALSO_OP_BY_OP = True
DIMENSION_NUMBERS = lax.ScatterDimensionNumbers(
    update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))


def program(operand, indices, updates):
    return lax.scatter_add(operand, indices, updates, DIMENSION_NUMBERS)


def inputs():
    return np.arange(300, dtype=np.int32), np.array([[200]], np.uint8), np.array([5000], np.int32)


def expected():
    out = np.arange(300, dtype=np.int32)
    out[200] = 200 + 5000
    return (out,)
