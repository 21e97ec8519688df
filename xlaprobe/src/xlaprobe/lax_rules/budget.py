"""The error budget record of one approximate primitive (`Approximation`).

A leaf: the primitive records (`xlaprobe.lax_rules.elementwise`, ``special``) carry their budgets
in it, and
`xlaprobe.approximations` (the table, the default budget and the allowance arithmetic) reads them.
What each part means and how the figures were measured: `xlaprobe.approximations`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["SAMPLED", "Approximation"]

#: The share of an allowance a Monte Carlo sample of the reference (``reference:mca``) moves an
#: approximate result by (a random sign times a uniform draw in this range): times the oracle's
#: factor 4, one to two allowances. Scatters sample their any-order error bound the same way.
SAMPLED = (0.25, 0.5)


@dataclasses.dataclass(frozen=True, slots=True)
class Approximation:
    """The error budget of one approximate primitive (units of the result's dtype).

    Attributes:
        name: the JAX primitive name (``lgamma``).
        ulps: relative part: ULPs of the result (machine epsilons times |result|).
        arg_ulps: argument part: the largest change of the true result when any one floating
            operand is moved by this many machine epsilons relative to itself.
        abs_eps: absolute floor, in machine epsilons (a unit-scale term).
        terms: for kernels that sum an exponent before one ``exp`` (igamma, betainc), the
            exponent's terms' magnitude from the float64 operands; the relative part grows by
            ``term_ulps`` ULPs per unit of it (the exponent's rounding error becomes the
            result's relative error).
        term_ulps: see `terms`.
        measured: the worst `benchmarks/special_ulps.py` measured, for the reader.
    """

    name: str
    ulps: float
    arg_ulps: float = 0.0
    abs_eps: float = 0.0
    terms: Callable[[Sequence[np.ndarray]], np.ndarray] | None = None
    term_ulps: float = 0.0
    measured: str = ""
