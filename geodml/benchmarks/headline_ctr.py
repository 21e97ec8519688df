"""The issue's headline on CTR-like data (data >> model): WAN bytes of each geo-distributed
strategy over the bytes of centralizing, and test accuracy against centralized training, in one
run; then the planner's crossover (where centralizing wins) confirmed by simulation on a small
dataset with many rounds.

Usage: python benchmarks/headline_ctr.py [rows] [features]   (default 2,000,000 rows, 65536
features: about 2 GB of memory and several minutes on a 2-core machine)
"""

from __future__ import annotations

import sys
import time

from geodml.algorithms import Settings
from geodml.compare import CompareConfig, compare


def _r(x) -> str:
    return "never" if x is None else f"{x:.3g}"


def main(rows: int = 2_000_000, features: int = 65536) -> None:
    algos = ("centralize", "oneshot", "fadl", "diloco", "lbfgs")
    cfg = CompareConfig(data=f"ctr:rows={rows},features={features},fields=20", algos=algos,
                        settings=Settings(compress="topk:0.01"))
    t = time.perf_counter()
    res = compare(cfg, progress=lambda m: print(f"  {m} ({time.perf_counter() - t:.0f} s)", flush=True))
    d = res["data"]
    print(f"data: {d['n_train']} training rows, {features} features, raw {d['raw_bytes'] / 1e6:.1f} MB, "
          f"model {d['model_bytes'] / 1e6:.3f} MB; 4 regions, iid; diloco uplink topk:0.01 with error feedback")
    c = res["algorithms"]["centralize"]
    print(f"{'algorithm':10s} {'WAN MB':>10s} {'ratio':>9s} {'rounds':>6s} {'sim s':>8s} {'dollars':>9s} {'accuracy':>8s} {'delta pts':>9s} {'wall s':>7s}")
    for a in algos:
        r = res["algorithms"][a]
        ratio = r["bytes"] / c["bytes"]
        print(f"{a:10s} {r['bytes'] / 1e6:10.3f} {'1/%.0f' % (1 / ratio) if ratio < 1 else '%.2f' % ratio:>9s} {r['rounds']:6d} "
              f"{r['sim_seconds']:8.2f} {r['dollars']:9.5f} {r['test_accuracy']:8.4f} "
              f"{100 * (r['test_accuracy'] - c['test_accuracy']):+9.2f} {r['wall_seconds']:7.1f}")
    for a, x in res["crossover"].items():
        rounds = "" if x["rounds_bytes"] is None else f"from {x['rounds_bytes']} rounds on, or "
        print(f"crossover {a}: centralizing moves fewer bytes {rounds}"
              f"below {x['rows_bytes']:.3g} rows (seconds: {_r(x['rows_sim_seconds'])} rows, "
              f"dollars: {_r(x['rows_dollars'])} rows)")
    print(f"total wall {time.perf_counter() - t:.0f} s")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
