"""The oracle's per-element allowances of a check, written beside a finding's artifact
(``allowance.npz``) so that its ``repro.py`` judges each element as the check did.

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

from pathlib import Path
from typing import Any

import numpy as np

from xlaprobe.oracle import DEFAULT_BOUNDS, is_float, leaf_budget

#: The file's name in an artifact directory.
FILE_NAME = "allowance.npz"


def element_allowances(result: Any) -> dict[str, np.ndarray]:
    """The per-element allowances of a check's float leaves (see module docstring).

    Args:
        result: a `xlaprobe.checking.CheckResult` judged against the float64 reference.

    Returns:
        Arrays by name (``allowed_0``, ...); empty when the check was not judged against the
        reference (nothing to reproduce it with).
    """
    from xlaprobe.checking import REFERENCE
    from xlaprobe.configs.reference_scipy import output_gauges

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
    atol, rtol, max_ulps = DEFAULT_BOUNDS.get(dtype.name, DEFAULT_BOUNDS["float32"])
    atol = dict(tolerance.atol).get(dtype.name, atol)
    rtol = dict(tolerance.rtol).get(dtype.name, rtol)
    leaf = leaf_budget(ref, honest, flushed, dtype)
    arrays = {f"allowed_{i}": np.maximum(atol, rtol * leaf.ref_abs) + leaf.slack,
              f"max_ulps_{i}": np.asarray(max_ulps, np.int64)}
    nonfinite = np.zeros(np.shape(ref), bool)
    for run in leaf.honest_runs or ():
        nonfinite |= ~np.isfinite(run)
    arrays[f"honest_nf_{i}"] = nonfinite
    if leaf.flushed is not None and leaf.ftz_slack is not None:
        ftz = leaf.flushed
        first = leaf.honest_runs[0] if leaf.honest_runs else None
        differs = np.ones(ftz.shape, bool) if first is None else ~(
            (ftz == first) | (np.isnan(ftz) & np.isnan(first)))
        ftz_abs = np.where(np.isfinite(ftz), np.abs(ftz), 0.0)
        arrays[f"ftz_{i}"] = ftz
        arrays[f"ftz_allowed_{i}"] = np.where(
            differs, np.maximum(atol, rtol * ftz_abs + leaf.ftz_slack), -1.0)
    return arrays


def save_allowances(path: str | Path, arrays: dict[str, np.ndarray]) -> None:
    """Write `arrays` to `path` (compressed ``.npz``) through a temporary file and a rename, so a
    crash leaves the old file or the new one, never half of one."""
    path = Path(path)
    part = path.with_name(path.name + ".part")
    with open(part, "wb") as handle:
        np.savez_compressed(handle, **arrays)
    part.replace(path)
