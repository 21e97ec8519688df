"""The tuner's search space: XLA compiler options, HLO pass toggles and program knobs.

A *candidate* is a dict ``dimension name -> value``. Three kinds of dimension:

* ``option``: an XLA compiler option; the value is its spec text (``"true"``,
  ``"LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT"``) or ``None`` for XLA's default (option unset).
* ``pass``: one HLO pass, ``True`` = disabled (all disabled passes join into one
  ``xla_disable_hlo_passes``).
* ``knob``: a program knob (`xlaprobe.knobs`); the value is one of its choices.
* ``mutant`` (only to test the correctness guard): ``None`` or a planted miscompilation
  (`xlaprobe.configs.mutants`) that the candidate is compiled with.

Every dimension's first value is the default, so the all-defaults candidate is the baseline.
*Priors* weight values by what measurements on XLA:CPU (jaxlib 0.10.2, 2 vCPUs) showed: dots
routed alone to YNNPACK (1.6x on a ConvNet) and ``algsimp`` disabled (0.70-0.82 of a transformer
block's time) are promising; backend O0, fusion off and YNNPACK off or fused with elementwise ops
reliably hurt (up to 13x). The model-guided search starts from the priors; random search ignores
them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from xlaprobe.configs.registry import Configuration
from xlaprobe.errors import InvalidArgument
from xlaprobe.knobs import Knob
from xlaprobe.configs.mutants import get_mutant

Candidate = dict[str, Any]
#: Log-prior cost of changing one value from its default (see `SearchSpace.prior_score`).
CHANGE_COST = math.log(2.0)
_YNN = "xla_cpu_experimental_ynn_fusion_type"
#: Name of the ``mutant`` dimension.
MUTANT = "mutant"


@dataclasses.dataclass(frozen=True)
class Dimension:
    """One axis of the search space.

    Attributes:
        name: the option name, ``pass:<pass name>``, or ``knob:<knob name>``.
        kind: ``"option"``, ``"pass"``, ``"knob"`` or ``"mutant"``.
        values: the allowed values, the default first.
        priors: one positive weight per value (1.0: no opinion; above: promising; below: hurts).
    """

    name: str
    kind: str
    values: tuple[Any, ...]
    priors: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in ("option", "pass", "knob", "mutant"):
            raise InvalidArgument(f"unknown dimension kind '{self.kind}'")
        if len(self.values) < 2:
            raise InvalidArgument(f"dimension {self.name} needs at least two values")
        if not self.priors:
            object.__setattr__(self, "priors", (1.0,) * len(self.values))
        if len(self.priors) != len(self.values) or min(self.priors) <= 0:
            raise InvalidArgument(f"dimension {self.name}: one positive prior per value")

    @property
    def key(self) -> str:
        """The name without its ``pass:``/``knob:`` prefix."""
        return self.name.split(":", 1)[1] if self.kind in ("pass", "knob") else self.name


def option(name: str, *values: str, priors: Sequence[float] = ()) -> Dimension:
    """An option dimension whose first value is XLA's default (``None``, the option unset)."""
    return Dimension(name, "option", (None, *values), (1.0, *priors) if priors else ())


def planted(mutant: str) -> Dimension:
    """A ``mutant`` dimension: no fault (the default) or the named planted miscompilation."""
    get_mutant(mutant)  # raises InvalidArgument for an unknown name
    return Dimension(MUTANT, "mutant", (None, mutant))


def toggle(pass_name: str, prior: float = 1.0) -> Dimension:
    """A pass dimension: ``False`` (runs, the default) or ``True`` (disabled)."""
    return Dimension(f"pass:{pass_name}", "pass", (False, True), (1.0, prior))


