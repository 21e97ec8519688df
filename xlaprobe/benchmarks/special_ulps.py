"""Measure XLA:CPU's float32 error of its approximate primitives against SciPy float64, region
by region (ordinary arguments, near zeros and poles, tails), under ``xla`` and ``xla:O0``.

For each primitive and region it prints the largest error in float32 ULPs of the true result,
and the same error in units of the budget the oracle allows (`xlaprobe.approximations`): below 1
means an honest XLA answer of that size raises no alarm; a regression that makes an
approximation 10x worse lands far above 1. Run it after a jax upgrade and update the table in
``approximations.py`` (with margin) from what it prints.

    python benchmarks/special_ulps.py [--n 20000] [--only lgamma,digamma]

Truth: ``scipy.special`` and NumPy in float64 (relative error ~1e-15, far below a float32 ULP,
including near the zeros of lgamma and digamma where SciPy's Cephes kernels expand around them).
"""

from __future__ import annotations

import argparse
import math
import time

import jax
import numpy as np
import scipy.special as sc
from jax import lax

from xlaprobe.approximations import BUDGETS, allowed_error

F32 = np.float32
EPS = float(np.finfo(F32).eps)


def _uniform(lo: float, hi: float):
    return lambda rng, n: rng.uniform(lo, hi, n)


def _log_uniform(lo: float, hi: float, sign: float = 1.0):
    return lambda rng, n: sign * np.exp(rng.uniform(math.log(lo), math.log(hi), n))


def _around(points: list[float], width: float):
    return lambda rng, n: rng.choice(points, n) + rng.uniform(-width, width, n)


def _integers(lo: int, hi: int):
    return lambda rng, n: rng.integers(lo, hi, n).astype(np.float64)


def _neg_away_from_poles(lo: float):
    def sample(rng, n):
        x = rng.uniform(lo, 0, n)
        return np.where(np.abs(x - np.round(x)) < 1e-3, x + 0.01, x)
    return sample


# lgamma's zeros on the negative axis, digamma's on both (from SciPy, float64).
_LGAMMA_NEG_ZEROS = [-2.457024738220800, -2.747682646727412, -3.143580888349980,
                     -3.955294284858597, -4.039361839740537]
_DIGAMMA_ZEROS = [1.461632144968362, -0.504083008264455, -1.573498473162390, -2.610720868444145]

