"""xlaprobe's reductions, one record each (`xlaprobe.lax_rules.record.PrimitiveDef`): the
``reduce_*`` family, ``argmax``/``argmin``, the cumulative ops (``cumsum``, ``cumprod``,
``cummax``, ``cummin``, ``cumlogsumexp``) and the generic ``reduce`` whose combiner is a jaxpr,
each with its facts (sums and products round and accumulate many terms in an order XLA chooses;
max, min, bitwise and arg reductions are exact), its float64 reference rule and its fuzzer rule
side by side.

The reference rules accumulate in `RuleContext.acc_dtype` (float64 by default; the program's
dtype in native mode, float32 for float16 and bfloat16), and under ``reference:ftz`` a product
is zero of its sign wherever some order of its factors passes through a subnormal partial
product (`xlaprobe.lax_rules.numeric.flushed_in_some_order`). The generator rules' domains and
exactness are explained in `xlaprobe.sources.ops`.

`DEFINITIONS` keeps the fuzzer's catalogue order (reductions, arg reductions, cumulative ops;
then ``reduce``, never generated): the generator draws a rule by its position in
`xlaprobe.sources.ops.RULES`.

Source: XLA operation semantics (https://openxla.org/xla/operation_semantics, Reduce) and the
StableHLO specification (https://openxla.org/stablehlo/spec, reduce); NaN and signed-zero
handling of max and min follow XLA:CPU as measured on jaxlib 0.10.2.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import ml_dtypes
import numpy as np
from jax import lax

from xlaprobe.lax_rules.numeric import (Rule, RuleContext, dtype_kind, flushed_in_some_order,
                                        highest, lowest, rounded, small_factors)
from xlaprobe.lax_rules.opspec import (ALL, ANY, BOOL, DISCONTINUOUS, FLOATS, INDEX_DTYPES, INTS,
                                       NUMERIC, PRODUCT, Aval, Context, Operand, OpRule, Sample,
                                       call, choice, dtype_of, factor_domain, int_exact,
                                       int_range, structural_bounds, subset)
from xlaprobe.lax_rules.record import PrimitiveDef, accumulating, plain

__all__ = ["DEFINITIONS"]

# =============================================================================================
# reference rules (float64 NumPy)


def _reduce_sum(ctx: RuleContext, x: np.ndarray, *, axes: Sequence[int], **_: Any) -> np.ndarray:
    acc = ctx.acc_dtype()  # integers: a 64-bit sum wraps to the same low bits as the narrow one
    return np.sum(x.astype(acc), axis=tuple(axes), dtype=acc)


def _reduce_prod(ctx: RuleContext, x: np.ndarray, *, axes: Sequence[int], **_: Any) -> np.ndarray:
    acc = ctx.acc_dtype()
    if ctx.flush and dtype_kind(acc) == "f":
        out = _flushed_product(x.astype(acc), tuple(axes))
        return flushed_in_some_order(out, np.prod(small_factors(x), axis=tuple(axes)), acc)
    return np.prod(x.astype(acc), axis=tuple(axes), dtype=acc)


def _flushed_product(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """Product over `axes`, in order, flushing subnormal partial products to zero (``reference:ftz``).

    XLA:CPU may flush subnormal intermediates of a reduction, and in a product one flushed partial
    product zeroes the result: 0.543 * 1.1755e-38 (subnormal in float32) * 1.64 * -1.375 is
    -1.44e-38, but -0 after flushing (fuzz seed 7100246, a bfloat16 reduce_prod).

    >>> x = np.array([0.54296875, 1.1754943508222875e-38, 1.640625, -1.375], np.float32)
    >>> float(_flushed_product(x, (0,)))
    -0.0
    """
    kept = [d for d in range(x.ndim) if d not in axes]
    flat = np.transpose(x, kept + list(axes)).reshape(
        tuple(x.shape[d] for d in kept) + (-1,))
    tiny = np.finfo(x.dtype).tiny
    out = np.ones(flat.shape[:-1], x.dtype)
    for k in range(flat.shape[-1]):
        out = out * flat[..., k]
        out = np.where(np.abs(out) < tiny, np.copysign(np.zeros((), x.dtype), out), out)
    return out


def _reduce_extreme(fn: Callable[..., np.ndarray], identity: Callable[[Any], Any],
                    negative_zero_wins: bool) -> Rule:
    """reduce_max (`fn` np.max from `lowest`; +0 beats -0) or reduce_min (np.min from `highest`;
    -0 beats +0), NaN-propagating as NumPy's and XLA's are."""
    def rule(ctx: RuleContext, x: np.ndarray, *, axes: Sequence[int], **_: Any) -> np.ndarray:
        axes = tuple(axes)
        dtype = ctx.in_dtypes[0]
        r = fn(x, axis=axes, initial=identity(dtype))
        if dtype_kind(dtype) == "f":
            winner = np.any((x == 0) & (np.signbit(x) == negative_zero_wins), axis=axes)
            r = np.where((r == 0) & winner, -0.0 if negative_zero_wins else 0.0, r)
        return r
    return rule


def _reduce_bitwise(ufunc: np.ufunc, identity: int) -> Rule:
    def rule(ctx: RuleContext, x: np.ndarray, *, axes: Sequence[int], **_: Any) -> np.ndarray:
        initial = np.array(identity).astype(x.dtype) if x.dtype != np.bool_ else bool(identity)
        return ufunc.reduce(x, axis=tuple(axes), initial=initial)
    return rule


def _argminmax(fn: Callable) -> Rule:
    def rule(ctx: RuleContext, x: np.ndarray, *, axes: Sequence[int], index_dtype: Any,
             **_: Any) -> np.ndarray:
        return fn(x, axis=axes[0]).astype(index_dtype)  # NumPy, like XLA: first NaN wins
    return rule


def _cumulative_rule(kind: str) -> Rule:
    def rule(ctx: RuleContext, x: np.ndarray, *, axis: int, reverse: bool = False, **_: Any) -> np.ndarray:
        float_ = dtype_kind(ctx.out_dtype) == "f"
        if kind in ("sum", "prod", "logsumexp") and float_:
            x = x.astype(ctx.acc_dtype())
        if reverse:
            x = np.flip(x, axis)
        if kind == "sum":
            out = np.cumsum(x, axis=axis, dtype=x.dtype)
        elif kind == "prod":
            out = np.cumprod(x, axis=axis, dtype=x.dtype)
            if ctx.flush and float_:
                out = flushed_in_some_order(out, np.cumprod(small_factors(x), axis=axis), x.dtype)
        elif kind == "logsumexp" and ctx.native and float_:
            out = _cumlogsumexp_rounded(x, axis, ctx.out_dtype, ctx.rng)
        elif kind == "logsumexp":
            out = np.logaddexp.accumulate(x, axis=axis)
        elif kind == "max":
            out = (np.maximum if x.dtype != np.bool_ else np.logical_or).accumulate(x, axis=axis)
        else:
            out = (np.minimum if x.dtype != np.bool_ else np.logical_and).accumulate(x, axis=axis)
        return np.flip(out, axis) if reverse else out
    return rule


def _cumlogsumexp_rounded(x: np.ndarray, axis: int, dtype: Any,
                          rng: np.random.Generator | None) -> np.ndarray:
    """cumlogsumexp in native mode, as JAX lowers it: a reduce_window whose combiner is
    ``max(a, b) + log1p(exp(-|a - b|))`` in the output dtype, every op rounded to it (in
    bfloat16 the log1p term near 0.69 is off by up to 0.002, which cancellation against a
    negative max leaves as the whole answer: campaign seed 52001125 gave 0.00977 where float64
    gives 0.00919); with `rng` (Monte Carlo arithmetic) each op is first perturbed by up to one
    unit roundoff."""
    roundoff = float(ml_dtypes.finfo(dtype).eps) / 2

    def op(value: np.ndarray) -> np.ndarray:
        value = np.asarray(value, np.float64)
        if rng is not None:
            value = value * (1.0 + roundoff * rng.uniform(-1.0, 1.0, value.shape))
        return rounded(value, dtype, False)
    moved = np.moveaxis(np.asarray(x, np.float64), axis, 0)
    out = np.empty_like(moved)
    acc = rounded(moved[0], dtype, False) if moved.shape[0] else moved[:0]
    for k in range(moved.shape[0]):
        if k:
            b = moved[k]
            diff = op(acc - b)
            step = op(np.maximum(acc, b) + op(np.log1p(op(np.exp(-np.abs(diff))))))
            acc = np.where(np.isnan(diff), acc + b, step)
        out[k] = acc
    return np.moveaxis(out, 0, axis)


def _generic_reduce(ctx: RuleContext, *args: np.ndarray, jaxpr: Any, dimensions: Sequence[int],
                    **_: Any) -> list[np.ndarray]:
    """`reduce` with a user computation: fold sequentially, vectorized over the kept positions."""
    n = len(args) // 2
    operands, inits = args[:n], args[n:]
    dims = tuple(dimensions)
    kept = [d for d in range(operands[0].ndim) if d not in dims]
    moved = [np.transpose(x, kept + list(dims)) for x in operands]
    out_shape = tuple(operands[0].shape[d] for d in kept)
    flat = [m.reshape(out_shape + (-1,)) for m in moved]
    acc = [np.broadcast_to(i, out_shape) for i in inits]
    for k in range(flat[0].shape[-1]):
        acc = ctx.eval(jaxpr, acc + [f[..., k] for f in flat])
    return acc


# =============================================================================================
# generator rules


def _reduction(name: str, fn: Callable[..., Any], dtypes: Sequence[str], *,
               exact_result: bool | Callable[..., bool] = int_exact,
               notes: Sequence[str] = (), product: bool = False) -> OpRule:
    def sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
        domain = factor_domain(aval.dtype) if product else ANY
        return Sample((Operand(aval, domain),), {"axes": subset(rng, aval.ndim)})
    return OpRule(name, "reduce", 1, tuple(dtypes), sample, lambda x, *, axes: fn(x, axes),
                  exact_result=exact_result, min_rank=1, notes=tuple(notes),
                  bounds=structural_bounds if exact_result is True else None)


def _arg_reduction(name: str, fn: Callable[..., Any]) -> OpRule:
    def sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
        axis = int(rng.integers(aval.ndim))
        # An index dtype that holds every index of the axis (else implementation-defined).
        fits = [d for d in INDEX_DTYPES if int_range(d)[1] >= aval.shape[axis] - 1]
        return Sample((Operand(aval, exact=True),),
                      {"axis": axis, "index_dtype": dtype_of(choice(rng, fits))})
    return OpRule(name, "reduce", 1, ALL, sample, call(fn), exact_result=True, min_rank=1,
                  notes=(DISCONTINUOUS + " (ties pick the first index)",))


def _cumulative(name: str, fn: Callable[..., Any], dtypes: Sequence[str], *,
                exact_result: bool | Callable[..., bool] = int_exact,
                product: bool = False) -> OpRule:
    def sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
        domain = factor_domain(aval.dtype) if product else ANY
        return Sample((Operand(aval, domain),), {"axis": int(rng.integers(aval.ndim)),
                                                 "reverse": bool(rng.random() < 0.3)})
    return OpRule(name, "cumulative", 1, tuple(dtypes), sample, call(fn),
                  exact_result=exact_result, min_rank=1, notes=(PRODUCT,) if product else ())


# =============================================================================================
# the records


#: Every reduction's record, in the fuzzer's catalogue order (module docstring).
DEFINITIONS: tuple[PrimitiveDef, ...] = (
    accumulating("reduce_sum", _reduce_sum, _reduction(
        "reduce_sum", lax.reduce_sum, NUMERIC, notes=(
            "XLA may reassociate floating sums (covered by the oracle's accumulation budget)",))),
    accumulating("reduce_prod", _reduce_prod, _reduction(
        "reduce_prod", lax.reduce_prod, NUMERIC, product=True, notes=(PRODUCT,))),
    plain("reduce_max", _reduce_extreme(np.max, lowest, False),
          _reduction("reduce_max", lax.reduce_max, ALL, exact_result=True)),
    plain("reduce_min", _reduce_extreme(np.min, highest, True),
          _reduction("reduce_min", lax.reduce_min, ALL, exact_result=True)),
    plain("reduce_and", _reduce_bitwise(np.bitwise_and, -1),
          _reduction("reduce_and", lax.reduce_and, INTS + BOOL)),
    plain("reduce_or", _reduce_bitwise(np.bitwise_or, 0),
          _reduction("reduce_or", lax.reduce_or, INTS + BOOL)),
    plain("reduce_xor", _reduce_bitwise(np.bitwise_xor, 0),
          _reduction("reduce_xor", lax.reduce_xor, INTS + BOOL)),
    plain("argmax", _argminmax(np.argmax), _arg_reduction("argmax", lax.argmax)),
    plain("argmin", _argminmax(np.argmin), _arg_reduction("argmin", lax.argmin)),
    accumulating("cumsum", _cumulative_rule("sum"), _cumulative("cumsum", lax.cumsum, NUMERIC)),
    accumulating("cumprod", _cumulative_rule("prod"),
                  _cumulative("cumprod", lax.cumprod, NUMERIC, product=True)),
    plain("cummax", _cumulative_rule("max"),
          _cumulative("cummax", lax.cummax, NUMERIC, exact_result=True)),
    plain("cummin", _cumulative_rule("min"),
          _cumulative("cummin", lax.cummin, NUMERIC, exact_result=True)),
    accumulating("cumlogsumexp", _cumulative_rule("logsumexp"), dataclasses.replace(
        _cumulative("cumlogsumexp", lax.cumlogsumexp, FLOATS), excluded=tuple(
            (d, "JAX accepts integers but computes exp and log in the integer dtype")
            for d in INTS))),
    plain("reduce", _generic_reduce),  # the combiner is a jaxpr parameter
)
