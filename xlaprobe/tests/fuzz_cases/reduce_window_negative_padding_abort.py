"""reduce_window max with a negative low padding (-1: drop the first element) over float32[2]:
XLA:CPU's algebraic simplifier aborts the process (RET_CHECK in hlo_computation.cc, "Check failed:
computation->Accept(this)") instead of compiling it; the same in op-by-op execution. Found by
`xlaprobe fuzz` on jaxlib 0.12.0.1 (seed 1201701, reduced to one equation by `xlaprobe reduce`):
the 0.10.2 family "reduce_window with negative padding aborts the compiler" survives (it aborts on
every release from 0.4.33 to 0.12.0.1)."""
import numpy as np
from jax import lax

KIND = "reduce_window_max"
FAULTY_CONFIG = "xla"
#: The compiler aborts: the verdict is a crash, not a wrong value.
VERDICT = "crash"
#: Releases measured to abort on it (benchmarks/release_matrix.py).
FAILS_ON = ("0.4.33", "0.5.3", "0.6.2", "0.7.2", "0.8.3", "0.9.2", "0.10.2", "0.11.2", "0.12.0.1")


def program(x):
    return lax.reduce_window(x, -np.inf, lax.max, (1,), (1,), ((-1, 0),))


def inputs():
    return (np.array([3.0, 5.0], np.float32),)


def expected():
    return (np.array([5.0], np.float32),)  # the padding drops x[0]; windows of one element