#: primitive -> (jax function of float32 operands, SciPy float64 truth, arity, regions)
CASES: dict[str, tuple] = {
    "lgamma": (lax.lgamma, sc.gammaln, 1, {
        "(0, 1e-3)": _log_uniform(1e-30, 1e-3),
        "[1e-3, 0.5]": _uniform(1e-3, 0.5),
        "near 1": _around([1.0], 0.1),
        "near 2": _around([2.0], 0.1),
        "[0.5, 10]": _uniform(0.5, 10),
        "integers 1..40": _integers(1, 41),
        "[10, 1e30]": _log_uniform(10, 1e30),
        "(-10, 0) off poles": _neg_away_from_poles(-10),
        "near poles -1..-6": _around([-1.0, -2.0, -3.0, -6.0], 1e-3),
        "near negative zeros": _around(_LGAMMA_NEG_ZEROS, 1e-3),
    }),
    "digamma": (lax.digamma, sc.psi, 1, {
        "(0, 1e-3)": _log_uniform(1e-20, 1e-3),
        "[1e-3, 10]": _uniform(1e-3, 10),
        "near 1.4616 (zero)": _around(_DIGAMMA_ZEROS[:1], 1e-2),
        "[10, 1e8]": _log_uniform(10, 1e8),
        "(-10, 0) off poles": _neg_away_from_poles(-10),
        "near negative zeros": _around(_DIGAMMA_ZEROS[1:], 1e-3),
        "near poles -1..-6": _around([-1.0, -2.0, -3.0, -6.0], 1e-3),
    }),
    "erf": (lax.erf, sc.erf, 1, {
        "|x| < 1e-3": _uniform(-1e-3, 1e-3), "[-4, 4]": _uniform(-4, 4)}),
    "erfc": (lax.erfc, sc.erfc, 1, {
        "[-1, 1]": _uniform(-1, 1), "[1, 4]": _uniform(1, 4), "[4, 10] (tail)": _uniform(4, 10),
        "[-10, -1]": _uniform(-10, -1)}),
    "erf_inv": (lax.erf_inv, sc.erfinv, 1, {
        "|x| < 1e-3": _uniform(-1e-3, 1e-3), "(-0.9, 0.9)": _uniform(-0.9, 0.9),
        "0.9 < |x| < 1": lambda rng, n: rng.choice([-1, 1], n) * rng.uniform(0.9, 1.0, n),
        "1 - |x| < 1e-4": lambda rng, n: rng.choice([-1, 1], n) * (
            1 - np.exp(rng.uniform(math.log(6e-8), math.log(1e-4), n)))}),
    "igamma": (lax.igamma, sc.gammainc, 2, {
        "a, x in (0, 20]": lambda rng, n: (rng.uniform(0.1, 20, n), rng.uniform(0, 30, n)),
        "small a": lambda rng, n: (rng.uniform(1e-3, 0.5, n), rng.uniform(0, 5, n)),
        "x near a": lambda rng, n: (lambda a: (a, a * rng.uniform(0.9, 1.1, n)))(
            rng.uniform(1, 50, n))}),
    "igammac": (lax.igammac, sc.gammaincc, 2, {
        "a, x in (0, 20]": lambda rng, n: (rng.uniform(0.1, 20, n), rng.uniform(0, 30, n)),
        "x near a": lambda rng, n: (lambda a: (a, a * rng.uniform(0.9, 1.1, n)))(
            rng.uniform(1, 50, n))}),
    "regularized_incomplete_beta": (lax.betainc, sc.betainc, 3, {
        "a, b in [0.5, 10], x in [0, 1]": lambda rng, n: (
            rng.uniform(0.5, 10, n), rng.uniform(0.5, 10, n), rng.uniform(0, 1, n))}),
    "bessel_i0e": (lax.bessel_i0e, sc.i0e, 1, {
        "|x| < 1": _uniform(-1, 1), "[-50, 50]": _uniform(-50, 50)}),
    "bessel_i1e": (lax.bessel_i1e, sc.i1e, 1, {
        "|x| < 1e-3": _uniform(-1e-3, 1e-3), "[-50, 50]": _uniform(-50, 50)}),
    "exp": (lax.exp, np.exp, 1, {"[-80, 80]": _uniform(-80, 80)}),
    "expm1": (lax.expm1, np.expm1, 1, {"|x| < 1e-3": _uniform(-1e-3, 1e-3),
                                       "[-20, 20]": _uniform(-20, 20)}),
    "log": (lax.log, np.log, 1, {"near 1": _around([1.0], 1e-3),
                                 "(1e-30, 1e30)": _log_uniform(1e-30, 1e30)}),
    "log1p": (lax.log1p, np.log1p, 1, {"(-1, 10)": _uniform(-0.999, 10)}),
    "tanh": (lax.tanh, np.tanh, 1, {"|x| < 1e-3": _uniform(-1e-3, 1e-3),
                                    "[-10, 10]": _uniform(-10, 10)}),
    "logistic": (lax.logistic, sc.expit, 1, {"[-80, 80]": _uniform(-80, 80)}),
    "sin": (lax.sin, np.sin, 1, {"[-100, 100]": _uniform(-100, 100)}),
    "cos": (lax.cos, np.cos, 1, {"[-100, 100]": _uniform(-100, 100),
                                 "near pi/2 zeros": _around([math.pi / 2, 3 * math.pi / 2], 1e-3)}),
    "tan": (lax.tan, np.tan, 1, {"[-1.5, 1.5]": _uniform(-1.5, 1.5)}),
    "atan": (lax.atan, np.arctan, 1, {"[-100, 100]": _uniform(-100, 100)}),
    "asin": (lax.asin, np.arcsin, 1, {"[-1, 1]": _uniform(-1, 1)}),
    "acos": (lax.acos, np.arccos, 1, {"[-1, 1]": _uniform(-1, 1)}),
    "sinh": (lax.sinh, np.sinh, 1, {"[-80, 80]": _uniform(-80, 80)}),
    "cosh": (lax.cosh, np.cosh, 1, {"[-80, 80]": _uniform(-80, 80)}),
    "asinh": (lax.asinh, np.arcsinh, 1, {"[-1e3, 1e3]": _uniform(-1e3, 1e3)}),
    "acosh": (lax.acosh, np.arccosh, 1, {"[1, 1e3]": _uniform(1, 1e3)}),
    "atanh": (lax.atanh, np.arctanh, 1, {"(-1, 1)": _uniform(-0.999, 0.999)}),
    "cbrt": (lax.cbrt, np.cbrt, 1, {"[-1e3, 1e3]": _uniform(-1e3, 1e3)}),
    "rsqrt": (lax.rsqrt, lambda x: 1 / np.sqrt(x), 1, {"(1e-30, 1e30)": _log_uniform(1e-30, 1e30)}),
    "pow": (lax.pow, np.power, 2, {"x in (0, 10], y in [-5, 5]": lambda rng, n: (
        rng.uniform(1e-3, 10, n), rng.uniform(-5, 5, n))}),
}