#: XLA:CPU options and passes worth searching, with priors (see the module docstring). Options
#: that only change compile time, logging or collectives are left out.
XLA_CPU_DIMENSIONS: tuple[Dimension, ...] = (
    option(_YNN, "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT",
           "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT+LIBRARY_FUSION_TYPE_INDIVIDUAL_CONVOLUTION",
           "LIBRARY_FUSION_TYPE_DOT+LIBRARY_FUSION_TYPE_ELTWISE", "LIBRARY_FUSION_TYPE_INVALID",
           priors=(4.0, 2.0, 0.2, 0.2)),
    option("xla_cpu_experimental_xnn_graph_fusion_mode", "XNN_GRAPH_FUSION_MODE_GREEDY",
           "XNN_GRAPH_FUSION_MODE_GREEDY_SLINKY", priors=(0.7, 0.7)),
    option("xla_cpu_use_xnnpack", "false", priors=(0.3,)),
    option("xla_cpu_prefer_vector_width", "128", "512"),
    option("xla_cpu_scheduler_type", "CPU_SCHEDULER_TYPE_MEMORY_OPTIMIZED",
           "CPU_SCHEDULER_TYPE_CONCURRENCY_OPTIMIZED"),
    option("xla_cpu_opt_preset", "CPU_OPT_PRESET_FAST_RUNTIME", "CPU_OPT_PRESET_FAST_COMPILE",
           priors=(1.0, 0.3)),
    option("xla_cpu_enable_fast_math", "true", priors=(0.5,)),
    option("xla_cpu_multi_thread_eigen", "false", priors=(0.5,)),
    option("xla_backend_optimization_level", "0", "2", priors=(0.1, 1.0)),
    toggle("algsimp", 3.0),
    toggle("reshape-mover", 1.5),
    toggle("transpose-folding", 1.5),
    toggle("while-loop-invariant-code-motion", 1.2),
    toggle("cse", 0.8),
    toggle("fusion", 0.1),
)


class SpaceExhausted(InvalidArgument):
    """Every candidate of the search space has been proposed."""


@dataclasses.dataclass(frozen=True)
class SearchSpace:
    """A product of dimensions; candidates are dicts over their names.

    Attributes:
        dimensions: the axes, options and passes first, then knobs.
    """

    dimensions: tuple[Dimension, ...]

    def __post_init__(self) -> None:
        names = [d.name for d in self.dimensions]
        if len(set(names)) != len(names):
            raise InvalidArgument("a search-space dimension is given twice")

    @classmethod
    def for_program(cls, knobs: Mapping[str, Knob] | None = None, *,
                    options: Sequence[Dimension] = XLA_CPU_DIMENSIONS,
                    only: Sequence[str] | None = None, plant: str | None = None) -> SearchSpace:
        """The XLA:CPU space plus the program's knobs.

        Args:
            knobs: the program's declared knobs (knobs with a single choice are left out).
            options: option and pass dimensions (default: `XLA_CPU_DIMENSIONS`).
            plant: a mutant to add as a ``mutant`` dimension (tests of the guard), or None.
            only: keep only these dimension names (``pass:algsimp``, ``knob:layout``, option
                names); None keeps all.

        Raises:
            InvalidArgument: a name in `only` matches no dimension.
        """
        dims = list(options) + [Dimension(f"knob:{name}", "knob", (k.default, *[
            c for c in k.choices if c != k.default])) for name, k in (knobs or {}).items()
            if len(k.choices) > 1] + ([planted(plant)] if plant else [])
        if only is not None:
            unknown = sorted(set(only) - {d.name for d in dims})
            if unknown:
                raise InvalidArgument(f"unknown search dimension(s) {', '.join(unknown)}; known: "
                                      f"{', '.join(d.name for d in dims)}")
            dims = [d for d in dims if d.name in only]
        return cls(tuple(dims))

    def without(self, name: str, values: Sequence[Any]) -> SearchSpace:
        """The space with `values` removed from dimension `name` (e.g. values XLA rejects); a
        dimension left with one value is dropped."""
        dims = []
        for d in self.dimensions:
            if d.name == name:
                kept = [(v, p) for v, p in zip(d.values, d.priors) if v not in values]
                if len(kept) < 2:
                    continue
                d = dataclasses.replace(d, values=tuple(v for v, _ in kept),
                                        priors=tuple(p for _, p in kept))
            dims.append(d)
        return SearchSpace(tuple(dims))

    @property
    def size(self) -> int:
        """Number of distinct candidates."""
        return math.prod(len(d.values) for d in self.dimensions)

    def default(self) -> Candidate:
        """The baseline candidate: every dimension at its default."""
        return {d.name: d.values[0] for d in self.dimensions}

    def sample(self, rng: np.random.Generator, *, use_priors: bool = False) -> Candidate:
        """A random candidate: each dimension independently, uniform or by its priors."""
        out = {}
        for d in self.dimensions:
            p = np.asarray(d.priors if use_priors else [1.0] * len(d.values), np.float64)
            out[d.name] = d.values[int(rng.choice(len(d.values), p=p / p.sum()))]
        return out

    def prior_score(self, candidate: Candidate) -> float:
        """How promising the priors say a candidate is: per non-default value, its log prior minus
        `CHANGE_COST` (0 for the baseline; higher: more promising). The cost keeps a value of
        mild promise (prior below ``e**CHANGE_COST``) from being set just because it is not
        known to hurt: each change risks a slowdown."""
        return float(sum(math.log(d.priors[d.values.index(candidate[d.name])]) - CHANGE_COST
                         for d in self.dimensions if candidate[d.name] != d.values[0]))

    def prior_best(self) -> Candidate:
        """The candidate the priors favour: each dimension at its highest-scoring value (see
        `prior_score`; the default where no change scores above zero)."""
        out = self.default()
        for d in self.dimensions:
            scores = [0.0] + [math.log(p) - CHANGE_COST for p in d.priors[1:]]
            out[d.name] = d.values[int(np.argmax(scores))]
        return out

    def neighbours(self, candidate: Mapping[str, Any]) -> list[Candidate]:
        """Every candidate that differs from `candidate` in exactly one dimension."""
        return [{**candidate, d.name: value} for d in self.dimensions for value in d.values
                if value != candidate[d.name]]

    def validate(self, candidate: Mapping[str, Any]) -> Candidate:
        """A complete candidate: given values checked, missing ones at their default.

        Raises:
            InvalidArgument: an unknown dimension or a value outside it.
        """
        by_name = {d.name: d for d in self.dimensions}
        unknown = sorted(set(candidate) - set(by_name))
        if unknown:
            raise InvalidArgument(f"unknown search dimension(s) {', '.join(unknown)}")
        out = self.default()
        for name, value in candidate.items():
            if value not in by_name[name].values:
                raise InvalidArgument(f"{name}={value!r} is not one of "
                                      f"{', '.join(map(repr, by_name[name].values))}")
            out[name] = value
        return out

    def encode(self, candidate: Mapping[str, Any]) -> np.ndarray:
        """float64[len(dimensions)]: the index of each dimension's value (0 = default)."""
        return np.asarray([d.values.index(candidate[d.name]) for d in self.dimensions],
                          np.float64)

    def key(self, candidate: Mapping[str, Any]) -> str:
        """A canonical string of the non-default values (``""`` for the baseline)."""
        return ",".join(f"{d.name}={candidate[d.name]}" for d in self.dimensions
                        if candidate[d.name] != d.values[0])


