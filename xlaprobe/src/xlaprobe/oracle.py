"""The oracle: per-output verdicts from a configuration's outputs, the float64 reference and an
error budget that does not come from XLA.

Rules (see DESIGN.md, "Oracle: no false alarms, no missed bugs"):

- Integers and booleans compare exactly, except that an element equal to an honest run's (below)
  is honest: a float rounded to its own dtype before a conversion to integer or a comparison
  lands otherwise than float64 (an f16 sum of 30464 and 7 is 30464, not 30471). A complex element is judged by the modulus of its error
  against the modulus of the reference, in the bounds of its component dtype.
- A floating element fails only if its error exceeds the absolute AND the relative bound of its
  dtype, each widened by the *error budget*; narrow floats (float16, bfloat16) must also be more
  than `max_ulps` ULPs away.
- The budget is how far an honest computation in the program's own dtypes lands from float64: the
  reference interpreter run with every equation rounded to its dtype (``reference:native``). It is
  independent of XLA, so a fault every XLA configuration shares (one that also shows op by op) is
  still caught, while ill-conditioned programs (cancellation, sign flips near thresholds) raise no
  alarm. The honest runs are ``reference:native`` (round to nearest) and Monte Carlo arithmetic
  samples (see `xlaprobe.configs.reference`); the honest error of an element is their largest
  distance from float64. Per element the budget is ``C`` times that, plus the largest honest error
  among elements of no larger magnitude, since honest errors land on different elements in
  different runs; in a leaf where the honest run is off by more than ``ILL_CONDITIONED_EPS``
  machine epsilons of the leaf's scale, every element gets ``C`` times the leaf's largest honest
  error.
- An element that cancellation made small (an honest run off by more than `CANCELLATION_EPS`
  ULPs of its own magnitude) may also be off by `NEAR_ZERO_EPS` machine epsilons of the leaf's
  largest magnitude, at most `NEAR_ZERO_FACTOR` times its own honest error: XLA's rounding of
  the terms that cancelled is not the honest run's (`_near_zero_allowance`).
- Approximate primitives (lgamma, digamma, erf_inv, igamma, ...) enter the honest runs with the
  error budget measured for XLA's kernels (`xlaprobe.approximations`), so near their zeros and
  poles an accurate-enough answer is ok.
- A zero where the reference is subnormal in the output dtype is flushing to zero, a freedom of
  XLA:CPU: labelled ``ftz``, not a mismatch. NaN where the reference is finite is a finding, unless
  the honest run gives NaN there too; likewise for infinities. Where an honest run overflows
  (non-finite where float64 is finite), any non-finite output is honest: which one comes out
  depends on the order of operations.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Iterable, Sequence
from typing import Any

import ml_dtypes
import numpy as np

from xlaprobe.outcome import Outcome, OutcomeKind
from xlaprobe.program import Tolerance


class VerdictKind(enum.Enum):
    """Judgement of one output leaf of one configuration."""

    OK = "ok"
    FTZ = "ftz"                       # differs only by flushing subnormal results to zero: allowed
    FREEDOM = "freedom"               # XLA took a known freedom (`Verdict.freedom` names it):
    #                                   a labelled finding unless accepted (`xlaprobe.freedoms`)
    MISMATCH = "mismatch"
    NAN_MISMATCH = "nan-mismatch"
    INF_MISMATCH = "inf-mismatch"
    CRASH = "crash"
    TIMEOUT = "timeout"
    COMPILE_ERROR = "compile-error"
    UNSUPPORTED = "unsupported"       # the configuration cannot run the program (an old release)
    TOOL_ERROR = "tool-error"         # xlaprobe's interpreter could not run it: check incomplete

    @property
    def is_finding(self) -> bool:
        """True for every kind a user must look at as a compiler fault (not ok, not ftz, not
        unsupported, not a tool error of xlaprobe's own)."""
        return self not in (VerdictKind.OK, VerdictKind.FTZ, VerdictKind.UNSUPPORTED,
                            VerdictKind.TOOL_ERROR)

    @property
    def is_numeric(self) -> bool:
        """True for the kinds where the configuration ran and computed wrong numbers."""
        return self in (VerdictKind.MISMATCH, VerdictKind.NAN_MISMATCH, VerdictKind.INF_MISMATCH)

    @property
    def family(self) -> str:
        """The failure class "the same failure" compares: ``"numeric"`` for the three mismatch
        kinds (one wrong kernel gives NaN on one input and finite garbage on another), else the
        kind's own value.

        >>> VerdictKind.NAN_MISMATCH.family, VerdictKind.CRASH.family
        ('numeric', 'crash')
        """
        return "numeric" if self.is_numeric else self.value


#: Verdict kinds from most to least severe: a configuration's verdict is the first of its leaves'
#: kinds in this order (`summary_kind`).
SEVERITY: tuple[VerdictKind, ...] = (
    VerdictKind.CRASH, VerdictKind.TIMEOUT, VerdictKind.COMPILE_ERROR, VerdictKind.NAN_MISMATCH,
    VerdictKind.INF_MISMATCH, VerdictKind.MISMATCH, VerdictKind.FREEDOM, VerdictKind.TOOL_ERROR,
    VerdictKind.UNSUPPORTED,
    VerdictKind.FTZ, VerdictKind.OK)


def summary_kind(kinds: Iterable[VerdictKind | str]) -> VerdictKind:
    """The most severe of `kinds` (`SEVERITY` order): one configuration's verdict over its leaves.

    Args:
        kinds: verdict kinds, as enums or their values; empty gives OK.

    Raises:
        ValueError: a string that is no verdict kind.

    >>> summary_kind(["ok", "ftz", "mismatch"]).value
    'mismatch'
    >>> summary_kind([]).value
    'ok'
    """
    present = {VerdictKind(k) for k in kinds}
    return next((k for k in SEVERITY if k in present), VerdictKind.OK)


#: Default bounds per dtype name: (atol, rtol, max_ulps); max_ulps applies to narrow floats only.
#: rtol is about 80 ULPs (float32), 10 (float16), 2.5 (bfloat16). atol is the smallest normal
#: number: cancellation and other ill-conditioning are covered by the honest-run budget, not by a
#: fixed absolute slack, which would hide wrong results of small magnitude (a cbrt of subnormals
#: that returns garbage around 1e-16 instead of 1e-13 is still 100% wrong).
DEFAULT_BOUNDS: dict[str, tuple[float, float, int]] = {
    "float64": (float(np.finfo(np.float64).tiny), 1e-9, 0),
    "float32": (float(np.finfo(np.float32).tiny), 1e-5, 0),
    "float16": (float(np.finfo(np.float16).tiny), 1e-2, 2),
    "bfloat16": (float(ml_dtypes.finfo(ml_dtypes.bfloat16).tiny), 2e-2, 2),
}
#: Multiplier on the honest (native-dtype) error at each element.
BUDGET_FACTOR = 4.0
#: A leaf is ill-conditioned when its largest honest error exceeds this many machine epsilons of
#: its dtype, relative to its largest reference magnitude.
ILL_CONDITIONED_EPS = 1000.0

#: An element whose honest error exceeds this many ULPs (machine epsilons of its own magnitude)
#: is the remainder of a cancellation (`_near_zero_allowance`).
CANCELLATION_EPS = 8.0
#: The absolute allowance of such an element, in machine epsilons of the leaf's largest
#: magnitude: XLA's own float32 rounding next to zero measured 0.35 and 0.19 of one (issue 20).
NEAR_ZERO_EPS = 2.0
#: ... and at most this many times the element's own largest honest error.
NEAR_ZERO_FACTOR = 64.0

#: The verdict of an outcome that produced no outputs.
OUTCOME_VERDICT = {
    OutcomeKind.CRASH: VerdictKind.CRASH,
    OutcomeKind.TIMEOUT: VerdictKind.TIMEOUT,
    OutcomeKind.COMPILE_ERROR: VerdictKind.COMPILE_ERROR,
    OutcomeKind.UNSUPPORTED: VerdictKind.UNSUPPORTED,
    OutcomeKind.TOOL_ERROR: VerdictKind.TOOL_ERROR,
}


@dataclasses.dataclass(frozen=True, slots=True)
class Verdict:
    """The verdict on one output leaf of one configuration.

    Attributes:
        config: configuration spec, e.g. ``"xla:fastmath"``.
        output: output leaf name, e.g. ``"[0]"`` or ``"['loss']"``.
        index: position of the leaf among the flat outputs.
        kind: the verdict.
        max_abs: largest absolute error (units of the value); 0 where not applicable.
        max_rel: largest relative error ``|out - ref| / |ref|`` over elements whose ``|ref|``
            exceeds atol and their error budget (elsewhere relative error means nothing).
        max_ulp: largest distance in ULPs of the output's dtype in the program over the same
            elements; NaN for integer and bool outputs (ULPs mean nothing there).
        frac_over: share of elements that fail (0..1).
        worst: flat index of the worst failing element, or -1.
        expected: reference value at `worst` (NaN where not applicable).
        actual: configuration's value at `worst` (NaN where not applicable).
        detail: error text for crash/timeout/compile-error, or a note (e.g. a shape difference).
        allowed_abs: the absolute error the oracle allowed (units of the value) at the element
            that used the largest share of its allowance: ``max(atol, rtol * |ref|)`` plus the
            element's error budget; 0 for integers and bools (exact); NaN where nothing was
            compared.
        allowed_rel: the relative error allowed at the element of `max_rel` (the allowance over
            ``|ref|`` there), NaN where no element has a meaningful relative error.
        margin: the largest share of its allowance an element used (error / allowed; for
            float16 and bfloat16 the smaller of that and ULPs / allowed ULPs): above 1 fails
            unless flushing explains it; inf for a wrong NaN, infinity or integer; NaN where
            nothing was compared.
        freedom: the freedoms XLA took on this leaf, ``+``-joined labels (``"fma"``,
            ``"excess-range"``, ``"ftz"``; `xlaprobe.freedoms`), with kind FREEDOM, or with
            kind OK when they were accepted; ``""`` when none.
        against: for a labelled leaf, the run its error statistics are measured against: the
            freedom's evidence (``"reference:fma"``, ``"reference:ftz"``; ``"reference"``,
            float64, for excess range; the float64 figures are then in `detail`); ``""``
            (float64, the reference) for every other leaf.
    """

    config: str
    output: str
    index: int
    kind: VerdictKind
    max_abs: float = 0.0
    max_rel: float = 0.0
    max_ulp: float = 0.0
    frac_over: float = 0.0
    worst: int = -1
    expected: float = math.nan
    actual: float = math.nan
    detail: str = ""
    allowed_abs: float = math.nan
    allowed_rel: float = math.nan
    margin: float = math.nan
    freedom: str = ""
    against: str = ""

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (NaN written as null)."""
        data = dataclasses.asdict(self)
        data["kind"] = self.kind.value
        for key, value in data.items():
            if isinstance(value, float) and not math.isfinite(value):
                data[key] = None if math.isnan(value) else str(value)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Verdict:
        """Inverse of `to_json` (verdicts stored before `allowed_abs`, `allowed_rel` and `margin`
        existed read them as NaN; keys of a newer xlaprobe's verdicts are ignored)."""
        fields = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in fields}
        values["kind"] = VerdictKind(values["kind"])
        for key in ("max_abs", "max_rel", "max_ulp", "frac_over", "expected", "actual",
                    "allowed_abs", "allowed_rel", "margin"):
            value = values.get(key)
            values[key] = math.nan if value is None else float(value)
        return cls(**values)


def _bits_dtype(dtype: np.dtype) -> tuple[type, int]:
    size = np.dtype(dtype).itemsize
    return {2: (np.int16, 16), 4: (np.int32, 32), 8: (np.int64, 64)}[size]


def ulp_distance(a: np.ndarray, b: np.ndarray, dtype: Any) -> np.ndarray:
    """Number of representable values of `dtype` between `a` and `b`, elementwise.

    Both are rounded to `dtype` first; +0 and -0 are 0 ULPs apart; NaN gives a huge distance.

    Args:
        a, b: arrays of the same shape, any float dtype.
        dtype: a float dtype (float64, float32, float16, bfloat16).

    Returns:
        float64 array of the broadcast shape, in ULPs of `dtype`.

    >>> int(ulp_distance(np.float32(1.0), np.nextafter(np.float32(1.0), np.float32(2)), np.float32))
    1
    >>> int(ulp_distance(np.float32(-0.0), np.float32(1e-45), np.float32))
    1
    """
    distance = np.abs(_ordered(a, dtype) - _ordered(b, dtype))
    nan = np.isnan(np.asarray(a, np.float64)) | np.isnan(np.asarray(b, np.float64))
    return np.where(nan, np.inf, distance)


def _ordered(x: np.ndarray, dtype: Any) -> np.ndarray:
    """`x` rounded to `dtype`, as its position on the line of `dtype`'s values (float64: exact
    for 32- and 16-bit types), so that ULP distances are differences."""
    dtype = np.dtype(dtype)
    int_type, bits = _bits_dtype(dtype)
    i = np.asarray(np.asarray(x).astype(dtype, copy=False)).view(int_type).astype(np.int64)
    if bits == 64:  # avoid overflow of the sign flip in int64: use object-free float mapping
        return np.where(i < 0, -(i & 0x7FFFFFFFFFFFFFFF), i).astype(np.float64)
    sign_mask = 1 << (bits - 1)
    return np.where(i < 0, -(i & (sign_mask - 1)), i).astype(np.float64)


def bounds(dtype: np.dtype, tolerance: Tolerance = Tolerance()) -> tuple[float, float, int]:
    """(atol, rtol, max_ulps) of a float `dtype`: `DEFAULT_BOUNDS` (float32's for a dtype it does
    not name) with the program's `tolerance` overrides.

    >>> bounds(np.dtype(np.float32), Tolerance(rtol=(("float32", 1e-3),)))[1:]
    (0.001, 0)
    """
    atol, rtol, max_ulps = DEFAULT_BOUNDS.get(dtype.name, DEFAULT_BOUNDS["float32"])
    atol = dict(tolerance.atol).get(dtype.name, atol)
    rtol = dict(tolerance.rtol).get(dtype.name, rtol)
    return atol, rtol, max_ulps


def is_float(dtype: np.dtype) -> bool:
    """Is `dtype` judged as floating point (float16/32/64, bfloat16) rather than exactly?"""
    return np.issubdtype(dtype, np.floating) or dtype == np.dtype(ml_dtypes.bfloat16)


def _honest_runs(budget: np.ndarray | Sequence[np.ndarray] | None) -> list[Any]:
    """The honest runs a ``budget`` argument holds: one array, a list or tuple of them, or None
    (none)."""
    if budget is None:
        return []
    return list(budget) if isinstance(budget, (list, tuple)) else [budget]


def judge_leaf(actual: np.ndarray, reference: np.ndarray, *,
               budget: np.ndarray | Sequence[np.ndarray] | None = None,
               flushed: np.ndarray | None = None, tolerance: Tolerance = Tolerance(),
               config: str = "", output: str = "", index: int = 0,
               dtype: Any = None, prepared: LeafBudget | None = None) -> Verdict:
    """Judge one output leaf against the reference.

    Args:
        actual: the configuration's output, dtype D (any), shape S.
        reference: the float64 reference (float outputs as float64; integers and bools in D), shape S.
        budget: the honest run (``reference:native``) of the same leaf, float64, shape S, or a
            sequence of such runs (native plus Monte Carlo arithmetic samples: the honest error is
            their elementwise largest); None judges with the dtype bounds alone.
        flushed: the honest run with subnormals flushed to zero (``reference:ftz``), float64,
            shape S, or None: elements that fail against `reference` but agree with it are
            labelled ``ftz``.
        tolerance: per-program overrides of `DEFAULT_BOUNDS`.
        config, output, index: recorded in the verdict.
        dtype: the output's dtype in the program, or None for `actual`'s own: a float leaf is
            judged in it (bounds, ULPs, subnormal range), so an interpreter's float64 array of a
            float32 output (``reference:native``) counts float32 ULPs.
        prepared: `leaf_budget` of `reference`, `budget` and `flushed` (what no configuration
            changes), computed once and shared by every configuration judged on this leaf; used
            when its dtype is the one judged in, else computed here.

    Returns:
        The `Verdict` (never raises on mismatched shapes or dtypes: that is a ``mismatch``).
    """
    actual = np.asarray(actual)
    reference = np.asarray(reference)
    base = dict(config=config, output=output, index=index)
    if actual.shape != reference.shape:
        return Verdict(kind=VerdictKind.MISMATCH, frac_over=1.0, **base,
                       detail=f"shape {actual.shape} != reference shape {reference.shape}")
    if actual.size == 0:
        return Verdict(kind=VerdictKind.OK, **base)
    if actual.dtype.kind == "c":
        return _judge_complex(actual, reference, budget, flushed, tolerance, base)
    if not is_float(actual.dtype):
        return _judge_exact(actual, reference, base, budget)
    judged_as = actual.dtype if dtype is None or not is_float(np.dtype(dtype)) else np.dtype(dtype)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):  # inf - inf: special
        if prepared is None or prepared.dtype != judged_as:
            prepared = leaf_budget(reference, budget, flushed, judged_as)
        return _judge_float(actual, prepared, tolerance, base)


