"""xlaprobe's shape primitives, one record each (`xlaprobe.lax_rules.record.PrimitiveDef`):
``broadcast_in_dim``, ``reshape``, ``transpose``, ``rev``, ``squeeze``, ``slice``, ``pad``,
``concatenate``, ``split`` and ``iota``, which the fuzzer generates, and ``stack``, ``unstack``,
``tile``, ``empty`` and ``zeros_like``, which it does not. Each record holds the primitive's facts
(how it only moves data: `xlaprobe.lax_rules.facts.Movement`), its float64 reference rule (the
StableHLO semantics in NumPy; they never round) and its fuzzer rule.

`DEFINITIONS` keeps the fuzzer's catalogue order: the generator draws a rule by its position in
`xlaprobe.sources.ops.RULES`. The generator rules' domains are explained in
`xlaprobe.sources.ops`.

Source: StableHLO specification (https://openxla.org/stablehlo/spec: broadcast_in_dim, reshape,
transpose, reverse, slice, pad, concatenate, iota) and XLA operation semantics
(https://openxla.org/xla/operation_semantics).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from jax import lax

from xlaprobe.lax_rules.facts import Movement, PrimitiveFacts
from xlaprobe.lax_rules.numeric import Rule, RuleContext, carrier, pad_general
from xlaprobe.lax_rules.opspec import (ALL, ANY, MAX_ELEMENTS, NUMERIC, Aval, Context, Operand,
                                       OpRule, Sample, call, choice, crop_ok, dtype_of, is_float,
                                       mantissa_bits, structural_bounds, subset)
from xlaprobe.lax_rules.record import PrimitiveDef

__all__ = ["DEFINITIONS", "slice_params"]

# =============================================================================================
# reference rules (float64 NumPy)


def _broadcast_in_dim(ctx: RuleContext, x: np.ndarray, *dyn: Any, shape: Sequence[int],
                      broadcast_dimensions: Sequence[int], **_: Any) -> np.ndarray:
    expanded = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        expanded[d] = x.shape[i]
    return np.broadcast_to(x.reshape(expanded), tuple(shape))


def _reshape(ctx: RuleContext, x: np.ndarray, *dyn: Any, new_sizes: Sequence[int],
             dimensions: Sequence[int] | None = None, **_: Any) -> np.ndarray:
    if dimensions is not None:
        x = np.transpose(x, dimensions)
    return x.reshape(tuple(new_sizes))


def _slice(ctx: RuleContext, x: np.ndarray, *, start_indices: Sequence[int], limit_indices: Sequence[int],
           strides: Sequence[int] | None = None, **_: Any) -> np.ndarray:
    strides = strides or (1,) * x.ndim
    return x[tuple(slice(s, e, st) for s, e, st in zip(start_indices, limit_indices, strides))]


def _pad(ctx: RuleContext, x: np.ndarray, value: np.ndarray, *, padding_config: Any, **_: Any) -> np.ndarray:
    return pad_general(x, value, padding_config)


def _iota(ctx: RuleContext, *dyn: Any, dtype: Any, shape: Sequence[int], dimension: int,
          **_: Any) -> np.ndarray:
    expanded = [1] * len(shape)
    expanded[dimension] = shape[dimension]
    values = np.arange(shape[dimension]).astype(carrier(dtype))
    return np.broadcast_to(values.reshape(expanded), tuple(shape))


def _split(ctx: RuleContext, x: np.ndarray, *, sizes: Sequence[int], axis: int, **_: Any) -> list[np.ndarray]:
    return np.split(x, np.cumsum([int(s) for s in sizes])[:-1], axis=axis)


def _unstack(ctx: RuleContext, x: np.ndarray, *, axis: int, **_: Any) -> list[np.ndarray]:
    return [np.take(x, i, axis=axis) for i in range(x.shape[axis])]


def _empty(ctx: RuleContext, *, shape: Sequence[int], dtype: Any, **_: Any) -> np.ndarray:
    return np.zeros(tuple(shape), carrier(dtype))


def _zeros_like(ctx: RuleContext, x: np.ndarray, **_: Any) -> np.ndarray:
    return np.zeros(ctx.out_shapes[0], carrier(ctx.out_dtype))


# =============================================================================================
# generator rules


def _broadcast_sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
    out: list[int] = []
    dims: list[int] = []
    for d in aval.shape:
        while rng.random() < 0.3:
            out.append(int(rng.integers(1, 5)))
        dims.append(len(out))
        out.append(d if d != 1 or rng.random() < 0.5 else int(rng.integers(2, 5)))
    while rng.random() < 0.4 or len(out) == aval.ndim and tuple(out) == aval.shape:
        out.append(int(rng.integers(1, 5)))
    if math.prod(out) > MAX_ELEMENTS:
        return None
    return Sample((Operand(aval),), {"shape": tuple(out), "broadcast_dimensions": tuple(dims)})


def _factor(rng: np.random.Generator, size: int) -> tuple[int, ...]:
    dims = []
    rest = size
    while rest > 1 and len(dims) < 3:
        divisors = [d for d in range(2, rest + 1) if rest % d == 0]
        d = int(choice(rng, divisors))
        dims.append(d)
        rest //= d
    if rest > 1:
        dims.append(rest)
    while rng.random() < 0.2:
        dims.insert(int(rng.integers(len(dims) + 1)), 1)
    return tuple(int(d) for d in rng.permutation(dims)) if dims else ()


def _reshape_sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
    for _ in range(5):
        shape = _factor(rng, aval.size)
        if shape != aval.shape:
            return Sample((Operand(aval),), {"new_sizes": shape})
    return None


def _transpose_sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
    perm = tuple(int(i) for i in rng.permutation(aval.ndim))
    if perm == tuple(range(aval.ndim)):
        perm = perm[1:] + perm[:1]
    return Sample((Operand(aval),), {"permutation": perm})


def _rev_sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
    return Sample((Operand(aval),), {"dimensions": subset(rng, aval.ndim)})


def _squeeze_sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
    ones = [i for i, d in enumerate(aval.shape) if d == 1]
    if not ones:  # ask for the same value with a unit dimension inserted
        at = int(rng.integers(aval.ndim + 1))
        operand = aval.with_shape(aval.shape[:at] + (1,) + aval.shape[at:])
        return Sample((Operand(operand),), {"dimensions": (at,)})
    return Sample((Operand(aval),), {"dimensions": tuple(i for i in ones if rng.random() < 0.7)
                                     or (ones[0],)})


def slice_params(rng: np.random.Generator, shape: Sequence[int], out: Sequence[int] | None = None,
                 strides: bool = True) -> dict[str, Any]:
    """Parameters of a ``lax.slice`` of an array of `shape`: `out` gives the result's shape
    (unit strides), else sizes and strides (when `strides`) are drawn."""
    start, limit, step = [], [], []
    for k, d in enumerate(shape):
        s = int(choice(rng, [1, 1, 1, 2, 3])) if strides else 1
        if out is not None:
            n = out[k]
            s = 1
        else:
            n = int(rng.integers(1, d + 1))
            n = max(1, min(n, (d - 1) // s + 1))
        first = int(rng.integers(0, d - (n - 1) * s))
        start.append(first)
        limit.append(first + (n - 1) * s + 1)
        step.append(s)
    return {"start_indices": tuple(start), "limit_indices": tuple(limit),
            "strides": tuple(step) if any(x != 1 for x in step) else None}


def _slice_sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
    params = slice_params(rng, aval.shape)
    if params["start_indices"] == (0,) * aval.ndim and params["limit_indices"] == aval.shape \
            and params["strides"] is None:
        return None
    return Sample((Operand(aval),), params)


def _slice_build(x: Any, *, start_indices: Any, limit_indices: Any, strides: Any = None) -> Any:
    return lax.slice(x, start_indices, limit_indices, strides)


def _pad_sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
    config = []
    for d in aval.shape:
        interior = int(choice(rng, [0, 0, 0, 1, 2]))
        full = d + max(d - 1, 0) * interior
        for _ in range(10):
            lo, hi = (int(x) for x in rng.integers(-3, 4, 2))
            if full + lo + hi >= 1 and crop_ok(full, lo, hi):
                break
        else:
            lo = hi = 0
        config.append((lo, hi, interior))
    out = [d + max(d - 1, 0) * i + lo + hi for d, (lo, hi, i) in zip(aval.shape, config)]
    if math.prod(out) > MAX_ELEMENTS or all(c == (0, 0, 0) for c in config):
        return None
    scalar = Aval((), aval.dtype)
    value = (Operand(scalar, const=ctx.constant(scalar, ANY, rng)) if rng.random() < 0.7
             else Operand(scalar))
    return Sample((Operand(aval), value), {"padding_config": tuple(config)})


def _concatenate_sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
    dim = int(rng.integers(aval.ndim))
    operands = [Operand(aval)]
    for _ in range(int(rng.integers(1, 3))):
        shape = list(aval.shape)
        shape[dim] = int(choice(rng, [aval.shape[dim], int(rng.integers(1, 5))]))
        operands.append(Operand(aval.with_shape(shape)))
    return Sample(tuple(operands), {"dimension": dim})


def _split_sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
    axes = [i for i, d in enumerate(aval.shape) if d >= 2]
    if not axes:
        return None
    axis = int(choice(rng, axes))
    size = aval.shape[axis]
    cuts = sorted({int(c) for c in rng.integers(1, size, int(rng.integers(1, 3)))})
    sizes = tuple(b - a for a, b in zip([0] + cuts, cuts + [size]))
    return Sample((Operand(aval),), {"sizes": sizes, "axis": axis})


def _iota_sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
    shape = aval.shape if aval.ndim else (int(rng.integers(1, 9)),)
    return Sample((), {"dtype": aval.dtype, "shape": shape, "dimension": int(rng.integers(len(shape)))})


def _iota_exact(avals: Sequence[Aval], params: dict[str, Any]) -> bool:
    dtype = dtype_of(params["dtype"])
    return not is_float(dtype) or max(params["shape"]) <= 2 ** mantissa_bits(dtype)


# =============================================================================================
# the records


def _moves(name: str, movement: Movement, reference: Rule,
           generator: OpRule | None = None) -> PrimitiveDef:
    """A primitive that only moves its operand's elements (`movement` says how)."""
    return PrimitiveDef(PrimitiveFacts(name, movement=movement), reference, generator)


