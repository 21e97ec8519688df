"""dot_general of bfloat16 operands with a float32 result, contracting the lhs's dimension 0 with
the rhs's dimension 2 (bf16[8,2] . bf16[1,4,8] -> f32[2,1,4]): XLA:CPU compiles it to a DotThunk
that cannot execute it ("UNIMPLEMENTED: Unsupported element type for DotThunk::Execute: BF16 x
BF16 = F32"), a valid program rejected; contracting lhs dimension 1 works. Right on 0.4.33-0.6.2:
a regression of 0.7.2 (`xlaprobe bisect`). Found by `xlaprobe
fuzz` on jaxlib 0.12.0.1 (seed 1200930, reduced to one equation by `xlaprobe reduce`)."""
import jax.numpy as jnp
import numpy as np
from jax import lax

KIND = "dot_general"
FAULTY_CONFIG = "xla"
#: XLA refuses the program: the verdict is a compile error, not a wrong value.
VERDICT = "compile-error"
#: Releases measured to reject it (benchmarks/release_matrix.py).
FAILS_ON = ("0.7.2", "0.8.3", "0.9.2", "0.10.2", "0.11.2", "0.12.0.1")


def program(x, y):
    return lax.dot_general(x, y, (((0,), (2,)), ((), ())), preferred_element_type=jnp.float32)


def inputs():
    return (np.arange(16, dtype=np.float32).reshape(8, 2).astype(jnp.bfloat16),
            np.ones((1, 4, 8), jnp.bfloat16))


def expected():
    x = np.arange(16, dtype=np.float32).reshape(8, 2)
    return (np.einsum("ka,bck->abc", x, np.ones((1, 4, 8), np.float32)),)