def _judge_complex(actual: np.ndarray, reference: np.ndarray, budget: Any, flushed: Any,
                   tolerance: Tolerance, base: dict[str, Any]) -> Verdict:
    """A complex leaf judged by the modulus of each element's error against the modulus of the
    reference (the norm-wise relative error: a part near zero next to a large other part is
    not judged on its own), in the bounds of the component dtype (complex64 -> float32); each
    honest run's error is measured the same way. Verdict values are moduli."""
    ref = np.asarray(reference).astype(np.complex128)
    magnitude = np.abs(ref)

    def as_float(x: Any) -> np.ndarray:
        # |ref| + |x - ref|: a float leaf whose distance from |ref| is x's complex error; NaN
        # and infinities stay (NaN where x is NaN, inf where x is infinite).
        x = np.asarray(x).astype(np.complex128)
        finite = np.isfinite(x) & np.isfinite(ref)
        err = np.abs(np.where(finite, x - ref, 0))
        out = magnitude + err
        out = np.where(np.isnan(x), np.nan, np.where(np.isinf(x), np.inf, out))
        return np.where(np.isinf(ref) & ~np.isnan(x), np.abs(x), out)
    component = np.dtype(np.float32 if actual.dtype.itemsize <= 8 else np.float64)
    runs = None if budget is None else [as_float(b) for b in _honest_runs(budget)]
    with np.errstate(invalid="ignore", over="ignore"):
        leaf = leaf_budget(magnitude, runs, None if flushed is None else as_float(flushed),
                           component)
        verdict = _judge_float(as_float(actual), leaf, tolerance, base)
    if verdict.worst < 0:
        return verdict
    worst = verdict.worst
    note = "complex: |error| against |reference| (expected and actual are moduli)"
    return dataclasses.replace(verdict, expected=float(magnitude.ravel()[worst]),
                               actual=float(np.abs(np.asarray(actual).ravel()[worst])),
                               detail="; ".join(filter(None, (verdict.detail, note))))


