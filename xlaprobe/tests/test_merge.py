"""``xlaprobe merge``: two seed shards merged hold what one campaign over their seeds stores,
finding for finding and check for check; merging again adds nothing; artifact directories travel
and are never overwritten; bad sources leave the destination untouched; and ``xlaprobe fuzz``
that checked nothing says so and exits 1."""

import hashlib
import json
import shutil
import sqlite3
import sys
from pathlib import Path

import numpy as np
import pytest

from xlaprobe import merge as merge_module
from xlaprobe.campaign import Campaign, list_campaigns
from xlaprobe.errors import InvalidArgument
from xlaprobe.merge import merge_stores
from xlaprobe.program import Program, Provenance
from xlaprobe.store import Store
from tests.stored import stored_findings

CONFIGS = ["xla", "reference", "mutant:swap-subtract-fused"]
SEEDS = 4


def _program(seed: int) -> Program:
    """A fused subtract (the mutant swaps its operands: a finding) except on seed 2."""
    rng = np.random.default_rng(seed)
    x, y = (rng.standard_normal(8).astype(np.float32) for _ in range(2))
    body = (lambda a, b: a * b + 1.0) if seed == 2 else (lambda a, b: (a - b) * 2.0 + 1.0)
    return Program.from_function(body, (x, y), Provenance("fuzz", f"fuzz:{seed}", seed))


class _Kept:
    """The session's worker pool, left open when a campaign closes its pool: three campaigns
    share its warm workers instead of starting their own (~2 s each per isolation group)."""

    def __init__(self, pool):
        self._pool = pool

    def __getattr__(self, name):
        return getattr(self._pool, name)

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def stores(tmp_path_factory, pool):
    """shard0/shard0.db and shard1/shard1.db (shards 0/2 and 1/2 of seeds 0..3), whole/whole.db
    (one campaign over seeds 0..3), each in its own folder with its artifacts; read-only."""
    root = tmp_path_factory.mktemp("stores")
    patch = pytest.MonkeyPatch()
    patch.setattr(Campaign, "_pool", lambda self: _Kept(pool))
    try:
        for name, shard, programs in (("shard0", (0, 2), 2), ("shard1", (1, 2), 2),
                                      ("whole", (0, 1), SEEDS)):
            campaign = Campaign(root / name / f"{name}.db", CONFIGS, seed=0, jobs=1,
                                source=_program, shard=shard)
            try:
                campaign.run(300.0, max_programs=programs)
            finally:
                campaign.close()
    finally:
        patch.undo()
    return root



