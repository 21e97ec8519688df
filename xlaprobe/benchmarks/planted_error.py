"""The smallest planted relative error the oracle flags, per zoo model and output leaf.

Each model is checked once (``xla`` against the float64 reference with the honest-run budget);
then a relative error d is planted in one output leaf of xla's outcome (every element times
1 + d, rounded to the leaf's dtype) and that leaf is judged again with the check's own budget
(`xlaprobe.oracle.judge_leaf`), for d on a grid of 4 points per decade from 1e-7 to 10
(binary search: flagging grows with d). Per model it prints the smallest d flagged on any leaf,
the median over leaves, and the largest (the least sensitive leaf: an error below it on that
leaf passes) with the leaf's name.

    python benchmarks/planted_error.py                       # the xlaprobe zoo models
    python benchmarks/planted_error.py --models lstm,vit --json
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time

import numpy as np

from xlaprobe.checking import REFERENCE, check_program
from xlaprobe.oracle import is_float, judge_leaf, leaf_budget
from xlaprobe.sources.models import build_program
from xlaprobe.workers import WorkerPool

MODELS = "transformer_lm,resnet,mlp_mixer,lstm,vit,attention_lm,convnet"
#: Planted relative errors: 4 per decade, 1e-7 .. 10.
GRID = [10.0 ** (k / 4) for k in range(-28, 5)]


def smallest_flagged(actual: np.ndarray, prepared, ref: np.ndarray, honest, flushed,
                     tolerance, dtype) -> float:
    """The smallest d of `GRID` for which ``actual * (1 + d)`` fails; inf when none does."""
    def fails(k: int) -> bool:
        planted = (actual.astype(np.float64) * (1.0 + GRID[k])).astype(dtype)
        return judge_leaf(planted, ref, budget=honest, flushed=flushed, tolerance=tolerance,
                          dtype=dtype, prepared=prepared).kind.is_finding
    lo, hi = -1, len(GRID)  # fails(lo) False (taken), fails(hi) True (taken)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fails(mid) else (mid, hi)
    return GRID[hi] if hi < len(GRID) else math.inf


def measure(name: str, pool: WorkerPool) -> dict:
    """One model's thresholds (see module docstring)."""
    program = build_program(name)
    start = time.perf_counter()
    result = check_program(program, ["xla", REFERENCE], pool)
    ref_out = result.outcomes[result.configs.index(REFERENCE)].outputs
    xla = result.outcomes[result.configs.index("xla")]
    honest = [o.outputs for o in result.budget if o.ran]
    flushed = result.flushed.outputs if result.flushed is not None and result.flushed.ran else None
    thresholds: dict[str, float] = {}
    for i, (name_i, aval) in enumerate(zip(program.output_names, program.jaxpr.out_avals)):
        dtype = np.dtype(aval.dtype)
        actual = np.asarray(xla.outputs[i])
        if not is_float(dtype) or np.iscomplexobj(actual) or not np.any(actual):
            continue
        runs = [np.asarray(h[i], np.float64) for h in honest] or None
        leaf_flushed = None if flushed is None else np.asarray(flushed[i], np.float64)
        prepared = leaf_budget(ref_out[i], runs, leaf_flushed, dtype)
        thresholds[name_i] = smallest_flagged(actual, prepared, ref_out[i], runs, leaf_flushed,
                                              program.tolerance, dtype)
    finite = [t for t in thresholds.values() if t < math.inf]
    worst = max(thresholds, key=thresholds.get) if thresholds else ""
    return {"model": name, "leaves": len(thresholds), "xla_findings": len(result.findings),
            "smallest": min(thresholds.values(), default=math.nan),
            "median": statistics.median(thresholds.values()) if thresholds else math.nan,
            "largest": thresholds.get(worst, math.nan), "largest_leaf": worst,
            "never_flagged": len(thresholds) - len(finite),
            "seconds": round(time.perf_counter() - start, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=MODELS)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    with WorkerPool(size=1, timeout_s=900) as pool:
        for name in args.models.split(","):
            rows.append(measure(name, pool))
            if not args.json:
                r = rows[-1]
                print(f"{r['model']:<16} {r['leaves']:>4} leaves  smallest {r['smallest']:.2g}  "
                      f"median {r['median']:.2g}  largest {r['largest']:.2g} ({r['largest_leaf']})"
                      f"  never flagged {r['never_flagged']}  ({r['seconds']} s)", flush=True)
    if args.json:
        print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
