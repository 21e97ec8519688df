"""The op catalogue of the fuzzer: one frozen `OpRule` per lax primitive, keyed by primitive name.

A rule says what the generator (`xlaprobe.sources.generator`) needs to emit its primitive in a
valid program: the dtypes of its primary operand, how to sample the other operands (as `Operand`
requirements: abstract value, value `Domain`, exactness) and the parameters from a NumPy
``Generator``, and how to build it with JAX's public lax function (so the jaxpr holds JAX's own
primitive). The rules of the elementwise primitives and the reductions sit in their records
(``lax_rules/elementwise.py``, ``lax_rules/reductions.py``, beside each one's facts, reference
rule and budget), built from `OpRule` and the sampler factories of ``lax_rules/opspec.py``; this
module adds the other families (family factories such as `_scatter_rule` make the simple ops one
line each) and keys the catalogue. Its ORDER matters: the
generator draws a rule by its position.

Exactness (why `Operand.exact` exists). The oracle judges integer and boolean outputs exactly and
floating outputs within an error budget. A *discontinuous* op (a comparison, floor, a float to int
conversion, argmax, the keys of a multi-operand sort, a bitcast of a float) turns a rounding
difference between XLA and the float64 reference into a different integer, boolean or branch: a
false alarm. So a discontinuous op only takes floating operands that are *exact* (inputs, and
values computed from inputs by ops that never round: structural ops, max/min, select, neg, ...),
hold no subnormal (XLA:CPU flushes subnormal operands of comparisons: ``x > 0`` is false for
``x = 1e-40``) and, where the op reads the bits of NaNs (bitcasts, top_k's NaN order), no NaN.
Operand domains document the rest (each with its reason in `OpRule.notes`).

Source: XLA operation semantics (https://openxla.org/xla/operation_semantics) and the StableHLO
specification (https://openxla.org/stablehlo/spec) for what is implementation-defined.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import ml_dtypes
import numpy as np
from jax import lax

from xlaprobe import primitives
from xlaprobe.lax_rules import registry
from xlaprobe.lax_rules.opspec import (
    ABOVE_MINUS_ONE, ALL, ANGLE, ANY, AT_LEAST_ONE, FLOATS, GAMMA, INDEX_DTYPES, INTS,
    MODERATE, NO_NAN, NONZERO, NUMERIC, POSITIVE, SIGNED, UNIT, UNSIGNED, X64, Aval, Context,
    Domain, Operand, OpRule, Sample, dtype_of, is_float, is_int, unary_rule)
from xlaprobe.lax_rules.opspec import DISCONTINUOUS as _DISCONTINUOUS
from xlaprobe.lax_rules.opspec import PRODUCT as _PRODUCT
from xlaprobe.lax_rules.opspec import call as _call
from xlaprobe.lax_rules.opspec import choice as _choice
from xlaprobe.lax_rules.opspec import factor_domain as _factor_domain
from xlaprobe.lax_rules.opspec import hull as _hull
from xlaprobe.lax_rules.opspec import int_exact as _int_exact
from xlaprobe.lax_rules.opspec import int_range as _int_range
from xlaprobe.lax_rules.opspec import mantissa_bits as _mantissa_bits
from xlaprobe.lax_rules.opspec import structural_bounds as _structural_bounds
from xlaprobe.lax_rules.opspec import subset as _subset

__all__ = ["Aval", "Domain", "Operand", "OpRule", "Sample", "RULES", "FLOATS", "SIGNED",
           "UNSIGNED", "INTS", "NUMERIC", "ALL", "X64", "dtype_of", "is_float", "is_int",
           "unary_rule", "ANY", "POSITIVE", "ABOVE_MINUS_ONE", "AT_LEAST_ONE", "UNIT", "MODERATE",
           "ANGLE", "NONZERO", "GAMMA", "NO_NAN"]

# ---------------------------------------------------------------------------------------------
# contractions


def _dot_sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
    dims = list(range(aval.ndim))
    batch = [d for d in dims if rng.random() < 0.25][: max(aval.ndim - 1, 0)]
    rest = [d for d in dims if d not in batch]
    if not rest:
        return None
    contract = [d for d in rest if rng.random() < 0.5] or [int(_choice(rng, rest))]
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
    groups = int(_choice(rng, [g for g in (1, 2, 3) if features % g == 0]))
    batch_groups = 1
    if groups == 1 and rng.random() < 0.15:
        batch_groups = int(_choice(rng, [g for g in (1, 2) if batch % g == 0]))
    out_features = groups * batch_groups * int(rng.integers(1, 4))
    window = [int(rng.integers(1, 4)) for _ in range(nspatial)]
    strides = [int(_choice(rng, [1, 1, 2])) for _ in range(nspatial)]
    lhs_dil = [int(_choice(rng, [1, 1, 2])) for _ in range(nspatial)]
    rhs_dil = [int(_choice(rng, [1, 1, 2])) for _ in range(nspatial)]
    padding = []
    for size, w, ld, rd in zip(spatial, window, lhs_dil, rhs_dil):
        dilated_in, dilated_w = (size - 1) * ld + 1, (w - 1) * rd + 1
        for _ in range(10):
            lo, hi = (int(x) for x in rng.integers(-3, 3, 2))  # negative padding crops
            if dilated_in + lo + hi >= dilated_w and _crop_ok(dilated_in, lo, hi):
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


_CONTRACT_RULES = [
    OpRule("dot_general", "contract", 2, ALL, _dot_sample, _call(lax.dot_general),
           exact_result=_int_exact, min_rank=1, weight=2.0,
           notes=("batch dimensions, several contracting dimensions, preferred_element_type",
                  "floating sums may be reassociated (covered by the accumulation budget)")),
    OpRule("conv_general_dilated", "contract", 2, FLOATS + ("int32",), _conv_sample,
           _call(lax.conv_general_dilated), exact_result=_int_exact, min_rank=3, weight=2.0,
           notes=("layouts, strides, negative padding, lhs and rhs dilation, feature and batch "
                  "groups",
                  "a finite kernel where the input is padded or lhs-dilated: StableHLO pads with "
                  "zeros that multiply the kernel (0 * Inf = NaN), XLA:CPU skips them"),
           excluded=tuple((d, "integer and boolean convolutions other than int32: rare in real "
                              "programs, kept out to spend the time on float convolutions")
                          for d in ("int8", "int16", "uint8", "uint16", "uint32", "bool"))),
]

# ---------------------------------------------------------------------------------------------
# windowed reductions


def _crop_ok(size: int, lo: int, hi: int) -> bool:
    """Negative padding crops within the (dilated) data: the reference's pad mis-sizes a crop
    that reaches into the opposite side's padding (pad(f32[2], (-3, 3)) gives 3 elements, not 2);
    drop this check when xlaprobe/configs/reference.py _pad_general is fixed."""
    return max(-lo, 0) + max(-hi, 0) <= size


def _window_params(rng: np.random.Generator, aval: Aval, *,
                   dilations: bool = True) -> dict[str, Any] | None:
    window, strides, padding, base, wdil = [], [], [], [], []
    for size in aval.shape:
        w = int(_choice(rng, [1, 1, 2, 3]))
        b = int(_choice(rng, [1, 1, 1, 2])) if dilations else 1
        d = int(_choice(rng, [1, 1, 1, 2])) if dilations else 1
        dilated_in, dilated_w = (size - 1) * b + 1, (w - 1) * d + 1
        for _ in range(10):
            lo, hi = (int(x) for x in rng.integers(-1, 3, 2))
            if dilated_in + lo + hi >= dilated_w:
                break
        else:
            return None
        window.append(w)
        strides.append(int(_choice(rng, [1, 1, 2])))
        padding.append((lo, hi))
        base.append(b)
        wdil.append(d)
    return {"window_dimensions": tuple(window), "window_strides": tuple(strides),
            "padding": tuple(padding), "base_dilation": tuple(base), "window_dilation": tuple(wdil)}


_MONOIDS = {"reduce_window_sum": lax.add, "reduce_window_max": lax.max, "reduce_window_min": lax.min}


def _identity(name: str, dtype: np.dtype) -> Any:
    if name == "reduce_window_sum":
        return np.asarray(0, dtype)
    if is_float(dtype):
        return np.asarray(-np.inf if name == "reduce_window_max" else np.inf, dtype)
    lo, hi = _int_range(dtype)
    return np.asarray(lo if name == "reduce_window_max" else hi, dtype)


def _reduce_window_rule(name: str) -> OpRule:
    def sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
        params = _window_params(rng, aval)
        return None if params is None else Sample((Operand(aval),), params)

    def build(x: Any, **params: Any) -> Any:
        return lax.reduce_window(x, _identity(name, x.dtype), _MONOIDS[name], **params)
    return OpRule(name, "window", 1, NUMERIC, sample, build, min_rank=1,
                  exact_result=True if name != "reduce_window_sum" else _int_exact,
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
    params["combiner"] = _choice(rng, _GENERIC_WINDOW[kind])
    return Sample((Operand(aval, _factor_domain(aval.dtype)),), params)


def _generic_window_build(x: Any, *, combiner: str, **params: Any) -> Any:
    return lax.reduce_window(x, _generic_identity(combiner, np.dtype(x.dtype)),
                             _GENERIC_FN[combiner], **params)


_WINDOW_RULES = [
    *(_reduce_window_rule(name) for name in _MONOIDS),
    OpRule("reduce_window", "window", 1, ALL, _generic_window_sample, _generic_window_build,
           exact_result=_int_exact, min_rank=1,
           notes=("generic bodies (mul; and, or for integers and bools), each with its identity as "
                  "init: XLA may apply a non-identity init any number of times, and pads with it "
                  "or skips the padding (undefined, see jax.lax.reduce)", _PRODUCT)),
]

# ---------------------------------------------------------------------------------------------
# shape ops

MAX_ELEMENTS = 4096


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
        d = int(_choice(rng, divisors))
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
    return Sample((Operand(aval),), {"dimensions": _subset(rng, aval.ndim)})


def _squeeze_sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
    ones = [i for i, d in enumerate(aval.shape) if d == 1]
    if not ones:  # ask for the same value with a unit dimension inserted
        at = int(rng.integers(aval.ndim + 1))
        operand = aval.with_shape(aval.shape[:at] + (1,) + aval.shape[at:])
        return Sample((Operand(operand),), {"dimensions": (at,)})
    return Sample((Operand(aval),), {"dimensions": tuple(i for i in ones if rng.random() < 0.7)
                                     or (ones[0],)})


def _slice_params(rng: np.random.Generator, shape: Sequence[int], out: Sequence[int] | None = None,
                  strides: bool = True) -> dict[str, Any]:
    start, limit, step = [], [], []
    for k, d in enumerate(shape):
        s = int(_choice(rng, [1, 1, 1, 2, 3])) if strides else 1
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
    params = _slice_params(rng, aval.shape)
    if params["start_indices"] == (0,) * aval.ndim and params["limit_indices"] == aval.shape \
            and params["strides"] is None:
        return None
    return Sample((Operand(aval),), params)


def _slice_build(x: Any, *, start_indices: Any, limit_indices: Any, strides: Any = None) -> Any:
    return lax.slice(x, start_indices, limit_indices, strides)


def _pad_sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
    config = []
    for d in aval.shape:
        interior = int(_choice(rng, [0, 0, 0, 1, 2]))
        full = d + max(d - 1, 0) * interior
        for _ in range(10):
            lo, hi = (int(x) for x in rng.integers(-3, 4, 2))
            if full + lo + hi >= 1 and _crop_ok(full, lo, hi):
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
        shape[dim] = int(_choice(rng, [aval.shape[dim], int(rng.integers(1, 5))]))
        operands.append(Operand(aval.with_shape(shape)))
    return Sample(tuple(operands), {"dimension": dim})


def _split_sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
    axes = [i for i, d in enumerate(aval.shape) if d >= 2]
    if not axes:
        return None
    axis = int(_choice(rng, axes))
    size = aval.shape[axis]
    cuts = sorted({int(c) for c in rng.integers(1, size, int(rng.integers(1, 3)))})
    sizes = tuple(b - a for a, b in zip([0] + cuts, cuts + [size]))
    return Sample((Operand(aval),), {"sizes": sizes, "axis": axis})


def _iota_sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
    shape = aval.shape if aval.ndim else (int(rng.integers(1, 9)),)
    return Sample((), {"dtype": aval.dtype, "shape": shape, "dimension": int(rng.integers(len(shape)))})


def _iota_exact(avals: Sequence[Aval], params: dict[str, Any]) -> bool:
    dtype = dtype_of(params["dtype"])
    return not is_float(dtype) or max(params["shape"]) <= 2 ** _mantissa_bits(dtype)


_SHAPE_RULES = [
    OpRule("broadcast_in_dim", "shape", 1, ALL, _broadcast_sample,
           lambda x, *, shape, broadcast_dimensions: lax.broadcast_in_dim(x, shape,
                                                                          broadcast_dimensions),
           exact_result=True, bounds=_structural_bounds),
    OpRule("reshape", "shape", 1, ALL, _reshape_sample,
           lambda x, *, new_sizes: lax.reshape(x, new_sizes), exact_result=True,
           bounds=_structural_bounds),
    OpRule("transpose", "shape", 1, ALL, _transpose_sample, _call(lax.transpose), exact_result=True,
           bounds=_structural_bounds, min_rank=2),
    OpRule("rev", "shape", 1, ALL, _rev_sample, _call(lax.rev), exact_result=True,
           bounds=_structural_bounds, min_rank=1),
    OpRule("squeeze", "shape", 1, ALL, _squeeze_sample, _call(lax.squeeze), exact_result=True,
           bounds=_structural_bounds, weight=0.5),
    OpRule("slice", "shape", 1, ALL, _slice_sample, _slice_build, exact_result=True,
           bounds=_structural_bounds, min_rank=1),
    OpRule("pad", "shape", 2, ALL, _pad_sample, _call(lax.pad), exact_result=True,
           bounds=_structural_bounds, min_rank=1, weight=1.5,
           notes=("negative (cropping) and interior padding; crops stay within the data until "
                  "the reference's pad is fixed (see _crop_ok)",)),
    OpRule("concatenate", "shape", -1, ALL, _concatenate_sample,
           lambda *xs, dimension: lax.concatenate(xs, dimension), exact_result=True,
           bounds=_structural_bounds, min_rank=1,
           notes=("often concatenates a value with itself (several consumers)",)),
    OpRule("split", "shape", 1, ALL, _split_sample, _call(lax.split), exact_result=True,
           bounds=_structural_bounds, min_rank=1, weight=0.5),
    OpRule("iota", "shape", 0, NUMERIC, _iota_sample,
           lambda *, dtype, shape, dimension: lax.broadcasted_iota(dtype, shape, dimension),
           exact_result=_iota_exact, weight=0.5,
           notes=("floating iotas beyond 2**mantissa bits are rounded (then inexact)",)),
]

# ---------------------------------------------------------------------------------------------
# indexing: dynamic slices, gathers, scatters


def _index_dtype(rng: np.random.Generator, x64: bool = False) -> np.dtype:
    names = INDEX_DTYPES + (("int64",) if x64 else ())
    weights = [3, 3, 2, 2, 3, 1] + ([1] if x64 else [])
    return dtype_of(_choice(rng, names, weights))


def _start_operands(rng: np.random.Generator, shape: Sequence[int], sizes: Sequence[int],
                    ctx: Context) -> tuple[list[Operand], np.dtype]:
    dtype = _index_dtype(rng, getattr(ctx, "x64", False))
    lo_t, hi_t = _int_range(dtype)
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
    lo_t, hi_t = _int_range(dtype)
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
    form = _choice(rng, ["rows", "points", "windows"])
    mode = _choice(rng, _MODES)
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
        form = _choice(rng, forms)
        mode = _choice(rng, _MODES)
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
        factors = _factor_domain(aval.dtype) if name == "scatter-mul" else ANY
        return Sample((Operand(aval, factors), indices, Operand(upd, factors)),
                      {"dimension_numbers": dn, "mode": mode,
                       "unique_indices": bool(unique and form != "windows" and rng.random() < 0.5)})

    exact = True if name in ("scatter", "scatter-min", "scatter-max") else _int_exact
    return OpRule(name, "scatter", 3, tuple(dtypes), sample, _call(fn), exact_result=exact,
                  min_rank=1, weight=1.5, notes=(
                      "index dtypes uint8..int32 (narrow ones with long axes), all modes",
                      "scatter without combiner: unique in-bounds indices (the order of "
                      "duplicate updates is implementation-defined)"))


_INDEX_RULES = [
    OpRule("dynamic_slice", "index", -1, ALL, _dynamic_slice_sample, _dynamic_slice_build,
           exact_result=True, bounds=_structural_bounds, min_rank=1,
           notes=("start indices of narrow dtypes, out of range (clamped), constant or computed",)),
    OpRule("dynamic_update_slice", "index", -1, ALL, _dynamic_update_slice_sample,
           _dynamic_update_slice_build, exact_result=True, bounds=_structural_bounds, min_rank=1,
           weight=3.0, notes=("most updates are slices of the operand itself",)),
    OpRule("gather", "index", 2, ALL, _gather_sample, _call(lax.gather), exact_result=True,
           bounds=lambda b, p: _hull(b[:1], 0.0), min_rank=1,
           notes=("rows, points and windows; all modes; PROMISE_IN_BOUNDS only with in-range "
                  "indices (else implementation-defined)",
                  "FILL_OR_DROP fills NaN for floats")),
    _scatter_rule("scatter", lax.scatter, ALL),
    _scatter_rule("scatter-add", lax.scatter_add, NUMERIC),
    _scatter_rule("scatter-sub", lax.scatter_sub, NUMERIC),
    _scatter_rule("scatter-mul", lax.scatter_mul, NUMERIC),
    _scatter_rule("scatter-min", lax.scatter_min, ALL),
    _scatter_rule("scatter-max", lax.scatter_max, ALL),
]

# ---------------------------------------------------------------------------------------------
# sorting


def _sort_sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
    n = int(_choice(rng, [1, 1, 2, 3]))
    num_keys = int(rng.integers(1, n + 1))
    operands = [Operand(aval, exact=n > 1)]
    for i in range(1, n):
        other = aval.with_dtype(_choice(rng, ALL))
        operands.append(Operand(other, exact=i < num_keys))
    return Sample(tuple(operands), {"dimension": int(rng.integers(aval.ndim)),
                                    "is_stable": bool(n > 1 or rng.random() < 0.5),
                                    "num_keys": num_keys})


def _sort_build(*xs: Any, dimension: int, is_stable: bool, num_keys: int) -> Any:
    out = lax.sort(xs, dimension=dimension, is_stable=is_stable, num_keys=num_keys)
    return tuple(out)


def _top_k_sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
    axis = int(rng.integers(aval.ndim))
    return Sample((Operand(aval, NO_NAN, exact=True),),
                  {"k": int(rng.integers(1, aval.shape[axis] + 1)), "axis": axis})


_SORT_RULES = [
    OpRule("sort", "sort", -1, ALL, _sort_sample, _sort_build, exact_result=True, min_rank=1,
           notes=("keys of a multi-operand sort are " + _DISCONTINUOUS,
                  "unstable sorts only of a single operand (ties of payloads are unordered)")),
    OpRule("top_k", "sort", 1, ALL, _top_k_sample, _call(lax.top_k), exact_result=True,
           min_rank=1, notes=(
               "no NaN: top_k orders NaNs by their sign bit, and NaN payloads are not preserved",
               _DISCONTINUOUS)),
]

# ---------------------------------------------------------------------------------------------
# control flow

_COMPARATORS = {"lt": lax.lt, "le": lax.le, "gt": lax.gt, "ge": lax.ge, "ne": lax.ne}


def _trip_plan(rng: np.random.Generator, dtype: np.dtype) -> dict[str, Any]:
    """Constant start, bound and step of a counted loop with 0 to 8 trips."""
    trips = int(_choice(rng, [0, 1, 1, 1, 2, 3, 5, 8]))
    # Steps beyond 1 with bounds that are no multiple of them: the last trip overshoots the
    # bound, a corner of trip-count analysis.
    step = int(_choice(rng, [1, 2, 3, 4, -1, -2]))
    lo_t, hi_t = _int_range(dtype)
    if step < 0 and lo_t == 0:
        step = -step
    start = int(rng.integers(max(lo_t, -5), min(hi_t, 5) + 1))
    last = start + trips * step  # the counter after the last trip
    if not lo_t <= last <= hi_t:
        start, last = 0, trips * step
    if step > 0:
        cmp = _choice(rng, ["lt", "le", "ne"], [2, 1, 1])
        # lt: stop = last - step + 1 .. last; le: stop = last - 1; ne: stop = last
        stop = {"lt": last - int(rng.integers(0, step)), "le": last - 1, "ne": last}[cmp]
    else:
        cmp = _choice(rng, ["gt", "ge", "ne"], [2, 1, 1])
        stop = {"gt": last + int(rng.integers(0, -step)), "ge": last + 1, "ne": last}[cmp]
    if cmp == "ne" and trips == 0:
        stop = start
    if not lo_t <= stop <= hi_t:
        cmp, stop = ("lt", last) if step > 0 else ("gt", last)
    return {"start": start, "stop": stop, "step": step, "cmp": cmp, "trips": trips,
            "counter_dtype": dtype}


def _while_sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
    counter = dtype_of(_choice(rng, ["int32", "int32", "int8", "uint8", "int16", "uint32"]))
    plan = _trip_plan(rng, counter)
    carries = [aval]
    if rng.random() < 0.3:
        carries.append(aval.with_dtype(_choice(rng, NUMERIC)))
    # The body sees the carries and the counter; it returns new carries.
    body, captured = ctx.subgraph(carries + [Aval((), counter)], carries, rng)
    operands = tuple(Operand(a) for a in carries) + tuple(
        Operand(a, value=v) for v, a in captured_avals(body, captured))
    return Sample(operands, {"body": body, "n_carry": len(carries), **plan})


def captured_avals(body: Any, captured: Sequence[int]) -> list[tuple[int, Aval]]:
    """(outer value id, aval) of each value a subgraph captures, in its input order."""
    n = len(body.input_avals) - len(captured)
    return [(v, body.input_avals[n + i]) for i, v in enumerate(captured)]


def _while_build(*operands: Any, body: Any, n_carry: int, start: int, stop: int, step: int,
                 cmp: str, trips: int, counter_dtype: Any) -> Any:
    carry, captured = operands[:n_carry], operands[n_carry:]
    dtype = dtype_of(counter_dtype)

    def cond(c: Any) -> Any:
        return _COMPARATORS[cmp](c[0], np.asarray(stop, dtype))

    def step_fn(c: Any) -> Any:
        outs = body(*c[1:], c[0], *captured)
        return (lax.add(c[0], np.asarray(step, dtype)), *outs)
    return tuple(lax.while_loop(cond, step_fn, (np.asarray(start, dtype), *carry)))


def _scan_sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
    length = int(rng.integers(1, 7))
    carries = [aval]
    xs = [aval.with_shape((length,) + aval.shape)]
    if rng.random() < 0.3:
        other = aval.with_dtype(_choice(rng, NUMERIC))
        xs.append(other.with_shape((length,) + other.shape))
    ys = [carries[0]] if rng.random() < 0.7 else []
    body, captured = ctx.subgraph(carries + [x.with_shape(x.shape[1:]) for x in xs],
                                  carries + ys, rng)
    operands = tuple(Operand(a) for a in carries + xs) + tuple(
        Operand(a, value=v) for v, a in captured_avals(body, captured))
    unroll = _choice(rng, [1, 1, 2, True])
    return Sample(operands, {"body": body, "n_carry": len(carries), "n_xs": len(xs),
                             "reverse": bool(rng.random() < 0.3), "unroll": unroll})


def _scan_build(*operands: Any, body: Any, n_carry: int, n_xs: int, reverse: bool, unroll: Any) -> Any:
    carry = operands[:n_carry]
    xs = operands[n_carry:n_carry + n_xs]
    captured = operands[n_carry + n_xs:]

    def f(c: Any, x: Any) -> Any:
        outs = body(*c, *x, *captured)
        return tuple(outs[:n_carry]), tuple(outs[n_carry:])
    c, ys = lax.scan(f, tuple(carry), tuple(xs), reverse=reverse, unroll=unroll)
    return (*c, *ys)


def _cond_sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
    n = int(_choice(rng, [2, 2, 3]))
    if n == 2 and rng.random() < 0.5:
        index = Operand(Aval((), dtype_of("bool")))
    else:
        # Out-of-range branch indices are clamped by lax.switch.
        index = Operand(Aval((), dtype_of("int32")), Domain("branch index", lo=-1, hi=n,
                                                            specials=False))
    branch_in = [aval]
    if rng.random() < 0.3:
        branch_in.append(aval.with_dtype(_choice(rng, NUMERIC)))
    branches, captured_all = [], []
    for _ in range(n):
        graph, captured = ctx.subgraph(branch_in, [aval], rng)
        branches.append(graph)
        captured_all.append([(v, a) for v, a in captured_avals(graph, captured)])
    operands = [index] + [Operand(a) for a in branch_in]
    counts = []
    for pairs in captured_all:
        operands += [Operand(a, value=v) for v, a in pairs]
        counts.append(len(pairs))
    return Sample(tuple(operands), {"branches": tuple(branches), "n_in": len(branch_in),
                                    "captures": tuple(counts)})


def _cond_build(index: Any, *operands: Any, branches: Any, n_in: int, captures: Any) -> Any:
    args = operands[:n_in]
    rest = list(operands[n_in:])
    fns = []
    for graph, count in zip(branches, captures):
        mine, rest = rest[:count], rest[count:]
        fns.append(lambda *a, g=graph, c=tuple(mine): g(*a, *c)[0])
    if np.dtype(index.dtype) == np.bool_:
        return lax.cond(index, fns[1], fns[0], *args)
    return lax.switch(index, fns, *args)


_CONTROL_RULES = [
    OpRule("while", "control", -1, ALL, _while_sample, _while_build, in_bodies=False, weight=2.0,
           notes=("constant start, bound and step, 0 to 8 trips, narrow counters",
                  "carries are treated as inexact inside the body")),
    OpRule("scan", "control", -1, ALL, _scan_sample, _scan_build, in_bodies=False, weight=1.5,
           notes=("forward and reverse, unrolled or not",)),
    OpRule("cond", "control", -1, ALL, _cond_sample, _cond_build, in_bodies=False, weight=1.0,
           notes=("bool predicates and clamped integer branch indices",)),
]

# ---------------------------------------------------------------------------------------------
# random bits


def _random_bits_sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
    shape = aval.shape if aval.ndim else (int(rng.integers(1, 9)),)
    return Sample((Operand(Aval((2,), dtype_of("uint32"))),), {"shape": shape, "dtype": aval.dtype})


def _random_bits_build(key_data: Any, *, shape: Any, dtype: Any) -> Any:
    key = jax.random.wrap_key_data(key_data, impl="threefry2x32")
    return jax.random.bits(key, shape, dtype)


_RANDOM_RULES = [
    OpRule("random_bits", "random", 1, UNSIGNED, _random_bits_sample, _random_bits_build,
           exact_result=True, weight=0.5, notes=("threefry2x32 keys from uint32[2] key data",)),
]

# ---------------------------------------------------------------------------------------------
# the table


#: primitive name -> rule.
RULES: dict[str, OpRule] = primitives.by_name([
    # elementwise and reductions: each rule sits in its primitive's record (xlaprobe.lax_rules)
    *registry.generator_rules(),
    *_CONTRACT_RULES, *_WINDOW_RULES, *_SHAPE_RULES, *_INDEX_RULES,
    *_SORT_RULES, *_CONTROL_RULES, *_RANDOM_RULES,
], "op catalogue")
