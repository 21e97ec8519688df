"""Search over predicates: the boundary of a monotone predicate on integers (binary search),
the same found outward from a point (galloping), and a 1-minimal failing subsequence (ddmin).

A leaf module (the standard library only). Each function is pure apart from calling its
predicate, in an order fixed by its arguments alone: a call may cost a compile and a run, the
localization benchmark counts them, and `xlaprobe.localization` relies on the probe order documented
here. Known ends of a search are never tested; cache the predicate where a repeated call is
expensive (`ddmin` may test one subsequence twice).

Source: J. L. Bentley and A. C.-C. Yao, "An almost optimal algorithm for unbounded searching",
Information Processing Letters 5(3), 1976 (galloping, also called exponential search);
A. Zeller and R. Hildebrandt, "Simplifying and Isolating Failure-Inducing Input", IEEE
Transactions on Software Engineering 28(2), 2002 (ddmin).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def boundary(false_at: int, true_at: int, pred: Callable[[int], bool], *,
             pick: Callable[[int, int, int], int | None] | None = None) -> tuple[int, int]:
    """Narrow the one change of `pred` between a point where it is false and one where it holds.

    Invariant: `pred` is false at the false end and true at the true end (neither is tested; the
    ends may be in either order), and changes once between them. Each step probes the midpoint
    ``(false end + true end) // 2``, or the point `pick` chooses instead, and moves the end whose
    value it shares there, until the ends are adjacent.

    Args:
        false_at: a point where `pred` is taken to be false.
        true_at: a point where `pred` is taken to be true.
        pred: the predicate, monotone between the ends.
        pick: called with (midpoint, false end, true end) when given; returns the point to probe
            instead (strictly between the ends), or None to stop early (nothing between the ends
            can be probed, e.g. no release there runs the program).

    Returns:
        (false end, true end): adjacent, unless `pick` stopped early or the ends were given
        adjacent or equal (then they come back as given).

    Raises:
        ValueError: `pick` chose a point that is not strictly between the ends.

    >>> probes = []
    >>> boundary(0, 16, lambda x: probes.append(x) or x >= 5), probes
    ((4, 5), [8, 4, 6, 5])
    >>> boundary(10, 0, lambda x: x <= 3)  # true below, false above
    (4, 3)
    """
    while abs(true_at - false_at) > 1:
        probe = mid = (false_at + true_at) // 2
        if pick is not None:
            probe = pick(mid, false_at, true_at)
            if probe is None:
                break
            if not min(false_at, true_at) < probe < max(false_at, true_at):
                raise ValueError(f"pick chose {probe}, not strictly between {false_at} and "
                                 f"{true_at}")
        if pred(probe):
            true_at = probe
        else:
            false_at = probe
    return false_at, true_at


def first_true(lo: int, hi: int, pred: Callable[[int], bool]) -> int:
    """The smallest x in (lo, hi] where `pred` holds, by binary search.

    Invariant: `pred` is false at `lo` and true at `hi` (neither is tested) and monotone (false,
    then true). At most ceil(log2(hi - lo)) calls, midpoints ``(lo + hi) // 2`` (`boundary`).

    Args:
        lo: a point where `pred` is taken to be false.
        hi: a point where `pred` is taken to be true.
        pred: the predicate.

    Returns:
        The first true point (`hi` when no point in between holds; `lo` when ``lo == hi``).

    Raises:
        ValueError: ``lo > hi``.

    >>> first_true(0, 10, lambda x: x * x >= 30)
    6
    """
    if lo > hi:
        raise ValueError(f"first_true needs lo <= hi, got {lo} > {hi}")
    return boundary(lo, hi, pred)[1]


def last_true(lo: int, hi: int, pred: Callable[[int], bool]) -> int:
    """The largest x in [lo, hi) where `pred` holds: `first_true` mirrored, with the same call
    bound and the same midpoints.

    Args:
        lo, hi: the ends, `pred` taken to be true at `lo` and false at `hi` (neither is tested).
        pred: the predicate, monotone (true, then false).

    Returns:
        The last true point: `lo` when no point in between holds, or when ``lo == hi``.

    Raises:
        ValueError: ``lo > hi``.

    >>> last_true(0, 10, lambda x: x * x <= 30)
    5
    """
    if lo > hi:
        raise ValueError(f"last_true needs lo <= hi, got {lo} > {hi}")
    return boundary(hi, lo, pred)[1]


def gallop(origin: int, limit: int, pred: Callable[[int], bool]) -> int:
    """The point nearest `origin`, toward `limit`, where `pred` starts to hold, by galloping.

    Invariant: `pred` is false at `origin` and true at `limit` (neither is tested) and changes
    once between them. Probes ``origin ± 1, ± 2, ± 4, ...`` (toward `limit`, strictly between the
    two) until one holds, then binary search (`boundary`) between the last false probe and the
    first true one (or `limit`). An answer at distance d from `origin` takes at most
    2 * ceil(log2 d) + 1 calls, however far `limit` is.

    Args:
        origin: where `pred` is taken to be false.
        limit: where `pred` is taken to be true; above or below `origin`.
        pred: the predicate.

    Returns:
        Above `origin`: the smallest x in (origin, limit] where `pred` holds; below: the largest x
        in [limit, origin) where it holds (`origin` when ``limit == origin``).

    Source: Bentley and Yao 1976 (unbounded search, the doubling stage).

    >>> probes = []
    >>> gallop(3, 20, lambda x: probes.append(x) or x >= 9), probes
    (9, [4, 5, 7, 11, 9, 8])
    >>> gallop(10, 0, lambda x: x <= 2)
    2
    """
    step = 1 if limit > origin else -1
    false_at, true_at, width = origin, limit, 1
    while (limit - (origin + step * width)) * step > 0:
        probe = origin + step * width
        if pred(probe):
            true_at = probe
            break
        false_at = probe
        width *= 2
    return boundary(false_at, true_at, pred)[1]


def scan_first(candidates: Sequence[T], test: Callable[[T], bool], *,
               test_many: Callable[[list[T]], list[bool]] | None = None,
               width: int = 1) -> int | None:
    """The index of the first of `candidates` that `test` holds for, testing up to `width` of them
    at a time (in order), or None when it holds for none.

    With ``width > 1`` and `test_many`, each window of `width` candidates is decided by one call
    of `test_many` (which may run its tests in parallel, e.g. on a worker pool); the answer is the
    one a one-by-one scan gives, at the cost of testing the rest of the window in which the scan
    would have stopped.

    Args:
        candidates: what to test, in the order a sequential scan takes.
        test: one candidate -> bool.
        test_many: a list of up to `width` candidates -> one bool each, in order.
        width: candidates decided per step (>= 1).

    >>> scan_first([1, 4, 6, 9], lambda x: x % 2 == 0)
    1
    >>> scan_first([1, 3], lambda x: x > 2, test_many=lambda xs: [x > 2 for x in xs], width=2)
    1
    """
    step = max(int(width), 1)
    for start in range(0, len(candidates), step):
        window = list(candidates[start:start + step])
        verdicts = test_many(window) if test_many is not None and len(window) > 1 \
            else [test(c) for c in window]
        for k, held in enumerate(verdicts):
            if held:
                return start + k
    return None


def ddmin(items: Sequence[T], test: Callable[[list[T]], bool], *,
          test_many: Callable[[list[list[T]]], list[bool]] | None = None,
          width: int = 1) -> list[T]:
    """A 1-minimal failing subsequence of `items` (Zeller and Hildebrandt's ddmin).

    `items` itself must fail (``test(items)`` true); it is not tested again. ``test`` is called on
    subsequences (order kept), never on the empty one, and may be called twice on one; cache it
    if calls are expensive. The result fails even for a non-monotone `test` (only subsequences
    seen failing are kept), and each subsequence of it one element shorter was tested and passed
    (except the empty one).

    With `test_many` and ``width > 1`` the chunks (then the complements) of each round are tested
    `width` at a time (`scan_first`), so independent tests can run in parallel; the result is the
    one the sequential search gives (the first failing chunk in order is taken either way).

    Args:
        items: the failing configuration's elements (e.g. equation indices).
        test: True when a subsequence still fails.
        test_many: up to `width` subsequences -> one such bool each, in order.
        width: subsequences tested per step (>= 1); 1 is the sequential algorithm.

    Returns:
        A failing subsequence from which removing any single element makes it pass (1-minimal).

    Source: A. Zeller, R. Hildebrandt, "Simplifying and Isolating Failure-Inducing Input",
    IEEE TSE 28(2), 2002, the ddmin algorithm: test the n chunks, then their complements; on a
    failing chunk restart at n = 2, on a failing complement continue with n - 1; else double n.

    >>> ddmin(list(range(8)), lambda s: 3 in s and 6 in s)
    [3, 6]
    >>> ddmin(list("abcdef"), lambda s: "e" in s)
    ['e']
    """
    current = list(items)
    n = 2
    while len(current) >= 2:
        n = min(n, len(current))
        size, extra = divmod(len(current), n)
        chunks, start = [], 0
        for k in range(n):
            stop = start + size + (1 if k < extra else 0)
            chunks.append(current[start:stop])
            start = stop
        found = scan_first(chunks, test, test_many=test_many, width=width)
        if found is not None:
            current, n = chunks[found], 2
            continue
        # With n == 2 each complement is the other chunk, tested already.
        complements = [[x for j, c in enumerate(chunks) if j != k for x in c]
                       for k in range(n)] if n > 2 else []
        found = scan_first(complements, test, test_many=test_many, width=width)
        if found is not None:
            current, n = complements[found], max(n - 1, 2)
        elif n >= len(current):
            break
        else:
            n = min(2 * n, len(current))
    return current
