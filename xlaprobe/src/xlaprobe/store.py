"""The store: programs, runs, verdicts and findings in SQLite (stdlib).

WAL journal and one transaction per recorded check: once `record_check` returns, a kill loses
nothing it stored. The store is a cache of what was run; the source of truth for a regression is a
committed reproducer (artifact directory).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from xlaprobe.checking import CheckResult
from xlaprobe.errors import CorruptArtifact, InvalidArgument, disk_full
from xlaprobe.oracle import Verdict

#: 2: findings carry the configurations failing alike and the localized bug key; localizations
#: and reductions are tables (they were JSON files beside the store).
SCHEMA_VERSION = 4
DEFAULT_DB = Path(".xlaprobe") / "xlaprobe.db"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS programs (
    id TEXT PRIMARY KEY,            -- Program.fingerprint
    source TEXT NOT NULL, name TEXT NOT NULL, seed INTEGER, input_spec TEXT NOT NULL,
    num_equations INTEGER NOT NULL, artifact TEXT, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS checks (
    id INTEGER PRIMARY KEY AUTOINCREMENT, program_id TEXT NOT NULL REFERENCES programs(id),
    configs TEXT NOT NULL, judged_against TEXT NOT NULL, created REAL NOT NULL,
    campaign INTEGER,                -- fuzz_campaigns.id of the campaign that ran it, or NULL
    accepted TEXT NOT NULL DEFAULT '');  -- freedoms accepted as ok, comma-separated
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT, check_id INTEGER NOT NULL REFERENCES checks(id),
    config TEXT NOT NULL, outcome TEXT NOT NULL, seconds REAL NOT NULL, signal INTEGER,
    error TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS skipped_runs (  -- configurations a schedule did not run (no verdicts)
    check_id INTEGER NOT NULL REFERENCES checks(id), config TEXT NOT NULL, why TEXT NOT NULL,
    PRIMARY KEY (check_id, config));
CREATE TABLE IF NOT EXISTS verdicts (
    run_id INTEGER NOT NULL REFERENCES runs(id), output_index INTEGER NOT NULL,
    kind TEXT NOT NULL, data TEXT NOT NULL, PRIMARY KEY (run_id, output_index));
CREATE TABLE IF NOT EXISTS findings (
    id INTEGER PRIMARY KEY AUTOINCREMENT, program_id TEXT NOT NULL REFERENCES programs(id),
    config TEXT NOT NULL, kind TEXT NOT NULL, fingerprint TEXT NOT NULL, artifact TEXT,
    check_id INTEGER NOT NULL REFERENCES checks(id), created REAL NOT NULL,
    alike TEXT NOT NULL DEFAULT '', bug TEXT,
    freedom TEXT NOT NULL DEFAULT '',  -- kind 'freedom': the labels ('fma', 'excess-range')
    UNIQUE (program_id, config));
CREATE INDEX IF NOT EXISTS findings_by_fingerprint ON findings(fingerprint);
CREATE TABLE IF NOT EXISTS localizations (
    id INTEGER PRIMARY KEY AUTOINCREMENT, program_id TEXT NOT NULL, finding_id INTEGER,
    config TEXT NOT NULL, bug TEXT, result TEXT NOT NULL, created REAL NOT NULL);
CREATE INDEX IF NOT EXISTS localizations_by_finding ON localizations(finding_id);
CREATE TABLE IF NOT EXISTS reductions (
    id INTEGER PRIMARY KEY AUTOINCREMENT, program_id TEXT NOT NULL, finding_id INTEGER,
    config TEXT NOT NULL, directory TEXT, result TEXT NOT NULL, created REAL NOT NULL);
CREATE INDEX IF NOT EXISTS reductions_by_finding ON reductions(finding_id);
CREATE TABLE IF NOT EXISTS tuning_runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, program_id TEXT NOT NULL,
    strategy TEXT NOT NULL, budget INTEGER NOT NULL, seed INTEGER NOT NULL,
    result TEXT, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS measurements (
    id INTEGER PRIMARY KEY AUTOINCREMENT, run_id INTEGER NOT NULL REFERENCES tuning_runs(id),
    program_id TEXT NOT NULL, candidate TEXT NOT NULL, status TEXT NOT NULL,
    speedup REAL, low REAL, high REAL, replicate INTEGER NOT NULL, data TEXT NOT NULL,
    created REAL NOT NULL);
CREATE INDEX IF NOT EXISTS measurements_by_program ON measurements(program_id);
CREATE TABLE IF NOT EXISTS bisections (
    id INTEGER PRIMARY KEY AUTOINCREMENT, program_id TEXT NOT NULL, finding_id INTEGER,
    config TEXT NOT NULL, first_bad TEXT, last_good TEXT, first_fixed TEXT, result TEXT NOT NULL,
    created REAL NOT NULL);
CREATE INDEX IF NOT EXISTS bisections_by_finding ON bisections(finding_id);
CREATE TABLE IF NOT EXISTS kernel_programs (  -- the tuner's kernel corpus (xlaprobe.tune.corpus)
    id INTEGER PRIMARY KEY AUTOINCREMENT, program_id TEXT NOT NULL, name TEXT NOT NULL,
    source TEXT NOT NULL, config TEXT NOT NULL, candidate TEXT NOT NULL, program_s REAL NOT NULL,
    data TEXT NOT NULL, created REAL NOT NULL, UNIQUE (program_id, config));
CREATE TABLE IF NOT EXISTS kernels (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    entry_id INTEGER NOT NULL REFERENCES kernel_programs(id), name TEXT NOT NULL,
    opcode TEXT NOT NULL, kind TEXT NOT NULL, key TEXT NOT NULL, time_s REAL,
    features TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS kernels_by_entry ON kernels(entry_id);
CREATE TABLE IF NOT EXISTS run_passes (  -- optimization coverage of a run (xlaprobe.coverage)
    run_id INTEGER PRIMARY KEY REFERENCES runs(id),
    data TEXT NOT NULL);             -- PassCoverage.dumps(): {"ran", "changed", "rewrites"}
"""


