"""One primitive, one record: its facts, its float64 reference rule, its generator rule and its
error budget (`PrimitiveDef`).

JAX keeps a primitive and its rules in adjacent statements (``jax/_src/lax/lax.py``) and each
interpreter holds a table keyed by primitive that those statements fill. xlaprobe's records are
the same: its own primitives are records in the family modules of this package
(`xlaprobe.lax_rules.elementwise`, ``reductions``, ``shapes``, ...: `xlaprobe.lax_rules.registry`
lists them), a user's are records registered by
`xlaprobe.extend.define_primitive`, and the four tables -- `xlaprobe.primitives.PRIMITIVES`,
`xlaprobe.configs.reference.RULES`, `xlaprobe.sources.ops.RULES` and
`xlaprobe.approximations.BUDGETS` -- are built from them.
"""

from __future__ import annotations

import dataclasses

from xlaprobe.lax_rules.budget import Approximation
from xlaprobe.lax_rules.facts import PrimitiveFacts
from xlaprobe.lax_rules.numeric import Rule
from xlaprobe.lax_rules.opspec import OpRule

__all__ = ["PrimitiveDef", "accumulating", "plain"]


@dataclasses.dataclass(frozen=True, slots=True)
class PrimitiveDef:
    """Everything xlaprobe knows about one primitive.

    Attributes:
        facts: what interpreters and localization know about it (its ``name`` is the JAX
            primitive name).
        reference: the float64 reference's rule, ``rule(ctx, *operands, **params)`` (see
            `xlaprobe.lax_rules.numeric`); None: the reference reports the primitive unsupported
            (a tool error, never a finding).
        generator: the fuzzer's rule (`xlaprobe.lax_rules.opspec.OpRule`); None: never
            generated.
        budget: its error budget (`xlaprobe.lax_rules.budget.Approximation`), only for
            ``facts.approximate`` primitives; None: the default (2 ULPs).

    Raises:
        ValueError: a generator rule or budget named otherwise than `facts`, or a budget for a
            primitive that is not approximate.
    """

    facts: PrimitiveFacts
    reference: Rule | None = None
    generator: OpRule | None = None
    budget: Approximation | None = None

    def __post_init__(self) -> None:
        name = self.facts.name
        for what, part in (("generator rule", self.generator), ("budget", self.budget)):
            if part is not None and part.name != name:
                raise ValueError(f"primitive '{name}': its {what} is named '{part.name}'")
        if self.budget is not None and not self.facts.approximate:
            raise ValueError(f"primitive '{name}': a budget needs facts.approximate")

    @property
    def name(self) -> str:
        """The JAX primitive name (``exp``, ``scatter-add``)."""
        return self.facts.name


def accumulating(name: str, reference: Rule, generator: OpRule | None = None) -> PrimitiveDef:
    """The record of a sum, product or contraction: it rounds, and combines many terms into each
    result element in an order XLA may choose (`PrimitiveFacts.accumulates`)."""
    return PrimitiveDef(PrimitiveFacts(name, rounding=True, accumulates=True), reference,
                        generator)


def plain(name: str, reference: Rule, generator: OpRule | None = None) -> PrimitiveDef:
    """The record of a primitive with no facts to tell (it neither rounds nor only moves data):
    a max, an argmax, a sort, or one whose combiner's own equations round (``reduce``)."""
    return PrimitiveDef(PrimitiveFacts(name), reference, generator)
