"""Fingerprints per bug and bugs per fingerprint, on campaigns whose findings a person labelled.

Every finding row of each ``--db`` store (a fuzz campaign's; its artifacts beside it) whose
stored fingerprint ``--labels`` (JSON: fingerprint -> {"class", "bug", ...}, as
``benchmarks/precision/labels_SEED.json``) calls ``real`` is keyed three ways:

- ``stored``: the fingerprint the campaign stored (the build that ran it);
- ``cone``: today's key before localization (`xlaprobe.triage.finding_key`: the failing outputs'
  cone), from a fresh check of the row's program under its configuration and ``reference``;
- ``exposed``: the key of the first wrong intermediate with every intermediate of the cone
  exposed at once and no walk back (the ablation), the cone key where it names none;
- ``first wrong``: the key of the first wrong intermediate
  (`xlaprobe.localization.first_wrong.first_wrong_key`: the full exposure, then the walk back
  where the exposure hid the fault), the cone key where it names none.

For each keying: fingerprints per distinct bug (goal 1.0: one bug, one key) and bugs per
fingerprint (goal 1.0: no key shared by two bugs), with the keys that merge or split bugs.

    python benchmarks/fingerprints.py --db /path/c2/campaign.db \\
        --labels benchmarks/precision/labels_61000000.json
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

from xlaprobe.artifact import load_artifact
from xlaprobe.checking import check_program
from xlaprobe.localization import make_pool
from xlaprobe.localization.first_wrong import first_wrong_key
from xlaprobe.sources.generator import generate

#: The keyings compared, oldest first.
KEYINGS = ("stored", "cone", "exposed", "first wrong")


def finding_rows(db: Path, labels: dict[str, Any]) -> list[dict[str, Any]]:
    """The store's real-labelled finding rows: program id, seed, config, stored key, bug,
    an artifact of the program (any of its rows') or None."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT f.program_id, p.seed, f.config, f.fingerprint, f.artifact "
                            "FROM findings f JOIN programs p ON p.id = f.program_id "
                            "ORDER BY f.id").fetchall()
    artifacts = {pid: art for pid, _, _, _, art in rows if art}
    return [{"program": pid, "seed": seed, "config": config, "stored": key,
             "bug": labels[key]["bug"], "artifact": artifacts.get(pid), "db": str(db)}
            for pid, seed, config, key, _ in rows
            if labels.get(key, {}).get("class") == "real"]


def key_rows(rows: list[dict[str, Any]], pool: Any) -> None:
    """Add the ``cone``, ``exposed`` and ``first wrong`` keys to each row (one check per
    program; the walk back only where the full exposure names nothing)."""
    by_program = collections.defaultdict(list)
    for row in rows:
        by_program[(row["db"], row["program"])].append(row)
    for group in by_program.values():
        first = group[0]
        program = load_artifact(Path(first["db"]).parent / first["artifact"]) \
            if first["artifact"] else generate(first["seed"])
        check = check_program(program, [*(r["config"] for r in group), "reference"], pool)
        found = {f.config: f for f in check.findings}
        for row in group:
            finding = found.get(row["config"])
            row["cone"] = finding.fingerprint if finding else "(no finding now)"
            exposed = first_wrong_key(program, row["config"], check, pool, walk_back=False) \
                if finding else None
            deep = exposed or (first_wrong_key(program, row["config"], check, pool)
                               if finding else None)
            row["exposed"], row["first wrong"] = exposed or row["cone"], deep or row["cone"]
            print(json.dumps({k: row[k] for k in ("seed", "config", "bug", *KEYINGS)}),
                  flush=True)


def figures(rows: list[dict[str, Any]], keying: str) -> dict[str, Any]:
    """Fingerprints per bug and bugs per fingerprint of one keying, with the offenders."""
    keys_of, bugs_of = collections.defaultdict(set), collections.defaultdict(set)
    for row in rows:
        keys_of[row["bug"]].add(row[keying])
        bugs_of[row[keying]].add(row["bug"])
    return {"rows": len(rows), "bugs": len(keys_of), "fingerprints": len(bugs_of),
            "fingerprints_per_bug": round(sum(map(len, keys_of.values())) / len(keys_of), 2),
            "bugs_per_fingerprint": round(sum(map(len, bugs_of.values())) / len(bugs_of), 2),
            "split": {b: len(k) for b, k in keys_of.items() if len(k) > 1},
            "merged": {k: sorted(b) for k, b in bugs_of.items() if len(b) > 1}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", action="append", required=True, help="a campaign's store")
    parser.add_argument("--labels", action="append", required=True,
                        help="JSON labels by stored fingerprint (one per --db, or one for all)")
    parser.add_argument("--json", help="also write the rows and the figures here")
    args = parser.parse_args()
    labels: dict[str, Any] = {}
    for path in args.labels:
        labels.update(json.loads(Path(path).read_text()))
    rows = [r for db in args.db for r in finding_rows(Path(db), labels)]
    with make_pool(size=1, timeout_s=300) as pool:
        key_rows(rows, pool)
    report = {keying: figures(rows, keying) for keying in KEYINGS}
    load = os.getloadavg()
    print(f"{len(rows)} real finding rows; load average {load[0]:.1f} on {os.cpu_count()} cores")
    for keying, f in report.items():
        print(f"  {keying:<12} {f['fingerprints']:>3} fingerprints for {f['bugs']} bugs: "
              f"{f['fingerprints_per_bug']} fingerprints per bug, {f['bugs_per_fingerprint']} "
              f"bugs per fingerprint; split {f['split']}; merged {f['merged']}")
    if args.json:
        Path(args.json).write_text(json.dumps({"figures": report, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
