"""The regime where centralizing wins, found by the planner and confirmed by simulation.

For CTR-like data of growing size (same model, same rounds), the planner (sizes only) picks the
cheaper of centralizing and DiLoCo on WAN bytes and on simulated seconds; then both are run and
the simulated ledger says who actually won. Usage: python benchmarks/crossover_confirm.py
"""

from __future__ import annotations

from geodml.algorithms import Settings, run
from geodml.data import make_ctr
from geodml.network import Network, build_dcs, central_hub, model_hub
from geodml.partition import partition
from geodml.planner import DCSize, PlanCounts, plan
from geodml.wan import load_wan


def main() -> None:
    wan = load_wan()
    s = Settings(rounds=20)
    print(f"{'rows':>8s} {'metric':>11s} {'planner picks':>14s} {'simulation picks':>17s} {'central':>10s} {'diloco':>10s}")
    for rows in (5_000, 50_000, 500_000):
        X, y = make_ctr(rows, features=16384, fields=20, seed=0)
        dcs = build_dcs(X, y, partition("iid", X, y, 4), wan)
        hm, hc = model_hub(wan, [d.name for d in dcs]), central_hub(wan, dcs)
        sim = {}
        counts = {}
        for a, hub in (("centralize", hc), ("diloco", hm)):
            net = Network(wan, dcs, hub)
            run(a, net, s)
            sim[a] = net
            counts.update(net.notes)
        pc = PlanCounts(central_iters=counts["central_iters"])
        for metric in ("bytes", "sim_seconds"):
            p = plan([DCSize.of(d) for d in dcs], 16384, wan, s, hm, hc, strategies=("centralize", "diloco"), counts=pc, objective=metric)
            val = {a: (n.wan_bytes if metric == "bytes" else n.sim_seconds) for a, n in sim.items()}
            winner = min(val, key=val.get)
            print(f"{rows:8d} {metric:>11s} {p['recommend']:>14s} {winner:>17s} {val['centralize']:10.4g} {val['diloco']:10.4g}")


if __name__ == "__main__":
    main()
