"""The one table of rightsizing policies: name -> ``PolicySpec`` (factory, knobs, role).

Replay, compare, recommend, the report and the command line read this table and nothing else,
so a new policy is one ``register(PolicySpec(...))`` call (after the VPA recommender's
``estimator.go``, where each estimator is small and composed, and every knob is declared once
with its effect).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from adares.errors import InputError
from adares.items import split_items
from adares.policies.autopilot import AutopilotLike
from adares.policies.bandit import Adares
from adares.policies.base import Knob, Policy, PolicyOptions
from adares.policies.baselines import Clairvoyant, Predictive, Static, Threshold
from adares.policies.resource_central import ResourceCentral
from adares.policies.vpa import VPA
from adares.trace import Trace
from adares.vpa.recommender import RecommenderConfig

Factory = Callable[[Trace, PolicyOptions], Policy]


@dataclass(frozen=True)
class PolicySpec:
    """One policy's record.

    name: the command line's name; factory(trace, options) -> a fresh Policy; summary: one line
    for ``--help``; knobs: its tunable settings (``--knob``, the fair-baseline search);
    learns: takes the learner options (``--bandit``, ``--transfer-from``, ``--save-log``);
    bound: a reference bound, not a deployable policy (no margin, nothing to recommend, left
    out of compare); baseline: compare reports every policy's savings against it;
    compared: in compare's default ``--policies``.
    """

    name: str
    factory: Factory
    summary: str
    knobs: tuple[Knob, ...] = ()
    learns: bool = False
    bound: bool = False
    baseline: bool = False
    compared: bool = True

    def knob(self, name: str) -> Knob:
        """The knob called ``name``; InputError naming the known ones otherwise."""
        for k in self.knobs:
            if k.name == name:
                return k
        known = ", ".join(k.name for k in self.knobs) or "none"
        raise InputError(f"policy {self.name} has no knob {name!r} (knobs: {known})")


_REGISTRY: dict[str, PolicySpec] = {}
#: Policies whose savings ``adares replay`` prints as columns (its table has room for two).
REPLAY_BASELINES = ("threshold", "predictive")


def register(spec: PolicySpec) -> PolicySpec:
    """Add ``spec`` to the table (the last registered comes last in the default lists).
    Raises ValueError when the name is taken or holds a comma or a space."""
    if spec.name in _REGISTRY:
        raise ValueError(f"policy {spec.name!r} is already registered")
    if not spec.name or any(c in spec.name for c in ", \t"):
        raise ValueError(f"policy name {spec.name!r}: no commas or spaces")
    _REGISTRY[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    """Remove a policy (a test's toy policy); KeyError when it is not registered."""
    del _REGISTRY[name]


def policy_names() -> tuple[str, ...]:
    """Every registered name, in registration order (``adares replay``'s default)."""
    return tuple(_REGISTRY)


def compare_names() -> tuple[str, ...]:
    """The names ``adares compare`` replays by default (compared, not bounds)."""
    return tuple(n for n, s in _REGISTRY.items() if s.compared and not s.bound)


def baseline_names() -> tuple[str, ...]:
    """The policies compare reports savings against."""
    return tuple(n for n, s in _REGISTRY.items() if s.baseline)


def get(name: str) -> PolicySpec:
    """The spec of ``name``; InputError (one line, with the known names) when unknown."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise InputError(f"unknown policy {name!r} (known: {', '.join(_REGISTRY)})") from None


def parse_policies(spec: str) -> list[str]:
    """Comma-separated policy names, checked, duplicates dropped; InputError on an unknown name,
    an empty list or an empty item (``static,,vpa``: a lost name is more likely than a typo'd
    comma)."""
    names = split_items(spec, "--policies")
    if not names:
        raise InputError("no policy given")
    for n in names:
        get(n)
    return list(dict.fromkeys(names))


def parse_knobs(items: list[str]) -> dict[str, dict[str, float | int]]:
    """``POLICY.KNOB=VALUE`` items -> {policy: {knob: value}}, each checked against its Knob's
    range. Raises InputError on a malformed item, an unknown policy or knob, a value out of
    range, or a knob given twice."""
    out: dict[str, dict[str, float | int]] = {}
    for it in items:
        left, eq, value = it.partition("=")
        pol, dot, name = left.strip().rpartition(".")
        if not eq or not dot or not pol or not name:
            raise InputError(f"--knob {it!r}: expected POLICY.KNOB=VALUE")
        try:
            v = float(value)
        except ValueError:
            raise InputError(f"--knob {it!r}: {value!r} is not a number") from None
        spec = get(pol)
        per = out.setdefault(pol, {})
        if name in per:
            raise InputError(f"--knob {pol}.{name} given twice")
        per[name] = spec.knob(name).check(pol, v)
    return out


def make_policy(name: str, trace: Trace, options: PolicyOptions = PolicyOptions()) -> Policy:
    """A fresh policy by name. Raises InputError for an unknown name or knob."""
    spec = get(name)
    for k, v in options.knobs.items():
        spec.knob(k).check(name, float(v))
    return spec.factory(trace, options)


# --- the built-in policies ----------------------------------------------------------------

_THRESHOLD_KNOBS = (
    Knob("up", 0.5, 0.99, 0.8, "CPU p95 utilization of the allocation above which it grows"),
    Knob("down", 0.05, 0.6, 0.3, "CPU p95 utilization below which it shrinks"),
    Knob("mem_up", 0.6, 0.99, 0.9, "memory peak utilization above which it grows"),
    Knob("mem_down", 0.1, 0.8, 0.5, "memory peak utilization below which it shrinks"),
    Knob("grow", 1.05, 3.0, 1.5, "growth factor of a step up (and after an OOM kill)"),
    Knob("shrink", 0.3, 0.95, 0.8, "factor of a step down"))
_PREDICTIVE_KNOBS = (
    Knob("period_steps", 3, 72, 12, "forecast horizon and decision period (steps)", integer=True),
    Knob("cpu_quantile", 0.5, 0.999, 0.95, "residual quantile added as CPU headroom"),
    Knob("mem_quantile", 0.5, 0.999, 0.99, "residual quantile added as memory headroom"),
    Knob("mem_margin", 0.0, 0.5, 0.05, "memory floor above the last period's peak (fraction)"))
_VPA_KNOBS = (
    Knob("target_cpu_percentile", 0.5, 0.99, 0.9, "CPU histogram percentile of the target"),
    Knob("target_memory_percentile", 0.5, 0.99, 0.9, "memory peaks' percentile of the target"),
    Knob("safety_margin", 0.0, 1.0, 0.15, "recommendation margin fraction"),
    Knob("half_life_h", 1.0, 168.0, 24.0, "histogram decay half-life (hours)", log=True))
_AUTOPILOT_KNOBS = (
    Knob("cost_half_life_h", 1.0, 72.0, 12.0, "half-life of the recommenders' cost records (h)",
         log=True),
    Knob("switch_margin", 0.0, 0.5, 0.05, "hysteresis: the cost advantage needed to switch"),
    Knob("warmup_h", 1.0, 48.0, 24.0, "hours on the most conservative recommender first"))
_RC_KNOBS = (
    Knob("learn_steps", 72, 576, 288, "steps of history before sizing, and between re-sizings",
         integer=True),
    Knob("vm_quantile", 0.5, 1.0, 0.95, "per-VM CPU utilization quantile"),
    Knob("class_quantile", 0.5, 1.0, 0.9, "quantile over the VMs of a flavor class"))
_FLOOR_KNOBS = (
    Knob("margin", 0.0, 1.0, 0.05, "safety floor above the period's CPU quantile / memory peak"),
    Knob("cpu_floor_quantile", 0.5, 0.999, 0.9, "CPU demand quantile of the safety floor"))
_ADARES_KNOBS = (Knob("epsilon", 0.0, 0.5, 0.05, "exploration share (epsilon-greedy)"),
                 *_FLOOR_KNOBS,
                 Knob("explore_span", 0, 7, 1, "explore within this many sizes of the greedy "
                      "one (7: any)", integer=True),
                 Knob("floor_action", 0, 1, 1, "1: the safety floor itself is one of the sizes "
                      "(the rule without learning); 0: only multiples of the base above it",
                      integer=True),
                 Knob("conservative", 0.0, 0.5, 0.0, "leave the rule's size only for a "
                      "predicted cost this share lower (0: plain greedy)"))


def _vpa(trace: Trace, o: PolicyOptions) -> Policy:
    k = dict(o.knobs)
    half_life_s = 3600.0 * float(k.pop("half_life_h", 24.0))
    return VPA(RecommenderConfig(**k), half_life_s=half_life_s)


def _autopilot(trace: Trace, o: PolicyOptions) -> Policy:
    k = {name: 3600.0 * float(v) if name.endswith("_h") else v for name, v in o.knobs.items()}
    k = {(name[:-2] + "_s" if name.endswith("_h") else name): v for name, v in k.items()}
    return AutopilotLike(costs=o.costs, **k)


def _adares(trace: Trace, o: PolicyOptions) -> Policy:
    return Adares(seed=o.seed, costs=o.costs, warm_start=o.warm_start, keep_log=o.keep_log,
                  backend=o.bandit, **o.knobs)


def _adares_nolearn(trace: Trace, o: PolicyOptions) -> Policy:
    # The ablation: ADARES's base levels, floors and OOM bump, one action (x 1.0 of the base)
    # and so nothing to learn; what ADARES saves beyond it is the learning's own share.
    return Adares(multipliers=(1.0,), epsilon=0.0, seed=o.seed, costs=o.costs,
                  name="adares-nolearn", **o.knobs)


for _spec in (
    PolicySpec("clairvoyant", lambda tr, o: Clairvoyant(tr),
               "allocates each step's demand (the cost lower bound)", bound=True,
               compared=False),
    PolicySpec("static", lambda tr, o: Static(), "keeps every VM at its request", compared=False),
    PolicySpec("threshold", lambda tr, o: Threshold(**o.knobs),
               "reactive utilization thresholds", _THRESHOLD_KNOBS, baseline=True),
    PolicySpec("predictive", lambda tr, o: Predictive(**o.knobs),
               "OLS forecast of the next peak plus a residual quantile", _PREDICTIVE_KNOBS,
               baseline=True),
    PolicySpec("vpa", _vpa, "Kubernetes VPA recommender and in-place updater", _VPA_KNOBS,
               baseline=True),
    PolicySpec("autopilot", _autopilot, "Autopilot-like ensemble of moving-window recommenders",
               _AUTOPILOT_KNOBS, baseline=True),
    PolicySpec("resource-central", lambda tr, o: ResourceCentral(**o.knobs),
               "sized from the VM's flavor class's history (Resource Central-style)", _RC_KNOBS,
               baseline=True),
    PolicySpec("adares", _adares, "ADARES contextual bandit", _ADARES_KNOBS, learns=True),
    PolicySpec("adares-nolearn", _adares_nolearn,
               "ADARES without learning: its base level and floors, one action (the ablation)",
               _FLOOR_KNOBS, baseline=True),
):
    register(_spec)
