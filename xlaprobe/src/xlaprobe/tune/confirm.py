"""Confirmation of a win on a loaded machine: a paired, interleaved comparison in one fresh process.

A search measurement (`xlaprobe.tune.measure`) is short and races; its interval is too wide to
accept a win on a shared machine, and an A/A control timed minutes earlier in another process says
little about the noise when the win is re-measured (it reached [1.03, 51.5] at load 12-30). The
confirmation instead compiles, in one worker process, the baseline ``A``, a second, independent
compile of the baseline ``A'`` (the A/A control) and the candidate ``B``, and times them in
rounds, each round one sample of each in a rotating order (A B A', B A' A, A' A B, ...), so that
background load hits all three alike. Each round gives a paired ratio ``A / B`` (the speedup) and
``A / A'`` (the control). The interval of each is the distribution-free sign-test interval of the
median (order statistics of the ratios, binomial coverage; Conover 1999, Practical
Nonparametric Statistics, 3.6), which a few rounds slowed 50x by a neighbour cannot move.

A candidate is confirmed when the lower end of its interval clears `MIN_GAIN` and how far the
control's interval, measured in the same rounds, strays from 1 (`threshold`); the caller runs it
in a fresh process and guards the candidate's outputs as every measurement's.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import numpy as np

from xlaprobe.errors import InvalidArgument

#: Smallest speedup worth accepting (a win below it is within what a fresh process gives).
MIN_GAIN = 1.02


def noise_threshold(control_low: float, control_high: float) -> float:
    """What a speedup interval's lower end must exceed: `MIN_GAIN`, or how far an A/A control's
    interval ``[control_low, control_high]`` (ratios) strays from 1 on either side."""
    return max(MIN_GAIN, control_high, 2.0 - control_low)


def sign_interval(ratios: np.ndarray, confidence: float = 0.95) -> tuple[float, float, float]:
    """Median of paired ratios and its sign-test (order-statistic) confidence interval.

    Args:
        ratios: float64[n] paired ratios (n >= 6 for a 95% interval).
        confidence: coverage of the interval (at least this, by the binomial(n, 1/2) law).

    Returns:
        ``(median, low, high)``: ``low`` and ``high`` are the k-th smallest and largest ratios,
        k the largest with ``P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2``.

    Raises:
        InvalidArgument: not 1-d, non-positive or non-finite values, or too few ratios for the
            confidence asked.
    """
    from scipy.stats import binom  # heavy (seconds to import): only an interval needs it

    values = np.sort(np.asarray(ratios, np.float64))
    if values.ndim != 1 or not (np.all(np.isfinite(values)) and np.all(values > 0)):
        raise InvalidArgument("ratios must be a 1-d series of positive finite values")
    n = values.size
    tail = (1 - confidence) / 2
    k = int(np.searchsorted(binom.cdf(np.arange(n), n, 0.5), tail, side="right"))
    if k < 1:
        raise InvalidArgument(f"{n} rounds cannot give a {confidence:.0%} sign-test interval")
    return float(np.median(values)), float(values[k - 1]), float(values[n - k])


@dataclasses.dataclass(frozen=True)
class Confirmation:
    """A candidate timed against the baseline and the baseline against itself, same rounds.

    Attributes:
        speedup, low, high: median of per-round ``baseline / candidate`` and its sign interval.
        control, control_low, control_high: the same for ``baseline / baseline'`` (A/A).
        rounds: rounds timed; ``wins``: rounds where the candidate was faster.
        baseline_s, candidate_s: each one's median seconds per run.
        threads: CPUs of the process; load: 1-minute load average before and after; pid.
        outputs: the candidate's outputs, flat (for the guard).
    """

    speedup: float
    low: float
    high: float
    control: float
    control_low: float
    control_high: float
    rounds: int
    wins: int
    baseline_s: float
    candidate_s: float
    threads: int
    load: tuple[float, float]
    pid: int
    outputs: tuple[np.ndarray, ...] = ()

    @property
    def threshold(self) -> float:
        """What `low` must exceed: `MIN_GAIN`, or how far the control strays from 1."""
        return noise_threshold(self.control_low, self.control_high)

    @property
    def confirmed(self) -> bool:
        """The candidate is faster beyond the noise the control shows in the same rounds."""
        return self.low > self.threshold

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (without outputs), with ``threshold`` and ``confirmed``."""
        data = dataclasses.asdict(self)
        data.pop("outputs")
        return {**data, "threshold": self.threshold, "confirmed": self.confirmed,
                "method": "paired-interleaved-sign-test"}


