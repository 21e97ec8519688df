"""scatter-mul of a 54-wide window with an int8 start index into int32[240]: the clamp bound
240 - 54 = 186 does not fit int8 and XLA:CPU (jaxlib 0.10.2) drops the update (start 60, in
range). int16/int32 indices are right. Found by `xlaprobe fuzz` (seed 9300275)."""
import numpy as np
from jax import lax

KIND = "scatter-mul"
FAULTY_CONFIG = "xla"
#: Releases measured to compute it wrongly (benchmarks/release_matrix.py; 0.4.13 from the shared
#: cases' table).
FAILS_ON = ("0.4.28", "0.4.33", "0.5.3", "0.6.2", "0.7.2", "0.10.1", "0.10.2", "0.11.2")
_DN = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(),
                                  scatter_dims_to_operand_dims=(0,))


def program(x, index, updates):
    return lax.scatter_mul(x, index, updates, _DN)


def inputs():
    return np.ones(240, np.int32), np.array([[60]], np.int8), np.full((1, 54), 3, np.int32)


def expected():
    want = np.ones(240, np.int32)
    want[60:114] = 3
    return want
