"""Optimization coverage side by side: the plain generator against the one steered by coverage
(``xlaprobe fuzz --steer coverage``), and what recording coverage costs.

Three fuzz campaigns run at the same time on the same machine, each in a process of its own with
a fresh store, the same configurations, first seed and ``--time`` (so load falls on all alike):

* ``plain``: the plain generator, coverage recorded (the default);
* ``plain-nocov``: the same programs with ``XLAPROBE_COVERAGE=0`` (the overhead's baseline:
  programs/s, and XLA compile+run seconds of the ``xla`` runs of the programs both checked);
* ``steered``: ``--steer coverage``.

Then, as a reference, the zoo (and the third-party zoo workloads whose libraries are installed)
checked under ``xla``. Printed: passes that changed a module (union), rewrite kinds fired,
programs/s, findings and distinct fingerprints, and the ratios steered / plain (goal: 2x the
passes and rewrites per hour at no drop in programs/s beyond 20%) and plain / plain-nocov.

    python benchmarks/coverage.py --seconds 600            # 3 campaigns x 10 min at once
    python benchmarks/coverage.py --seconds 120 --no-zoo --json out.json
    python benchmarks/coverage.py --seconds 600 --keep runs/   # keep the stores to triage
    python benchmarks/coverage.py --seconds 900 --arms plain,steered --no-zoo --keep runs/

Findings are counted per arm as in a hunt: distinct bugs (fingerprints grouped by their
first-wrong bug key), of which known (`xlaprobe.known_bugs`: the key of a regression case) and
new, per hour; and, for the steered arm, by where the program came from: the plain generator's
share (``fresh``), patterns and mutations, and re-runs at special input values (``special``).
    python benchmarks/coverage.py --overhead 100        # the cost of coverage per compile
    COVERAGE_ON=passes python benchmarks/coverage.py --overhead 100   # passes only
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from xlaprobe.coverage_summary import store_coverage
from xlaprobe.known_bugs import split_bugs

ARMS = {"plain": ([], "1"), "plain-nocov": ([], "0"), "steered": (["--steer", "coverage"], "1")}


def _start(name: str, folder: Path, seconds: float, configs: str, seed: int) -> subprocess.Popen:
    extra, switch = ARMS[name]
    env = dict(os.environ, XLAPROBE_COVERAGE=switch)
    command = [sys.executable, "-m", "xlaprobe.cli", "-q", "fuzz", "--time", str(seconds),
               "--configs", configs, "--seed", str(seed), "--db", str(folder / f"{name}.db"),
               "--json", *extra]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _xla_seconds(db: Path) -> dict[str, float]:
    """program id -> seconds of its ``xla`` run."""
    import sqlite3
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return dict(conn.execute("SELECT c.program_id, r.seconds FROM runs r JOIN checks c ON "
                                 "c.id = r.check_id WHERE r.config = 'xla' AND r.outcome = 'ran'"))


def _origin(name: str) -> str:
    """Where a fuzz program came from: ``fresh`` (``fuzz:<seed>``), ``special`` or the arm."""
    if not name.startswith("steer:"):
        return "fresh"
    arm = name.split(":", 2)[2]
    return "special" if arm == "special" else arm.split(":")[0]


def findings_by_bug(db: Path) -> dict:
    """The store's findings as a hunt counts them: distinct, known and new bugs (all, and per
    program origin, `_origin`), with one program name per bug key."""
    import sqlite3
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT p.name, f.fingerprint, coalesce(f.bug, ''), f.kind, f.config "
                            "FROM findings f JOIN programs p ON p.id = f.program_id "
                            "WHERE f.kind != 'freedom' ORDER BY f.id").fetchall()
    bugs = {fp: bug for _, fp, bug, _, _ in rows if bug}
    split = split_bugs({fp: None for _, fp, _, _, _ in rows}, bugs)
    origins: dict[str, dict] = {}
    for origin in sorted({_origin(name) for name, *_ in rows}):
        mine = {fp: None for name, fp, *_ in rows if _origin(name) == origin}
        part = split_bugs(mine, bugs)
        origins[origin] = {"findings": sum(_origin(n) == origin for n, *_ in rows),
                           "distinct": part["distinct"], "new": len(part["new"])}
    example = {}
    for name, fp, bug, kind, config in rows:
        example.setdefault(bug or fp, f"{name} {config} {kind}")
    return {"distinct": split["distinct"], "known": split["known"], "new": split["new"],
            "origins": origins, "examples": example}


def _row(name: str, summary: dict, db: Path, seconds: float) -> dict:
    _, total = store_coverage(db)
    hours = seconds / 3600.0
    bugs = findings_by_bug(db)
    return {"arm": name, "programs": summary["programs"],
            "programs_per_s": summary["programs_per_s"], "findings": summary["findings"],
            "distinct": summary["unique_findings"], "passes_changed": len(total.changed),
            "rewrite_kinds": len(total.rewrites), "passes_ran": len(total.ran),
            "ran": sorted(total.ran),
            "passes_per_hour": len(total.changed) / hours,
            "rewrites_per_hour": len(total.rewrites) / hours,
            "bugs": bugs["distinct"], "known_bugs": len(bugs["known"]),
            "new_bugs": len(bugs["new"]), "bugs_per_hour": bugs["distinct"] / hours,
            "new_bugs_per_hour": len(bugs["new"]) / hours, "bug_detail": bugs,
            "changed": sorted(total.changed), "rewrites": sorted(total.rewrites)}


def campaigns(folder: Path, seconds: float, configs: str, seed: int,
              arms: tuple[str, ...] = tuple(ARMS)) -> dict[str, dict]:
    """Run the campaigns of `arms` at once; their rows by arm."""
    procs = {name: _start(name, folder, seconds, configs, seed) for name in arms}
    rows = {}
    for name, proc in procs.items():
        out, err = proc.communicate()
        if proc.returncode not in (0, 1):
            raise SystemExit(f"{name} failed ({proc.returncode}): {err[-2000:]}")
        rows[name] = _row(name, json.loads(out), folder / f"{name}.db", seconds)
    if "plain-nocov" not in rows or "plain" not in rows:
        return rows
    plain, nocov = _xla_seconds(folder / "plain.db"), _xla_seconds(folder / "plain-nocov.db")
    common = sorted(set(plain) & set(nocov))
    rows["plain"]["xla_s_common"] = sum(plain[p] for p in common)
    rows["plain-nocov"]["xla_s_common"] = sum(nocov[p] for p in common)
    rows["plain"]["common_programs"] = rows["plain-nocov"]["common_programs"] = len(common)
    return rows


def zoo_reference(folder: Path, timeout_s: float) -> dict:
    """The zoo's and installed third-party zoo workloads' coverage under ``xla``."""
    from xlaprobe.sources.ecosystem import ECOSYSTEM
    from xlaprobe.sources.models import SMALL
    db = folder / "zoo.db"
    checked, skipped = [], []
    for name in [*SMALL, *ECOSYSTEM]:
        run = subprocess.run([sys.executable, "-m", "xlaprobe.cli", "-q", "check", name,
                              "--configs", "xla", "--db", str(db)], capture_output=True,
                             text=True, timeout=timeout_s)
        (checked if run.returncode in (0, 1, 4) else skipped).append(name)
    groups, total = store_coverage(db) if db.exists() else ([], None)
    return {"checked": checked, "skipped": skipped,
            "groups": [g.to_json() for g in groups],
            "passes_changed": len(total.changed) if total else 0,
            "rewrite_kinds": len(total.rewrites) if total else 0,
            "changed": sorted(total.changed) if total else [],
            "ran": sorted(total.ran) if total else []}


def overhead(programs: int, seed: int) -> dict:
    """Coverage's cost per compile, measured in one process: two worker pools, one started with
    coverage on and one with ``XLAPROBE_COVERAGE=0``, run ``xla`` on the same generated programs
    in alternating order (so load drifts fall on both). Wall time per run includes reading and
    parsing the log; worker seconds are XLA compile+run only."""
    from xlaprobe.coverage import ENV_SWITCH
    from xlaprobe.sources.generator import generate
    from xlaprobe.workers import WorkerPool

    pools, warm = {}, generate(10 ** 6, max_equations=3)
    for name, switch in (("on", os.environ.get("COVERAGE_ON", "1")), ("off", "0")):
        os.environ[ENV_SWITCH] = switch
        pools[name] = WorkerPool(1, timeout_s=300)
        pools[name].run(warm, "xla")  # starts the worker with this setting
    os.environ.pop(ENV_SWITCH)
    wall = {"on": 0.0, "off": 0.0}
    worker = {"on": 0.0, "off": 0.0}
    try:
        for number in range(programs):
            program = generate(seed + number, max_equations=30)
            for name in (("on", "off") if number % 2 else ("off", "on")):
                started = time.perf_counter()
                outcome = pools[name].run(program, "xla")
                wall[name] += time.perf_counter() - started
                worker[name] += outcome.seconds
    finally:
        for pool in pools.values():
            pool.close()
    return {"programs": programs, "wall_s": wall, "worker_s": worker,
            "wall_ratio": wall["on"] / wall["off"], "worker_ratio": worker["on"] / worker["off"]}


def reach(rows: dict[str, dict], zoo: dict | None) -> dict[str, list[str]]:
    """The denominator of pass coverage: passes that ran in any compile of any arm (and the zoo),
    those any of them changed, and those that ran everywhere and never changed a module."""
    parts = [*rows.values(), *([zoo] if zoo else [])]
    ran = set().union(*(set(p.get("ran", ())) for p in parts))
    changed = set().union(*(set(p.get("changed", ())) for p in parts))
    return {"ran": sorted(ran), "changed": sorted(changed), "never": sorted(ran - changed)}


def _print_bugs(rows: dict[str, dict]) -> None:
    print(f"{'arm':12} {'bugs':>5} {'known':>5} {'new':>4} {'bugs/h':>7} {'new/h':>6}  by origin "
          "(findings/distinct/new)")
    for r in rows.values():
        origins = ", ".join(f"{o} {v['findings']}/{v['distinct']}/{v['new']}"
                            for o, v in r["bug_detail"]["origins"].items())
        print(f"{r['arm']:12} {r['bugs']:5d} {r['known_bugs']:5d} {r['new_bugs']:4d} "
              f"{r['bugs_per_hour']:7.1f} {r['new_bugs_per_hour']:6.1f}  {origins}")
    for r in rows.values():
        detail = r["bug_detail"]
        for key, example in detail["examples"].items():
            known = {r["key"]: r["cases"] for r in detail["known"]}
            label = "known: " + ", ".join(known[key]) if key in known else "NEW"
            print(f"  {r['arm']:10} {key} {label}: {example}")


def _print(rows: dict[str, dict], zoo: dict | None, seconds: float) -> None:
    print(f"{'arm':12} {'programs':>8} {'prog/s':>7} {'passes':>7} {'rewrites':>8} "
          f"{'passes/h':>9} {'rewr/h':>7} {'findings':>8} {'distinct':>8}")
    for r in rows.values():
        print(f"{r['arm']:12} {r['programs']:8d} {r['programs_per_s']:7.3f} "
              f"{r['passes_changed']:7d} {r['rewrite_kinds']:8d} {r['passes_per_hour']:9.1f} "
              f"{r['rewrites_per_hour']:7.1f} {r['findings']:8d} {r['distinct']:8d}")
    _print_bugs(rows)
    if "plain" not in rows or "steered" not in rows:
        return
    plain, steered = rows["plain"], rows["steered"]
    ratio = lambda a, b: a / b if b else float("nan")  # noqa: E731
    print(f"steered / plain: passes {ratio(steered['passes_changed'], plain['passes_changed']):.2f}x"
          f", rewrites {ratio(steered['rewrite_kinds'], plain['rewrite_kinds']):.2f}x, "
          f"programs/s {ratio(steered['programs_per_s'], plain['programs_per_s']):.2f}x "
          f"(each over {seconds:g} s)")
    nocov = rows.get("plain-nocov")
    if nocov is not None:
        print(f"coverage overhead: programs/s plain / nocov "
              f"{ratio(plain['programs_per_s'], nocov['programs_per_s']):.3f}; xla compile+run s "
              f"on {plain['common_programs']} common programs "
              f"{ratio(plain['xla_s_common'], nocov['xla_s_common']):.3f}x")
    print("passes only the steered changed: "
          + ", ".join(sorted(set(steered["changed"]) - set(plain["changed"]))))
    print("passes only the plain changed: "
          + ", ".join(sorted(set(plain["changed"]) - set(steered["changed"]))))
    if zoo is not None:
        print(f"zoo reference ({len(zoo['checked'])} workloads under xla; skipped "
              f"{', '.join(zoo['skipped']) or 'none'}): {zoo['passes_changed']} passes, "
              f"{zoo['rewrite_kinds']} rewrite kinds")
    union = reach(rows, zoo)
    print(f"passes that ran in any compile: {len(union['ran'])}; changed by any arm or the zoo: "
          f"{len(union['changed'])}; plain {rows['plain']['passes_changed']} "
          f"({rows['plain']['passes_changed'] / max(len(union['changed']), 1):.0%} of them)")
    print("ran, never changed by anything here: " + ", ".join(union["never"]))


def main() -> None:
    """Parse arguments, run, print (and write --json)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=600.0, help="each campaign's --time")
    parser.add_argument("--configs", default="xla,reference")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-zoo", action="store_true", help="skip the zoo reference")
    parser.add_argument("--arms", default=",".join(ARMS),
                        help=f"comma-separated campaigns to run at once, of {', '.join(ARMS)}")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="keep the campaigns' stores and findings' artifacts in DIR (to "
                             "triage them); default: a temporary folder, removed")
    parser.add_argument("--overhead", type=int, metavar="N",
                        help="only the overhead: N programs compiled with coverage on and off, "
                             "alternating, in one process")
    args = parser.parse_args()
    if args.overhead:
        print(f"load before: {os.getloadavg()}", flush=True)
        result = overhead(args.overhead, args.seed)
        print(f"coverage on / off over {args.overhead} programs: wall per run (log parse "
              f"included) {result['wall_ratio']:.3f}x, XLA compile+run in the worker "
              f"{result['worker_ratio']:.3f}x; load after: {os.getloadavg()}")
        print(json.dumps(result, indent=2))
        return
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    with (contextlib.nullcontext(str(args.keep)) if args.keep
          else tempfile.TemporaryDirectory(prefix="xlaprobe-coverage-bench-")) as tmp:
        started = time.time()
        print(f"load before: {os.getloadavg()}", flush=True)
        arms = tuple(a for a in args.arms.split(",") if a)
        if not arms or set(arms) - set(ARMS):
            parser.error(f"--arms takes names of {', '.join(ARMS)}, got {args.arms!r}")
        rows = campaigns(Path(tmp), args.seconds, args.configs, args.seed, arms)
        print(f"load after campaigns: {os.getloadavg()}", flush=True)
        zoo = None if args.no_zoo else zoo_reference(Path(tmp), 900.0)
        _print(rows, zoo, args.seconds)
        if args.json:
            args.json.write_text(json.dumps({"rows": rows, "zoo": zoo, "reach": reach(rows, zoo),
                                             "seconds": args.seconds,
                                             "wall_s": time.time() - started}, indent=2))


if __name__ == "__main__":
    main()
