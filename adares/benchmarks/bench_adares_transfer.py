"""Transfer as safer exploration: first-day violations and cost of ADARES warm-started from
another cluster's decision log against a cold start, over several (source, target) pairs of
clusters, measured side by side in one run.

Usage: python benchmarks/bench_adares_transfer.py [--vms 200] [--days 4] [--pairs 0:1,1:2,2:0]
       [--kind synthetic|population]
A pair S:T replays ADARES on cluster S (seed S, 8 days, decisions logged), then on cluster T
(seed T + 100, a different cluster) cold and warm (from S's log). Prints one line per pair and
a JSON summary (first-day throttled share, OOM kills, cost per VM-hour; whole-run reward).
"""

from __future__ import annotations

import argparse
import json

from adares.policies.bandit import Adares
from adares.replay import load_trace
from adares.simulator import simulate


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vms", type=int, default=200)
    ap.add_argument("--days", type=float, default=4.0)
    ap.add_argument("--pairs", default="0:1,1:2,2:0")
    ap.add_argument("--kind", default="synthetic")
    args = ap.parse_args()
    rows = []
    for pair in args.pairs.split(","):
        s, t = (int(v) for v in pair.split(":"))
        src = load_trace(f"{args.kind}:vms={args.vms},days=8,seed={s}")
        logger = Adares(seed=s, keep_log=True)
        simulate(src, logger)
        tgt = load_trace(f"{args.kind}:vms={args.vms},days={args.days},seed={t + 100}")
        row = {"pair": pair}
        for how, warm in (("cold", None), ("warm", logger.log)):
            r = simulate(tgt, Adares(seed=t, warm_start=warm))
            row[how] = {"first_day_throttled": r.extra["first_day_cpu_throttled_share"],
                        "first_day_ooms": r.extra["first_day_oom_events"],
                        "first_day_cost_per_vm_h": -r.extra["first_day_reward"],
                        "reward": r.reward}
        rows.append(row)
        c, w = row["cold"], row["warm"]
        print(f"{pair}: first day throttled {100 * c['first_day_throttled']:.2f}% cold / "
              f"{100 * w['first_day_throttled']:.2f}% warm, OOM kills {c['first_day_ooms']} / "
              f"{w['first_day_ooms']}, cost per VM-hour {c['first_day_cost_per_vm_h']:.3f} / "
              f"{w['first_day_cost_per_vm_h']:.3f}; whole run reward {c['reward']:.3f} / "
              f"{w['reward']:.3f}", flush=True)
    print(json.dumps({"kind": args.kind, "vms": args.vms, "days": args.days, "pairs": rows}))


if __name__ == "__main__":
    main()