def _judge_exact(actual: np.ndarray, reference: np.ndarray, base: dict[str, Any],
                 budget: np.ndarray | Sequence[np.ndarray] | None = None) -> Verdict:
    """An integer or bool leaf: exact, except where an honest run gives the same value (a float
    rounded to its own dtype before a conversion to integer or a comparison: float64 does not
    round there, the program's dtypes do)."""
    if is_float(reference.dtype) and not np.array_equal(reference, np.round(reference)):
        return Verdict(kind=VerdictKind.MISMATCH, frac_over=1.0, **base,
                       detail=f"dtype {actual.dtype} but the reference is fractional")
    as_float64 = actual.astype(np.float64)
    wrong = as_float64 != reference.astype(np.float64)
    if actual.dtype == np.bool_:
        wrong = actual != reference.astype(bool)
    for run in _honest_runs(budget):
        run = np.asarray(run)
        if run.shape == actual.shape:
            wrong &= as_float64 != run.astype(np.float64)
    exact = dict(max_ulp=math.nan, allowed_abs=0.0, allowed_rel=0.0)
    if not wrong.any():
        return Verdict(kind=VerdictKind.OK, margin=0.0, **exact, **base)
    diff = np.abs(actual.astype(np.float64) - reference.astype(np.float64))
    ref_abs = np.abs(reference.astype(np.float64))
    rel = np.where(ref_abs > 0, diff / np.where(ref_abs > 0, ref_abs, 1), 0)
    worst = int(np.argmax(np.where(wrong, diff, -1).ravel()))
    return Verdict(kind=VerdictKind.MISMATCH, max_abs=float(diff.max()), max_rel=float(rel.max()),
                   frac_over=float(wrong.mean()), worst=worst,
                   expected=float(reference.ravel()[worst]), actual=float(actual.ravel()[worst]),
                   margin=math.inf, **exact, **base)


