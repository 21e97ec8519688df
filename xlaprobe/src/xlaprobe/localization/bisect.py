"""Tier 2: bisecting the equation sequence, with every compile and run in the worker pool.

Two probes answer "does the fault lie before cone position m?":

* **Segments** (`bisect_segments`): a segment of the cone compiled *alone* under the faulty
  configuration, fed the reference values of its free variables, judged by the oracle against its
  own reference and error budget (`xlaprobe.checking.check_program`). A segment is a different module:
  XLA fuses and folds it differently, so a fault that depends on the whole module (which fusion
  XLA builds first, whether a transpose is folded into a dot) may vanish or appear elsewhere; but a
  crash or compile error can only be isolated this way.
* **Cuts** (`bisect_cuts`): the whole program compiled under the faulty configuration with the
  values computed before the cut also returned (`Segmenter.probe`), judged against the reference
  values recorded once for every intermediate (float64, plus the honest runs of the error budget).
  The module stays the program's own, with a few more outputs, so the search finds the fault XLA
  makes in *this* program; each step costs one compile of the whole program and no reference run.

Both searches are binary (log2 n cycles; `xlaprobe.search`) and re-verify their result; a
failure that vanishes is rerun up to `RERUNS` times and reported flaky. After cuts,
`latest_failing_start` and `alone_window` compile segments alone around the first wrong value
(see `xlaprobe.localization.api`).

Source: XLA's ``hlo_bisect`` (bisection over root outputs and post-order prefixes; rerun five
times when the bug vanishes after a cut).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xlaprobe.checking import HONEST, REFERENCE, check_program, split_honest
from xlaprobe.checker import Checker, Failure
from xlaprobe.configs.registry import Configuration
from xlaprobe.errors import InvalidArgument
from xlaprobe.localization import fusion
from xlaprobe.localization.segments import SegmentProgram, Segmenter
from xlaprobe.oracle import OUTCOME_VERDICT, VerdictKind, judge_leaf, summary_kind
from xlaprobe.program import Program
from xlaprobe.search import first_true, gallop, last_true

#: Reruns of a failure that vanished on re-verification before it is declared lost (hlo_bisect).
RERUNS = 5


@dataclasses.dataclass(frozen=True, slots=True)
class Step:
    """One compile+run of the faulty configuration during localization.

    Attributes:
        tier: ``"outputs"`` (the whole program or the cone), ``"cut"`` and ``"cut-verify"``
            (the whole program with the values before a cut), ``"prefix"``, ``"suffix"``,
            ``"verify"``, ``"alone"`` and ``"expose"`` (segments compiled alone), ``"hlo"`` (an
            optimized-HLO compile).
        first: first top-level equation index of what was judged (-1: the whole program's outputs).
        last: last top-level equation index (inclusive; -1 likewise).
        size: number of equations compiled.
        failed: True when the run reproduced the failure (for ``hlo``: the compile succeeded).
        kind: the verdict kind of the run (``ok`` when it passed).
        seconds: wall time of the step, judging included (s).
    """

    tier: str
    first: int
    last: int
    size: int
    failed: bool
    kind: str
    seconds: float

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        data = dataclasses.asdict(self)
        data["seconds"] = round(self.seconds, 4)
        return data


@dataclasses.dataclass(frozen=True, slots=True)
class Trial:
    """What one run showed: did it fail like the finding, how, and which outputs."""

    failed: bool
    kind: VerdictKind
    failing: tuple[int, ...] = ()


@dataclasses.dataclass(frozen=True)
class Recording:
    """Every intermediate of the program under the reference and the honest runs of its budget.

    Attributes:
        reference: variable -> float64 reference value.
        budget: variable -> its values in the honest runs (``reference:native``, Monte Carlo).
        flushed: variable -> its value in ``reference:ftz`` (absent where that run failed).
    """

    reference: dict[Any, np.ndarray]
    budget: dict[Any, list[np.ndarray]]
    flushed: dict[Any, np.ndarray]


class Searcher:
    """The state of one localization: pool, faulty configuration, the finding's kind, counters.

    Args:
        config: the faulty configuration.
        pool: a `xlaprobe.workers.WorkerPool`.
        kind: the finding's verdict kind; a run reproduces the failure when the checker
            (`xlaprobe.checker.Checker`, comparing failure classes: a segment's values are not
            the finding's outputs) says its kind is the finding's.
        timeout_s: per-run limit (s), or None for the pool's.
        on_step: called after each cycle.
    """

    def __init__(self, config: Configuration, pool: Any, kind: VerdictKind,
                 timeout_s: float | None, on_step: Callable[[Step], None] | None):
        self.config = config
        self.spec = str(config)
        self.pool = pool
        self.checker = Checker(Failure(kind, ()), outputs=False)
        self.timeout_s = timeout_s
        self.on_step = on_step
        self.cycles = 0
        self.steps: list[Step] = []
        self.flaky = False
        self.notes: list[str] = []
        self.hlo_cache: dict[str, str | None] = {}  # program fingerprint -> optimized HLO text
        #: A trusted configuration (`baseline_spec`) a failing cut is rerun under, and the
        #: variables it also got wrong there: noise (e.g. ``1 - tanh(x)`` amplifying XLA's
        #: few-ULP tanh) that the failing outputs' own budget absorbs, never evidence.
        self.baseline: str | None = None
        self.noisy: set[Any] = set()
        self._trials: dict[tuple[int, int, int], Trial] = {}

    @property
    def kind(self) -> VerdictKind:
        """The finding's verdict kind."""
        return self.checker.kind

    def matches(self, kind: VerdictKind) -> bool:
        """Is `kind` the same failure as the finding's?"""
        return self.checker.matches_kind(kind)

    def log(self, tier: str, equations: Sequence[int], size: int, failed: bool, kind: VerdictKind,
            seconds: float) -> None:
        """Record one step and report it."""
        step = Step(tier, equations[0] if equations else -1, equations[-1] if equations else -1,
                    size, failed, kind.value, seconds)
        self.steps.append(step)
        if self.on_step is not None:
            self.on_step(step)

    def hlo(self, target: Program, equations: tuple[int, ...] = ()) -> str | None:
        """The faulty configuration's optimized HLO text of `target` (one compile cycle, cached
        by fingerprint), or None (with a note) where there is none.

        Args:
            target: the program, or a segment's program.
            equations: the top-level equations of the localized program `target` holds (for the
                step log; empty for the whole program).
        """
        if target.fingerprint in self.hlo_cache:
            return self.hlo_cache[target.fingerprint]
        try:
            config = fusion.hlo_config(self.config)
        except InvalidArgument as exc:
            self.hlo_cache[target.fingerprint] = None
            self.notes.append(str(exc))
            return None
        started = time.perf_counter()
        outcome = fusion.optimized_hlo(self.pool, target, config, timeout_s=self.timeout_s)
        self.cycles += 1
        kind = VerdictKind.OK if outcome.ran else VerdictKind(outcome.kind.value)
        self.log("hlo", equations, len(target.jaxpr.jaxpr.eqns), outcome.ran, kind,
                 time.perf_counter() - started)
        text = outcome.value if outcome.ran else None
        if text is None:
            error = outcome.last_line[:200]
            self.notes.append(f"no optimized HLO from {config}: {outcome.kind.value} {error}")
        self.hlo_cache[target.fingerprint] = text
        return text

    def run_segment(self, segment: SegmentProgram, tier: str) -> Trial:
        """Compile one segment alone under the faulty configuration and judge it (one cycle)."""
        if not segment.program.output_names:
            return Trial(False, VerdictKind.OK)
        started = time.perf_counter()
        result = check_program(segment.program, [self.spec, "reference"], self.pool,
                               timeout_s=self.timeout_s)
        self.cycles += 1
        verdicts = result.verdicts[result.configs.index(self.spec)]
        if result.judged_against != "reference":
            self.notes.append(f"the reference did not run on equations {segment.equations[0]}.."
                              f"{segment.equations[-1]}; that segment counted as passing")
            trial = Trial(False, VerdictKind.OK)
        else:
            failing = tuple(v.index for v in verdicts if self.matches(v.kind))
            trial = Trial(bool(failing), summary_kind(v.kind for v in verdicts), failing)
        self.log(tier, segment.equations, len(segment.equations), trial.failed, trial.kind,
                 time.perf_counter() - started)
        return trial

    def segment_trial(self, segmenter: Segmenter, start: int, stop: int, tier: str) -> Trial:
        """`run_segment` of cone positions [start, stop), run once per segmenter and window."""
        key = (id(segmenter), start, stop)
        if key not in self._trials:
            self._trials[key] = self.run_segment(segmenter.segment(start, stop), tier)
        return self._trials[key]

    def run_cut(self, segmenter: Segmenter, cut: int, recording: Recording, tier: str) -> Trial:
        """Compile the whole program returning the values computed before cone position `cut`,
        and judge those against the recording (one cycle). Failing positions index
        `segmenter.exposed_at(cut)`."""
        started = time.perf_counter()
        program, positions, exposed = segmenter.probe(cut)
        outcome = self.pool.run(program, self.spec, timeout_s=self.timeout_s)
        self.cycles += 1
        if not outcome.ran:
            kind = OUTCOME_VERDICT[outcome.kind]
            trial = Trial(self.matches(kind), kind, tuple(range(len(exposed))))
        else:
            trial = self._judge_cut(segmenter, recording, outcome.outputs, positions, exposed)
            if trial.failed and self.baseline:
                # Values the trusted configuration also gets "wrong" in this very module are
                # rounding noise the failing outputs' budget absorbs, not evidence.
                trusted = self.pool.run(program, self.baseline, timeout_s=self.timeout_s)
                if trusted.ran:
                    shared = self._judge_cut(segmenter, recording, trusted.outputs, positions,
                                             exposed)
                    if shared.failing:
                        self.noisy.update(exposed[i] for i in shared.failing)
                        trial = self._judge_cut(segmenter, recording, outcome.outputs, positions,
                                                exposed)
        cone = segmenter.cone
        self.log(tier, cone[:cut], len(segmenter.program.jaxpr.jaxpr.eqns), trial.failed,
                 trial.kind, time.perf_counter() - started)
        return trial

    def _judge_cut(self, segmenter: Segmenter, recording: Recording, outputs: Sequence[Any],
                   positions: Sequence[int], exposed: Sequence[Any]) -> Trial:
        failing, kinds = [], set()
        for i, (position, var) in enumerate(zip(positions, exposed)):
            if var not in recording.reference or var in self.noisy:
                continue  # a PRNG key (no reference value), or noise a trusted compile shares
            verdict = judge_leaf(outputs[position], recording.reference[var],
                                 budget=recording.budget.get(var),
                                 flushed=recording.flushed.get(var),
                                 tolerance=segmenter.program.tolerance)
            kinds.add(verdict.kind)
            if self.matches(verdict.kind):
                failing.append(i)
        return Trial(bool(failing), summary_kind(kinds), tuple(failing))

    def confirm(self, run: Callable[[], Trial], what: str) -> Trial | None:
        """Re-verify something seen failing; rerun up to `RERUNS` times if the failure vanished.

        Returns:
            The failing trial, or None when the failure did not come back.
        """
        trial = run()
        if trial.failed:
            return trial
        self.flaky = True
        for _ in range(RERUNS):
            trial = run()
            if trial.failed:
                self.notes.append(f"flaky: {what} failed, passed, then failed again")
                return trial
        self.notes.append(f"flaky: {what} failed once, then passed {RERUNS + 1} times")
        return None


def bisect_segments(search: Searcher, segmenter: Segmenter, direction: str) -> tuple[int, int]:
    """A minimal failing window [start, stop) of cone positions, each segment compiled alone;
    ``[0, size)`` must be known to fail. Both ends of the window are needed.

    ``"suffix"``: the latest start whose suffix ``[start, size)`` still fails, then the earliest
    stop with ``[start, stop)`` failing. A suffix is judged on the failing program outputs
    themselves, so it blames the last fault that reaches them, never one whose effect a later
    equation masks. ``"prefix"``: the shortest failing prefix, then the latest start. Each is a
    binary search (log2 n cycles) and a gallop from a single equation outwards (a few cycles when
    the fault needs little context: a fusion across the cut widens the window instead of losing
    the failure); both from `xlaprobe.search`.
    """
    size = segmenter.size

    def fails(start: int, stop: int, tier: str) -> bool:
        return search.segment_trial(segmenter, start, stop, tier).failed

    if direction == "suffix":
        # [0, size) fails; the empty suffix [size, size) passes.
        start = last_true(0, size, lambda s: fails(s, size, "suffix"))
        return start, gallop(start, size, lambda t: fails(start, t, "prefix"))
    # The empty prefix [0, 0) passes; [0, size) fails.
    stop = first_true(0, size, lambda t: fails(0, t, "prefix"))
    return gallop(stop, 0, lambda s: fails(s, stop, "suffix")), stop


def bisect_cuts(search: Searcher, segmenter: Segmenter, recording: Recording) -> tuple[int, Trial]:
    """The smallest cut m whose exposed values (computed before cone position m, in the whole
    program's compile) are already wrong: cone position m - 1 is the first equation whose value
    is wrong. The cut at `size` (the failing outputs) must be known to fail.

    Returns:
        (m, the trial at m).
    """
    trials: dict[int, Trial] = {}

    def fails(cut: int) -> bool:
        trials[cut] = search.run_cut(segmenter, cut, recording, "cut")
        return trials[cut].failed

    cut = first_true(0, segmenter.size, fails)  # the cut at 0 exposes nothing: it passes
    return cut, trials.get(cut, Trial(True, search.kind))


def alone_window(search: Searcher, segmenter: Segmenter, position: int,
                 max_tries: int = 5) -> tuple[int, int] | None:
    """The smallest window around cone position `position` that fails compiled alone: the
    equation itself, then with one producer, one consumer, and wider symmetric windows.

    Returns:
        (start, stop), or None when no window of up to `max_tries` tries fails alone (the fault
        needs the whole program's compile).
    """
    size = segmenter.size
    windows: list[tuple[int, int]] = []
    for before, after in ((0, 1), (1, 1), (0, 2), (2, 2), (4, 4), (8, 8)):
        window = (max(0, position - before), min(size, position + after))
        if window not in windows:
            windows.append(window)
    for start, stop in windows[:max_tries]:
        if search.segment_trial(segmenter, start, stop, "alone").failed:
            return start, stop
    return None


def baseline_spec(config: Configuration) -> str:
    """A configuration trusted where `config` is not: plain ``xla`` for a planted-fault compiler or
    an ``xla`` configuration with options; op-by-op ``eager`` for plain ``xla`` (or ``xla:O0``,
    which leaves the HLO unchanged on CPU); ``xla`` for anything else.

    >>> baseline_spec(Configuration.parse("mutant:reduce-wrong-init"))
    'xla'
    >>> baseline_spec(Configuration.parse("xla"))
    'eager'
    """
    if config.kind == "xla" and not config.options and config.variant in (None, "O0"):
        return "eager"
    return "xla"


def record(pool: Any, recording_program: Program, variables: list[Any],
           timeout_s: float | None) -> Recording:
    """Run the reference and the honest runs of the error budget on the recording program
    (`xlaprobe.localization.segments.recording_program`) in the pool, once.

    Raises:
        RuntimeError: the float64 reference itself cannot run (its error is in the message).
    """
    specs = [REFERENCE, *HONEST]
    kwargs = {} if timeout_s is None else {"timeout_s": timeout_s}
    outcomes = dict(pool.run_many([(recording_program, s) for s in specs], **kwargs))
    reference = outcomes[0]
    if not reference.ran:
        raise RuntimeError(f"{reference.kind.value}: {reference.error[-300:]}")
    flushed_run, budget_runs = split_honest([outcomes[i] for i in range(1, len(specs))])
    budget: dict[Any, list[np.ndarray]] = {v: [] for v in variables}
    for run in budget_runs:
        if run.ran:
            for var, value in zip(variables, run.outputs):
                budget[var].append(value)
    flushed = {}
    if flushed_run is not None and flushed_run.ran:
        flushed = dict(zip(variables, flushed_run.outputs))
    return Recording(dict(zip(variables, reference.outputs)),
                     {v: runs for v, runs in budget.items() if runs}, flushed)


def latest_failing_start(search: Searcher, segmenter: Segmenter, lowest: int,
                         stop: int) -> int | None:
    """The latest start s in [lowest, stop) whose segment [s, stop) fails compiled alone, by
    binary search, given that [stop - 1, stop) passes; None when [lowest, stop) passes too."""
    def fails(start: int) -> bool:
        return search.segment_trial(segmenter, start, stop, "alone").failed

    if lowest >= stop - 1 or not fails(lowest):
        return None
    return last_true(lowest, stop - 1, fails)  # [lowest, stop) fails, [stop - 1, stop) passes
