"""xlaprobe's indexing primitives, one record each (`xlaprobe.lax_rules.record.PrimitiveDef`):
``dynamic_slice``, ``dynamic_update_slice``, ``gather`` and the scatters (``scatter`` and
``scatter-add``, ``-sub``, ``-mul``, ``-min``, ``-max``), each with its facts, its float64
reference rule and its fuzzer rule side by side.

The reference rules follow StableHLO's gather and scatter with batching dimensions (the index
vector dimension is the last); XLA clamps dynamic start indices and gather starts, and drops a
scatter's out-of-bounds windows whole. A floating scatter-add, -sub or -mul rounds each combine
in XLA:CPU's order in native mode (`_scatter_rounding`). The generator rules' index domains
(unique, in-bounds or not) are explained in `xlaprobe.sources.ops`.

`DEFINITIONS` keeps the fuzzer's catalogue order: the generator draws a rule by its position in
`xlaprobe.sources.ops.RULES`.

Source: StableHLO specification (https://openxla.org/stablehlo/spec: dynamic_slice,
dynamic_update_slice, gather, scatter) and XLA operation semantics
(https://openxla.org/xla/operation_semantics); out-of-bounds behaviour as measured on XLA:CPU
(jaxlib 0.10.2 and 0.12).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import ml_dtypes
import numpy as np
from jax import lax
from jax.lax import GatherScatterMode

from xlaprobe.lax_rules.budget import SAMPLED
from xlaprobe.lax_rules.facts import Movement, PrimitiveFacts
from xlaprobe.lax_rules.numeric import (Rule, RuleContext, dtype_kind, flushed_in_some_order, fmax,
                                        fmin, rounded, small_factors)
from xlaprobe.lax_rules.opspec import (ALL, ANY, INDEX_DTYPES, NUMERIC, Aval, Context, Domain,
                                       Operand, OpRule, Sample, call, choice, dtype_of,
                                       factor_domain, hull, int_exact, int_range,
                                       structural_bounds)
from xlaprobe.lax_rules.record import PrimitiveDef

__all__ = ["DEFINITIONS"]

# =============================================================================================
# reference rules (float64 NumPy)


def _clamped_starts(shape: Sequence[int], sizes: Sequence[int], starts: Sequence[Any]) -> list[int]:
    """XLA clamps dynamic start indices (of any integer dtype) so that the slice fits."""
    return [min(max(int(s), 0), dim - size) for s, dim, size in zip(starts, shape, sizes)]


def _dynamic_slice(ctx: RuleContext, x: np.ndarray, *starts: np.ndarray, slice_sizes: Sequence[int],
                   **_: Any) -> np.ndarray:
    begin = _clamped_starts(x.shape, slice_sizes, starts[:x.ndim])
    return x[tuple(slice(b, b + n) for b, n in zip(begin, slice_sizes))]


def _dynamic_update_slice(ctx: RuleContext, x: np.ndarray, update: np.ndarray, *starts: np.ndarray,
                          **_: Any) -> np.ndarray:
    begin = _clamped_starts(x.shape, update.shape, starts)
    out = np.array(x, copy=True)
    out[tuple(slice(b, b + n) for b, n in zip(begin, update.shape))] = update
    return out


def _as_index(indices: np.ndarray) -> np.ndarray:
    """Indices of any integer dtype as int64 (uint8 200 stays 200: XLA bound checks are not done in
    the narrow index dtype)."""
    if dtype_kind(indices.dtype) == "u" and indices.dtype.itemsize == 8:
        indices = np.minimum(indices, np.uint64(2**62))
    return indices.astype(np.int64)


def _batch_coordinate(batch_shape: Sequence[int], dim: int) -> np.ndarray:
    shape = [1] * len(batch_shape)
    shape[dim] = batch_shape[dim]
    return np.broadcast_to(np.arange(batch_shape[dim]).reshape(shape), tuple(batch_shape))


def _placed(a: np.ndarray, ndim: int, positions: Sequence[int]) -> np.ndarray:
    """`a`, of the indices' batch shape, reshaped to rank `ndim` with its axes at `positions` (the
    batch dimensions of a gather's result or a scatter's updates) and 1 elsewhere."""
    a = np.asarray(a)
    shape = [1] * ndim
    for pos, size in zip(positions, a.shape):
        shape[pos] = size
    return a.reshape(shape)


def _gather_fill(dtype: Any) -> Any:
    kind = dtype_kind(dtype)
    if kind in "fc":
        return np.nan
    if kind == "i":
        return np.iinfo(dtype).min
    if kind == "u":
        return np.iinfo(dtype).max
    return True


def _gather(ctx: RuleContext, operand: np.ndarray, indices: np.ndarray, *, dimension_numbers: Any,
            slice_sizes: Sequence[int], mode: Any, fill_value: Any = None, **_: Any) -> np.ndarray:
    dn = dimension_numbers
    mode = GatherScatterMode.from_any(mode)
    out_shape = ctx.out_shapes[0]
    idx = _as_index(indices)
    batch_shape = idx.shape[:-1]
    offset_dims = tuple(dn.offset_dims)
    batch_out = [d for d in range(len(out_shape)) if d not in offset_dims]
    offset_operand = [d for d in range(operand.ndim)
                      if d not in dn.collapsed_slice_dims and d not in dn.operand_batching_dims]

    def place(a: np.ndarray) -> np.ndarray:
        return _placed(a, len(out_shape), batch_out)

    starts: dict[int, np.ndarray] = {}
    in_bounds = np.ones(batch_shape, bool)
    for k, d in enumerate(dn.start_index_map):
        upper = operand.shape[d] - slice_sizes[d]
        s = idx[..., k]
        in_bounds &= (s >= 0) & (s <= upper)
        starts[d] = np.clip(s, 0, upper)  # XLA gather clamps (CLIP and PROMISE_IN_BOUNDS)
    for d, idim in zip(dn.operand_batching_dims, dn.start_indices_batching_dims):
        starts[d] = _batch_coordinate(batch_shape, idim)
    index_arrays = []
    for d in range(operand.ndim):
        a = place(starts[d]) if d in starts else np.zeros((1,) * len(out_shape), np.int64)
        if d in offset_operand:
            shape = [1] * len(out_shape)
            shape[offset_dims[offset_operand.index(d)]] = slice_sizes[d]
            a = a + np.arange(slice_sizes[d]).reshape(shape)
        index_arrays.append(np.broadcast_to(a, out_shape))
    out = operand[tuple(index_arrays)]
    if mode == GatherScatterMode.FILL_OR_DROP:
        fill = _gather_fill(ctx.out_dtype) if fill_value is None else fill_value
        out = np.where(np.broadcast_to(place(in_bounds), out_shape), out,
                       np.asarray(fill).astype(out.dtype))
    return out


def _scatter_targets(operand: np.ndarray, indices: np.ndarray, updates: np.ndarray, dn: Any,
                     mode: Any) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """Operand index tuples and the mask of updates that land (whole out-of-bounds windows drop)."""
    mode = GatherScatterMode.from_any(mode)
    idx = _as_index(indices)
    batch_shape = idx.shape[:-1]
    window_dims = tuple(dn.update_window_dims)
    scatter_dims = [d for d in range(updates.ndim) if d not in window_dims]
    window_operand = [d for d in range(operand.ndim)
                      if d not in dn.inserted_window_dims and d not in dn.operand_batching_dims]
    window_size = {d: updates.shape[u] for d, u in zip(window_operand, window_dims)}

    def place(a: np.ndarray) -> np.ndarray:
        return _placed(a, updates.ndim, scatter_dims)

    starts: dict[int, np.ndarray] = {}
    valid = np.ones(batch_shape, bool)
    for k, d in enumerate(dn.scatter_dims_to_operand_dims):
        upper = operand.shape[d] - window_size.get(d, 1)
        s = idx[..., k]
        if mode == GatherScatterMode.CLIP:
            s = np.clip(s, 0, upper)
        else:
            valid &= (s >= 0) & (s <= upper)
        starts[d] = s
    for d, idim in zip(dn.operand_batching_dims, dn.scatter_indices_batching_dims):
        starts[d] = _batch_coordinate(batch_shape, idim)
    index_arrays = []
    for d in range(operand.ndim):
        a = place(starts[d]) if d in starts else np.zeros((1,) * updates.ndim, np.int64)
        if d in window_size:
            shape = [1] * updates.ndim
            shape[window_dims[window_operand.index(d)]] = window_size[d]
            a = a + np.arange(window_size[d]).reshape(shape)
        index_arrays.append(np.broadcast_to(a, updates.shape))
    mask = np.broadcast_to(place(valid), updates.shape)
    return tuple(a[mask] for a in index_arrays), mask


def _scatter_named(ufunc: np.ufunc | None) -> Rule:
    def rule(ctx: RuleContext, operand: np.ndarray, indices: np.ndarray, updates: np.ndarray, *,
             dimension_numbers: Any, mode: Any, update_jaxpr: Any = None, update_consts: Any = (),
             **_: Any) -> np.ndarray:
        targets, mask = _scatter_targets(operand, indices, updates, dimension_numbers, mode)
        values = updates[mask]
        if ufunc is None and update_jaxpr is not None:
            return _scatter_apply(ctx, operand, targets, values, update_jaxpr, update_consts)
        if ufunc in _ROUNDING_COMBINERS and dtype_kind(ctx.out_dtype) == "f":
            return _scatter_rounding(ctx, operand, targets, values, ufunc)
        out = np.array(operand, copy=True, order="C")  # `_apply_at_rounds` writes a flat view
        if ufunc is None:
            out[targets] = values  # duplicate indices: XLA leaves the winner unspecified
        elif ufunc is np.maximum and dtype_kind(ctx.out_dtype) == "f":
            _apply_at_rounds(out, targets, values, fmax)
        elif ufunc is np.minimum and dtype_kind(ctx.out_dtype) == "f":
            _apply_at_rounds(out, targets, values, fmin)
        else:
            ufunc.at(out, targets, values.astype(out.dtype))
        return out
    return rule


#: Scatter combiners that round. XLA:CPU applies a scatter's updates one at a time, in the order
#: of the updates (the operand's value first), each combine rounded to the output dtype -- also
#: float16 and bfloat16, whose scatter-add does not accumulate in float32 (measured on jaxlib
#: 0.12.0.1: bfloat16 256 plus eight ones is 256; float32 scatter-adds of 64 updates of mixed
#: magnitude onto 3 elements equal the sequential sum bit for bit, not the reversed one).
_ROUNDING_COMBINERS = (np.add, np.subtract, np.multiply)


def _scatter_rounding(ctx: RuleContext, operand: np.ndarray, targets: tuple[np.ndarray, ...],
                      values: np.ndarray, ufunc: np.ufunc) -> np.ndarray:
    """A floating scatter-add, -sub or -mul. float64 mode: exact enough, in float64. Native
    modes: XLA:CPU's order (`_ROUNDING_COMBINERS`), each combine rounded to the output dtype and,
    in ``reference:ftz``, flushed, so that a product flushed to zero part way (-0.998 x 1.1755e-38
    -> 0, then x 1.49 -> -0) shows as XLA:CPU computes it. Monte Carlo samples: the float64 result
    moved by a random share of the bound on every order's error (`_any_order_error`), so that
    the oracle's budget covers any order XLA might choose, cancellation included."""
    out = np.array(operand, np.float64, copy=True, order="C")
    if not ctx.native or ctx.rng is not None:
        ufunc.at(out, targets, values)
        if ctx.rng is None:
            return out
        return out + _any_order_error(ctx.rng, operand, targets, values, ufunc, out,
                                      ctx.out_dtype)
    dtype, flush = ctx.out_dtype, ctx.flush
    _apply_at_rounds(out, targets, values, lambda a, b: rounded(ufunc(a, b), dtype, flush))
    if flush and ufunc is np.multiply:
        smallest = small_factors(operand)
        np.multiply.at(smallest, targets, small_factors(values))
        return flushed_in_some_order(out, smallest, dtype)
    return out


