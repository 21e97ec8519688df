"""A fixed corpus of small programs, each with the patterns planted faults and real miscompiles
hide in (fused arithmetic, compare+select, dynamic slices, scatters, reductions, transposes,
constant-bound loops, narrowing converts, dots, sorts). Used by the mutation-score benchmark and
the mutant tests; deterministic (fixed seeds)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from xlaprobe.errors import InvalidArgument
from xlaprobe.program import Program, Provenance

_RNG_SEED = 1234


def _normal(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(_RNG_SEED + seed).standard_normal(shape).astype(np.float32)


def fused_arithmetic(x: Any, y: Any) -> Any:
    """(x - y) / (|y| + 2) * exp(x): subtract, divide and exp in one fusion. x, y: f32[16]."""
    return (x - y) / (jnp.abs(y) + 2.0) * jnp.exp(x)


def threshold_select(x: Any) -> Any:
    """where(x > 0.25, x, -2x): a compare feeding a select. x: f32[32]."""
    return jnp.where(x > 0.25, x, -2.0 * x)


def dynamic_window(x: Any, start: Any) -> Any:
    """A dynamic slice of 4 elements at a runtime start. x: f32[16], start: i32[]."""
    return lax.dynamic_slice(x, (start,), (4,)) * 2.0


def scatter_add_rows(x: Any, indices: Any, updates: Any) -> Any:
    """x.at[indices].add(updates) with 5 distinct indices. x: f32[10], indices: i32[5]."""
    return x.at[indices].add(updates)


def row_sums(x: Any) -> Any:
    """Sum over rows plus a sum of squares. x: f32[8, 16] -> (f32[8], f32[])."""
    return jnp.sum(x, axis=1), jnp.sum(x * x)


def transpose_add(x: Any) -> Any:
    """transpose(x) + arange: a real transpose. x: f32[6, 10] -> f32[10, 6]."""
    return jnp.transpose(x) + jnp.arange(6, dtype=jnp.float32)


def counted_loop(x: Any) -> Any:
    """fori_loop(0, 5, c * 1.5 + i): a while loop with a constant trip count. x: f32[4]."""
    return lax.fori_loop(0, 5, lambda i, c: c * 1.5 + i.astype(jnp.float32), x)


def narrowing_convert(x: Any) -> Any:
    """int32 -> int8 conversion of values beyond int8's range (wraps). x: i32[12]."""
    return (x * 37).astype(jnp.int8)


def matmul(x: Any, w: Any) -> Any:
    """x @ w. x: f32[8, 32], w: f32[32, 16]."""
    return x @ w


def scaled_tanh(x: Any) -> Any:
    """tanh(0.37 x): a non-integer constant and a transcendental. x: f32[64]."""
    return jnp.tanh(x * 0.37)


def sort_values(x: Any) -> Any:
    """sort(x). x: f32[20]."""
    return jnp.sort(x)


def prefix_mask(x: Any) -> Any:
    """where(arange(n) < 6, x, 0): an integer comparison with ties feeding a select. x: f32[10]."""
    return jnp.where(jnp.arange(10, dtype=jnp.int32) < 6, x, 0.0)


def log_softmax(x: Any) -> Any:
    """log_softmax over the last axis. x: f32[4, 10]."""
    return jax.nn.log_softmax(x)


#: name -> (function, input factory).
CORPUS: dict[str, tuple[Callable[..., Any], Callable[[], tuple[np.ndarray, ...]]]] = {
    "fused_arithmetic": (fused_arithmetic, lambda: (_normal(16), _normal(16, seed=1))),
    "threshold_select": (threshold_select, lambda: (_normal(32),)),
    # Index 0 is the edge where negative-index wrapping (start < 0 ? start + n : start) is decided.
    "dynamic_window": (dynamic_window, lambda: (_normal(16), np.int32(0))),
    "scatter_add_rows": (scatter_add_rows, lambda: (_normal(10), np.array([0, 3, 4, 7, 9], np.int32),
                                                   _normal(5, seed=2))),
    "row_sums": (row_sums, lambda: (_normal(8, 16),)),
    "transpose_add": (transpose_add, lambda: (_normal(6, 10),)),
    "counted_loop": (counted_loop, lambda: (_normal(4),)),
    "narrowing_convert": (narrowing_convert,
                          lambda: (np.arange(-6, 6, dtype=np.int32) * 11,)),
    "matmul": (matmul, lambda: (_normal(8, 32), _normal(32, 16, seed=3))),
    "scaled_tanh": (scaled_tanh, lambda: (_normal(64),)),
    "sort_values": (sort_values, lambda: (_normal(20),)),
    "log_softmax": (log_softmax, lambda: (_normal(4, 10),)),
    "prefix_mask": (prefix_mask, lambda: (_normal(10),)),
}


def corpus_program(name: str) -> Program:
    """The corpus program `name` as a Program (provenance source ``"corpus"``).

    Raises:
        InvalidArgument: unknown name.
    """
    if name not in CORPUS:
        raise InvalidArgument(f"unknown corpus program '{name}'; known: {', '.join(CORPUS)}")
    fn, make_inputs = CORPUS[name]
    return Program.from_function(fn, make_inputs(), Provenance("corpus", name))