def _honest_error_below(magnitude: np.ndarray, honest_err: np.ndarray,
                        at: np.ndarray | None = None, *,
                        order: np.ndarray | None = None) -> np.ndarray:
    """Per element, the largest honest error among elements of no larger reference magnitude.

    Honest rounding errors land on different elements in different runs, so an element may be
    off by any error the honest run showed on an element no larger than itself; errors of larger
    elements are not evidence for smaller ones (a 1-ULP error on 2.0 says nothing about 1e-13).
    With `at` (same shape), the same at other magnitudes: elements of no larger magnitude than
    ``at`` (0 where there is none). `order` is ``argsort(magnitude.ravel())``
    when the caller has it.

    >>> _honest_error_below(np.array([2.0, 1e-13, 1.0]), np.array([2e-7, 0.0, 1e-7])).tolist()
    [2e-07, 0.0, 1e-07]
    >>> _honest_error_below(np.array([2.0, 1e-13, 1.0]), np.array([2e-7, 0.0, 1e-7]),
    ...                     at=np.array([0.0, 1.5, 1e-20])).tolist()
    [0.0, 1e-07, 0.0]
    """
    flat_mag, flat_err = magnitude.ravel(), honest_err.ravel()
    if order is None:
        order = np.argsort(flat_mag)
    running = np.maximum.accumulate(flat_err[order])
    query = flat_mag if at is None else np.asarray(at, np.float64).ravel()
    last_of_equal = np.searchsorted(flat_mag[order], query, side="right") - 1
    found = np.where(last_of_equal >= 0, running[np.maximum(last_of_equal, 0)], 0.0)
    return found.reshape(magnitude.shape)


def _non_finite_failures(out: np.ndarray, ref: np.ndarray,
                         honest_runs: list[np.ndarray] | None) -> tuple[np.ndarray, np.ndarray]:
    """(NaN failures, infinity failures) of one leaf (float64 arrays of one shape)."""
    finite_ref, finite_out = np.isfinite(ref), np.isfinite(out)
    both_nan = np.isnan(ref) & np.isnan(out)
    same_inf = np.isinf(ref) & np.isinf(out) & (np.sign(ref) == np.sign(out))
    # Where the honest run gives the same non-finite value, the reference's finiteness is moot.
    # Where any honest run overflows although float64 does not (partial sums of a dot or a
    # convolution beyond the dtype's range), which non-finite value comes out (+inf, -inf, or NaN
    # from inf - inf) depends on the unspecified order of operations: any of them is honest.
    if honest_runs:
        honest = honest_runs[0]
        honest_overflow = honest_non_finite(honest_runs, out.shape)
        honest_agrees = (np.isnan(honest) & np.isnan(out)) | (
            np.isinf(honest) & np.isinf(out) & (np.sign(honest) == np.sign(out))) | (
            honest_overflow & finite_ref & ~finite_out)
    else:
        honest_agrees = np.zeros(out.shape, bool)
    special_ok = both_nan | same_inf | honest_agrees
    nan_bad = (np.isnan(out) ^ np.isnan(ref)) & ~special_ok
    inf_bad = ~nan_bad & (np.isinf(out) | np.isinf(ref)) & ~special_ok
    return nan_bad, inf_bad


def honest_non_finite(honest_runs: Sequence[np.ndarray] | None,
                      shape: tuple[int, ...]) -> np.ndarray:
    """Where any honest run (float64, `shape`) is non-finite: there the order of operations may
    honestly give any non-finite value (see `_non_finite_failures`); bool, `shape`."""
    non_finite = np.zeros(shape, bool)
    for run in honest_runs or ():
        non_finite |= ~np.isfinite(run)
    return non_finite


