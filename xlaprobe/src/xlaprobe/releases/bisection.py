"""Release bisection: in which jax/jaxlib release did a failure appear, and in which was it fixed?

The search runs the program under ``jaxlib==V`` configurations (see `xlaprobe.releases.kind`),
each judged by the same oracle against the same float64 reference, and assumes one change of
verdict between the two ends it finds (as `git bisect` does):

1. run the oldest and the newest release (an end that cannot load the program, *unsupported*,
   gives way to its neighbour);
2. good then bad: binary search for the first bad release (``last_good``, ``first_bad``);
   bad then good: binary search for the first fixed one (``first_fixed``; ``first_bad`` is the
   oldest release tried, bad as far back as the list goes); bad at both ends: ``first_bad`` is the
   oldest; good at both ends: the bug may have come and gone, so a failing release is looked for
   between them (the finding's own release first, then the listed releases in between, midpoints
   first, then releases the caller adds between the ends, e.g. the registry's unlisted minor lines)
   and both sides of the first one found are searched; when none fails, nothing failed in the range;
3. the good release next to each boundary is run once more: a failure that vanished and comes back
   on a rerun is *flaky* (as localization reruns a vanished failure), not a boundary.

That is at most ceil(log2 R) + 2 release runs for R releases with one change, plus one rerun per
boundary; a bug that came and went can cost a run of every release between the ends.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator, Sequence

from xlaprobe.releases.envs import version_key
from xlaprobe.search import boundary

#: Verdicts that mean "this release computes the program right".
GOOD = frozenset({"ok", "ftz"})
#: The verdict of a release that cannot run the program at all.
UNSUPPORTED = "unsupported"
#: The verdict given to a release whose failure vanished on one run and came back on another.
FLAKY = "flaky"


@dataclasses.dataclass(frozen=True, slots=True)
class ReleaseRun:
    """One run of the program under one release.

    Attributes:
        release: the jaxlib version, e.g. ``"0.5.3"``.
        verdict: the configuration's summary verdict (``ok``, ``mismatch``, ``crash``,
            ``unsupported``, ...).
        detail: failing outputs, or the error line of a crash, compile error or unsupported run.
        seconds: wall time of the run (s).
        rerun: True for the confirming rerun of a good release next to a boundary.
        other: True when the release fails, but not like the finding
            (`xlaprobe.checker.Checker.same`): another bug, no evidence about this one.
    """

    release: str
    verdict: str
    detail: str = ""
    seconds: float = 0.0
    rerun: bool = False
    other: bool = False

    @property
    def bad(self) -> bool | None:
        """True: fails like the finding; False: right; None: unsupported or failing otherwise
        (no evidence either way)."""
        if self.verdict == UNSUPPORTED or self.other:
            return None
        return self.verdict not in GOOD

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict."""
        return {"release": self.release, "verdict": self.verdict, "detail": self.detail,
                "seconds": round(self.seconds, 3), "rerun": self.rerun, "other": self.other}


