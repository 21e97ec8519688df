"""while i < -3: i += 3 from i = -4 (int16), carrying s through a size-1 reduce_window sum (an
identity): one trip, i = -1. XLA:CPU (jaxlib 0.10.2, xla and xla:O0; right op by op) returns -4,
simplifying the loop to zero trips. Found by `xlaprobe fuzz` (seed 7100238)."""
import jax.numpy as jnp
import numpy as np
from jax import lax

KIND = "while"
FAULTY_CONFIG = "xla"
#: Releases measured to compute it wrongly (benchmarks/release_matrix.py; 0.4.13 from the shared
#: cases' table).
FAILS_ON = ("0.10.1", "0.10.2", "0.11.2")  # right on 0.4.28-0.7.2 (0.8.3, 0.9.2 not measured)


def program(s):
    def body(c):
        return c[0] + jnp.int16(3), lax.reduce_window(c[1], 0, lax.add, (1,), (1,), ((0, 0),))
    return lax.while_loop(lambda c: c[0] < jnp.int16(-3), body, (jnp.int16(-4), s))


def inputs():
    return (np.zeros(1, np.int32),)


def expected():
    return np.int16(-1), np.zeros(1, np.int32)
