"""How far XLA:CPU's approximate primitives may honestly land from the true result: the error
budget of transcendental and special functions, as data measured on jax 0.12.

XLA evaluates ``lgamma``, ``digamma``, ``erf_inv``, the incomplete gamma and beta functions,
Bessel functions and the ordinary transcendentals with polynomial, rational or series
approximations, not correctly rounded. Their error has up to four parts, and an allowance must
follow each or it either raises false alarms or hides regressions:

- a relative part, a few ULPs of the result (`Approximation.ulps`);
- an argument part: the answer is the true function of an argument moved by a few ULPs
  (`Approximation.arg_ulps`). Where the function is steep (digamma near its poles, erf_inv
  near +-1, erfc's tail, sinh and cosh of large arguments) XLA's error is that of the argument,
  ``|f(x (1 + k eps)) - f(x)|``, far more ULPs of the result than a relative bound allows;
- an absolute floor in machine epsilons (`Approximation.abs_eps`) where the kernel adds terms
  of order one: digamma near its zeros (1.4616, -0.5041, ...) is off by about 8 eps
  absolute, millions of ULPs of a result near zero;
- for kernels that sum an exponent before one ``exp`` (igamma, betainc), a relative part that
  grows with the exponent's terms (`Approximation.terms`).

jax 0.12's lgamma needs none of the last three: it stays within 3.7 ULPs of the true result
everywhere measured, its zeros at 1, 2, -2.457 and the neighbourhood of its poles included.

`allowed_error` turns an entry into an elementwise allowance; the reference's Monte Carlo runs
(``reference:mca``) perturb each approximate result by a random sign times a share of it in
`SAMPLED`, so the oracle's honest-run budget carries it through everything downstream
(cancellation included), and a single approximate op gets between one and two allowances
(`xlaprobe.oracle` multiplies the honest error by 4). Primitives without an entry keep the
reference's uniform 2-ULP sampling.

Figures: ``benchmarks/special_ulps.py`` measures, per primitive and region, XLA's largest error
in ULPs and as a share of this allowance, under ``xla`` and ``xla:O0``, against SciPy float64;
each entry is the measured worst with a margin of about 1.5 (so a regression making an
approximation 10x worse still lands beyond the oracle's budget). float64 kernels were not
measured: their entries count the same ULPs of float64. The entries sit in their primitives'
records (``lax_rules/elementwise.py`` and ``lax_rules/special.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import ml_dtypes
import numpy as np

from xlaprobe.lax_rules import registry
from xlaprobe.lax_rules.budget import SAMPLED, Approximation

__all__ = ["BUDGETS", "DEFAULT", "SAMPLED", "Approximation", "allowed_error", "budget"]


#: An approximate primitive without an entry (exp, log, sin, ...): 2 ULPs, the width the reference's
#: Monte Carlo arithmetic samples uniformly for them (`reference.APPROXIMATION_ULPS`).
DEFAULT = Approximation("default", ulps=2.0)


#: primitive name -> its budget (jax 0.12, XLA:CPU, float32; float16 and bfloat16 are computed in
#: float32 and rounded, float64 kernels are more accurate in the same units). Each is about 1.5x
#: the worst measured (``measured``; 20000 samples per region, ``xla`` and ``xla:O0`` alike);
#: the oracle allows one to two of it (`SAMPLED`), so XLA's worst answer uses at most 2/3 of the
#: allowance, and one 10x worse than XLA's worst (6.7 allowances) lands beyond its ceiling
#: wherever the dtype's own relative bound (`oracle.DEFAULT_BOUNDS`, 84 float32 ULPs) is not the
#: larger: near zeros and poles, in erfc's tail, for igamma and betainc.
BUDGETS: dict[str, Approximation] = {a.name: a for a in registry.budgets()}


def budget(name: str) -> Approximation:
    """The budget of primitive `name` (`DEFAULT` when the table has none).

    >>> budget("digamma").abs_eps, budget("exp") is DEFAULT
    (16.0, True)
    """
    return BUDGETS.get(name, DEFAULT)


def allowed_error(name: str, args: Sequence[np.ndarray], result: np.ndarray, dtype,
                  fn: Callable[..., np.ndarray] | None = None) -> np.ndarray:
    """Per element, the error an honest XLA kernel of `name` may make (absolute, float64).

    ``(ulps + term_ulps * terms(args)) * eps * |result| + abs_eps * eps
    + max_i |fn(args with args[i] * (1 +- arg_ulps * eps)) - result|`` with ``eps`` the machine
    epsilon of `dtype`; an argument change that crosses a pole (a non-finite result) counts as
    none.

    Args:
        name: the primitive name.
        args: its operands as float64 arrays (broadcastable to `result`); non-float operands
            (integers) are never moved.
        result: the true (float64) result, shape S.
        dtype: the result's dtype in the program (float32, float16, bfloat16, float64).
        fn: the float64 function of `args` (the reference's rule); needed only when the entry
            has an argument part (without it that part is left out).

    Returns:
        float64 array of shape S, >= 0 (0 where `result` is not finite).
    """
    entry = budget(name)
    eps = float(ml_dtypes.finfo(np.dtype(dtype)).eps)
    y = np.asarray(result, np.float64)
    with np.errstate(all="ignore"):
        finite = np.isfinite(y)
        relative = entry.ulps
        if entry.terms is not None:
            terms = np.asarray(entry.terms([np.asarray(a, np.float64) for a in args]))
            relative = relative + entry.term_ulps * np.where(np.isfinite(terms), terms, 0.0)
        width = relative * eps * np.where(finite, np.abs(y), 0.0) + entry.abs_eps * eps
        if entry.arg_ulps and fn is not None:
            moved_most = np.zeros(y.shape)
            for i, arg in enumerate(args):
                arg = np.asarray(arg)
                if arg.dtype.kind != "f":
                    continue
                for sign in (1.0, -1.0):
                    moved = list(args)
                    moved[i] = arg * (1.0 + sign * entry.arg_ulps * eps)
                    change = np.abs(np.asarray(fn(*moved), np.float64) - y)
                    moved_most = np.maximum(moved_most, np.where(np.isfinite(change), change, 0))
            width = width + moved_most
    return np.where(finite, np.broadcast_to(width, y.shape), 0.0)
