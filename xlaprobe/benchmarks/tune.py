"""Tuning benchmark: the kernel-model-screened search vs random vs Optuna TPE (and optionally the
LambdaRank ``model`` strategy) on zoo and third-party zoo programs, and the kernel-level cost
model vs the analytical roofline, held out, on the kernel corpus.

Everything from one run on one machine, into one store: a copy of the kernel corpus store given
with ``--corpus`` (grown beforehand by ``xlaprobe tune-corpus``; the ``kernel`` strategy trains on
the other programs' entries only, never on the program it tunes). Printed:

* the corpus: entries, kernels (timed), sources, and how long it took to build;
* held out by program and by source (zoo / ecosystem / capture / fuzz): Kendall tau between the
  predicted and measured program times across each program's configurations, for the kernel
  model and for the roofline of ``cost_analysis()``; the model's median |log error| of program
  and kernel times per source;
* per program and strategy, the same budget: best speedup, its confirmation (paired,
  interleaved rounds of the defaults, the candidate and the defaults again in one fresh process,
  sign-test intervals: `xlaprobe.tune.confirm`) with the A/A interval of those same rounds,
  accepted (only a confirmed win beyond that A/A interval counts), candidates rejected by the
  guard; where no strategy has a confirmed win, that the defaults are best there;
* measurements each strategy needed to reach 90% of the best confirmed win (the ratio
  kernel/random is the figure of merit; goal <= 1/3), and the same by single measurement.

Every timing figure is printed with the 1-minute load average it was measured under.

    python benchmarks/tune.py --corpus .xlaprobe/xlaprobe.db                # all 8 programs
    python benchmarks/tune.py --corpus c.db --models convnet,keras_cnn --budget 4
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import tempfile
import time
from pathlib import Path


from xlaprobe.store import Store
from xlaprobe.tune.kernelmodel import held_out, mean_defined
from xlaprobe.tune.search import Guard, tune, tune_target
from xlaprobe.tune.measure import Protocol
from xlaprobe.workers import WorkerPool

MODELS = ("mlp_mixer,convnet,vit,keras_cnn,keras_mlp,equinox_cnn,haiku_transformer,"
          "jraph_gnn")


def _fmt(m) -> str:
    return "-" if m is None else f"{m.speedup:.3f} [{m.low:.3f},{m.high:.3f}]"


def _fmt_control(c) -> str:
    return "-" if c is None else f"{c.control:.3f} [{c.control_low:.3f},{c.control_high:.3f}]"


def _load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def _corpus_tables(entries: list[dict]) -> dict:
    """Print the corpus's size and the held-out tables (by program, by source); return them."""
    kernels = sum(len(e["kernels"]) for e in entries)
    timed = sum(k["time_s"] is not None for e in entries for k in e["kernels"])
    built = sum(e["data"].get("seconds", 0.0) for e in entries)
    sources = sorted({e["source"] for e in entries})
    print(f"kernel corpus: {len(entries)} entries (program x configuration) of "
          f"{len({e['name'] for e in entries})} programs ({', '.join(sources)}), {kernels} "
          f"kernels ({timed} timed); entries' wall time {built / 60:.1f} min "
          f"(0 when grown before it was recorded)")
    out = {}
    for by in ("program", "source"):
        rows = held_out(entries, by)
        out[by] = rows
        print(f"\nheld out by {by}: Kendall tau of predicted vs measured program time across "
              "configurations (mean over programs); median |log error| of program and kernel "
              "times")
        print(f"{'group':22s} {'source':10s} {'progs':>5s} {'tau model':>9s} {'tau roof':>9s} "
              f"{'err prog':>8s} {'err kern':>8s}")
        for r in rows:
            print(f"{r['group'][:22]:22s} {r['source']:10s} {r['programs']:5d} "
                  + (f"{r['model_tau']:9.3f} {r['roofline_tau']:9.3f} " if r["programs"] else
                     f"{'nothing to rank':>19s} ")
                  + f"{r['program_error']:8.3f} {r['kernel_error']:8.3f}")
        ranked = [r for r in rows if r["programs"]]
        if ranked:
            model = mean_defined([r["model_tau"] for r in ranked])
            roof = mean_defined([r["roofline_tau"] for r in ranked])
            print(f"{'mean':22s} {'':10s} {'':5s} {model:9.3f} {roof:9.3f}   tau gain "
                  f"{model - roof:+.3f} (goal >= +0.2)")
    return out


def _searches(args: argparse.Namespace, store: Store, protocol: Protocol) -> dict:
    """Every strategy on every program, printed one line each; returns the results."""
    results: dict[str, dict[str, object]] = {}
    with WorkerPool(size=1, timeout_s=900) as pool:
        for model in args.models.split(","):
            target = tune_target(model)
            guard = Guard(pool, 900)  # one float64 reference per program, for every strategy
            results[model] = {}
            for strategy in args.strategies.split(","):
                t0 = time.perf_counter()
                result = tune(target, pool, store, strategy=strategy, budget=args.budget,
                              seed=args.seed, protocol=protocol, name=f"bench-{model}-{strategy}",
                              guard=guard)
                results[model][strategy] = result
                print(f"{model:18s} {strategy:7s} best "
                      f"{_fmt(result.best and result.best.measurement):26s} confirmed "
                      f"{_fmt(result.replicated):26s} A/A {_fmt_control(result.replicated):24s} "
                      f"accepted {result.accepted!s:5s} rejected {len(result.findings)}  "
                      f"{time.perf_counter() - t0:.0f} s, {_load()}", flush=True)
            if not any(r.accepted for r in results[model].values()):
                print(f"{model:18s} defaults already best here: no strategy's best was "
                      "confirmed beyond the A/A interval of its paired rounds", flush=True)
    return results


