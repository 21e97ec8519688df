"""The same validation on the local backend and on Ray, timed side by side in one run.

Prints the wall time of ``validate`` in process and on Ray (one task per (class, day) partition,
Ray's start-up timed apart), and checks that both give the same accuracies bit for bit. Run from
the thesios/ folder with the ray extra installed:
``python benchmarks/bench_backends.py [--rate 1/1000] [--cpus 2] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import time

from thesios.partitions import LocalBackend, RayBackend
from thesios.validate import auto_fleet, validate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rate", default="1/1000")
    ap.add_argument("--cpus", type=int, default=None, help="CPUs of the local Ray instance (default: all)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    num, _, den = args.rate.partition("/")
    rate = float(num) / float(den) if den else float(num)
    spec = auto_fleet(rate)
    out: dict = {"rate": rate, "sampled_disks": spec.n_disks, "days": spec.days}
    t = time.perf_counter()
    local = validate(spec, rate=rate, backend=LocalBackend())
    out["local_s"] = time.perf_counter() - t
    t = time.perf_counter()
    ray_backend = RayBackend(num_cpus=args.cpus)
    out["ray_start_s"] = time.perf_counter() - t
    try:
        t = time.perf_counter()
        on_ray = validate(spec, rate=rate, backend=ray_backend)
        out["ray_s"] = time.perf_counter() - t
        t = time.perf_counter()
        validate(spec, rate=rate, backend=ray_backend)  # workers warm: thesios already imported
        out["ray_warm_s"] = time.perf_counter() - t
        out["ray_cpus"] = int(ray_backend._ray.cluster_resources().get("CPU", 0))
    finally:
        ray_backend.close()
    out["identical"] = local.accuracy == on_ray.accuracy and local.per_disk == on_ray.per_disk
    out["ray_warm_over_local"] = out["ray_warm_s"] / out["local_s"]
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for k, v in out.items():
        print(f"{k:24s} {v:,.3f}" if isinstance(v, float) else f"{k:24s} {v}")


if __name__ == "__main__":
    main()
