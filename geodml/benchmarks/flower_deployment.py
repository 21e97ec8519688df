"""geodml on a real Flower deployment against the in-process run, side by side: a SuperLink and
one SuperNode process per data center of a real dataset split by its own geography (each
SuperNode holding only its own rows), every SuperNode behind a counting TCP relay. Prints, per
algorithm, the bytes on each data center's socket against the arrays' bytes the pool sent and
received and the ledger's WAN bytes of that DC's link, per round and in total, the wall time per
message round, and whether the final model equals the in-process one (max |difference| of the
parameters, 0 means bit for bit). WAN latency and bandwidth stay modelled: loopback time is not
WAN time.

Usage: python benchmarks/flower_deployment.py [--dataset NAME] [--model logreg|mlp[:H]]
       [--algos A,B] [--rounds R] [--sample N] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from geodml import registry
from geodml.compare import CompareConfig, _federation, _run_one
from geodml.flower_deploy import run_deployment
from geodml.settings import Settings


def _kb(b: float) -> str:
    return f"{b / 1e3:.1f} KB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="gapminder")
    ap.add_argument("--model", default="logreg")
    ap.add_argument("--algos", default="fedavg,oneshot")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sample", type=int, default=None)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    data = f"dataset:{a.dataset}" + (f",sample={a.sample}" if a.sample else "")
    s = Settings(rounds=a.rounds, model=a.model, inner="adamw" if a.model != "logreg" else "sgd")
    cfg = CompareConfig(data=data, algos=tuple(a.algos.split(",")), settings=s, backend="flower-deployment")
    fed = _federation(cfg)
    t0 = time.perf_counter()
    res = run_deployment(cfg, fed.dcs, lambda m: print(f"  [{time.perf_counter() - t0:6.1f} s] {m}", flush=True))
    wall = time.perf_counter() - t0
    print(f"\n{a.dataset}, {a.model}: {len(fed.ds.y_train)} train rows over {len(fed.dcs)} SuperNodes "
          f"({', '.join(f'{dc.name}={dc.place} {dc.n}' for dc in fed.dcs)}); model hub {fed.hub_m}; "
          f"load {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores); deployment wall {wall:.1f} s, "
          f"{res['start_seconds']:.1f} s of it from launch to the first round")
    for name in cfg.algos:
        thetas: dict = {}
        local = _run_one(registry.get(name), cfg, fed, {}, None, lambda m: None, thetas)
        row = res["algorithms"][name]
        m, w = row["measured"], row["measured"]["wire"]
        diff = float(np.max(np.abs(np.asarray(res["thetas"][name]) - thetas[name])))
        print(f"\n{name}: {row['rounds']} rounds, accuracy {row['test_accuracy']:.4f} (in process {local['test_accuracy']:.4f}, "
              f"max |theta difference| {diff:.3g}); wall {m['wall_seconds']:.1f} s, {w['seconds_per_round']:.2f} s a message round "
              f"(simulated WAN {row['sim_seconds']:.3g} s); Flower messages {_kb(m['serialized_bytes'])}")
        print("| data center | wire | arrays (down + up) | WAN ledger | wire / arrays | wire / ledger |")
        print("|---|---|---|---|---|---|")
        for dc, v in w["by_dc"].items():
            hub = " (hub's own)" if dc == fed.hub_m else ""
            print(f"| {dc}{hub} | {_kb(v['wire'])} | {_kb(v['payload'])} | {_kb(v['ledger'])} | "
                  f"{v['wire'] / max(v['payload'], 1):.3g} | {v['wire'] / v['ledger'] if v['ledger'] else float('nan'):.3g} |")
        print("per round (wire / arrays, all DCs):", ", ".join(
            f"{r['method']} {_kb(sum(r['wire'].values()))}/{_kb(sum(r['payload'].values()))} {r['seconds']:.1f}s" for r in m["rounds"]))
    wr = res["wire"]
    print(f"\nflwr {wr['flwr']}, Fleet API over {wr['transport']}; wire in all {_kb(wr['total_bytes'])}; outside the rounds (registration, app download, setup, polls) "
          f"{_kb(wr['control_bytes'])}; TCP connections per DC {wr['connections']}")
    if a.json:
        res.pop("thetas")
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
