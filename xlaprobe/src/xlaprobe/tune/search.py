"""The tuning loop: propose a candidate, measure it against the baseline, guard its numerics,
learn, repeat; then replicate the best in a fresh process before accepting it.

Strategies (all propose one candidate per measurement):

* ``random``: uniform over the space (duplicates skipped).
* ``tpe``: Optuna's Tree-structured Parzen Estimator (Bergstra et al. 2011), the black-box
  baseline; objective ``log(speedup)``, failed or rejected candidates get a penalty.
* ``model``: cost-model-guided, as Ansor and MetaSchedule do (Zheng et al. 2020; Shao et al. 2022):
  a `xlaprobe.tune.costmodel.CostModel` trained on every measurement in the store (other programs
  too) and on this run's ranks a large pool of candidates (prior-weighted samples, uniform samples
  and one- or two-value mutations of the best measured); the top one is measured
  (epsilon-greedy: sometimes a random pool member); the model is retrained after each
  measurement. Before it has data it ranks by the space's priors.
* ``kernel``: pre-screening by the kernel-level model trained on the kernel corpus of the other
  programs in the store (`xlaprobe.tune.screen.ScreenStrategy`): candidates are compiled, their
  time predicted from their kernels, and the fastest predicted measured; a residual model
  refitted on each measurement corrects the ranking.

The best candidate is then confirmed by a paired, interleaved comparison against the defaults
(and the defaults against themselves) in one fresh worker process (`xlaprobe.tune.confirm`).

The correctness guard: every measured candidate's outputs are judged by the oracle against the
float64 reference of its program with the honest-run error budget, exactly as ``xlaprobe check``
judges a configuration (`xlaprobe.checking.judge`); a candidate with any finding is rejected, never
accepted, and stored as a finding (a tuning run doubles as a configuration fuzzer). A candidate
whose knobs change the traced program is judged a second time, against the DEFAULT program's
reference and budget (`Guard.changed`): a knob that changes the math (a narrower dtype, another
algorithm) is rejected with kind `CHANGED` and its reason, though XLA computes the new math right;
one that only re-associates or re-fuses stays inside the default's error budget and passes.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import jaxpr_as_fun

from xlaprobe.checking import HONEST, REFERENCE, judge, split_honest
from xlaprobe.configs.xla import compiler_options
from xlaprobe.errors import InvalidArgument
from xlaprobe.outcome import Outcome, OutcomeKind
from xlaprobe.program import Program, Provenance
from xlaprobe.tune import space as space_mod
from xlaprobe.tune.confirm import Confirmation, confirm, noise_threshold
from xlaprobe.tune.costmodel import CostModel
from xlaprobe.tune.features import candidate_features
from xlaprobe.knobs import Knob, declared_knobs
from xlaprobe.sources import models, targets, user
from xlaprobe.tune.kernelmodel import ProgramModel
from xlaprobe.tune.measure import GROUP, Measurement, Protocol, measure
from xlaprobe.tune.screen import ScreenStrategy, model_predictor
from xlaprobe.tune.space import Candidate, SearchSpace, SpaceExhausted

STRATEGIES = ("model", "kernel", "tpe", "random")
#: Speedup charged to a candidate that failed or was rejected, for the strategies' learning.
PENALTY_SPEEDUP = 0.1
#: Share of the model strategy's proposals taken at random from its pool (epsilon-greedy).
EPSILON = 0.15
#: The kind of a candidate rejected because its knobs change the result (`Guard.changed`): not a
#: compiler finding, so not stored as one.
CHANGED = "changes-result"
#: Candidates the model strategy ranks per proposal.
POOL_SIZE = 384
#: Paired rounds of the confirmation of the best candidate (`xlaprobe.tune.confirm`).
CONFIRM_ROUNDS = 30


def acceptance_threshold(control: Measurement | Confirmation) -> float:
    """The lower end a confirmed speedup's interval must exceed to be accepted: the largest of
    `MIN_GAIN` and how far the A/A control's interval strays from 1 on either side. For a
    `Confirmation` the control is the one timed in the same rounds (`Confirmation.threshold`);
    for a `Measurement` it is that measurement's own interval."""
    if isinstance(control, Confirmation):
        return control.threshold
    return noise_threshold(control.low, control.high)


# ---------------------------------------------------------------------------------------- targets

