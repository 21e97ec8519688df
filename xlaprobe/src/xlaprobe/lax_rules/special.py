"""xlaprobe's special-function primitives, one record each (`xlaprobe.lax_rules.record.PrimitiveDef`):
the incomplete gamma and beta functions, ``igamma_grad_a``, the exponentially scaled Bessel
functions, ``polygamma`` and ``zeta``, each with its facts (elementwise; XLA evaluates it by
series, continued fractions or polynomials, so it is approximate), its float64 reference rule
(``scipy.special``, Cephes, with XLA's answers outside the domain: NaN where jax's own definition
gives NaN) and its error budget where one was measured. The fuzzer does not generate them.

Sources: ``jax/_src/lax/special.py`` and XLA's ``client/lib/math.cc`` for the values outside the
domains; the budgets' figures: ``benchmarks/special_ulps.py`` (see `xlaprobe.approximations`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.special

from xlaprobe.lax_rules.budget import Approximation
from xlaprobe.lax_rules.facts import PrimitiveFacts
from xlaprobe.lax_rules.numeric import Rule, RuleContext
from xlaprobe.lax_rules.record import PrimitiveDef

__all__ = ["DEFINITIONS"]


# ---------------------------------------------------------------------------------------------
# reference rules (float64, scipy.special)


def _igamma_domain_error(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Where jax's definition of igamma and igammac gives NaN."""
    return ((x < 0) | (a < 0) | ((a == 0) & (x == 0)) | (np.isinf(a) & np.isinf(x))
            | np.isnan(a) | np.isnan(x))


def _igamma(ctx: RuleContext, a: np.ndarray, x: np.ndarray, **_: Any) -> np.ndarray:
    """Regularized lower incomplete gamma P(a, x), with jax's values at the edges: 0 for
    a = inf or x = 0, 1 for x = inf, and at a = 0 (where P is 1 in the limit) NaN for x < 1 and
    1 for x >= 1, as jax's series and continued fraction give there."""
    a, x = np.broadcast_arrays(a, x)
    out = scipy.special.gammainc(a, x)
    out = np.where(a == 0, np.where(x >= 1, 1.0, np.nan), out)
    out = np.where(np.isposinf(a), 0.0, out)
    out = np.where(x == 0, 0.0, np.where(np.isposinf(x), 1.0, out))
    return np.where(_igamma_domain_error(a, x), np.nan, out)


def _igammac(ctx: RuleContext, a: np.ndarray, x: np.ndarray, **_: Any) -> np.ndarray:
    """Regularized upper incomplete gamma Q(a, x) = 1 - P(a, x): 1 for a = inf, 0 for x = inf
    or a = 0, NaN where jax's definition gives NaN."""
    a, x = np.broadcast_arrays(a, x)
    out = scipy.special.gammaincc(a, x)
    out = np.where(np.isposinf(a), 1.0, out)
    out = np.where(np.isposinf(x) | (a == 0), 0.0, out)
    return np.where(_igamma_domain_error(a, x), np.nan, out)


def _igamma_grad_a(ctx: RuleContext, a: np.ndarray, x: np.ndarray, **_: Any) -> np.ndarray:
    """dP(a, x)/da by a five-point central difference in a, Richardson-extrapolated (SciPy has
    no closed form), of P where P < 1/2 and of -Q = P - 1 elsewhere, so that the differenced
    values are small and relatively accurate in both tails; the step h = 1e-3 a keeps
    truncation (h^4) and cancellation (eps / h) near 1e-12 relative. 0 at x = 0; NaN for x < 0,
    a <= 0, infinite or NaN operands (jax's definition)."""
    a, x = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(x, np.float64))
    lower = scipy.special.gammainc(a, x) < 0.5

    def central(h: np.ndarray) -> np.ndarray:
        def f(t: np.ndarray) -> np.ndarray:
            return np.where(lower, scipy.special.gammainc(a + t, x),
                            -scipy.special.gammaincc(a + t, x))
        return (8 * (f(h) - f(-h)) - (f(2 * h) - f(-2 * h))) / (12 * h)
    h = 1e-3 * np.where(np.isfinite(a) & (a > 0), a, 1.0)
    coarse, fine = central(2 * h), central(h)
    out = fine + (fine - coarse) / 15  # the h^4 terms cancel
    out = np.where(~np.isfinite(a) | ~np.isfinite(x), np.nan, out)
    out = np.where(x == 0, 0.0, out)
    return np.where((x < 0) | (a <= 0) | np.isnan(a) | np.isnan(x), np.nan, out)


def _regularized_incomplete_beta(ctx: RuleContext, a: np.ndarray, b: np.ndarray, x: np.ndarray,
                                 **_: Any) -> np.ndarray:
    """I_x(a, b), with jax's limits: a = 0 (or b = inf) gives 0 at x = 0 and 1 elsewhere;
    b = 0 (or a = inf) gives 1 at x = 1 and 0 elsewhere; NaN for negative a or b, x outside
    [0, 1], both limits at once, or a NaN operand."""
    a, b, x = np.broadcast_arrays(a, b, x)
    out = scipy.special.betainc(a, b, x)
    a_zero = (a == 0) | np.isposinf(b)
    b_zero = (b == 0) | np.isposinf(a)
    out = np.where((b_zero & (x != 1)) | (a_zero & (x == 0)), 0.0, out)
    out = np.where((a_zero & (x != 0)) | (b_zero & (x == 1)), 1.0, out)
    nan = ((a < 0) | (b < 0) | (x < 0) | (x > 1) | (a_zero & b_zero)
           | np.isnan(a) | np.isnan(b) | np.isnan(x))
    return np.where(nan, np.nan, out)


