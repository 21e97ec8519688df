"""The algorithm registry: one record per training strategy, read by the algorithms' dispatcher,
the planner, compare and the command line (as Flower keeps one Strategy class per algorithm and
JAX keeps a primitive's rules beside it).

A new algorithm is one ``register(Algorithm(...))`` call: its runner (what it computes and sends),
its cost predictor (what the planner charges for it), the Settings fields it reads and whether it
moves raw rows or models. Nothing else names algorithms: ``names()`` gives the default list of
``geodml compare`` and ``geodml plan``.

This module is a leaf (it imports no other geodml module), so algorithms.py, where the built-in
records are registered, and planner.py can both read it without an import cycle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from geodml.errors import GeodmlError

# runner(net: network.Network, s: settings.Settings, pool: dcside.Pool) -> theta (d+1,) float64
Runner = Callable[[Any, Any, Any], Any]
# predict(sizes: list[costs.DCSize], d: int, wan: wan.Wan, s: Settings, hub: str | None,
#         counts: costs.PlanCounts, hierarchical: bool) -> costs.Prediction
Predictor = Callable[[Any, int, Any, Any, Any, Any, bool], Any]
# warn(net, s) -> a line the user must read (e.g. FADL's stalled line searches) or None
Warner = Callable[[Any, Any], "str | None"]


@dataclass(frozen=True)
class Algorithm:
    """One training strategy.

    Attributes:
        name: what the command line calls it (``--algos NAME``).
        runner: ``runner(net, settings, pool) -> theta`` trains on the Network's data centers
            (through the pool, where model-exchange algorithms compute) and accounts every message
            in the network's ledger; theta is the final model, float64 (d+1,).
        predict: the planner's cost model: ``predict(sizes, d, wan, settings, hub, counts,
            hierarchical) -> costs.Prediction``, equal to the runner's ledger given the iteration
            counts the run reported (tested for every built-in).
        settings: the fields of settings.Settings this algorithm reads (its own settings; compare's
            JSON shows their values per algorithm).
        moves: "model" (model-sized messages; runs at the model hub, through the pool) or "raw"
            (moves rows to the hub that gathers them; runs at the hub, needs no pool).
        fixed_rounds: rounds it always takes whatever the settings (one-shot averaging: 1), or None.
            A strategy with fixed rounds has no "rounds beyond which centralizing wins".
        warn: optional ``warn(net, settings) -> str | None``: a line for the user when the run went
            wrong in a way its numbers alone hide.
        models: the model kinds it trains (models.py names: "logreg", "mlp").
        summary: one line for help and listings.
    """

    name: str
    runner: Runner
    predict: Predictor
    settings: tuple[str, ...] = ()
    moves: str = "model"
    fixed_rounds: int | None = None
    warn: Warner | None = None
    summary: str = ""
    models: tuple[str, ...] = ("logreg",)

    def __post_init__(self):
        if self.moves not in ("model", "raw"):
            raise GeodmlError(f"algorithm {self.name!r}: moves must be 'model' or 'raw', got {self.moves!r}")
        if not self.name or "," in self.name or self.name != self.name.strip():
            raise GeodmlError(f"algorithm name {self.name!r} must be non-empty, without commas or outer spaces")

    def settings_of(self, s: Any) -> dict:
        """The values of this algorithm's own settings in s (a Settings): {field: value}."""
        return {f: getattr(s, f) for f in self.settings}


_REGISTRY: dict[str, Algorithm] = {}


def register(algorithm: Algorithm, replace: bool = False) -> Algorithm:
    """Add an algorithm (in order: names() lists them as registered). Returns it.

    Raises:
        GeodmlError: the name is taken and replace is False.
    """
    if algorithm.name in _REGISTRY and not replace:
        raise GeodmlError(f"algorithm {algorithm.name!r} is already registered")
    _REGISTRY[algorithm.name] = algorithm
    return algorithm


def unregister(name: str) -> None:
    """Remove an algorithm (tests that register a toy one clean up with this); no error if absent."""
    _REGISTRY.pop(name, None)


def names() -> tuple[str, ...]:
    """Every registered algorithm, in registration order (the built-ins first)."""
    return tuple(_REGISTRY)


def get(name: str) -> Algorithm:
    """The record of algorithm ``name``.

    Raises:
        GeodmlError: no such algorithm (the message lists the known ones).
    """
    try:
        return _REGISTRY[name]
    except KeyError:
        raise GeodmlError(f"unknown algorithm {name!r} (known: {', '.join(_REGISTRY)})") from None
