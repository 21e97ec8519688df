"""Fuzzing against mutant compilers: does a short campaign find each planted miscompilation?

For every mutant (`xlaprobe mutants`) and every schedule (``--schedules``, `xlaprobe.schedule`) a
campaign (`xlaprobe.campaign.Campaign`, a fresh temporary store, the same first seed for all) runs
the configurations ``--configs`` (default: the default campaign's ``xla,xla:O0,eager,reference``
with ``mutant:NAME`` added) for up to ``--time`` and stops at the first program where
``mutant:NAME`` is flagged and plain ``xla`` is not: a detection attributable to the planted fault.
The schedules' campaigns against one mutant run at the same time, each in a process of its own,
so both see the machine's load alike. A flag
without the mutant having fired (no mutation site reported, no crash) is counted apart as a false
alarm, not a detection.

Prints one row per mutant and schedule (found, seconds to the first detection, programs checked,
the verdict kind and where the mutant fired) and the detection rate over the mutants that must be
found per schedule, with the median seconds to the first detection. The
below-tolerance mutant (``constant-few-ulps``) must NOT be found and is reported apart; a false
alarm there is a failure of the oracle.

    python benchmarks/fuzz_mutants.py                          # 5 minutes per mutant at most
    python benchmarks/fuzz_mutants.py --time 60 --mutants swap-subtract-fused,crash-on-sort
    python benchmarks/fuzz_mutants.py --json out.json
    python benchmarks/fuzz_mutants.py --schedules adaptive --configs xla,MUTANT,reference
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from xlaprobe.campaign import Campaign, parse_duration
from xlaprobe.configs.mutants import MUTANTS
from xlaprobe.outcome import OutcomeKind
from xlaprobe.schedule import check_schedule

#: Mutants that must stay unflagged (their fault is below tolerance by design).
MUST_NOT_FIND = ("constant-few-ulps",)


class _DetectingCampaign(Campaign):
    """A campaign that watches each result for a detection attributable to its mutant.

    Attributes:
        mutant: the ``mutant:NAME`` spec watched.
        detection: None, or a dict (seed, verdict kind, failing outputs, fired sites, seconds since
            the campaign object was made) for the first program where the mutant is flagged, it
            fired, and plain ``xla`` is not flagged.
        unfired_flags: seeds of programs where the mutant was flagged without firing (false
            alarms).
        fired: programs on which the mutant fired (changed the compiled program or crashed).
    """

    def __init__(self, *args: Any, mutant: str, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.mutant = mutant
        self.detection: dict[str, Any] | None = None
        self.unfired_flags: list[int] = []
        self.fired = 0
        self.started = time.monotonic()

    def _record(self, seed: int, program: Any, result: Any) -> None:
        super()._record(seed, program, result)
        flagged = {f.config: f for f in result.findings}
        outcome = dict(zip(result.configs, result.outcomes))[self.mutant]
        fired = bool(outcome.mutations) or outcome.kind is OutcomeKind.CRASH
        self.fired += fired
        finding = flagged.get(self.mutant)
        if finding is None or "xla" in flagged or self.detection is not None:
            return
        if not fired:
            self.unfired_flags.append(seed)
            return
        self.detection = {
            "seed": seed, "kind": finding.kind.value, "outputs": list(finding.outputs),
            "equations": program.num_equations,
            "sites": [f"{m.opcode} {m.instruction} (eqn {m.equation})"
                      for m in outcome.mutations] or [outcome.error.strip().splitlines()[-1][:80]
                                                      if outcome.error.strip() else "crash"],
            "seconds": time.monotonic() - self.started}


def run_mutant(name: str, *, time_s: float, seed: int, jobs: int, db_dir: Path,
               schedule: str = "adaptive", configs: str = "xla,xla:O0,eager,MUTANT,reference"
               ) -> dict[str, Any]:
    """One campaign against ``mutant:NAME``.

    Args:
        name: a mutant name (`xlaprobe.configs.mutants.MUTANTS`).
        time_s: the campaign's wall-time budget (s).
        seed: its first generator seed.
        jobs: worker processes per isolation group.
        db_dir: directory for its store (``<name>-<schedule>.db``).
        schedule: ``adaptive`` or ``all``.
        configs: configuration specs, ``MUTANT`` standing for ``mutant:NAME``.

    Returns:
        A row: mutant, schedule, found (bool), seconds (to the first detection, or the campaign's
        wall time), programs (checked), programs_per_s, fired (programs the mutant fired on),
        unfired_flags (seeds), xla_findings (programs where plain xla was flagged), and the detection record (or None).
    """
    spec = f"mutant:{name}"
    specs = [spec if c == "MUTANT" else c for c in configs.split(",")]
    campaign = _DetectingCampaign(db_dir / f"{name}-{schedule}.db", specs, seed=seed,
                                  jobs=jobs, mutant=spec, schedule=schedule)
    started = time.monotonic()
    try:
        summary = campaign.run(time_s, stop=lambda: campaign.detection is not None)
    finally:
        campaign.close()
    wall = time.monotonic() - started
    detection = campaign.detection
    xla_flagged = sum(n for k, n in summary.verdicts.get("xla", {}).items()
                      if k not in ("ok", "ftz"))
    return {"mutant": name, "schedule": schedule, "found": detection is not None,
            "seconds": round(detection["seconds"] if detection else wall, 1),
            "programs": summary.programs, "programs_per_s": round(summary.programs / wall, 3),
            "fired": campaign.fired,
            "unfired_flags": campaign.unfired_flags, "xla_findings": xla_flagged,
            "detection": detection}


def _side_by_side(name: str, schedules: list[str], args: argparse.Namespace,
                  tmp: Path) -> list[dict[str, Any]]:
    """The campaigns of every schedule against ``mutant:NAME``, each in a process of its own and
    all at the same time (on a loaded machine both see the same load). Returns their rows."""
    children = []
    for schedule in schedules:
        out = tmp / f"{name}-{schedule}.json"
        command = [sys.executable, __file__, "--mutants", name, "--schedules", schedule,
                   "--time", args.time, "--seed", str(args.seed), "--jobs", str(args.jobs),
                   "--configs", args.configs, "--json", str(out), "--child"]
        children.append((schedule, subprocess.Popen(command), out))
    for schedule, child, _ in children:
        if child.wait() != 0:
            raise SystemExit(f"the {schedule} campaign against {name} failed "
                             f"(exit {child.returncode})")
    return [json.loads(out.read_text()) for _, _, out in children]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time", default="5m", help="budget per mutant: 300, 300s, 5m")
    parser.add_argument("--seed", type=int, default=0, help="first seed of every campaign")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes per group")
    parser.add_argument("--mutants", default="", help="comma-separated names (default: all)")
    parser.add_argument("--schedules", default="all,adaptive",
                        help="comma-separated schedules to compare (xlaprobe.schedule)")
    parser.add_argument("--configs", default="xla,xla:O0,eager,MUTANT,reference",
                        help="configuration specs; MUTANT stands for mutant:NAME")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    time_s = parse_duration(args.time)
    names = [n for n in args.mutants.split(",") if n] or list(MUTANTS)
    unknown = [n for n in names if n not in MUTANTS]
    if unknown:
        parser.error(f"unknown mutants {unknown}; known: {', '.join(MUTANTS)}")

    schedules = [check_schedule(s) for s in args.schedules.split(",") if s]
    if args.child:
        with tempfile.TemporaryDirectory(prefix="xlaprobe-fuzz-mutants-") as tmp:
            row = run_mutant(names[0], time_s=time_s, seed=args.seed, jobs=args.jobs,
                             db_dir=Path(tmp), schedule=schedules[0], configs=args.configs)
        Path(args.json).write_text(json.dumps(row) + "\n")
        return
    rows = []
    with tempfile.TemporaryDirectory(prefix="xlaprobe-fuzz-mutants-") as tmp:
        for name in names:
            for row in _side_by_side(name, schedules, args, Path(tmp)):
                rows.append(row)
                schedule = row["schedule"]
                where = (f"{row['detection']['kind']} on seed {row['detection']['seed']}: "
                         f"{'; '.join(row['detection']['sites'])[:90]}" if row["found"] else "")
                print(f"{name} ({schedule}): found={row['found']} after {row['seconds']} s, "
                      f"{row['programs']} programs, fired on {row['fired']} {where}",
                      file=sys.stderr, flush=True)

    print(f"configurations {args.configs} (MUTANT = mutant:NAME), budget {time_s:g} s per "
          f"campaign, seed {args.seed}, {args.jobs} job(s)")
    print(f"{'mutant':<32} {'schedule':<9} {'found':<6} {'s to first':>10} {'programs':>8} "
          f"{'prog/s':>7} {'fired':>6} {'xla flagged':>11} {'unfired':>7}  detection")
    for row in rows:
        d = row["detection"]
        detail = (f"{d['kind']} seed {d['seed']} ({d['equations']} eqns): "
                  f"{'; '.join(d['sites'])}"[:80] if d else "")
        seconds = f"{row['seconds']:.1f}" if row["found"] else "-"
        print(f"{row['mutant']:<32} {row['schedule']:<9} {'yes' if row['found'] else 'no':<6} "
              f"{seconds:>10} {row['programs']:>8} {row['programs_per_s']:>7.2f} "
              f"{row['fired']:>6} {row['xla_findings']:>11} {len(row['unfired_flags']):>7}  "
              f"{detail}")
    for schedule in schedules:
        scored = [r for r in rows
                  if r["mutant"] not in MUST_NOT_FIND and r["schedule"] == schedule]
        found = [r for r in scored if r["found"]]
        print(f"{schedule}: detection rate {len(found)}/{len(scored)} = "
              f"{len(found) / max(len(scored), 1):.0%} of the mutants that must be found; "
              f"seconds to first detection: median "
              f"{statistics.median(r['seconds'] for r in found) if found else math.nan:.1f}, "
              f"sum {sum(r['seconds'] for r in found):.1f}")
    for row in rows:
        if row["unfired_flags"]:
            print(f"{row['mutant']} ({row['schedule']}): flagged without firing on seeds "
                  f"{row['unfired_flags']} "
                  "(not detections)")
        if row["mutant"] in MUST_NOT_FIND:
            print(f"{row['mutant']} ({row['schedule']}, below tolerance, must not be found): "
                  f"{'FLAGGED (false alarm)' if row['found'] else 'not flagged, as it should'} "
                  f"in {row['programs']} programs, fired on {row['fired']}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
