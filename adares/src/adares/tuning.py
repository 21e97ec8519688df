"""Fair baselines: every policy's own knobs searched by the same equal-violation search.

For a policy and a trial's knob values (Optuna's TPE sampler over the ranges its
``PolicySpec.knobs`` declare; the first trial is the policy's defaults), ``equal_violation``
bisects the margins to the target violation rates and the trial scores the money spent there:
allocated vCPU-hours and GiB-hours at their prices plus the resize cost. A trial that misses a
target at the top of the range scores that money plus a penalty per point of violation above
the targets, so settings that cannot reach them lose. The best trial's knobs and its
equal-violation point are the policy's tuned result. Every policy, ADARES included, gets the
same number of trials.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from adares.costs import CostModel
from adares.frontier import EqualViolation, equal_violation
from adares.policies import PolicyOptions, get, make_policy
from adares.trace import Trace


@dataclass
class Tuned:
    """A policy's best knobs (by name; {} for the defaults or a policy without knobs), its
    equal-violation result with them, its score (money), and every trial's (knobs, score)."""

    policy: str
    knobs: dict[str, float | int]
    result: EqualViolation
    score: float
    trials: list[tuple[dict[str, float | int], float]] = field(default_factory=list)


def score(ev: EqualViolation, costs: CostModel, target_cpu: float, target_oom: float) -> float:
    """Money at the equal-violation point (allocations + resizes), plus, when a target is
    missed, 10x that money per unit of relative excess (so a miss never wins)."""
    a = ev.at
    money = a.vcpu_hours * costs.vcpu_hour + a.gb_hours * costs.gb_hour + a.resize_cost
    excess = (max(0.0, a.cpu_throttled_share - target_cpu) / max(target_cpu, 1e-9)
              + max(0.0, a.oom_per_vm_day - target_oom) / max(target_oom, 1e-9))
    return money * (1.0 + 10.0 * excess)


def _suggest(trial, spec) -> dict[str, float | int]:
    out: dict[str, float | int] = {}
    for k in spec.knobs:
        if k.integer:
            out[k.name] = trial.suggest_int(k.name, int(k.lo), int(k.hi), log=k.log)
        else:
            out[k.name] = trial.suggest_float(k.name, k.lo, k.hi, log=k.log)
    return out


def tune(trace: Trace, name: str, trials: int, target_cpu: float = 0.01,
         target_oom: float = 0.01, lo: float = -0.5, hi: float = 1.5, iters: int = 7,
         costs: CostModel = CostModel(), seed: int = 0, bandit: str = "numpy",
         on_trial: Callable[[dict, float], None] | None = None) -> Tuned:
    """Search ``name``'s knobs with ``trials`` trials (>= 1; a policy without knobs gets one)
    of ``equal_violation`` each. Returns the best as a Tuned. Raises InputError for an
    unknown policy, ValueError for trials < 1."""
    import optuna

    if trials < 1:
        raise ValueError(f"trials must be >= 1, got {trials}")
    spec = get(name)
    results: dict[int, EqualViolation] = {}
    history: list[tuple[dict[str, float | int], float]] = []

    def objective(trial) -> float:
        knobs = _suggest(trial, spec)
        opts = PolicyOptions(seed, costs, knobs, bandit=bandit)
        ev = equal_violation(trace, lambda: make_policy(name, trace, opts), target_cpu,
                             target_oom, lo, hi, iters, costs)
        results[trial.number] = ev
        s = score(ev, costs, target_cpu, target_oom)
        history.append((knobs, s))
        if on_trial is not None:
            on_trial(knobs, s)
        return s

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed))
    if spec.knobs:
        study.enqueue_trial({k.name: k.default for k in spec.knobs})
    study.optimize(objective, n_trials=trials if spec.knobs else 1)
    best = study.best_trial
    return Tuned(name, dict(history[best.number][0]), results[best.number],
                 float(best.value) if math.isfinite(best.value) else math.inf, history)
