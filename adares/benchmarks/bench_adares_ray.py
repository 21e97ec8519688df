"""Ray beside local: wall time of one fleet replay (``adares.fleet``) on each backend, side by
side in one run, and whether the results are equal bit for bit.

Usage: python benchmarks/bench_adares_ray.py [--vms 500] [--days 8] [--clusters 4]
       [--policies static,threshold,predictive,vpa,autopilot,adares] [--workers 2]
Needs ``pip install 'adares[ray]'``. Ray is started once with ``--workers`` CPUs and its
workers warmed up on a small fleet before the timed runs (both reported apart); each (cluster, policy) pair is one Ray task
of one CPU, so the best speedup is min(workers, pairs, the longest pair's share of the total).
"""

from __future__ import annotations

import argparse
import json
import time

from adares import fleet as fl
from adares.synthetic import generate


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vms", type=int, default=500)
    ap.add_argument("--days", type=float, default=8.0)
    ap.add_argument("--clusters", type=int, default=4)
    ap.add_argument("--policies", default="static,threshold,predictive,vpa,autopilot,adares")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    import ray

    names = args.policies.split(",")
    tr = generate(args.vms, args.days, seed=0)
    flt = fl.split(tr, args.clusters)
    t = time.perf_counter()
    ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    start_s = time.perf_counter() - t
    # Ray starts its worker processes (and they import adares) on their first tasks: a small
    # untimed fleet first, so the timed run measures the replay, not the start.
    t = time.perf_counter()
    small = tr.head(2 * args.workers, 300)
    fl.replay_fleet(fl.split(small, 2 * args.workers), names, backend="ray")
    warm_s = time.perf_counter() - t
    out = {"vms": tr.n_vms, "steps": tr.n_steps, "clusters": args.clusters, "policies": names,
           "workers": args.workers, "ray_start_s": round(start_s, 2),
           "ray_warmup_s": round(warm_s, 2)}
    runs = {}
    for backend in ("local", "ray"):
        t = time.perf_counter()
        res, _ = fl.replay_fleet(flt, names, backend=backend)
        wall = time.perf_counter() - t
        runs[backend] = res
        vm_steps = tr.n_vms * tr.n_steps * len(names)
        out[backend] = {"wall_s": round(wall, 2), "vm_steps_per_s": round(vm_steps / wall),
                        "replays_s_summed": round(sum(r.seconds for r in res.values()), 2)}
    ray.shutdown()
    out["speedup"] = round(out["local"]["wall_s"] / out["ray"]["wall_s"], 2)
    out["identical"] = all(
        runs["local"][n].as_dict() | {"seconds": 0} == runs["ray"][n].as_dict() | {"seconds": 0}
        and (runs["local"][n].step_cost == runs["ray"][n].step_cost).all() for n in names)
    print(json.dumps(out, indent=2))
    print(f"local {out['local']['wall_s']} s, ray ({args.workers} CPUs) {out['ray']['wall_s']} s: "
          f"x{out['speedup']}; identical: {out['identical']}")


if __name__ == "__main__":
    main()
