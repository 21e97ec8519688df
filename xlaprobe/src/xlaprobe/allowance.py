"""The oracle's per-element allowances of a check, written beside a finding's artifact
(``allowance.npz``) so that its ``repro.py`` judges each element as the check did; and, for the
verdict table, why an allowance is wide (`wide_allowances`).

A float leaf's element fails the oracle when ``|out - ref| > max(atol, rtol * |ref|) + slack``
(slack: the honest-run error budget of that element) and, for float16 and bfloat16, it is more
than ``max_ulps`` ULPs away; unless the value is a flushed subnormal, or what the honest run with
subnormals flushed gives, or a non-finite value an honest run also gives (`xlaprobe.oracle`).
Everything in that rule but the output is known when the check ends: this module evaluates it
once, per element, so that the reproducer needs only NumPy to apply it to a fresh run.

Arrays in ``allowance.npz`` (``i``: the output leaf's position; leaves not listed, such as
integer, complex or gauge leaves, are judged by the scalar bounds in ``metadata.json``):

    allowed_i        float64 S   allowed |out - ref| (units of the value)
    max_ulps_i       int64 []    ULPs an element may be off in any case (narrow floats; else 0)
    honest_nf_i      bool S      an honest run is non-finite there (overflow: any non-finite ok)
    ftz_i            float64 S   the flushed honest run
    ftz_allowed_i    float64 S   allowed |out - ftz| where flushing changes the honest result,
                                 -1 where it does not (then flushing explains nothing)
"""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from xlaprobe.checking import REFERENCE
from xlaprobe.configs.reference_scipy import output_gauges
from xlaprobe.errors import CorruptArtifact
from xlaprobe.files import read_npz, write_atomic
from xlaprobe.oracle import (ILL_CONDITIONED_EPS, bounds, flush_allowance, honest_non_finite,
                             is_float, leaf_budget)

#: The file's name in an artifact directory.
FILE_NAME = "allowance.npz"

#: The rule of this module as reproducers apply it (jax and numpy only), pasted into a finding's
#: ``repro.py`` (`xlaprobe.artifact.repro_text`, `xlaprobe.localization.repro.emit_repro`).
REPRO_JUDGE = '''
def load_allowance(script):
    """The check's per-element allowances stored beside this script (xlaprobe's allowance.npz)."""
    import os
    path = os.path.join(os.path.dirname(os.path.abspath(script)), "allowance.npz")
    if not os.path.exists(path):
        return {}
    try:
        with np.load(path) as data:
            return dict(data)
    except Exception as exc:  # exit 2, not 1 (1 means the fault shows)
        import sys
        print("error: %s is not a readable .npz archive (%s)" % (path, type(exc).__name__),
              file=sys.stderr)
        raise SystemExit(2)


def leaf_allowance(allowance, k):
    """Output k's arrays of the allowance, by name (allowed, max_ulps, honest_nf, ftz, ...)."""
    return {key.rsplit("_", 1)[0]: v for key, v in allowance.items() if key.rsplit("_", 1)[1] == str(k)}


def ordered(x, dtype):
    """x rounded to dtype, as its position on the line of dtype's values (ULPs apart = difference)."""
    bits = np.dtype(dtype).itemsize * 8
    i = np.asarray(x).astype(dtype).view({16: np.int16, 32: np.int32, 64: np.int64}[bits]).astype(np.int64)
    return np.where(i < 0, -(i & ((1 << (bits - 1)) - 1)), i).astype(np.float64)


def judged_as_the_check(out, ref, a):
    """Elements failing the check's own rule: off by more than the allowance, not a flushed
    subnormal, not what the flushed honest run gives, not non-finite where an honest run is."""
    o, r = out.astype(np.float64), np.asarray(ref, np.float64)
    with np.errstate(invalid="ignore"):
        comparable = np.isfinite(o) & np.isfinite(r)
        diff = np.where(comparable, np.abs(o - r), 0.0)
        over = comparable & (diff > a["allowed"])
        if a["max_ulps"]:
            over &= np.abs(ordered(out, out.dtype) - ordered(r, out.dtype)) > a["max_ulps"]
        special = (np.isnan(o) & np.isnan(r)) | (np.isinf(o) & (o == r)) | (a["honest_nf"] & ~np.isfinite(o))
        nan_bad = (np.isnan(o) ^ np.isnan(r)) & ~special
        inf_bad = ~nan_bad & (np.isinf(o) | np.isinf(r)) & ~special
        tiny = float(jax.numpy.finfo(out.dtype).tiny)
        flushed = over & (o == 0) & (np.abs(r.astype(out.dtype).astype(np.float64)) < tiny)
        if "ftz" in a:
            f = a["ftz"]
            flushed |= (over | nan_bad | inf_bad) & (a["ftz_allowed"] >= 0) & (
                (np.isnan(f) & np.isnan(o)) | (f == o) | (np.abs(o - f) <= a["ftz_allowed"]))
    return (over | nan_bad | inf_bad) & ~flushed
'''