def _slack(ref: np.ndarray, ref_abs: np.ndarray, comparable: np.ndarray,
           honest_runs: list[np.ndarray] | None, dtype: np.dtype) -> tuple[np.ndarray, Any]:
    """(per-element error budget, the budget at other magnitudes or None) of one leaf."""
    if not honest_runs:
        return np.zeros(ref.shape), None
    honest_err = np.zeros(ref.shape)
    for run in honest_runs:
        honest_err = np.maximum(honest_err,
                                np.where(comparable & np.isfinite(run), np.abs(run - ref), 0.0))
    worst_honest = honest_err.max()
    scale = ref_abs.max()
    if scale > 0 and worst_honest > ILL_CONDITIONED_EPS * ml_dtypes.finfo(dtype).eps * scale:
        # Honest rounding already moves this leaf by a visible share of its scale (e.g. an
        # Adam update of a gradient that is mathematically zero): which element it lands on is
        # chance, so every element gets the leaf's honest error.
        return np.full(ref.shape, BUDGET_FACTOR * worst_honest), None
    near_zero = _near_zero_allowance(ref_abs, honest_err, scale, dtype)
    tiny = float(ml_dtypes.finfo(dtype).tiny)
    # One sort per leaf serves every magnitude asked about. Any order of equal magnitudes
    # gives the same running maximum at the last of them, so the sort need not be stable.
    order = np.argsort(ref_abs.ravel())

    def slack_at(magnitude: np.ndarray) -> np.ndarray:
        # Honest error is relative to a value's size: at |v| the element's share of it.
        ratio = np.minimum(magnitude / np.maximum(ref_abs, tiny), 1.0)
        return BUDGET_FACTOR * honest_err * ratio + _honest_error_below(
            ref_abs, honest_err, magnitude, order=order)
    return BUDGET_FACTOR * honest_err + near_zero + _honest_error_below(
        ref_abs, honest_err, order=order), slack_at


def _near_zero_allowance(ref_abs: np.ndarray, honest_err: np.ndarray, scale: float,
                         dtype: np.dtype) -> np.ndarray:
    """Per element, the absolute allowance of a value that cancellation made small.

    Where an honest run is off by more than `CANCELLATION_EPS` ULPs of the element's own
    magnitude, the element is what is left of larger terms that cancelled (``a - b``, a sum of
    opposite signs, digamma near its zeros): its error is a few ULPs of those terms, and which
    of them XLA's rounding lands on (its own transcendentals, its order of operations) is
    chance that two honest samples may miss. Such an element may be off by `NEAR_ZERO_EPS`
    machine epsilons of the leaf's largest magnitude (the terms' size is at most about the
    output's scale), capped at `NEAR_ZERO_FACTOR` times its own honest error (the terms' size
    as the samples show it, generously: a term of size 1 next to an output of 1e6 does not
    give the element 1e6's allowance). An element that is small because its operands were
    (a cbrt of subnormals) shows no such honest error and gets nothing.

    >>> eps = float(np.finfo(np.float32).eps)
    >>> _near_zero_allowance(np.array([1e-9, 1e-9, 1.0]), np.array([3e-8, 0.0, 3e-8]), 1.0,
    ...                      np.dtype(np.float32)) / eps
    array([2., 0., 0.])
    """
    eps = float(ml_dtypes.finfo(dtype).eps)
    cancelled = honest_err > CANCELLATION_EPS * eps * ref_abs
    return np.where(cancelled, np.minimum(NEAR_ZERO_EPS * eps * scale,
                                          NEAR_ZERO_FACTOR * honest_err), 0.0)


@dataclasses.dataclass(frozen=True, eq=False)
class LeafBudget:
    """What judging one floating output leaf needs that no configuration changes: the float64
    reference, the honest runs, the per-element error budget and the budget at the flushed
    run's magnitudes. `leaf_budget` makes it once per program and leaf; every configuration's
    judgement of the leaf reads it (sorting the honest errors is the oracle's main cost on
    large outputs).

    Attributes:
        dtype: the output's dtype (the bounds and the budget are in its units).
        ref: the reference, float64, the leaf's shape S.
        ref_abs: its magnitude, 0 where it is not finite, float64 S.
        honest_runs: the honest runs as float64 S, or None (dtype bounds alone).
        slack: per-element error budget, float64 S (units of the value).
        flushed: the flushed honest run (float64 S), or None.
        ftz_slack: the budget at the flushed run's magnitudes, float64 S, or None.
        finite: is every element of the reference finite (then a finite output has no
            non-finite failure to look for)?
        ref_ordered: the reference rounded to `dtype`, as positions on its line of values
            (float64 S; ULP distances are differences of positions).
    """

    dtype: np.dtype
    ref: np.ndarray
    ref_abs: np.ndarray
    honest_runs: list[np.ndarray] | None
    slack: np.ndarray
    flushed: np.ndarray | None
    ftz_slack: np.ndarray | None
    finite: bool
    ref_ordered: np.ndarray


