"""Noise-aware timing of a candidate against the baseline, in one worker process.

Protocol (one `measure` call = one *measurement*): compile the baseline (cached by jax after the
first time in a worker) and the candidate; run each twice to warm up; pick an inner repeat count
so that one sample lasts at least `Protocol.sample_s`; then run *rounds*, each timing one sample
of the baseline and one of the candidate back to back, alternating which goes first. The
per-round ratio ``baseline / candidate`` pairs samples taken under the same machine conditions
(the machine is shared and noisy: a fresh process varies by 13-22%, one process by ~2%). The
speedup is the median ratio, with a bootstrap percentile interval (Efron & Tibshirani 1993).
*Racing* (as in iterated racing, Lopez-Ibanez et al. 2016): after `Protocol.min_rounds`, a
candidate whose interval lies wholly below ``1 - race_margin`` stops early, and so does any
candidate whose interval is narrower than `Protocol.ci_width`. Thread count and load average are
recorded with every measurement. Replication in a fresh process is the caller's job
(`xlaprobe.tune.search`): `WorkerPool.recycle` then `measure` again.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from typing import Any

import numpy as np
import jax
from jax.extend.core import jaxpr_as_fun

from xlaprobe.errors import InvalidArgument
from xlaprobe.outcome import Outcome
from xlaprobe.program import Program
from xlaprobe import jaxprs
from xlaprobe.configs.mutants import MutantKind, get_mutant
from xlaprobe.tune.features import cost_dict, hlo_features

#: Worker isolation group of timing runs (kept apart from checking runs).
GROUP = "tune"


@dataclasses.dataclass(frozen=True)
class Protocol:
    """Measurement settings.

    Attributes:
        min_rounds: rounds before racing may stop a measurement.
        max_rounds: rounds at most.
        sample_s: minimum duration of one timed sample (s); short programs repeat inside it.
        race_margin: stop once the interval's upper end is below ``1 - race_margin``.
        ci_width: stop once the interval is narrower than this (speedup units).
        confidence: of the bootstrap interval.
    """

    min_rounds: int = 8
    max_rounds: int = 25
    sample_s: float = 0.05
    race_margin: float = 0.10
    ci_width: float = 0.04
    confidence: float = 0.95

    def __post_init__(self) -> None:
        if not 2 <= self.min_rounds <= self.max_rounds:
            raise InvalidArgument("need 2 <= min_rounds <= max_rounds")
        if not (self.sample_s > 0 and 0 < self.confidence < 1):
            raise InvalidArgument("sample_s must be positive and confidence in (0, 1)")


def speedup_interval(baseline_s: np.ndarray, candidate_s: np.ndarray, *, confidence: float = 0.95,
                     resamples: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Median paired speedup and its bootstrap percentile interval.

    Args:
        baseline_s: float64[rounds] seconds per run of the baseline, one per round.
        candidate_s: float64[rounds] seconds per run of the candidate, same rounds.
        confidence: interval coverage.
        resamples: bootstrap resamples (deterministic from `seed`).

    Returns:
        ``(speedup, low, high)``: median of ``baseline_s / candidate_s`` (above 1: the candidate
        is faster) and the interval.

    Raises:
        InvalidArgument: different lengths, fewer than two rounds, or non-positive times.
    """
    base, cand = np.asarray(baseline_s, np.float64), np.asarray(candidate_s, np.float64)
    if base.shape != cand.shape or base.ndim != 1 or base.size < 2:
        raise InvalidArgument("need two equally long 1-d series of at least two rounds")
    if not (np.all(base > 0) and np.all(cand > 0)):
        raise InvalidArgument("times must be positive")
    ratios = base / cand
    rng = np.random.default_rng(seed)
    medians = np.median(ratios[rng.integers(0, ratios.size, (resamples, ratios.size))], axis=1)
    tail = (1 - confidence) / 2
    low, high = np.quantile(medians, [tail, 1 - tail])
    return float(np.median(ratios)), float(low), float(high)


