"""xlaprobe's elementwise primitives, one record each (`xlaprobe.lax_rules.record.PrimitiveDef`):
the transcendentals XLA approximates, the arithmetic IEEE rounds, the exact ops and the
conversions, each with its facts, its float64 reference rule, its fuzzer rule and its error
budget side by side.

The record factories name the family: `_approximate` (rounds, and XLA:CPU evaluates it with a
polynomial or rational approximation a few ULPs wide), `_rounded` (IEEE arithmetic rounds its
result) and `_exact` (returns a value its operands determine exactly). The reference rules follow
the XLA / StableHLO semantics written out in NumPy (see `xlaprobe.configs.reference`); the
generator rules' domains and exactness are explained in `xlaprobe.sources.ops`; the budgets'
figures in `xlaprobe.approximations`.

`DEFINITIONS` keeps the fuzzer's catalogue order (unary ops, binary and bitwise ops, comparisons,
selects, conversions; then the primitives it never generates): the generator draws a rule by its
position in `xlaprobe.sources.ops.RULES`, so reordering records changes every program a seed
makes.

Source: StableHLO specification (https://openxla.org/stablehlo/spec) and XLA operation semantics
(https://openxla.org/xla/operation_semantics); implementation-defined cases follow XLA:CPU as
measured on jaxlib 0.10.2 and 0.12.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import ml_dtypes
import numpy as np
from jax import dtypes as jdtypes
from jax import lax

from xlaprobe.lax_rules.budget import Approximation
from xlaprobe.lax_rules.facts import LAX_NAMES, Movement, PrimitiveFacts
from xlaprobe.lax_rules.numeric import (Rule, RuleContext, carrier, dtype_kind, fmax, fmin,
                                        ref_binary, ref_unary, total_order_key, unsigned)
from xlaprobe.lax_rules.opspec import (ABOVE_MINUS_ONE, ALL, ANGLE, ANY, APPROX, AT_LEAST_ONE,
                                       BOOL, DISCONTINUOUS, DIV_NOTE, EDGE, FLOATS, FTZ, GAMMA,
                                       ILL, INTS, MODERATE, NO_NAN, NONZERO, NUMERIC, POSITIVE,
                                       RANK0, SIGNED, UNIT, X64, Aval, Context, Domain, Operand,
                                       OpRule, Sample, Sampler, abs_bounds, add_bounds, binary,
                                       bits, call, choice, dtype_of, elementwise_sampler, fixed,
                                       hull, int_exact, int_range, is_float, is_int,
                                       mantissa_bits, max_bounds, min_bounds, monotone,
                                       mul_bounds, same, square_bounds, unary)
from xlaprobe.lax_rules.record import PrimitiveDef

__all__ = ["DEFINITIONS"]

# =============================================================================================
# reference rules (float64 NumPy)

# ---------------------------------------------------------------------------------------------
# elementwise: special functions

_frompy = lambda f: (lambda x: np.asarray(np.frompyfunc(f, 1, 1)(x), np.float64))  # noqa: E731


def _safe_lgamma(v: float) -> float:
    try:
        return math.lgamma(v)
    except ValueError:  # poles at 0, -1, -2, ...
        return math.inf


_erf = _frompy(math.erf)
_erfc = _frompy(math.erfc)
_lgamma = _frompy(_safe_lgamma)


def _digamma(x: np.ndarray) -> np.ndarray:
    """psi(x) by reflection, recurrence up to 10 and the asymptotic series; at the poles -inf at
    zero (of either sign) and NaN at the negative integers (XLA since jax 0.11; NaN at 0 before)."""
    x = np.asarray(x, np.float64)
    poles = (x <= 0) & (x == np.floor(x))
    reflect = x < 0.5
    # tan has period pi: x - round(x) is exact and keeps a tiny x whole (x - floor(x) rounded
    # -1e-38 to 1.0 and gave psi 2.6e16 for 8.5e37: a false alarm at special input values).
    frac = x - np.round(x)
    with np.errstate(divide="ignore"):  # tan is 0 at the integers: poles, masked below
        cot_term = np.where(reflect, np.pi / np.tan(np.pi * frac), 0.0)
    y = np.where(reflect, 1.0 - x, x)
    acc = np.zeros_like(y)
    for _ in range(10):
        small = y < 10
        acc = acc - np.where(small, 1.0 / y, 0.0)
        y = np.where(small, y + 1.0, y)
    inv2 = 1.0 / (y * y)
    series = np.log(y) - 0.5 / y - inv2 * (1 / 12 - inv2 * (1 / 120 - inv2 * (
        1 / 252 - inv2 * (1 / 240 - inv2 * (1 / 132 - inv2 * (691 / 32760))))))
    psi = acc + series
    psi = np.where(reflect, psi - cot_term, psi)
    return np.where(x == 0, -np.inf, np.where(poles, np.nan, psi))


def _erf_inv(y: np.ndarray) -> np.ndarray:
    """Inverse error function: Winitzki's approximation, then Halley steps on erfc (float64)."""
    y = np.asarray(y, np.float64)
    a = np.abs(y)
    one_minus = 1.0 - a  # exact for a >= 0.5 (Sterbenz), where erfc keeps the precision
    ln = np.log(one_minus * (1.0 + a))
    k = 0.147
    t = 2 / (np.pi * k) + ln / 2
    x = np.sqrt(np.maximum(np.sqrt(t * t - ln / k) - t, 0.0))
    inside = (a > 0) & (a < 1)
    x = np.where(inside, x, 0.0)
    for _ in range(4):
        f = np.where(a < 0.5, _erf(x) - a, one_minus - _erfc(x))  # erf(x) - a, both ways
        deriv = 2 / math.sqrt(math.pi) * np.exp(-x * x)
        step = np.where(inside, f / deriv, 0.0)
        x = x - step / (1 + x * step)
    x = np.where(a == 1, np.inf, np.where(a > 1, np.nan, x))
    x = np.where(np.isnan(y), np.nan, x)
    return np.where(a == 0, y, np.copysign(x, y))