def _reach_table(results: dict, strategies: list[str], budget: int) -> dict:
    """Measurements each strategy spent until its best-so-far reached 90% of the best speedup any
    strategy found, two ways: the best single measurement (noise included: on this machine a
    lone measurement's "win" of 10-20% can be noise), and the best *confirmed* win (the best
    whose confirmation in a fresh process was accepted, valued at its confirmed speedup; a
    strategy reaches it at the measurement that found a configuration so confirmed). A
    program with no confirmed win has nothing to reach for the second and is left out of its
    sums. Prints both tables; returns them."""
    out: dict[str, dict] = {}
    for basis in ("single measurement", "confirmed win"):
        print()
        print(f"measurements to reach 90% of the best speedup any strategy found, by {basis} "
              f"(budget {budget}; - never reached)")
        print(f"{'program':18s} {'best any':>9s} " + " ".join(f"{s:>8s}" for s in strategies))
        reach: dict[str, dict[str, int | None]] = {}
        for model, by_strategy in results.items():
            if basis == "confirmed win":
                wins = [r.replicated.speedup for r in by_strategy.values()
                        if r.accepted and r.replicated is not None]
            else:
                wins = [r.best.measurement.speedup for r in by_strategy.values() if r.best]
            best_any = max(wins, default=1.0)
            if best_any <= 1.0:
                print(f"{model:18s} {'none':>9s} (no speedup to reach)")
                continue
            target = 1.0 + 0.9 * (best_any - 1.0)
            if basis == "confirmed win":
                # the measurement that found a configuration whose *confirmed* win reaches the
                # target (a search measurement's figure may lie above or below its confirmation)
                reach[model] = {s: r.best.index if r.accepted and r.best is not None
                                and r.replicated.speedup >= target else None
                                for s, r in by_strategy.items()}
            else:
                reach[model] = {s: r.measurements_to_reach(target)
                                for s, r in by_strategy.items()}
            print(f"{model:18s} {best_any:9.3f} " + " ".join(
                f"{'-' if reach[model][s] is None else reach[model][s]:>8}" for s in by_strategy))
        totals = {s: sum((reach[m][s] or budget + 1) for m in reach) for s in strategies}
        print(f"sum over {len(reach)} programs (never reached = budget+1): "
              + ", ".join(f"{s} {v}" for s, v in totals.items()))
        for guided in ("kernel", "model"):
            if reach and guided in totals and "random" in totals:
                print(f"ratio {guided}/random: {totals[guided] / totals['random']:.2f} "
                      "(goal <= 0.33)")
        out[basis] = {"reach": reach, "totals": totals}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", required=True, help="store holding the kernel corpus "
                        "(copied; the copy takes the measurements)")
    parser.add_argument("--models", default=MODELS)
    parser.add_argument("--strategies", default="kernel,tpe,random")
    parser.add_argument("--budget", type=int, default=6, help="measurements per strategy")
    parser.add_argument("--min-rounds", type=int, default=4)
    parser.add_argument("--max-rounds", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot", default="", help="write the searches' plot here (.png/.svg)")
    parser.add_argument("--json", default="", help="also write the figures here")
    parser.add_argument("--corpus-only", action="store_true", help="print the corpus and its "
                        "held-out tables only (no searches)")
    args = parser.parse_args()

    started = time.perf_counter()
    with Store(args.corpus, readonly=True) as source:
        entries = source.corpus()
    print(f"start: {_load()}", flush=True)
    held = _corpus_tables(entries)
    print(flush=True)
    if args.corpus_only:
        return
    db = Path(tempfile.mkdtemp(prefix="xlaprobe-tune-")) / "tune.db"
    print(f"searches into {db}", flush=True)
    source_db, copy_db = sqlite3.connect(args.corpus), sqlite3.connect(db)
    source_db.backup(copy_db)  # with what the WAL holds, unlike a file copy
    source_db.close()
    copy_db.close()
    protocol = Protocol(min_rounds=min(args.min_rounds, args.max_rounds),
                        max_rounds=args.max_rounds)
    with Store(db) as store:
        results = _searches(args, store, protocol)
    reach = _reach_table(results, args.strategies.split(","), args.budget)
    print(f"\nwall time {time.perf_counter() - started:.0f} s, end {_load()}")
    if args.plot:
        _plot(results, Path(args.plot))
    if args.json:
        Path(args.json).write_text(json.dumps({
            "results": {m: {s: r.to_json() for s, r in by.items()} for m, by in results.items()},
            "reach": reach, "held_out": held}, indent=1))


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