def element_allowances(result: Any) -> dict[str, np.ndarray]:
    """The per-element allowances of a check's float leaves (see module docstring).

    Args:
        result: a `xlaprobe.checking.CheckResult` judged against the float64 reference.

    Returns:
        Arrays by name (``allowed_0``, ...); empty when the check was not judged against the
        reference (nothing to reproduce it with).
    """
    if result.judged_against != REFERENCE:
        return {}
    reference = next(o.outputs for c, o in zip(result.configs, result.outcomes) if c == REFERENCE)
    honest = [o.outputs for o in result.budget if o.ran]
    flushed = result.flushed.outputs if result.flushed is not None and result.flushed.ran else None
    gauges = output_gauges(result.program.jaxpr)
    gauged = {g.leaf for g in gauges} | {g.partner for g in gauges if g.partner is not None}
    arrays: dict[str, np.ndarray] = {}
    for i, (ref, aval) in enumerate(zip(reference, result.program.jaxpr.out_avals)):
        dtype = np.dtype(aval.dtype)
        if i in gauged or not is_float(dtype) or np.iscomplexobj(ref) or not np.size(ref):
            continue
        arrays.update(_leaf(i, ref, [run[i] for run in honest] or None,
                            None if flushed is None else flushed[i], dtype,
                            result.program.tolerance))
    return arrays


def _leaf(i: int, ref: np.ndarray, honest: list[np.ndarray] | None, flushed: np.ndarray | None,
          dtype: np.dtype, tolerance: Any) -> dict[str, np.ndarray]:
    """The arrays of one float leaf (the oracle's `_judge_float` rule, output left open)."""
    atol, rtol, max_ulps = bounds(dtype, tolerance)
    leaf = leaf_budget(ref, honest, flushed, dtype)
    arrays = {f"allowed_{i}": np.maximum(atol, rtol * leaf.ref_abs) + leaf.slack,
              f"max_ulps_{i}": np.asarray(max_ulps, np.int64),
              f"honest_nf_{i}": honest_non_finite(leaf.honest_runs, np.shape(ref))}
    if leaf.flushed is not None and leaf.ftz_slack is not None:
        arrays[f"ftz_{i}"] = leaf.flushed
        arrays[f"ftz_allowed_{i}"] = flush_allowance(leaf, atol, rtol)
    return arrays


def save_allowances(path: str | Path, arrays: dict[str, np.ndarray]) -> None:
    """Write `arrays` to `path` (compressed ``.npz``) with `xlaprobe.files.write_atomic`, so a
    crash leaves the old file or the new one, never half of one.

    Raises:
        OSError: the folder is missing or cannot be written.
    """
    archive = io.BytesIO()
    np.savez_compressed(archive, **arrays)
    write_atomic(path, archive.getvalue())


#: The arrays of one float leaf ``i`` in the file (``NAME_i``), and whether each has the
#: leaf's shape (else it is a scalar).
_ARRAYS = {"allowed": True, "max_ulps": False, "honest_nf": True, "ftz": True,
           "ftz_allowed": True}


def check_allowance_file(path: str | Path, shapes: list[tuple[int, ...]]) -> None:
    """Refuse an ``allowance.npz`` that is not what `save_allowances` writes for outputs of
    `shapes`: not an .npz archive, an array of another name, of an output that does not exist,
    or of another shape than its output leaf.

    Args:
        path: the file (it exists).
        shapes: the program's output leaf shapes, in order.

    Raises:
        CorruptArtifact: as above, naming the file and the array.
    """
    arrays = read_npz(path)
    for name, array in arrays.items():
        kind, _, index = name.rpartition("_")
        if kind not in _ARRAYS or not index.isdigit() or int(index) >= len(shapes):
            raise CorruptArtifact(f"{path}: array '{name}' is not an allowance of one of the "
                                  f"program's {len(shapes)} outputs; the artifact is corrupt")
        want = shapes[int(index)] if _ARRAYS[kind] else ()
        if array.shape != want:
            raise CorruptArtifact(f"{path}: array '{name}' has shape {list(array.shape)}, its "
                                  f"output's is {list(want)}; the artifact is corrupt")


#: An allowance is wide when it exceeds this many times its dtype's relative bound, and at
#: least `WIDE_REL` (1% of the value: what a reader of a table of ``ok`` rows would doubt).
WIDE_FACTOR = 10.0
WIDE_REL = 0.01