def leaf_budget(reference: np.ndarray, budget: np.ndarray | Sequence[np.ndarray] | None,
                flushed: np.ndarray | None, dtype: Any) -> LeafBudget:
    """The configuration-independent part of judging one float leaf (see `judge_leaf`).

    Args:
        reference: the float64 reference of the leaf, shape S.
        budget: one honest run or a sequence of them (float64 S), or None.
        flushed: the flushed honest run (float64 S), or None.
        dtype: the output's float dtype.

    Returns:
        The `LeafBudget`.
    """
    dtype = np.dtype(dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        ref = np.asarray(reference).astype(np.float64)
        honest_runs = None if budget is None else [np.asarray(b, np.float64)
                                                   for b in _honest_runs(budget)]
        finite = np.isfinite(ref)
        ref_abs = np.abs(np.where(finite, ref, 0.0))
        slack, slack_at = _slack(ref, ref_abs, finite, honest_runs, dtype)
        ftz = ftz_slack = None
        if flushed is not None:
            ftz = np.asarray(flushed, np.float64)
            # The budget at the flushed value's magnitude, not the reference's: a flushed zero
            # explains a zero, not a garbage value as small as the reference's own honest error.
            ftz_abs = np.where(np.isfinite(ftz), np.abs(ftz), 0.0)
            ftz_slack = slack if slack_at is None else slack_at(ftz_abs)
        ordered = _ordered(ref, dtype)
    return LeafBudget(dtype, ref, ref_abs, honest_runs, slack, ftz, ftz_slack,
                      bool(finite.all()), ordered)


def flush_allowance(leaf: LeafBudget, atol: float, rtol: float) -> np.ndarray:
    """Per element, the allowed ``|out - flushed|`` (units of the value) where flushing subnormals
    to zero changes the honest result, and -1 where it does not (there flushing explains
    nothing); float64, the leaf's shape. The leaf must have a flushed run (`leaf_budget`)."""
    ftz, honest = leaf.flushed, leaf.honest_runs[0] if leaf.honest_runs else None
    assert ftz is not None and leaf.ftz_slack is not None
    ftz_abs = np.where(np.isfinite(ftz), np.abs(ftz), 0.0)
    differs_by_flushing = np.ones(ftz.shape, bool) if honest is None else ~(
        (ftz == honest) | (np.isnan(ftz) & np.isnan(honest)))
    return np.where(differs_by_flushing, np.maximum(atol, rtol * ftz_abs + leaf.ftz_slack), -1.0)


def _explained_by_flushing(out: np.ndarray, leaf: LeafBudget, atol: float,
                           rtol: float) -> np.ndarray:
    """Elements where the honest run with subnormals flushed to zero gives `out`, and flushing
    is what changes the honest result there."""
    ftz = leaf.flushed
    allowed = flush_allowance(leaf, atol, rtol)
    ftz_diff = np.abs(out - ftz)
    agrees = (np.isnan(ftz) & np.isnan(out)) | (ftz == out) | (
        np.isfinite(ftz_diff) & (ftz_diff <= allowed))
    # Only where flushing changes the honest result (allowance not -1) is it the explanation.
    return agrees & ~(allowed < 0)


def _judge_float(actual: np.ndarray, leaf: LeafBudget, tolerance: Tolerance,
                 base: dict[str, Any]) -> Verdict:
    # The leaf's dtype, not actual's: a complex leaf is judged as float64 moduli in the bounds
    # of its component dtype.
    dtype = leaf.dtype
    out = actual.astype(np.float64)
    ref, slack = leaf.ref, leaf.slack
    atol, rtol, max_ulps = bounds(dtype, tolerance)
    out_finite = np.isfinite(out)
    ulps = np.abs(_ordered(actual, dtype) - leaf.ref_ordered)
    if leaf.finite and out_finite.all():
        # The common case, on every element: no special value to judge.
        nan_bad, inf_bad = np.zeros(out.shape, bool), np.zeros(out.shape, bool)
        comparable, diff, ref_abs = out_finite, np.abs(out - ref), leaf.ref_abs
    else:
        nan_bad, inf_bad = _non_finite_failures(out, ref, leaf.honest_runs)
        comparable = np.isfinite(ref) & out_finite
        diff = np.where(comparable, np.abs(out - ref), 0.0)
        ref_abs = np.where(comparable, leaf.ref_abs, 0.0)
        ulps = np.where(comparable, ulps, 0.0)
    over = comparable & (diff > atol + slack) & (diff > rtol * ref_abs + slack)
    if max_ulps:
        over &= ulps > max_ulps
    flushed = np.zeros(out.shape, bool)
    suspect = over | nan_bad | inf_bad
    if suspect.any():
        # Flushing subnormals to zero (inputs and results) is a legal freedom on XLA:CPU.
        tiny = float(ml_dtypes.finfo(dtype).tiny)
        ref_rounded = np.abs(ref.astype(dtype).astype(np.float64))
        flushed = over & (out == 0) & (ref_rounded < tiny)
        if leaf.flushed is not None:
            flushed |= suspect & _explained_by_flushing(out, leaf, atol, rtol)
            nan_bad &= ~flushed
            inf_bad &= ~flushed
        over &= ~flushed

    failing = over | nan_bad | inf_bad
    # Relative and ULP errors mean nothing where the reference is within its own honest
    # uncertainty (a mathematically zero gradient): report them only where |ref| exceeds it.
    meaningful = ref_abs > np.maximum(atol, slack)
    rel = np.where(meaningful, diff / np.where(meaningful, ref_abs, 1.0), 0.0)
    stats = dict(max_abs=float(diff.max()), max_rel=float(rel.max()),
                 max_ulp=float(np.where(meaningful, ulps, 0.0).max()),
                 frac_over=float(failing.mean()),
                 **_allowance(diff, ref_abs, ulps, slack, comparable & ~flushed, meaningful, rel,
                              atol, rtol, max_ulps, bool((nan_bad | inf_bad).any())))
    if nan_bad.any():
        kind, mask = VerdictKind.NAN_MISMATCH, nan_bad
    elif inf_bad.any():
        kind, mask = VerdictKind.INF_MISMATCH, inf_bad
    elif over.any():
        kind, mask = VerdictKind.MISMATCH, over
    elif flushed.any():
        return Verdict(kind=VerdictKind.FTZ, **stats, **base,
                       detail=f"{int(flushed.sum())} subnormal result(s) flushed to zero")
    else:
        return Verdict(kind=VerdictKind.OK, **stats, **base)
    score = np.where(mask, np.where(np.isfinite(diff), diff, np.inf), -1.0).ravel()
    worst = int(np.argmax(np.nan_to_num(score, posinf=np.finfo(np.float64).max)))
    return Verdict(kind=kind, worst=worst, expected=float(ref.ravel()[worst]),
                   actual=float(out.ravel()[worst]), **stats, **base)


@dataclasses.dataclass(frozen=True, slots=True)
class Gauge:
    """An output leaf defined only up to a symmetry: its vectors (columns, or rows with `rows`)
    are each defined up to a unit factor (a sign for real dtypes), and jointly up to a unitary
    within a group of equal eigen- or singular values. `align_gauges` aligns a run's leaf to the
    reference's by that symmetry before it is judged.

    Attributes:
        leaf: the output leaf holding the vectors, shape (..., m, k) (or (..., k, m) with `rows`).
        rows: the vectors are the leaf's rows (V^H of an SVD), not its columns.
        values: the output leaf holding the values, shape (..., k), that name groups of equal
            values; None: each vector is its own group (only its sign or phase is free).
        partner: an output leaf whose rows transform with `leaf`'s vectors (an SVD's V^H when
            U is `leaf`: u_i and v_i flip together), or None.
        what: what the vectors are, for the verdict's detail (``"eigenvectors of eigh"``).
    """

    leaf: int
    rows: bool = False
    values: int | None = None
    partner: int | None = None
    what: str = ""

    @property
    def note(self) -> str:
        """The verdict detail of a leaf compared through this gauge."""
        kind = "row" if self.rows else "column"
        free = (f"each {kind}'s sign, and any rotation within a group of equal values"
                if self.values is not None else f"each {kind}'s sign")
        return f"{self.what}: compared up to {free} (aligned to the reference first)"


#: Values closer than this many square roots of the output dtype's epsilon, relative to the
#: largest, form one group: their vectors mix by O(eps / gap) and only their span is defined.
GAUGE_GROUP_SQRT_EPS = 1.0


def _value_groups(values: np.ndarray | None, k: int, dtype: np.dtype) -> list[list[int]]:
    """Runs of adjacent near-equal values (eigenvalues and singular values come sorted)."""
    if values is None or values.shape != (k,) or not np.all(np.isfinite(values)):
        return [[i] for i in range(k)]
    eps = float(ml_dtypes.finfo(dtype).eps) if is_float(dtype) else float(
        np.finfo(np.complex64 if dtype.itemsize <= 8 else np.complex128).eps)
    tol = GAUGE_GROUP_SQRT_EPS * math.sqrt(eps) * float(np.max(np.abs(values), initial=0.0))
    groups = [[0]] if k else []
    for i in range(1, k):
        if abs(values[i] - values[i - 1]) <= tol:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def _unitary_alignment(a: np.ndarray, r: np.ndarray) -> np.ndarray:
    """The unitary Q minimizing ||a Q - r|| (orthogonal Procrustes: Q = U V^H from the SVD of
    a^H r); for one column the unit factor that best matches r (1 where a^H r is 0)."""
    m = a.conj().T @ r
    if m.shape == (1, 1):
        z = m[0, 0]
        return np.ones((1, 1), m.dtype) if z == 0 else (m / abs(z))
    u, _s, vh = np.linalg.svd(m)
    return u @ vh


def _align_one(a: np.ndarray, r: np.ndarray, values: np.ndarray | None, partner: np.ndarray | None,
               dtype: np.dtype) -> tuple[np.ndarray, np.ndarray | None]:
    """One matrix of vectors (columns) `a` aligned to `r`; `partner`'s rows follow."""
    a = a.astype(np.result_type(a, r, np.float64))
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(r))):
        return a, partner  # a NaN or inf is judged as it is
    if partner is not None:
        partner = partner.astype(np.result_type(partner, a))
    for group in _value_groups(values, a.shape[-1], dtype):
        q = _unitary_alignment(a[:, group], r[:, group])
        a[:, group] = a[:, group] @ q
        if partner is not None and partner.shape[0] == a.shape[1]:
            partner[group, :] = q.conj().T @ partner[group, :]
    return a, partner