def option_pairs(candidate: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The candidate's XLA options as sorted ``(name, value text)`` pairs (passes joined)."""
    pairs = [(name, str(value)) for name, value in candidate.items()
             if ":" not in name and name != MUTANT and value is not None]
    passes = sorted(name.split(":", 1)[1] for name, value in candidate.items()
                    if name.startswith("pass:") and value)
    if passes:
        pairs.append(("xla_disable_hlo_passes", "+".join(passes)))
    return sorted(pairs)


def knob_values(candidate: Mapping[str, Any]) -> dict[str, Any]:
    """The candidate's program knobs, ``knob name -> value``."""
    return {name.split(":", 1)[1]: value for name, value in candidate.items()
            if name.startswith("knob:")}


def configuration(candidate: Mapping[str, Any]) -> Configuration:
    """The ``xla[...]`` configuration of the candidate's options (knobs are not part of it)."""
    return Configuration("xla", None, tuple(option_pairs(candidate)))


def label(candidate: Mapping[str, Any]) -> str:
    """The configuration spec a candidate's verdicts and findings are stored under: its
    ``xla[...]`` spec, or ``mutant:<name>`` when it plants a fault."""
    mutant = candidate.get(MUTANT)
    return f"mutant:{mutant}" if mutant else str(configuration(candidate))


def xla_flags(candidate: Mapping[str, Any]) -> str:
    """The candidate's options as an ``XLA_FLAGS`` string (``--name=value`` separated by spaces;
    list values comma-joined)."""
    return " ".join(f"--{name}={value.replace('+', ',')}" for name, value in option_pairs(candidate))