def confirm_in_worker(closed_jaxpr: Any, inputs: tuple[np.ndarray, ...], *,
                      candidate_options: dict[str, Any], candidate_jaxpr: bytes | None,
                      rounds: int = 30, sample_s: float = 0.02, confidence: float = 0.95,
                      mutant: str | None = None) -> dict[str, Any]:
    """Worker function (`WorkerPool.call`): the paired A / B / A' rounds of the module docstring.

    Args:
        closed_jaxpr, inputs: the baseline program (its inputs feed all three).
        candidate_options: typed XLA compiler options of the candidate (the baseline's: none).
        candidate_jaxpr: the candidate's program (`xlaprobe.jaxprs.dumps_jaxpr`) when its knobs
            change it, else None.
        rounds: timed rounds (>= 6).
        sample_s: least duration of one sample (s); short programs repeat inside it.
        confidence: of the sign-test intervals.
        mutant: a planted miscompilation to compile the candidate with (tests of the guard).

    Returns:
        The fields of `Confirmation` as a dict.
    """
    # The worker's side imports jax: the intervals above load without it.
    import jax

    from xlaprobe.tune.measure import _candidate, _compile, _repeats, _sample

    load_before = os.getloadavg()[0]
    args = [jax.device_put(x) for x in inputs]
    baseline, _ = _compile(closed_jaxpr, inputs, {})
    twin, _ = _compile(closed_jaxpr, inputs, {})  # compiled again: two executables, as A / B
    candidate, _, outputs = _candidate(closed_jaxpr, inputs, args, candidate_options,
                                       candidate_jaxpr, mutant)
    runs = (baseline, candidate, twin)
    repeats = _repeats(runs, args, sample_s)
    times = np.zeros((rounds, 3))
    for r in range(rounds):
        for k in [(r + j) % 3 for j in range(3)]:
            times[r, k] = _sample(runs[k], args, repeats)
    speedup, low, high = sign_interval(times[:, 0] / times[:, 1], confidence)
    control, control_low, control_high = sign_interval(times[:, 0] / times[:, 2], confidence)
    return {"speedup": speedup, "low": low, "high": high, "control": control,
            "control_low": control_low, "control_high": control_high, "rounds": rounds,
            "wins": int(np.sum(times[:, 1] < times[:, 0])),
            "baseline_s": float(np.median(times[:, 0])),
            "candidate_s": float(np.median(times[:, 1])),
            "threads": len(os.sched_getaffinity(0)), "load": (load_before, os.getloadavg()[0]),
            "pid": os.getpid(), "outputs": outputs}


def confirm(pool: Any, baseline: Any, candidate_options: dict[str, Any],
            candidate: Any | None = None, *, rounds: int = 30, sample_s: float = 0.02,
            group: str = "tune:confirm", timeout_s: float | None = None,
            mutant: str | None = None) -> Confirmation | None:
    """Confirm a candidate against the baseline in a fresh worker process of `group`.

    Args:
        pool: a `xlaprobe.workers.WorkerPool`; the group's worker is recycled first, so the
            comparison runs in a process that timed nothing before.
        baseline: the baseline `xlaprobe.program.Program`.
        candidate_options: typed compiler options of the candidate.
        candidate: the candidate's program when its knobs differ (same inputs), else None.
        rounds: paired rounds (>= 6); sample_s: least seconds of one sample.
        group: the worker group; timeout_s: limit on the whole comparison (s).
        mutant: compile the candidate with this planted miscompilation.

    Returns:
        The `Confirmation`, or None when the candidate failed to compile, crashed or timed out.

    Raises:
        InvalidArgument: fewer than 6 rounds.
    """
    from xlaprobe import jaxprs  # imports jax: as above

    if rounds < 6:
        raise InvalidArgument(f"a confirmation needs at least 6 rounds, got {rounds}")
    if group in pool.worker_pids():
        pool.recycle(group)
    blob = None if candidate is None else jaxprs.dumps_jaxpr(candidate.jaxpr)
    outcome = pool.call(baseline, f"{__name__}:confirm_in_worker",
                        {"candidate_options": candidate_options, "candidate_jaxpr": blob,
                         "rounds": rounds, "sample_s": sample_s, "mutant": mutant},
                        group=group, timeout_s=timeout_s)
    if not outcome.ran:
        return None
    value = dict(outcome.value)
    value["load"] = tuple(value["load"])
    return Confirmation(**value)