@dataclasses.dataclass(frozen=True, slots=True)
class StoredFinding:
    """A finding as the store holds it.

    Attributes:
        id: its row id (what ``xlaprobe localize/reduce/bisect ID`` take).
        program_id: the program's fingerprint.
        name: the program's name.
        config: the failing configuration's spec.
        kind: its verdict kind (value).
        fingerprint: its triage key before localization (`xlaprobe.triage.finding_key`).
        artifact: the artifact directory (absolute, or as stored when outside the store's
            directory), or None.
        created: when it was first stored (Unix time, s).
        alike: the configurations of its check that failed the same way.
        bug: its localized bug key (`xlaprobe.triage.localized_key`), or None before
            localization.
        freedom: for kind ``freedom``, the freedoms XLA took (``+``-joined labels), else "".
    """

    id: int
    program_id: str
    name: str
    config: str
    kind: str
    fingerprint: str
    artifact: str | None
    created: float
    alike: tuple[str, ...] = ()
    bug: str | None = None
    freedom: str = ""

    @property
    def label(self) -> str:
        """What tables show as its kind: ``freedom:<labels>`` for a labelled freedom, else the
        verdict kind."""
        return f"freedom:{self.freedom}" if self.freedom else self.kind

    @property
    def bug_key(self) -> str:
        """The key distinct bugs are counted by: the localized key where known."""
        return self.bug or self.fingerprint

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return dataclasses.asdict(self) | {"alike": list(self.alike)}