def _logistic(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _round(ctx: RuleContext, x: np.ndarray, *, rounding_method: Any = 0, **_: Any) -> np.ndarray:
    if int(rounding_method) == 1:  # TO_NEAREST_EVEN
        return np.rint(x)
    t = np.trunc(x)  # AWAY_FROM_ZERO; floor(|x| + 0.5) would round 0.49999999999999994 up
    return np.copysign(np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t), x)


def _sign(ctx: RuleContext, x: np.ndarray, **_: Any) -> np.ndarray:
    if dtype_kind(ctx.in_dtypes[0]) in "fc":
        return np.where(x == 0, x, np.sign(x))  # sign(-0.0) is -0.0 on XLA
    return np.sign(x)


def _integer_pow(ctx: RuleContext, x: np.ndarray, *, y: int, **_: Any) -> np.ndarray:
    if dtype_kind(ctx.in_dtypes[0]) in "fc":
        return np.power(x, float(y)) if dtype_kind(ctx.in_dtypes[0]) == "f" else x ** y
    result = np.ones_like(x)
    base, n = x.copy(), abs(int(y))
    while n:  # binary powering in the dtype: wraps exactly like XLA's multiply chain
        if n & 1:
            result = result * base
        base = base * base
        n >>= 1
    return result


def _nextafter(ctx: RuleContext, x: np.ndarray, y: np.ndarray, **_: Any) -> np.ndarray:
    dtype = ctx.in_dtypes[0]  # the neighbour of x in the program's dtype, not in float64
    return np.nextafter(x.astype(dtype), y.astype(dtype)).astype(np.float64)


def _reduce_precision(ctx: RuleContext, x: np.ndarray, *, exponent_bits: int, mantissa_bits: int,
                      **_: Any) -> np.ndarray:
    """XLA's bit-level ReducePrecision on the operand's dtype (denormals of the reduced format flush)."""
    dtype = np.dtype(ctx.in_dtypes[0])
    info = jdtypes.finfo(dtype)
    src_mant, src_exp = int(info.nmant), int(info.nexp)
    if mantissa_bits >= src_mant and exponent_bits >= src_exp:
        return x
    nbits = dtype.itemsize * 8
    uint = np.dtype(f"uint{nbits}")
    # astype with order C, not ascontiguousarray: that turns a rank-0 value into shape (1,).
    bits = np.asarray(x).astype(dtype, order="C").view(uint).astype(np.uint64)
    one = np.uint64(1)
    if mantissa_bits < src_mant:
        shift = np.uint64(src_mant - mantissa_bits)
        last_bit = (bits >> shift) & one
        bias = (one << (shift - one)) - one + last_bit
        bits = (bits + bias) & ~((one << shift) - one)
    if exponent_bits < src_exp:
        sign = bits & (one << np.uint64(nbits - 1))
        exp_mask = np.uint64(((1 << src_exp) - 1) << src_mant)
        diff = (1 << (src_exp - 1)) - (1 << (exponent_bits - 1))
        max_exp = diff + (1 << exponent_bits) - 2
        exponent = bits & exp_mask
        overflow = exponent > np.uint64(max_exp << src_mant)
        underflow = exponent <= np.uint64(diff << src_mant)
        bits = np.where(overflow, sign | exp_mask, np.where(underflow, sign, bits))
    out = bits.astype(uint).view(dtype).astype(np.float64)
    return np.where(np.isnan(x), x, out)


# ---------------------------------------------------------------------------------------------
# elementwise: integer semantics


def _int_div(ctx: RuleContext, x: np.ndarray, y: np.ndarray, **_: Any) -> np.ndarray:
    kind = dtype_kind(ctx.in_dtypes[0])
    if kind in "fc":
        return x / y
    x, y = np.broadcast_arrays(x, y)
    zero = y == 0
    overflow = np.zeros_like(zero)
    if kind == "i":
        overflow = (x == np.iinfo(x.dtype).min) & (y == -1)
    safe = np.where(zero | overflow, np.ones_like(y), y)
    q = x // safe
    q = np.where((q * safe != x) & ((x < 0) != (safe < 0)), q + 1, q)  # floor -> truncate
    q = np.where(overflow, x, q)  # INT_MIN / -1 = INT_MIN
    return np.where(zero, np.array(-1).astype(x.dtype), q)  # x / 0 = -1 (all ones if unsigned)


def _rem(ctx: RuleContext, x: np.ndarray, y: np.ndarray, **_: Any) -> np.ndarray:
    if dtype_kind(ctx.in_dtypes[0]) in "fc":
        return np.fmod(x, y)
    x, y = np.broadcast_arrays(x, y)
    zero = y == 0
    overflow = np.zeros_like(zero)
    if dtype_kind(ctx.in_dtypes[0]) == "i":
        overflow = (x == np.iinfo(x.dtype).min) & (y == -1)
    safe = np.where(zero | overflow, np.ones_like(y), y)
    r = np.fmod(x, safe)  # C semantics: sign of the dividend
    return np.where(zero, x, np.where(overflow, np.zeros_like(x), r))


