"""Every primitive record of xlaprobe's own (`DEFINITIONS`, by family in `FAMILIES`) and the
table slices built from them.

The tables read this module: `xlaprobe.primitives.PRIMITIVES` takes `facts`, the reference's
`RULES` takes `reference_rules`, the fuzzer's catalogue takes `generator_rules` (in record order,
which steers the generator) and `xlaprobe.approximations.BUDGETS` takes `budgets`. Families not
yet written as records (linear algebra, FFT, PRNG, collectives, calls, callbacks and
annotations) still fill those tables from their own modules.
"""

from __future__ import annotations

from xlaprobe.lax_rules import (contractions, control, elementwise, indexing, reductions, shapes,
                                sorting, special)
from xlaprobe.lax_rules.budget import Approximation
from xlaprobe.lax_rules.facts import PrimitiveFacts
from xlaprobe.lax_rules.numeric import Rule
from xlaprobe.lax_rules.opspec import OpRule
from xlaprobe.lax_rules.record import PrimitiveDef

__all__ = ["DEFINITIONS", "FAMILIES", "budgets", "facts", "generator_rules", "reference_rules"]

#: Family name -> its records, in the fuzzer's catalogue order.
FAMILIES: dict[str, tuple[PrimitiveDef, ...]] = {
    "elementwise": elementwise.DEFINITIONS,
    "special": special.DEFINITIONS,
    "reductions": reductions.DEFINITIONS,
    "contractions": contractions.DEFINITIONS,
    "shapes": shapes.DEFINITIONS,
    "indexing": indexing.DEFINITIONS,
    "sorting": sorting.DEFINITIONS,
    "control": control.DEFINITIONS,
}

#: xlaprobe's own primitive records, family by family.
DEFINITIONS: tuple[PrimitiveDef, ...] = tuple(d for family in FAMILIES.values() for d in family)


def facts() -> list[PrimitiveFacts]:
    """Each record's facts, in record order."""
    return [d.facts for d in DEFINITIONS]


def reference_rules() -> dict[str, Rule]:
    """Primitive name -> reference rule, for the records that have one."""
    return {d.name: d.reference for d in DEFINITIONS if d.reference is not None}


def generator_rules() -> list[OpRule]:
    """The records' fuzzer rules, in record order (the catalogue's order)."""
    return [d.generator for d in DEFINITIONS if d.generator is not None]


def budgets() -> list[Approximation]:
    """The records' error budgets, in record order."""
    return [d.budget for d in DEFINITIONS if d.budget is not None]
