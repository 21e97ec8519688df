"""Precision of a default fuzz campaign: how many of its distinct findings are real XLA bugs.

A campaign (`xlaprobe.campaign.Campaign`: the default configurations and schedule of
``xlaprobe fuzz``) runs for ``--time`` on seeds from ``--seed`` (pick a range nobody tuned the
oracle on), or ``--db`` names a store a campaign already filled (``--triage-only``). Then each
distinct finding (one per fingerprint, the first seed that showed it) is

- reduced (`xlaprobe.localization.reduce`) and the reduced program rechecked under
  ``xla,xla:O0,eager,reference``;
- localized (`xlaprobe.localization.localize`) on the reduced program (the original where
  reduction failed), giving its bug key after triage (`Localization.bug_key`: the failing
  operation and its dtype class; a crash or compile error keeps its signature key);
- classified: ``real`` (an XLA bug), ``legal`` (a difference the dtype or a freedom allows: the
  oracle's ``freedom:`` label) or ``oracle`` (the oracle's fault: the honest answer was flagged).
  Crashes, compile errors of valid programs and hangs are real; a labelled freedom is legal; a
  numeric finding that some XLA configuration computes right on the reduced program while another
  does not is real (XLA disagrees with itself beyond the budget). Others need a person: their
  class comes from ``--labels`` (JSON: fingerprint -> {"class", "bug", "evidence"}), else
  ``unclassified``.

Prints one row per fingerprint with its evidence, then the precision table: distinct findings,
each class, the real share (goal: at least 90%), distinct bugs (by ``--labels``' bug names,
else by localized key) and fingerprints and localized keys per distinct bug (goal 1.0).

    python benchmarks/precision.py --time 30m --seed 52000000 --jobs 2
    python benchmarks/precision.py --db campaign.db --triage-only --labels labels.json --json p.json
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

from xlaprobe.artifact import load_artifact
from xlaprobe.campaign import parse_duration
from xlaprobe.checking import DEFAULT_CONFIGS, check_program
from xlaprobe.localization import localize, make_pool
from xlaprobe.localization.reduce import reduce
from xlaprobe.sources.generator import generate
from xlaprobe.store import Store, StoredFinding

sys.path.insert(0, str(Path(__file__).parent))
from triage import _campaign as triage_campaign  # noqa: E402 - the same campaign loop

#: Verdict kinds that are XLA bugs whatever the numbers: the program is valid JAX.
ALWAYS_REAL = {"crash", "compile-error", "timeout"}


def _campaign(db: Path, time_s: float, seed: int, jobs: int) -> None:
    started = time.perf_counter()
    summary = triage_campaign(db, DEFAULT_CONFIGS.split(","), time_s, seed, False, jobs)
    elapsed = time.perf_counter() - started
    print(f"campaign: {summary.programs} programs in {elapsed:.0f} s "
          f"({summary.programs / max(elapsed, 1e-9):.2f} programs/s), "
          f"{summary.findings} finding rows, {summary.unique_findings} fingerprints", flush=True)


def _distinct(db: Path) -> dict[str, tuple[StoredFinding, int]]:
    """Per fingerprint: its first finding row and how many rows it has."""
    with Store(db, readonly=True) as store:
        rows = sorted(store.stored_findings(), key=lambda f: f.id)
    counts = collections.Counter(f.fingerprint for f in rows)
    first: dict[str, StoredFinding] = {}
    for f in rows:
        first.setdefault(f.fingerprint, f)
    return {fp: (f, counts[fp]) for fp, f in first.items()}


def _program(finding: StoredFinding) -> Any:
    if finding.artifact and Path(finding.artifact, "jaxpr.json").is_file():
        return load_artifact(finding.artifact)
    return generate(int(finding.name.split(":")[-1]))


def _auto_class(finding: StoredFinding, failing_reduced: list[str]) -> tuple[str, str]:
    """(class, evidence) decidable without a person, or ("", "") when one must look."""
    if finding.kind in ALWAYS_REAL:
        return "real", f"{finding.kind} of a valid JAX program"
    if finding.freedom:
        return "legal", f"freedom:{finding.freedom} (its evidence run reproduces XLA's answer)"
    xla = [c for c in DEFAULT_CONFIGS.split(",") if c != "reference"]
    right = [c for c in xla if c not in failing_reduced]
    if failing_reduced and right:
        return "real", (f"reduced program: {','.join(failing_reduced)} wrong, "
                        f"{','.join(right)} right: XLA disagrees with itself beyond the budget")
    return "", ""


def _triage_one(finding: StoredFinding, pool: Any, max_tests: int,
                timeout_s: float) -> dict[str, Any]:
    """Reduce, recheck and localize one finding: a row of evidence."""
    program = _program(finding)
    row: dict[str, Any] = {"fingerprint": finding.fingerprint, "seed": finding.name,
                           "config": finding.config, "kind": finding.label}
    started = time.perf_counter()
    check = check_program(program, [finding.config, "reference"], pool, timeout_s=timeout_s)
    again = [f for f in check.findings if f.config == finding.config]
    # The key of today's triage (the store's may be an older xlaprobe's).
    row["fingerprint_now"] = again[0].fingerprint if again else None
    if not again:
        row.update(failing_reduced=[], bug_key=None, reduce_error="not reproduced")
        return row
    try:
        # Each test of a crash restarts a worker: a smaller budget.
        budget = max_tests if finding.kind not in ("crash", "compile-error") else max_tests // 3
        reduction = reduce(program, finding.config, pool, check=check, timeout_s=timeout_s,
                           max_tests=budget)
        reduced = reduction.reduced
        row.update(equations=f"{reduction.equations_before}->{reduction.equations_after}",
                   primitives=sorted(set(reduction.primitives)),
                   dtypes=sorted({str(v.aval.dtype) for v in reduced.jaxpr.jaxpr.invars}))
        recheck = check_program(reduced, DEFAULT_CONFIGS.split(","), pool, timeout_s=timeout_s)
        row["failing_reduced"] = [f.config for f in recheck.findings]
        worst = [(v.config, v.output, v.expected, v.actual) for leaves in recheck.verdicts
                 for v in leaves if v.kind.is_finding][:1]
        row["worst"] = worst[0] if worst else None
        if finding.config in row["failing_reduced"]:
            program, check = reduced, None  # localize the smallest program that fails
    except Exception as exc:  # noqa: BLE001 - a benchmark row, not a crash of the run
        row.update(failing_reduced=[], reduce_error=f"{type(exc).__name__}: {str(exc)[:160]}")
    row["reduce_s"] = round(time.perf_counter() - started, 1)
    if finding.kind in ("crash", "compile-error"):
        # Their key is already the bug's (the check-failure line, the error message), and
        # localizing a crash restarts a worker for every run.
        row.update(bug_key=row["fingerprint_now"], localize="skipped: keyed by its signature")
        row["seconds"] = row["reduce_s"]
        return row
    try:
        loc = localize(program, finding.config, pool, check=check, timeout_s=timeout_s)
        row.update(bug_key=loc.bug_key(program, finding.alike), op=loc.op.opcode,
                   primitive=loc.equation.primitive, guilty_pass=loc.compiler_pass)
    except Exception as exc:  # noqa: BLE001
        row.update(bug_key=None, localize_error=f"{type(exc).__name__}: {str(exc)[:160]}")
    row["seconds"] = round(time.perf_counter() - started, 1)
    return row


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    classes = collections.Counter(r["class"] for r in rows)
    bugs: dict[str, set[str]] = collections.defaultdict(set)
    keys: dict[str, set[str]] = collections.defaultdict(set)
    for r in rows:
        if r["class"] == "real":
            name = r.get("bug") or r.get("bug_key") or r["fingerprint"]
            bugs[name].add(r.get("fingerprint_now") or r["fingerprint"])
            keys[name].add(r.get("bug_key") or r["fingerprint"])
    n = len(rows)
    return {"distinct_findings": n, "classes": dict(classes),
            "fingerprints_now": len({r.get("fingerprint_now") or r["fingerprint"] for r in rows}),
            "real_share": round(classes["real"] / n, 3) if n else None,
            "distinct_real_bugs": len(bugs),
            "fingerprints_per_bug": round(sum(map(len, bugs.values())) / len(bugs), 2)
            if bugs else None,
            "localized_keys_per_bug": round(sum(map(len, keys.values())) / len(keys), 2)
            if keys else None,
            "bugs": {b: sorted(f) for b, f in bugs.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time", default="30m", help="campaign wall time (90s, 10m, 1h)")
    parser.add_argument("--seed", type=int, default=52000000, help="first generator seed")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--db", help="store path (default: a temporary directory)")
    parser.add_argument("--triage-only", action="store_true",
                        help="triage the campaign already in --db; run none")
    parser.add_argument("--labels", help="JSON: fingerprint -> {class, bug, evidence}")
    parser.add_argument("--max-tests", type=int, default=120, help="reduction budget (checks)")
    parser.add_argument("--timeout", type=float, default=300.0, help="per-run limit (s)")
    parser.add_argument("--json", help="also write the rows and the summary to this file")
    parser.add_argument("--rows", help="a previous --json whose rows are reused by fingerprint "
                                       "(triage a growing campaign in steps)")
    args = parser.parse_args()
    labels = json.loads(Path(args.labels).read_text()) if args.labels else {}
    done = {r["fingerprint"]: r for r in json.loads(Path(args.rows).read_text())["rows"]} \
        if args.rows else {}
    with tempfile.TemporaryDirectory(prefix="xlaprobe-precision-") as tmp:
        db = Path(args.db) if args.db else Path(tmp) / "precision.db"
        if not args.triage_only:
            _campaign(db, parse_duration(args.time), args.seed, args.jobs)
        rows = []
        with make_pool(size=1, timeout_s=args.timeout) as pool:
            for finding, count in _distinct(db).values():
                row = done.get(finding.fingerprint) or _triage_one(
                    finding, pool, args.max_tests, args.timeout)
                row["rows"] = count
                auto = _auto_class(finding, row["failing_reduced"])
                given = labels.get(finding.fingerprint, {})
                row.update({"class": given.get("class") or auto[0] or "unclassified",
                            "bug": given.get("bug", ""),
                            "evidence": given.get("evidence") or auto[1],
                            "auto_class": auto[0]})
                rows.append(row)
                print(json.dumps(row, default=str), flush=True)
    summary = _summary(rows)
    print(f"distinct findings {summary['distinct_findings']}: {summary['classes']}; real share "
          f"{summary['real_share']}; distinct real bugs {summary['distinct_real_bugs']}, "
          f"fingerprints per bug {summary['fingerprints_per_bug']}, localized keys per bug "
          f"{summary['localized_keys_per_bug']}")
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": summary, "rows": rows}, indent=2,
                                              default=str))


if __name__ == "__main__":
    main()