@dataclasses.dataclass(frozen=True)
class TuneTarget:
    """What is tuned: a program family over its knobs.

    Attributes:
        name: the target as typed (zoo model, FILE.py:FN, ...).
        knobs: the knobs it declares.
        build: knob values -> Program (values not given take their defaults).
    """

    name: str
    knobs: dict[str, Knob]
    build: Callable[[Mapping[str, Any]], Program]


def tune_target(target: str, *, seed: int = 0, input_spec: str = "") -> TuneTarget:
    """Resolve a target for tuning: a zoo model or a user function may declare knobs; a case
    module or artifact is a fixed program (no knobs).

    Raises:
        InvalidArgument: as `xlaprobe.sources.targets.resolve`.
    """
    if target in models.MODELS:
        spec = models.get_model(target)
        build = functools.lru_cache(maxsize=8)(
            lambda items: models.build_program(target, seed, dict(items)))
        return TuneTarget(target, dict(spec.knobs), lambda k: build(tuple(sorted(k.items()))))
    if ":" in target and not target.endswith(".py"):
        if not Path(target).exists():
            _, fn = user.user_function(target)
            build = functools.lru_cache(maxsize=8)(lambda items: user.user_program(
                target, input_spec=input_spec, seed=seed, knobs=dict(items)))
            return TuneTarget(target, declared_knobs(fn),
                              lambda k: build(tuple(sorted(k.items()))))
    program = targets.resolve(target, seed=seed, input_spec=input_spec).program
    return TuneTarget(target, {}, lambda k: program)


# ------------------------------------------------------------------------------------------ guard

class Guard:
    """Judges candidates' outputs against the float64 reference (cached per program).

    Two questions, both asked of a candidate whose knobs change the traced program: does XLA
    compute the candidate's own program right (`judge`: a wrong answer is a compiler finding),
    and is the candidate's result the default configuration's result (`changed`: a knob that
    changes the math, such as a narrower dtype or an extra term, computes a different result
    however right XLA computes it)? Compiler options and passes leave the program as it is, so
    for them the first question is the second.

    Args:
        pool: the worker pool the reference and the honest runs of the budget run in.
        timeout_s: per-run limit (s).
    """

    def __init__(self, pool: Any, timeout_s: float | None = None):
        self.pool = pool
        self.timeout_s = timeout_s
        self._references: dict[str, tuple[Outcome, list[Outcome], Outcome | None]] = {}

    def judge(self, program: Program, spec: str, outputs: tuple[np.ndarray, ...]) -> Any:
        """`xlaprobe.checking.CheckResult` of configuration `spec` having produced `outputs`
        (of `program`), judged against `program`'s own float64 reference and error budget.

        Raises:
            InvalidArgument: the reference cannot run on this program (so nothing can be judged).
        """
        if program.fingerprint not in self._references:
            specs = [REFERENCE, *HONEST]
            kwargs = {} if self.timeout_s is None else {"timeout_s": self.timeout_s}
            got = dict(self.pool.run_many([(program, s) for s in specs], **kwargs))
            if not got[0].ran:
                raise InvalidArgument(f"the reference cannot run on {program.provenance.name}, so "
                                      f"no candidate can be guarded: {got[0].error[:300]}")
            flushed, budget = split_honest([got[i] for i in range(1, len(specs))])
            self._references[program.fingerprint] = (got[0], budget, flushed)
        reference, budget, flushed = self._references[program.fingerprint]
        mine = Outcome(spec, OutcomeKind.RAN, outputs=tuple(outputs))
        return judge(program, [REFERENCE, spec], [reference, mine], budget, flushed)

    def changed(self, default: Program, spec: str, outputs: tuple[np.ndarray, ...]) -> str:
        """Why `outputs` (of a candidate whose knobs changed the program) are not the default
        configuration's result; "" when they are.

        The outputs must have the default program's output shapes and dtypes, and pass the
        oracle against the default program's float64 reference with the default's honest-run
        error budget: a re-association or fusion change (a chunked sum, another block size, a
        layout) stays inside that budget, a changed computation (bfloat16 for float32, an added
        term) does not.

        Args:
            default: the program of the default configuration (every knob at its default).
            spec: the candidate's label (for the verdicts).
            outputs: the candidate's outputs, flat, in its program's output order.

        Returns:
            One line naming what differs (output leaf, verdict kind or shape/dtype), or "".

        Raises:
            InvalidArgument: the reference cannot run on `default`.
        """
        avals = default.jaxpr.out_avals
        if len(outputs) != len(avals):
            return f"it returns {len(outputs)} outputs, the default configuration {len(avals)}"
        for name, aval, leaf in zip(default.output_names, avals, outputs):
            leaf = np.asarray(leaf)
            if leaf.shape != tuple(aval.shape) or leaf.dtype != aval.dtype:
                return (f"output {name} is {leaf.dtype}{list(leaf.shape)}, the default "
                        f"configuration's {np.dtype(aval.dtype)}{list(aval.shape)}")
        findings = self.judge(default, spec, outputs).findings
        if not findings:
            return ""
        return (f"{findings[0].kind.value} in {', '.join(findings[0].outputs[:3])} against the "
                f"default configuration's float64 reference")


