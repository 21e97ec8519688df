"""Search by pre-screening: the kernel-level model (`xlaprobe.tune.kernelmodel.ProgramModel`)
predicts each candidate's time from its compiled HLO, and only the candidates it ranks best
are measured; as measurements arrive a ridge regression of the model's error (measured minus
predicted log speedup) on the candidates' non-default values is refitted and corrects the
ranking of the rest (a residual model, so a value the kernel model misjudges on this program
stops being proposed).

A compile costs a fraction of a measurement (which compiles too, then times tens of rounds and
runs the guard), so screening a batch of `BATCH` candidates per refill is cheap beside measuring
them. The guard is untouched: every measured candidate is judged exactly as in
`xlaprobe.tune.search.tune`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import jax

from xlaprobe.tune.space import Candidate, SearchSpace, SpaceExhausted
from xlaprobe import jaxcompat
from xlaprobe.configs.xla import compiler_options
from xlaprobe.tune import space as space_mod
from xlaprobe.tune.measure import GROUP

#: Candidates compiled and ranked per refill of the screened pool.
BATCH = 8
#: Ridge penalty of the residual model (in units of squared log speedup).
RIDGE = 0.3
#: Predicted seconds per candidate (NaN where it did not compile), in the order given.
Predictor = Callable[[Sequence[Candidate]], np.ndarray]


class ScreenStrategy:
    """Measure the candidates the kernel model ranks fastest, correcting it as measurements
    arrive.

    Args:
        space: the search space.
        seed: of the candidates sampled for screening.
        predict: `Predictor` (compiles the candidates, applies the model).
        batch: candidates screened per refill.
    """

    def __init__(self, space: SearchSpace, seed: int, predict: Predictor, batch: int = BATCH):
        self.space = space
        self.rng = np.random.default_rng(seed)
        self.seen: set[str] = {space.key(space.default())}
        self.predict = predict
        self.batch = batch
        self.default_s = float(predict([space.default()])[0])
        self.screened: dict[str, tuple[Candidate, float]] = {}
        self.measured: list[tuple[Candidate, float]] = []
        self.residuals: list[tuple[Candidate, float]] = []
        self.weights: dict[str, float] = {}

    def predicted_log_speedup(self, seconds: float) -> float:
        """``log(default's predicted time / candidate's predicted time)``."""
        return math.log(max(self.default_s, 1e-12) / max(seconds, 1e-12))

    def _refill(self) -> None:
        best = [c for c, _ in sorted(self.measured, key=lambda item: -item[1])[:2]]
        fresh: dict[str, Candidate] = {}
        for start in best or [self.space.default()]:
            for candidate in self.space.neighbours(start):
                key = self.space.key(candidate)
                if key not in self.seen and key not in self.screened:
                    fresh.setdefault(key, candidate)
        keys = list(fresh)
        self.rng.shuffle(keys)
        chosen = {k: fresh[k] for k in keys[:self.batch // 2]}
        for _ in range(50 * self.batch):
            if len(chosen) >= self.batch:
                break
            candidate = self.space.sample(self.rng)
            key = self.space.key(candidate)
            if key not in self.seen and key not in self.screened:
                chosen.setdefault(key, candidate)
        if not chosen:
            return
        seconds = self.predict(list(chosen.values()))
        for (key, candidate), s in zip(chosen.items(), seconds):
            if np.isfinite(s):
                self.screened[key] = (candidate, float(s))
            else:  # it does not compile: measuring it would say the same
                self.seen.add(key)

    def correction(self, candidate: Candidate) -> float:
        """The residual model's correction of a candidate's predicted log speedup."""
        return sum(self.weights.get(name, 0.0)
                   for name in _indicators(self.space, candidate))

    def score(self, candidate: Candidate, seconds: float) -> float:
        """Corrected predicted log speedup (higher: measure sooner)."""
        return self.predicted_log_speedup(seconds) + self.correction(candidate)

    def propose(self) -> Candidate:
        """The screened candidate with the best corrected score (refilling the pool first when
        it holds fewer than half a batch)."""
        if len(self.screened) < max(1, self.batch // 2):
            self._refill()
        if not self.screened:
            raise SpaceExhausted("no unmeasured candidate of the space compiles")
        key = max(self.screened, key=lambda k: self.score(*self.screened[k]))
        candidate, _ = self.screened.pop(key)
        self.seen.add(key)
        return candidate

    def observe(self, candidate: Candidate, speedup: float | None) -> None:
        """Refit the residual model with this measurement (a failure counts as 10x slower)."""
        value = math.log(speedup if speedup is not None else 0.1)
        self.measured.append((candidate, math.exp(value)))
        predicted = self.predict([candidate])[0]
        self.residuals.append((candidate, value - (self.predicted_log_speedup(predicted)
                                                   if np.isfinite(predicted) else 0.0)))
        self.weights = fit_residuals(self.space, self.residuals)


def _indicators(space: SearchSpace, candidate: Candidate) -> list[str]:
    default = space.default()
    return [f"{name}={value}" for name, value in candidate.items() if value != default[name]]


def fit_residuals(space: SearchSpace, residuals: Sequence[tuple[Candidate, float]],
                  ridge: float = RIDGE) -> dict[str, float]:
    """Ridge regression of residuals (measured minus predicted log speedup) on the candidates'
    non-default values: ``value -> weight``.

    Args:
        space: the search space (defines the defaults).
        residuals: ``(candidate, residual)`` pairs.
        ridge: the L2 penalty.
    """
    names = sorted({n for c, _ in residuals for n in _indicators(space, c)})
    if not names:
        return {}
    index = {n: j for j, n in enumerate(names)}
    x = np.zeros((len(residuals), len(names)))
    for i, (candidate, _) in enumerate(residuals):
        for n in _indicators(space, candidate):
            x[i, index[n]] = 1.0
    y = np.asarray([r for _, r in residuals], np.float64)
    w = np.linalg.solve(x.T @ x + ridge * np.eye(len(names)), x.T @ y)
    return dict(zip(names, map(float, w)))


def compile_texts(closed_jaxpr: Any, inputs: Any, *, option_sets: list[dict[str, Any]]
                  ) -> list[str]:
    """Worker function: the optimized HLO text of the program under each option set ("" where
    XLA rejects it)."""
    texts = []
    lowered = jax.jit(jaxcompat.jaxpr_as_fun(closed_jaxpr)).lower(*inputs)
    for options in option_sets:
        try:
            texts.append(lowered.compile(compiler_options=dict(options)).as_text())
        except Exception:  # XLA rejects the combination: nothing to screen
            texts.append("")
    return texts


def model_predictor(model: Any, build: Callable[[dict[str, Any]], Any], pool: Any,
                    timeout_s: float | None = None) -> Predictor:
    """A `Predictor` that compiles candidates in a worker (grouped by their knob values, which
    change the program) and applies a trained `ProgramModel` to each optimized HLO.

    Args:
        model: the trained `xlaprobe.tune.kernelmodel.ProgramModel`.
        build: knob values -> Program (`TuneTarget.build`).
        pool: a `xlaprobe.workers.WorkerPool`.
        timeout_s: limit on one batch of compiles (s).
    """
    cache: dict[tuple[Any, ...], float] = {}

    def predict(candidates: Sequence[Candidate]) -> np.ndarray:
        keys = [tuple(sorted((k, str(v)) for k, v in c.items())) for c in candidates]
        todo: dict[tuple[Any, ...], list[int]] = {}
        for i, (c, key) in enumerate(zip(candidates, keys)):
            if key not in cache:
                knobs = tuple(sorted(space_mod.knob_values(c).items()))
                todo.setdefault(knobs, []).append(i)
        for knobs, indices in todo.items():
            outcome = pool.call(build(dict(knobs)), f"{__name__}:compile_texts", {
                "option_sets": [compiler_options(space_mod.configuration(candidates[i]))
                                for i in indices]}, group=GROUP, timeout_s=timeout_s)
            texts = outcome.value if outcome.ran else [""] * len(indices)
            for i, text in zip(indices, texts):
                cache[keys[i]] = model.predict_text(text, candidates[i]) if text else math.nan
        return np.asarray([cache[k] for k in keys], np.float64)

    return predict
