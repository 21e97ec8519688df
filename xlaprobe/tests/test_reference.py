"""The NumPy reference interpreter (configs/reference.py): known answers first, then agreement with
XLA:CPU on a table of records (one or more per rule), then Hypothesis properties.

Known answers: each real XLA:CPU bug of jaxlib 0.10.2 (cases/xla_cpu_bugs) with its right value,
written out here. Agreement: floating results within a few float32 ULPs of `jax.jit`, integer and
boolean results exactly. Where XLA's own answer is wrong the record is absent and a known answer
stands in (negative convolution padding in float32, narrow scatter indices).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax import lax

from jax._src.lax.lax import mulhi as _mulhi

from xlaprobe import primitives
from xlaprobe.configs import Configuration, get_kind
from xlaprobe.configs import reference
from xlaprobe.configs.reference import RULES, evaluate
from xlaprobe.errors import InvalidArgument, UnsupportedPrimitive
from xlaprobe.program import Program, Provenance

F32 = np.float32
HYPOTHESIS = settings(max_examples=12, deadline=None, derandomize=True, database=None)


def _program(fn: Callable[..., Any], *args: Any) -> Program:
    return Program.from_function(fn, args, Provenance("user", getattr(fn, "__name__", "fn")))


def _run(fn: Callable[..., Any], *args: Any, native: bool = False) -> list[np.ndarray]:
    program = _program(fn, *args)
    return evaluate(program.jaxpr, program.inputs, round_each_op=native)


def _is_float(dtype: Any) -> bool:
    return jnp.issubdtype(dtype, jnp.floating)


def _assert_matches_xla(fn: Callable[..., Any], args: tuple[Any, ...], rtol: float = 1e-6,
                        atol: float = 1e-30) -> None:
    """Reference outputs equal jax.jit's: floats within rtol/atol (NaN and inf in the same places),
    integers and booleans exactly, with the dtypes evaluate() promises."""
    got = _run(fn, *args)
    want = [np.asarray(w) for w in jax.tree_util.tree_leaves(jax.jit(fn)(*args))]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        if _is_float(w.dtype):
            assert g.dtype == np.float64
            w = w.astype(np.float64)
            np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
            np.testing.assert_array_equal(np.isinf(g), np.isinf(w))
            finite = np.isfinite(w)
            np.testing.assert_array_equal(g[~finite & ~np.isnan(w)], w[~finite & ~np.isnan(w)])
            np.testing.assert_allclose(g[finite], w[finite], rtol=rtol, atol=atol)
        else:
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)


# --------------------------------------------------------------------------------------------
# Known answers: the real XLA:CPU bugs of jaxlib 0.10.2 (XLA is wrong, the reference must not be)


def test_scatter_add_with_uint8_index_200_into_300_elements():
    dnums = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                        scatter_dims_to_operand_dims=(0,))
    (out,) = _run(lambda o, i, u: lax.scatter_add(o, i, u, dnums), np.arange(300, dtype=np.int32),
                  np.array([[200]], np.uint8), np.array([5000], np.int32))
    want = np.arange(300, dtype=np.int32)
    want[200] = 5200
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, want)


def test_int8_square_wraps_then_select_abs():
    def program(b):
        p = b * b
        return jnp.where(p < 0, jnp.abs(p), p)

    (out,) = _run(program, np.array([13, 9, 21, 3, 16], np.int8))
    # 169 -> -87, 81, 441 -> -71, 9, 256 -> 0; then abs of the negatives
    np.testing.assert_array_equal(out, np.array([87, 81, 71, 9, 0], np.int8))
    assert out.dtype == np.int8


def test_cbrt_of_float32_subnormals():
    tiny = np.finfo(np.float32).tiny
    x = np.array([tiny / 2, 3e-41, 2e-44, 8.0, -27.0, -3e-41], np.float32)
    (out,) = _run(jnp.cbrt, x)
    np.testing.assert_allclose(out, np.cbrt(x.astype(np.float64)), rtol=1e-15)
    assert out[0] == pytest.approx(2.0 ** (-127 / 3), rel=1e-14, abs=0)  # tiny / 2 = 2**-127
    np.testing.assert_allclose(out[3:5], [2.0, -3.0], rtol=1e-15)
    assert out[5] < 0


def test_subnormals_are_not_flushed():
    # XLA:CPU flushes float32 subnormals to zero (a legal freedom the oracle labels); the reference
    # computes with them exactly.
    x = np.array([1e-40, -1e-40], F32)
    sqrt, sign, to_bool, prod = _run(
        lambda x: (jnp.sqrt(jnp.abs(x)), jnp.sign(x), x.astype(bool), x * 1e30), x)
    np.testing.assert_allclose(sqrt, np.sqrt(np.abs(x.astype(np.float64))), rtol=1e-15)
    np.testing.assert_array_equal(sign, [1.0, -1.0])
    np.testing.assert_array_equal(to_bool, [True, True])
    np.testing.assert_allclose(prod, x.astype(np.float64) * np.float64(np.float32(1e30)), rtol=1e-15)


def test_conv_negative_padding_crops():
    h, w, c = np.meshgrid(np.arange(15), np.arange(6), np.arange(8), indexing="ij")
    image = (1000 * h + 10 * w + c).astype(np.float32)[None]
    kernel = np.eye(8, dtype=np.float32).reshape(1, 1, 8, 8)
    dnums = lax.ConvDimensionNumbers((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2))
    (out,) = _run(lambda i, k: lax.conv_general_dilated(i, k, (1, 1), ((0, 0), (-5, 1)),
                                                        dimension_numbers=dnums), image, kernel)
    assert out.shape == (1, 15, 2, 8)
    np.testing.assert_array_equal(out[:, :, 0, :], image[:, :, 5, :])
    np.testing.assert_array_equal(out[:, :, 1, :], 0.0)


def test_while_loop_runs_once():
    out = _run(lambda: lax.while_loop(lambda c: c[0] < 1, lambda c: (c[0] + 3, c[1] + 1),
                                      (jnp.int32(0), jnp.int32(0))))
    assert [int(o) for o in out] == [3, 1]
    assert all(o.dtype == np.int32 for o in out)


def test_dynamic_update_slice_shifted_self_update():
    def program(x):
        y = x + np.int32(1)
        return lax.dynamic_update_slice(y, y[:3], (1, 0, 0)).reshape((1, 4, 1))

    (out,) = _run(program, np.arange(4, dtype=np.int32).reshape(4, 1, 1))
    np.testing.assert_array_equal(out, np.array([1, 1, 2, 3], np.int32).reshape(1, 4, 1))


def test_masked_scores_minus_max():
    def program(mask, scores):
        s = scores + (-1.0 * 1e30 * (1.0 - mask))
        return s - s.max()

    (out,) = _run(program, np.float32(1.0), np.array([0.9, 0.6], np.float32))
    np.testing.assert_allclose(out, [0.0, -0.3], atol=1e-7)


# --------------------------------------------------------------------------------------------
# Errors, the configuration kind, the rule table


def test_unsupported_primitive_names_it_and_the_file():
    program = _program(jnp.linalg.eigvals, np.eye(2, dtype=np.float32))  # general eig: no rule
    with pytest.raises(UnsupportedPrimitive) as info:
        evaluate(program.jaxpr, program.inputs)
    assert info.value.primitive == "eig"
    assert "'eig'" in str(info.value) and "xlaprobe/configs/reference.py" in str(info.value)


def test_wrong_input_count_is_invalid_argument():
    program = _program(jnp.sin, np.float32(1.0))
    with pytest.raises(InvalidArgument):
        evaluate(program.jaxpr, [])


@pytest.mark.parametrize("spec", ["reference", "reference:native"])
def test_configuration_specs_round_trip_and_run(spec):
    config = Configuration.parse(spec)
    assert str(config) == spec and Configuration.parse(str(config)) == config
    assert config.isolation_group == "default"
    kind = get_kind("reference")
    assert kind is reference.KIND and kind.name == "reference" and kind.description
    program = _program(lambda x: x / 3.0, np.float32(1.0))
    (out,) = kind.run(config, program.jaxpr, program.inputs)
    want = np.float64(np.float32(1.0 / 3.0)) if spec.endswith("native") else 1.0 / 3.0
    assert out == want and out.dtype == np.float64


@pytest.mark.parametrize("spec", ["reference:fast", "reference:O0",
                                  "reference[xla_cpu_enable_fast_math=true]",
                                  "reference:native[a=b]"])
def test_bad_reference_specs_are_invalid_arguments(spec):
    with pytest.raises(InvalidArgument) as info:
        Configuration.parse(spec)
    assert "\n" not in str(info.value) and "reference" in str(info.value)


def test_rule_names_are_known_primitives():
    # the registry's names are checked against jax's own (tests/test_primitives.py)
    assert set(RULES) - set(primitives.PRIMITIVES) == set()


# --------------------------------------------------------------------------------------------
# Native mode: each op rounded to the program's dtype, sums accumulated in it


def _r32(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).astype(np.float32).astype(np.float64)


def test_native_mode_rounds_each_elementwise_op_to_float32():
    x = np.array([0.1, 1.7, -2.3, 3e-3, 0.7777], np.float32)
    fn = lambda x: jnp.exp(jnp.sin(x) * 3.0) + x * x / 7.0  # noqa: E731
    (native,) = _run(fn, x, native=True)
    (exact,) = _run(fn, x)
    x64 = x.astype(np.float64)
    a = _r32(np.sin(x64))
    b = _r32(a * 3.0)
    c = _r32(np.exp(b))
    d = _r32(_r32(x64 * x64) / 7.0)
    want = _r32(c + d)
    assert native.dtype == np.float64
    np.testing.assert_array_equal(native, want)
    np.testing.assert_array_equal(_r32(native), native)
    assert np.any(native != exact)
    np.testing.assert_allclose(native, exact, rtol=1e-6)


def test_native_mode_accumulates_sums_in_float32():
    x = np.random.default_rng(1).standard_normal(1000).astype(np.float32)
    (native,) = _run(jnp.sum, x, native=True)
    (exact,) = _run(jnp.sum, x)
    assert native == np.float64(np.sum(x, dtype=np.float32))
    assert exact == pytest.approx(math.fsum(x.astype(np.float64)), rel=1e-12, abs=0)
    assert native != exact
    a, b = x.reshape(20, 50), x.reshape(50, 20)
    (native,) = _run(jnp.matmul, a, b, native=True)
    (exact,) = _run(jnp.matmul, a, b)
    np.testing.assert_array_equal(native, np.matmul(a, b).astype(np.float64))
    np.testing.assert_allclose(exact, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-12)
    assert np.any(native != exact)


def test_native_mode_rounds_bfloat16_and_float16():
    x = np.array([1.0, 3.0, 0.1], ml_dtypes.bfloat16)
    (native,) = _run(lambda x: x / 3.0, x, native=True)
    (exact,) = _run(lambda x: x / 3.0, x)
    np.testing.assert_array_equal(native, (x.astype(np.float64) / 3.0).astype(ml_dtypes.bfloat16)
                                  .astype(np.float64))
    np.testing.assert_allclose(exact, x.astype(np.float64) / 3.0, rtol=1e-15)
    h = np.array([60000.0, 2.0], np.float16)
    (native,) = _run(lambda h: h * 2.0, h, native=True)
    assert np.isinf(native[0]) and native[1] == 4.0
    assert _run(lambda h: h * 2.0, h)[0][0] == 120000.0  # float64 mode does not overflow


def test_default_mode_keeps_float64_through_conversions():
    (out,) = _run(lambda x: x.astype(jnp.bfloat16).astype(jnp.float32) * 1.0, np.float32(1.001))
    assert out == np.float64(np.float32(1.001))
    (out,) = _run(lambda x: x.astype(jnp.bfloat16).astype(jnp.float32), np.float32(1.001), native=True)
    assert out == 1.0


# --------------------------------------------------------------------------------------------
# Agreement with XLA:CPU, one record per rule family


@dataclasses.dataclass(frozen=True)
class Record:
    name: str
    fn: Callable[..., Any]
    args: Callable[[], tuple[Any, ...]]
    rtol: float = 1e-6
    atol: float = 1e-30


_RNG = np.random.default_rng(0)
_X = np.array([-3.7, -1.5, -0.5, -0.0, 0.0, 0.3, 0.5, 1.0, 2.5, 10.0], F32)
_POS = np.array([1e-30, 1e-3, 0.1, 0.5, 1.0, 2.0, 7.5, 1e3, 1e20], F32)
_UNIT = np.array([-0.999, -0.7, -0.5, -0.1, -0.0, 0.0, 0.2, 0.5, 0.9, 0.9999], F32)
# No subnormals: XLA:CPU flushes them to zero (a legal freedom; the reference does not flush).
_SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 3e38, -3e38, 2e-38], F32)
_I8 = np.array([-128, -127, -7, -1, 0, 1, 2, 7, 126, 127], np.int8)
_I8B = np.array([-1, 2, 0, 3, -128, 5, 0, -2, 127, 1], np.int8)
_U8 = np.array([0, 1, 7, 128, 200, 255, 13, 0, 64, 3], np.uint8)
_I32 = np.array([-2**31, -2**31 + 1, -1000, -1, 0, 1, 31, 32, 1000, 2**31 - 1], np.int32)
_I32B = np.array([-1, 7, 0, 33, -3, 0, 1, -32, 5, 2], np.int32)
_M = _RNG.standard_normal((3, 4)).astype(F32)
_M2 = _RNG.standard_normal((4, 5)).astype(F32)
_N = _RNG.standard_normal((2, 5, 6, 3)).astype(F32)  # NHWC image
_K = _RNG.standard_normal((3, 2, 3, 4)).astype(F32)  # HWIO kernel
_NHWC = ("NHWC", "HWIO", "NHWC")


def _unary(name: str, fn: Callable[..., Any], x: np.ndarray, rtol: float = 1e-6,
           atol: float = 1e-30) -> Record:
    return Record(name, fn, lambda: (x,), rtol, atol)


def _binary(name: str, fn: Callable[..., Any], x: np.ndarray, y: np.ndarray) -> Record:
    return Record(name, fn, lambda: (x, y))


def _gather_dnums(offset: tuple[int, ...], collapsed: tuple[int, ...], start: tuple[int, ...]):
    return lax.GatherDimensionNumbers(offset_dims=offset, collapsed_slice_dims=collapsed,
                                      start_index_map=start)


def _scatter_dnums(window: tuple[int, ...], inserted: tuple[int, ...], to_operand: tuple[int, ...]):
    return lax.ScatterDimensionNumbers(update_window_dims=window, inserted_window_dims=inserted,
                                       scatter_dims_to_operand_dims=to_operand)


_MODES = (lax.GatherScatterMode.CLIP, lax.GatherScatterMode.FILL_OR_DROP,
          lax.GatherScatterMode.PROMISE_IN_BOUNDS)
_ROWS = np.array([[0], [2], [-1], [3], [1], [1]], np.int32)

RECORDS: list[Record] = [
    # elementwise float
    _unary("neg", lax.neg, _SPECIAL), _unary("sign", lax.sign, _SPECIAL),
    _unary("floor", lax.floor, _X * 1.3), _unary("ceil", lax.ceil, _X * 1.3),
    _unary("round_away", lambda x: lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO),
           np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.49999997, -0.0, 3.7], F32)),
    _unary("round_even", lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN),
           np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.49999997, -0.0, 3.7], F32)),
    _unary("is_finite", lax.is_finite, _SPECIAL), _unary("exp", lax.exp, _X),
    _unary("exp2", lax.exp2, _X), _unary("log", lax.log, np.concatenate([_POS, [0.0, -1.0]]).astype(F32)),
    _unary("log1p", lax.log1p, _UNIT), _unary("expm1", lax.expm1, _X),
    _unary("tanh", lax.tanh, _X), _unary("logistic", lax.logistic, _X * 10),
    _unary("sin", lax.sin, _X), _unary("cos", lax.cos, _X, atol=1e-7), _unary("tan", lax.tan, _X),
    _unary("asin", lax.asin, _UNIT), _unary("acos", lax.acos, _UNIT), _unary("atan", lax.atan, _X),
    _unary("sinh", lax.sinh, _X), _unary("cosh", lax.cosh, _X), _unary("asinh", lax.asinh, _X),
    _unary("acosh", lax.acosh, np.array([0.5, 1.0, 1.5, 10.0, 1e10], F32)),
    _unary("atanh", lax.atanh, _UNIT, rtol=3e-6), _unary("sqrt", lax.sqrt, _SPECIAL),
    _unary("rsqrt", lax.rsqrt, _SPECIAL), _unary("cbrt", lax.cbrt, _X),
    _unary("erf", lax.erf, _X), _unary("erfc", lax.erfc, _X, rtol=1e-5),
    # XLA's float32 erf_inv, lgamma and digamma are off by ~3e-6 near 1 and near roots
    _unary("erf_inv", lax.erf_inv, np.concatenate([_UNIT, [1.0, -1.0, 1.5]]).astype(F32), rtol=1e-5),
    _unary("lgamma", lax.lgamma, np.array([0.1, 0.5, 1.5, 3.0, 7.5, 30.0, -0.5, -2.5, 0.0, -3.0], F32),
           rtol=1e-5),
    _unary("digamma", lax.digamma, np.array([0.1, 0.5, 3.0, 7.5, 30.0, -0.5, -2.5, 0.0, -3.0], F32),
           rtol=1e-5),
    _unary("abs", lax.abs, _SPECIAL), _unary("square", lax.square, _X),
    _unary("integer_pow", lambda x: (lax.integer_pow(x, 3), lax.integer_pow(x, -2),
                                     lax.integer_pow(x, 0)), _X),
    _unary("reduce_precision", lambda x: (lax.reduce_precision(x, 5, 10), lax.reduce_precision(x, 8, 7),
                                          lax.reduce_precision(x, 2, 1), lax.reduce_precision(x, 4, 3)),
           np.concatenate([_SPECIAL, _X, _POS, [65519.0, 65520.0, 1.00390625, 1.01171875]]).astype(F32),
           rtol=0),
    _binary("add", lax.add, _X, _X[::-1]), _binary("sub", lax.sub, _X, _X[::-1]),
    _binary("mul", lax.mul, _X, _X[::-1]), _binary("div", lax.div, _X, _X[::-1]),
    _binary("rem", lax.rem, _X, _X[::-1]), _binary("pow", lax.pow, np.abs(_X), _X[::-1]),
    _binary("pow_int", lax.pow, _X, np.arange(-3, 7, dtype=np.int32)),
    _binary("max", lax.max, _SPECIAL, _SPECIAL[::-1]), _binary("min", lax.min, _SPECIAL, _SPECIAL[::-1]),
    _binary("max_zeros", lambda a, b: (lax.max(a, b), lax.min(a, b)),
            np.array([0.0, -0.0, 0.0, -0.0, np.nan], F32), np.array([-0.0, 0.0, 0.0, -0.0, 1], F32)),
    _binary("atan2", lax.atan2, _SPECIAL, _SPECIAL[::-1]),
    _binary("nextafter", lax.nextafter, _SPECIAL, _SPECIAL[::-1]),
    _binary("compare", lambda a, b: (a == b, a != b, a < b, a <= b, a > b, a >= b), _SPECIAL, _SPECIAL[::-1]),
    Record("clamp", lambda lo, x, hi: lax.clamp(lo, x, hi), lambda: (F32(-1), _SPECIAL, F32(2))),
    Record("select_n", lambda p, a, b, c: (lax.select_n(p > 0, a, b), lax.select_n(p, a, b, c)),
           lambda: (np.array([0, 1, 2, 1, 0, 2, 0, 1, 2, 0], np.int32), _X, _X * 2, _X * 3)),
    # elementwise integer and boolean: exact
    _binary("int8_arith", lambda a, b: (a + b, a - b, a * b, -a, lax.abs(a), lax.sign(a), lax.square(a)),
            _I8, _I8B),
    _binary("int8_div_rem", lambda a, b: (lax.div(a, b), lax.rem(a, b)), _I8, _I8B),
    _binary("uint8_div_rem", lambda a, b: (lax.div(a, b), lax.rem(a, b), -a, a * b), _U8, _U8[::-1]),
    _binary("int32_div_rem", lambda a, b: (lax.div(a, b), lax.rem(a, b)), _I32, _I32B),
    _binary("int_minmax", lambda a, b: (lax.max(a, b), lax.min(a, b), lax.clamp(np.int8(-5), a, b)),
            _I8, _I8B),
    _binary("shifts_int8", lambda a, b: (lax.shift_left(a, b), lax.shift_right_logical(a, b),
                                         lax.shift_right_arithmetic(a, b)),
            _I8, np.array([7, 8, 9, -1, 0, 3, 100, 1, 6, 127], np.int8)),
    _binary("shifts_uint8", lambda a, b: (lax.shift_left(a, b), lax.shift_right_logical(a, b),
                                          lax.shift_right_arithmetic(a, b)),
            _U8, np.array([7, 8, 9, 255, 0, 3, 100, 1, 6, 1], np.uint8)),
    _binary("shifts_int32", lambda a, b: (lax.shift_left(a, b), lax.shift_right_logical(a, b),
                                          lax.shift_right_arithmetic(a, b)), _I32, _I32B),
    _binary("bitwise", lambda a, b: (a & b, a | b, a ^ b, ~a, (a > 0) & (b > 0), ~(a > 0),
                                     (a > 0) ^ (b > 0)), _I32, _I32B),
    _unary("population_count_clz", lambda a: (lax.population_count(a), lax.clz(a)), _I32),
    _unary("population_count_clz_u8", lambda a: (lax.population_count(a), lax.clz(a)), _U8),
    _unary("integer_pow_int8", lambda a: (lax.integer_pow(a, 3), lax.integer_pow(a, 2)), _I8),
    Record("mulhi", lambda a, b, c, d: (_mulhi(a, b), _mulhi(c, d)),
           lambda: (_I32, _I32B * 99991, _U8, _U8[::-1])),
    # conversions
    _unary("float_to_int", lambda x: tuple(lax.convert_element_type(x, d) for d in (
        jnp.int8, jnp.uint8, jnp.int16, jnp.uint16, jnp.int32, jnp.uint32, jnp.bool_)),
        np.concatenate([_SPECIAL, _X * 40, [3e9, -3e9, 127.9, 128.5, -129.5, 255.5, 65535.9]]).astype(F32)),
    _unary("int_to_other", lambda a: (lax.convert_element_type(a, jnp.int8), a.astype(jnp.float32),
                                      a.astype(jnp.uint16), a.astype(jnp.bool_)), _I32),
    _unary("float_to_float", lambda x: (x.astype(jnp.bfloat16), x.astype(jnp.float16)),
           np.array([0.1, 1.0, -2.5, 65504.0, 1e-8, 0.0], F32), rtol=4e-3, atol=6e-8),
    _unary("bool_to_number", lambda x: ((x > 0).astype(jnp.float32), (x > 0).astype(jnp.int32)), _X),
    _unary("bitcast", lambda x: (lax.bitcast_convert_type(x, jnp.int32),
                                 lax.bitcast_convert_type(x, jnp.uint16),
                                 lax.bitcast_convert_type(lax.bitcast_convert_type(x, jnp.uint8),
                                                          jnp.float32)),
           np.array([1.0, -2.5, 0.0, -0.0, np.inf, 3e-41, 1e30], F32)),
    # shape and structure
    _unary("broadcast_reshape_transpose", lambda x: (jnp.broadcast_to(x[:, None, :], (3, 2, 4)),
                                                     x.reshape(2, 6), x.T, x[::-1, ::-2],
                                                     x[None, :, None].squeeze((0, 2))), _M),
    _unary("slice_strided", lambda x: lax.slice(x, (0, 1), (3, 4), (2, 2)), _M),
    Record("dynamic_slice_clamps", lambda x, i, j: (lax.dynamic_slice(x, (i, j), (2, 3)),
                                                    lax.dynamic_slice(x, (j, i), (3, 1))),
           lambda: (_M, np.uint8(5), np.uint8(200))),
    Record("dynamic_update_slice_clamps", lambda x, u, i: lax.dynamic_update_slice(x, u, (i, np.int8(-3))),
           lambda: (_M, np.ones((2, 2), F32), np.int8(7))),
    _unary("pad_negative_interior", lambda x: (lax.pad(x, F32(9), ((1, -1, 1), (-2, 3, 2))),
                                               lax.pad(x, F32(9), ((-1, -1, 0), (0, 0, 0)))), _M),
    _unary("concatenate_split", lambda x: (jnp.concatenate([x, 2 * x], axis=1),
                                           *jnp.split(x, [1, 3], axis=1)), _M),
    _unary("iota", lambda x: (lax.broadcasted_iota(jnp.int32, (2, 3), 1), jnp.arange(5.0) + x,
                              lax.iota(jnp.uint8, 4)), F32(0.5)),
    _unary("stack_tile", lambda x: (jnp.stack([x, x], 1), jnp.tile(x, (2, 1))), _M),
    _unary("copy", lambda x: (jnp.copy(x), lax.optimization_barrier(x) + 1), _M),
    # reductions
    _unary("reduce_float", lambda x: (x.sum(1), x.max(0), x.min(), x.prod(1),
                                      lax.reduce_max_p.bind(x[:, :0], axes=(1,))), _M,
           rtol=3e-6),
    _unary("reduce_max_nan_zero", lambda x: (x.max(), x.min(), x[3:5].max(), x[3:5].min()), _SPECIAL),
    _unary("reduce_int", lambda a: (a.sum(), a.prod(), a.max(), a.min(), jnp.bitwise_and.reduce(a),
                                    jnp.bitwise_or.reduce(a), jnp.bitwise_xor.reduce(a)), _I8),
    _unary("reduce_bool", lambda x: (jnp.all(x > 0), jnp.any(x > 0),
                                     lax.reduce_xor_p.bind(x > 0, axes=(0,))), _X),
    _unary("argmax_argmin", lambda x: (jnp.argmax(x, 1), jnp.argmin(x, 1), jnp.argmax(x, 0)),
           np.array([[1, np.nan, 3, np.nan], [2, -0.0, 0.0, -1], [np.inf, np.inf, 1, 1]], F32)),
    _unary("cumulative", lambda x: (jnp.cumsum(x, 1), jnp.cumprod(x, 0), lax.cummax(x, 1, reverse=True),
                                    lax.cummin(x, 0), lax.cumlogsumexp(x, 1),
                                    lax.cumsum(x, 0, reverse=True)), _M, rtol=3e-6),
    _unary("cumulative_int8", lambda a: (jnp.cumsum(a, dtype=jnp.int8), lax.cummax(a, 0),
                                         lax.cumprod(a, 0)), _I8),
    _unary("sort", lambda x: (jnp.sort(x), jnp.argsort(x), jnp.sort(x.reshape(2, 5), axis=0)),
           np.array([1, np.nan, -0.0, 0.0, -np.nan, -1, -0.0, np.inf, 3, -np.inf], F32)),
    Record("sort_multi_operand", lambda k1, k2, v: lax.sort((k1, k2, v), num_keys=2),
           lambda: (np.array([2, 1, 2, 1, 0, 2], np.int32), np.array([0.5, 0.1, -0.5, 0.1, 9, 0.5], F32),
                    np.arange(6, dtype=np.int32))),
    _unary("top_k", lambda x: (lax.top_k(x, 4), lax.top_k(x.reshape(2, 5), 2)),
           np.array([1, np.nan, 3, -0.0, 0.0, 3, -np.nan, -np.inf, 2, 0.0], F32)),
    _unary("top_k_int", lambda a: lax.top_k(a, 5), _I8),
    # contractions
    Record("dot_general", lambda a, b: (a @ b, jnp.einsum("ij,kj->ik", a, a),
                                        jnp.einsum("bij,bjk->bik", jnp.stack([a, -a]), jnp.stack([b, b])),
                                        jnp.vdot(a, a), jnp.tensordot(a, a, ((0, 1), (0, 1)))),
           lambda: (_M, _M2), rtol=1e-5, atol=1e-6),
    Record("dot_general_int", lambda a, b: (jnp.matmul(a, b, preferred_element_type=jnp.int32), a @ b),
           lambda: (_I8.reshape(2, 5), _I8B.reshape(5, 2))),
    Record("conv_nhwc", lambda x, k: lax.conv_general_dilated(x, k, (1, 2), ((1, 0), (2, 1)),
                                                              dimension_numbers=_NHWC),
           lambda: (_N, _K), rtol=1e-5, atol=1e-5),
    Record("conv_dilated", lambda x, k: lax.conv_general_dilated(
        x, k, (2, 1), ((1, 2), (0, 3)), lhs_dilation=(2, 1), rhs_dilation=(1, 2), dimension_numbers=_NHWC),
        lambda: (_N, _K), rtol=1e-5, atol=1e-5),
    Record("conv_feature_groups", lambda x, k: lax.conv_general_dilated(
        x, k, (1, 1), "VALID", feature_group_count=3, dimension_numbers=_NHWC),
        lambda: (_N, _RNG.standard_normal((2, 2, 1, 6)).astype(F32)), rtol=1e-5, atol=1e-5),
    Record("conv_batch_groups", lambda x, k: lax.conv_general_dilated(
        x, k, (1,), "VALID", batch_group_count=2),
        lambda: (_RNG.standard_normal((4, 3, 5)).astype(F32), _RNG.standard_normal((6, 3, 2)).astype(F32)),
        rtol=1e-5, atol=1e-5),
    Record("conv_int_negative_padding", lambda x, k: lax.conv_general_dilated(
        x, k, (1, 1), ((-1, 2), (1, -2)), dimension_numbers=_NHWC),
        lambda: (np.arange(2 * 5 * 6 * 3, dtype=np.int32).reshape(2, 5, 6, 3) % 7 - 3,
                 np.arange(3 * 2 * 3 * 4, dtype=np.int32).reshape(3, 2, 3, 4) % 5 - 2)),
    # windows
    _unary("reduce_window", lambda x: (
        lax.reduce_window(x, -jnp.inf, lax.max, (2, 2), (1, 2), ((1, 0), (0, 1))),
        lax.reduce_window(x, jnp.inf, lax.min, (2, 1), (1, 1), "SAME"),
        lax.reduce_window(x, 0.0, lax.add, (2, 2), (1, 1), ((1, 1), (1, 1)), base_dilation=(2, 1),
                          window_dilation=(1, 2)),
        lax.reduce_window(x, 1.0, lax.mul, (2, 2), (1, 1), "VALID")), _M, rtol=3e-6),
    _unary("select_and_scatter_add", jax.grad(lambda x: jnp.sum(lax.reduce_window(
        x, -jnp.inf, lax.max, (2, 3), (1, 2), ((0, 1), (1, 1))) ** 2)), _M),
    _unary("select_and_scatter_add_ties", jax.grad(lambda x: jnp.sum(lax.reduce_window(
        x, -jnp.inf, lax.max, (2, 2), (1, 1), "VALID"))), np.array([[1, 1, 2], [1, 0, 2]], F32)),
    _unary("select_and_gather_add", lambda x: jax.jvp(lambda y: lax.reduce_window(
        y, -jnp.inf, lax.max, (2, 2), (1, 1), "SAME"), (x,), (x * 3,)), _M),
    # gather and scatter
    *[Record(f"gather_rows_{m.name}", lambda x, i, m=m: lax.gather(
        x, i, _gather_dnums((1,), (0,), (0,)), (1, 4), mode=m), lambda: (_M, _ROWS)) for m in _MODES],
    *[Record(f"gather_windows_{m.name}", lambda x, i, m=m: lax.gather(
        x, i, _gather_dnums((1, 2), (), (0,)), (2, 3), mode=m), lambda: (_M, _ROWS)) for m in _MODES],
    *[Record(f"scatter_add_rows_{m.name}", lambda x, i, u, m=m: lax.scatter_add(
        x, i, u, _scatter_dnums((1,), (0,), (0,)), mode=m),
        lambda: (_M, _ROWS, np.arange(24, dtype=F32).reshape(6, 4))) for m in _MODES],
    *[Record(f"scatter_windows_{m.name}", lambda x, i, u, m=m: (
        lax.scatter_add(x, i, u, _scatter_dnums((1, 2), (), (0,)), mode=m),
        lax.scatter_mul(x, i[:1], u[:1], _scatter_dnums((1, 2), (), (0,)), mode=m),
        lax.scatter_max(x, i, u, _scatter_dnums((1, 2), (), (0,)), mode=m),
        lax.scatter_min(x, i, u, _scatter_dnums((1, 2), (), (0,)), mode=m),
        lax.scatter_sub(x, i, u, _scatter_dnums((1, 2), (), (0,)), mode=m),
        lax.scatter(x, i[:2], u[:2], _scatter_dnums((1, 2), (), (0,)), mode=m)),
        lambda: (_M, _ROWS, np.arange(36, dtype=F32).reshape(6, 2, 3) - 10)) for m in _MODES],
    Record("gather_scatter_batching_dims", lambda x, i, u: (
        jax.vmap(lambda a, j: a[j])(x, i), jax.vmap(lambda a, j, v: a.at[j].add(v))(x, i, u)),
        lambda: (_N[0], np.array([[1, 5], [0, 2], [3, 3], [-1, 4], [2, 0]], np.int32),
                 np.ones((5, 2, 3), F32))),
    Record("indexing", lambda x, i: (x[i], x.at[i].set(0.0), x.at[i].multiply(2.0), x[i, ::2], x[:, i]),
           lambda: (_M, np.array([2, -1, 0], np.int32))),
    # control flow and calls
    _unary("scan_reverse", lambda x: lax.scan(lambda c, y: (c * 0.5 + y, (c, y * 2)), x[0], x, reverse=True),
           _M),
    _unary("fori_while", lambda x: (lax.fori_loop(0, 4, lambda i, c: c * 1.5 + i, x),
                                    lax.while_loop(lambda c: c[0] < 10.0, lambda c: (c[0] * 2 + 1, c[1] + 1),
                                                   (x[0, 0], 0))), _M),
    Record("cond_switch", lambda x, k: (lax.cond(x.sum() > 0, lambda: x, lambda: -x),
                                        lax.switch(k, [lambda: x, lambda: x * 2, lambda: x - 1])),
           lambda: (_M, np.int32(9))),
    _unary("calls", lambda x: (jax.jit(jnp.sin)(x), jax.checkpoint(jnp.cos)(x), jax.nn.relu(x),
                               jax.nn.gelu(x, approximate=False), jax.nn.softmax(x)), _M),
    Record("batched_while", jax.vmap(lambda x: lax.while_loop(lambda c: c[0] < 10.0,
                                                              lambda c: (c[0] * 2 + 1, c[1] + 1), (x, 0))),
           lambda: (np.array([0.0, 3.0, 20.0, -0.5], F32),)),
    _unary("generic_reduce", lambda x: (
        lax.reduce((x, lax.broadcasted_iota(jnp.int32, x.shape, 1)), (F32(-np.inf), np.int32(0)),
                   lambda a, b: (jnp.maximum(a[0], b[0]), jnp.where(a[0] >= b[0], a[1], b[1])), (1,)),
        lax.reduce(x, F32(0), lambda a, b: a * 0.5 + b, (0,))), _M),
    _unary("composite_platform_dependent", lambda x: (
        lax.composite(lambda y: y * 2 + 1, name="xlaprobe.test")(x),
        lax.platform_dependent(x, cpu=lambda y: y * 2, default=lambda y: y * 3)), _M),
    # PRNG: bit-exact with jax.random
    Record("random", lambda: (jax.random.normal(jax.random.key(0), (5,)),
                              jax.random.uniform(jax.random.PRNGKey(42), (2, 3)),
                              jax.random.bits(jax.random.fold_in(jax.random.key(3), 7), (4,), jnp.uint8),
                              jax.random.bits(jax.random.key(5), (3,), jnp.uint16),
                              jax.random.randint(jax.random.key(9), (6,), -5, 100),
                              jax.vmap(lambda k: jax.random.normal(k, (2,)))(
                                  jax.random.split(jax.random.key(1), 4)),
                              *[jax.random.uniform(k, (2,)) for k in jax.random.split(jax.random.key(3), 3)]),
           lambda: (), rtol=1e-6),
    Record("random_keys_through_control_flow", lambda data: _key_program(data),
           lambda: (np.array([0, 42], np.uint32),), rtol=1e-6),
]


def _key_program(data):
    key = jax.random.wrap_key_data(data)
    k2 = lax.fori_loop(0, 3, lambda i, k: jax.random.split(k)[0], key)
    total, bits = lax.scan(lambda c, k: (c + jax.random.uniform(k), jax.random.bits(k, (2,))), 0.0,
                           jax.random.split(key, 4))
    keys = jax.random.split(key, 6).reshape(2, 3)
    chosen = lax.cond(total > 2, lambda: keys[0, 1], lambda: keys[1, 2])
    return (total, bits, jax.random.bernoulli(jax.random.fold_in(k2, 3), 0.3, (10,)),
            jax.random.key_data(k2), jax.random.permutation(k2, 8),
            jax.random.categorical(key, jnp.zeros((2, 5))), jax.random.gamma(key, 2.0, (3,)),
            jax.random.truncated_normal(key, -1.0, 1.0, (3,)), jax.random.normal(chosen, (2,)),
            jax.random.key_data(keys[:, ::2]))


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.name)
def test_reference_matches_xla(record: Record):
    _assert_matches_xla(record.fn, record.args(), rtol=record.rtol, atol=record.atol)


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.name)
def test_native_mode_is_rounded_and_near_float64(record: Record):
    program = _program(record.fn, *record.args())
    native = evaluate(program.jaxpr, program.inputs, round_each_op=True)
    exact = evaluate(program.jaxpr, program.inputs)
    for n, e, var in zip(native, exact, program.jaxpr.jaxpr.outvars):
        assert n.dtype == e.dtype and n.shape == e.shape
        if _is_float(var.aval.dtype):
            np.testing.assert_array_equal(n.astype(var.aval.dtype).astype(np.float64), n)
            narrow = np.dtype(var.aval.dtype).itemsize < 4  # bfloat16 keeps 8 bits
            np.testing.assert_allclose(n, e, rtol=8e-3 if narrow else 1e-4, atol=1e-5)
        else:
            np.testing.assert_array_equal(n, e)


def test_threefry2x32_is_bit_exact():
    from jax._src.random.threefry2x32 import threefry_2x32
    key = np.array([0x13198A2E, 0x03707344], np.uint32)
    counts = np.arange(17, dtype=np.uint32) * np.uint32(2654435761)
    program = _program(threefry_2x32, key, counts)
    assert "threefry2x32" in str(program.jaxpr)
    (out,) = evaluate(program.jaxpr, program.inputs)
    np.testing.assert_array_equal(out, np.asarray(jax.jit(threefry_2x32)(key, counts)))


def test_callbacks_are_called():
    seen = []

    def host(a):
        seen.append(a.dtype)
        return np.asarray(a) * 2

    fn = lambda x: jax.pure_callback(host, jax.ShapeDtypeStruct(x.shape, x.dtype), x) + 1  # noqa: E731
    (out,) = _run(fn, np.array([1.5, 2.0], F32))
    np.testing.assert_array_equal(out, [4.0, 5.0])
    assert seen == [np.dtype(np.float32)]  # the callback sees the program's dtype

    def effect(x):
        jax.debug.callback(lambda v: seen.append(("debug", float(v))), x)
        return x + 1

    assert _run(effect, F32(3.0))[0] == 4.0
    assert seen[-1] == ("debug", 3.0)


def test_raw_jaxprs_with_call_primitives():
    @jax.custom_vjp
    def f(x):
        return jnp.sin(x)

    f.defvjp(lambda x: (jnp.sin(x), x), lambda x, g: (g * jnp.cos(x),))

    def fn(x):
        return jax.jit(lambda y: f(y) * 2)(x) + jax.checkpoint(jnp.exp)(x) + jax.nn.relu(x)

    x = np.array([0.5, -1.0], F32)
    closed = jax.make_jaxpr(fn)(x)  # not canonical: jit, custom_vjp_call, remat stay
    names = {e.primitive.name for e in closed.jaxpr.eqns}
    assert {"jit", "remat2"} <= names
    (out,) = evaluate(closed, [x])
    np.testing.assert_allclose(out, np.asarray(jax.jit(fn)(x)), rtol=1e-6)

    a = np.array([[4.0, 1.0], [1.0, 3.0]], F32)
    solve = lambda b: jax.scipy.sparse.linalg.cg(lambda v: a @ v, b)[0]  # noqa: E731
    closed = jax.make_jaxpr(solve)(x)
    assert "custom_linear_solve" in {e.primitive.name for e in closed.jaxpr.eqns}
    (out,) = evaluate(closed, [x])
    np.testing.assert_allclose(out, np.linalg.solve(a.astype(np.float64), x), rtol=1e-6)


# --------------------------------------------------------------------------------------------
# Hypothesis: random shapes and values for the elementwise family, contractions, gather/scatter

_SHAPES = st.lists(st.integers(0, 3), min_size=0, max_size=3).map(tuple)

_UNARY_DOMAINS: dict[str, tuple[Callable[..., Any], float, float]] = {
    "exp": (lax.exp, -80, 80), "log": (lax.log, 1e-30, 1e30), "log1p": (lax.log1p, -0.99, 1e6),
    "expm1": (lax.expm1, -50, 50), "tanh": (lax.tanh, -20, 20), "logistic": (lax.logistic, -60, 60),
    "sin": (lax.sin, -10, 10), "atan": (lax.atan, -1e4, 1e4), "sinh": (lax.sinh, -20, 20),
    "asinh": (lax.asinh, -1e4, 1e4), "sqrt": (lax.sqrt, 0, 1e30), "rsqrt": (lax.rsqrt, 1e-30, 1e30),
    "cbrt": (lax.cbrt, -1e30, 1e30), "erf": (lax.erf, -5, 5), "floor": (lax.floor, -1e6, 1e6),
    "round": (lax.round, -1e6, 1e6), "abs": (lax.abs, -1e6, 1e6), "square": (lax.square, -1e15, 1e15),
}


@HYPOTHESIS
@given(st.sampled_from(sorted(_UNARY_DOMAINS)), _SHAPES, st.data())
def test_unary_float_ops_match_xla(name, shape, data):
    fn, lo, hi = _UNARY_DOMAINS[name]
    lo, hi = float(np.float32(lo)), float(np.float32(hi))
    size = int(np.prod(shape))
    values = data.draw(st.lists(st.floats(lo, hi, width=32, allow_subnormal=False), min_size=size,
                                max_size=size))
    x = np.array(values, F32).reshape(shape)
    _assert_matches_xla(fn, (x,), rtol=2e-6, atol=1e-37)


_BINARY_FLOAT = {"add": lax.add, "sub": lax.sub, "mul": lax.mul, "div": lax.div, "rem": lax.rem,
                 "max": lax.max, "min": lax.min, "atan2": lax.atan2, "pow": lax.pow,
                 "nextafter": lax.nextafter, "lt": lax.lt, "eq": lax.eq}
_FLOATS = st.one_of(st.floats(-1e4, 1e4, width=32, allow_subnormal=False),
                    st.sampled_from([0.0, -0.0, np.inf, -np.inf, np.nan]))


@HYPOTHESIS
@given(st.sampled_from(sorted(_BINARY_FLOAT)), st.integers(1, 6), st.data())
def test_binary_float_ops_match_xla(name, size, data):
    x = np.array(data.draw(st.lists(_FLOATS, min_size=size, max_size=size)), F32)
    y = np.array(data.draw(st.lists(_FLOATS, min_size=size, max_size=size)), F32)
    if name == "pow":
        x = np.abs(x)
    _assert_matches_xla(_BINARY_FLOAT[name], (x, y), rtol=2e-6, atol=1e-37)


_BINARY_INT = {"add": lax.add, "mul": lax.mul, "sub": lax.sub, "div": lax.div, "rem": lax.rem,
               "shift_left": lax.shift_left, "shift_right_logical": lax.shift_right_logical,
               "shift_right_arithmetic": lax.shift_right_arithmetic, "max": lax.max, "and": lax.bitwise_and}


@HYPOTHESIS
@given(st.sampled_from(sorted(_BINARY_INT)), st.sampled_from([np.int8, np.uint8, np.int16, np.int32,
                                                              np.uint32]), st.data())
def test_binary_int_ops_match_xla_exactly(name, dtype, data):
    info = np.iinfo(dtype)
    ints = st.one_of(st.integers(int(info.min), int(info.max)),
                     st.sampled_from([int(info.min), int(info.max), 0, 1, -1 if info.min else 2]))
    x = np.array(data.draw(st.lists(ints, min_size=4, max_size=4)), dtype)
    y = np.array(data.draw(st.lists(ints, min_size=4, max_size=4)), dtype)
    _assert_matches_xla(_BINARY_INT[name], (x, y))


@HYPOTHESIS
@given(st.integers(1, 8), st.integers(0, 23),
       st.lists(st.floats(-3.0000000054977558e+38, 3.0000000054977558e+38, width=32, allow_subnormal=False),
                min_size=6, max_size=6))
def test_reduce_precision_matches_xla(exponent_bits, mantissa_bits, values):
    x = np.array(values + [6e-5, 65519.0, 1.0009765625, np.inf, np.nan], F32)
    _assert_matches_xla(lambda v: lax.reduce_precision(v, exponent_bits, mantissa_bits), (x,), rtol=0)


def _small_ints(shape: tuple[int, ...], seed: int) -> np.ndarray:
    # small integer values make float32 sums exact, so XLA and the reference agree bit for bit
    return np.random.default_rng(seed).integers(-4, 5, size=shape).astype(F32)


@HYPOTHESIS
@given(st.lists(st.integers(1, 3), max_size=1), st.lists(st.integers(1, 3), max_size=2),
       st.lists(st.integers(1, 3), max_size=2), st.lists(st.integers(1, 3), max_size=2),
       st.randoms(use_true_random=False), st.integers(0, 2**16))
def test_dot_general_dimension_numbers(batch, contract, lfree, rfree, rnd, seed):
    # lhs dims: batch + lfree + contract, rhs: batch + contract + rfree, each permuted at random
    lsizes, rsizes = batch + lfree + contract, batch + contract + rfree
    lperm, rperm = list(range(len(lsizes))), list(range(len(rsizes)))
    rnd.shuffle(lperm)
    rnd.shuffle(rperm)
    lpos = {d: lperm.index(d) for d in range(len(lsizes))}
    rpos = {d: rperm.index(d) for d in range(len(rsizes))}
    nb, nc = len(batch), len(contract)
    dnums = (([lpos[nb + len(lfree) + k] for k in range(nc)], [rpos[nb + k] for k in range(nc)]),
             ([lpos[k] for k in range(nb)], [rpos[k] for k in range(nb)]))
    lhs = _small_ints(tuple(lsizes[d] for d in lperm), seed)
    rhs = _small_ints(tuple(rsizes[d] for d in rperm), seed + 1)
    _assert_matches_xla(lambda a, b: lax.dot_general(a, b, dnums), (lhs, rhs), rtol=0)


@HYPOTHESIS
@given(st.integers(1, 2), st.sampled_from([(1, 1), (3, 1), (1, 3), (2, 2)]), st.data())
def test_conv_general_dilated_parameters(nsp, groups, data):
    fg, bg = groups
    spatial = data.draw(st.lists(st.integers(3, 6), min_size=nsp, max_size=nsp))
    kernel = data.draw(st.lists(st.integers(1, 3), min_size=nsp, max_size=nsp))
    strides = data.draw(st.lists(st.integers(1, 2), min_size=nsp, max_size=nsp))
    lhs_dil = data.draw(st.lists(st.integers(1, 2), min_size=nsp, max_size=nsp))
    rhs_dil = data.draw(st.lists(st.integers(1, 2), min_size=nsp, max_size=nsp))
    padding = data.draw(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2)), min_size=nsp, max_size=nsp))
    if fg > 1 and bg > 1:
        fg = 1
    n, c, o = 2 * bg, 2 * fg, 2 * fg * bg
    lhs = _small_ints((n, c, *spatial), data.draw(st.integers(0, 999)))
    rhs = _small_ints((o, c // fg, *kernel), data.draw(st.integers(0, 999)))
    fn = lambda a, b: lax.conv_general_dilated(  # noqa: E731
        a, b, strides, padding, lhs_dilation=lhs_dil, rhs_dilation=rhs_dil,
        feature_group_count=fg, batch_group_count=bg)
    _assert_matches_xla(fn, (lhs, rhs), rtol=0)


@HYPOTHESIS
@given(st.integers(0, 2), st.sampled_from(_MODES), st.integers(1, 5),
       st.lists(st.integers(-3, 7), min_size=1, max_size=5), st.integers(0, 999))
def test_gather_and_scatter_add_parameters(config, mode, window, starts, seed):
    operand = _small_ints((6, 5), seed)
    if config == 0:  # rows
        gd, sd, sizes = _gather_dnums((1,), (0,), (0,)), _scatter_dnums((1,), (0,), (0,)), (1, 5)
        idx = np.array(starts, np.int32)[:, None]
        upd_shape = (len(starts), 5)
    elif config == 1:  # windows of `window` rows
        gd, sd, sizes = _gather_dnums((1, 2), (), (0,)), _scatter_dnums((1, 2), (), (0,)), (window, 5)
        idx = np.array(starts, np.int32)[:, None]
        upd_shape = (len(starts), window, 5)
    else:  # points in 2-D
        gd, sd, sizes = _gather_dnums((), (0, 1), (0, 1)), _scatter_dnums((), (0, 1), (0, 1)), (1, 1)
        idx = np.stack([np.array(starts, np.int32), np.array(starts[::-1], np.int32) - 1], axis=1)
        upd_shape = (len(starts),)
    updates = _small_ints(upd_shape, seed + 1)
    _assert_matches_xla(lambda x, i, u: (lax.gather(x, i, gd, sizes, mode=mode),
                                         lax.scatter_add(x, i, u, sd, mode=mode)),
                        (operand, idx, updates), rtol=0)


def test_monte_carlo_arithmetic_keeps_exact_operations_exact():
    # The gradient of max is the one-hot mask eq(x, max(x)): perturbing the (exact) max would
    # zero it. Monte Carlo arithmetic perturbs only rounded results.
    x = np.linspace(-1.0, 1.0, 33).astype(np.float32) ** 3
    closed = jax.make_jaxpr(jax.grad(lambda v: jnp.max(v) * 3.0))(x)
    for seed in range(5):
        [grad] = evaluate(closed, [x], round_each_op=True, mca_seed=seed)
        np.testing.assert_array_equal(grad[:-1], 0.0)  # the mask itself is exact
        assert abs(grad[-1] - 3.0) <= 4 * np.finfo(np.float32).eps * 3.0


def test_monte_carlo_arithmetic_spreads_sums():
    x = np.random.default_rng(0).standard_normal(4096).astype(np.float32)
    closed = jax.make_jaxpr(jnp.sum)(x)
    samples = {float(evaluate(closed, [x], round_each_op=True, mca_seed=s)[0]) for s in range(4)}
    exact = float(evaluate(closed, [x])[0])
    assert len(samples) > 1  # different seeds, different honest rounding
    bound = np.sqrt(4096) * np.finfo(np.float32).eps / 2 * np.abs(x).sum() * 2
    assert all(abs(v - exact) <= bound for v in samples)


def test_rank0_bitcast_and_reduce_precision_keep_rank0():
    # 1.5f = 0x3FC00000 = 1069547520; a rank-0 operand gives a rank-0 result, not shape (1,).
    [bits] = _run(lambda x: lax.bitcast_convert_type(x, jnp.int32), F32(1.5))
    assert bits.shape == () and bits.dtype == np.int32 and int(bits) == 1069547520
    [wide] = _run(lambda x: lax.bitcast_convert_type(x, jnp.uint8), F32(1.5))
    assert wide.shape == (4,) and wide.tolist() == [0, 0, 0xC0, 0x3F]  # little endian
    # 1 + 2**-11 rounds to 1 + 2**-10 (ties to even) with 10 mantissa bits; 1e6 overflows 5 bits.
    [near, big] = _run(lambda x: (lax.reduce_precision(x, 5, 10), lax.reduce_precision(x * 1e6, 5, 10)),
                       F32(1 + 2 ** -11 + 2 ** -20))
    assert near.shape == () and float(near) == 1 + 2 ** -10
    assert big.shape == () and float(big) == np.inf


@pytest.mark.parametrize("n, config, want", [
    (2, (3, -4, 0), [9.0]),                     # the high crop eats x and two low pads
    (2, (-3, 2, 0), [9.0]),                     # the low crop eats x and one high pad
    (3, (-1, -1, 0), [2.0]),
    (2, (-1, -1, 0), []),                       # crop to nothing
    (3, (-1, 1, 1), [9.0, 2.0, 9.0, 3.0, 9.0]),  # interior first, then the crop
    (3, (2, -5, 1), [9.0, 9.0]),                # 2 pads + 1 9 2 9 3 (5) - 5
])
def test_pad_negative_edges_crop_through_the_operand(n, config, want):
    x = np.arange(1, n + 1, dtype=F32)
    [got] = _run(lambda v: lax.pad(v, F32(9), (config,)), x)
    assert got.tolist() == want
    assert got.shape == jax.eval_shape(lambda v: lax.pad(v, F32(9), (config,)), x).shape


@pytest.mark.parametrize("name, fn, x, n", [
    # sequential sums of 1000 terms of 0.1: honest float32 error ~ sqrt(1000) u |sum|, not u |sum|
    ("cumsum", lambda v: lax.cumsum(v)[-1], np.full(1000, 0.1, F32), 1000),
    ("reduce_window_sum", lambda v: lax.reduce_window(v, F32(0), lax.add, (1000,), (1,), "VALID")[0],
     np.full(1000, 0.1, F32), 1000),
])
def test_monte_carlo_arithmetic_spreads_accumulations(name, fn, x, n):
    closed = jax.make_jaxpr(fn)(x)
    assert name in {e.primitive.name for e in closed.jaxpr.eqns}
    exact = float(evaluate(closed, [x])[0])
    assert abs(exact - 1000 * float(F32(0.1))) < 1e-9
    # Around the honest float32 run (itself ~1e-3 off: 0.1f added sequentially), each sample moves
    # by up to sqrt(n) u sum|terms| (plus the rounding of the result).
    native = float(evaluate(closed, [x], round_each_op=True)[0])
    samples = [float(evaluate(closed, [x], round_each_op=True, mca_seed=s)[0]) for s in range(8)]
    u = np.finfo(np.float32).eps / 2
    bound = np.sqrt(n) * u * exact * 1.01 + 4 * u * exact
    spread = max(abs(v - native) for v in samples)
    assert spread <= bound
    assert spread > 8 * u * exact  # far more than rounding the final result once would give


def test_scatter_add_native_is_xla_order_and_samples_cover_every_order():
    # 1000 updates of 0.1 onto one element: the native run adds them one at a time in update
    # order, in float32 (XLA:CPU's order, bit for bit); each Monte Carlo sample is float64's sum
    # moved by a quarter to a half of the any-order bound k u sum|terms| (k = 1000 combines).
    x = np.full(1000, 0.1, F32)
    fn = lambda v: jnp.zeros(2, F32).at[jnp.zeros(1000, jnp.int32)].add(v)  # noqa: E731
    closed = jax.make_jaxpr(fn)(x)
    exact = float(evaluate(closed, [x])[0][0])
    native = evaluate(closed, [x], round_each_op=True)[0]
    assert native[0] == float(np.asarray(jax.jit(fn)(x))[0]) and native[1] == 0.0
    sequential = F32(0)
    for v in x:
        sequential = F32(sequential + v)
    assert native[0] == sequential and native[0] != exact
    u = float(np.finfo(np.float32).eps) / 2
    bound = 1000 * u * exact
    for seed in range(8):
        sample = evaluate(closed, [x], round_each_op=True, mca_seed=seed)[0]
        assert 0.25 * bound * 0.99 <= abs(sample[0] - exact) <= 0.5 * bound * 1.01 + 2 * u * exact
        assert sample[1] == 0.0  # no update lands there: nothing to reorder
    assert abs(native[0] - exact) <= bound  # XLA's own order lies within the bound


def test_pow_follows_ieee_where_numpy_shortcuts_to_sqrt():
    # np.power with a 0-d exponent 0.5 is sqrt: NaN at -inf and -0.0 at -0.0; IEEE pow (and
    # XLA) give +inf and +0 (fuzz seed 9300413 had pow(x, 0.5)).
    x = np.array([-np.inf, -0.0, 0.0, 4.0, np.inf], F32)
    [got] = _run(lambda v: lax.pow(v, F32(0.5)), x)
    assert got.tolist() == [np.inf, 0.0, 0.0, 2.0, np.inf] and not np.signbit(got[1])
    [scalar] = _run(lambda v: lax.pow(v, F32(0.5)), F32(-np.inf))
    assert scalar.shape == () and float(scalar) == np.inf
    _assert_matches_xla(lambda v: lax.pow(v, F32(0.5)), (x,), rtol=0)


def test_monte_carlo_arithmetic_gives_transcendentals_a_few_ulps():
    # tan(x) - tanh(tan(x)) near x = -2 pi cancels ~6000-fold (fuzz seed 9300659): XLA's tan,
    # within about 1 ULP, lands 1.6e-9 from float64, 5x the correctly rounded run's error. The
    # budget samples transcendentals APPROXIMATION_ULPS wide, so that is honest; 50 ULPs is not.
    from xlaprobe.oracle import VerdictKind, judge_leaf

    x = np.array([-6.2610855, 0.5], F32)
    closed = jax.make_jaxpr(lambda v: jnp.tan(v) - jnp.tanh(jnp.tan(v)))(x)
    [ref] = evaluate(closed, [x])
    honest = [evaluate(closed, [x], round_each_op=True, mca_seed=s)[0] for s in (None, 1, 2)]
    ulp_t = float(np.spacing(np.float32(abs(np.tan(np.float64(x[0]))))))
    assert max(abs(h[0] - ref[0]) for h in honest) > ulp_t  # sampled wider than one rounding
    xla = np.array([3.600493e-06, ref[1]], F32)  # jaxlib 0.10.2 XLA:CPU, measured
    assert judge_leaf(xla, ref, budget=honest).kind is VerdictKind.OK
    wrong = np.array([ref[0] + 50 * ulp_t, ref[1]], F32)
    assert judge_leaf(wrong, ref, budget=honest).kind is VerdictKind.MISMATCH
    assert all(primitives.facts(n).approximate for n in ("tan", "tanh", "exp", "cbrt", "pow"))
    assert not any(primitives.facts(n).approximate for n in ("add", "mul", "div", "sqrt"))  # IEEE


def test_flushed_mode_flushes_partial_products():
    # 0.543 * 1.1755e-38 is subnormal in float32: XLA:CPU may flush it, and the product is then
    # -0, not -1.44e-38 (fuzz seed 7100246, a bfloat16 reduce_prod): reference:ftz shows that.
    x = np.array([0.54296875, 1.1754943508222875e-38, 1.640625, -1.375], ml_dtypes.bfloat16)
    closed = jax.make_jaxpr(lambda v: jnp.prod(v))(x)
    [exact] = evaluate(closed, [x])
    [native] = evaluate(closed, [x], round_each_op=True)
    [flushed] = evaluate(closed, [x], round_each_op=True, flush_subnormals=True)
    assert exact == pytest.approx(-1.4398173565121776e-38, rel=1e-6) and native < -1e-38
    assert flushed == 0.0 and np.signbit(flushed)


def test_polynomial_is_horner_lowest_degree_first():
    """``lax.polynomial`` (jax >= 0.12, used by jax.scipy.special and odeint): 1 + 5x + 2x^2 at
    3 is 34; float64 agrees with NumPy's polyval, native mode with XLA's float32 Horner."""
    if not hasattr(lax, "polynomial"):
        pytest.skip("jax < 0.12 has no lax.polynomial")
    assert _run(lambda x: lax.polynomial(x, [1.0, 5.0, 2.0]), F32(3.0))[0] == 34.0
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, 64).astype(F32)
    coeffs = rng.standard_normal((12, 1)).astype(F32)  # 12 terms: XLA lowers it to a scan

    def poly(x, c):
        return lax.polynomial(x, list(c))

    exact = np.polynomial.polynomial.polyval(np.float64(x), np.float64(coeffs[:, 0]))
    np.testing.assert_allclose(_run(poly, x, coeffs)[0], exact, rtol=1e-12, atol=1e-12)
    native = _run(poly, x, coeffs, native=True)[0]
    np.testing.assert_allclose(native, np.asarray(jax.jit(poly)(x, coeffs)), rtol=2e-6, atol=1e-5)
    assert np.array_equal(native, np.asarray(native, F32))  # rounded to float32 at each step
    assert not np.array_equal(native, exact)


def test_digamma_keeps_a_tiny_negative_argument_whole():
    # psi(x) ~ -1/x near zero: psi(-1.1754944e-38) is 8.5e37; the reflection's x - floor(x)
    # rounded the argument to 1.0 and gave 2.6e16 (a special-value re-run's false alarm).
    import scipy.special

    from xlaprobe.lax_rules.elementwise import _digamma
    x = np.array([-1.1754944e-38, -1e-300, -0.3, -2.5, -7.25, 0.25, 3.0, -1e7 - 0.5])
    np.testing.assert_allclose(_digamma(x), scipy.special.digamma(x), rtol=1e-12)


def test_digamma_at_the_poles_warns_nothing_and_keeps_its_values():
    # The reflection's cot(pi x) divides by tan(0) at the integers (CI saw "divide by zero
    # encountered in divide"): the poles are masked after, so the values stay -inf at zero and
    # NaN at the negative integers, with no warning.
    import warnings

    from xlaprobe.lax_rules.elementwise import _digamma
    x = np.array([0.0, -0.0, -1.0, -2.0, -3.0, -0.5, 1.0, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        psi = _digamma(x)
    euler = 0.5772156649015329
    assert psi[0] == psi[1] == -np.inf
    assert np.isnan(psi[2:5]).all()
    # psi(-1/2) = 2 - gamma - 2 ln 2 + ... = psi(1/2) + 2 = -gamma - 2 ln 2 + 2; psi(1) = -gamma
    np.testing.assert_allclose(psi[5:], [2 - euler - 2 * np.log(2), -euler, 1 - euler],
                               rtol=1e-12)