# ------------------------------------------------------------------------------------- strategies

class RandomStrategy:
    """Uniform random candidates, each at most once (see the module docstring)."""

    def __init__(self, space: SearchSpace, seed: int):
        self.space = space
        self.rng = np.random.default_rng(seed)
        self.seen: set[str] = {space.key(space.default())}

    def _fresh(self, draw: Callable[[], Candidate]) -> Candidate:
        for _ in range(1000):
            candidate = draw()
            if self.space.key(candidate) not in self.seen:
                return candidate
        raise SpaceExhausted("the search space is exhausted")

    def propose(self) -> Candidate:
        """The next candidate to measure."""
        candidate = self._fresh(lambda: self.space.sample(self.rng))
        self.seen.add(self.space.key(candidate))
        return candidate

    def observe(self, candidate: Candidate, speedup: float | None) -> None:
        """Learn from a measurement (None: failed or rejected)."""


class TpeStrategy(RandomStrategy):
    """Optuna TPE over the space's dimensions as categorical parameters."""

    def __init__(self, space: SearchSpace, seed: int):
        super().__init__(space, seed)
        import optuna  # heavy (seconds to import): only the tpe strategy needs it

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._optuna = optuna
        self.study = optuna.create_study(
            direction="maximize", sampler=optuna.samplers.TPESampler(seed=seed, n_startup_trials=5))
        self._trials: dict[str, Any] = {}
        self._worst = 0.0
        # The baseline is known (speedup 1): tell TPE, so its first model has a reference point.
        self.study.enqueue_trial({d.name: 0 for d in space.dimensions})
        first = self.study.ask()
        self._suggest(first)
        self.study.tell(first, 0.0)

    def _suggest(self, trial: Any) -> Candidate:
        # Values as indices: optuna's categorical choices must be of simple types.
        return {d.name: d.values[trial.suggest_categorical(d.name, list(range(len(d.values))))]
                for d in self.space.dimensions}

    def propose(self) -> Candidate:
        """The next candidate TPE suggests (a duplicate is told its earlier value and skipped)."""
        for _ in range(200):
            trial = self.study.ask()
            candidate = self._suggest(trial)
            key = self.space.key(candidate)
            if key in self._trials or key in self.seen:
                previous = self._trials.get(key)
                self.study.tell(trial, previous.values[0] if previous is not None
                                and previous.values else self._worst)
                continue
            self._trials[key] = trial
            self.seen.add(key)
            return candidate
        return super().propose()

    def observe(self, candidate: Candidate, speedup: float | None) -> None:
        """Tell TPE ``log(speedup)`` (a penalty for failures)."""
        key = self.space.key(candidate)
        trial = self._trials.get(key)
        value = math.log(speedup if speedup is not None else PENALTY_SPEEDUP)
        self._worst = min(self._worst, value)
        if trial is not None:
            self.study.tell(trial, value)
            self._trials[key] = self.study.trials[trial.number]


