"""Small user programs for the tuner's tests: knobs that keep the result (a chunked contraction,
fewer applications of a permutation that cycles back) and knobs that change it (bfloat16 for
float32, an added term), and a fused subtract that the swap-subtract-fused mutant corrupts."""

import jax.numpy as jnp
import numpy as np

import xlaprobe


def step(x, y, w, *, chunks: int = xlaprobe.knob(1, (1, 4))):
    """The contraction split into `chunks` partial products summed: a re-association only."""
    h = jnp.tanh((x - y) * 2.0)
    size = h.shape[1] // chunks
    return sum(h[:, c * size:(c + 1) * size] @ w[c * size:(c + 1) * size] for c in range(chunks))


def precision_step(x, y, w, *, dtype: str = xlaprobe.knob("float32", ("float32", "bfloat16"))):
    """The contraction in `dtype`, the output float32 either way: bfloat16 changes the math."""
    h = jnp.tanh((x - y) * 2.0)
    return (h.astype(dtype) @ w.astype(dtype)).astype(jnp.float32)


def biased_step(x, y, w, *, bias: float = xlaprobe.knob(0.0, (0.0, 0.01))):
    """A knob that adds a term (0.01 to outputs of magnitude about 5): another result."""
    return jnp.tanh((x - y) * 2.0) @ w + bias


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((32, 64), dtype=np.float32),
            rng.standard_normal((32, 64), dtype=np.float32),
            rng.standard_normal((64, 16), dtype=np.float32))


def nan_step(x, y, w):
    """Every output NaN: the guard cannot judge a candidate by it."""
    return jnp.log(-(x * x) - 1.0) @ w


def padded_step(x, y, w, *, rounds: int = xlaprobe.knob(48, (48, 0))):
    """The default applies a cyclic column shift (a permutation matrix of order 16) in 48
    chained matmuls, which is the identity; the knob's other value skips them: the same result
    exactly (each product picks one element, plus exact zeros), one matmul instead of 49: a
    known win."""
    n = x.shape[1]
    i = jnp.arange(n)
    shift = (((i[:, None] + 4) % n) == i[None, :]).astype(x.dtype)
    h = x - y
    for _ in range(rounds):
        h = h @ shift
    return jnp.tanh(h) @ w
