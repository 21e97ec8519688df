"""The kernel-level cost model against the roofline on a kernel corpus, held out, with ablations.

Reads a store grown by ``xlaprobe tune-corpus`` and prints, held out by program and by source
(zoo / ecosystem / capture / fuzz), the mean Kendall tau of predicted vs measured program time
across each held-out program's configurations for every variant beside the roofline of
``cost_analysis()``, and the held-out median |log error| of program and kernel times per source:

* ``kernel``: the shipped model (LightGBM regression per kernel on its HLO features, composed
  with the floor and per-kernel overhead: `xlaprobe.tune.kernelmodel.ProgramModel`);
* ``sum``: the same kernels composed as a plain sum (no floor, no per-kernel term);
* ``config``: the configuration's indicators as kernel features too (the default before
  2026-12-03's corpus showed they cost held-out tau);
* ``rank``: LambdaRank over per-program summed kernel features (`RankModel`);
* ``measured``: the held-out entries' *measured* kernel times composed (a diagnostic: what a
  perfect kernel model would reach through this composition; not a predictor).

    python benchmarks/tune_model.py --corpus /tmp/corpus.db
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import time
from pathlib import Path

import numpy as np

from xlaprobe.store import Store
from xlaprobe.tune.kernelmodel import ProgramModel, RankModel, held_out, mean_defined

VARIANTS = {
    "kernel": ProgramModel,
    "sum": functools.partial(ProgramModel, overheads=False),
    "config": functools.partial(ProgramModel, config=True),
    "rank": RankModel,
    "measured": functools.partial(ProgramModel, measured=True),
}


def _corpus_summary(entries: list[dict]) -> None:
    kernels = sum(len(e["kernels"]) for e in entries)
    timed = sum(k["time_s"] is not None for e in entries for k in e["kernels"])
    built = sum(e["data"].get("seconds", 0.0) for e in entries)
    loads = [v for e in entries for v in e["data"].get("load", ())]
    per_program: dict[str, int] = {}
    for e in entries:
        per_program[e["name"]] = per_program.get(e["name"], 0) + 1
    print(f"corpus: {len(entries)} entries of {len(per_program)} programs, {kernels} kernels "
          f"({timed} timed); entries' wall time {built / 60:.1f} min "
          f"({kernels / max(built / 60, 1e-9):.0f} kernels/min), load while built "
          f"{min(loads, default=0):.1f}-{max(loads, default=0):.1f}")
    print("configurations per program: " + ", ".join(f"{k} {v}" for k, v in
                                                     sorted(per_program.items())))


def _table(entries: list[dict], by: str, variants: list[str], seed: int) -> dict:
    rows = {v: {r["group"]: r for r in held_out(entries, by, seed, VARIANTS[v])}
            for v in variants}
    groups = sorted(rows[variants[0]])
    print(f"\nheld out by {by}: Kendall tau of predicted vs measured program time across "
          "configurations (mean over programs)")
    print(f"{'group':18s} {'source':9s} " + " ".join(f"{v:>9s}" for v in variants)
          + f" {'roofline':>9s}")
    for g in groups:
        first = rows[variants[0]][g]
        print(f"{g[:18]:18s} {first['source']:9s} "
              + " ".join(f"{rows[v][g]['model_tau']:9.3f}" for v in variants)
              + f" {first['roofline_tau']:9.3f}")
    means = {v: mean_defined([rows[v][g]["model_tau"] for g in groups]) for v in variants}
    roof = mean_defined([rows[variants[0]][g]["roofline_tau"] for g in groups])
    print(f"{'mean':18s} {'':9s} " + " ".join(f"{means[v]:9.3f}" for v in variants)
          + f" {roof:9.3f}")
    print("gain over the roofline: " + ", ".join(f"{v} {means[v] - roof:+.3f}" for v in variants)
          + " (goal >= +0.2)")
    return {"rows": {v: list(r.values()) for v, r in rows.items()}, "mean": means,
            "roofline": roof}


def _errors(table: dict, variants: list[str]) -> None:
    print("\nheld out by program, median |log error| per source: program time / kernel time")
    by_source: dict[str, dict[str, list]] = {}
    for v in variants:
        for r in table["rows"][v]:
            by_source.setdefault(r["source"], {}).setdefault(v, []).append(
                (r["program_error"], r["kernel_error"]))
    for source, per in sorted(by_source.items()):
        print(f"{source:10s} " + "  ".join(
            f"{v} {np.nanmedian([p for p, _ in per[v]]):.2f}/"
            f"{np.nanmedian([k for _, k in per[v]]):.2f}" for v in variants if v in per))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", required=True, help="store holding the kernel corpus")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default="", help="also write the figures here")
    args = parser.parse_args()
    started = time.perf_counter()
    print(f"start: load {os.getloadavg()[0]:.1f}")
    with Store(args.corpus, readonly=True) as store:
        entries = store.corpus()
    _corpus_summary(entries)
    variants = args.variants.split(",")
    tables = {by: _table(entries, by, variants, args.seed) for by in ("program", "source")}
    _errors(tables["program"], [v for v in variants if v != "rank"])
    print(f"\nwall time {time.perf_counter() - started:.0f} s, end load {os.getloadavg()[0]:.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps(tables, indent=1, default=float))


if __name__ == "__main__":
    main()