@dataclasses.dataclass(frozen=True, slots=True)
class Bisection:
    """The result of a release bisection.

    Attributes:
        target: what was bisected (finding id, case module, model, ...).
        config: the configuration template, e.g. ``xla:fastmath``.
        releases: the releases in the search range, oldest first.
        first_bad: the first release that fails, or None (none fails).
        last_good: the last right release before `first_bad`, or None (bad as far back as tried).
        first_fixed: the first right release after a failing one, or None (not fixed).
        flaky: releases whose failure vanished on one run and came back on another.
        runs: every run, in the order made (reruns included).
        both_ends_right: the oldest and the newest release tried compute the program right.
        added: releases searched beyond those asked for (between two right ends).
    """

    target: str
    config: str
    releases: tuple[str, ...]
    first_bad: str | None
    last_good: str | None
    first_fixed: str | None
    flaky: tuple[str, ...]
    runs: tuple[ReleaseRun, ...]
    both_ends_right: bool = False
    added: tuple[str, ...] = ()

    @property
    def boundary(self) -> bool:
        """True when a change was found: a good release before a bad one, or a fix."""
        return bool(self.first_bad and self.last_good) or bool(self.first_fixed)

    @property
    def fails_nowhere(self) -> bool:
        """True when every release tried computes the program right (no failure, none flaky)."""
        return self.first_bad is None and not self.flaky and any(r.bad is False for r in self.runs)

    @property
    def release_runs(self) -> int:
        """Runs made, not counting confirming reruns."""
        return sum(not r.rerun for r in self.runs)

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict (``first_bad``, ``last_good``, ``first_fixed``, ``runs``, ...)."""
        return {"target": self.target, "config": self.config, "releases": list(self.releases),
                "first_bad": self.first_bad, "last_good": self.last_good,
                "first_fixed": self.first_fixed, "boundary": self.boundary,
                "bad_at_oldest": bool(self.first_bad and not self.last_good),
                "flaky": list(self.flaky), "both_ends_right": self.both_ends_right,
                "added": list(self.added), "fails_nowhere": self.fails_nowhere,
                "release_runs": self.release_runs, "bound": run_bound(len(self.releases)),
                "runs": [r.to_json() for r in self.runs]}


def run_bound(count: int) -> int:
    """The most release runs a bisection over `count` releases with one change needs.

    >>> run_bound(9)
    6
    """
    return math.ceil(math.log2(count)) + 2 if count > 1 else count


class _Runs:
    """The runs of one bisection over `order`: each release judged once (reruns apart), in the
    order asked for, every run reported to `on_run`."""

    def __init__(self, order: Sequence[str], judge: Callable[[str], ReleaseRun],
                 on_run: Callable[[ReleaseRun], None] | None):
        self.order = order
        self.judge = judge
        self.on_run = on_run
        self.runs: list[ReleaseRun] = []
        self.seen: dict[int, ReleaseRun] = {}
        self.flaky: list[str] = []

    def run(self, i: int, rerun: bool = False) -> ReleaseRun:
        """The run of release `i` (judged now unless seen; a rerun is always judged anew)."""
        if i in self.seen and not rerun:
            return self.seen[i]
        result = dataclasses.replace(self.judge(self.order[i]), release=self.order[i],
                                     rerun=rerun)
        self.runs.append(result)
        if self.on_run is not None:
            self.on_run(result)
        if not rerun:
            self.seen[i] = result
        return result

    def supported(self, start: int, step: int, stop: int) -> int | None:
        """The first index from `start` toward `stop` (exclusive) whose release runs."""
        for i in range(start, stop, step):
            if self.run(i).bad is not None:
                return i
        return None

    def boundary(self, good: int, bad: int) -> tuple[int, int]:
        """(last index on `good`'s side, first index on `bad`'s side) of the one change between
        them; `good` and `bad` may be in either order. Each step runs the supported release
        nearest the midpoint; when none between them runs, the change is somewhere in there."""
        return boundary(good, bad, lambda i: bool(self.run(i).bad), pick=self._supported_near)

    def _supported_near(self, mid: int, a: int, b: int) -> int | None:
        """The supported release strictly between `a` and `b` nearest `mid` (above first)."""
        lo, hi = min(a, b), max(a, b)
        for offset in range(hi - lo):
            for i in (mid + offset, mid - offset):
                if lo < i < hi and self.run(i).bad is not None:
                    return i
        return None

    def extend(self, versions: Sequence[str]) -> None:
        """Add releases to the order (runs made so far kept, re-indexed by release)."""
        by_release = {self.order[i]: r for i, r in self.seen.items()}
        self.order = sorted({*self.order, *versions}, key=version_key)
        self.seen = {self.order.index(v): r for v, r in by_release.items()}

    def first_bad_between(self, lo: int, hi: int) -> int | None:
        """The first release strictly between `lo` and `hi` found failing like the finding, run
        midpoints first (`sweep`), or None when none does."""
        return next((i for i in sweep(lo, hi) if self.run(i).bad), None)

    def confirm(self, good: int) -> bool:
        """Rerun a good release next to a boundary; False (and flaky) when it fails now."""
        again = self.run(good, rerun=True)
        if again.bad:
            self.flaky.append(self.order[good])
            return False
        return True


def sweep(lo: int, hi: int) -> Iterator[int]:
    """Every integer strictly between `lo` and `hi`, midpoints first (breadth first): a bug that
    lives in a window of consecutive releases is met after about (hi - lo) / width probes.

    >>> list(sweep(0, 8))
    [4, 2, 6, 1, 3, 5, 7]
    """
    spans = [(lo, hi)]
    while spans:
        a, b = spans.pop(0)
        if b - a > 1:
            mid = (a + b) // 2
            yield mid
            spans += [(a, mid), (mid, b)]


def bisect(releases: Sequence[str], judge: Callable[[str], ReleaseRun], *,
           known_bad: str | None = None, target: str = "", config: str = "",
           on_run: Callable[[ReleaseRun], None] | None = None,
           between: Callable[[str, str], Sequence[str]] | None = None,
           note: Callable[[str], None] | None = None) -> Bisection:
    """Bisect `releases` with `judge` (see module docstring).

    Args:
        releases: release versions (any order; sorted oldest first, duplicates dropped).
        judge: runs the program under one release and returns its `ReleaseRun`.
        known_bad: a release known to fail (the finding's own), searched from first when both
            ends are good; ignored when it is not in `releases`.
        target, config: recorded in the result.
        on_run: called with each run as it is made (progress).
        between: called with (oldest, newest) when both ends are right and no release listed
            between them fails; returns more releases to try there (others are ignored).
        note: gets one line when both ends are right (what is tried next).

    Returns:
        The `Bisection`.

    Raises:
        ValueError: `releases` is empty.
    """
    order = sorted(set(releases), key=version_key)
    if not order:
        raise ValueError("no releases to bisect")
    runs = _Runs(order, judge, on_run)
    seen = runs.seen
    oldest = runs.supported(0, 1, len(order))
    newest = None if oldest is None else runs.supported(len(order) - 1, -1, oldest)
    first_bad = last_good = first_fixed = None
    both_right, added = False, ()
    if oldest is not None and newest is None:  # a single release runs
        first_bad = order[oldest] if seen[oldest].bad else None
        last_good = None if seen[oldest].bad else order[oldest]
    elif oldest is not None and newest is not None:
        old_bad, new_bad = bool(seen[oldest].bad), bool(seen[newest].bad)
        if not old_bad and new_bad:
            good, bad = runs.boundary(oldest, newest)
            if runs.confirm(good):
                last_good, first_bad = order[good], order[bad]
            else:
                first_bad = order[good]
        elif old_bad and not new_bad:
            bad, good = runs.boundary(newest, oldest)[::-1]
            first_bad = order[oldest]
            if runs.confirm(good):
                first_fixed = order[good]
        elif old_bad and new_bad:
            first_bad = order[oldest]
        else:
            both_right = True
            last_good, first_bad, first_fixed, added = _came_and_went(
                runs, order[oldest], order[newest], known_bad, between, note or (lambda _: None))
    return Bisection(target, config, tuple(runs.order), first_bad, last_good, first_fixed,
                     tuple(runs.flaky), tuple(runs.runs), both_right, added)


def _came_and_went(runs: _Runs, oldest: str, newest: str, known_bad: str | None,
                   between: Callable[[str, str], Sequence[str]] | None,
                   note: Callable[[str], None]) -> tuple[str | None, str | None, str | None,
                                                         tuple[str, ...]]:
    """Both ends right: (last good, first bad, first fixed, releases added) of a bug that came
    and went, searched from the first failing release found between the ends; (newest, None,
    None, added) when none fails."""
    lo, hi = runs.order.index(oldest), runs.order.index(newest)
    inside = hi - lo - 1
    note(f"both ends are right (jaxlib=={oldest} and jaxlib=={newest}): looking for a failing "
         f"release between them ({inside} listed)")
    anchor = runs.order.index(known_bad) if known_bad in runs.order else None
    if anchor is None or not runs.run(anchor).bad:
        anchor = runs.first_bad_between(lo, hi)
    added: tuple[str, ...] = ()
    if anchor is None and between is not None:
        key_lo, key_hi = version_key(oldest), version_key(newest)
        added = tuple(sorted({v for v in between(oldest, newest)
                              if key_lo < version_key(v) < key_hi and v not in runs.order},
                             key=version_key))
        if added:
            note(f"no listed release between them fails; trying {len(added)} more: "
                 + ", ".join(added))
            runs.extend(added)
            lo, hi = runs.order.index(oldest), runs.order.index(newest)
            anchor = runs.first_bad_between(lo, hi)
    if anchor is None:
        return newest, None, None, added
    order = runs.order
    good, bad = runs.boundary(lo, anchor)
    last_good, first_bad = (order[good], order[bad]) if runs.confirm(good) else (None, order[good])
    _, good2 = runs.boundary(hi, anchor)[::-1]
    return last_good, first_bad, order[good2] if runs.confirm(good2) else None, added