def _any_order_error(rng: np.random.Generator, operand: np.ndarray,
                     targets: tuple[np.ndarray, ...], values: np.ndarray, ufunc: np.ufunc,
                     exact: np.ndarray, dtype: Any) -> np.ndarray:
    """A Monte Carlo sample of the error of a scatter's combines in any order, per element.

    With k updates landing on an element, recursive summation in any order is off by at most
    about ``k * u * sum|terms|`` (u the unit roundoff of the output dtype, the terms the
    operand's value and the updates; Higham, "Accuracy and Stability of Numerical Algorithms",
    2nd ed., section 4.2), which covers catastrophic cancellation (float16 0 - 65504 + 3.03 +
    65504 is 0 in XLA's order and 3.03 in float64); a product of k factors in any order is off by
    at most ``k * u * |product|`` (section 3.1). The sample is a random sign times a share of that
    bound in `SAMPLED`, so the oracle (4x the largest honest error) allows one to
    two bounds, and everything downstream sees it.

    Returns:
        float64 array of the operand's shape (units of the value).
    """
    shape = np.shape(operand)
    flat = _flat_targets(targets, shape, values.size)
    counts = np.bincount(flat, minlength=max(math.prod(shape), 1)).reshape(shape)
    if ufunc is np.multiply:
        scale = np.abs(exact)
    else:
        scale = np.abs(np.asarray(operand, np.float64)).copy()
        np.add.at(scale, targets, np.abs(values))
    roundoff = float(ml_dtypes.finfo(dtype).eps) / 2
    share = rng.uniform(*SAMPLED, shape) * rng.choice([-1.0, 1.0], shape)
    return counts * roundoff * scale * share