def _shift(kind: str) -> Rule:
    def rule(ctx: RuleContext, x: np.ndarray, y: np.ndarray, **_: Any) -> np.ndarray:
        x, y = np.broadcast_arrays(x, y)
        nbits = x.dtype.itemsize * 8
        uint = unsigned(x.dtype)
        amount = y.astype(uint)  # XLA reads shift amounts as unsigned
        ok = amount < nbits
        s = np.where(ok, amount, 0).astype(uint)
        if kind == "left":
            out = (x.astype(uint) << s).astype(x.dtype)
            return np.where(ok, out, np.zeros_like(x))
        if kind == "logical":
            out = (x.astype(uint) >> s).astype(x.dtype)
            return np.where(ok, out, np.zeros_like(x))
        signed = x.astype(np.dtype(f"int{nbits}"))
        out = (signed >> s.astype(signed.dtype)).astype(x.dtype)
        fill = np.where(signed < 0, -1, 0).astype(signed.dtype).astype(x.dtype)
        return np.where(ok, out, fill)
    return rule


def _population_count(ctx: RuleContext, x: np.ndarray, **_: Any) -> np.ndarray:
    return np.bitwise_count(x.astype(unsigned(x.dtype))).astype(x.dtype)


def _clz(ctx: RuleContext, x: np.ndarray, **_: Any) -> np.ndarray:
    nbits = x.dtype.itemsize * 8
    v = x.astype(unsigned(x.dtype)).astype(np.uint64)
    length = np.zeros(v.shape, np.int64)
    for s in (32, 16, 8, 4, 2, 1):
        big = v >= np.uint64(1 << s)
        length += np.where(big, s, 0)
        v = np.where(big, v >> np.uint64(s), v)
    length += (v > 0).astype(np.int64)
    return (nbits - length).astype(x.dtype)


def _mulhi(ctx: RuleContext, x: np.ndarray, y: np.ndarray, **_: Any) -> np.ndarray:
    nbits = x.dtype.itemsize * 8
    if nbits < 64:
        wide = np.int64 if dtype_kind(x.dtype) == "i" else np.uint64
        return ((x.astype(wide) * y.astype(wide)) >> nbits).astype(x.dtype)
    prod = np.frompyfunc(lambda a, b: (int(a) * int(b)) >> 64, 2, 1)(x, y)
    mask = (1 << 64) - 1
    return np.array([int(v) & mask for v in np.ravel(prod)], np.uint64).reshape(
        np.shape(prod)).astype(x.dtype)


# ---------------------------------------------------------------------------------------------
# elementwise: min/max (floats NaN-propagating, see numeric.fmax), comparisons, select


def _max(ctx: RuleContext, x: np.ndarray, y: np.ndarray, **_: Any) -> np.ndarray:
    return fmax(x, y) if dtype_kind(ctx.in_dtypes[0]) == "f" else np.maximum(x, y)


def _min(ctx: RuleContext, x: np.ndarray, y: np.ndarray, **_: Any) -> np.ndarray:
    return fmin(x, y) if dtype_kind(ctx.in_dtypes[0]) == "f" else np.minimum(x, y)


def _clamp(ctx: RuleContext, lo: np.ndarray, x: np.ndarray, hi: np.ndarray, **_: Any) -> np.ndarray:
    if dtype_kind(ctx.in_dtypes[1]) == "f":
        return fmin(fmax(x, lo), hi)
    return np.minimum(np.maximum(x, lo), hi)


def _total_compare(op: Callable) -> Rule:
    def rule(ctx: RuleContext, x: np.ndarray, y: np.ndarray, **_: Any) -> np.ndarray:
        dtype = ctx.in_dtypes[0]
        return op(total_order_key(x, dtype), total_order_key(y, dtype))
    return rule


def _select_n(ctx: RuleContext, which: np.ndarray, *cases: np.ndarray, **_: Any) -> np.ndarray:
    if len(cases) == 1:
        return cases[0]
    if which.dtype == np.bool_:
        return np.where(which, cases[1], cases[0])
    which = np.clip(which.astype(np.int64), 0, len(cases) - 1)
    out = cases[0]
    for i, case in enumerate(cases[1:], start=1):
        out = np.where(which == i, case, out)
    return out


# ---------------------------------------------------------------------------------------------
# conversions


def _convert_element_type(ctx: RuleContext, x: np.ndarray, *, new_dtype: Any, **_: Any) -> np.ndarray:
    src, dst = ctx.in_dtypes[0], np.dtype(ctx.out_dtype)
    skind, dkind = dtype_kind(src), dtype_kind(dst)
    if dkind in "fc":
        if skind == "c" and dkind == "f":
            return np.real(x)
        return x.astype(carrier(dst))  # float64 mode: no rounding between float dtypes
    if dkind == "b":
        return x != 0
    if skind == "f":  # XLA:CPU: truncate toward zero, saturate, NaN -> 0
        info = np.iinfo(dst)
        t = np.trunc(x)
        hi_excl, lo = float(info.max) + 1.0, float(info.min)
        bad = np.isnan(t) | (t >= hi_excl) | (t < lo)
        out = np.where(bad, 0.0, t).astype(dst)
        out = np.where(t >= hi_excl, info.max, out)
        return np.where(t < lo, info.min, out).astype(dst)
    if skind == "c":
        return _convert_element_type(dataclasses.replace(ctx, in_dtypes=(np.dtype(np.float64),)),
                                     np.real(x), new_dtype=new_dtype)
    return x.astype(dst)  # integer narrowing wraps


