"""Localization tier 3: the fused kernels that hold the named equation's instructions, in the
faulty configuration's optimized HLO of the whole program and of the segment compiled alone,
found through the ``eqnN`` named scope every ``xla`` compile traces equation N in
(`xlaprobe.localization.fusion`)."""

from __future__ import annotations

import dataclasses
from typing import Any

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
    """

    fusions: tuple[str, ...] = ()
    instructions: tuple[str, ...] = ()
    segment_fusions: tuple[str, ...] = ()

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
    text = search.hlo(program)
    if text is not None:
        kernels, note = fusion.kernels_in(text, program.jaxpr.jaxpr, equation)
        fusions, instructions = kernels.fusions, kernels.instructions
        if note:
            search.notes.append(note)
    if segment is not None and equation in segment.equations:
        text = search.hlo(segment.program, segment.equations)
        if text is not None:
            local = segment.equations.index(equation)
            alone = fusion.kernels_in(text, segment.program.jaxpr.jaxpr, local)[0].fusions
    return Placement(fusions, instructions, alone)