@dataclasses.dataclass(frozen=True, slots=True)
class WideAllowance:
    """Why one output leaf's allowance is wide: the honest run that set it and how far the
    honest runs disagree.

    Attributes:
        config: the configuration whose verdict had the widest allowance on the leaf.
        output: the leaf's name.
        element: flat index of the element of that verdict's largest relative error.
        allowed_rel: the relative error allowed there (dimensionless).
        set_by: the honest run farthest from the float64 reference there
            (``reference:native``, ``reference:mca[seed=1]``, ...).
        honest_rel: that run's relative error there.
        spread_rel: how far the honest runs disagree with each other there (largest pairwise
            difference, relative to |reference|).
        leaf_spread_rel: the same over the whole leaf, relative to its largest |reference|.
        leaf_wide: the leaf is ill-conditioned (honest error over `ILL_CONDITIONED_EPS`
            machine epsilons of its scale), so every element gets the leaf's largest honest error.
        magnitude: |reference| at the element over the leaf's largest |reference|.
    """

    config: str
    output: str
    element: int
    allowed_rel: float
    set_by: str
    honest_rel: float
    spread_rel: float
    leaf_spread_rel: float
    leaf_wide: bool
    magnitude: float = 1.0

    def text(self) -> str:
        """One line for the verdict table."""
        why = ("the leaf is ill-conditioned, so every element gets its largest honest error"
               if self.leaf_wide else "the budget is 4x the honest error at that element")
        return (f"{self.output}: allowed rel {self.allowed_rel:.3g} at element {self.element} "
                f"(|reference| {self.magnitude:.2g} of the leaf's largest; {self.config}) is set "
                f"by {self.set_by}, off {self.honest_rel:.3g} there; the "
                f"honest runs disagree by {self.spread_rel:.3g} there and by "
                f"{self.leaf_spread_rel:.3g} of the leaf's scale overall; {why}")

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return dataclasses.asdict(self)


def wide_allowances(result: Any, factor: float = WIDE_FACTOR) -> list[WideAllowance]:
    """The leaves of a check judged ok (or ftz) under a wide allowance, each with the honest run
    that set it.

    Args:
        result: a `xlaprobe.checking.CheckResult`.
        factor: how many times the dtype's rtol counts as wide (and at least `WIDE_REL`).

    Returns:
        One `WideAllowance` per such leaf (the configuration with the widest allowance), widest
        first; empty without honest runs or a float64 reference.
    """
    honest = [o for o in result.budget if o.ran]
    if result.judged_against != REFERENCE or not honest:
        return []
    reference = next(o.outputs for c, o in zip(result.configs, result.outcomes) if c == REFERENCE)
    widest: dict[int, tuple[Any, Any]] = {}
    for outcome, verdicts in zip(result.outcomes, result.verdicts):
        for v in verdicts:
            if v.kind.is_finding or not v.allowed_rel == v.allowed_rel or outcome.config == REFERENCE:
                continue
            rtol = bounds(np.dtype(result.program.jaxpr.out_avals[v.index].dtype))[1]
            if v.allowed_rel > max(factor * rtol, WIDE_REL) and (
                    v.index not in widest or v.allowed_rel > widest[v.index][0].allowed_rel):
                widest[v.index] = (v, outcome)
    wide = [_explain(v, outcome, reference[i], [(o.config, o.outputs[i]) for o in honest])
            for i, (v, outcome) in sorted(widest.items())]
    return sorted(wide, key=lambda w: -w.allowed_rel)


def _explain(verdict: Any, outcome: Any, ref: np.ndarray,
             honest: list[tuple[str, np.ndarray]]) -> WideAllowance:
    """The `WideAllowance` of one verdict (see `wide_allowances`)."""
    dtype = np.dtype(outcome.outputs[verdict.index].dtype)
    ref = np.asarray(ref, np.float64).ravel()
    runs = [(name, np.asarray(run, np.float64).ravel()) for name, run in honest]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.asarray(outcome.outputs[verdict.index], np.float64).ravel()
        ref_abs = np.where(np.isfinite(ref), np.abs(ref), 0.0)
        rel = np.where(ref_abs > 0, np.abs(out - ref) / np.where(ref_abs > 0, ref_abs, 1.0), 0.0)
        element = int(np.argmax(np.nan_to_num(rel, nan=-1.0)))
        errors = [abs(run[element] - ref[element]) for _, run in runs]
        worst = int(np.nanargmax(errors)) if any(e == e for e in errors) else 0
        at = [run[element] for _, run in runs]
        scale = float(ref_abs.max()) or 1.0
        leaf_spread = max((float(np.nanmax(np.abs(a - b))) for _, a in runs for _, b in runs),
                          default=0.0)
        honest_err = max(float(np.nanmax(np.abs(run - ref))) for _, run in runs)
    eps = float(ml_dtypes.finfo(dtype).eps) if is_float(dtype) else 0.0
    size = ref_abs[element] or 1.0
    return WideAllowance(verdict.config, verdict.output, element, float(verdict.allowed_rel),
                         runs[worst][0], float(errors[worst] / size),
                         float((max(at) - min(at)) / size), leaf_spread / scale,
                         honest_err > ILL_CONDITIONED_EPS * eps * scale,
                         float(ref_abs[element] / scale))
