"""The search module against known answers (hand-worked probe sequences) and Hypothesis
properties: binary searches and gallops find the exact boundary of random monotone predicates
within their call bounds, and ddmin's result fails and is 1-minimal on synthetic predicates."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xlaprobe.search import boundary, ddmin, first_true, gallop, last_true, scan_first


def _recorded(pred):
    """`pred` that also appends each point it is called on to ``.calls``."""
    def call(x):
        call.calls.append(x)
        return pred(x)
    call.calls = []
    return call


# ------------------------------------------------------------------------------ known answers


def test_first_true_probes_midpoints_from_the_known_ends():
    pred = _recorded(lambda x: x >= 5)
    assert first_true(0, 16, pred) == 5
    assert pred.calls == [8, 4, 6, 5]  # 8 T -> (0, 8]; 4 F -> (4, 8]; 6 T; 5 T


def test_last_true_probes_midpoints_from_the_known_ends():
    pred = _recorded(lambda x: x <= 11)
    assert last_true(0, 20, pred) == 11
    assert pred.calls == [10, 15, 12, 11]  # 10 T -> [10, 20); 15 F; 12 F; 11 T


def test_ends_are_never_tested_and_adjacent_ends_need_no_call():
    pred = _recorded(lambda x: True)
    assert first_true(3, 4, pred) == 4 and last_true(3, 4, pred) == 3
    assert first_true(7, 7, pred) == 7 and last_true(7, 7, pred) == 7
    assert gallop(5, 5, pred) == 5 and gallop(5, 6, pred) == 6 and gallop(5, 4, pred) == 4
    assert pred.calls == []


def test_a_predicate_true_nowhere_inside_gives_the_known_end():
    assert first_true(0, 9, lambda x: False) == 9
    assert last_true(0, 9, lambda x: False) == 0


def test_gallop_upward_doubles_then_bisects():
    pred = _recorded(lambda x: x >= 9)
    assert gallop(3, 20, pred) == 9
    assert pred.calls == [4, 5, 7, 11, 9, 8]  # widths 1, 2, 4 false, 8 true; then (7, 11]


def test_gallop_downward_doubles_then_bisects():
    pred = _recorded(lambda x: x <= 2)
    assert gallop(10, 0, pred) == 2
    assert pred.calls == [9, 8, 6, 2, 4, 3]  # widths 1, 2, 4 false, 8 true; then [2, 6)


def test_gallop_stops_short_of_the_limit():
    pred = _recorded(lambda x: x >= 12)
    assert gallop(0, 12, pred) == 12
    assert pred.calls == [1, 2, 4, 8, 10, 11]  # 16 is past the limit: bisect (8, 12]


def test_boundary_takes_the_ends_in_either_order():
    assert boundary(0, 10, lambda x: x >= 7) == (6, 7)
    assert boundary(10, 0, lambda x: x <= 3) == (4, 3)


def test_boundary_probes_what_pick_chooses_and_stops_when_it_gives_up():
    runs = {2: True, 3: None, 4: None, 5: None, 6: False, 7: None}  # None: cannot be probed

    def pick(mid, a, b):
        lo, hi = min(a, b), max(a, b)
        for offset in range(hi - lo):
            for i in (mid + offset, mid - offset):
                if lo < i < hi and runs.get(i) is not None:
                    return i
        return None

    pred = _recorded(lambda x: x <= 2)
    assert boundary(10, 0, pred, pick=pick) == (6, 2)  # nothing between 2 and 6 runs
    assert pred.calls == [6, 2]


def test_boundary_rejects_a_pick_outside_the_ends():
    with pytest.raises(ValueError, match="not strictly between"):
        boundary(0, 10, lambda x: True, pick=lambda mid, a, b: b)


def test_binary_searches_reject_reversed_ends():
    with pytest.raises(ValueError, match="lo <= hi"):
        first_true(5, 2, lambda x: True)
    with pytest.raises(ValueError, match="lo <= hi"):
        last_true(5, 2, lambda x: True)


def test_ddmin_known_answers():
    assert ddmin(list(range(8)), lambda s: 3 in s and 6 in s) == [3, 6]
    assert ddmin(list("abcdef"), lambda s: "e" in s) == ["e"]
    assert ddmin(["only"], lambda s: False) == ["only"]  # one element: nothing to test


def test_ddmin_call_order():
    # n = 2: [0..3] passes, [4..7] fails; its halves pass; n = 4: the quarters pass, then the
    # complement [5, 6, 7] passes and [4, 6, 7] fails (n = 3); its thirds pass, the complement
    # [6, 7] passes, [4, 7] fails (n = 2); its halves pass and n reaches its length: done.
    calls = []

    def test(subset):
        calls.append(tuple(subset))
        return {4, 7} <= set(subset)

    assert ddmin(list(range(8)), test) == [4, 7]
    assert calls[:9] == [(0, 1, 2, 3), (4, 5, 6, 7), (4, 5), (6, 7), (4,), (5,), (6,), (7,),
                         (5, 6, 7)]
    assert calls[9:] == [(4, 6, 7), (4,), (6,), (7,), (6, 7), (4, 7), (4,), (7,)]


def test_ddmin_on_a_failure_needing_any_two_of_three():
    # 1-minimal, not minimum: removing any single element of the result makes it pass.
    result = ddmin(list(range(6)), lambda s: len({1, 3, 5} & set(s)) >= 2)
    assert len(result) == 2 and set(result) <= {1, 3, 5}


# ------------------------------------------------------------------------------ properties


@st.composite
def _span_and_boundary(draw):
    lo = draw(st.integers(-1000, 1000))
    n = draw(st.integers(1, 5000))
    return lo, lo + n, draw(st.integers(lo + 1, lo + n))


@settings(max_examples=300, deadline=None)
@given(_span_and_boundary())
def test_first_true_finds_the_boundary_within_log2_n_calls(case):
    lo, hi, answer = case
    pred = _recorded(lambda x: x >= answer)
    assert first_true(lo, hi, pred) == answer
    assert len(pred.calls) <= math.ceil(math.log2(hi - lo))
    assert all(lo < x < hi for x in pred.calls)


@settings(max_examples=300, deadline=None)
@given(_span_and_boundary())
def test_last_true_finds_the_boundary_within_log2_n_calls(case):
    lo, hi, answer = case
    answer -= 1  # in [lo, hi)
    pred = _recorded(lambda x: x <= answer)
    assert last_true(lo, hi, pred) == answer
    assert len(pred.calls) <= math.ceil(math.log2(hi - lo))
    assert all(lo < x < hi for x in pred.calls)


@settings(max_examples=400, deadline=None)
@given(st.integers(-1000, 1000), st.integers(1, 100_000), st.data(), st.booleans())
def test_gallop_finds_the_boundary_within_twice_log2_d_calls(origin, span, data, upward):
    d = data.draw(st.integers(1, span), label="distance of the answer")
    step = 1 if upward else -1
    limit, answer = origin + step * span, origin + step * d
    pred = _recorded(lambda x: (x - answer) * step >= 0)
    assert gallop(origin, limit, pred) == answer
    assert len(pred.calls) <= 2 * math.ceil(math.log2(d)) + 1
    assert all(min(origin, limit) < x < max(origin, limit) for x in pred.calls)


@settings(max_examples=100, deadline=None)
@given(st.integers(2, 40), st.sets(st.integers(0, 39), min_size=1, max_size=4))
def test_ddmin_is_one_minimal_and_keeps_the_failure(n, needed):
    needed = {k % n for k in needed}
    calls = []

    def test(subset):
        calls.append(tuple(subset))
        return needed <= set(subset)

    result = ddmin(list(range(n)), test)
    assert set(result) == needed  # the failure stays, and each element is needed (1-minimal)
    assert result == sorted(result)  # order kept
    assert () not in calls


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 24), st.integers(0, 2 ** 32 - 1))
def test_ddmin_on_any_predicate_fails_and_is_one_minimal(n, seed):
    # A deterministic but arbitrary (non-monotone) predicate: a hash of the subsequence.
    def test(subset):
        return subset == list(range(n)) or hash((seed, tuple(subset))) % 3 == 0

    result = ddmin(list(range(n)), test)
    assert test(result)
    assert result == sorted(result) and set(result) <= set(range(n))
    if len(result) > 1:
        assert not any(test(result[:i] + result[i + 1:]) for i in range(len(result)))


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 24), st.integers(0, 2 ** 32 - 1), st.integers(2, 6))
def test_ddmin_in_parallel_windows_gives_the_sequential_answer(n, seed, width):
    # Any (non-monotone) predicate: testing `width` subsets per step must not change the result.
    def test(subset):
        return subset == list(range(n)) or hash((seed, tuple(subset))) % 3 == 0

    windows = []

    def test_many(subsets):
        windows.append(len(subsets))
        return [test(s) for s in subsets]

    assert ddmin(list(range(n)), test, test_many=test_many, width=width) == \
        ddmin(list(range(n)), test)
    assert all(2 <= w <= width for w in windows)


def test_scan_first_decides_a_window_per_call_and_answers_as_a_scan():
    calls = []

    def test_many(xs):
        calls.append(list(xs))
        return [x % 5 == 0 for x in xs]

    assert scan_first(list(range(1, 12)), lambda x: x % 5 == 0, test_many=test_many,
                      width=3) == 4  # the value 5
    assert calls == [[1, 2, 3], [4, 5, 6]]  # 6 is tested too: the price of the window
    assert scan_first([1, 2, 3], lambda x: False, test_many=test_many, width=3) is None