@dataclasses.dataclass(frozen=True)
class Measurement:
    """One candidate timed against the baseline.

    Attributes:
        speedup: median of per-round ``baseline / candidate`` time ratios (above 1: faster);
            each round times both back to back, so the ratio cancels the machine's drift. Every
            decision (racing, acceptance) and the interval are about this number.
        low, high: its bootstrap interval.
        baseline_s, candidate_s: each one's own median seconds per run over the rounds. Their
            ratio (``speedup_of_medians`` in `to_json`) can differ from `speedup`, even lie on
            the other side of 1, when the machine's speed drifts between rounds: it is a
            size, not the comparison.
        rounds: rounds run (fewer than the maximum when racing stopped early).
        raced_out: stopped early as clearly slower.
        compile_s: the candidate's compile time (s).
        threads: CPUs this process may run on; ``load``: 1-minute load average before and after.
        pid: the worker process (replications run in another one).
        features: `xlaprobe.tune.features.hlo_features` of the candidate's optimized HLO.
        cost: the candidate's ``cost_analysis()`` (flops, bytes accessed, transcendentals).
        outputs: the candidate's outputs (for the correctness guard), flat.
    """

    speedup: float
    low: float
    high: float
    baseline_s: float
    candidate_s: float
    rounds: int
    raced_out: bool
    compile_s: float
    threads: int
    load: tuple[float, float]
    pid: int
    features: dict[str, float]
    cost: dict[str, float]
    outputs: tuple[np.ndarray, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (without outputs): the fields, and ``speedup_of_medians``
        (``baseline_s / candidate_s``) beside ``speedup`` (the median of per-round ratios) so
        the two are never read as one another."""
        data = dataclasses.asdict(self)
        data.pop("outputs")
        data["speedup_of_medians"] = (self.baseline_s / self.candidate_s
                                      if self.candidate_s > 0 else None)
        return data


def _compile(closed_jaxpr: Any, inputs: Any, options: dict[str, Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    compiled = jax.jit(jaxpr_as_fun(closed_jaxpr)).lower(*inputs).compile(
        compiler_options=options)
    return compiled, time.perf_counter() - started


def _sample(executable: Any, args: Any, repeats: int) -> float:
    started = time.perf_counter()
    for _ in range(repeats):
        jax.block_until_ready(executable(*args))
    return (time.perf_counter() - started) / repeats


def _candidate(closed_jaxpr: Any, inputs: Any, args: Any, options: dict[str, Any],
               candidate_jaxpr: bytes | None, mutant: str | None
               ) -> tuple[Any, float, tuple[np.ndarray, ...]]:
    """The candidate compiled (after registering `mutant`'s pass, so call it once the baseline
    compiled) and run once: (executable, compile seconds, its outputs for the guard)."""
    if mutant:
        MutantKind()._register(get_mutant(mutant))
    program = closed_jaxpr if candidate_jaxpr is None else jaxprs.loads_jaxpr(candidate_jaxpr)
    candidate, compile_s = _compile(program, inputs, options)
    return candidate, compile_s, tuple(np.asarray(x) for x in candidate(*args))


def _repeats(executables: Any, args: Any, sample_s: float) -> int:
    """Runs per sample so that one lasts at least `sample_s` seconds, after two warm-up runs of
    each executable."""
    for _ in range(2):
        for executable in executables:
            _sample(executable, args, 1)
    single = max(min(_sample(e, args, 1) for e in executables), 1e-7)
    return max(1, math.ceil(sample_s / single))


def measure_in_worker(closed_jaxpr: Any, inputs: tuple[np.ndarray, ...], *,
                      baseline_options: dict[str, Any], candidate_options: dict[str, Any],
                      candidate_jaxpr: bytes | None, protocol: Protocol,
                      mutant: str | None = None) -> dict[str, Any]:
    """The worker side of `measure` (run through `WorkerPool.call`): see the module docstring.

    Args:
        closed_jaxpr: the baseline program; inputs: its inputs.
        baseline_options, candidate_options: typed ``compile(compiler_options=...)`` dicts.
        candidate_jaxpr: the candidate program (`xlaprobe.jaxprs.dumps_jaxpr`) when knobs change
            it, else None (the baseline program).
        protocol: the settings.
        mutant: a planted miscompilation to compile the candidate with (its pass is registered
            after the baseline compiled; the caller runs this in a worker group of its own).

    Returns:
        The fields of `Measurement` as a dict.

    Raises:
        jax.errors.JaxRuntimeError: the candidate does not compile (a COMPILE_ERROR outcome).
    """
    load_before = os.getloadavg()[0]
    args = [jax.device_put(x) for x in inputs]
    baseline, _ = _compile(closed_jaxpr, inputs, baseline_options)
    candidate, compile_s, outputs = _candidate(closed_jaxpr, inputs, args, candidate_options,
                                               candidate_jaxpr, mutant)
    repeats = _repeats((baseline, candidate), args, protocol.sample_s)
    base, cand = [], []
    raced_out = False
    for round_index in range(protocol.max_rounds):
        if round_index % 2 == 0:
            base.append(_sample(baseline, args, repeats))
            cand.append(_sample(candidate, args, repeats))
        else:
            cand.append(_sample(candidate, args, repeats))
            base.append(_sample(baseline, args, repeats))
        if len(base) >= protocol.min_rounds:
            _, low, high = speedup_interval(np.asarray(base), np.asarray(cand),
                                            confidence=protocol.confidence, resamples=500)
            if high < 1 - protocol.race_margin:
                raced_out = True
                break
            if high - low < protocol.ci_width:
                break
    speedup, low, high = speedup_interval(np.asarray(base), np.asarray(cand),
                                          confidence=protocol.confidence)
    cost = cost_dict(candidate.cost_analysis())
    return {"speedup": speedup, "low": low, "high": high, "baseline_s": float(np.median(base)),
            "candidate_s": float(np.median(cand)), "rounds": len(base), "raced_out": raced_out,
            "compile_s": compile_s, "threads": len(os.sched_getaffinity(0)),
            "load": (load_before, os.getloadavg()[0]), "pid": os.getpid(),
            "features": hlo_features(candidate.as_text(), cost), "cost": cost,
            "outputs": outputs}


def measure(pool: Any, baseline: Program, baseline_options: dict[str, Any],
            candidate_options: dict[str, Any], candidate: Program | None = None, *,
            protocol: Protocol = Protocol(), timeout_s: float | None = None,
            mutant: str | None = None) -> tuple[Measurement | None, Outcome]:
    """Time a candidate against the baseline in a worker of the ``tune`` group.

    Args:
        pool: a `xlaprobe.workers.WorkerPool`.
        baseline: the baseline program (its inputs feed both).
        baseline_options, candidate_options: typed compiler options.
        candidate: the candidate's program when its knobs differ (same inputs), else None.
        protocol: measurement settings.
        timeout_s: limit on the whole measurement (s).
        mutant: compile the candidate with this planted miscompilation (in a worker group of
            its own, ``tune:mutant:<name>``), to test the guard.

    Returns:
        ``(measurement, outcome)``: the measurement, or None when the candidate failed to
        compile, crashed or timed out (the outcome says which).
    """
    blob = None if candidate is None else jaxprs.dumps_jaxpr(candidate.jaxpr)
    outcome = pool.call(baseline, "xlaprobe.tune.measure:measure_in_worker",
                        {"baseline_options": baseline_options,
                         "candidate_options": candidate_options, "candidate_jaxpr": blob,
                         "protocol": protocol, "mutant": mutant},
                        group=f"{GROUP}:mutant:{mutant}" if mutant else GROUP, timeout_s=timeout_s)
    if not outcome.ran:
        return None, outcome
    value = dict(outcome.value)
    value["load"] = tuple(value["load"])
    return Measurement(**value), outcome
