"""The facts about one JAX primitive that xlaprobe's interpreters and localization read
(`PrimitiveFacts`), and how a primitive only moves data (`Movement`).

A leaf: the primitive records (`xlaprobe.lax_rules`) carry their facts in it, and
`xlaprobe.primitives` (the table every interpreter reads) keys them by name.
"""

from __future__ import annotations

import dataclasses
import enum

__all__ = ["LAX_NAMES", "Movement", "PrimitiveFacts"]


class Movement(enum.Enum):
    """How a primitive only moves data rather than computing new values."""

    NONE = "none"            #: computes new values
    RESHAPE = "reshape"      #: the same elements in the same order, another shape
    BROADCAST = "broadcast"  #: repeats elements into a larger shape
    CONVERT = "convert"      #: the same elements in another dtype
    BITCAST = "bitcast"      #: the same bits read as another dtype
    COPY = "copy"            #: the same array
    PERMUTE = "permute"      #: the same elements in another order
    GATHER = "gather"        #: picks or places elements (slices, gathers, padding, concatenation)


@dataclasses.dataclass(frozen=True, slots=True)
class PrimitiveFacts:
    """The facts about one JAX primitive that xlaprobe's interpreters and localization read.

    Attributes:
        name: the primitive's name (``jax.extend.core.Primitive.name``: ``scatter-add``, ``jit``).
        rounding: IEEE arithmetic rounds its floating results (an exact op -- a max, a select, a
            slice -- returns one of its operands' values).
        approximate: XLA:CPU evaluates it with a polynomial or rational approximation a few ULPs
            wide rather than correctly rounded (transcendentals, ``rsqrt``, ``cbrt``, ``pow``).
        accumulates: it combines many terms into each output element (sums, products,
            contractions), in an order XLA may choose.
        elementwise: each output element depends only on the operands' elements at its index.
        movement: how it only moves data (`Movement.NONE`: it computes).
        call_keys: for a call-like primitive (its forward semantics is "evaluate a sub-jaxpr on the
            operands"), the parameter names that hold the sub-jaxpr, the first present one holding
            it (names changed between releases); empty for every other primitive.
        inlined: canonical form inlines this call-like primitive (others stay: ``composite`` is
            one op to XLA).
        takes_keys: it takes PRNG key arrays whole; every other primitive that meets a key array
            works on its uint32 components one at a time (control flow, calls, callbacks and
            annotations pass keys through whole; call-like primitives do too, see `whole_keys`).
        wrapper: the ``jax.lax`` function that binds exactly this primitive from its operands
            alone (``lax.bitwise_and`` for ``and``), or "" where none is recorded.
        retired: "" for a jax 0.12 primitive; else the releases whose name it is (``pjit``).

    Raises:
        ValueError: contradictory facts (an inlined or approximate flag without its premise).
    """

    name: str
    rounding: bool = False
    approximate: bool = False
    accumulates: bool = False
    elementwise: bool = False
    movement: Movement = Movement.NONE
    call_keys: tuple[str, ...] = ()
    inlined: bool = False
    takes_keys: bool = False
    wrapper: str = ""
    retired: str = ""

    def __post_init__(self) -> None:
        if self.inlined and not self.call_keys:
            raise ValueError(f"primitive '{self.name}': only call-like primitives are inlined")
        if (self.approximate or self.accumulates) and not self.rounding:
            raise ValueError(f"primitive '{self.name}': approximations and sums round")

    @property
    def call_like(self) -> bool:
        """Its forward semantics is evaluating the sub-jaxpr in `call_keys`."""
        return bool(self.call_keys)

    @property
    def whole_keys(self) -> bool:
        """PRNG key arrays reach it whole: it `takes_keys` or calls a jaxpr that does.

        >>> PrimitiveFacts("jit", call_keys=("jaxpr",)).whole_keys, PrimitiveFacts("add").whole_keys
        (True, False)
        """
        return self.takes_keys or self.call_like


#: ``jax.lax`` names of the bitwise primitives, which are Python keywords (``lax.and`` is no name).
LAX_NAMES = {"and": "bitwise_and", "or": "bitwise_or", "not": "bitwise_not", "xor": "bitwise_xor"}