def _polygamma(ctx: RuleContext, n: np.ndarray, x: np.ndarray, **_: Any) -> np.ndarray:
    """psi^(n)(x) for integer n >= 0 (NaN for other n); digamma's -inf at zero of either sign
    and, as jax's zeta-based definition gives, NaN at x = inf for n >= 1."""
    n, x = np.broadcast_arrays(n, x)
    integral = (n == np.floor(n)) & (n >= 0)
    safe_n = np.where(integral, n, 0).astype(np.int64)
    out = scipy.special.polygamma(safe_n, x)
    out = np.where((safe_n == 0) & (x == 0), -np.inf, out)
    out = np.where((safe_n >= 1) & np.isposinf(x), np.nan, out)
    return np.where(integral, out, np.nan)


def _zeta(ctx: RuleContext, s: np.ndarray, q: np.ndarray, **_: Any) -> np.ndarray:
    """Hurwitz zeta(s, q) = sum over k >= 0 of (k + q)^-s, with XLA's Zeta at the edges: inf at
    s = 1 (for every q), NaN for s < 1, for q <= 0 with s not an integer, and for infinite s or q; at the poles
    (q a non-positive integer) inf for even integer s, else NaN."""
    s, q = np.broadcast_arrays(s, q)
    out = scipy.special.zeta(s, q)
    s_integral = s == np.floor(s)
    out = np.where((s < 1) | ((q <= 0) & ~s_integral), np.nan, out)
    pole = (q <= 0) & (q == np.floor(q))
    even = s_integral & (np.fmod(s, 2) == 0)
    out = np.where(pole, np.where(even, np.inf, np.nan), out)
    out = np.where(np.isposinf(s) | np.isposinf(q) | np.isnan(s) | np.isnan(q), np.nan, out)
    return np.where(s == 1, np.inf, out)  # the harmonic series, whatever q is


# ---------------------------------------------------------------------------------------------
# budgets: exponent terms of the kernels that sum an exponent before one exp


def _gamma_terms(args: Sequence[np.ndarray]) -> np.ndarray:
    """|a log x| + |x| + |lgamma(a)|: the exponent XLA's igamma sums before one exp."""
    a, x = (np.asarray(v, np.float64) for v in args[:2])
    return np.abs(a * np.log(np.maximum(x, 1e-300))) + np.abs(x) + np.abs(scipy.special.gammaln(a))


def _beta_terms(args: Sequence[np.ndarray]) -> np.ndarray:
    """|a log x| + |b log(1 - x)| + |log B(a, b)|: the exponent of betainc's prefactor."""
    a, b, x = (np.asarray(v, np.float64) for v in args[:3])
    return (np.abs(a * np.log(np.maximum(x, 1e-300))) +
            np.abs(b * np.log1p(-np.minimum(x, 1.0 - 1e-16))) +
            np.abs(scipy.special.betaln(a, b)))


# ---------------------------------------------------------------------------------------------
# the records


def _special(name: str, reference: Rule, **budget: Any) -> PrimitiveDef:
    """A special function: rounds, XLA approximates it; `budget` holds its `Approximation`
    fields where one was measured (else the default 2 ULPs)."""
    facts = PrimitiveFacts(name, rounding=True, approximate=True, elementwise=True)
    return PrimitiveDef(facts, reference, None, Approximation(name, **budget) if budget else None)


#: Every special-function primitive's record.
DEFINITIONS: tuple[PrimitiveDef, ...] = (
    _special("igamma", _igamma, ulps=12.0, abs_eps=2.0, terms=_gamma_terms, term_ulps=1.0,
             measured=("relative error <= 0.56 eps per unit of |a log x| + x + |lgamma(a)| for "
                       "a from 5 to 5000 with x near a (308 ULPs at a = 50); 11 ULPs for a < 0.5")),
    _special("igammac", _igammac, ulps=16.0, abs_eps=2.0, terms=_gamma_terms, term_ulps=1.0,
             measured="as igamma (291 ULPs at a = 50, x near a)"),
    _special("igamma_grad_a", _igamma_grad_a),
    _special("regularized_incomplete_beta", _regularized_incomplete_beta, ulps=8.0, abs_eps=12.0,
             terms=_beta_terms, term_ulps=4.0,
             measured="92 ULPs, absolute up to 22 eps (a, b in [0.5, 10]; worst for b < 1)"),
    _special("bessel_i0e", lambda ctx, x, **_: scipy.special.i0e(x), ulps=8.0,
             measured="5.3 ULPs"),
    _special("bessel_i1e", lambda ctx, x, **_: scipy.special.i1e(x), ulps=14.0,
             measured="9.1 ULPs"),
    _special("polygamma", _polygamma),
    _special("zeta", _zeta),
)