def _flat_targets(targets: tuple[np.ndarray, ...], shape: tuple[int, ...], size: int) -> np.ndarray:
    """The flat operand index of each scatter update (zeros for a 0-d operand)."""
    if not shape:
        return np.zeros(size, np.int64)
    return np.ravel_multi_index(targets, shape).ravel()


def _apply_at_rounds(out: np.ndarray, targets: tuple[np.ndarray, ...], values: np.ndarray,
                     combine: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> None:
    """out[t] = combine(out[t], v) for each update in order; duplicates go in successive rounds
    (round r applies the r-th update of every element, vectorized). `out` must be C-contiguous:
    a copy with NumPy's default order keeps a transposed or broadcast operand's strides, its
    flat reshape is then a copy, and every update was lost (campaign seeds 52001359 and
    52001844: scatter-max onto a transpose and a broadcast, flagged although XLA was right)."""
    if not values.size:
        return
    if not out.flags.c_contiguous:
        raise ValueError("scatter rounds need a C-contiguous operand copy")
    flat = _flat_targets(targets, out.shape, values.size)
    view = out.reshape(-1)
    by_target = np.argsort(flat, kind="stable")
    sorted_flat = flat[by_target]
    first = np.r_[True, sorted_flat[1:] != sorted_flat[:-1]]
    group_start = np.maximum.accumulate(np.where(first, np.arange(flat.size), 0))
    rank = np.empty(flat.size, np.int64)
    rank[by_target] = np.arange(flat.size) - group_start
    by_round = np.argsort(rank, kind="stable")
    edges = np.searchsorted(rank[by_round], np.arange(int(rank.max()) + 2))
    for r in range(int(rank.max()) + 1):
        chosen = by_round[edges[r]:edges[r + 1]]
        view[flat[chosen]] = combine(view[flat[chosen]], values[chosen])


def _scatter_apply(ctx: RuleContext, operand: np.ndarray, targets: tuple[np.ndarray, ...],
                   values: np.ndarray, update_jaxpr: Any, update_consts: Any) -> np.ndarray:
    out = np.array(operand, copy=True, order="C")
    _apply_at_rounds(out, targets, values,
                     lambda a, b: ctx.eval(update_jaxpr, [a, b], update_consts)[0])
    return out


# =============================================================================================
# generator rules


def _index_dtype(rng: np.random.Generator, x64: bool = False) -> np.dtype:
    names = INDEX_DTYPES + (("int64",) if x64 else ())
    weights = [3, 3, 2, 2, 3, 1] + ([1] if x64 else [])
    return dtype_of(choice(rng, names, weights))


def _start_operands(rng: np.random.Generator, shape: Sequence[int], sizes: Sequence[int],
                    ctx: Context) -> tuple[list[Operand], np.dtype]:
    dtype = _index_dtype(rng, getattr(ctx, "x64", False))
    lo_t, hi_t = int_range(dtype)
    operands = []
    for d, n in zip(shape, sizes):
        # Starts around the valid range: clamped by the op when out of bounds.
        domain = Domain("start index", lo=max(lo_t, -d - 2), hi=min(hi_t, d + 2), specials=False)
        if rng.random() < 0.4:
            value = int(rng.integers(max(lo_t, 0), min(hi_t, max(d - n, 0)) + 1))
            operands.append(Operand(Aval((), dtype), domain, const=np.asarray(value, dtype)))
        else:
            operands.append(Operand(Aval((), dtype), domain))
    return operands, dtype


def _dynamic_slice_sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
    sizes = tuple(int(rng.integers(1, d + 1)) for d in aval.shape)
    starts, _ = _start_operands(rng, aval.shape, sizes, ctx)
    return Sample((Operand(aval), *starts), {"slice_sizes": sizes,
                                             "allow_negative_indices": bool(rng.random() < 0.5)})


def _dynamic_slice_build(x: Any, *starts: Any, slice_sizes: Any, allow_negative_indices: bool) -> Any:
    return lax.dynamic_slice(x, starts, slice_sizes, allow_negative_indices=allow_negative_indices)


def _dynamic_update_slice_sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
    sizes = tuple(int(rng.integers(1, d + 1)) for d in aval.shape)
    update = Aval(sizes, aval.dtype)
    # In-place update of a slice of itself (a buffer-aliasing hazard for fusion) half the time.
    operand = Operand(update, slice_of=0) if rng.random() < 0.7 else Operand(update)
    starts, _ = _start_operands(rng, aval.shape, sizes, ctx)
    return Sample((Operand(aval), operand, *starts),
                  {"allow_negative_indices": bool(rng.random() < 0.5)})


def _dynamic_update_slice_build(x: Any, update: Any, *starts: Any, allow_negative_indices: bool) -> Any:
    return lax.dynamic_update_slice(x, update, starts, allow_negative_indices=allow_negative_indices)


_MODES = (lax.GatherScatterMode.CLIP, lax.GatherScatterMode.FILL_OR_DROP,
          lax.GatherScatterMode.PROMISE_IN_BOUNDS)


def _index_domain(dim: int, dtype: np.dtype, *, oob: bool, unique: bool) -> Domain:
    lo_t, hi_t = int_range(dtype)
    return Domain("index", lo=0, hi=min(dim - 1, hi_t), specials=False, oob=oob, unique=unique)


def _gather_form(rng: np.random.Generator, aval: Aval, form: str, k: int,
                 dtype: np.dtype) -> tuple[Aval, dict[str, Any], Aval, int]:
    """(indices aval, dimension numbers and slice sizes, updates/result aval, number of in-bounds
    start indices per coordinate) of one indexing form."""
    rest = aval.shape[1:]
    if form == "rows":  # x[idx] along axis 0
        idx = Aval((k, 1), dtype)
        dn = dict(offset_dims=tuple(range(1, aval.ndim)), collapsed_slice_dims=(0,),
                  start_index_map=(0,))
        return idx, dict(dn=dn, slice_sizes=(1,) + rest), aval.with_shape((k,) + rest), aval.shape[0]
    if form == "points":  # x[i, j, ...] for full index tuples
        idx = Aval((k, aval.ndim), dtype)
        dn = dict(offset_dims=(), collapsed_slice_dims=tuple(range(aval.ndim)),
                  start_index_map=tuple(range(aval.ndim)))
        return idx, dict(dn=dn, slice_sizes=(1,) * aval.ndim), aval.with_shape((k,)), min(aval.shape)
    # windows: slices of length w along axis 0 (they may overlap)
    w = int(rng.integers(1, aval.shape[0] + 1))
    idx = Aval((k, 1), dtype)
    dn = dict(offset_dims=tuple(range(1, aval.ndim + 1)), collapsed_slice_dims=(),
              start_index_map=(0,))
    # A window fits when it starts at most at dim - w (else clamped, dropped or undefined).
    return (idx, dict(dn=dn, slice_sizes=(w,) + rest), aval.with_shape((k, w) + rest),
            aval.shape[0] - w + 1)


def _gather_sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
    form = choice(rng, ["rows", "points", "windows"])
    mode = choice(rng, _MODES)
    dtype = _index_dtype(rng, getattr(ctx, "x64", False))
    k = int(rng.integers(1, 9))
    idx, spec, _, dim = _gather_form(rng, aval, form, k, dtype)
    in_bounds = mode is lax.GatherScatterMode.PROMISE_IN_BOUNDS
    if in_bounds or rng.random() < 0.6:
        # Out-of-bounds indices are implementation-defined under PROMISE_IN_BOUNDS.
        indices = Operand(idx, _index_domain(dim, dtype, oob=not in_bounds, unique=False))
    else:
        indices = Operand(idx)  # any values: clamped (CLIP) or dropped (FILL_OR_DROP)
    return Sample((Operand(aval), indices),
                  {"dimension_numbers": lax.GatherDimensionNumbers(**spec["dn"]),
                   "slice_sizes": spec["slice_sizes"], "mode": mode})


def _scatter_rule(name: str, fn: Callable[..., Any], dtypes: Sequence[str]) -> OpRule:
    combine = name != "scatter"

    def sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
        forms = ["rows", "points"] + (["windows"] if combine else [])
        form = choice(rng, forms)
        mode = choice(rng, _MODES)
        dtype = _index_dtype(rng, getattr(ctx, "x64", False))
        k = int(rng.integers(1, 9))
        if not combine:
            # Without a combiner, duplicate (or clamped) indices leave the order of updates
            # implementation-defined: unique in-bounds indices, out-of-bounds ones only dropped.
            k = min(k, min(aval.shape) if form == "points" else aval.shape[0])
        idx, spec, upd, dim = _gather_form(rng, aval, form, k, dtype)
        in_bounds = mode is not lax.GatherScatterMode.FILL_OR_DROP
        unique = not combine or rng.random() < 0.2
        if not combine or mode is lax.GatherScatterMode.PROMISE_IN_BOUNDS or rng.random() < 0.7:
            domain = _index_domain(dim, dtype, oob=not in_bounds and rng.random() < 0.5,
                                   unique=unique)
            indices = Operand(idx, domain, fresh=True)
        else:
            unique = False
            indices = Operand(idx)
        if form == "points" and unique:
            return None  # uniqueness of index tuples is not planned; use another form
        dn = lax.ScatterDimensionNumbers(
            update_window_dims=spec["dn"]["offset_dims"],
            inserted_window_dims=spec["dn"]["collapsed_slice_dims"],
            scatter_dims_to_operand_dims=spec["dn"]["start_index_map"])
        factors = factor_domain(aval.dtype) if name == "scatter-mul" else ANY
        return Sample((Operand(aval, factors), indices, Operand(upd, factors)),
                      {"dimension_numbers": dn, "mode": mode,
                       "unique_indices": bool(unique and form != "windows" and rng.random() < 0.5)})

    exact = True if name in ("scatter", "scatter-min", "scatter-max") else int_exact
    return OpRule(name, "scatter", 3, tuple(dtypes), sample, call(fn), exact_result=exact,
                  min_rank=1, weight=1.5, notes=(
                      "index dtypes uint8..int32 (narrow ones with long axes), all modes",
                      "scatter without combiner: unique in-bounds indices (the order of "
                      "duplicate updates is implementation-defined)"))


# =============================================================================================
# the records


def _record(name: str, reference: Rule, generator: OpRule, *,
            movement: Movement = Movement.NONE, accumulates: bool = False) -> PrimitiveDef:
    """An indexing primitive: it moves elements (`movement`), or it combines updates into them
    (a scatter with a combiner; `accumulates` when the combiner rounds)."""
    facts = PrimitiveFacts(name, rounding=accumulates, accumulates=accumulates, movement=movement)
    return PrimitiveDef(facts, reference, generator)


#: Every indexing primitive's record, in the fuzzer's catalogue order (module docstring).
DEFINITIONS: tuple[PrimitiveDef, ...] = (
    _record("dynamic_slice", _dynamic_slice, OpRule(
        "dynamic_slice", "index", -1, ALL, _dynamic_slice_sample, _dynamic_slice_build,
        exact_result=True, bounds=structural_bounds, min_rank=1,
        notes=("start indices of narrow dtypes, out of range (clamped), constant or computed",)),
        movement=Movement.GATHER),
    _record("dynamic_update_slice", _dynamic_update_slice, OpRule(
        "dynamic_update_slice", "index", -1, ALL, _dynamic_update_slice_sample,
        _dynamic_update_slice_build, exact_result=True, bounds=structural_bounds, min_rank=1,
        weight=3.0, notes=("most updates are slices of the operand itself",)),
        movement=Movement.GATHER),
    _record("gather", _gather, OpRule(
        "gather", "index", 2, ALL, _gather_sample, call(lax.gather), exact_result=True,
        bounds=lambda b, p: hull(b[:1], 0.0), min_rank=1,
        notes=("rows, points and windows; all modes; PROMISE_IN_BOUNDS only with in-range "
               "indices (else implementation-defined)",
               "FILL_OR_DROP fills NaN for floats")), movement=Movement.GATHER),
    _record("scatter", _scatter_named(None), _scatter_rule("scatter", lax.scatter, ALL),
            movement=Movement.GATHER),
    _record("scatter-add", _scatter_named(np.add),
            _scatter_rule("scatter-add", lax.scatter_add, NUMERIC), accumulates=True),
    _record("scatter-sub", _scatter_named(np.subtract),
            _scatter_rule("scatter-sub", lax.scatter_sub, NUMERIC), accumulates=True),
    _record("scatter-mul", _scatter_named(np.multiply),
            _scatter_rule("scatter-mul", lax.scatter_mul, NUMERIC), accumulates=True),
    _record("scatter-min", _scatter_named(np.minimum),
            _scatter_rule("scatter-min", lax.scatter_min, ALL)),
    _record("scatter-max", _scatter_named(np.maximum),
            _scatter_rule("scatter-max", lax.scatter_max, ALL)),
)