def _shape(name: str, arity: int, sample: Any, build: Any, **fields: Any) -> OpRule:
    """The fuzzer rule of a shape op of any dtype whose result is exact and lies within its
    operands' bounds (zero included: pad values)."""
    dtypes = fields.pop("dtypes", ALL)
    fields.setdefault("exact_result", True)
    fields.setdefault("bounds", structural_bounds)
    return OpRule(name, "shape", arity, dtypes, sample, build, **fields)


#: Every shape primitive's record, in the fuzzer's catalogue order (module docstring).
DEFINITIONS: tuple[PrimitiveDef, ...] = (
    _moves("broadcast_in_dim", Movement.BROADCAST, _broadcast_in_dim, _shape(
        "broadcast_in_dim", 1, _broadcast_sample,
        lambda x, *, shape, broadcast_dimensions: lax.broadcast_in_dim(x, shape,
                                                                       broadcast_dimensions))),
    _moves("reshape", Movement.RESHAPE, _reshape, _shape(
        "reshape", 1, _reshape_sample,
        lambda x, *, new_sizes: lax.reshape(x, new_sizes))),
    _moves("transpose", Movement.PERMUTE,
           lambda ctx, x, *, permutation, **_: np.transpose(x, permutation),
           _shape("transpose", 1, _transpose_sample, call(lax.transpose), min_rank=2)),
    _moves("rev", Movement.PERMUTE,
           lambda ctx, x, *, dimensions, **_: np.flip(x, tuple(dimensions)) if dimensions else x,
           _shape("rev", 1, _rev_sample, call(lax.rev), min_rank=1)),
    _moves("squeeze", Movement.RESHAPE,
           lambda ctx, x, *, dimensions, **_: np.squeeze(x, tuple(dimensions)),
           _shape("squeeze", 1, _squeeze_sample, call(lax.squeeze), weight=0.5)),
    _moves("slice", Movement.GATHER, _slice,
           _shape("slice", 1, _slice_sample, _slice_build, min_rank=1)),
    _moves("pad", Movement.GATHER, _pad, _shape(
        "pad", 2, _pad_sample, call(lax.pad), min_rank=1, weight=1.5,
        notes=("negative (cropping) and interior padding; crops stay within the data until "
               "the reference's pad is fixed (see _crop_ok)",))),
    _moves("concatenate", Movement.GATHER,
           lambda ctx, *xs, dimension, **_: np.concatenate(xs, axis=dimension), _shape(
               "concatenate", -1, _concatenate_sample,
               lambda *xs, dimension: lax.concatenate(xs, dimension), min_rank=1,
               notes=("often concatenates a value with itself (several consumers)",))),
    _moves("split", Movement.GATHER, _split,
           _shape("split", 1, _split_sample, call(lax.split), min_rank=1, weight=0.5)),
    _moves("iota", Movement.NONE, _iota, _shape(
        "iota", 0, _iota_sample,
        lambda *, dtype, shape, dimension: lax.broadcasted_iota(dtype, shape, dimension),
        dtypes=NUMERIC, exact_result=_iota_exact, bounds=None, weight=0.5,
        notes=("floating iotas beyond 2**mantissa bits are rounded (then inexact)",))),
    # not generated
    _moves("stack", Movement.GATHER, lambda ctx, *xs, axis, **_: np.stack(xs, axis=axis)),
    _moves("unstack", Movement.GATHER, _unstack),
    _moves("tile", Movement.GATHER, lambda ctx, x, *, reps, **_: np.tile(x, tuple(reps))),
    _moves("empty", Movement.NONE, _empty),
    _moves("zeros_like", Movement.NONE, _zeros_like),
)
