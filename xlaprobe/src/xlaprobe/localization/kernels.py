"""Localization tier 3: the fused kernels that hold the named equation's instructions, in the
faulty configuration's optimized HLO of the whole program and of the segment compiled alone,
found through the ``eqnN`` named scope every ``xla`` compile traces equation N in
(`xlaprobe.localization.fusion`).

For an ``spmd`` configuration the optimized HLO is one device's partitioned module (every device
runs the same program on its shard): the equation's collectives come first, and where the
configuration plants a fault the same partitioning compiled without it is the trusted twin whose
collectives are compared (`fusion.differing_collectives`), naming the collective that changed
or is missing."""

from __future__ import annotations

import dataclasses
from typing import Any

from xlaprobe.configs.registry import Configuration
from xlaprobe.localization import fusion
from xlaprobe.localization.bisect import Searcher
from xlaprobe.localization.segments import SegmentProgram
from xlaprobe.program import Program


@dataclasses.dataclass(frozen=True, slots=True)
class Placement:
    """Tier 3's result.

    Attributes:
        fusions: in the faulty configuration's optimized HLO of the whole program, the kernels
            (fusions, or unfused instructions) holding the equation's instructions.
        instructions: those HLO instruction names.
        segment_fusions: the same kernels in the optimized HLO of the segment compiled alone.
        collectives: for a partitioned (``spmd``) compile, the collectives among `fusions`
            (all-reduce, all-gather, collective-permute, ...: what the partitioner inserted for
            the equation), those that differ from the trusted compile's first; empty otherwise.
        changed: of `collectives`, those with no equal in a trusted compile of the same
            partitioning (a planted fault's configuration without it): the collectives that go
            wrong; empty where there is no trusted compile.
        missing: collectives of the equation in the trusted compile with no equal in the faulty
            one (a dropped collective), named as the trusted module names them.
    """

    fusions: tuple[str, ...] = ()
    instructions: tuple[str, ...] = ()
    segment_fusions: tuple[str, ...] = ()
    collectives: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {name: list(getattr(self, name)) for name in self.__slots__}


def place(search: Searcher, program: Program, equation: int,
          segment: SegmentProgram | None) -> Placement:
    """Tier 3 for top-level equation `equation` of `program` (one or two cached compiles).

    Args:
        search: the localization's state (its faulty configuration and HLO cache).
        program: the failing program.
        equation: the equation tier 2 named.
        segment: the smallest segment that fails compiled alone, or None.
    """
    fusions: tuple[str, ...] = ()
    instructions: tuple[str, ...] = ()
    alone: tuple[str, ...] = ()
    per_device: dict[str, tuple[str, ...]] = {}
    text = search.hlo(program)
    if text is not None:
        kernels, note = fusion.kernels_in(text, program.jaxpr.jaxpr, equation)
        fusions, instructions = kernels.fusions, kernels.instructions
        if note:
            search.notes.append(note)
        if search.config.kind == "spmd":
            per_device = _collectives(search, program, text, equation)
            fusions = per_device["collectives"] + tuple(
                f for f in fusions if f not in per_device["collectives"])
    if segment is not None and equation in segment.equations:
        text = search.hlo(segment.program, segment.equations)
        if text is not None:
            local = segment.equations.index(equation)
            alone = fusion.kernels_in(text, segment.program.jaxpr.jaxpr, local)[0].fusions
    return Placement(fusions, instructions, alone, **per_device)


def trusted_partitioning(config: Configuration) -> Configuration | None:
    """The trusted twin of an ``spmd`` configuration with a planted fault: the same partitioning
    without it (None for any other configuration: a real finding has no trusted partitioned
    compile to compare with)."""
    if config.kind != "spmd" or not any(k == "mutant" for k, _ in config.options):
        return None
    return Configuration(config.kind, config.variant,
                         tuple((k, v) for k, v in config.options if k != "mutant"))


def _collectives(search: Searcher, program: Program, text: str,
                 equation: int) -> dict[str, tuple[str, ...]]:
    """Tier 3's per-device collectives of `equation` (`Placement`'s ``collectives``, ``changed``
    and ``missing``), comparing with the trusted twin's compile where there is one (a trusted
    compile, not counted in ``cycles``).

    A partitioned equation's local kernels compute what they compute on one device; its
    collectives are what partitioning adds, so they are named first, and of them those that
    differ from the trusted compile's. An equation with no collective of its own is named by its
    local kernels, with a note."""
    collectives = fusion.equation_collectives(text, equation)
    changed: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    twin = trusted_partitioning(search.config)
    if twin is not None:
        outcome = fusion.optimized_hlo(search.pool, program, twin, timeout_s=search.timeout_s)
        if outcome.ran:
            changed, missing = fusion.differing_collectives(text, outcome.value, equation)
            collectives = changed + tuple(c for c in collectives if c not in changed)
        else:
            search.notes.append(f"no optimized HLO from the trusted {twin}: "
                                f"{outcome.kind.value} {outcome.last_line[:200]}")
    if missing:
        search.notes.append(f"the trusted compile ({twin}) has collective(s) "
                            f"{', '.join(missing)} for equation {equation} that the faulty one "
                            "lacks: a dropped collective")
    elif not collectives:
        search.notes.append(f"equation {equation} has no collective of its own in the per-device "
                            "module: its local kernels are named (a dropped collective, or one "
                            "combined under another equation's name, leaves none)")
    return {"collectives": collectives, "changed": changed, "missing": missing}
