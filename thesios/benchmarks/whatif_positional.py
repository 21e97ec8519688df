"""What-ifs re-measured on the disk where order matters (:mod:`thesios.positional`).

For each group of the embedded fleet (p, one day; grouped from the samples): the synthesized
disk's cache-miss reads and its writes are placed on a 4 TB disk (each file in a 256 MiB region at
a hashed place, :func:`thesios.positional.lba_of`) and served with the head's position, the
platter's phase and (unlike the reorganizer) the writes occupying the disk. Printed per group:
utilization and read latency p50/p99 for the baseline (7200 RPM, FIFO, write-through), 5400 RPM,
twice the disk-days (``capacity:x2``), the elevator and deadline schedulers, and a 64 MiB
write-back cache; beside them the reorganizer's order-free baseline and 5400 RPM (recorded
``disk_time`` rescaled as ``whatif -s rpm:5400`` does).

    python benchmarks/whatif_positional.py --rate 1/1000 [--json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

import numpy as np

from thesios.identify import disk_features, identify
from thesios.partitions import sample_fleet
from thesios.requests import Requests
from thesios.samplers import parse_rate
from thesios.scenarios import positional_metrics as _metrics
from thesios.scenarios import serve_metrics
from thesios.synth import synthesize
from thesios.validate import auto_fleet
from thesios.whatif import rpm_whatif


def _ms(m: dict) -> dict:
    """Utilization and read latency p50/p99 (ms) of a :mod:`thesios.scenarios` metrics dict."""
    return {"utilization": m["utilization"], "read_p50_ms": m["read_latency_p50_s"] * 1e3, "read_p99_ms": m["read_latency_p99_s"] * 1e3}


def positional_metrics(trace: Requests, hdd, scheduler: str = "fifo", cache_bytes: int = 0) -> dict:
    """Utilization and read latency p50/p99 (ms) on the positional disk (``whatif -s disk:...``)."""
    return _ms(_metrics(trace, hdd, scheduler, cache_bytes))


def reorganizer_metrics(trace: Requests) -> dict:
    """The order-free reorganizer's figures for comparison (misses only, recorded service times,
    FIFO over the day: :func:`thesios.scenarios.serve_metrics`)."""
    return _ms(serve_metrics(trace))


def main() -> None:
    """Per group: the what-ifs on the positional disk beside the reorganizer's."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rate", default="1/1000")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    p = parse_rate(args.rate)
    spec = auto_fleet(p, days=1, seed=args.seed, held_out_per_class=1, scale=2.0)
    samples = sample_fleet(spec, p, args.seed)
    labels = identify(disk_features(samples, spec.n_disks, spec.days), seed=args.seed).labels
    base_disk = spec.hdd
    slow = dataclasses.replace(spec.hdd, rpm=5400.0, outer_rate_bps=spec.hdd.outer_rate_bps * 0.75,
                               inner_rate_bps=spec.hdd.inner_rate_bps * 0.75)
    rows = {}
    for g in np.unique(labels):
        t0 = time.perf_counter()
        members = np.flatnonzero(labels == g)
        one = synthesize(samples, members, p, days=1).trace
        two = synthesize(samples, members, p, days=1, scale=2.0).trace
        rows[int(g)] = {
            "requests": len(one),
            "baseline": positional_metrics(one, base_disk),
            "rpm:5400": positional_metrics(one, slow),
            "capacity:x2": positional_metrics(two, base_disk),
            "elevator": positional_metrics(one, base_disk, "elevator"),
            "deadline": positional_metrics(one, base_disk, "deadline"),
            "priority": positional_metrics(one, base_disk, "priority"),
            "write-back 64 MiB": positional_metrics(one, base_disk, cache_bytes=64 << 20),
            "reorganizer baseline": reorganizer_metrics(one),
            "reorganizer rpm:5400": reorganizer_metrics(rpm_whatif(one, 7200.0, 5400.0)),
            "seconds": time.perf_counter() - t0,
        }
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print("| group | what-if | utilization | read p50 ms | read p99 ms |")
    print("|---|---|---|---|---|")
    for g, r in rows.items():
        for name, m in r.items():
            if isinstance(m, dict):
                print(f"| {g} | {name} | {m['utilization']:.2%} | {m['read_p50_ms']:.1f} | {m['read_p99_ms']:.1f} |")


if __name__ == "__main__":
    main()
