"""Fuzzing throughput: programs and equations checked per second under each schedule
(``all``: every configuration on every program; ``adaptive``: `xlaprobe.schedule`), side by side
in one run, and where the time goes.

One campaign per schedule (`xlaprobe.campaign.Campaign`, a fresh temporary store each, the same
first seed, so the same programs), each in a process of its own and all at the same time, so load
on a shared machine falls on both alike at every moment (``--alternate``: they take turns in
``--rounds`` slices of the budget instead, each slice resuming its campaign). The capacity of the
worker pool (wall time x jobs) of each is split into

* XLA compile+run: `Outcome.seconds` of the configurations that compile with XLA (xla, xla:*,
  eager, mutant:*), measured inside the workers;
* the NumPy reference (reference, and its error-budget runs: reference:native, reference:ftz, two
  Monte Carlo samples), also measured inside the workers;
* everything else: worker start-up (importing jax), moving programs and outputs between
  processes, idle workers while the parent generates, judges and stores.

Detection is compared on the seeds both campaigns checked (`same_seeds`): the distinct failures
each schedule found there, and those only one found.

xlaprobe's own overhead is everything but XLA compile+run. The parent's own work (generation,
judging, storing, artifacts) runs in threads beside the workers; it is timed too and printed
per program.

    python benchmarks/fuzz_throughput.py                 # 240 s each, 2 jobs, default configs
    python benchmarks/fuzz_throughput.py --seconds 300 --jobs 2 --json out.json
    python benchmarks/fuzz_throughput.py --schedules adaptive --seconds 60
"""

from __future__ import annotations

import argparse
import collections
import json
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from xlaprobe.campaign import Campaign
from xlaprobe.checking import DEFAULT_CONFIGS
from xlaprobe.schedule import check_schedule
from xlaprobe.sources.generator import generate


