"""Triage on a fuzz campaign: finding rows, fingerprints, and distinct bugs after localization.

A campaign (`xlaprobe.campaign.Campaign`, a fresh store) runs for ``--time`` with configurations
that include planted faults (mutant compilers: the ground truth of which bug a row is). Then one
finding per fingerprint (the first seed that showed it) is localized (`xlaprobe.localization`, all
tiers) and its localized bug key (`Localization.bug_key`: the failing operation, its dtypes, the
guilty pass, the planted fault) is stored, which every row of that fingerprint takes
(`Store.record_localization`). Prints one line per fingerprint (rows, configuration, kind, the
localized operation and bug key) and the summary the triage is judged by: finding rows,
fingerprints before localization, distinct bugs after, and for each planted fault how many keys
it got (the goal: one per planted fault on one dtype; a real fault of XLA, or a false alarm, is
listed as such).

    python benchmarks/triage.py                                  # 30-minute campaign (+ triage)
    python benchmarks/triage.py --time 5m --max-localize 10
    python benchmarks/triage.py --db t.db --resume --time 20m    # continue a campaign, then triage
    python benchmarks/triage.py --json triage.json
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from xlaprobe.campaign import Campaign, parse_duration
from xlaprobe.localization import localize, make_pool
from xlaprobe.sources.generator import generate
from xlaprobe.store import Store
from xlaprobe.triage import planted_fault

#: Real configurations plus three planted faults: a fused subtract, a reduction's initial value,
#: and a compiler crash (crash signatures are triaged too).
DEFAULT_CONFIGS = ("xla,eager,reference,mutant:swap-subtract-fused,mutant:reduce-wrong-init,"
                   "mutant:crash-on-sort")


def _campaign(db: Path, configs: list[str], time_s: float, seed: int, resume: bool,
              jobs: int = 1) -> Any:
    campaign = Campaign(db, configs, seed=seed, jobs=jobs, resume=resume)
    last = [0.0]

    def progress(summary: Any) -> None:
        if time.monotonic() - last[0] >= 30:
            last[0] = time.monotonic()
            print(f"  {summary.elapsed_s:5.0f} s: {summary.programs} programs, "
                  f"{summary.findings} findings, {summary.unique_findings} fingerprints",
                  file=sys.stderr, flush=True)
    try:
        return campaign.run(time_s, on_progress=progress)
    finally:
        campaign.close()


def _localize_one(db: Path, fingerprint: str, seed: int, config: str, pool: Any,
                  timeout_s: float) -> dict[str, Any]:
    program = generate(seed)
    started = time.perf_counter()
    try:
        loc = localize(program, config, pool, timeout_s=timeout_s)
    except Exception as exc:  # noqa: BLE001 - a benchmark row, not a crash of the run
        return {"fingerprint": fingerprint, "seed": seed, "config": config, "bug": None,
                "error": f"{type(exc).__name__}: {str(exc)[:200]}",
                "seconds": round(time.perf_counter() - started, 1)}
    with Store(db) as store:
        found = store.finding_of(program.fingerprint, config)
        bug = loc.bug_key(program, found.alike if found is not None else ())
        store.record_localization(program.fingerprint, found.id if found else None, config,
                                  loc.to_json(), bug)
    return {"fingerprint": fingerprint, "seed": seed, "config": config, "bug": bug,
            "primitive": loc.equation.primitive, "equation": loc.equation.index, "pass": loc.compiler_pass,
            "op": loc.op.opcode, "flaky": loc.flaky,
            "seconds": round(time.perf_counter() - started, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time", default="30m", help="campaign wall time (90s, 10m, 1h)")
    parser.add_argument("--configs", default=DEFAULT_CONFIGS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-localize", type=int, default=400,
                        help="fingerprints localized at most (the first seen)")
    parser.add_argument("--timeout", type=float, default=300.0, help="per-run limit (s)")
    parser.add_argument("--db", help="store path (default: a temporary directory)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the campaign in --db for --time more, then triage")
    parser.add_argument("--localize-time", default="40m",
                        help="stop localizing after this long (the rest stay fingerprints)")
    parser.add_argument("--json", help="also write the rows and the summary to this file")
    args = parser.parse_args()
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    with tempfile.TemporaryDirectory(prefix="xlaprobe-triage-") as tmp:
        db = Path(args.db) if args.db else Path(tmp) / "triage.db"
        started = time.perf_counter()
        summary = _campaign(db, configs, parse_duration(args.time), args.seed, args.resume)
        campaign_s = time.perf_counter() - started
        print(f"campaign: {summary.programs} programs in {campaign_s:.0f} s, "
              f"{summary.findings} finding rows, {summary.unique_findings} fingerprints",
              flush=True)
        rows = []
        with make_pool(size=1, timeout_s=args.timeout) as pool:
            stop_at = time.monotonic() + parse_duration(args.localize_time)
            for fingerprint, (count, seed, config, kind) in list(
                    summary.fingerprints.items())[:args.max_localize]:
                if time.monotonic() > stop_at:
                    break
                row = _localize_one(db, fingerprint, seed, config, pool, args.timeout)
                row.update(rows_with_fingerprint=count, kind=kind)
                rows.append(row)
                print(f"{fingerprint} x{count:<3} {config:28} {kind:13} -> "
                      f"{row.get('primitive') or '-':14} op {row.get('op') or '-':12} "
                      f"pass {row.get('pass') or '-':14} "
                      f"bug {row['bug'] or '(' + row.get('error', 'not localized')[:60] + ')'}"
                      f"  [{row['seconds']} s]", flush=True)
        with Store(db) as store:
            findings = store.findings()
            bugs = store.distinct_bugs()
    by_fault: dict[str, set[str]] = collections.defaultdict(set)
    for f in findings:
        alike = f["alike"] if isinstance(f["alike"], list) else str(f["alike"] or "").split(",")
        # A mutant's finding that a configuration without a planted fault shares is a real fault.
        by_fault[planted_fault(f["config"], alike) or "(no planted fault)"].add(
            f["bug"] or f["fingerprint"])
    result = {"campaign_s": round(campaign_s, 1), "programs": summary.programs,
              "finding_rows": len(findings), "fingerprints": len(summary.fingerprints),
              "localized": sum(r["bug"] is not None for r in rows), "distinct_bugs": bugs,
              "keys_per_fault": {k: len(v) for k, v in sorted(by_fault.items())}}
    print(f"finding rows {result['finding_rows']}, fingerprints {result['fingerprints']}, "
          f"localized {result['localized']}/{len(rows)}, distinct bugs after triage "
          f"{result['distinct_bugs']}")
    for fault, keys in result["keys_per_fault"].items():
        print(f"  {fault}: {keys} key(s)")
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": result, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
