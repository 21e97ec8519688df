"""A small user program for the tuner's tests: a knob, and a fused subtract that the
swap-subtract-fused mutant corrupts."""

import jax.numpy as jnp
import numpy as np

import xlaprobe


def step(x, y, w, *, scale: float = xlaprobe.knob(2.0, (2.0, 4.0))):
    return jnp.tanh((x - y) * scale) @ w


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((32, 64), dtype=np.float32),
            rng.standard_normal((32, 64), dtype=np.float32),
            rng.standard_normal((64, 16), dtype=np.float32))


def nan_step(x, y, w):
    """Every output NaN: the guard cannot judge a candidate by it."""
    return jnp.log(-(x * x) - 1.0) @ w


def padded_step(x, y, w, *, rounds: int = xlaprobe.knob(48, (48, 1))):
    """The default does 48 chained matmuls, the knob's other value one: a known win."""
    m = (y.T @ x) / 64.0
    h = x - y
    for _ in range(rounds):
        h = jnp.tanh(h @ m)
    return h @ w
