"""Known-answer tests of the tolerance model: ULP distances and verdicts computed by hand."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, strategies as st

from xlaprobe.oracle import VerdictKind, judge_leaf, judge_outcome, ulp_distance
from xlaprobe.outcome import Outcome, OutcomeKind
from xlaprobe.program import Tolerance

F32 = np.float32


def next_up(x, dtype=F32, n=1):
    x = dtype(x)
    for _ in range(n):
        x = np.nextafter(x, dtype(np.inf))
    return x


@pytest.mark.parametrize("a, b, dtype, ulps", [
    (1.0, next_up(1.0), F32, 1),
    (1.0, next_up(1.0, n=7), F32, 7),
    (-0.0, 0.0, F32, 0),
    (-1e-45, 1e-45, F32, 2),            # across zero: -tiny, -0/+0, +tiny
    (1.0, 2.0, F32, 2 ** 23),           # one binade of float32
    (1.0, 2.0, np.float16, 2 ** 10),
    (1.0, 2.0, ml_dtypes.bfloat16, 2 ** 7),
    (1.0, 2.0, np.float64, 2 ** 52),
])
def test_ulp_distance_known(a, b, dtype, ulps):
    assert ulp_distance(np.asarray(a), np.asarray(b), dtype) == ulps


def test_ulp_distance_nan_is_infinite():
    assert np.isinf(ulp_distance(np.float32(np.nan), np.float32(1), F32))


@given(st.floats(allow_nan=False, allow_infinity=False, width=32),
       st.floats(allow_nan=False, allow_infinity=False, width=32))
def test_ulp_distance_symmetric_and_zero_only_for_equal(a, b):
    d = ulp_distance(F32(a), F32(b), F32)
    assert d == ulp_distance(F32(b), F32(a), F32)
    assert (d == 0) == (F32(a) == F32(b))


def test_exact_for_integers():
    ref = np.array([1, 2, 3], np.int32)
    assert judge_leaf(ref.copy(), ref).kind is VerdictKind.OK
    v = judge_leaf(np.array([1, 2, 4], np.int32), ref)
    assert v.kind is VerdictKind.MISMATCH
    assert (v.max_abs, v.worst, v.expected, v.actual) == (1.0, 2, 3.0, 4.0)
    assert v.frac_over == pytest.approx(1 / 3)


def test_bools_exact():
    assert judge_leaf(np.array([True]), np.array([False])).kind is VerdictKind.MISMATCH


def test_float32_abs_and_rel_both_needed():
    # float32: atol is the smallest normal number, rtol 1e-5; an element fails only when both are
    # exceeded.
    tight = Tolerance(atol=(("float32", 1e-6),))
    ref = np.array([1000.0, 1e-8, 1.0])
    out = np.array([1000.0 + 5e-3, 5e-7, 1.0], F32)  # 1000: abs 5e-3 > 1e-6 but rel 5e-6 < 1e-5
    assert judge_leaf(out, ref, tolerance=tight).kind is VerdictKind.OK  # 1e-8: abs 4.9e-7 < 1e-6
    assert judge_leaf(out, ref).kind is VerdictKind.MISMATCH  # default atol does not hide 1e-8 -> 5e-7
    out_bad = np.array([1000.1, 1e-8, 1.0], F32)
    v = judge_leaf(out_bad, ref, tolerance=tight)
    assert v.kind is VerdictKind.MISMATCH and v.worst == 0
    assert v.max_rel == pytest.approx(1e-4, rel=0.05)


def test_small_magnitudes_are_judged_relatively():
    # XLA:CPU's cbrt of float32 subnormals gives -5.6e-16 where 1.8e-13 is right.
    v = judge_leaf(np.array([-5.5951735e-16, 2.0], F32), np.array([1.8047e-13, 2.0]))
    assert v.kind is VerdictKind.MISMATCH and v.worst == 0


def test_flushing_inputs_to_zero_is_labelled_ftz():
    # cbrt(subnormal) flushed to cbrt(0) = 0: the reference:ftz run explains it.
    ref = np.array([1.8047e-13, 2.0])
    out = np.array([0.0, 2.0], F32)
    v = judge_leaf(out, ref, budget=ref, flushed=np.array([0.0, 2.0]))
    assert v.kind is VerdictKind.FTZ
    garbage = np.array([-5.5951735e-16, 2.0], F32)
    assert judge_leaf(garbage, ref, budget=ref, flushed=np.array([0.0, 2.0])).kind \
        is VerdictKind.MISMATCH


def test_budget_widens_bounds():
    ref = np.array([1.0, 2.0])
    out = np.array([1.001, 2.0], F32)
    assert judge_leaf(out, ref).kind is VerdictKind.MISMATCH
    honest = np.array([1.0005, 2.0])  # an honest float32 run is already 5e-4 off
    assert judge_leaf(out, ref, budget=honest).kind is VerdictKind.OK


def test_nan_where_reference_finite_is_a_finding():
    v = judge_leaf(np.array([np.nan, 1.0], F32), np.array([0.5, 1.0]))
    assert v.kind is VerdictKind.NAN_MISMATCH and v.worst == 0


def test_nan_where_honest_run_also_nan_is_ok():
    # inf - inf in float32 is NaN even though the float64 reference is finite.
    v = judge_leaf(np.array([np.nan], F32), np.array([3.0]), budget=np.array([np.nan]))
    assert v.kind is VerdictKind.OK


def test_any_non_finite_value_where_honest_arithmetic_overflows_is_ok():
    # A bfloat16 convolution with float32 accumulation (fuzz seed 9300057): the float64 answer
    # is 2.82e38, but partial sums pass float32's 3.4e38; NumPy's order gives inf - inf = NaN,
    # XLA's gives +inf. Both are honest float32 arithmetic.
    ref = np.array([2.8201960387131916e38, -1.5e38, 1.0])
    honest = [np.array([np.nan, np.nan, 1.0]), np.array([np.inf, np.nan, 1.0])]
    out = np.array([np.inf, -np.inf, 1.0], F32)
    assert judge_leaf(out, ref, budget=honest).kind is VerdictKind.OK
    assert judge_leaf(np.array([np.nan, np.nan, 1.0], F32), ref, budget=honest).kind \
        is VerdictKind.OK
    # Where no honest run overflows, an infinity is still a finding.
    fine = [np.array([2.8201960387131916e38, -1.5e38, 1.0])]
    v = judge_leaf(out, ref, budget=fine)
    assert v.kind is VerdictKind.INF_MISMATCH and v.worst == 0
    # Overflowing where the honest run does, but then a finite wrong value: still a mismatch.
    assert judge_leaf(np.array([np.inf, -np.inf, 2.0], F32), ref, budget=honest).kind \
        is VerdictKind.MISMATCH


def test_flushed_zero_does_not_explain_a_small_garbage_value():
    # bfloat16 cbrt of the subnormal 9.18e-41 (fuzz seed 9300093): the right answer is 4.51e-14,
    # flushing gives 0, XLA:CPU gives -5.59e-16. The garbage is within the element's own budget
    # of the flushed zero (2 bfloat16 ULPs of 4.5e-14 ~ 1.2e-15) but a zero's budget is zero.
    bf16 = ml_dtypes.bfloat16
    ref = np.array([4.511665144855782e-14, 2.0])
    honest = [np.array([4.5075054799781356e-14, 2.0]), np.array([4.4853010194856324e-14, 2.0])]
    ftz = np.array([0.0, 2.0])
    garbage = np.array([-5.58581e-16, 2.0]).astype(bf16)
    assert judge_leaf(garbage, ref, budget=honest, flushed=ftz).kind is VerdictKind.MISMATCH
    assert judge_leaf(np.array([0.0, 2.0]).astype(bf16), ref, budget=honest, flushed=ftz).kind \
        is VerdictKind.FTZ


def test_masking_minus_inf_is_not_a_finding():
    assert judge_leaf(np.array([-np.inf, 0.0], F32), np.array([-np.inf, 0.0])).kind is VerdictKind.OK


def test_inf_mismatch():
    assert judge_leaf(np.array([np.inf], F32), np.array([1.0])).kind is VerdictKind.INF_MISMATCH
    assert judge_leaf(np.array([-np.inf], F32), np.array([np.inf])).kind is VerdictKind.INF_MISMATCH


def test_ftz_is_labelled_not_reported():
    sub = float(np.finfo(F32).tiny) / 4  # subnormal in float32
    v = judge_leaf(np.array([0.0, 1.0], F32), np.array([sub, 1.0]),
                   tolerance=Tolerance(atol=(("float32", 0.0),), rtol=(("float32", 0.0),)))
    assert v.kind is VerdictKind.FTZ
    assert not v.kind.is_finding


def test_narrow_floats_need_ulps_too():
    ref = np.array([1.0])
    one_ulp = np.array([1.0 + 2 ** -7], ml_dtypes.bfloat16)
    tight = Tolerance(atol=(("bfloat16", 0.0),), rtol=(("bfloat16", 0.0),))
    assert judge_leaf(one_ulp, ref, tolerance=tight).kind is VerdictKind.OK  # 1 ULP <= 2
    three = np.array([1.0 + 3 * 2 ** -7], ml_dtypes.bfloat16)
    assert judge_leaf(three, ref, tolerance=tight).kind is VerdictKind.MISMATCH


def test_shape_difference_is_mismatch():
    v = judge_leaf(np.zeros((2,), F32), np.zeros((3,)))
    assert v.kind is VerdictKind.MISMATCH and "shape" in v.detail


def test_failed_outcomes_give_their_kind_on_every_leaf():
    crash = Outcome("xla", OutcomeKind.CRASH, error="...\nF0000 check failed", signal=6)
    verdicts = judge_outcome(crash, [np.zeros(1)] * 2, ["a", "b"])
    assert [v.kind for v in verdicts] == [VerdictKind.CRASH] * 2
    assert verdicts[0].detail == "signal 6: F0000 check failed"


def test_verdict_json_round_trip():
    from xlaprobe.oracle import Verdict
    v = judge_leaf(np.array([np.nan, 2.0], F32), np.array([1.0, 2.0]), config="xla", output="o")
    assert Verdict.from_json(v.to_json()).to_json() == v.to_json()  # NaN != NaN: compare as JSON
    assert np.isnan(Verdict.from_json(v.to_json()).actual)
    ok = judge_leaf(np.array([1.0], F32), np.array([1.0]))
    assert Verdict.from_json(ok.to_json()).kind is ok.kind
    # A store written by a newer xlaprobe (a key this one lacks) still reads; one written
    # before `against` existed reads it as "" (float64).
    newer = dict(v.to_json(), against="reference:fma", added_later=1)
    assert Verdict.from_json(newer).against == "reference:fma"
    older = {k: x for k, x in v.to_json().items() if k != "against"}
    assert Verdict.from_json(older).against == ""


def test_ill_conditioned_leaf_gets_the_leaf_budget():
    # A leaf that honest rounding scrambles (an Adam step on a gradient that is mathematically zero):
    # the configuration's noise lands on other elements than the honest run's.
    ref = np.array([0.01, -0.01, 0.01, -0.01])
    honest = np.array([0.01, -0.01, -0.01, -0.01])   # one element flipped by rounding
    out = np.array([-0.01, -0.01, 0.01, -0.01], F32)  # another element flipped
    assert judge_leaf(out, ref).kind is VerdictKind.MISMATCH
    assert judge_leaf(out, ref, budget=honest).kind is VerdictKind.OK
    # A well-conditioned leaf keeps per-element resolution: a 1e-3 error is not hidden by a 1e-6
    # honest error elsewhere.
    honest_good = np.array([0.01 + 1e-9, -0.01, 0.01, -0.01])
    bad = np.array([0.01, -0.01 + 1e-3, 0.01, -0.01], F32)
    assert judge_leaf(bad, ref, budget=honest_good).kind is VerdictKind.MISMATCH