class _TimedCampaign(Campaign):
    """A campaign that also times the parent's generation and recording."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._lock = threading.Lock()
        self.generate_s = 0.0
        self.record_s = 0.0

    def _generate(self, seed):
        start = time.perf_counter()
        try:
            return super()._generate(seed)
        finally:
            with self._lock:
                self.generate_s += time.perf_counter() - start

    def _record(self, seed, program, result):
        start = time.perf_counter()
        try:
            super()._record(seed, program, result)
        finally:
            self.record_s += time.perf_counter() - start


def run_schedule(db, schedule, args, campaign_id, seconds, totals):
    """One slice of `seconds` of the campaign of `schedule` (a new one when `campaign_id` is
    None); adds wall time, programs, equations, generation and recording time to `totals`.

    Returns:
        The campaign id.
    """
    campaign = _TimedCampaign(db, args.configs.split(","), seed=args.seed, jobs=args.jobs,
                              schedule=schedule, campaign=campaign_id)
    wall_start = time.perf_counter()

    def on_program(seed, program, result):
        if program is not None:
            totals["equations"] += program.num_equations
            totals["tiers"][len(result.skipped) > 0] += 1
        if totals["first_result_s"] is None:
            totals["first_result_s"] = time.perf_counter() - wall_start
    try:
        summary = campaign.run(seconds, on_program=on_program)
    finally:
        campaign.close()
    totals["wall_s"] += time.perf_counter() - wall_start
    totals["programs"] += summary.session_programs
    totals["generate_s"] += campaign.generate_s
    totals["record_s"] += campaign.record_s
    totals["summary"] = summary
    return campaign.state.id


def _figures(schedule, db, totals, args):
    with sqlite3.connect(db) as conn:
        per_config = collections.defaultdict(list)
        for config, seconds in conn.execute("SELECT config, seconds FROM runs"):
            per_config[config].append(seconds)
        skipped = dict(conn.execute("SELECT config, COUNT(*) FROM skipped_runs GROUP BY config"))
        found = conn.execute(
            "SELECT p.seed, f.config, f.kind, f.fingerprint FROM findings f JOIN programs p "
            "ON p.id = f.program_id ORDER BY p.seed").fetchall()
        last_seed = conn.execute("SELECT MAX(seed) FROM programs").fetchone()[0]
    wall, programs, summary = totals["wall_s"], totals["programs"], totals["summary"]
    capacity = wall * args.jobs
    stage_s = {c: sum(v) for c, v in sorted(per_config.items())}
    honest = sum(s for c, s in stage_s.items() if c.startswith("reference"))
    stages = {c: round(s / capacity, 3) for c, s in stage_s.items()
              if not c.startswith("reference")}
    stages["reference (with its error budget)"] = round(honest / capacity, 3)
    stages["other (start-up, transfers, idle)"] = round(1 - sum(stage_s.values()) / capacity, 3)
    return {
        "schedule": schedule, "configs": args.configs, "jobs": args.jobs,
        "wall_s": round(wall, 2),
        "programs": programs, "programs_per_s": round(programs / wall, 3),
        "equations": totals["equations"],
        "equations_per_s": round(totals["equations"] / wall, 2),
        "first_result_s": round(totals["first_result_s"] or 0, 2),
        "generate_ms_per_program": round(totals["generate_s"] / max(programs, 1) * 1000, 1),
        "record_ms_per_program": round(totals["record_s"] / max(programs, 1) * 1000, 1),
        "worker_capacity_s": round(capacity, 2),
        "share_of_capacity": stages,
        "runs": {c: len(v) for c, v in sorted(per_config.items())
                 if not c.startswith("reference:")},
        "skipped_runs": skipped,
        "programs_with_a_skip": totals["tiers"][True],
        "mean_s_per_run": {c: round(sum(v) / len(v), 4) for c, v in sorted(per_config.items())},
        "findings": summary.findings, "unique_findings": summary.unique_findings,
        "finding_rows": [list(row) for row in found], "last_seed": last_seed,
        "coverage": f"{summary.covered}/{summary.catalogue}",
    }


def same_seeds(old, new):
    """Detection on the seeds both campaigns checked: the distinct failures (fingerprints, each
    with the configurations and kinds that showed it) found by each schedule, and which one
    schedule found alone. A failure the all-configurations schedule finds and the adaptive one
    misses on the same programs is a detection the adaptive schedule lost."""
    last = min(old["last_seed"] if old["last_seed"] is not None else -1,
               new["last_seed"] if new["last_seed"] is not None else -1)

    def families(figures):
        seen = {}
        for seed, config, kind, fingerprint in figures["finding_rows"]:
            if seed is not None and seed <= last:
                seen.setdefault(fingerprint, set()).add(f"{config} {kind}")
        return seen

    all_, adaptive = families(old), families(new)
    lost = sorted(set(all_) - set(adaptive))
    extra = sorted(set(adaptive) - set(all_))
    line = (f"same seeds (0..{last}): all found {len(all_)} distinct failures, adaptive "
            f"{len(adaptive)}; found by all only: "
            + (", ".join(f"{k} ({'; '.join(sorted(all_[k]))})" for k in lost) or "none")
            + "; by adaptive only: "
            + (", ".join(f"{k} ({'; '.join(sorted(adaptive[k]))})" for k in extra) or "none"))
    return {"last_seed": last, "all": len(all_), "adaptive": len(adaptive),
            "all_only": lost, "adaptive_only": extra, "line": line}


def _concurrently(schedules, args):
    """Each schedule's campaign in a process of its own, all at once: on a loaded machine both
    see the same load at every moment. Returns schedule -> figures."""
    with tempfile.TemporaryDirectory() as tmp:
        children = {}
        for schedule in schedules:
            out = Path(tmp) / f"{schedule}.json"
            command = [sys.executable, __file__, "--schedules", schedule, "--seconds",
                       str(args.seconds), "--rounds", str(args.rounds), "--jobs", str(args.jobs),
                       "--configs", args.configs, "--seed", str(args.seed), "--json", str(out),
                       "--child"]
            children[schedule] = (subprocess.Popen(command, stdout=subprocess.DEVNULL), out)
        for schedule, (child, _) in children.items():
            if child.wait() != 0:
                raise SystemExit(f"the {schedule} campaign failed (exit {child.returncode})")
        return {s: json.loads(out.read_text())[s] for s, (_, out) in children.items()}


def _alternating(schedules, args):
    """The schedules' campaigns taking turns (``--rounds`` slices each). Returns schedule ->
    figures."""
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        dbs = {s: Path(tmp) / f"fuzz-{s}.db" for s in schedules}
        ids = dict.fromkeys(schedules)
        totals = {s: {"wall_s": 0.0, "programs": 0, "equations": 0, "generate_s": 0.0,
                      "record_s": 0.0, "first_result_s": None, "tiers": [0, 0],
                      "summary": None} for s in schedules}
        for turn in range(args.rounds):
            order = schedules if turn % 2 == 0 else schedules[::-1]
            for schedule in order:
                ids[schedule] = run_schedule(dbs[schedule], schedule, args, ids[schedule],
                                             args.seconds / args.rounds, totals[schedule])
        for schedule in schedules:
            results[schedule] = _figures(schedule, dbs[schedule], totals[schedule], args)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=240.0,
                        help="campaign wall time per schedule (s)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="turns each schedule takes (the budget is split into them)")
    parser.add_argument("--schedules", default="all,adaptive", help="schedules to compare")
    parser.add_argument("--alternate", action="store_true",
                        help="run the schedules in turns, not at the same time")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    parser.add_argument("--configs", default=DEFAULT_CONFIGS, help="configuration specs")
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    schedules = [check_schedule(s) for s in args.schedules.split(",") if s]

    results = _concurrently(schedules, args) if len(schedules) > 1 and not args.alternate \
        else _alternating(schedules, args)
    if args.child:
        Path(args.json).write_text(json.dumps(results) + "\n")
        return
    # Generation alone, in this process (it overlaps with the workers during a campaign).
    started = time.perf_counter()
    count = 30
    for seed in range(args.seed, args.seed + count):
        generate(seed)
    generate_alone_ms = (time.perf_counter() - started) / count * 1000
    how = "in turns" if args.alternate or len(schedules) == 1 else "at the same time"
    print(f"{args.configs}, {args.jobs} jobs, {args.seconds:g} s per schedule ({how}, "
          f"{args.rounds} slice(s)), seed {args.seed}; generation {generate_alone_ms:.0f} "
          f"ms/program alone")
    for schedule, f in results.items():
        print(f"{schedule}: {f['programs']} programs ({f['equations']} equations) in "
              f"{f['wall_s']:.1f} s: {f['programs_per_s']:.2f} programs/s, "
              f"{f['equations_per_s']:.1f} equations/s; findings {f['findings']} "
              f"({f['unique_findings']} unique), coverage {f['coverage']}")
        print(f"  runs per configuration {f['runs']}; skipped {f['skipped_runs']} "
              f"({f['programs_with_a_skip']} programs skipped something)")
        print("  share of worker capacity: " + ", ".join(
            f"{c} {share:.0%}" for c, share in f["share_of_capacity"].items()))
        print("  mean per run: " + ", ".join(
            f"{c} {m * 1000:.0f} ms" for c, m in f["mean_s_per_run"].items()
            if not c.startswith("reference:")))
        print(f"  parent: generation {f['generate_ms_per_program']:.0f} ms/program "
              "(overlapped), "
              f"recording {f['record_ms_per_program']:.0f} ms/program")
    if "all" in results and "adaptive" in results:
        old, new = results["all"], results["adaptive"]
        ratio = new["programs_per_s"] / max(old["programs_per_s"], 1e-9)
        eq_ratio = new["equations_per_s"] / max(old["equations_per_s"], 1e-9)
        results["ratio"] = {"programs_per_s": round(ratio, 2),
                            "equations_per_s": round(eq_ratio, 2)}
        print(f"adaptive / all: {ratio:.2f}x programs/s, {eq_ratio:.2f}x equations/s "
              f"(goal >= 2x on 2 cores)")
        results["same_seeds"] = same_seeds(old, new)
        print(results["same_seeds"]["line"])
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