def _checks(db: Path) -> list[tuple]:
    """Per check: program name, configurations, and its runs' (config, outcome, verdict kinds)."""
    with sqlite3.connect(db) as conn:
        checks = conn.execute("SELECT c.id, p.name, c.configs FROM checks c "
                              "JOIN programs p ON p.id = c.program_id").fetchall()
        return sorted((name, configs, tuple(sorted(
            (config, outcome, tuple(k for (k,) in conn.execute(
                "SELECT kind FROM verdicts WHERE run_id = ? ORDER BY output_index", (run,))))
            for run, config, outcome in conn.execute(
                "SELECT id, config, outcome FROM runs WHERE check_id = ?", (cid,)))))
            for cid, name, configs in checks)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_two_shards_merge_into_what_one_campaign_stores(stores, tmp_path, capsys):
    from xlaprobe.cli.campaigns import campaigns_command
    from xlaprobe.cli.findings import findings_command
    from xlaprobe.sources.targets import resolve_faulty

    shards = [stores / "shard0" / "shard0.db", stores / "shard1" / "shard1.db"]
    before = [_digest(s) for s in shards]
    merged = tmp_path / "merged" / "all.db"
    results = merge_stores(shards, merged)
    assert [_digest(s) for s in shards] == before  # sources are never written
    whole = stores / "whole" / "whole.db"
    expected = stored_findings(whole)
    assert [name for name, *_ in expected] == ["fuzz:0", "fuzz:1", "fuzz:3"]
    assert stored_findings(merged) == expected
    assert _checks(merged) == _checks(whole) and len(_checks(whole)) == SEEDS
    assert [r.added["checks"] for r in results] == [2, 2]
    assert all(r.added["fuzz_campaigns"] == 1 and r.findings_present == 0 for r in results)

    # Both shards' campaigns, each owning its own checks and findings, with shard and backend.
    records = list_campaigns(merged)
    assert [(r.shard, r.programs, r.checks, r.backend) for r in records] == [
        ((0, 2), 2, 2, "local"), ((1, 2), 2, 2, "local")]
    assert [r.findings for r in records] == [1, 2]  # seeds 0 | 1 and 3 (seed 2 passes)
    campaigns_command(db=merged, json_output=True)
    listed = json.loads(capsys.readouterr().out)
    assert [(c["shard"], c["backend"]) for c in listed] == [([0, 2], "local"), ([1, 2], "local")]
    findings_command(None, db=merged, json_output=True)
    rows = json.loads(capsys.readouterr().out)
    assert sorted(r["name"] for r in rows) == ["fuzz:0", "fuzz:1", "fuzz:3"]

    # A merged finding with an artifact resolves as xlaprobe localize ID resolves it: its
    # artifact was copied beside the merged store.
    with Store(merged) as store:
        saved = [f for f in store.stored_findings() if f.artifact]
    assert len(saved) == 2  # one artifact per fingerprint per campaign: one per shard
    for found in saved:
        assert Path(found.artifact).is_relative_to(merged.parent.resolve())
        program, config, finding_id = resolve_faulty(str(found.id), "", merged, "", "localize")
        assert (program.fingerprint, str(config), finding_id) == (
            found.program_id, "mutant:swap-subtract-fused", found.id)

    # Merging again (after either shard ran on, or by mistake) adds nothing.
    counts = {t: Store(merged).count(t) for t in ("programs", "checks", "runs", "verdicts",
                                                   "findings")}
    again = merge_stores(shards, merged)
    assert [r.rows for r in again] == [0, 0]
    assert [(r.checks_present, r.findings_present) for r in again] == [(2, 1), (2, 2)]
    assert {t: Store(merged).count(t) for t in counts} == counts
    assert len(list_campaigns(merged)) == 2


def test_merge_renames_a_different_artifact_directory_and_keeps_it(stores, tmp_path):
    shard = stores / "shard0" / "shard0.db"
    (name,) = [p.name for p in (stores / "shard0" / "artifacts").iterdir()]
    dest = tmp_path / "dest.db"
    other = tmp_path / "artifacts" / name
    other.mkdir(parents=True)
    (other / "note.txt").write_text("someone else's")
    (result,) = merge_stores([shard], dest)
    assert (result.artifacts_copied, result.artifacts_renamed) == (1, 1)
    assert (other / "note.txt").read_text() == "someone else's" and len(list(other.iterdir())) == 1
    with Store(dest) as store:
        (found,) = [f for f in store.stored_findings() if f.artifact]
    assert Path(found.artifact) == (tmp_path / "artifacts" / f"{name}-2").resolve()
    assert (Path(found.artifact) / "repro.py").is_file()
    # The same content under the name is reused, not copied again.
    (again,) = merge_stores([stores / "shard0" / "shard0.db"], tmp_path / "second.db")
    assert (again.artifacts_copied, again.artifacts_renamed) == (0, 1)


def test_an_interrupted_merge_leaves_the_destination_as_it_was(stores, tmp_path, monkeypatch):
    shards = [stores / "shard0" / "shard0.db", stores / "shard1" / "shard1.db"]
    dest = tmp_path / "dest.db"
    merge_stores(shards[:1], dest)
    with Store(dest) as store:
        before = {t: store.count(t) for t in ("programs", "checks", "runs", "findings")}
    real = merge_module._insert_all

    def interrupted(*args):
        real(*args)  # every row inserted, then Ctrl-C before the commit
        raise KeyboardInterrupt
    monkeypatch.setattr(merge_module, "_insert_all", interrupted)
    with pytest.raises(KeyboardInterrupt):
        merge_stores(shards[1:], dest)
    with Store(dest) as store:
        assert {t: store.count(t) for t in before} == before
    assert len(list((tmp_path / "artifacts").iterdir())) == 1  # shard1's copy was removed


