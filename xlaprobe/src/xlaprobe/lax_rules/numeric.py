"""What the float64 reference's rules are made of: the rule signature, the context a rule reads,
dtype kinds and carriers, and the float semantics several rules share.

A leaf: the primitive records (the family modules of `xlaprobe.lax_rules`) write their reference
rules with it, and the interpreter (`xlaprobe.configs.reference`) reads it. A rule is
``rule(ctx, *operands, **params)`` on NumPy arrays carried as float64 (complex128 for complex
dtypes; exact integers and booleans) and returns the result, or a list for multiple-result
primitives; the interpreter rounds and casts it to the outvar dtype.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import ml_dtypes
import numpy as np
from jax import dtypes as jdtypes

#: A reference rule: ``rule(ctx, *operands, **params) -> result or list of results``.
Rule = Callable[..., Any]

__all__ = ["Keys", "Rule", "RuleContext", "carrier", "dtype_kind", "flushed", "flushed_in_some_order",
           "fmax", "fmin", "highest", "lowest", "pad_general", "ref_binary", "ref_unary", "rounded",
           "small_factors", "total_order_key", "unsigned"]


class RuleContext(Protocol):
    """What a reference rule may know besides its operands and parameters (the interpreter's
    context satisfies it).

    Attributes:
        in_dtypes: logical dtype per operand (float32, not the float64 it is carried in).
        out_dtypes: logical dtype per result.
        out_shapes: shape per result.
    """

    in_dtypes: tuple[np.dtype, ...]
    out_dtypes: tuple[np.dtype, ...]
    out_shapes: tuple[tuple[int, ...], ...]

    @property
    def native(self) -> bool:
        """Each op is rounded to its dtype (``reference:native``), not kept in float64."""

    @property
    def flush(self) -> bool:
        """Subnormal results are flushed to zero (``reference:ftz``)."""

    @property
    def rng(self) -> np.random.Generator | None:
        """The Monte Carlo arithmetic's generator (``reference:mca``), else None."""

    @property
    def out_dtype(self) -> np.dtype:
        """The first result's logical dtype."""

    def acc_dtype(self, dtype: Any = None) -> np.dtype:
        """The dtype a sum producing `dtype` (default: the first result's) accumulates in."""

    def eval(self, closed: Any, args: Sequence[Any], consts: Sequence[Any] = ()) -> list[Any]:
        """The results of the jaxpr `closed` (a parameter: a combiner, a body), closed over
        `consts` when given, on `args` in carried form."""


@dataclasses.dataclass(frozen=True, slots=True)
class Keys:
    """A PRNG key array as the reference carries it: `impl` (the PRNG implementation, e.g.
    threefry2x32) and `data`, uint32[*shape, *impl.key_shape]."""

    impl: Any
    data: np.ndarray

    @property
    def shape(self) -> tuple[int, ...]:
        return self.data.shape[:self.data.ndim - len(self.impl.key_shape)]


@functools.cache
def dtype_kind(dtype: Any) -> str:
    """'f' float (ml_dtypes included), 'c' complex, 'i' signed, 'u' unsigned, 'b' bool, 'k' key.

    Raises:
        TypeError: a dtype the reference does not carry.
    """
    if jdtypes.issubdtype(dtype, jdtypes.prng_key):
        return "k"
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return "b"
    if jdtypes.issubdtype(dtype, np.complexfloating):
        return "c"
    if jdtypes.issubdtype(dtype, np.floating):
        return "f"
    if jdtypes.issubdtype(dtype, np.signedinteger):
        return "i"
    if jdtypes.issubdtype(dtype, np.unsignedinteger):
        return "u"
    raise TypeError(f"reference interpreter: unsupported dtype {dtype}")


def carrier(dtype: Any) -> np.dtype:
    """The dtype a value of logical `dtype` is carried in: float64/complex128 for inexact types."""
    kind = dtype_kind(dtype)
    if kind == "f":
        return np.dtype(np.float64)
    if kind == "c":
        return np.dtype(np.complex128)
    return np.dtype(dtype)


def unsigned(dtype: Any) -> np.dtype:
    """The unsigned integer dtype of `dtype`'s width (uint32 for int32 and float32)."""
    return np.dtype(f"uint{np.dtype(dtype).itemsize * 8}")


# float min/max as XLA computes them: NaN-propagating; max(-0, +0) = +0, min(-0, +0) = -0


