"""Speed of the replay: VM-steps simulated per second per policy, and the bandit's decisions per
second, measured side by side on one synthetic trace (one process, one core's worth of work).

Usage: python benchmarks/bench_adares_speed.py [--vms 500] [--days 8] [--cluster SPEC]
Goals: >= 1 M VM-steps/s for static and threshold (issue 18) and for the bandit, its
decisions batched over the VMs each period (issue 29). With --cluster (e.g.
nodes=20,cpu=32,mem=128,overcommit=4) each policy is also timed on nodes (admission and
contention), side by side with the run without nodes.
"""

from __future__ import annotations

import argparse
import json
import time

from adares.cluster import parse_cluster
from adares.policies.bandit import Adares
from adares.policies import make_policy, policy_names
from adares.simulator import simulate
from adares.synthetic import generate


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vms", type=int, default=500)
    ap.add_argument("--days", type=float, default=8.0)
    ap.add_argument("--policies", default=",".join(policy_names()))
    ap.add_argument("--cluster", default="")
    args = ap.parse_args()
    t0 = time.perf_counter()
    tr = generate(args.vms, args.days, seed=0)
    gen_s = time.perf_counter() - t0
    vm_steps = tr.n_vms * tr.n_steps
    out = {"vms": tr.n_vms, "steps": tr.n_steps, "generate_s": round(gen_s, 3), "policies": {}}
    for name in args.policies.split(","):
        pol = make_policy(name, tr)
        t, c = time.perf_counter(), time.process_time()
        simulate(tr, pol)
        dt, dc = time.perf_counter() - t, time.process_time() - c
        # CPU seconds of this process as well as wall seconds: on a shared, loaded machine the
        # wall time counts other jobs' time slices, the CPU time does not.
        row = {"seconds": round(dt, 3), "vm_steps_per_s": round(vm_steps / dt),
               "cpu_seconds": round(dc, 3), "vm_steps_per_cpu_s": round(vm_steps / max(dc, 1e-9))}
        if isinstance(pol, Adares):
            row["decisions"] = pol.decisions
            row["decisions_per_s"] = round(pol.decisions / dt)
        line = (f"{name:15s} {dt:7.2f} s  {vm_steps / dt:12,.0f} VM-steps/s  "
                f"({vm_steps / max(dc, 1e-9):12,.0f} per CPU-second)"
                + (f"  {pol.decisions / dt:9,.0f} bandit decisions/s" if isinstance(pol, Adares) else ""))
        if args.cluster:
            cl = parse_cluster(args.cluster, tr)
            t = time.perf_counter()
            simulate(tr, make_policy(name, tr), cluster=cl)
            dc = time.perf_counter() - t
            row["cluster_vm_steps_per_s"] = round(vm_steps / dc)
            line += f"  on nodes: {vm_steps / dc:12,.0f} VM-steps/s"
        out["policies"][name] = row
        print(line)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