def align_gauges(outputs: Sequence[np.ndarray], reference: Sequence[np.ndarray],
                 gauges: Sequence[Gauge],
                 dtypes: Sequence[np.dtype] | None = None) -> list[np.ndarray]:
    """A run's outputs with each gauge leaf (and its partner) aligned to the reference.

    Outside the symmetry nothing changes: a vector that is wrong, not merely sign-flipped or
    rotated within its group of equal values, still differs after alignment. Leaves whose shape
    or dtype does not match the reference's, and matrices with non-finite entries, are left as
    they are (the judge reports them).

    Args:
        outputs: one array per output leaf (a configuration's, or an honest run's).
        reference: the float64 reference outputs, one per leaf.
        gauges: the program's gauges (`xlaprobe.configs.reference_scipy.output_gauges`).
        dtypes: the program's output dtypes, whose precision decides which values count as
            equal (default: the outputs' own; honest runs come carried in float64).

    Returns:
        New list of arrays, in each leaf's own dtype.
    """
    aligned = [np.asarray(o) for o in outputs]
    for gauge in gauges:
        a, r = aligned[gauge.leaf], np.asarray(reference[gauge.leaf])
        if a.shape != r.shape or a.ndim < 2 or a.dtype.kind not in "fc" or \
                r.dtype.kind not in "fc":
            continue
        swap = (lambda x: np.swapaxes(x, -1, -2)) if gauge.rows else (lambda x: x)
        a_cols, r_cols = swap(a), swap(r)
        values = None if gauge.values is None else np.asarray(reference[gauge.values])
        partner = None if gauge.partner is None else aligned[gauge.partner]
        if values is not None and values.shape != a_cols.shape[:-2] + a_cols.shape[-1:]:
            values = None
        if partner is not None and partner.shape[:-2] != a.shape[:-2]:
            partner = None
        new_a = np.empty(a_cols.shape, np.result_type(a_cols, r_cols, np.float64))
        new_p = None if partner is None else np.empty(partner.shape, np.result_type(
            partner, new_a))
        for index in np.ndindex(*a_cols.shape[:-2]):
            one, p = _align_one(a_cols[index], r_cols[index],
                                None if values is None else values[index],
                                None if partner is None else partner[index],
                                np.dtype(a.dtype if dtypes is None else dtypes[gauge.leaf]))
            new_a[index] = one
            if new_p is not None:
                new_p[index] = p
        aligned[gauge.leaf] = swap(new_a).astype(a.dtype)
        if new_p is not None:
            aligned[gauge.partner] = new_p.astype(partner.dtype)
    return aligned