class Store:
    """A SQLite database of checks. Use as a context manager, or call `close()`.

    Args:
        path: database file; its parent directory is created. ``":memory:"`` for tests.
        readonly: open an existing database for reading only (nothing is created or written;
            works on read-only media).

    Raises:
        InvalidArgument: the path is a directory or cannot be created.
        CorruptArtifact: the file is not an xlaprobe database (or is of a newer schema).
        sqlite3.OperationalError: the disk is full (`xlaprobe.errors.disk_full`).
    """

    def __init__(self, path: str | Path = DEFAULT_DB, *, readonly: bool = False):
        self.path = str(path)
        if readonly:
            self._open_readonly()
            return
        if self.path != ":memory:":
            target = Path(self.path)
            if target.is_dir():
                raise InvalidArgument(f"--db {self.path} is a directory; give a file path, "
                                      f"e.g. {target / 'xlaprobe.db'}")
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise InvalidArgument(f"cannot create the directory of --db {self.path}: {exc}") from exc
        try:
            self._db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            self._refuse_foreign()
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            with self._transaction():
                for statement in filter(str.strip, _SCHEMA.split(";")):
                    self._db.execute(statement)
                row = self._db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
                if row is None:
                    self._db.execute("INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
                elif self._readable_schema(row[0]) < SCHEMA_VERSION:
                    self._migrate(int(row[0]))
                # After the migration: a schema-2 checks table gains its campaign column there.
                self._db.execute("CREATE INDEX IF NOT EXISTS checks_by_campaign ON "
                                 "checks(campaign)")
        except sqlite3.OperationalError as exc:
            if disk_full(exc):  # the disk's, not the file's: `xlaprobe.cli.commands.main` says so
                raise
            if "unable to open" in str(exc) or "readonly" in str(exc):
                raise InvalidArgument(f"cannot open {self.path} for writing ({exc}): a read-only "
                                      "location or no permission; pass another --db") from exc
            if "locked" in str(exc) or "busy" in str(exc):
                raise InvalidArgument(f"{self.path} is busy: another process has held it "
                                      "locked for 30 s; wait for it to finish, or pass another "
                                      "--db") from exc
            raise CorruptArtifact(f"{self.path} is not an xlaprobe database ({exc}); "
                                  "move it away or pass another --db") from exc
        except sqlite3.DatabaseError as exc:
            raise CorruptArtifact(f"{self.path} is not an xlaprobe database ({exc}); "
                                  "move it away or pass another --db") from exc

    def _readable_schema(self, value: str) -> int:
        """The schema number `value` of the ``meta`` table, as an int.

        Raises:
            CorruptArtifact: not a number, or newer than this xlaprobe reads.
        """
        if not value.isdigit() or int(value) > SCHEMA_VERSION:
            raise CorruptArtifact(f"{self.path} has schema '{value}', not one this xlaprobe "
                                  f"reads ({SCHEMA_VERSION}); upgrade xlaprobe or pass another --db")
        return int(value)

    def _migrate(self, version: int) -> None:
        """Upgrade a store of an older schema in place (inside the opening transaction)."""
        if version < 2:  # CREATE TABLE IF NOT EXISTS made the new tables; findings gain columns
            columns = {r[1] for r in self._db.execute("PRAGMA table_info(findings)")}
            if "alike" not in columns:
                self._db.execute("ALTER TABLE findings ADD COLUMN alike TEXT NOT NULL DEFAULT ''")
            if "bug" not in columns:
                self._db.execute("ALTER TABLE findings ADD COLUMN bug TEXT")
        if version < 3:  # checks name their campaign (two campaigns can share a store)
            columns = {r[1] for r in self._db.execute("PRAGMA table_info(checks)")}
            if "campaign" not in columns:
                self._db.execute("ALTER TABLE checks ADD COLUMN campaign INTEGER")
        if version < 4:  # labelled freedoms: a finding's labels, a check's accepted freedoms
            for table, column in (("findings", "freedom"), ("checks", "accepted")):
                columns = {r[1] for r in self._db.execute(f"PRAGMA table_info({table})")}
                if column not in columns:
                    self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column} TEXT NOT NULL "
                                     "DEFAULT ''")
        self._db.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (str(SCHEMA_VERSION),))

    def _portable(self, path: str | None) -> str | None:
        """`path` as stored: relative to the store's directory when it lies inside it (so the
        store and its artifacts move together and work from any working directory)."""
        if path is None or self.path == ":memory:":
            return path
        base = Path(self.path).resolve().parent
        full = Path(path).resolve()
        return str(full.relative_to(base)) if full.is_relative_to(base) else str(full)

    def resolve_path(self, stored: str | None) -> str | None:
        """A stored artifact path made usable from the current directory (absolute)."""
        if not stored or self.path == ":memory:" or Path(stored).is_absolute():
            return stored
        inside = Path(self.path).resolve().parent / stored
        # Stores written before schema 2 kept paths relative to where the check ran.
        return str(inside) if inside.exists() or not Path(stored).exists() \
            else str(Path(stored).resolve())

    def _refuse_foreign(self) -> None:
        """Raise `CorruptArtifact`, touching nothing, when the file is a database of something
        else: tables, but no xlaprobe ``meta`` table with a schema row."""
        tables = {row[0] for row in self._db.execute(
            "SELECT name FROM sqlite_master WHERE type='table'")}
        if not tables:
            return
        schema = None
        if "meta" in tables:
            try:
                schema = self._db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            except sqlite3.DatabaseError:
                schema = None
        if schema is None:
            self._db.close()
            raise CorruptArtifact(f"{self.path} is a database of something else (tables "
                                  f"{', '.join(sorted(tables)[:5])}); xlaprobe leaves it alone: "
                                  "pass another --db")

    def _open_readonly(self) -> None:
        if not Path(self.path).is_file():
            raise InvalidArgument(f"no xlaprobe database at {self.path}")
        try:
            self._db = self._reader()
            row = self._db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        except sqlite3.DatabaseError as exc:
            raise CorruptArtifact(f"{self.path} is not a readable xlaprobe database ({exc})") \
                from exc
        if row is None:
            raise CorruptArtifact(f"{self.path} is not a readable xlaprobe database (no schema)")
        if self._readable_schema(row[0]) < 4:  # read-only: no migration; findings lack freedom
            self._FINDING = self._FINDING.replace("f.freedom", "'' AS freedom")

    def _reader(self) -> sqlite3.Connection:
        """A connection that never writes: ``query_only`` where the file and its folder are
        writable (the last connection to close then folds the WAL back and removes the -wal and
        -shm files, which a ``mode=ro`` one leaves behind), else ``mode=ro``."""
        path = Path(self.path).resolve()
        if os.access(path, os.W_OK) and os.access(path.parent, os.W_OK):
            db = sqlite3.connect(path, timeout=30.0, isolation_level=None)
            db.execute("PRAGMA query_only=ON")
            return db
        return sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30.0,
                               isolation_level=None)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (committed data is already on disk)."""
        self._db.close()

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def record_check(self, result: CheckResult, artifacts: Mapping[str, str] | None = None,
                     artifact: str | None = None, *, campaign: int | None = None,
                     bugs: Mapping[str, str] | None = None) -> int:
        """Store one differential check and its findings atomically.

        Args:
            result: the `xlaprobe.checking.CheckResult` (program, outcomes, verdicts, findings).
            artifacts: configuration spec -> artifact directory saved for its finding.
            artifact: the program's artifact directory, if saved (default: the first of
                `artifacts`).
            campaign: the id of the fuzz campaign the check belongs to (`xlaprobe.campaign`),
                or None.
            bugs: configuration spec -> the bug key of its finding known before localization
                (the first wrong intermediate's, `xlaprobe.localization.first_wrong`); a
                finding not named keeps the bug key it has.

        Returns:
            The check id.
        """
        now = time.time()
        program = result.program
        p = program.provenance
        artifacts = {c: self._portable(a) for c, a in (artifacts or {}).items()}
        bugs = bugs or {}
        artifact = self._portable(artifact) or next(iter(artifacts.values()), None)
        with self._transaction():
            self._db.execute(
                "INSERT INTO programs VALUES (?,?,?,?,?,?,?,?) ON CONFLICT(id) DO UPDATE SET "
                "artifact=COALESCE(excluded.artifact, programs.artifact)",
                (program.fingerprint, p.source, p.name, p.seed, p.input_spec,
                 program.num_equations, artifact, now))
            check_id = self._db.execute(
                "INSERT INTO checks (program_id, configs, judged_against, created, campaign, "
                "accepted) VALUES (?,?,?,?,?,?)",
                (program.fingerprint, ",".join(result.configs), result.judged_against,
                 now, campaign, ",".join(sorted(result.accepted)))).lastrowid
            for outcome, leaf_verdicts in zip(result.outcomes, result.verdicts, strict=True):
                run_id = self._db.execute(
                    "INSERT INTO runs (check_id, config, outcome, seconds, signal, error) "
                    "VALUES (?,?,?,?,?,?)",
                    (check_id, outcome.config, outcome.kind.value, outcome.seconds, outcome.signal,
                     outcome.error)).lastrowid
                self._db.executemany(
                    "INSERT INTO verdicts VALUES (?,?,?,?)",
                    [(run_id, v.index, v.kind.value, json.dumps(v.to_json())) for v in leaf_verdicts])
                if outcome.coverage:
                    self._db.execute("INSERT INTO run_passes VALUES (?,?)",
                                     (run_id, outcome.coverage.dumps()))
            self._db.executemany("INSERT INTO skipped_runs VALUES (?,?,?)",
                                 [(check_id, c, why) for c, why in result.skipped])
            for f in result.findings:
                # Update first, insert only a new (program, configuration): SQLite's upsert
                # (INSERT ... ON CONFLICT DO UPDATE) draws an AUTOINCREMENT id even when it
                # updates, so every re-check of a known finding left a gap in the ids.
                updated = self._db.execute(
                    "UPDATE findings SET kind=?, check_id=?, artifact=?, fingerprint=?, alike=?, "
                    "freedom=?, bug=COALESCE(?, bug) WHERE program_id=? AND config=?",
                    (f.kind.value, check_id, artifacts.get(f.config), f.fingerprint,
                     ",".join(f.alike), f.freedom, bugs.get(f.config), program.fingerprint,
                     f.config)).rowcount
                if not updated:
                    self._db.execute(
                        "INSERT INTO findings (program_id, config, kind, fingerprint, artifact, "
                        "check_id, created, alike, freedom, bug) VALUES (?,?,?,?,?,?,?,?,?,?)",
                        (program.fingerprint, f.config, f.kind.value, f.fingerprint,
                         artifacts.get(f.config), check_id, now, ",".join(f.alike), f.freedom,
                         bugs.get(f.config)))
        return int(check_id)

    _FINDING = ("SELECT f.id, f.program_id, p.name, f.config, f.kind, f.fingerprint, f.artifact, "
                "f.created, f.alike, f.bug, f.freedom FROM findings f JOIN programs p ON p.id = f.program_id")

    def _finding(self, row: Sequence[Any]) -> StoredFinding:
        return StoredFinding(int(row[0]), row[1], row[2], row[3], row[4], row[5],
                             self.resolve_path(row[6]), float(row[7]),
                             tuple(a for a in (row[8] or "").split(",") if a), row[9], row[10] or "")

    def stored_findings(self) -> list[StoredFinding]:
        """All findings, newest first."""
        rows = self._db.execute(self._FINDING + " ORDER BY f.id DESC").fetchall()
        return [self._finding(row) for row in rows]

    def findings(self) -> list[dict[str, Any]]:
        """All findings, newest first, as JSON-ready dicts (`StoredFinding.to_json`)."""
        return [finding.to_json() for finding in self.stored_findings()]

    def finding(self, finding_id: int) -> StoredFinding | None:
        """One finding by id (an indexed lookup), or None (also for an id no row can have)."""
        if not 0 < finding_id < 2 ** 63:  # SQLite integers are 64-bit
            return None
        row = self._db.execute(self._FINDING + " WHERE f.id = ?", (finding_id,)).fetchone()
        return None if row is None else self._finding(row)

    def finding_of(self, program_id: str, config: str,
                   finding_id: int | None = None) -> StoredFinding | None:
        """Finding `finding_id` when given, else the finding of `config` on the program with
        fingerprint `program_id` (a target given as an artifact or case, not an id), or None."""
        if finding_id is not None:
            return self.finding(finding_id)
        row = self._db.execute(self._FINDING + " WHERE f.program_id = ? AND f.config = ?",
                               (program_id, config)).fetchone()
        return None if row is None else self._finding(row)

    def distinct_bugs(self) -> int:
        """Distinct bugs among the findings: localized bug keys where known, else fingerprints.
        Labelled freedoms (kind ``freedom``: XLA took a legal liberty) are not bugs."""
        return int(self._db.execute(
            "SELECT COUNT(DISTINCT COALESCE(bug, fingerprint)) FROM findings "
            "WHERE kind != 'freedom'").fetchone()[0])

    def record_localization(self, program_id: str, finding_id: int | None, config: str,
                            result: dict[str, Any], bug: str | None) -> int:
        """Store a localization (`xlaprobe.localization.Localization.to_json`) atomically; with a
        finding and a `bug` key (`xlaprobe.triage.localized_key`), that finding's bug key is set,
        and so is that of every finding of the same fingerprint that has no localization of its
        own (the same failure before localization).

        Returns:
            The localization id.
        """
        with self._transaction():
            if finding_id is not None and bug:
                self._db.execute("UPDATE findings SET bug = ? WHERE id = ?", (bug, finding_id))
                self._db.execute(
                    "UPDATE findings SET bug = ? WHERE fingerprint = (SELECT fingerprint FROM "
                    "findings WHERE id = ?) AND id NOT IN (SELECT finding_id FROM localizations "
                    "WHERE finding_id IS NOT NULL)", (bug, finding_id))
            return int(self._db.execute(
                "INSERT INTO localizations (program_id, finding_id, config, bug, result, created) "
                "VALUES (?,?,?,?,?,?)", (program_id, finding_id, config, bug, json.dumps(result),
                                         time.time())).lastrowid)

    def record_reduction(self, program_id: str, finding_id: int | None, config: str,
                         result: dict[str, Any], directory: str | None) -> int:
        """Store a reduction (`xlaprobe.localization.reduce.Reduction.to_json` plus what was
        written) atomically, with the directory of its reproducer.

        Returns:
            The reduction id.
        """
        with self._transaction():
            return int(self._db.execute(
                "INSERT INTO reductions (program_id, finding_id, config, directory, result, "
                "created) VALUES (?,?,?,?,?,?)",
                (program_id, finding_id, config, self._portable(directory),
                 json.dumps(result, default=str), time.time())).lastrowid)

    def localizations(self, finding_id: int) -> list[dict[str, Any]]:
        """The stored localizations of one finding, newest first (their JSON, with ``id``)."""
        rows = self._db.execute("SELECT id, result FROM localizations WHERE finding_id = ? "
                                "ORDER BY id DESC", (finding_id,)).fetchall()
        return [{**json.loads(r[1]), "id": r[0]} for r in rows]

    def reductions(self, finding_id: int) -> list[dict[str, Any]]:
        """The stored reductions of one finding, newest first (their JSON, with ``id`` and the
        reproducer's ``directory``)."""
        rows = self._db.execute("SELECT id, directory, result FROM reductions WHERE finding_id = ?"
                                " ORDER BY id DESC", (finding_id,)).fetchall()
        return [{**json.loads(r[2]), "id": r[0], "directory": self.resolve_path(r[1])}
                for r in rows]

    def verdicts(self, check_id: int) -> list[Verdict]:
        """The verdicts of one check, in configuration then output order."""
        rows = self._db.execute(
            "SELECT v.data FROM verdicts v JOIN runs r ON r.id = v.run_id WHERE r.check_id = ? "
            "ORDER BY r.id, v.output_index", (check_id,)).fetchall()
        return [Verdict.from_json(json.loads(row[0])) for row in rows]

    def start_tuning_run(self, name: str, program_id: str, strategy: str, budget: int,
                         seed: int) -> int:
        """Open a tuning run (its result is filled by `finish_tuning_run`); returns its id."""
        with self._transaction():
            return int(self._db.execute(
                "INSERT INTO tuning_runs (name, program_id, strategy, budget, seed, created) "
                "VALUES (?,?,?,?,?,?)",
                (name, program_id, strategy, budget, seed, time.time())).lastrowid)

    def record_measurement(self, run_id: int, program_id: str, candidate: dict[str, Any],
                           status: str, data: dict[str, Any], *, speedup: float | None = None,
                           low: float | None = None, high: float | None = None,
                           replicate: bool = False) -> int:
        """Store one tuning measurement atomically (status ``ok``, ``rejected``,
        ``compile-error``, ``crash`` or ``timeout``); `data` holds its features and details."""
        with self._transaction():
            return int(self._db.execute(
                "INSERT INTO measurements (run_id, program_id, candidate, status, speedup, low, "
                "high, replicate, data, created) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (run_id, program_id, json.dumps(candidate, sort_keys=True), status, speedup, low,
                 high, int(replicate), json.dumps(data), time.time())).lastrowid)

    def finish_tuning_run(self, run_id: int, result: dict[str, Any]) -> None:
        """Store a tuning run's result (JSON)."""
        with self._transaction():
            self._db.execute("UPDATE tuning_runs SET result=? WHERE id=?",
                             (json.dumps(result), run_id))

    def measurements(self, *, exclude_program: str | None = None) -> list[dict[str, Any]]:
        """Successful, non-replicate measurements, oldest first: program_id, candidate (dict),
        speedup, low, high, data (dict). Optionally without one program's."""
        rows = self._db.execute(
            "SELECT program_id, candidate, speedup, low, high, data FROM measurements "
            "WHERE status='ok' AND replicate=0 AND program_id IS NOT ? ORDER BY id",
            (exclude_program,)).fetchall()
        return [{"program_id": r[0], "candidate": json.loads(r[1]), "speedup": r[2], "low": r[3],
                 "high": r[4], "data": json.loads(r[5])} for r in rows]

    def tuning_result(self, name: str) -> dict[str, Any] | None:
        """The result of the newest finished tuning run called `name` that accepted a speedup,
        else of the newest finished one; None when there is none."""
        rows = self._db.execute(
            "SELECT result FROM tuning_runs WHERE name=? AND result IS NOT NULL "
            "ORDER BY id DESC", (name,)).fetchall()
        results = [json.loads(row[0]) for row in rows]
        accepted = [r for r in results if r.get("accepted")]
        return (accepted or results or [None])[0]

    def tuning_names(self) -> list[str]:
        """Names of the finished tuning runs, newest first, each once."""
        rows = self._db.execute("SELECT name FROM tuning_runs WHERE result IS NOT NULL "
                                "ORDER BY id DESC").fetchall()
        return list(dict.fromkeys(row[0] for row in rows))

    def record_corpus_entry(self, program_id: str, name: str, source: str, config: str,
                            candidate: dict[str, Any], profile: dict[str, Any]) -> int:
        """Store one kernel-corpus entry (a program under one configuration, with its kernels)
        atomically.

        Args:
            program_id: the baseline program's fingerprint (knob variants share it).
            name, source: the program's name and source (zoo, ecosystem, capture, fuzz).
            config: the configuration's key ("" for the defaults); candidate: its values.
            profile: `xlaprobe.tune.corpus.profile_in_worker`'s result.

        Returns:
            The entry id.
        """
        data = {k: v for k, v in profile.items() if k not in ("kernels", "program_s", "text")}
        with self._transaction():
            self._db.execute("DELETE FROM kernels WHERE entry_id IN (SELECT id FROM "
                             "kernel_programs WHERE program_id=? AND config=?)", (program_id, config))
            self._db.execute("DELETE FROM kernel_programs WHERE program_id=? AND config=?",
                             (program_id, config))
            entry = int(self._db.execute(
                "INSERT INTO kernel_programs (program_id, name, source, config, candidate, "
                "program_s, data, created) VALUES (?,?,?,?,?,?,?,?)",
                (program_id, name, source, config, json.dumps(candidate, sort_keys=True),
                 profile["program_s"], json.dumps(data), time.time())).lastrowid)
            self._db.executemany(
                "INSERT INTO kernels (entry_id, name, opcode, kind, key, time_s, features) "
                "VALUES (?,?,?,?,?,?,?)",
                [(entry, k["name"], k["opcode"], k["kind"], k["key"], k["time_s"],
                  json.dumps(k["features"])) for k in profile["kernels"]])
            return entry

    def corpus_configs(self, program_id: str) -> set[str]:
        """The configuration keys the kernel corpus holds for one program."""
        return {r[0] for r in self._db.execute(
            "SELECT config FROM kernel_programs WHERE program_id=?", (program_id,))}

    def corpus(self) -> list[dict[str, Any]]:
        """The kernel corpus, oldest entry first: per entry ``id``, ``program_id``, ``name``,
        ``source``, ``config``, ``candidate`` (dict), ``program_s``, ``data`` (dict: cost,
        floor_s, load, ...) and ``kernels`` (per kernel ``name``, ``opcode``, ``kind``, ``key``,
        ``time_s`` or None, ``features`` dict)."""
        entries = {r[0]: {"id": r[0], "program_id": r[1], "name": r[2], "source": r[3],
                          "config": r[4], "candidate": json.loads(r[5]), "program_s": r[6],
                          "data": json.loads(r[7]), "kernels": []}
                   for r in self._db.execute(
                       "SELECT id, program_id, name, source, config, candidate, program_s, data "
                       "FROM kernel_programs ORDER BY id")}
        for r in self._db.execute("SELECT entry_id, name, opcode, kind, key, time_s, features "
                                  "FROM kernels ORDER BY id"):
            entries[r[0]]["kernels"].append({"name": r[1], "opcode": r[2], "kind": r[3],
                                             "key": r[4], "time_s": r[5],
                                             "features": json.loads(r[6])})
        return list(entries.values())

    def record_bisection(self, program_id: str, finding_id: int | None, config: str,
                         result: dict[str, Any]) -> int:
        """Store a release bisection (`xlaprobe.releases.bisect.Bisection.to_json`) atomically.

        Args:
            program_id: the program's fingerprint.
            finding_id: the finding it explains, or None (a target that is no stored finding).
            config: the configuration template bisected (e.g. ``xla:fastmath``).
            result: the bisection as JSON (keys first_bad, last_good, first_fixed, runs, ...).

        Returns:
            The bisection id.
        """
        with self._transaction():
            return int(self._db.execute(
                "INSERT INTO bisections (program_id, finding_id, config, first_bad, last_good, "
                "first_fixed, result, created) VALUES (?,?,?,?,?,?,?,?)",
                (program_id, finding_id, config, result.get("first_bad"), result.get("last_good"),
                 result.get("first_fixed"), json.dumps(result), time.time())).lastrowid)

    def bisections(self, finding_id: int | None = None) -> list[dict[str, Any]]:
        """Stored bisections (all, or of one finding), newest first, as their JSON results with
        ``id``, ``finding_id`` and ``program_id`` added."""
        query = "SELECT id, program_id, finding_id, result FROM bisections"
        args: tuple[Any, ...] = ()
        if finding_id is not None:
            query += " WHERE finding_id = ?"
            args = (finding_id,)
        rows = self._db.execute(query + " ORDER BY id DESC", args).fetchall()
        return [{**json.loads(r[3]), "id": r[0], "program_id": r[1], "finding_id": r[2]}
                for r in rows]

    def count(self, table: str) -> int:
        """Number of rows in one of the tables (programs, checks, runs, verdicts, findings,
        tuning_runs, measurements, bisections, localizations, reductions, kernel_programs,
        kernels).

        Raises:
            InvalidArgument: unknown table.
        """
        if table not in ("programs", "checks", "runs", "verdicts", "findings", "tuning_runs",
                         "measurements", "bisections", "localizations", "reductions",
                         "kernel_programs", "kernels"):
            raise InvalidArgument(f"unknown table '{table}'")
        return int(self._db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])

    def select(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Rows of one ``SELECT`` query, for readers of tables this class has no method for
        (``xlaprobe report``: campaigns, tuning runs).

        Raises:
            InvalidArgument: `sql` is not a SELECT (a ``WITH`` may end in a DELETE: refused too).
        """
        if not sql.lstrip().upper().startswith("SELECT"):
            raise InvalidArgument("Store.select runs SELECT queries only")
        return self._db.execute(sql, tuple(args)).fetchall()
