"""The generator's accuracy as a curve over its heterogeneity, never one number.

Runs :func:`thesios.validate.validate` on the embedded fleet with every class's per-disk rate
spread (``rate_sigma``, lognormal) and read-fraction jitter (``read_jitter``, s.d.) set to each
value in turn, the rest as default, and prints one row per setting. This measures the method on
its own generator: within a class the disks are the same Poisson process up to these factors, so
the accuracy here is a choice of them, not evidence (the recorded fleet of real software is:
``thesios validate --traces``).

    python benchmarks/heterogeneity_curve.py --rate 1/1000 [--json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

from thesios.fleet import DEFAULT_CLASSES, FleetSpec
from thesios.samplers import parse_rate
from thesios.validate import METRICS, auto_fleet, validate

SIGMAS = (0.0, 0.04, 0.15, 0.3, 0.6)
JITTERS = (0.0, 0.05, 0.1, 0.2)


def run(rate: float, sigma: float, jitter: float, days: int, seed: int) -> dict:
    """Accuracy of validate() with every class at ``rate_sigma=sigma``, ``read_jitter=jitter``."""
    base = auto_fleet(rate, days=days, seed=seed)
    classes = tuple(dataclasses.replace(c, rate_sigma=sigma, read_jitter=jitter) for c in DEFAULT_CLASSES)
    spec = FleetSpec(classes, disks_per_class=base.disks_per_class, days=base.days, seed=seed)
    t0 = time.perf_counter()
    result = validate(spec, rate=rate, seed=seed)
    return {"rate_sigma": sigma, "read_jitter": jitter, "seconds": time.perf_counter() - t0} | result.accuracy


def main() -> None:
    """Print the curve (one row per setting) or one JSON document."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rate", default="1/1000")
    ap.add_argument("--days", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    p = parse_rate(args.rate)
    rows = [run(p, s, 0.01, args.days, args.seed) for s in SIGMAS]
    rows += [run(p, 0.04, j, args.days, args.seed) for j in JITTERS]
    if args.json:
        print(json.dumps({"rate": p, "rows": rows}, indent=2))
        return
    print("| rate_sigma | read_jitter | " + " | ".join(METRICS) + " | s |")
    print("|---" * (len(METRICS) + 3) + "|")
    for r in rows:
        print(f"| {r['rate_sigma']} | {r['read_jitter']} | " + " | ".join(f"{r[m]:.1%}" for m in METRICS) + f" | {r['seconds']:.0f} |")


if __name__ == "__main__":
    main()