def _bitcast_convert_type(ctx: RuleContext, x: np.ndarray, *, new_dtype: Any, **_: Any) -> np.ndarray:
    src, dst = np.dtype(ctx.in_dtypes[0]), np.dtype(new_dtype)
    raw = np.asarray(x).astype(src, order="C")  # ascontiguousarray would make rank 0 shape (1,)
    if src.itemsize == dst.itemsize:
        return raw.view(dst)
    if src.itemsize > dst.itemsize:
        return raw.reshape(raw.shape + (1,)).view(dst)
    return raw.view(dst).reshape(raw.shape[:-1])


# ---------------------------------------------------------------------------------------------
# arithmetic: pow, polynomial


def _pow(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """IEEE 754 pow (C99 Annex F), as XLA computes it, for any shapes that broadcast.

    NumPy takes shortcuts when the exponent is a scalar or 0-d array (0.5 -> sqrt, 2 -> square):
    ``np.power(-inf, 0.5)`` is NaN and ``np.power(-0.0, 0.5)`` is -0.0, where pow gives +inf and
    +0. Contiguous flat copies never take them (a broadcast view, stride 0, still does).

    >>> _pow(np.array([-np.inf, -0.0, 4.0]), np.array(0.5)).tolist()
    [inf, 0.0, 2.0]
    >>> float(_pow(np.array(-np.inf), np.array(0.5)))
    inf
    """
    xb, yb = np.broadcast_arrays(x, y)
    return np.power(np.array(xb, order="C").reshape(-1),
                    np.array(yb, order="C").reshape(-1)).reshape(xb.shape)


def _polynomial(ctx: RuleContext, x: np.ndarray, *coeffs: np.ndarray, **_: Any) -> np.ndarray:
    """``lax.polynomial`` (jax >= 0.12; ``jax.scipy.special`` and ``odeint`` use it): the sum of
    ``coeffs[k] * x**k``, lowest degree first, by Horner's rule from the highest coefficient, as
    XLA's lowering computes it. In native mode every multiply and add is rounded to the output
    dtype, as the lowering's separate ops are, so the error budget sees Horner's real rounding.

    >>> ctx = type("C", (), {"native": False, "out_dtype": np.dtype(np.float32),
    ...                      "out_shapes": ((),)})()
    >>> float(_polynomial(ctx, np.float64(3.0), np.float64(1), np.float64(5), np.float64(2)))
    34.0
    """
    native = ctx.native and dtype_kind(ctx.out_dtype) in "fc"

    def rounded(v: Any) -> Any:
        v = np.asarray(v)
        return v.astype(ctx.out_dtype).astype(v.dtype) if native else v

    acc = np.asarray(coeffs[-1])
    for c in reversed(coeffs[:-1]):
        acc = rounded(rounded(acc * x) + c)
    return np.broadcast_to(acc, ctx.out_shapes[0])


# =============================================================================================
# generator samplers and parameters


def _division_sampler(exact_floats: bool) -> Sampler:
    """Operands of a division or remainder: integer divisors fresh, without 0 and -1
    (`DIV_NOTE`); floating operands exact where `exact_floats` (a discontinuous remainder)."""
    float_sampler = elementwise_sampler(2, [ANY, ANY], [exact_floats, exact_floats])
    int_sampler = elementwise_sampler(2, [ANY, NONZERO], [False, False], const_p=0.0)

    def sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
        return (float_sampler if is_float(aval.dtype) else int_sampler)(rng, aval, ctx)
    return sample


def _shift_sampler() -> Sampler:
    def sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
        nbits = bits(aval.dtype)
        lo, hi = int_range(aval.dtype)
        # Amounts around the bit width (shifts by >= width are defined: 0 or the sign fill).
        amounts = Domain("shift amount", lo=max(lo, -1), hi=min(hi, nbits + 1), specials=False)
        if rng.random() < 0.3:
            const = np.asarray(rng.integers(0, nbits + 2), aval.dtype)
            return Sample((Operand(aval), Operand(aval, amounts, const=const)), {})
        return Sample((Operand(aval), Operand(aval, amounts)), {})
    return sample


def _integer_pow_params(rng: np.random.Generator, aval: Aval) -> dict[str, Any]:
    low = -2 if is_float(aval.dtype) else 0
    return {"y": int(rng.integers(low, 6))}


def _reduce_precision_params(rng: np.random.Generator, aval: Aval) -> dict[str, Any]:
    info = ml_dtypes.finfo(aval.dtype)
    return {"exponent_bits": int(rng.integers(2, int(info.nexp) + 1)),
            "mantissa_bits": int(rng.integers(0, int(info.nmant) + 1))}


def _round_params(rng: np.random.Generator, aval: Aval) -> dict[str, Any]:
    return {"rounding_method": choice(rng, [lax.RoundingMethod.AWAY_FROM_ZERO,
                                             lax.RoundingMethod.TO_NEAREST_EVEN])}

# select, clamp, conversions


def _select_n_sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
    if rng.random() < 0.7:
        pred = Operand(aval.with_dtype("bool"))
        return Sample((pred,) + same(aval, 2), {})
    n = int(rng.integers(2, 4))
    which = Operand(aval.with_dtype("int32"), Domain("case index", lo=0, hi=n - 1, specials=False),
                    fresh=True)
    return Sample((which,) + same(aval, n), {})


def _clamp_sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
    scalar = Aval((), aval.dtype)
    if rng.random() < 0.6:
        lo = ctx.constant(scalar, ANY, rng)
        hi = ctx.constant(scalar, ANY, rng)
        lo, hi = (lo, hi) if (lo <= hi or rng.random() < 0.1) else (hi, lo)
        return Sample((Operand(scalar, const=lo), Operand(aval), Operand(scalar, const=hi)), {})
    bound = aval if rng.random() < 0.5 else scalar
    return Sample((Operand(bound), Operand(aval), Operand(bound)), {})


def _convert_sample() -> Sampler:
    def sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
        x64 = getattr(ctx, "x64", False)
        targets = [d for d in ALL + (X64 if x64 else ()) if d != aval.dtype.name]
        target = dtype_of(choice(rng, targets))
        if is_float(aval.dtype) and (is_int(target) or target == np.bool_):
            if target == np.bool_:
                operand = Operand(aval, ANY, exact=True)
            else:
                lo, hi = int_range(target)
                # Out-of-range and NaN conversions to integers are implementation-defined.
                operand = Operand(aval, Domain(f"{target.name} range", lo=lo, hi=hi, nan=False),
                                  exact=True)
        else:
            operand = Operand(aval)
        return Sample((operand,), {"new_dtype": target})
    return sample


def _convert_exact(avals: Sequence[Aval], params: dict[str, Any]) -> bool:
    src, dst = avals[0].dtype, dtype_of(params["new_dtype"])
    if not is_float(dst):
        return True
    if is_float(src):
        # Widening only: float64 mode does not round f32 -> f16, XLA does.
        return src == dst or (src.itemsize < dst.itemsize and
                              mantissa_bits(src) <= mantissa_bits(dst))
    if src == np.bool_:
        return True
    lo, hi = int_range(src)
    return max(abs(lo), hi).bit_length() <= mantissa_bits(dst)


def _bitcast_sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
    width = aval.dtype.itemsize
    same_width = [d for d in NUMERIC if dtype_of(d).itemsize == width and d != aval.dtype.name]
    narrower = [d for d in NUMERIC if dtype_of(d).itemsize < width]
    wider = [d for d in NUMERIC if dtype_of(d).itemsize > width]
    kind = choice(rng, ["same", "narrower", "wider"], [0.6, 0.25, 0.15])
    operand_aval = aval
    if kind == "narrower" and narrower:
        target = choice(rng, narrower)
    elif kind == "wider" and wider and aval.ndim >= 1:
        target = choice(rng, wider)
        ratio = dtype_of(target).itemsize // width
        operand_aval = aval.with_shape(aval.shape[:-1] + (ratio,))
    elif same_width:
        target = choice(rng, same_width)
    else:
        return None
    # Bits of a float: exact operands; NaN payloads are not preserved by every XLA op.
    float_source = is_float(aval.dtype)
    return Sample((Operand(operand_aval, NO_NAN if float_source else ANY, exact=float_source),),
                  {"new_dtype": dtype_of(target)})


# =============================================================================================
# the records


def _wrapper(name: str, wrapper: bool) -> str:
    return LAX_NAMES.get(name, name) if wrapper else ""


def _approximate(name: str, reference: Rule, generator: OpRule | None = None, *,
                 wrapper: bool = True, **budget: Any) -> PrimitiveDef:
    """A transcendental or friend: rounds, and XLA:CPU approximates it; `budget` holds its
    `Approximation` fields where it has an entry (else the default 2 ULPs)."""
    facts = PrimitiveFacts(name, rounding=True, approximate=True, elementwise=True,
                           wrapper=_wrapper(name, wrapper))
    return PrimitiveDef(facts, reference, generator,
                        Approximation(name, **budget) if budget else None)


def _rounded(name: str, reference: Rule, generator: OpRule | None = None, *,
             wrapper: bool = True) -> PrimitiveDef:
    """Elementwise arithmetic whose floating results IEEE arithmetic rounds."""
    return PrimitiveDef(PrimitiveFacts(name, rounding=True, elementwise=True,
                                       wrapper=_wrapper(name, wrapper)), reference, generator)


def _exact(name: str, reference: Rule, generator: OpRule | None = None, *, wrapper: bool = True,
           elementwise: bool = True, movement: Movement = Movement.NONE) -> PrimitiveDef:
    """An op whose result its operands determine exactly (a max, a select, a comparison)."""
    return PrimitiveDef(PrimitiveFacts(name, elementwise=elementwise, movement=movement,
                                       wrapper=_wrapper(name, wrapper)), reference, generator)


_EXP2_DOMAIN = {"bfloat16": Domain("[-4, 4]", -4.0, 4.0), "float16": Domain("[-8, 8]", -8.0, 8.0)}
_ANGLE_NOTE = "domain: |x| <= 100 (range reduction of huge arguments is approximate)"

#: Unary ops, in the fuzzer's catalogue order.
_UNARY = [
    _approximate("exp", ref_unary(np.exp), unary(
        "exp", lax.exp, domain=MODERATE, bounds=fixed(0.0, math.inf), notes=(APPROX,))),
    _approximate("exp2", ref_unary(np.exp2), unary(
        "exp2", lax.exp2, domain=lambda dtype: _EXP2_DOMAIN.get(dtype.name, MODERATE),
        bounds=fixed(0.0, math.inf), notes=(
            APPROX, "domain: |x| <= 4 in bfloat16, 8 in float16: JAX lowers exp2(x) as "
                    "exp(x * ln 2) with ln 2 rounded to the operand dtype (bfloat16: 0.6914), a "
                    "relative error of 0.0017 |x| (a JAX accuracy defect, not an XLA freedom)"))),
    _approximate("expm1", ref_unary(np.expm1), unary(
        "expm1", lax.expm1, domain=MODERATE, bounds=fixed(-1.0, math.inf), notes=(APPROX,))),
    _approximate("log", ref_unary(np.log), unary(
        "log", lax.log, domain=POSITIVE, notes=(APPROX, "domain: log of negatives is NaN"))),
    _approximate("log1p", ref_unary(np.log1p), unary(
        "log1p", lax.log1p, domain=ABOVE_MINUS_ONE, notes=(APPROX,)),
        ulps=4.0, measured="2.2 ULPs"),
    _approximate("tanh", ref_unary(np.tanh), unary(
        "tanh", lax.tanh, bounds=fixed(-1.0, 1.0), notes=(APPROX,)),
        ulps=6.0, measured="4.0 ULPs"),
    _approximate("logistic", ref_unary(_logistic), unary(
        "logistic", lax.logistic, bounds=fixed(0.0, 1.0), notes=(APPROX,)),
        ulps=3.0, measured="2.0 ULPs"),
    _approximate("sin", ref_unary(np.sin), unary(
        "sin", lax.sin, domain=ANGLE, bounds=fixed(-1.0, 1.0), notes=(APPROX, _ANGLE_NOTE))),
    _approximate("cos", ref_unary(np.cos), unary(
        "cos", lax.cos, domain=ANGLE, bounds=fixed(-1.0, 1.0), notes=(APPROX, _ANGLE_NOTE))),
    _approximate("tan", ref_unary(np.tan), unary(
        "tan", lax.tan, domain=ANGLE, exact=True, notes=(APPROX, ILL))),
    _approximate("asin", ref_unary(np.arcsin), unary(
        "asin", lax.asin, domain=UNIT, exact=True, bounds=fixed(-math.pi / 2, math.pi / 2),
        notes=(APPROX, EDGE)),
        ulps=3.0, measured="1.9 ULPs"),
    _approximate("acos", ref_unary(np.arccos), unary(
        "acos", lax.acos, domain=UNIT, exact=True, bounds=fixed(0.0, math.pi),
        notes=(APPROX, EDGE))),
    _approximate("atan", ref_unary(np.arctan), unary(
        "atan", lax.atan, bounds=fixed(-math.pi / 2, math.pi / 2), notes=(APPROX,)),
        ulps=4.0, measured="2.6 ULPs"),
    # sinh, cosh: error grows with |x| (about |x| / 2 ULPs: exp of a shifted argument), so the
    # argument part, not a flat width
    _approximate("sinh", ref_unary(np.sinh), unary(
        "sinh", lax.sinh, domain=MODERATE, notes=(APPROX,)),
        ulps=2.0, arg_ulps=1.0, measured="24.4 ULPs on [-80, 80], 5.5 at x = 10, 19 at 40: "
                                         "about |x| / 2"),
    _approximate("cosh", ref_unary(np.cosh), unary(
        "cosh", lax.cosh, domain=MODERATE, bounds=fixed(1.0, math.inf), notes=(APPROX,)),
        ulps=2.0, arg_ulps=1.0, measured="as sinh"),
    _approximate("asinh", ref_unary(np.arcsinh), unary("asinh", lax.asinh, notes=(APPROX,)),
                 ulps=4.0, measured="2.4 ULPs"),
    _approximate("acosh", ref_unary(np.arccosh), unary(
        "acosh", lax.acosh, domain=AT_LEAST_ONE, exact=True, bounds=fixed(0.0, math.inf),
        notes=(APPROX, EDGE)),
        ulps=4.0, measured="2.3 ULPs"),
    _approximate("atanh", ref_unary(np.arctanh), unary(
        "atanh", lax.atanh, domain=UNIT, exact=True, notes=(APPROX, EDGE)),
        ulps=4.0, measured="2.5 ULPs"),
    _rounded("sqrt", ref_unary(np.sqrt), unary(
        "sqrt", lax.sqrt, domain=POSITIVE, bounds=fixed(0.0, math.inf))),
    # exp, log, sin, cos, tan, expm1, cbrt, pow, rsqrt: <= 1.5 ULPs measured, the default budget
    _approximate("rsqrt", ref_unary(lambda x: 1.0 / np.sqrt(x)), unary(
        "rsqrt", lax.rsqrt, domain=POSITIVE, bounds=fixed(0.0, math.inf), notes=(APPROX,))),
    _approximate("cbrt", ref_unary(np.cbrt), unary(
        "cbrt", lax.cbrt, bounds=monotone(np.cbrt), notes=(APPROX, FTZ))),
    _approximate("erf", ref_unary(_erf), unary(
        "erf", lax.erf, bounds=fixed(-1.0, 1.0), notes=(APPROX,)),
        ulps=7.0, measured="4.5 ULPs"),
    _approximate("erfc", ref_unary(_erfc), unary(
        "erfc", lax.erfc, exact=True, bounds=fixed(0.0, 2.0), notes=(APPROX, ILL)),
        ulps=14.0, arg_ulps=1.0, measured=(
            "9.3 ULPs on [1, 4]; 62 ULPs in the tail (x in [4, 9.2]; relative condition 2 x^2), "
            "below float32's smallest normal it returns 0 (the oracle's ftz)")),
    _approximate("erf_inv", ref_unary(_erf_inv), unary(
        "erf_inv", lax.erf_inv, domain=UNIT, exact=True, notes=(APPROX, EDGE)),
        ulps=5.0, arg_ulps=1.0, measured=(
            "3.4 ULPs on (-0.9, 0.9); 62 ULPs at 0.926 and 37 within 1e-4 of +-1, where the "
            "argument part (erf_inv' is large) covers it")),
    _approximate("lgamma", ref_unary(_lgamma), unary("lgamma", lax.lgamma, domain=GAMMA, notes=(
        APPROX, "domain: x >= 0.05, across the zeros at 1 and 2 (XLA's error there is inside "
                "the measured budget of xlaprobe.approximations); off the poles at "
                "non-positive integers, where a producer's few-ULP error moves the pole")),
        ulps=6.0, measured=(
            "<= 3.7 ULPs everywhere, including near the zeros at 1, 2, -2.457, -2.748 and within "
            "1e-3 of the poles (relative to the true result)")),
    _approximate("digamma", ref_unary(_digamma), unary(
        "digamma", lax.digamma, domain=GAMMA, notes=(
            APPROX, "domain: x >= 0.05, across the zero at 1.46 (absolute error ~1e-6 there: the "
                    "measured budget of xlaprobe.approximations); off the poles")),
        ulps=5.0, arg_ulps=2.0, abs_eps=16.0, measured=(
            "absolute 1.3e-6 (10.6 eps) near its negative zeros, 8 eps on (0, 3]: huge in ULPs "
            "around the zero at 1.4616; 2.9 ULPs for x >= 10")),
    _exact("floor", ref_unary(np.floor), unary(
        "floor", lax.floor, exact=True, exact_result=True, bounds=monotone(np.floor),
        notes=(DISCONTINUOUS,))),
    _exact("ceil", ref_unary(np.ceil), unary(
        "ceil", lax.ceil, exact=True, exact_result=True, bounds=monotone(np.ceil),
        notes=(DISCONTINUOUS,))),
    _exact("round", _round, unary(
        "round", lax.round, exact=True, exact_result=True, params=_round_params,
        bounds=lambda b, p: (float(np.floor(b[0][0])), float(np.ceil(b[0][1]))),
        notes=(DISCONTINUOUS,))),
    _exact("is_finite", ref_unary(np.isfinite), unary(
        "is_finite", lax.is_finite, exact=True, exact_result=True, notes=(
            "exact operands: an intermediate that overflows float32 is finite in float64",))),
    _exact("reduce_precision", _reduce_precision, dataclasses.replace(
        unary("reduce_precision", lax.reduce_precision, exact=True, exact_result=True,
              params=_reduce_precision_params, notes=(DISCONTINUOUS, FTZ, RANK0)),
        min_rank=1), wrapper=False),
    _exact("neg", ref_unary(np.negative), unary(
        "neg", lax.neg, NUMERIC, exact_result=True, bounds=monotone(lambda x: -x, False),
        notes=("unsigned negation wraps",))),
    _exact("abs", ref_unary(np.abs), unary(
        "abs", lax.abs, FLOATS + SIGNED, exact_result=True, bounds=abs_bounds)),
    _exact("sign", _sign, unary(
        "sign", lax.sign, NUMERIC, exact=True, exact_result=True, bounds=fixed(-1.0, 1.0),
        notes=(DISCONTINUOUS,))),
    _rounded("square", ref_unary(lambda x: x * x), unary(
        "square", lax.square, NUMERIC, bounds=square_bounds, exact_result=int_exact)),
    _rounded("integer_pow", _integer_pow, unary(
        "integer_pow", lax.integer_pow, NUMERIC, params=_integer_pow_params,
        exact_result=int_exact, notes=("negative powers only for floats (JAX rejects them for "
                                       "integers)",)), wrapper=False),
    # Integer results of unary ops are exact whatever the rule says.
    _exact("not", ref_unary(np.invert), unary("not", lax.bitwise_not, INTS + BOOL)),
    _exact("population_count", _population_count,
           unary("population_count", lax.population_count, INTS)),
    _exact("clz", _clz, unary("clz", lax.clz, INTS)),
]

#: Binary and bitwise ops, in the fuzzer's catalogue order.
_BINARY = [
    _rounded("add", ref_binary(np.add), binary(
        "add", lax.add, NUMERIC, bounds=add_bounds, exact_result=int_exact,
        notes=("integer addition wraps",))),
    _rounded("sub", ref_binary(np.subtract), binary("sub", lax.sub, NUMERIC,
                                                    exact_result=int_exact)),
    _rounded("mul", ref_binary(np.multiply), binary(
        "mul", lax.mul, NUMERIC, bounds=mul_bounds, exact_result=int_exact,
        notes=("integer multiplication wraps (a compiler may not assume it does not)",))),
    _rounded("div", _int_div, OpRule(
        "div", "binary", 2, NUMERIC, _division_sampler(exact_floats=False), call(lax.div),
        exact_result=int_exact, notes=(DIV_NOTE,))),
    _rounded("rem", _rem, OpRule(
        "rem", "binary", 2, NUMERIC, _division_sampler(exact_floats=True), call(lax.rem),
        exact_result=int_exact, notes=(DIV_NOTE, "floating remainder is " + DISCONTINUOUS))),
    _approximate("pow", ref_binary(_pow), binary(
        "pow", lax.pow, FLOATS, exact=(False, True), notes=(
            APPROX, "exact exponents: pow of a negative base is NaN unless the exponent is an "
                    "integer, a discontinuity in the exponent"))),
    _approximate("atan2", ref_binary(np.arctan2), binary(
        "atan2", lax.atan2, FLOATS, exact=(True, True), notes=(
            APPROX, "exact operands: the branch cut on the negative x axis is " + DISCONTINUOUS))),
    _exact("nextafter", _nextafter, binary(
        "nextafter", lax.nextafter, FLOATS, exact=(True, True), exact_result=True,
        notes=(DISCONTINUOUS, FTZ))),
    _exact("max", _max, binary("max", lax.max, ALL, exact_result=True, bounds=max_bounds,
                               notes=("NaN-propagating; max(-0, +0) = +0 (StableHLO)",))),
    _exact("min", _min, binary("min", lax.min, ALL, exact_result=True, bounds=min_bounds)),
    _exact("and", ref_binary(np.bitwise_and),
           binary("and", lax.bitwise_and, INTS + BOOL, family="bitwise")),
    _exact("or", ref_binary(np.bitwise_or),
           binary("or", lax.bitwise_or, INTS + BOOL, family="bitwise")),
    _exact("xor", ref_binary(np.bitwise_xor),
           binary("xor", lax.bitwise_xor, INTS + BOOL, family="bitwise")),
    _exact("shift_left", _shift("left"), OpRule(
        "shift_left", "bitwise", 2, INTS, _shift_sampler(), call(lax.shift_left),
        notes=("shift amounts around the bit width: >= width gives 0",))),
    _exact("shift_right_logical", _shift("logical"), OpRule(
        "shift_right_logical", "bitwise", 2, INTS, _shift_sampler(),
        call(lax.shift_right_logical))),
    _exact("shift_right_arithmetic", _shift("arithmetic"), OpRule(
        "shift_right_arithmetic", "bitwise", 2, INTS, _shift_sampler(),
        call(lax.shift_right_arithmetic), notes=("amounts >= width give the sign fill",))),
]

#: Comparisons (IEEE: NaN compares unequal), in the fuzzer's catalogue order.
_COMPARE = [
    _exact(name, ref_binary(ref), binary(name, fn, ALL, exact=(True, True), exact_result=True,
                                         family="compare", notes=(DISCONTINUOUS,)))
    for name, ref, fn in (("eq", np.equal, lax.eq), ("ne", np.not_equal, lax.ne),
                          ("lt", np.less, lax.lt), ("le", np.less_equal, lax.le),
                          ("gt", np.greater, lax.gt), ("ge", np.greater_equal, lax.ge))
]

#: Selects and conversions, in the fuzzer's catalogue order.
_SELECT_CONVERT = [
    _exact("select_n", _select_n, OpRule(
        "select_n", "select", -1, ALL, _select_n_sample,
        lambda which, *cases: lax.select_n(which, *cases),
        exact_result=True, bounds=lambda b, p: hull(b[1:]),
        notes=("integer case indices are fresh inputs in range (out of range is undefined)",))),
    _exact("clamp", _clamp, OpRule("clamp", "select", 3, ALL, _clamp_sample, call(lax.clamp),
                                   exact_result=True,
                                   notes=("lo > hi is allowed: clamp is max then min",))),
    _exact("convert_element_type", _convert_element_type, OpRule(
        "convert_element_type", "convert", 1, ALL, _convert_sample(),
        lambda x, *, new_dtype: lax.convert_element_type(x, new_dtype),
        exact_result=_convert_exact, weight=2.0, notes=(
            "every dtype pair; float to integer only of exact in-range values without NaN "
            "(out-of-range and NaN conversions are implementation-defined)",
            "float to bool only of exact values (x != 0 flips on flushed subnormals)")),
        wrapper=False, movement=Movement.CONVERT),
    _exact("bitcast_convert_type", _bitcast_convert_type, OpRule(
        "bitcast_convert_type", "convert", 1, NUMERIC, _bitcast_sample,
        lambda x, *, new_dtype: lax.bitcast_convert_type(x, new_dtype), exact_result=True,
        min_rank=1, notes=("floats: exact operands without NaN (payloads are not preserved by "
                           "every op)", "results may be NaN, Inf or subnormal", RANK0)),
        wrapper=False, elementwise=False, movement=Movement.BITCAST),
]

#: Elementwise primitives the fuzzer does not generate (newer, internal or complex-valued).
_NOT_GENERATED = [
    _approximate("log2", ref_unary(np.log2), wrapper=False),
    _rounded("add_any", ref_binary(np.add), wrapper=False),
    # jax >= 0.11 (tanh's derivative): XLA lowers it as (1 + x) * (1 - x)
    _rounded("one_minus_square", ref_unary(lambda x: (1 + x) * (1 - x)), wrapper=False),
    _rounded("polynomial", _polynomial, wrapper=False),
    _exact("real", ref_unary(np.real)),
    _exact("imag", ref_unary(np.imag)),
    _exact("eq_to", _total_compare(np.equal), wrapper=False),
    _exact("le_to", _total_compare(np.less_equal), wrapper=False),
    _exact("lt_to", _total_compare(np.less), wrapper=False),
    _exact("mulhi", _mulhi, wrapper=False),
    _exact("complex", ref_binary(lambda x, y: x + 1j * y), wrapper=False),
    _exact("conj", ref_unary(np.conj), wrapper=False),
]

#: Every elementwise primitive's record, in the fuzzer's catalogue order (module docstring).
DEFINITIONS: tuple[PrimitiveDef, ...] = (*_UNARY, *_BINARY, *_COMPARE, *_SELECT_CONVERT,
                                         *_NOT_GENERATED)
