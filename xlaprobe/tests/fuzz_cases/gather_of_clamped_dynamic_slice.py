"""gather of a dynamic_slice whose start must be clamped: XLA:CPU folds the two into one gather
and clamps only the combined start to the outer operand, so the dynamic_slice's own clamp
(start 3 of a 4-row slice of 6 rows -> 2) is lost and rows 3..5 come back instead of 2..4.
Found by `xlaprobe fuzz` (seed 9300107, jaxlib 0.10.2); right op by op (eager)."""
import numpy as np
from jax import lax

KIND = "gather"
FAULTY_CONFIG = "xla"
#: Releases measured to compute it wrongly (benchmarks/release_matrix.py; 0.4.13 from the shared
#: cases' table).
FAILS_ON = ("0.4.28", "0.4.33", "0.5.3", "0.6.2", "0.7.2", "0.10.1", "0.10.2", "0.11.2")
_DN = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(), start_index_map=(0,))


def program(x, start, index):
    window = lax.dynamic_slice(x, (start,), (4,))     # start 3 clamps to 6 - 4 = 2
    return lax.gather(window, index, _DN, (3,), mode=lax.GatherScatterMode.CLIP)


def inputs():
    return np.arange(6, dtype=np.float32), np.int32(3), np.zeros((1, 1), np.int32)


def expected():
    return np.array([[2.0, 3.0, 4.0]], np.float32)   # XLA:CPU gives [[3, 4, 5]]