def _allowance(diff: np.ndarray, ref_abs: np.ndarray, ulps: np.ndarray, slack: np.ndarray,
               compared: np.ndarray, meaningful: np.ndarray, rel: np.ndarray, atol: float,
               rtol: float, max_ulps: int, non_finite_bad: bool) -> dict[str, float]:
    """The verdict's `allowed_abs`, `allowed_rel` and `margin` (see `Verdict`) from the same
    per-element arrays `_judge_float` decided with: an element fails when its error exceeds
    ``max(atol, rtol * |ref|) + slack`` (and, for narrow floats, `max_ulps` ULPs)."""
    allowed = np.maximum(atol, rtol * ref_abs) + slack
    share = np.where(allowed > 0, diff / np.where(allowed > 0, allowed, 1.0),
                     np.where(diff > 0, np.inf, 0.0))
    if max_ulps:
        share = np.minimum(share, ulps / max_ulps)
    share = np.where(compared, share, -1.0).ravel()
    result = dict(allowed_abs=math.nan, allowed_rel=math.nan,
                  margin=math.inf if non_finite_bad else math.nan)
    if compared.any():
        at = int(np.argmax(share))
        result["allowed_abs"] = float(allowed.ravel()[at])
        if not non_finite_bad:
            result["margin"] = float(share[at])
    if meaningful.any():
        at = int(np.argmax(np.where(meaningful, rel, -1.0).ravel()))
        result["allowed_rel"] = float(allowed.ravel()[at] / ref_abs.ravel()[at])
    return result


def judge_outcome(outcome: Outcome, reference: Sequence[np.ndarray], output_names: Sequence[str], *,
                  budget: Sequence[Any] | None = None,
                  flushed: Sequence[np.ndarray] | None = None,
                  tolerance: Tolerance = Tolerance(),
                  gauges: Sequence[Gauge] = (),
                  dtypes: Sequence[Any] | None = None) -> list[Verdict]:
    """Judge every output leaf of one configuration's outcome.

    Args:
        outcome: the configuration's outcome; a crash, timeout or compile error gives that verdict
            on every leaf.
        reference: the reference outputs, one array per leaf.
        output_names: one name per leaf.
        budget: per leaf, the honest run's output or a list of honest runs' outputs, or None.
        flushed: the flushed honest-run outputs (``reference:ftz``), one per leaf, or None.
        tolerance: per-program overrides.
        gauges: output leaves defined only up to a symmetry: the outcome's outputs, each honest
            run's and the flushed run's are aligned to `reference` by it first (`align_gauges`),
            and those leaves' verdicts say so in their detail.
        dtypes: the outputs' dtypes in the program, one per leaf, or None (each array's own):
            see `judge_leaf`'s `dtype`.

    Returns:
        One `Verdict` per output leaf, in order.
    """
    if not outcome.ran:
        kind = OUTCOME_VERDICT[outcome.kind]
        detail = outcome.last_line
        if outcome.kind is OutcomeKind.CRASH and outcome.signal is not None:
            detail = f"signal {outcome.signal}: {detail}"
        return [Verdict(config=outcome.config, output=name, index=i, kind=kind, frac_over=1.0,
                        detail=detail) for i, name in enumerate(output_names)]
    if len(outcome.outputs) != len(reference):
        return [Verdict(config=outcome.config, output=name, index=i, kind=VerdictKind.MISMATCH,
                        frac_over=1.0, detail=f"{len(outcome.outputs)} outputs, reference has "
                                              f"{len(reference)}")
                for i, name in enumerate(output_names)]
    return judge_outcomes([outcome], reference, output_names, budget=budget, flushed=flushed,
                          tolerance=tolerance, gauges=gauges, dtypes=dtypes)[0]


def judge_outcomes(outcomes: Sequence[Outcome], reference: Sequence[np.ndarray],
                   output_names: Sequence[str], *, budget: Sequence[Any] | None = None,
                   flushed: Sequence[np.ndarray] | None = None,
                   tolerance: Tolerance = Tolerance(), gauges: Sequence[Gauge] = (),
                   dtypes: Sequence[Any] | None = None) -> list[list[Verdict]]:
    """`judge_outcome` of several configurations against one reference, leaf by leaf: each float
    leaf's error budget (`leaf_budget`: a sort of its honest errors, the reference's ULP
    positions) is made once for every configuration, and dropped before the next leaf's is
    made (a large program's budgets held together would take gigabytes).

    Args:
        outcomes: one per configuration, each of which ran with one output per reference leaf.
        reference, output_names, budget, flushed, tolerance, gauges, dtypes: as for
            `judge_outcome`.

    Returns:
        Per outcome, in order, one `Verdict` per output leaf.
    """
    runs = [list(o.outputs) for o in outcomes]
    if gauges:
        own = [np.asarray(o).dtype for o in runs[0]] if runs else None
        runs = [align_gauges(r, reference, gauges) for r in runs]
        if budget is not None:  # per leaf a list of honest runs: align each run as a whole
            honest = zip(*[b if isinstance(b, (list, tuple)) else [b] for b in budget])
            aligned = [align_gauges(list(run), reference, gauges, own) for run in honest]
            budget = [list(leaf) for leaf in zip(*aligned)]
        if flushed is not None:
            flushed = align_gauges(flushed, reference, gauges, own)
    judged: list[list[Verdict]] = [[] for _ in outcomes]
    for i, ref in enumerate(reference):
        prepared: LeafBudget | None = None
        leaf_budget_runs = None if budget is None else budget[i]
        leaf_flushed = None if flushed is None else flushed[i]
        program_dtype = None if dtypes is None else dtypes[i]
        for outcome, run, verdicts in zip(outcomes, runs, judged):
            actual = np.asarray(run[i])
            judged_as = np.dtype(program_dtype) if program_dtype is not None and is_float(
                np.dtype(program_dtype)) else actual.dtype
            if is_float(actual.dtype) and actual.shape == np.shape(ref) and actual.size and (
                    prepared is None or prepared.dtype != judged_as):
                prepared = leaf_budget(ref, leaf_budget_runs, leaf_flushed, judged_as)
            verdicts.append(judge_leaf(actual, ref, budget=leaf_budget_runs, flushed=leaf_flushed,
                                       tolerance=tolerance, config=outcome.config,
                                       output=output_names[i], index=i, dtype=program_dtype,
                                       prepared=prepared))
    notes = {g.leaf: g.note for g in gauges}
    notes.update({g.partner: g.note for g in gauges if g.partner is not None})
    return [[dataclasses.replace(v, detail="; ".join(filter(None, (v.detail, notes[v.index]))))
             if v.index in notes else v for v in verdicts] for verdicts in judged]
