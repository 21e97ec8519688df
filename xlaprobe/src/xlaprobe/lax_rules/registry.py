"""Every primitive record of xlaprobe's own (`DEFINITIONS`) and the table slices built from them.

The tables read this module: `xlaprobe.primitives.PRIMITIVES` takes `facts`, the reference's
`RULES` takes `reference_rules`, the fuzzer's catalogue takes `generator_rules` (in record order,
which steers the generator) and `xlaprobe.approximations.BUDGETS` takes `budgets`. Families not
yet written as records (data movement, contractions, windows, linear algebra, FFT, control flow,
PRNG, collectives) still fill those tables from their own modules.
"""

from __future__ import annotations

from xlaprobe.lax_rules import elementwise, reductions, special
from xlaprobe.lax_rules.budget import Approximation
from xlaprobe.lax_rules.facts import PrimitiveFacts
from xlaprobe.lax_rules.numeric import Rule
from xlaprobe.lax_rules.opspec import OpRule
from xlaprobe.lax_rules.record import PrimitiveDef

__all__ = ["DEFINITIONS", "budgets", "facts", "generator_rules", "reference_rules"]

#: xlaprobe's own primitive records, family by family (the fuzzer's catalogue order first).
DEFINITIONS: tuple[PrimitiveDef, ...] = (*elementwise.DEFINITIONS, *special.DEFINITIONS,
                                         *reductions.DEFINITIONS)


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