def test_an_older_schema_source_is_read_without_migrating_it(stores, tmp_path):
    old = tmp_path / "old" / "schema3.db"
    old.parent.mkdir()
    shutil.copy(stores / "shard1" / "shard1.db", old)
    with sqlite3.connect(old) as conn:  # as a schema-3 store: no freedoms yet
        for table, dropped in (("findings", "freedom"), ("checks", "accepted")):
            kept = [r[1] for r in conn.execute(f"PRAGMA table_info({table})") if r[1] != dropped]
            conn.execute(f"CREATE TABLE old AS SELECT {', '.join(kept)} FROM {table}")
            conn.execute(f"DROP TABLE {table}")
            conn.execute(f"ALTER TABLE old RENAME TO {table}")
        conn.execute("UPDATE meta SET value = '3' WHERE key = 'schema'")
    digest = _digest(old)
    merge_stores([old], tmp_path / "dest.db")
    assert _digest(old) == digest
    assert stored_findings(tmp_path / "dest.db") == stored_findings(stores / "shard1" / "shard1.db")
    with sqlite3.connect(tmp_path / "dest.db") as conn:
        assert conn.execute("SELECT DISTINCT freedom FROM findings").fetchall() == [("",)]


def test_localizations_reductions_bisections_and_tuning_follow_their_finding(stores, tmp_path):
    source = tmp_path / "shard1" / "shard1.db"
    shutil.copytree(stores / "shard1", source.parent)
    with Store(source) as store:
        found = store.stored_findings()[0]
        reduced = source.parent / "reductions" / "r1"
        reduced.mkdir(parents=True)
        (reduced / "repro.py").write_text("print('reduced')\n")
        store.record_localization(found.program_id, found.id, found.config, {"op": "sub"}, "bug1")
        store.record_reduction(found.program_id, found.id, found.config, {"equations": 1},
                               str(reduced))
        store.record_bisection(found.program_id, found.id, found.config, {"first_bad": "0.4.35"})
        run = store.start_tuning_run("t", found.program_id, "random", 2, 0)
        for speedup in (1.5, 0.9):
            store.record_measurement(run, found.program_id, {"knob": speedup}, "ok", {},
                                     speedup=speedup)
        store.finish_tuning_run(run, {"accepted": True, "speedup": 1.5})
    dest = tmp_path / "dest" / "d.db"
    merge_stores([stores / "shard0" / "shard0.db", source], dest)  # shard0 first: ids shift
    with Store(dest) as store:
        merged = store.finding_of(found.program_id, found.config)
        assert merged.id != found.id and merged.bug == "bug1"
        assert [loc["op"] for loc in store.localizations(merged.id)] == ["sub"]
        (reduction,) = store.reductions(merged.id)
        assert (Path(reduction["directory"]) / "repro.py").read_text() == "print('reduced')\n"
        assert Path(reduction["directory"]).is_relative_to(dest.parent.resolve())
        assert [b["first_bad"] for b in store.bisections(merged.id)] == ["0.4.35"]
        assert store.tuning_result("t") == {"accepted": True, "speedup": 1.5}
        assert sorted(m["speedup"] for m in store.measurements()) == [0.9, 1.5]
    (again,) = merge_stores([source], dest)
    assert again.rows == 0


def test_a_shard_that_ran_on_brings_its_merged_campaign_up_to_date(stores, tmp_path):
    source = tmp_path / "shard0" / "shard0.db"
    shutil.copytree(stores / "shard0", source.parent)
    dest = tmp_path / "dest.db"
    merge_stores([source], dest)
    with sqlite3.connect(source) as conn:  # as if a --resume session had checked seeds 4 and 6
        conn.execute("UPDATE fuzz_campaigns SET next_seed = 8, updated = updated + 60, "
                     "state = json_set(state, '$.programs', 4)")
    (result,) = merge_stores([source], dest)
    assert (result.campaigns_updated, result.rows) == (1, 0)
    (record,) = list_campaigns(dest)
    assert (record.next_seed, record.programs, record.shard) == (8, 4, (0, 2))


def _cli(monkeypatch, capsys, *args: str) -> tuple[int, list[str]]:
    from xlaprobe.cli import main
    monkeypatch.setattr(sys, "argv", ["xlaprobe", *args])
    with pytest.raises(SystemExit) as exit_:
        main()
    return exit_.value.code, capsys.readouterr().err.strip().splitlines()


