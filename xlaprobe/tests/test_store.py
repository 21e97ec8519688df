"""The SQLite store: what record_check reports as stored survives a kill of the process."""

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from xlaprobe.checking import judge
from xlaprobe.errors import CorruptArtifact, InvalidArgument
from xlaprobe.outcome import Outcome, OutcomeKind
from xlaprobe.program import Program, Provenance
from xlaprobe.store import Store


def _program():
    return Program.from_function(lambda x: x * 2, (np.arange(3, dtype=np.float32),),
                                 Provenance("user", "double"))


def _result(program, wrong=False):
    right = (np.arange(3) * 2.0,)
    outcomes = [Outcome("xla", OutcomeKind.RAN, (np.array([0, 2, 5 if wrong else 4], np.float32),)),
                Outcome("reference", OutcomeKind.RAN, right)]
    return judge(program, ["xla", "reference"], outcomes)


def _record(store, result):
    return store.record_check(result)


def test_record_and_query(tmp_path):
    program = _program()
    with Store(tmp_path / "db.sqlite") as store:
        ok_id = _record(store, _result(program))
        assert store.count("findings") == 0
        bad_id = _record(store, _result(program, wrong=True))
        assert store.count("checks") == 2 and store.count("programs") == 1
        assert store.count("runs") == 4 and store.count("verdicts") == 4
        [finding] = store.findings()
        assert (finding["config"], finding["kind"], finding["name"]) == ("xla", "mismatch", "double")
        assert [v.kind.value for v in store.verdicts(bad_id)] == ["mismatch", "ok"]
        assert [v.kind.value for v in store.verdicts(ok_id)] == ["ok", "ok"]
        _record(store, _result(program, wrong=True))  # the same finding again: deduplicated
        assert store.count("findings") == 1


