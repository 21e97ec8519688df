"""The SQLite store: what record_check reports as stored survives a kill of the process."""

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from xlaprobe.check import judge
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
    return store.record_check(result.program, result.configs, result.judged_against, result.outcomes,
                              result.verdicts, [(f.config, f.kind.value, f.fingerprint, None)
                                                for f in result.findings])


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
