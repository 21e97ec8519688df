"""lax.clamp of a bool array inside a while loop's body: XLA:CPU rejects the program
("UNIMPLEMENTED: Clamp unimplemented for PRED"), a valid program (JAX traces it, op by op it
runs, and the same clamp outside a loop compiles: XLA folds it there). Clamp of PRED is ordered
False < True, so the right value is the clamped bool itself. Found by `xlaprobe fuzz` on jaxlib
0.12.0.1 (seeds 61000423 on, reduced 21 -> 3 equations)."""
import numpy as np
from jax import lax

KIND = "clamp"
FAULTY_CONFIG = "xla"
#: XLA refuses the program: the verdict is a compile error, not a wrong value.
VERDICT = "compile-error"
#: Releases measured to reject it: the newest of each minor line from 0.4.26, and 0.12.0.1
#: (no release fixed it).
FAILS_ON = ("0.4.26", "0.4.38", "0.5.3", "0.6.2", "0.7.2", "0.8.3", "0.9.2", "0.10.2", "0.11.2", "0.12.0.1")


def program(x, lo, hi):
    def body(carry):
        i, v = carry
        return i + 1, lax.clamp(lo, v, hi)

    return lax.while_loop(lambda c: c[0] < 2, body, (0, x))[1]


def inputs():
    return np.array([True, False, True, False]), np.array(False), np.array(True)


def expected():
    return (np.array([True, False, True, False]),)
