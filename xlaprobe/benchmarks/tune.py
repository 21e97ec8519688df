"""Tuning benchmark: random vs Optuna TPE vs cost-model-guided search on zoo programs, and the
learned cost model vs the analytical roofline on held-out programs.

All from one run, on one machine, into one fresh store (so the model strategy on a later program
learns from the measurements of earlier ones, as it would in use). Per program and strategy, the
same measurement budget; printed: the best speedup found with its interval, its replication in a
fresh process, whether it was accepted, candidates rejected by the guard, and the measurements
each strategy needed to reach 90% of the best speedup any strategy found on that program (the
ratio model/random is the figure of merit), with the best taken as the best single measurement
and as the best confirmed win (accepted on replication in a fresh process: a lone measurement's
"win" can be noise on a shared machine). Then, leave-one-program-out: a `CostModel` trained on
the other programs' measurements ranks the held-out program's measured candidates (all of them,
and the random search's alone: a uniform sample, free of the guided searches' lean); Kendall
tau and top-1/top-5 slowdown against the measured speedups, beside the roofline of each
candidate's ``cost_analysis()``. Finally the YNNPACK-dots-only option alone on each CNN (the win reported on
a ConvNet on this kind of machine), measured directly.

    python benchmarks/tune.py                                # 22 min alone on 2 cores, more when loaded
    python benchmarks/tune.py --models convnet,mlp_mixer --budget 6 --plot /tmp/tune.png
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from xlaprobe.store import Store
from xlaprobe.tune.costmodel import CostModel, kendall_tau, roofline_scores, top_k_slowdown
from xlaprobe.tune.measure import Protocol, measure
from xlaprobe.tune.search import STRATEGIES, tune, tune_target
from xlaprobe.workers import WorkerPool

YNN_DOTS = {"xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT"}


def _fmt(m) -> str:
    return "-" if m is None else f"{m.speedup:.3f} [{m.low:.3f},{m.high:.3f}]"


def _held_out(rows: list[dict], strategy: str = "") -> list[dict]:
    """Leave-one-program-out ranking quality of the cost model and of the roofline: trained on
    every other program's measurements, tested on the held-out program's (only those the
    `strategy` search made, if given: the random search's are a uniform sample of the space,
    the guided searches' lean towards what they expected to be fast)."""
    programs = sorted({r["program_id"] for r in rows})
    out = []
    for held in programs:
        train = [r for r in rows if r["program_id"] != held]
        test = [r for r in rows if r["program_id"] == held
                and (not strategy or r["data"].get("strategy") == strategy)]
        if len(test) < 5 or len({round(r["speedup"], 6) for r in test}) < 2:
            continue
        model = CostModel(seed=0).fit([r["program_id"] for r in train],
                                      [r["data"]["row_features"] for r in train],
                                      [r["speedup"] for r in train])
        speedups = [r["speedup"] for r in test]
        learned = (model.score([r["data"]["row_features"] for r in test]) if model.ready
                   else np.zeros(len(test)))
        roof = roofline_scores([r["data"].get("cost", {}) for r in test])
        out.append({"program": test[0]["data"].get("name", held[:8]), "n": len(test),
                    "model_tau": kendall_tau(learned, speedups),
                    "roofline_tau": kendall_tau(roof, speedups),
                    **{f"model_top{k}": top_k_slowdown(learned, speedups, k) for k in (1, 5)},
                    **{f"roofline_top{k}": top_k_slowdown(roof, speedups, k) for k in (1, 5)}})
    return out


def _reach_table(results: dict, strategies: list[str], budget: int) -> dict:
    """Measurements each strategy spent until its best-so-far reached 90% of the best speedup any
    strategy found, two ways: the best single measurement (noise included: on this machine a
    lone measurement's "win" of 10-20% can be noise), and the best *confirmed* win (the best
    whose replication in a fresh process was accepted, valued at its replicated speedup). A
    program with no confirmed win has nothing to reach for the second and is left out of its
    sums. Prints both tables; returns them."""
    out: dict[str, dict] = {}
    for basis in ("single measurement", "confirmed win"):
        print()
        print(f"measurements to reach 90% of the best speedup any strategy found, by {basis} "
              f"(budget {budget}; - never reached)")
        print(f"{'model':13s} {'best any':>9s} " + " ".join(f"{s:>8s}" for s in strategies))
        reach: dict[str, dict[str, int | None]] = {}
        for model, by_strategy in results.items():
            if basis == "confirmed win":
                wins = [r.replicated.speedup for r in by_strategy.values()
                        if r.accepted and r.replicated is not None]
            else:
                wins = [r.best.measurement.speedup for r in by_strategy.values() if r.best]
            best_any = max(wins, default=1.0)
            if best_any <= 1.0:
                print(f"{model:13s} {'none':>9s} (no speedup to reach)")
                continue
            target = 1.0 + 0.9 * (best_any - 1.0)
            reach[model] = {s: r.measurements_to_reach(target) for s, r in by_strategy.items()}
            print(f"{model:13s} {best_any:9.3f} " + " ".join(
                f"{'-' if reach[model][s] is None else reach[model][s]:>8}" for s in by_strategy))
        totals = {s: sum((reach[m][s] or budget + 1) for m in reach) for s in strategies}
        print(f"sum over {len(reach)} programs (never reached = budget+1): "
              + ", ".join(f"{s} {v}" for s, v in totals.items()))
        if reach and "model" in totals and "random" in totals:
            print(f"ratio model/random: {totals['model'] / totals['random']:.2f} (goal <= 0.33)")
        out[basis] = {"reach": reach, "totals": totals}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="convnet,attention_lm,mlp_mixer,resnet")
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--budget", type=int, default=12, help="measurements per strategy")
    parser.add_argument("--max-rounds", type=int, default=15)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--db", default="", help="store (default: a fresh temporary file)")
    parser.add_argument("--plot", default="", help="write the searches' plot here (.png/.svg)")
    parser.add_argument("--json", default="", help="also write the figures here")
    args = parser.parse_args()

    started = time.perf_counter()
    db = Path(args.db or tempfile.mkdtemp(prefix="xlaprobe-tune-")) / "tune.db" \
        if not args.db else Path(args.db)
    protocol = Protocol(min_rounds=min(8, args.max_rounds), max_rounds=args.max_rounds)
    results: dict[str, dict[str, object]] = {}
    ynn: dict[str, object] = {}
    with WorkerPool(size=1, timeout_s=900) as pool, Store(db) as store:
        for model in args.models.split(","):
            target = tune_target(model)
            results[model] = {}
            for strategy in args.strategies.split(","):
                t0 = time.perf_counter()
                result = tune(target, pool, store, strategy=strategy, budget=args.budget,
                              seed=args.seed, protocol=protocol, name=f"bench-{model}-{strategy}")
                results[model][strategy] = result
                print(f"{model:13s} {strategy:7s} best {_fmt(result.best and result.best.measurement):26s}"
                      f" replicated {_fmt(result.replicated):26s} accepted {result.accepted!s:5s} "
                      f"rejected {len(result.findings)}  A/A {_fmt(result.control)}  "
                      f"{time.perf_counter() - t0:.0f} s", flush=True)
            if "conv" in model or model == "resnet":
                m, _ = measure(pool, target.build({}), {}, YNN_DOTS, protocol=protocol)
                ynn[model] = m
        rows = store.measurements()
    # Label rows by program name for the held-out table.
    id_to_name = {tune_target(model).build({}).fingerprint: model for model in results}
    for row in rows:
        row["data"]["name"] = id_to_name.get(row["program_id"], row["program_id"][:8])

    reach = _reach_table(results, args.strategies.split(","), args.budget)

    held = {}
    for which, label in (("", "all measurements"),
                         ("random", "the random search's measurements (a uniform sample)")):
        print()
        print(f"cost model vs roofline, leave-one-program-out, tested on {label} "
              "(Kendall tau; top-k slowdown)")
        held[which or "all"] = table = _held_out(rows, which)
        print(f"{'program':13s} {'n':>3s} {'tau model':>9s} {'tau roof':>9s} {'top1 m':>7s} "
              f"{'top1 r':>7s} {'top5 m':>7s} {'top5 r':>7s}")
        for h in table:
            print(f"{h['program']:13s} {h['n']:3d} {h['model_tau']:9.3f} {h['roofline_tau']:9.3f} "
                  f"{h['model_top1']:7.3f} {h['roofline_top1']:7.3f} {h['model_top5']:7.3f} "
                  f"{h['roofline_top5']:7.3f}")
        if table:
            mean = {k: float(np.nanmean([h[k] for h in table])) for k in table[0]
                    if k not in ("program", "n")}
            print(f"{'mean':13s} {'':3s} {mean['model_tau']:9.3f} {mean['roofline_tau']:9.3f} "
                  f"{mean['model_top1']:7.3f} {mean['roofline_top1']:7.3f} "
                  f"{mean['model_top5']:7.3f} {mean['roofline_top5']:7.3f}   tau gain "
                  f"{mean['model_tau'] - mean['roofline_tau']:+.3f} (goal >= +0.2)")

    print()
    for model, m in ynn.items():
        print(f"YNNPACK dots only on {model}: {_fmt(m)} "
              f"({m.threads if m else '?'} CPUs, load {m.load[0] if m else float('nan'):.1f})")
    print(f"\nwall time {time.perf_counter() - started:.0f} s; store {db}")
    if args.plot:
        _plot(results, Path(args.plot))
    if args.json:
        Path(args.json).write_text(json.dumps({
            "results": {m: {s: r.to_json() for s, r in by.items()} for m, by in results.items()},
            "reach": reach, "held_out": held,
            "ynn": {m: (v.to_json() if v else None) for m, v in ynn.items()}}, indent=1))


def _plot(results: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(4 * len(results), 3.2), squeeze=False)
    for ax, (model, by_strategy) in zip(axes[0], results.items()):
        for strategy, result in by_strategy.items():
            ax.step([0] + [t.index for t in result.trials], [1.0] + [t.best for t in result.trials],
                    where="post", label=strategy)
        ax.set_title(model)
        ax.set_xlabel("measurements")
        ax.set_ylabel("best speedup so far")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)


if __name__ == "__main__":
    main()