def fmax(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Elementwise maximum, NaN-propagating, with max(-0, +0) = +0 (float64 arrays)."""
    r = np.maximum(x, y)
    both_zero = (x == 0) & (y == 0)
    return np.where(both_zero, x + y, r)


def fmin(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Elementwise minimum, NaN-propagating, with min(-0, +0) = -0 (float64 arrays)."""
    r = np.minimum(x, y)
    both_zero = (x == 0) & (y == 0)
    return np.where(both_zero, -((-x) + (-y)), r)


def lowest(dtype: Any) -> Any:
    """The identity of a maximum over `dtype`: -inf, False or the integer minimum."""
    kind = dtype_kind(dtype)
    return -np.inf if kind == "f" else (False if kind == "b" else np.iinfo(dtype).min)


def highest(dtype: Any) -> Any:
    """The identity of a minimum over `dtype`: inf, True or the integer maximum."""
    kind = dtype_kind(dtype)
    return np.inf if kind == "f" else (True if kind == "b" else np.iinfo(dtype).max)


def flushed(x: np.ndarray, dtype: Any) -> np.ndarray:
    """`x` (float64) with values below `dtype`'s smallest normal flushed to zero of their sign."""
    tiny = float(ml_dtypes.finfo(dtype).tiny)
    return np.where(np.abs(x) < tiny, np.copysign(0.0, x), x).astype(x.dtype)


def rounded(x: np.ndarray, dtype: Any, flush: bool) -> np.ndarray:
    """`x` (float64) rounded to float `dtype` and carried as float64; flushed with `flush`."""
    out = np.asarray(x, np.float64).astype(dtype).astype(np.float64)
    return flushed(out, dtype) if flush else out


def small_factors(x: np.ndarray) -> np.ndarray:
    """|x| where it is below 1, else 1 (float64): their product is the smallest partial product
    any order of multiplying the factors can reach."""
    magnitude = np.abs(np.asarray(x, np.float64))
    return np.where(magnitude < 1.0, magnitude, 1.0)


def flushed_in_some_order(out: np.ndarray, smallest_partial: np.ndarray, dtype: Any) -> np.ndarray:
    """A product's result (``reference:ftz``) as zero of its sign wherever *some* order of its
    factors passes through a partial product below `dtype`'s smallest normal, which XLA:CPU
    flushes: the order of a reduction, of a cumulative product (an associative scan) or of a
    scatter's combines is XLA's to choose. `smallest_partial` is the product of the small factors
    (`small_factors`), the smallest partial product over every order (campaign seed 52001072:
    XLA's cumprod of -0.205, -2, -2, 1.1755e-38, 1.82 is -0 at the end, float64 -1.76e-38)."""
    tiny = float(ml_dtypes.finfo(dtype).tiny)
    out = np.asarray(out, np.float64)
    return np.where(smallest_partial < tiny, np.copysign(0.0, out), out)


def pad_general(x: np.ndarray, value: Any, config: Sequence[tuple[int, int, int]]) -> np.ndarray:
    """Pad with (low, high, interior) per dim; negative low/high crop (StableHLO pad).

    Interior padding first, then the positive edges, then the crop: a negative edge may crop
    through the operand into the padding of the other edge (``(3, -4, 0)`` on 2 elements keeps
    one padding value). The result has ``lo + n + (n - 1) * interior + hi`` elements per dim.

    >>> pad_general(np.array([1.0, 2.0]), 0.0, [(3, -4, 0)]).tolist()
    [0.0]
    >>> pad_general(np.array([1.0, 2.0]), 0.0, [(-3, 2, 0)]).tolist()
    [0.0]
    >>> pad_general(np.array([1.0, 2.0, 3.0]), 9.0, [(-1, 1, 1)]).tolist()
    [9.0, 2.0, 9.0, 3.0, 9.0]
    """
    for axis, (lo, hi, interior) in enumerate(config):
        lo, hi, interior = int(lo), int(hi), int(interior)
        n = x.shape[axis]
        if interior > 0 and n > 1:
            shape = list(x.shape)
            shape[axis] = n + (n - 1) * interior
            y = np.full(shape, value, dtype=x.dtype)
            index = [slice(None)] * x.ndim
            index[axis] = slice(None, None, interior + 1)
            y[tuple(index)] = x
            x = y
        parts = []
        for edge in (lo, None, hi):
            if edge is None:
                parts.append(x)
            elif edge > 0:
                shape = list(x.shape)
                shape[axis] = edge
                parts.append(np.full(shape, value, dtype=x.dtype))
        padded = np.concatenate(parts, axis=axis) if len(parts) > 1 else parts[0]
        # Crop on the padded axis with explicit bounds: a negative stop would wrap around.
        start = max(-lo, 0)
        stop = max(padded.shape[axis] - max(-hi, 0), start)
        index = [slice(None)] * x.ndim
        index[axis] = slice(start, stop)
        x = padded[tuple(index)]
    return x


def total_order_key(x: np.ndarray, dtype: Any) -> np.ndarray:
    """int64 keys ordering floats as -NaN < -inf < ... < -0 < +0 < ... < inf < NaN (IEEE totalOrder)."""
    if dtype_kind(dtype) == "u":  # flip the top bit so that uint64 values above 2**63 stay ordered
        return (x.astype(np.uint64) ^ np.uint64(1 << 63)).view(np.int64)
    if dtype_kind(dtype) != "f":
        return x.astype(np.int64)
    bits = np.asarray(x).astype(np.float64, order="C").view(np.int64)  # keeps rank 0
    return bits ^ ((bits >> 63) & np.int64(0x7FFFFFFFFFFFFFFF))


def ref_unary(fn: Callable[[np.ndarray], np.ndarray]) -> Rule:
    """The reference rule ``fn(x)`` of a one-operand primitive without parameters."""
    return lambda ctx, x, **_: fn(x)


def ref_binary(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Rule:
    """The reference rule ``fn(x, y)`` of a two-operand primitive without parameters."""
    return lambda ctx, x, y, **_: fn(x, y)
