"""logistic of a FILL_OR_DROP gather whose out-of-bounds windows are filled with NaN: under jit
XLA:CPU returns numbers there (1.0 here; 0, 3.6e-20 or NaN in other surroundings: stale values,
not the fill) where logistic(NaN) is NaN; the gather alone, and op by op (eager, xla:O0 of the
whole program in the campaign), give the NaN fill. Found by `xlaprobe fuzz` on jaxlib 0.12.0.1
(seed 52000906, a 27-equation program; reduced by hand to these two).

Flaky: wrong in 2 of 6 fresh processes (each consistent within itself), so it is not among the
deterministic regression cases of tests/test_fuzz_cases.py, which collects only the folder above;
docs/upstream/gather_fill_nan_logistic.md is its draft."""
import numpy as np
from jax import lax

KIND = "gather"
FAULTY_CONFIG = "xla"
#: A number where the right value is NaN.
VERDICT = "nan-mismatch"
#: Releases measured to compute it wrongly (only the installed one was measured).
FAILS_ON = ("0.12.0.1",)
_DN = lax.GatherDimensionNumbers(offset_dims=(1, 2), collapsed_slice_dims=(), start_index_map=(0,))


def program(x, index):
    # Index 0 is the only start in bounds (slice 1x2 of a 1x2 operand): index 1 is filled.
    window = lax.gather(x, index, _DN, (1, 2), mode=lax.GatherScatterMode.FILL_OR_DROP,
                        fill_value=np.nan)
    return lax.logistic(window)


def inputs():
    return np.array([[-np.inf, -1.1747416]], np.float32), np.array([[0], [1]], np.uint8)


def expected():
    x = np.array([-np.inf, -1.1747416], np.float64)
    inside = 1 / (1 + np.exp(-x))
    return (np.array([[inside], [[np.nan, np.nan]]], np.float32).reshape(2, 1, 2),)