def test_kill_after_record_loses_nothing(tmp_path):
    db = tmp_path / "db.sqlite"
    script = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from test_store import _program, _result, _record
        from xlaprobe.store import Store
        store = Store({str(db)!r})
        _record(store, _result(_program(), wrong=True))
        print("stored", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL and "stored" in proc.stdout
    with Store(db) as store:
        assert store.count("findings") == 1 and store.count("verdicts") == 2


def test_bad_paths(tmp_path):
    with pytest.raises(InvalidArgument):
        Store(tmp_path)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(CorruptArtifact):
        Store(junk)


def test_a_database_of_something_else_is_left_alone(tmp_path):
    import sqlite3
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE users (name TEXT)")
    with pytest.raises(CorruptArtifact, match="something else.*users"):
        Store(other)
    with sqlite3.connect(other) as db:  # no tables added, journal mode unchanged
        assert [r[0] for r in db.execute("SELECT name FROM sqlite_master")] == ["users"]
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_a_busy_store_is_called_busy_not_corrupt(tmp_path, monkeypatch):
    import sqlite3
    import xlaprobe.store as store_mod
    path = tmp_path / "x.db"
    Store(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    real_connect = sqlite3.connect
    monkeypatch.setattr(store_mod.sqlite3, "connect",
                        lambda *a, **k: real_connect(*a, **{**k, "timeout": 0.1}))
    try:
        with pytest.raises(InvalidArgument, match="busy"):
            Store(path)
    finally:
        holder.execute("ROLLBACK")
        holder.close()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
def test_a_full_disk_is_called_full_not_a_foreign_database(tmp_path):
    # /dev/full fails every write with ENOSPC: SQLite's own SQLITE_FULL on a real device. The
    # store is not "not an xlaprobe database" (move it away, and its results were lost for
    # nothing): the error stays the disk's, which the command line prints as one line.
    from xlaprobe.errors import disk_full
    path = tmp_path / "x.db"
    path.symlink_to("/dev/full")
    with pytest.raises(sqlite3.OperationalError, match="disk is full") as raised:
        Store(path)
    assert disk_full(raised.value)


def test_rechecking_a_finding_keeps_its_id_and_draws_no_new_one(tmp_path):
    """Finding ids are dense: a re-check updates its finding in place, and the next new finding
    gets the next id (SQLite's upsert used to draw an id each time: 1, 2, 5, ...). Ids already
    stored, gaps included, are never renumbered."""
    double, triple = _program(), Program.from_function(
        lambda x: x * 3, (np.arange(3, dtype=np.float32),), Provenance("user", "triple"))
    wrong_triple = judge(triple, ["xla", "reference"], [
        Outcome("xla", OutcomeKind.RAN, (np.float32([0, 3, 7]),)),
        Outcome("reference", OutcomeKind.RAN, (np.arange(3) * 3.0,))])
    db = tmp_path / "db.sqlite"
    with Store(db) as store:
        for _ in range(3):
            _record(store, _result(double, wrong=True))
        _record(store, wrong_triple)
        assert sorted((f["id"], f["name"]) for f in store.findings()) == [
            (1, "double"), (2, "triple")]
    conn = sqlite3.connect(db)  # a store with a gap from the old upsert: ids stay as they are
    with conn:
        conn.execute("UPDATE findings SET id = 5 WHERE id = 2")
        conn.execute("UPDATE sqlite_sequence SET seq = 5 WHERE name = 'findings'")
    conn.close()
    with Store(db) as store:
        _record(store, wrong_triple)
        assert sorted(f["id"] for f in store.findings()) == [1, 5]
        _record(store, _result(Program.from_function(
            lambda x: x * 4, (np.arange(3, dtype=np.float32),), Provenance("user", "q")),
            wrong=True))
        assert sorted(f["id"] for f in store.findings()) == [1, 5, 6]


def test_a_finding_is_looked_up_by_id_with_what_followed_it(tmp_path):
    program = _program()
    with Store(tmp_path / "db.sqlite") as store:
        _record(store, _result(program, wrong=True))
        [row] = store.findings()
        found = store.finding(row["id"])
        assert (found.config, found.kind, found.alike, found.bug) == ("xla", "mismatch", ("xla",), None)
        assert store.finding(row["id"] + 1) is None
        assert store.finding_of(program.fingerprint, "xla") == found
        store.record_localization(program.fingerprint, found.id, "xla", {"equation": 0}, "k1")
        store.record_reduction(program.fingerprint, found.id, "xla", {"equations_after": 1},
                               str(tmp_path / "reductions" / "r"))
        assert store.finding(found.id).bug == "k1" and store.distinct_bugs() == 1
        assert store.localizations(found.id)[0]["equation"] == 0
        assert store.reductions(found.id)[0]["directory"] == str(tmp_path / "reductions" / "r")


def test_artifact_paths_are_relative_to_the_store(tmp_path, monkeypatch):
    program = _program()
    db = tmp_path / "store" / "db.sqlite"
    artifact = tmp_path / "store" / "artifacts" / "a"
    artifact.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    with Store(Path("store") / "db.sqlite") as store:
        store.record_check(_result(program, wrong=True), {"xla": str(Path("store/artifacts/a"))})
    raw = sqlite3.connect(db).execute("SELECT artifact FROM findings").fetchone()[0]
    assert raw == str(Path("artifacts") / "a")
    monkeypatch.chdir(artifact)  # from anywhere else, the store still finds it
    with Store(db) as store:
        assert store.findings()[0]["artifact"] == str(artifact)


def _schema_1_store(db):
    """A store as schema 1 wrote it: findings without the alike and bug columns."""
    conn = sqlite3.connect(db)
    conn.executescript("""
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO meta VALUES ('schema', '1');
        CREATE TABLE programs (id TEXT PRIMARY KEY, source TEXT NOT NULL, name TEXT NOT NULL,
            seed INTEGER, input_spec TEXT NOT NULL, num_equations INTEGER NOT NULL, artifact TEXT,
            created REAL NOT NULL);
        CREATE TABLE findings (id INTEGER PRIMARY KEY AUTOINCREMENT, program_id TEXT NOT NULL,
            config TEXT NOT NULL, kind TEXT NOT NULL, fingerprint TEXT NOT NULL, artifact TEXT,
            check_id INTEGER NOT NULL, created REAL NOT NULL, UNIQUE (program_id, config));
        INSERT INTO programs VALUES ('p', 'user', 'old', NULL, '', 1, NULL, 0);
        INSERT INTO findings VALUES (1, 'p', 'xla', 'mismatch', 'f00d', NULL, 1, 0);
    """)
    conn.commit()
    conn.close()
    return db


def test_a_schema_1_store_is_upgraded_in_place(tmp_path):
    db = _schema_1_store(tmp_path / "old.db")
    with Store(db) as store:
        found = store.finding(1)
        assert (found.fingerprint, found.alike, found.bug, found.bug_key) == ("f00d", (), None, "f00d")
        assert store.count("localizations") == 0
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT value FROM meta").fetchone()[0] == "4"
    # Schema 3: checks name their campaign (NULL for checks stored before).
    assert "campaign" in {r[1] for r in conn.execute("PRAGMA table_info(checks)")}
    # Schema 4: a check's accepted freedoms, a finding's freedom labels ('' before).
    assert "accepted" in {r[1] for r in conn.execute("PRAGMA table_info(checks)")}
    assert conn.execute("SELECT freedom FROM findings").fetchone()[0] == ""


def test_a_bug_key_reaches_every_finding_of_its_fingerprint(tmp_path):
    other = Program.from_function(lambda x: x * 2, (np.arange(1, 4, dtype=np.float32),),
                                  Provenance("user", "double too"))
    with Store(tmp_path / "db.sqlite") as store:
        _record(store, _result(_program(), wrong=True))
        right = (np.arange(1, 4) * 2.0,)
        _record(store, judge(other, ["xla", "reference"], [
            Outcome("xla", OutcomeKind.RAN, (np.array([2, 4, 7], np.float32),)),
            Outcome("reference", OutcomeKind.RAN, right)]))
        first, second = store.findings()
        assert first["fingerprint"] == second["fingerprint"] and store.distinct_bugs() == 1
        store.record_localization(first["program_id"], first["id"], "xla", {}, "bug-a")
        assert {f["bug"] for f in store.findings()} == {"bug-a"}
        assert store.distinct_bugs() == 1


def test_a_read_only_open_refuses_a_newer_schema_and_ids_beyond_sqlite_are_no_finding(tmp_path):
    db = tmp_path / "db.sqlite"
    with Store(db) as store:
        _record(store, _result(_program(), wrong=True))
        assert store.finding(10 ** 30) is None and store.finding(-1) is None
    conn = sqlite3.connect(db)
    conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema'")
    conn.commit()
    conn.close()
    with pytest.raises(CorruptArtifact, match="schema '99'"):
        Store(db, readonly=True)


def test_findings_upgrades_a_schema_1_store(tmp_path, capsys):
    from xlaprobe.cli.findings import findings_command
    db = _schema_1_store(tmp_path / "old.db")
    findings_command(None, db=db, json_output=True)
    import json
    [row] = json.loads(capsys.readouterr().out)
    assert (row["fingerprint"], row["alike"], row["bug"]) == ("f00d", [], None)


def test_a_read_only_store_leaves_no_wal_files_and_writes_nothing(tmp_path):
    # `xlaprobe coverage` and `report` read through Store(readonly=True); a mode=ro connection
    # left x.db-wal and x.db-shm beside the store after every run.
    db = tmp_path / "x.db"
    with Store(db) as store:
        _record(store, _result(_program(), wrong=True))
    before = db.read_bytes()
    with Store(db, readonly=True) as store:
        assert len(store.findings()) == 1
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            store._db.execute("DELETE FROM findings")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.db"]
    assert db.read_bytes() == before
