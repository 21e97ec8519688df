"""Fuzzing throughput: programs checked per second on this machine, and where the time goes.

Runs a campaign (`xlaprobe.campaign.Campaign`, a fresh temporary store) for a fixed time and
splits the capacity of the worker pool (wall time x jobs) into

* XLA compile+run: `Outcome.seconds` of the configurations that compile with XLA (xla, xla:*,
  eager, mutant:*), measured inside the workers;
* the NumPy reference (reference, and its error-budget runs: reference:native, reference:ftz, two
  Monte Carlo samples), also measured inside the workers;
* everything else: worker start-up (importing jax), moving programs and outputs between
  processes, idle workers while the parent generates, judges and stores.

xlaprobe's own overhead is everything but XLA compile+run. The parent's own work (generation,
judging, storing, artifacts) runs in threads beside the workers; it is timed too and printed
per program.

    python benchmarks/fuzz_throughput.py                       # 60 s, 2 jobs, default configs
    python benchmarks/fuzz_throughput.py --seconds 300 --jobs 2 --json out.json
"""

from __future__ import annotations

import argparse
import collections
import json
import sqlite3
import tempfile
import threading
import time
from pathlib import Path

from xlaprobe.campaign import Campaign, _is_xla
from xlaprobe.checking import DEFAULT_CONFIGS
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="campaign wall time (s)")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    parser.add_argument("--configs", default=DEFAULT_CONFIGS, help="configuration specs")
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()

    # Generation alone, in this process (it overlaps with the workers during a campaign).
    started = time.perf_counter()
    count = 30
    for seed in range(args.seed, args.seed + count):
        generate(seed)
    generate_alone_ms = (time.perf_counter() - started) / count * 1000

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "fuzz.db"
        campaign = _TimedCampaign(db, args.configs.split(","), seed=args.seed, jobs=args.jobs)
        first_result: list[float] = []
        wall_start = time.perf_counter()

        def progress(summary):
            if not first_result and summary.session_programs:
                first_result.append(time.perf_counter() - wall_start)
        try:
            summary = campaign.run(args.seconds, on_progress=progress)
        finally:
            campaign.close()
        wall = time.perf_counter() - wall_start
        state = campaign.state
        with sqlite3.connect(db) as conn:
            per_config = collections.defaultdict(list)
            for config, seconds in conn.execute("SELECT config, seconds FROM runs"):
                per_config[config].append(seconds)

    capacity = wall * args.jobs
    xla_s, reference_s = state.xla_seconds, state.reference_seconds
    programs = summary.session_programs
    figures = {
        "configs": args.configs, "jobs": args.jobs, "wall_s": round(wall, 2),
        "programs": programs, "programs_per_s": round(programs / wall, 3),
        "first_result_s": round(first_result[0], 2) if first_result else None,
        "generate_ms_per_program_alone": round(generate_alone_ms, 1),
        "generate_ms_per_program_in_campaign": round(campaign.generate_s / max(programs, 1) * 1000, 1),
        "record_ms_per_program": round(campaign.record_s / max(programs, 1) * 1000, 1),
        "xla_compile_run_s": round(xla_s, 2), "reference_s": round(reference_s, 2),
        "worker_capacity_s": round(capacity, 2),
        "xla_share": round(xla_s / capacity, 3),
        "reference_share": round(reference_s / capacity, 3),
        "other_share": round(1 - (xla_s + reference_s) / capacity, 3),
        "xlaprobe_overhead_share": round(1 - xla_s / capacity, 3),
        "mean_s_per_run": {c: round(sum(v) / len(v), 4) for c, v in sorted(per_config.items())},
        "findings": summary.findings, "unique_findings": summary.unique_findings,
        "coverage": f"{summary.covered}/{summary.catalogue}",
    }
    print(f"{programs} programs in {wall:.1f} s with {args.jobs} jobs: "
          f"{programs / wall:.2f} programs/s ({args.configs})")
    print(f"  first result after {figures['first_result_s']} s (worker start-up included)")
    print(f"  generation: {generate_alone_ms:.0f} ms/program alone, "
          f"{figures['generate_ms_per_program_in_campaign']:.0f} ms in the campaign (overlapped); "
          f"recording {figures['record_ms_per_program']:.0f} ms/program")
    print(f"  worker capacity {capacity:.1f} s = XLA compile+run {xla_s:.1f} s "
          f"({xla_s / capacity:.0%}) + NumPy reference {reference_s:.1f} s "
          f"({reference_s / capacity:.0%}) + other {capacity - xla_s - reference_s:.1f} s "
          f"({1 - (xla_s + reference_s) / capacity:.0%}: start-up, transfers, idle)")
    print(f"  xlaprobe's own overhead: {1 - xla_s / capacity:.0%} of worker capacity "
          f"(XLA : xlaprobe = {xla_s / max(capacity - xla_s, 1e-9):.2f})")
    for config, mean in figures["mean_s_per_run"].items():
        kind = "XLA" if _is_xla(config) else "NumPy"
        print(f"  {config:<32} {mean * 1000:8.1f} ms/run ({kind})")
    print(f"  findings {summary.findings} ({summary.unique_findings} unique), coverage "
          f"{figures['coverage']}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