def test_bad_sources_are_one_line_errors_and_leave_the_destination_untouched(
        stores, tmp_path, monkeypatch, capsys):
    good = str(stores / "shard0" / "shard0.db")
    dest = tmp_path / "dest.db"
    (tmp_path / "notes.txt").write_text("not a database")
    with sqlite3.connect(tmp_path / "other.db") as conn:
        conn.execute("CREATE TABLE users (name TEXT)")
    newer = tmp_path / "newer.db"
    shutil.copy(good, newer)
    with sqlite3.connect(newer) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema'")
    for source, message in [
            (tmp_path / "missing.db", "no store at"),
            (tmp_path, "is not a store file"),
            (tmp_path / "notes.txt", "is not an xlaprobe store"),
            (tmp_path / "other.db", "is not an xlaprobe store"),
            (newer, "has schema 99, newer than this xlaprobe reads"),
            (dest.parent / "." / dest.name, "is the destination --db itself")]:
        code, lines = _cli(monkeypatch, capsys, "merge", good, str(source), "--db", str(dest))
        assert code == 2 and len(lines) == 1 and message in lines[0], (source, lines)
        assert not dest.exists()  # refused before the destination was made
    merge_stores([Path(good)], dest)
    digest = _digest(dest)
    code, lines = _cli(monkeypatch, capsys, "merge", good, str(tmp_path / "notes.txt"),
                       "--db", str(dest))
    assert code == 2 and len(lines) == 1 and _digest(dest) == digest
    broken = tmp_path / "broken.db"  # a check whose program row is gone
    shutil.copy(stores / "shard1" / "shard1.db", broken)
    with sqlite3.connect(broken) as conn:
        conn.execute("DELETE FROM programs WHERE name = 'fuzz:3'")
    code, lines = _cli(monkeypatch, capsys, "merge", str(broken), "--db", str(dest))
    assert code == 2 and len(lines) == 1 and "holds rows that name missing ones" in lines[0]
    with Store(dest) as store:
        assert store.count("checks") == 2  # shard0's only
    with pytest.raises(InvalidArgument, match="at least one source"):
        merge_stores([], dest)


def test_merge_command_prints_what_each_source_added(stores, tmp_path, monkeypatch, capsys):
    from xlaprobe.cli import main
    dest = tmp_path / "m.db"
    monkeypatch.setattr(sys, "argv", ["xlaprobe", "merge", str(stores / "shard1" / "shard1.db"),
                                      "--db", str(dest)])
    with pytest.raises(SystemExit) as exit_:
        main()
    lines = capsys.readouterr().out.strip().splitlines()
    assert exit_.value.code == 0
    assert lines[0].startswith(f"{stores / 'shard1' / 'shard1.db'}: 1 fuzz_campaigns, "
                               "2 programs, 2 checks, 6 runs, 6 verdicts, 4 run_passes, "
                               "2 findings (23 rows in ")
    assert lines[0].endswith("; 1 artifact directories copied")


def test_fuzz_that_checked_nothing_says_so_and_exits_1(tmp_path, capsys):
    from xlaprobe.cli.fuzz import fuzz_command

    code = fuzz_command(time_s=1e-9, configs="xla,reference", jobs=1, seed=0,
                        db=tmp_path / "f.db", resume=False, json_output=True)
    captured = capsys.readouterr()
    assert code == 1 and json.loads(captured.out)["session_programs"] == 0
    assert captured.err.strip().splitlines() == [
        "no program finished within --time 0.00 s (starting the workers and the first compiles "
        "take longer); nothing was checked: give more --time"]


def test_ctrl_c_says_the_source_in_flight_was_rolled_back(tmp_path, monkeypatch, capsys):
    # The rollback itself is tested above (a KeyboardInterrupt before the commit); the command
    # must not claim "results stored so far are kept" for the source it was copying.
    from xlaprobe.cli import merge as merge_cli

    def interrupted(sources, dest):
        raise KeyboardInterrupt

    monkeypatch.setattr(merge_cli, "merge_stores", interrupted)
    with pytest.raises(SystemExit) as exit_info:
        merge_cli.merge_command([tmp_path / "a.db"], db=tmp_path / "d.db", json_output=False)
    assert exit_info.value.code == 130
    assert "the source being merged was rolled back" in capsys.readouterr().err
