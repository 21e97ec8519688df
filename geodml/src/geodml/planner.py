"""The planner: predict each strategy's WAN bytes, rounds, simulated seconds and egress dollars
from data sizes, model size, the WAN and sovereignty alone (no training), recommend the cheapest
allowed strategy, and locate the crossover to centralizing.

Each strategy's cost model is its registry record's predictor (costs.py); given the round and pass
counts a run actually used the predictions reproduce its ledger exactly, which the tests check.
Without them the planner uses the counts in PlanCounts (the iteration counts of L-BFGS are not
known before running it).
"""

from __future__ import annotations

import math
from dataclasses import replace

from geodml import registry
from geodml.algorithms import Settings  # noqa: F401 - also registers the built-in algorithms
from geodml.costs import DCSize, PlanCounts, Prediction, csr_sizes, predict_centralize  # noqa: F401 - the planner's API
from geodml.errors import GeodmlError
from geodml.wan import Wan


def predict(strategy: str, sizes: list[DCSize], d: int, wan: Wan, s: Settings, hub: str | None,
            counts: PlanCounts = PlanCounts(), hierarchical: bool = True) -> Prediction:
    """Predict one strategy's cost with its registry record's predictor. sizes: the DCs; d:
    features (model has d+1 parameters); hub: the aggregation (or, for a strategy that moves raw
    rows, gathering) region. Raises GeodmlError for an unknown strategy."""
    return registry.get(strategy).predict(sizes, d, wan, s, hub, counts, hierarchical)


def _tie_scale(f, lo: float = 1e-6, hi: float = 1e6) -> float | None:
    """The scale a in [lo, hi] where f(a) (centralize minus strategy) changes sign, by bisection
    on log a; None if it does not, or if f is 0 at both ends (a tie at every scale, as with one
    data center, where neither side moves a byte)."""
    flo, fhi = f(lo), f(hi)
    if flo == 0 and fhi == 0:
        return None
    if flo == 0:
        return lo
    if (flo > 0) == (fhi > 0):
        return None
    for _ in range(80):
        mid = math.sqrt(lo * hi)
        fm = f(mid)
        if (fm > 0) == (flo > 0):
            lo, flo = mid, fm
        else:
            hi = mid
    return math.sqrt(lo * hi)


def unconstrained_central_hub(sizes: list[DCSize], wan: Wan) -> str:
    """Where centralizing would gather the rows if sovereignty allowed it (network.central_hub
    with every DC non-sovereign)."""
    from geodml.network import central_hub

    return central_hub(wan, [replace(x, sovereign=False) for x in sizes])


def crossover(strategy: str, sizes: list[DCSize], d: int, wan: Wan, s: Settings, model_hub: str,
              central_hub: str | None, counts: PlanCounts = PlanCounts(), hierarchical: bool = True) -> dict:
    """Where centralizing starts to win against ``strategy``.

    Returns {"rounds_bytes": the fewest whole rounds (an int) at which centralizing moves fewer
    WAN bytes (at the current data size; None for a strategy whose rounds are fixed, such as
    one-shot averaging, or that moves nothing per round), and for each of bytes, sim_seconds,
    dollars: "rows_<metric>": the total row count below which centralizing is cheaper on that
    metric (all DCs scaled together, rounds fixed), or None where one side wins at every scale
    from 1e-6x to 1e6x}. Centralizing is costed at the hub it would use without sovereignty when
    it is refused."""
    plain = [replace(x, sovereign=False) for x in sizes]
    hub_c = central_hub or unconstrained_central_hub(plain, wan)
    c = predict("centralize", plain, d, wan, s, hub_c, counts)
    p = predict(strategy, sizes, d, wan, s, model_hub, counts, hierarchical)
    per_round = p.bytes / max(p.rounds, 1)
    n = sum(x.n for x in sizes)
    fixed = registry.get(strategy).fixed_rounds is not None
    # A fraction of a round is no answer to "after how many rounds": the first whole round past the tie.
    rounds = math.floor(c.bytes / per_round) + 1 if per_round and not fixed else None
    out: dict = {"strategy": strategy, "rounds_bytes": rounds}
    for metric in ("bytes", "sim_seconds", "dollars"):
        def f(a, metric=metric):
            sc = [x.scaled(a) for x in plain]
            return getattr(predict("centralize", sc, d, wan, s, hub_c, counts), metric) - getattr(predict(strategy, sc, d, wan, s, model_hub, counts, hierarchical), metric)
        a = _tie_scale(f)
        out[f"rows_{metric}"] = None if a is None else a * n
    return out


def plan(sizes: list[DCSize], d: int, wan: Wan, s: Settings, model_hub: str, central_hub: str | None,
         strategies: tuple[str, ...] | None = None, counts: PlanCounts = PlanCounts(), objective: str = "sim_seconds",
         hierarchical: bool = True) -> dict:
    """Predict every strategy (default: every registered one), recommend the allowed one with the
    least ``objective`` (bytes, sim_seconds or dollars) and give each model-exchange strategy's
    crossover to centralizing. A strategy that moves raw rows is costed at central_hub, the others
    at model_hub.
    Returns {"predictions": {name: Prediction.as_dict()}, "recommend": name, "objective": ...,
    "crossover": {name: crossover(...)}}. Raises GeodmlError for an unknown objective."""
    if objective not in ("bytes", "sim_seconds", "dollars"):
        raise GeodmlError(f"unknown objective {objective!r} (use bytes, sim_seconds or dollars)")
    algos = [registry.get(a) for a in (registry.names() if strategies is None else strategies)]
    preds = {a.name: a.predict(sizes, d, wan, s, central_hub if a.moves == "raw" else model_hub, counts, hierarchical) for a in algos}
    allowed = {a: p for a, p in preds.items() if p.refused is None}
    best = min(allowed, key=lambda a: getattr(allowed[a], objective)) if allowed else None
    cross = {a.name: crossover(a.name, sizes, d, wan, s, model_hub, central_hub, counts, hierarchical) for a in algos if a.moves == "model"}
    return {"predictions": {a: p.as_dict() for a, p in preds.items()}, "objective": objective, "recommend": best, "crossover": cross}