class ModelStrategy(RandomStrategy):
    """Cost-model-guided search (see the module docstring).

    Args:
        space: the search space.
        seed: randomness of the pool and of epsilon-greedy choices.
        program_features: the baseline's `xlaprobe.tune.features.hlo_features`.
        history: earlier measurements of other programs: ``(program id, feature dict,
            speedup)``; their features must be made by `row_features` too.
        program_id: this program's id (its LambdaRank group).
    """

    def __init__(self, space: SearchSpace, seed: int, program_features: Mapping[str, float],
                 history: list[tuple[str, dict[str, float], float]], program_id: str):
        super().__init__(space, seed)
        self.program_features = dict(program_features)
        self.program_id = program_id
        # Every program's baseline is a row of speedup 1 by definition: without it a program
        # whose measured candidates all share one harmful value could never rank them below the
        # default (LambdaRank only compares rows within a program).
        baselines = {}
        for group, features, _ in history:
            baselines.setdefault(group, {k: v for k, v in features.items()
                                         if not k.startswith("set:")})
        self.rows = list(history) + [(g, f, 1.0) for g, f in baselines.items()]
        self.rows.append((program_id, self.row_features(space.default()), 1.0))
        self.model = CostModel(seed=seed)
        self.measured: list[tuple[Candidate, float]] = []
        self._refit()

    def row_features(self, candidate: Candidate) -> dict[str, float]:
        """The cost model's features of a candidate of this program."""
        return row_features(self.program_features, candidate, self.space.default())

    def _refit(self) -> None:
        groups, features, speedups = zip(*self.rows) if self.rows else ((), (), ())
        self.model.fit(list(groups), list(features), list(speedups))

    def _pool(self) -> list[Candidate]:
        # The priors' favourite and every single change of the default and of the best measured
        # (local search, as Ansor's evolutionary step), then random samples and mutations.
        best = sorted(self.measured, key=lambda item: -item[1])[:3]
        pool = [self.space.prior_best()]
        for start in [self.space.default()] + [c for c, _ in best]:
            pool += self.space.neighbours(start)
        pool += [self.space.sample(self.rng, use_priors=True) for _ in range(POOL_SIZE // 2)]
        pool += [self.space.sample(self.rng) for _ in range(POOL_SIZE // 4)]
        dims = self.space.dimensions
        while len(pool) < POOL_SIZE:
            base = dict(best[int(self.rng.integers(len(best)))][0]) if best else \
                self.space.default()
            for _ in range(int(self.rng.integers(1, 3))):
                d = dims[int(self.rng.integers(len(dims)))]
                base[d.name] = d.values[int(self.rng.integers(len(d.values)))]
            pool.append(base)
        unique: dict[str, Candidate] = {}
        for candidate in pool:
            key = self.space.key(candidate)
            if key not in self.seen:
                unique.setdefault(key, candidate)
        return list(unique.values())

    def propose(self) -> Candidate:
        """The pool member the model (or, untrained, the priors) ranks first."""
        pool = self._pool()
        if not pool:
            return super().propose()
        if self.measured and self.rng.random() < EPSILON:
            choice = pool[int(self.rng.integers(len(pool)))]
        else:
            if self.model.ready:
                scores = self.model.score([self.row_features(c) for c in pool])
            else:
                scores = np.asarray([self.space.prior_score(c) for c in pool])
            scores = scores + 1e-9 * self.rng.random(len(pool))  # break ties at random
            choice = pool[int(np.argmax(scores))]
        self.seen.add(self.space.key(choice))
        return choice

    def observe(self, candidate: Candidate, speedup: float | None) -> None:
        """Add the measurement to the training rows and retrain."""
        value = speedup if speedup is not None else PENALTY_SPEEDUP
        self.measured.append((candidate, value))
        self.rows.append((self.program_id, self.row_features(candidate), value))
        self._refit()


def row_features(program_features: Mapping[str, float], candidate: Mapping[str, Any],
                 default: Mapping[str, Any]) -> dict[str, float]:
    """The cost model's features: the program's (prefixed ``prog:``) and the candidate's."""
    return {**{f"prog:{k}": v for k, v in program_features.items()},
            **candidate_features(candidate, default)}


# ----------------------------------------------------------------------------------------- tuning

@dataclasses.dataclass(frozen=True)
class Trial:
    """One measurement of a tuning run.

    Attributes:
        index: 1-based number of the measurement.
        candidate: the candidate; ``key`` its non-default values.
        status: ``ok``, ``rejected`` (the guard found a finding, or the candidate's knobs change
            the default configuration's result: `Guard.changed`), ``compile-error``, ``crash``
            or ``timeout``.
        measurement: the timing (None unless it ran).
        detail: why it was rejected or failed (``changes-result: ...`` with the reason for a
            knob that changes the result).
        best: the best accepted-so-far speedup after this trial (1.0: the baseline).
    """

    index: int
    candidate: Candidate
    key: str
    status: str
    measurement: Measurement | None
    detail: str
    best: float

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        m = self.measurement
        return {"index": self.index, "key": self.key, "status": self.status,
                "speedup": None if m is None else m.speedup,
                "interval": None if m is None else [m.low, m.high],
                "rounds": None if m is None else m.rounds, "detail": self.detail,
                "best": self.best}


@dataclasses.dataclass(frozen=True)
class TuneResult:
    """The outcome of a tuning run.

    Attributes:
        name: the tuning run's name (`xlaprobe.tuned` looks it up).
        strategy, budget: as requested; ``seconds`` the run's wall time.
        control: the A/A measurement (baseline against itself): its interval shows the noise.
        trials: every measurement in order.
        best: the best candidate measured (None when nothing beat the baseline).
        replicated: the best's confirmation, paired and interleaved against the defaults and an
            A/A twin in one fresh worker process (None if not run).
        accepted: True when the confirmation is faster (its interval above its
            `Confirmation.threshold`) and both runs passed the guard; else the baseline is the
            result.
        compiler_options, xla_flags, knobs: the accepted configuration ({} / "" / {} if none).
        findings: ``(candidate key, verdict kind)`` of every rejected candidate (`CHANGED` for
            one whose knobs change the result; its reason is its trial's ``detail``).
        run_id: the store's tuning run id.
    """

    name: str
    strategy: str
    budget: int
    seconds: float
    control: Measurement
    trials: tuple[Trial, ...]
    best: Trial | None
    replicated: Confirmation | None
    accepted: bool
    compiler_options: dict[str, Any]
    xla_flags: str
    knobs: dict[str, Any]
    findings: tuple[tuple[str, str], ...]
    run_id: int

    @property
    def speedup(self) -> tuple[float, float, float]:
        """The accepted speedup with its interval (replicated); (1, 1, 1) when none."""
        r = self.replicated
        return (r.speedup, r.low, r.high) if self.accepted and r is not None else (1.0, 1.0, 1.0)

    def measurements_to_reach(self, target: float) -> int | None:
        """Measurements spent until the best speedup so far reached `target` (None: never)."""
        for trial in self.trials:
            if trial.best >= target:
                return trial.index
        return None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (``xlaprobe tune --json``; stored as the run's result)."""
        speedup, low, high = self.speedup
        return {"name": self.name, "strategy": self.strategy, "budget": self.budget,
                "seconds": round(self.seconds, 2), "accepted": self.accepted,
                "speedup": speedup, "interval": [low, high],
                "compiler_options": self.compiler_options, "xla_flags": self.xla_flags,
                "knobs": self.knobs,
                "best": None if self.best is None else self.best.to_json(),
                "replicated": None if self.replicated is None else self.replicated.to_json(),
                "control": self.control.to_json(),
                "trials": [t.to_json() for t in self.trials],
                "rejected": [{"candidate": k, "kind": v} for k, v in self.findings],
                "run_id": self.run_id}


def _probe_program() -> Program:
    x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8)
    return Program.from_function(lambda a: jnp.tanh(a @ a).sum(axis=0), (x,),
                                 Provenance("user", "tune-probe"))


def compile_probe(closed_jaxpr: Any, inputs: Any, *, option_sets: list[dict[str, Any]]
                  ) -> list[str]:
    """Worker function: compile the probe program with each option set; one error line (or "")
    per set."""
    errors = []
    for options in option_sets:
        try:
            jax.jit(jaxpr_as_fun(closed_jaxpr)).lower(*inputs).compile(compiler_options=options)
            errors.append("")
        except Exception as exc:  # XLA rejects the value: the dimension loses it
            errors.append(str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__)
    return errors


def validate_space(space: SearchSpace, pool: Any) -> tuple[SearchSpace, list[str]]:
    """Drop option values XLA rejects at compile time (tried one at a time on a tiny program in a
    worker). Returns the space and one note per dropped value.

    Raises:
        InvalidArgument: the probe itself crashed or timed out (names the option sets tried).
    """
    tried = []
    for d in space.dimensions:
        if d.kind in ("knob", "mutant"):
            continue
        for value in d.values[1:]:
            candidate = space.default() | {d.name: value}
            tried.append((d.name, value, compiler_options(space_mod.configuration(candidate))))
    outcome = pool.call(_probe_program(), "xlaprobe.tune.search:compile_probe",
                        {"option_sets": [options for _, _, options in tried]}, group=GROUP)
    if not outcome.ran:
        last = outcome.last_line[:200]
        raise InvalidArgument(f"compiling a tiny probe program with each option of the search "
                              f"space failed ({outcome.kind.value}: {last}); raise --timeout")
    notes = []
    for (name, value, _), error in zip(tried, outcome.value):
        if error:
            space = space.without(name, [value])
            notes.append(f"{name}={value} dropped: XLA rejects it ({error})")
    return space, notes


def make_strategy(strategy: str, space: SearchSpace, seed: int, *,
                  program_features: Mapping[str, float] | None = None,
                  history: list[tuple[str, dict[str, float], float]] | None = None,
                  program_id: str = "", predictor: Callable[..., Any] | None = None
                  ) -> Any:
    """A strategy by name (`STRATEGIES`); ``kernel`` needs `predictor`
    (`xlaprobe.tune.screen.Predictor`).

    Raises:
        InvalidArgument: unknown name, or ``kernel`` without a predictor.
    """
    if strategy == "random":
        return RandomStrategy(space, seed)
    if strategy == "tpe":
        return TpeStrategy(space, seed)
    if strategy == "model":
        return ModelStrategy(space, seed, program_features or {}, history or [], program_id)
    if strategy == "kernel":
        if predictor is None:
            raise InvalidArgument("the kernel strategy needs a kernel model's predictor")
        return ScreenStrategy(space, seed, predictor)
    raise InvalidArgument(f"unknown strategy '{strategy}': use {', '.join(STRATEGIES)}")


def tune(target: TuneTarget, pool: Any, store: Any, *, strategy: str = "model", budget: int = 20,
         seed: int = 0, protocol: Protocol = Protocol(), space: SearchSpace | None = None,
         name: str | None = None, replicate: bool = True, timeout_s: float | None = None,
         on_event: Callable[[str, Any], None] | None = None,
         guard: Guard | None = None) -> TuneResult:
    """Search for a faster, numerically guarded configuration of `target`.

    Args:
        target: the program family (`tune_target`).
        pool: a `xlaprobe.workers.WorkerPool`.
        store: a `xlaprobe.store.Store`: measurements, findings and the result go there as they
            happen (a Ctrl-C keeps them); earlier measurements of other programs train the model.
        strategy: ``model``, ``kernel``, ``tpe`` or ``random``.
        budget: measurements to spend (the A/A control and the replication are not counted).
        seed: seed of the strategy.
        protocol: measurement settings.
        space: the search space (default: XLA:CPU options and passes plus the target's knobs);
            it is validated against XLA first.
        name: the result's name (default: the target).
        replicate: confirm the best in a fresh worker process before accepting it
            (`xlaprobe.tune.confirm`, `CONFIRM_ROUNDS` paired rounds).
        timeout_s: limit on one measurement or reference run (s).
        on_event: progress callback, ``(event, payload)``: ``("note", str)``, ``("control",
            Measurement)``, ``("trial", Trial)``, ``("replicated", Confirmation)``.
        guard: the `Guard` (default: a new one on `pool`); runs on one program may share one,
            so its float64 reference is computed once.

    Returns:
        The `TuneResult` (also stored: `xlaprobe.store.Store.tuning_result`).

    Raises:
        InvalidArgument: unknown strategy, budget < 1, the kernel strategy without a corpus, the
            baseline does not compile or run, the reference cannot run, or the baseline itself
            fails the guard.
    """
    corpus = _check_request(target, store, strategy, budget)
    emit = on_event or (lambda event, payload: None)
    started = time.perf_counter()
    name = name or target.name
    space, notes = validate_space(space or SearchSpace.for_program(target.knobs), pool)
    for note in notes:
        emit("note", note)
    session = _start(target, pool, store, guard or Guard(pool, timeout_s), protocol, timeout_s,
                     emit)
    run_id = store.start_tuning_run(name, session.baseline.fingerprint, strategy, budget, seed)
    session = dataclasses.replace(session, run_id=run_id, strategy=strategy, space=space)
    chooser = _chooser(session, seed, corpus)
    trials: list[Trial] = []
    findings: list[tuple[str, str]] = []
    best_speedup, best = 1.0, None
    for index in range(1, budget + 1):
        try:
            candidate = chooser.propose()
        except SpaceExhausted:
            emit("note", f"all {space.size - 1} candidates of the space measured; stopping "
                         f"after {index - 1} of {budget} measurements")
            break
        status, m, detail, speedup = _trial(session, candidate)
        if status == "rejected":
            findings.append((space.key(candidate), detail.split(":")[0].split(" in ")[0]))
        chooser.observe(candidate, speedup)
        trial = Trial(index, candidate, space.key(candidate), status, m, detail, best_speedup)
        if speedup is not None and speedup > best_speedup:
            best_speedup = speedup
            trial = dataclasses.replace(trial, best=speedup)
            best = trial
        trials.append(trial)
        emit("trial", trial)
    replicated, accepted = _replicate(session, best, emit) if best is not None and replicate \
        else (None, False)
    chosen = best.candidate if accepted and best is not None else space.default()
    result = TuneResult(
        name, strategy, budget, time.perf_counter() - started, session.control, tuple(trials),
        best, replicated, accepted,
        compiler_options(space_mod.configuration(chosen)) if accepted else {},
        space_mod.xla_flags(chosen) if accepted else "",
        space_mod.knob_values(chosen) if accepted else {}, tuple(findings), run_id)
    store.finish_tuning_run(run_id, result.to_json())
    return result


def _check_request(target: TuneTarget, store: Any, strategy: str, budget: int
                   ) -> list[dict[str, Any]] | None:
    """Refuse a run that cannot start before anything is measured or stored.

    Returns:
        The kernel corpus of the other programs for the ``kernel`` strategy (read once here and
        handed to its predictor), else None.

    Raises:
        InvalidArgument: unknown strategy, budget < 1, or the ``kernel`` strategy without a
            kernel corpus of other programs.
    """
    if strategy not in STRATEGIES:
        raise InvalidArgument(f"unknown strategy '{strategy}': use {', '.join(STRATEGIES)}")
    if budget < 1:
        raise InvalidArgument(f"budget must be at least one measurement, got {budget}")
    return _other_corpus(store, target.build({}).fingerprint) if strategy == "kernel" else None


def _chooser(session: _Session, seed: int, corpus: list[dict[str, Any]] | None) -> Any:
    """The run's strategy, with what it learns from: the store's measurements of other
    programs (``model``) or a kernel model of their kernel corpus (``kernel``)."""
    assert session.space is not None
    program_id = session.baseline.fingerprint
    history = [(row["program_id"], row["data"]["row_features"], row["speedup"])
               for row in session.store.measurements(exclude_program=program_id)
               if "row_features" in row["data"]]
    predictor = _kernel_predictor(session.target, session.pool, corpus, seed,
                                  session.timeout_s) \
        if session.strategy == "kernel" and corpus is not None else None
    return make_strategy(session.strategy, session.space, seed,
                         program_features=session.control.features, history=history,
                         program_id=program_id, predictor=predictor)


def _kernel_predictor(target: TuneTarget, pool: Any, entries: list[dict[str, Any]], seed: int,
                      timeout_s: float | None) -> Callable[..., Any]:
    """The ``kernel`` strategy's predictor: a `ProgramModel` trained on `entries`, the store's
    kernel corpus without this program's entries (`_other_corpus`, read once per run).

    Raises:
        InvalidArgument: the corpus has too few timed kernels of other programs.
    """
    return model_predictor(ProgramModel(seed).fit(entries), target.build, pool, timeout_s)


def _other_corpus(store: Any, program_id: str) -> list[dict[str, Any]]:
    """The store's kernel-corpus entries of programs other than `program_id`.

    Raises:
        InvalidArgument: there are none.
    """
    entries = [e for e in store.corpus() if e["program_id"] != program_id]
    if not entries:
        raise InvalidArgument("the kernel strategy needs a kernel corpus of other programs in "
                              "the store: grow it first (xlaprobe tune-corpus MODEL ...)")
    return entries


@dataclasses.dataclass(frozen=True)
class _Session:
    """What every measurement of one tuning run needs (internal to `tune`)."""

    target: TuneTarget
    pool: Any
    store: Any
    guard: Guard
    protocol: Protocol
    timeout_s: float | None
    baseline: Program
    control: Measurement
    run_id: int = 0
    strategy: str = ""
    space: SearchSpace | None = None


def _start(target: TuneTarget, pool: Any, store: Any, guard: Guard, protocol: Protocol,
           timeout_s: float | None, emit: Callable[[str, Any], None]) -> _Session:
    """Measure the default configuration (the A/A control) and check it passes the guard.

    Raises:
        InvalidArgument: the baseline does not run, or fails the check against the reference.
    """
    baseline = target.build({})
    control, outcome = measure(pool, baseline, {}, {}, protocol=protocol, timeout_s=timeout_s)
    if control is None:
        raise InvalidArgument(f"the baseline does not run ({outcome.kind.value}): "
                              f"{outcome.error.strip()[-300:]}")
    emit("control", control)
    verdict = guard.judge(baseline, "xla", control.outputs)
    if verdict.findings:
        raise InvalidArgument(f"the baseline (xla) itself fails the check against the reference "
                              f"({verdict.findings[0].kind.value}): run xlaprobe check "
                              f"{target.name} first")
    floats = [np.asarray(x) for x in control.outputs if np.issubdtype(np.asarray(x).dtype,
                                                                        np.inexact)]
    if floats and all(x.size and not np.isfinite(x).any() for x in floats):
        emit("note", "every floating-point output of the baseline is NaN or infinite: the guard "
             "cannot tell a miscompiled candidate from a right one; check the inputs "
             "(--inputs) or the function")
    return _Session(target, pool, store, guard, protocol, timeout_s, baseline, control)


def _trial(session: _Session, candidate: dict[str, Any]
           ) -> tuple[str, Measurement | None, str, float | None]:
    """Measure one candidate, guard its numbers, store both: (status, measurement, detail,
    speedup or None)."""
    assert session.space is not None
    knobs = space_mod.knob_values(candidate)
    program = session.target.build(knobs)
    options = compiler_options(space_mod.configuration(candidate))
    m, outcome = measure(session.pool, session.baseline, {}, options,
                         None if program is session.baseline else program,
                         protocol=session.protocol, timeout_s=session.timeout_s,
                         mutant=candidate.get(space_mod.MUTANT))
    status, detail, speedup = outcome.kind.value, outcome.error.strip()[-300:], None
    if m is not None:
        check, changed = _guard(session, program, space_mod.label(candidate), m.outputs)
        if check.findings:
            status = "rejected"
            finding = check.findings[0]
            detail = f"{finding.kind.value} in {', '.join(finding.outputs[:3])}"
            session.store.record_check(check)
        elif changed:
            status, detail = "rejected", f"{CHANGED}: {changed}"
        else:
            status, detail, speedup = "ok", "", m.speedup
    features = row_features(session.control.features, candidate, session.space.default())
    data = {"row_features": features, "knobs": knobs, "detail": detail,
            "strategy": session.strategy, **({} if m is None else m.to_json())}
    session.store.record_measurement(session.run_id, session.baseline.fingerprint, candidate,
                                     status, data, speedup=speedup,
                                     low=None if m is None else m.low,
                                     high=None if m is None else m.high)
    return status, m, detail, speedup


def _guard(session: _Session, program: Program, label: str, outputs: tuple[np.ndarray, ...]
           ) -> tuple[Any, str]:
    """The guard's two answers on a candidate's outputs: its `Guard.judge` check against its own
    program's reference, and (when that passes and its knobs changed the program) why its
    result is not the default configuration's (`Guard.changed`; "" when it is)."""
    check = session.guard.judge(program, label, outputs)
    if check.findings or program.fingerprint == session.baseline.fingerprint:
        return check, ""
    return check, session.guard.changed(session.baseline, label, outputs)


def _replicate(session: _Session, best: Trial, emit: Callable[[str, Any], None]
               ) -> tuple[Confirmation | None, bool]:
    """Confirm the best candidate in a fresh worker process (paired, interleaved rounds with an
    A/A twin: `xlaprobe.tune.confirm`), report it, and guard it again: (the confirmation,
    accepted?)."""
    for group in session.pool.worker_pids():
        if group == GROUP or group.startswith(GROUP + ":"):
            session.pool.recycle(group)
    program = session.target.build(space_mod.knob_values(best.candidate))
    mutant = best.candidate.get(space_mod.MUTANT)
    replicated = confirm(session.pool, session.baseline, compiler_options(
        space_mod.configuration(best.candidate)),
        None if program is session.baseline else program, rounds=CONFIRM_ROUNDS,
        sample_s=session.protocol.sample_s, timeout_s=session.timeout_s, mutant=mutant,
        group=f"{GROUP}:confirm" + (f":mutant:{mutant}" if mutant else ""))
    if replicated is None:
        return None, False
    emit("replicated", replicated)
    check, changed = _guard(session, program, space_mod.label(best.candidate),
                            replicated.outputs)
    accepted = replicated.confirmed and not check.findings and not changed
    session.store.record_measurement(session.run_id, session.baseline.fingerprint,
                                     best.candidate, "rejected" if check.findings or changed
                                     else "ok",
                                     replicated.to_json(), speedup=replicated.speedup,
                                     low=replicated.low, high=replicated.high, replicate=True)
    return replicated, accepted
