"""Scatters with repeated indices: every order of accumulation in the output dtype is honest
(cancellation and subnormal intermediates flushed in XLA:CPU's order included), and a planted
fault in a scatter (wrong combiner, a dropped duplicate, an update applied twice) is still
flagged. Known answers on both sides of the bound; the oracle is judged in-process
(`xlaprobe.checking.judge` with the honest runs a check would make)."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from xlaprobe.checking import FLUSHED, HONEST, REFERENCE, judge, split_honest
from xlaprobe.configs import reference
from xlaprobe.configs.registry import Configuration
from xlaprobe.oracle import VerdictKind
from xlaprobe.outcome import Outcome, OutcomeKind
from xlaprobe.program import Program, Provenance

F32, F16 = np.float32, np.float16
TINY32 = float(np.finfo(F32).tiny)
RAN = OutcomeKind.RAN


def _judged(fn, args, actual):
    """The check's verdict on `actual` (the outputs a compiler gave for ``fn(*args)``): honest
    runs as `check_program` makes them, judged as ``xla``."""
    program = Program.from_function(fn, args, Provenance("user", fn.__name__))
    runs = {spec: Outcome(spec, RAN, tuple(reference.KIND.run(
        Configuration.parse(spec), program.jaxpr, program.inputs)))
        for spec in (REFERENCE, *HONEST)}
    flushed, budget = split_honest([runs[s] for s in HONEST])
    outcome = Outcome("xla", RAN, tuple(np.asarray(a) for a in actual))
    result = judge(program, ["xla", REFERENCE], [outcome, runs[REFERENCE]], budget, flushed)
    return result.verdicts[0][0]


def _sequential(operand, index, updates, combine, dtype, order=None):
    """A scatter's answer when its updates combine one at a time in `order`, each combine
    rounded to `dtype` (what a compiler that reorders the updates honestly gives)."""
    out = np.array(operand, dtype)
    for k in (range(len(index)) if order is None else order):
        out[index[k]] = dtype(combine(out[index[k]], updates[k]))
    return out


def scatter_add(o, i, u):
    return o.at[i].add(u)


def scatter_sub(o, i, u):
    return o.at[i].subtract(u)


def scatter_mul(o, i, u):
    return o.at[i].multiply(u)


def test_every_order_of_a_cancelling_float16_scatter_sub_is_ok():
    # fuzz seed 788: 0 - 65504 + 3.03125 + 65504 is 0 in float16 in XLA's order (65500.97 rounds
    # to 65504), 3.03125 in float64; every other order is honest too.
    o, i = np.zeros(2, F16), np.array([0, 0, 0, 1], np.int32)
    u = np.array([65504, -3.03125, -65504, 1.5], F16)
    xla = np.asarray(jax.jit(scatter_sub)(o, i, u))
    assert xla[0] == 0.0  # the cancellation XLA:CPU shows
    for order in itertools.permutations(range(4)):
        got = _sequential(o, i, u, np.subtract, F16, order)
        assert _judged(scatter_sub, (o, i, u), [got]).kind is VerdictKind.OK, order
    # Far beyond any order's reach: 0 - 65504 + 3.03 + 65504 is never 1000.
    wrong = xla.copy()
    wrong[0] = 1000.0
    assert _judged(scatter_sub, (o, i, u), [wrong]).kind is VerdictKind.MISMATCH


def _mixed(seed, n=64, targets=3):
    rng = np.random.default_rng(seed)
    i = rng.integers(0, targets, n).astype(np.int32)
    u = (rng.standard_normal(n) * 10.0 ** rng.integers(-4, 5, n)).astype(F32)
    return rng.standard_normal(targets).astype(F32), i, u


@pytest.mark.parametrize("seed", [0, 1])
def test_float32_scatter_add_any_order_ok_and_planted_faults_flagged(seed):
    o, i, u = _mixed(seed)
    xla = np.asarray(jax.jit(scatter_add)(o, i, u))
    assert np.array_equal(xla, _sequential(o, i, u, np.add, F32))  # XLA:CPU's order
    rng = np.random.default_rng(seed)
    for _ in range(6):
        got = _sequential(o, i, u, np.add, F32, rng.permutation(len(i)))
        assert _judged(scatter_add, (o, i, u), [got]).kind is VerdictKind.OK
    # A duplicate dropped, one applied twice, the wrong combiner: the largest update of the most
    # repeated element, far above the order's bound (64 u sum|terms| is ~4e-6 of the terms).
    k = int(np.argmax(np.abs(u)))
    dropped = _sequential(o, np.delete(i, k), np.delete(u, k), np.add, F32)
    twice = _sequential(o, np.append(i, i[k]), np.append(u, u[k]), np.add, F32)
    wrong = _sequential(o, i, u, np.subtract, F32)
    for fault in (dropped, twice, wrong):
        assert _judged(scatter_add, (o, i, u), [fault]).kind is VerdictKind.MISMATCH


def test_scatter_mul_any_order_ok_and_planted_faults_flagged():
    rng = np.random.default_rng(7)
    o = rng.uniform(0.5, 2.0, 3).astype(F32)
    i = np.array([0, 1, 0, 2, 0, 1, 2, 0], np.int32)
    u = rng.uniform(0.5, 2.0, 8).astype(F32)
    for order in list(itertools.permutations(range(8)))[::997]:
        got = _sequential(o, i, u, np.multiply, F32, order)
        assert _judged(scatter_mul, (o, i, u), [got]).kind is VerdictKind.OK
    dropped = _sequential(o, i[1:], u[1:], np.multiply, F32)          # a duplicate of 0 dropped
    twice = _sequential(o, np.append(i, i[0]), np.append(u, u[0]), np.multiply, F32)
    wrong = _sequential(o, i, u, np.add, F32)                           # add, not multiply
    for fault in (dropped, twice, wrong):
        assert _judged(scatter_mul, (o, i, u), [fault]).kind is VerdictKind.MISMATCH


def test_scatter_mul_flushed_in_xla_order_is_ftz_and_a_zero_no_order_gives_is_not():
    # fuzz seeds 847, 582, 183: -0.998 x 1.1755e-38 is subnormal in float32 and XLA:CPU flushes
    # it, so -0.998 x 1.1755e-38 x 1.49 is -0 where float64 gives -1.75e-38 (a normal number).
    o, i = np.array([-0.998, 2.0], F32), np.array([0, 0], np.int32)
    u = np.array([TINY32, 1.49], F32)
    xla = np.asarray(jax.jit(scatter_mul)(o, i, u))
    assert xla[0] == 0.0 and np.signbit(xla[0])
    [flushed] = reference.evaluate(jax.make_jaxpr(scatter_mul)(o, i, u), [o, i, u],
                                   round_each_op=True, flush_subnormals=True)
    assert flushed[0] == 0.0 and np.signbit(flushed[0])  # the recheck in XLA's order agrees
    verdict = _judged(scatter_mul, (o, i, u), [xla])
    assert (verdict.kind, verdict.freedom, verdict.against) == (VerdictKind.OK, "ftz", FLUSHED)
    # Without the subnormal factor no order passes through a subnormal: a zero is a fault.
    u_normal = np.array([1.0, 1.49], F32)
    assert _judged(scatter_mul, (o, i, u_normal),
                   [np.array([-0.0, 2.0], F32)]).kind is VerdictKind.MISMATCH


def test_reduce_prod_flushed_in_order_is_ftz_and_wrong_product_is_not():
    # A reduction: 0.5^3 x 1.1755e-38 is subnormal part way; XLA:CPU multiplies in order and
    # flushes it (0), float64 gives 9.4e-38, a normal float32.
    x = np.array([0.5, 0.5, 0.5, TINY32, 4.0, 4.0, 4.0], F32)
    xla = np.asarray(jax.jit(jnp.prod)(x))
    assert xla == 0.0
    verdict = _judged(jnp.prod, (x,), [xla])
    assert (verdict.kind, verdict.freedom) == (VerdictKind.OK, "ftz")
    # The product of the same magnitudes without the subnormal factor never flushes.
    y = np.array([0.5, 0.5, 0.5, 2.0, 4.0, 4.0, 4.0], F32)
    assert _judged(jnp.prod, (y,), [np.asarray(F32(0))]).kind is VerdictKind.MISMATCH
    assert _judged(jnp.prod, (y,), [np.asarray(jax.jit(jnp.prod)(y))]).kind is VerdictKind.OK


def test_cumprod_flushed_in_xla_order_is_ftz_and_a_wrong_zero_is_not():
    # Campaign seed 52001072: XLA's cumprod (an associative scan) of -0.205, -2, -2, 1.1755e-38,
    # 1.82 ends in -0 (a partial product flushed), float64 -1.76e-38: some order flushes.
    x = np.array([-0.20540439, -2.0, -2.0, TINY32, 1.8219491], F32)
    xla = np.asarray(jax.jit(jnp.cumprod)(x))
    assert xla[-1] == 0.0 and np.signbit(xla[-1])
    verdict = _judged(jnp.cumprod, (x,), [xla])
    assert (verdict.kind, verdict.freedom) == (VerdictKind.OK, "ftz")
    y = np.array([-0.20540439, -2.0, -2.0, 3.0, 1.8219491], F32)  # no order reaches a subnormal
    wrong = np.asarray(jax.jit(jnp.cumprod)(y)).copy()
    wrong[-1] = -0.0
    assert _judged(jnp.cumprod, (y,), [wrong]).kind is VerdictKind.MISMATCH


@pytest.mark.parametrize("op", ["add", "max", "mul"])
def test_scatter_onto_a_transposed_operand_applies_every_update(op):
    # Campaign seeds 52001844 and 52001359: the reference copied a transposed (or broadcast)
    # operand with its strides, wrote the updates into a flat copy of that copy, and lost them.
    o = np.arange(12, dtype=F32).reshape(3, 4) / 7 + 1
    i, u = np.array([2, 0, 2], np.int32), np.array([1.5, -2.0, 3.0], F32)

    def fn(o, i, u):
        return getattr(o.T.at[i], {"mul": "multiply"}.get(op, op))(u)

    closed = jax.make_jaxpr(fn)(o, i, u)
    xla = np.asarray(jax.jit(fn)(o, i, u))
    for native in (False, True):
        [got] = reference.evaluate(closed, [o, i, u], round_each_op=native)
        np.testing.assert_allclose(got, xla, rtol=1e-6)
    assert _judged(fn, (o, i, u), [xla]).kind is VerdictKind.OK


def test_bfloat16_cumlogsumexp_rounds_each_step_like_xla():
    # Campaign seed 52001125: JAX lowers cumlogsumexp to a reduce_window whose combiner
    # max(a, b) + log1p(exp(-|a - b|)) rounds every op to bfloat16; the native run does too, so
    # XLA's answer (several ULPs from float64 after cancellation) is honest, a planted error not.
    import ml_dtypes

    d = np.array([[1.21875, -1.3203125, -0.63671875, -1.53125],
                  [0.984375, -1.2421875, -0.796875, -0.578125],
                  [0.66796875, -0.58984375, -0.2177734375, -1.4609375],
                  [1.6015625, 1.109375, 1.8046875, 0.412109375],
                  [0.028076171875, 1.546875, -1.5546875, 0.283203125],
                  [-0.00014019012451171875, -2.09375, -1.1796875, 2.328125]], ml_dtypes.bfloat16)

    def fn(v):
        return jax.lax.cumlogsumexp(v, axis=0)

    xla = np.asarray(jax.jit(fn)(d))
    [native] = reference.evaluate(jax.make_jaxpr(fn)(d), [d], round_each_op=True)
    np.testing.assert_array_equal(native, xla.astype(np.float64))
    assert _judged(fn, (d,), [xla]).kind is VerdictKind.OK
    wrong = xla.copy()
    wrong[3, 2] = ml_dtypes.bfloat16(float(xla[3, 2]) + 0.25)
    assert _judged(fn, (d,), [wrong]).kind is VerdictKind.MISMATCH