def _compiled(fn, arity: int, opt_level: int | None):
    """`fn` compiled by XLA for float32 operands (``xla``, or ``xla:O0`` with `opt_level` 0)."""
    options = {} if opt_level is None else {"xla_backend_optimization_level": opt_level}

    def run(*xs):
        assert len(xs) == arity
        return np.asarray(jax.jit(fn).lower(*xs).compile(options)(*xs))
    return run


def measure(name: str, n: int, seed: int = 0) -> list[dict]:
    """Rows of the table for one primitive: per region and configuration, the largest error in
    ULPs and in units of the oracle's allowance (see `xlaprobe.approximations.allowed_error`)."""
    fn, truth, arity, regions = CASES[name]
    rows = []
    for region, sample in regions.items():
        rng = np.random.default_rng(seed)
        drawn = sample(rng, n)
        args = [np.asarray(a, F32) for a in (drawn if arity > 1 else (drawn,))]
        with np.errstate(all="ignore"):
            ref = truth(*[a.astype(np.float64) for a in args])
        # Results below the smallest normal float32 may come out flushed to zero: the oracle
        # labels that ftz, not an approximation error.
        finite = np.isfinite(ref) & (np.abs(ref) >= np.finfo(F32).tiny)
        for config, level in (("xla", None), ("xla:O0", 0)):
            out = _compiled(fn, arity, level)(*args).astype(np.float64)
            ok = finite & np.isfinite(out)
            with np.errstate(invalid="ignore"):
                err = np.abs(out - ref)
            ulp = np.spacing(np.abs(ref).astype(F32)).astype(np.float64)
            ulps = np.where(ok, err / ulp, 0.0)
            allowed = allowed_error(name, [a.astype(np.float64) for a in args], ref, F32, truth)
            share = np.where(ok, err / np.maximum(allowed, 1e-300), 0.0)
            worst = int(np.argmax(share))
            rows.append(dict(primitive=name, region=region, config=config,
                             max_ulps=float(ulps.max()),
                             p99_ulps=float(np.percentile(ulps[ok], 99)) if ok.any() else 0.0,
                             max_abs=float(np.where(ok, err, 0).max()),
                             max_share=float(share.max()),
                             at=tuple(float(a[worst]) for a in args),
                             nonfinite=int((finite & ~np.isfinite(out)).sum())))
    return rows


def main() -> None:
    """Print the table (one row per primitive, region and configuration)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000, help="samples per region")
    parser.add_argument("--only", default="", help="comma-separated primitives")
    options = parser.parse_args()
    names = [s for s in options.only.split(",") if s] or list(CASES)
    start = time.perf_counter()
    print(f"{'primitive':28} {'region':30} {'config':7} {'max ULP':>10} {'p99 ULP':>9} "
          f"{'max abs':>9} {'err/allowed':>11}  worst at")
    for name in names:
        budget = BUDGETS.get(name)
        for row in measure(name, options.n):
            flag = "  NONFINITE x%d" % row["nonfinite"] if row["nonfinite"] else ""
            print(f"{row['primitive']:28} {row['region']:30} {row['config']:7} "
                  f"{row['max_ulps']:10.3g} {row['p99_ulps']:9.3g} {row['max_abs']:9.2e} "
                  f"{row['max_share']:11.3g}  {', '.join(f'{a:.9g}' for a in row['at'])}{flag}")
        if budget is None:
            print(f"{name:28} (no entry in approximations.BUDGETS: default budget)")
    print(f"# {time.perf_counter() - start:.0f} s, n={options.n} per region, float32, "
          f"jax {jax.__version__}")


if __name__ == "__main__":
    main()
