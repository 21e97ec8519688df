"""Localization tier 1: the failing output leaves of a finding and their cone of influence (the
top-level equations they depend on); the rest of the program is never blamed."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from xlaprobe.errors import NotReproducible
from xlaprobe.localization.segments import cone_of_influence
from xlaprobe.oracle import Verdict
from xlaprobe.program import Program


@dataclasses.dataclass(frozen=True, slots=True)
class Outputs:
    """Tier 1's result.

    Attributes:
        names: names of the failing output leaves, in output order.
        indices: their indices among the program's outputs.
        cone: the top-level equations (indices, in program order) they depend on.
    """

    names: tuple[str, ...]
    indices: tuple[int, ...]
    cone: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict: the names and the cone's size (equations)."""
        return {"names": list(self.names), "indices": list(self.indices), "cone": len(self.cone)}


def failing_outputs(program: Program, verdicts: Sequence[Verdict]) -> Outputs:
    """The failing outputs of `program` under one configuration and their cone.

    Args:
        program: the failing program.
        verdicts: that configuration's verdicts, one per output leaf.

    Raises:
        NotReproducible: no verdict is a finding, or the failing outputs are program inputs or
            literals (no equation computes them).
    """
    failing = [v for v in verdicts if v.kind.is_finding]
    if not failing:
        raise NotReproducible(f"no output of {program.provenance.name} fails: nothing to localize")
    indices = [v.index for v in failing]
    cone = cone_of_influence(program.jaxpr.jaxpr, indices)
    if not cone:
        raise NotReproducible(f"the failing outputs of {program.provenance.name} are program "
                              "inputs or literals: no equation computes them")
    return Outputs(tuple(v.output for v in failing), tuple(indices), tuple(cone))
