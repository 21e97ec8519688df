"""xlaprobe's contractions and windowed reductions, one record each
(`xlaprobe.lax_rules.record.PrimitiveDef`): ``dot_general`` and ``conv_general_dilated``, the
windowed reductions ``reduce_window_sum``, ``reduce_window_max``, ``reduce_window_min`` and the
generic ``reduce_window`` (its combiner a jaxpr), and the windowed selections of max pooling's
derivatives, ``select_and_scatter_add`` and ``select_and_gather_add``. Each record holds the
primitive's facts (sums round and accumulate many terms in an order XLA chooses; max and min
windows and selections are exact), its float64 reference rule and its fuzzer rule (the two
selections have none: the fuzzer does not generate them).

The reference rules accumulate in `RuleContext.acc_dtype` (float64 by default; the program's
dtype in native mode, float32 for float16 and bfloat16); a convolution is one matmul per kernel
position over the dilated, padded (or cropped) input, and windows are strided views of the padded
input. The generator rules' parameters are explained in `xlaprobe.sources.ops`.

`DEFINITIONS` keeps the fuzzer's catalogue order (contractions, then windows; the selections,
never generated, last): the generator draws a rule by its position in `xlaprobe.sources.ops.RULES`.

Source: StableHLO specification (https://openxla.org/stablehlo/spec: dot_general, convolution,
reduce_window, select_and_scatter) and XLA operation semantics
(https://openxla.org/xla/operation_semantics: DotGeneral, ConvWithGeneralPadding, ReduceWindow,
SelectAndScatter).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np
from jax import lax

from xlaprobe.lax_rules.numeric import (Rule, RuleContext, dtype_kind, fmax, fmin, highest, lowest,
                                        pad_general)
from xlaprobe.lax_rules.opspec import (ALL, ANY, FLOATS, NUMERIC, PRODUCT, Aval, Context, Domain,
                                       Operand, OpRule, Sample, call, choice, crop_ok, dtype_of,
                                       factor_domain, int_exact, int_range, is_float)
from xlaprobe.lax_rules.record import PrimitiveDef, accumulating, plain

__all__ = ["DEFINITIONS"]

# =============================================================================================
# reference rules (float64 NumPy)

# ---------------------------------------------------------------------------------------------
# windows: reduce_window*, select_and_scatter_add, select_and_gather_add


def _window_views(x: np.ndarray, window_dimensions: Sequence[int], window_strides: Sequence[int],
                  window_dilation: Sequence[int] | None = None):
    """Yield one strided view per window position, each of the output's shape."""
    window_dilation = window_dilation or (1,) * x.ndim
    out_shape = []
    for n, w, s, d in zip(x.shape, window_dimensions, window_strides, window_dilation):
        span = (w - 1) * d + 1
        out_shape.append(0 if n < span else (n - span) // s + 1)
    for position in np.ndindex(*window_dimensions):
        index = tuple(slice(k * d, k * d + (o - 1) * s + 1, s) if o else slice(0, 0)
                      for k, d, o, s in zip(position, window_dilation, out_shape, window_strides))
        yield x[index]


def _window_input(x: np.ndarray, value: Any, padding: Sequence[tuple[int, int]],
                  base_dilation: Sequence[int] | None) -> np.ndarray:
    base_dilation = base_dilation or (1,) * x.ndim
    return pad_general(x, value, [(lo, hi, b - 1) for (lo, hi), b in zip(padding, base_dilation)])


def _reduce_window_named(kind: str) -> Rule:
    def rule(ctx: RuleContext, x: np.ndarray, *, window_dimensions: Sequence[int],
             window_strides: Sequence[int], padding: Sequence[tuple[int, int]],
             base_dilation: Sequence[int] | None = None,
             window_dilation: Sequence[int] | None = None, **_: Any) -> np.ndarray:
        dtype = ctx.in_dtypes[0]
        if kind == "sum":
            x = x.astype(ctx.acc_dtype()) if dtype_kind(dtype) == "f" else x
            init, combine = np.zeros((), x.dtype), np.add
        elif kind == "max":
            init, combine = lowest(dtype), (fmax if dtype_kind(dtype) == "f" else np.maximum)
        else:
            init, combine = highest(dtype), (fmin if dtype_kind(dtype) == "f" else np.minimum)
        padded = _window_input(x, init, padding, base_dilation)
        acc = None
        for view in _window_views(padded, window_dimensions, window_strides, window_dilation):
            acc = np.array(view, copy=True) if acc is None else combine(acc, view)
        return acc.astype(x.dtype, copy=False)
    return rule


def _reduce_window(ctx: RuleContext, *args: np.ndarray, jaxpr: Any, consts: Sequence[Any] = (),
                   window_dimensions: Sequence[int], window_strides: Sequence[int],
                   padding: Sequence[tuple[int, int]], base_dilation: Sequence[int] | None = None,
                   window_dilation: Sequence[int] | None = None, **_: Any) -> list[np.ndarray]:
    n = len(args) // 2
    operands, inits = args[:n], args[n:]
    views = [list(_window_views(_window_input(x, i, padding, base_dilation), window_dimensions,
                                window_strides, window_dilation)) for x, i in zip(operands, inits)]
    out_shape = views[0][0].shape
    acc = [np.broadcast_to(i, out_shape) for i in inits]
    for k in range(len(views[0])):
        acc = ctx.eval(jaxpr, acc + [v[k] for v in views], consts)
    return acc


_SELECT = {"ge": np.greater_equal, "gt": np.greater, "le": np.less_equal, "lt": np.less}


def _select_and_scatter_add(ctx: RuleContext, source: np.ndarray, operand: np.ndarray, *, select_prim: Any,
                            window_dimensions: Sequence[int], window_strides: Sequence[int],
                            padding: Sequence[tuple[int, int]], **_: Any) -> np.ndarray:
    """XLA SelectAndScatter with add: in each window, iterated in row-major order, keep the current
    choice while select(current, candidate) holds; padding is never selected."""
    select = _SELECT[select_prim.name]
    index = np.arange(operand.size, dtype=np.int64).reshape(operand.shape)
    value_views = _window_views(_window_input(operand, 0, padding, None), window_dimensions,
                                window_strides)
    index_views = _window_views(_window_input(index, -1, padding, None), window_dimensions,
                                window_strides)
    chosen_value = chosen_index = None
    for values, indices in zip(value_views, index_views):
        if chosen_index is None:
            chosen_value, chosen_index = np.array(values), np.array(indices)
            continue
        take = (indices >= 0) & ((chosen_index < 0) | ~select(chosen_value, values))
        chosen_value = np.where(take, values, chosen_value)
        chosen_index = np.where(take, indices, chosen_index)
    acc = ctx.acc_dtype() if dtype_kind(ctx.out_dtype) == "f" else source.dtype
    out = np.zeros(operand.size, acc)
    if chosen_index is not None:
        valid = chosen_index >= 0
        np.add.at(out, chosen_index[valid], source.astype(acc)[valid])
    return out.reshape(operand.shape)


def _select_and_gather_add(ctx: RuleContext, tangents: np.ndarray, operand: np.ndarray, *,
                           select_prim: Any, window_dimensions: Sequence[int],
                           window_strides: Sequence[int], padding: Sequence[tuple[int, int]],
                           base_dilation: Sequence[int] | None = None,
                           window_dilation: Sequence[int] | None = None, **_: Any) -> np.ndarray:
    """Per window, the tangent at the operand element that `select_prim` picks (first on ties)."""
    select = _SELECT[select_prim.name]
    init = -np.inf if select_prim.name in ("ge", "gt") else np.inf
    op_views = _window_views(_window_input(operand, init, padding, base_dilation),
                             window_dimensions, window_strides, window_dilation)
    t_views = _window_views(_window_input(tangents, 0, padding, base_dilation),
                            window_dimensions, window_strides, window_dilation)
    best = best_t = None
    for values, ts in zip(op_views, t_views):
        if best is None:
            best, best_t = np.array(values), np.array(ts)
            continue
        keep = select(best, values)
        best, best_t = np.where(keep, best, values), np.where(keep, best_t, ts)
    return best_t


# ---------------------------------------------------------------------------------------------
# dot_general and conv_general_dilated


def _finish_contraction(ctx: RuleContext, out: np.ndarray) -> np.ndarray:
    if dtype_kind(ctx.out_dtype) == "b":
        return out != 0
    if dtype_kind(ctx.out_dtype) in "iu":
        return out.astype(ctx.out_dtype)  # the wide product sum, wrapped to the output width
    return out


def _dot_general(ctx: RuleContext, lhs: np.ndarray, rhs: np.ndarray, *, dimension_numbers: Any,
                 **_: Any) -> np.ndarray:
    (lc, rc), (lb, rb) = dimension_numbers
    lc, rc, lb, rb = (tuple(int(d) for d in ds) for ds in (lc, rc, lb, rb))
    lfree = [d for d in range(lhs.ndim) if d not in lc and d not in lb]
    rfree = [d for d in range(rhs.ndim) if d not in rc and d not in rb]
    acc = ctx.acc_dtype()
    batch_shape = [lhs.shape[d] for d in lb]
    m_shape, n_shape = [lhs.shape[d] for d in lfree], [rhs.shape[d] for d in rfree]
    k = math.prod(lhs.shape[d] for d in lc)
    a = np.transpose(lhs, list(lb) + lfree + list(lc)).astype(acc)
    b = np.transpose(rhs, list(rb) + list(rc) + rfree).astype(acc)
    a = a.reshape((math.prod(batch_shape), math.prod(m_shape), k))
    b = b.reshape((math.prod(batch_shape), k, math.prod(n_shape)))
    out = np.matmul(a, b).reshape(tuple(batch_shape + m_shape + n_shape))
    return _finish_contraction(ctx, out)


def _conv_general_dilated(ctx: RuleContext, lhs: np.ndarray, rhs: np.ndarray, *, window_strides: Sequence[int],
                          padding: Sequence[tuple[int, int]], lhs_dilation: Sequence[int] | None,
                          rhs_dilation: Sequence[int] | None, dimension_numbers: Any,
                          feature_group_count: int, batch_group_count: int,
                          **_: Any) -> np.ndarray:
    """Direct convolution: one matmul per kernel position over a dilated, padded (or cropped) input."""
    nsp = lhs.ndim - 2
    if dimension_numbers is None:
        lhs_spec = rhs_spec = out_spec = tuple(range(lhs.ndim))
    else:
        lhs_spec, rhs_spec, out_spec = (tuple(s) for s in dimension_numbers)
    acc = ctx.acc_dtype()
    x = np.transpose(lhs, lhs_spec).astype(acc)  # N, C, spatial...
    w = np.transpose(rhs, rhs_spec).astype(acc)  # O, I, kernel spatial...
    lhs_dilation = lhs_dilation or (1,) * nsp
    rhs_dilation = rhs_dilation or (1,) * nsp
    x = pad_general(x, 0, [(0, 0, 0), (0, 0, 0)] +
                     [(lo, hi, d - 1) for (lo, hi), d in zip(padding, lhs_dilation)])
    n, c = x.shape[:2]
    o, i = w.shape[:2]
    g, bg = int(feature_group_count), int(batch_group_count)
    kernel = w.shape[2:]
    # XLA splits features (feature groups) or the batch (batch groups) into contiguous blocks.
    xg = x.reshape((bg, n // bg, g, c // g) + x.shape[2:])
    wg = w.reshape((bg, g, o // (bg * g), i) + kernel)
    out = None
    views = _window_views(xg, (1, 1, 1, 1) + kernel, (1, 1, 1, 1) + tuple(window_strides),
                          (1, 1, 1, 1) + tuple(rhs_dilation))
    for position, view in zip(np.ndindex(*kernel), views):
        sp_shape = view.shape[4:]
        # view: (bg, nb, g, ci, *sp) -> (bg, g, nb*sp, ci) @ (bg, g, ci, og) -> (bg, g, nb*sp, og)
        v = np.moveaxis(view, 3, -1)  # bg, nb, g, *sp, ci
        v = np.moveaxis(v, 2, 1)  # bg, g, nb, *sp, ci
        v = v.reshape(bg, g, -1, i)
        k = np.moveaxis(wg[(slice(None),) * 4 + position], 2, 3)  # bg, g, ci, og
        term = np.matmul(v, k).reshape((bg, g, n // bg) + sp_shape + (o // (bg * g),))
        out = term if out is None else out + term
    if out is None:  # no kernel positions: empty kernel
        sp_shape = next(_window_views(xg, (1, 1, 1, 1) + kernel, (1, 1, 1, 1) + tuple(window_strides),
                                      (1, 1, 1, 1) + tuple(rhs_dilation))).shape[4:]
        out = np.zeros((bg, g, n // bg) + sp_shape + (o // (bg * g),), acc)
    # (bg, g, nb, *sp, og) -> (nb, bg*g*og, *sp) in logical order, then to out_spec
    out = np.moveaxis(out, 2, 0)  # nb, bg, g, *sp, og
    out = np.moveaxis(out, -1, 3)  # nb, bg, g, og, *sp
    out = out.reshape((n // bg, o) + out.shape[4:])
    out = np.transpose(out, np.argsort(out_spec))
    return _finish_contraction(ctx, out)


# =============================================================================================
# generator rules


def _dot_sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
    dims = list(range(aval.ndim))
    batch = [d for d in dims if rng.random() < 0.25][: max(aval.ndim - 1, 0)]
    rest = [d for d in dims if d not in batch]
    if not rest:
        return None
    contract = [d for d in rest if rng.random() < 0.5] or [int(choice(rng, rest))]
    free_rhs = [int(rng.integers(1, 7)) for _ in range(int(rng.integers(0, 3)))]
    # rhs dims: batch dims first, then contracting and free dims in a random order.
    body = [("c", d) for d in contract] + [("f", n) for n in free_rhs]
    order = rng.permutation(len(body))
    rhs_shape = [aval.shape[d] for d in batch] + [
        aval.shape[body[i][1]] if body[i][0] == "c" else body[i][1] for i in order]
    rhs_contract = [len(batch) + int(np.where(order == k)[0][0]) for k in range(len(contract))]
    rhs_batch = list(range(len(batch)))
    dnums = ((tuple(contract), tuple(rhs_contract)), (tuple(batch), tuple(rhs_batch)))
    preferred = None
    if aval.dtype.name in ("float16", "bfloat16") and rng.random() < 0.5:
        preferred = dtype_of("float32")
    elif aval.dtype.name in ("int8", "uint8", "int16") and rng.random() < 0.5:
        preferred = dtype_of("int32")
    return Sample((Operand(aval), Operand(aval.with_shape(rhs_shape))),
                  {"dimension_numbers": dnums, "preferred_element_type": preferred})


def _conv_sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
    if aval.ndim not in (3, 4):
        return None
    nspatial = aval.ndim - 2
    lhs_spec = tuple(int(i) for i in rng.permutation(aval.ndim))  # (batch, feature, spatial...)
    batch, features = aval.shape[lhs_spec[0]], aval.shape[lhs_spec[1]]
    spatial = [aval.shape[d] for d in lhs_spec[2:]]
    groups = int(choice(rng, [g for g in (1, 2, 3) if features % g == 0]))
    batch_groups = 1
    if groups == 1 and rng.random() < 0.15:
        batch_groups = int(choice(rng, [g for g in (1, 2) if batch % g == 0]))
    out_features = groups * batch_groups * int(rng.integers(1, 4))
    window = [int(rng.integers(1, 4)) for _ in range(nspatial)]
    strides = [int(choice(rng, [1, 1, 2])) for _ in range(nspatial)]
    lhs_dil = [int(choice(rng, [1, 1, 2])) for _ in range(nspatial)]
    rhs_dil = [int(choice(rng, [1, 1, 2])) for _ in range(nspatial)]
    padding = []
    for size, w, ld, rd in zip(spatial, window, lhs_dil, rhs_dil):
        dilated_in, dilated_w = (size - 1) * ld + 1, (w - 1) * rd + 1
        for _ in range(10):
            lo, hi = (int(x) for x in rng.integers(-3, 3, 2))  # negative padding crops
            if dilated_in + lo + hi >= dilated_w and crop_ok(dilated_in, lo, hi):
                break
        else:
            return None
        padding.append((lo, hi))
    # rhs: (out feature, in feature, spatial...)
    rhs_spec = tuple(int(i) for i in rng.permutation(aval.ndim))
    rhs_shape = [0] * aval.ndim
    rhs_shape[rhs_spec[0]] = out_features
    rhs_shape[rhs_spec[1]] = features // groups
    for d, w in zip(rhs_spec[2:], window):
        rhs_shape[d] = w
    out_spec = tuple(int(i) for i in rng.permutation(aval.ndim))
    dnums = lax.ConvDimensionNumbers(lhs_spec, rhs_spec, out_spec)
    narrow = aval.dtype.name in ("float16", "bfloat16")
    preferred = dtype_of("float32") if narrow and rng.random() < 0.3 else None
    kernel = ANY
    if is_float(aval.dtype) and (any(lo > 0 or hi > 0 for lo, hi in padding) or max(lhs_dil) > 1):
        # Padding and lhs-dilation holes are zeros that StableHLO multiplies with the kernel
        # (0 * Inf = NaN) while XLA skips them: a kernel without Inf and NaN then.
        big = float(ml_dtypes.finfo(aval.dtype).max)
        kernel = Domain("finite", lo=-big, hi=big, nan=False)
    return Sample((Operand(aval), Operand(aval.with_shape(rhs_shape), kernel)),
                  {"window_strides": tuple(strides), "padding": tuple(padding),
                   "lhs_dilation": tuple(lhs_dil), "rhs_dilation": tuple(rhs_dil),
                   "dimension_numbers": dnums, "feature_group_count": groups,
                   "batch_group_count": batch_groups, "preferred_element_type": preferred})


# ---------------------------------------------------------------------------------------------
# windowed reductions


def _window_params(rng: np.random.Generator, aval: Aval, *,
                   dilations: bool = True) -> dict[str, Any] | None:
    window, strides, padding, base, wdil = [], [], [], [], []
    for size in aval.shape:
        w = int(choice(rng, [1, 1, 2, 3]))
        b = int(choice(rng, [1, 1, 1, 2])) if dilations else 1
        d = int(choice(rng, [1, 1, 1, 2])) if dilations else 1
        dilated_in, dilated_w = (size - 1) * b + 1, (w - 1) * d + 1
        for _ in range(10):
            lo, hi = (int(x) for x in rng.integers(-1, 3, 2))
            if dilated_in + lo + hi >= dilated_w:
                break
        else:
            return None
        window.append(w)
        strides.append(int(choice(rng, [1, 1, 2])))
        padding.append((lo, hi))
        base.append(b)
        wdil.append(d)
    return {"window_dimensions": tuple(window), "window_strides": tuple(strides),
            "padding": tuple(padding), "base_dilation": tuple(base), "window_dilation": tuple(wdil)}


_MONOIDS = {"reduce_window_sum": lax.add, "reduce_window_max": lax.max, "reduce_window_min": lax.min}


def _monoid_identity(name: str, dtype: np.dtype) -> Any:
    if name == "reduce_window_sum":
        return np.asarray(0, dtype)
    if is_float(dtype):
        return np.asarray(-np.inf if name == "reduce_window_max" else np.inf, dtype)
    lo, hi = int_range(dtype)
    return np.asarray(lo if name == "reduce_window_max" else hi, dtype)


def _reduce_window_rule(name: str) -> OpRule:
    def sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
        params = _window_params(rng, aval)
        return None if params is None else Sample((Operand(aval),), params)

    def build(x: Any, **params: Any) -> Any:
        return lax.reduce_window(x, _monoid_identity(name, x.dtype), _MONOIDS[name], **params)
    return OpRule(name, "window", 1, NUMERIC, sample, build, min_rank=1,
                  exact_result=True if name != "reduce_window_sum" else int_exact,
                  notes=("padding (negative too), base and window dilation",))


#: Generic reduce_window bodies with their identities, per dtype kind ('f', 'i', 'b').
_GENERIC_WINDOW = {"f": ("mul",), "i": ("mul", "and", "or"), "b": ("and", "or")}
_GENERIC_FN = {"mul": lax.mul, "and": lax.bitwise_and, "or": lax.bitwise_or}


def _generic_identity(combiner: str, dtype: np.dtype) -> np.ndarray:
    if combiner == "mul":
        return np.asarray(1, dtype)
    if combiner == "and":
        return np.asarray(True) if dtype == np.bool_ else np.asarray(-1).astype(dtype)
    return np.asarray(0, dtype)


def _generic_window_sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
    params = _window_params(rng, aval)
    if params is None:
        return None
    kind = "f" if is_float(aval.dtype) else ("b" if aval.dtype == np.bool_ else "i")
    params["combiner"] = choice(rng, _GENERIC_WINDOW[kind])
    return Sample((Operand(aval, factor_domain(aval.dtype)),), params)


def _generic_window_build(x: Any, *, combiner: str, **params: Any) -> Any:
    return lax.reduce_window(x, _generic_identity(combiner, np.dtype(x.dtype)),
                             _GENERIC_FN[combiner], **params)


# =============================================================================================
# the records


#: Every contraction's and windowed reduction's record, in the fuzzer's catalogue order.
DEFINITIONS: tuple[PrimitiveDef, ...] = (
    accumulating("dot_general", _dot_general, OpRule(
        "dot_general", "contract", 2, ALL, _dot_sample, call(lax.dot_general),
        exact_result=int_exact, min_rank=1, weight=2.0,
        notes=("batch dimensions, several contracting dimensions, preferred_element_type",
               "floating sums may be reassociated (covered by the accumulation budget)"))),
    accumulating("conv_general_dilated", _conv_general_dilated, OpRule(
        "conv_general_dilated", "contract", 2, FLOATS + ("int32",), _conv_sample,
        call(lax.conv_general_dilated), exact_result=int_exact, min_rank=3, weight=2.0,
        notes=("layouts, strides, negative padding, lhs and rhs dilation, feature and batch "
               "groups",
               "a finite kernel where the input is padded or lhs-dilated: StableHLO pads with "
               "zeros that multiply the kernel (0 * Inf = NaN), XLA:CPU skips them"),
        excluded=tuple((d, "integer and boolean convolutions other than int32: rare in real "
                           "programs, kept out to spend the time on float convolutions")
                       for d in ("int8", "int16", "uint8", "uint16", "uint32", "bool")))),
    accumulating("reduce_window_sum", _reduce_window_named("sum"),
                  _reduce_window_rule("reduce_window_sum")),
    plain("reduce_window_max", _reduce_window_named("max"),
          _reduce_window_rule("reduce_window_max")),
    plain("reduce_window_min", _reduce_window_named("min"),
          _reduce_window_rule("reduce_window_min")),
    plain("reduce_window", _reduce_window, OpRule(
        "reduce_window", "window", 1, ALL, _generic_window_sample, _generic_window_build,
        exact_result=int_exact, min_rank=1,
        notes=("generic bodies (mul; and, or for integers and bools), each with its identity as "
               "init: XLA may apply a non-identity init any number of times, and pads with it "
               "or skips the padding (undefined, see jax.lax.reduce)", PRODUCT))),
    # not generated: max pooling's derivatives
    accumulating("select_and_scatter_add", _select_and_scatter_add),
    plain("select_and_gather_add", _select_and_gather_add),
)
