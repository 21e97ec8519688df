"""``xlaprobe merge`` throughput: rows/s of merging a shard's store into another, side by side
with `Store.record_check` writing the same checks (the driver's own store throughput,
docs/scaling.md).

A quick campaign (``--programs`` generated programs under ``--configs``, with a planted mutant so
some checks carry findings and artifact directories) makes a shard store in a temporary
directory; its checks are then recorded again, cycled, until the store holds ``--checks`` checks
(one `Store.record_check` each: timed, the baseline). The store is merged ``--repeats`` times into
a fresh destination (timed: rows/s over every table), into one holding a first shard already (ids
remapped above the existing ones), and once more into a destination that has it (the idempotent
re-merge: nothing new).

    python benchmarks/merge_stores.py                    # 12 programs, 300 checks, 3 repeats
    python benchmarks/merge_stores.py --checks 2000 --json out.json
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from xlaprobe.campaign import Campaign
from xlaprobe.merge import merge_stores
from xlaprobe.store import Store


def _rows(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        tables = [n for (n,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%'")]
        return sum(conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in tables)


def _shard(root: Path, name: str, configs: list[str], programs: int, checks: int,
           seed: int) -> tuple[Path, dict]:
    """A shard store of `checks` checks: a campaign of `programs`, then its checks recorded
    again; returns its path and the record_check timing."""
    db = root / name / f"{name}.db"
    results = []
    campaign = Campaign(db, configs, seed=seed, jobs=1)
    try:
        campaign.run(3600.0, max_programs=programs,
                     on_program=lambda s, p, r: results.append(r) if r is not None else None)
        campaign_id = campaign.state.id
    finally:
        campaign.close()
    extra = max(0, checks - len(results))
    before = _rows(db)
    with Store(db) as store:
        start = time.perf_counter()
        for i in range(extra):
            store.record_check(results[i % len(results)], campaign=campaign_id)
        seconds = time.perf_counter() - start
    rows = _rows(db) - before
    return db, {"checks": extra, "rows": rows, "seconds": seconds,
                "rows_per_s": rows / seconds if seconds else float("nan")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=12)
    parser.add_argument("--checks", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--configs", default="xla,reference,mutant:swap-subtract-fused")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    configs = args.configs.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        shard, record = _shard(root, "shard1", configs, args.programs, args.checks, seed=1000)
        rows = _rows(shard)
        fresh = []
        for i in range(args.repeats):
            (result,) = merge_stores([shard], root / f"fresh{i}" / "merged.db")
            fresh.append(result)
        # Into a destination holding another shard: ids remapped above its own.
        other, _ = _shard(root, "shard0", configs, 2, 2, seed=0)
        dest = root / "onto" / "merged.db"
        merge_stores([other], dest)
        (onto,) = merge_stores([shard], dest)
        (again,) = merge_stores([shard], dest)
    seconds = statistics.median(r.seconds for r in fresh)
    report = {
        "source_rows": rows, "source_checks": args.checks,
        "merge_rows": fresh[0].rows, "merge_s_median": seconds,
        "merge_rows_per_s": fresh[0].rows / seconds,
        "merge_checks_per_s": fresh[0].added.get("checks", 0) / seconds,
        "merge_onto_rows_per_s": onto.rows / onto.seconds,
        "remerge_s": again.seconds, "remerge_rows": again.rows,
        "artifacts_copied": fresh[0].artifacts_copied,
        "record_check": record,
        "merge_over_record_check": (fresh[0].rows / seconds) / record["rows_per_s"],
    }
    print(f"source store: {args.checks} checks, {rows} rows, {fresh[0].artifacts_copied} "
          f"artifact directories")
    print(f"merge into a fresh store: {seconds * 1000:.0f} ms (median of {args.repeats}): "
          f"{report['merge_rows_per_s']:,.0f} rows/s, {report['merge_checks_per_s']:,.0f} "
          "checks/s")
    print(f"merge onto another shard's store: {report['merge_onto_rows_per_s']:,.0f} rows/s")
    print(f"merge again (nothing new): {again.seconds * 1000:.0f} ms, {again.rows} rows added")
    print(f"Store.record_check of the same checks: {record['rows_per_s']:,.0f} rows/s "
          f"({record['checks']} checks); merge / record_check = "
          f"{report['merge_over_record_check']:.0f}x")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
