"""Merge stores: copy every row of other xlaprobe stores (seed shards' ``--db`` files) into one.

Each source is ATTACHed read-only and copied with ``INSERT ... SELECT`` inside one transaction
(a crash or Ctrl-C leaves the destination as it was before that source): programs by their
fingerprint id, campaigns, checks, runs, tuning runs and findings under new ids, the rows that
point at them (runs, verdicts, skipped runs, measurements, localizations, reductions,
bisections) remapped.

Sources are never written. One of an older schema is read as it is: a column it lacks takes the
default the store's own migration gives it (`xlaprobe.store.Store._migrate`), a table it lacks
has no rows.

Merging is idempotent by natural keys, not file hashes, so a shard merged again after it ran on
adds only what is new: a check is already there when the destination holds one of the same
program, configurations and creation time; a campaign when one has the same creation time, first
seed and configurations (its state is then taken from the source when the source's is newer); a
finding when one of the same program and configuration is there (``UNIQUE (program_id,
config)``: the destination's row stays, counted in `MergeResult.findings_present`); a
localization, reduction, bisection or tuning run when one of the same program and creation time
is there.

Artifact directories (``findings.artifact``, ``programs.artifact``, ``reductions.directory``)
stored relative to a source's folder are copied to the same relative path beside the
destination. A directory already there with other content is never overwritten: the copy gets
the first free name ``<name>-2``, ``<name>-3``, ... and the merged rows point at it. Copies are
made before the transaction and removed again when it fails; a kill between the two leaves only
an unreferenced copy that the next merge reuses (same content).
"""

from __future__ import annotations

import dataclasses
import filecmp
import shutil
import sqlite3
import time
import urllib.parse
from pathlib import Path
from typing import Any

from xlaprobe.errors import InvalidArgument

#: Tables with a path to an artifact directory, and its column.
_PATH_COLUMNS = (("programs", "artifact"), ("findings", "artifact"), ("reductions", "directory"))


@dataclasses.dataclass
class MergeResult:
    """What merging one source added to the destination.

    Attributes:
        source: the source store's path.
        added: table -> rows inserted (tables with none are left out).
        checks_present: checks of the source the destination already held (merged before).
        findings_present: findings whose (program, configuration) the destination already had
            (its row is kept).
        campaigns_updated: campaigns already there whose state the source had newer.
        artifacts_copied: artifact directories copied.
        artifacts_renamed: of those, copied under a new name (a different one had the name).
        artifacts_missing: relative artifact paths the source names but does not have (kept as
            stored).
        seconds: wall time of the merge (s).
    """

    source: str
    added: dict[str, int] = dataclasses.field(default_factory=dict)
    checks_present: int = 0
    findings_present: int = 0
    campaigns_updated: int = 0
    artifacts_copied: int = 0
    artifacts_renamed: int = 0
    artifacts_missing: int = 0
    seconds: float = 0.0

    @property
    def rows(self) -> int:
        """Rows inserted, all tables."""
        return sum(self.added.values())

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (with ``rows``)."""
        return dataclasses.asdict(self) | {"rows": self.rows}


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and a.samefile(b)
    except OSError:
        return False


def check_source(source: Path, dest: Path) -> int:
    """Validate one source store before anything is written; return its schema version.

    Raises:
        InvalidArgument: missing, not a file, the destination itself, not an xlaprobe store, or
            of a newer schema than this xlaprobe reads.
    """
    from xlaprobe.store import SCHEMA_VERSION  # the store imports checking, and so jax

    if source.resolve() == dest.resolve() or _same_file(source, dest):
        raise InvalidArgument(f"{source} is the destination --db itself; merge other stores "
                              "into it")
    if not source.exists():
        raise InvalidArgument(f"no store at {source} to merge")
    if not source.is_file():
        raise InvalidArgument(f"{source} is not a store file (a directory?); give the .db file")
    try:
        conn = sqlite3.connect(_readonly_uri(source), uri=True, timeout=30.0)
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise InvalidArgument(f"{source} is not an xlaprobe store ({exc})") from exc
    if row is None or not str(row[0]).isdigit():
        raise InvalidArgument(f"{source} is not an xlaprobe store (no schema in its meta table)")
    if int(row[0]) > SCHEMA_VERSION:
        raise InvalidArgument(f"{source} has schema {row[0]}, newer than this xlaprobe reads "
                              f"({SCHEMA_VERSION}); upgrade xlaprobe to merge it")
    return int(row[0])


def _readonly_uri(path: Path) -> str:
    return f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro"


def merge_stores(sources: list[Path], dest: Path) -> list[MergeResult]:
    """Merge every store in `sources` into the store at `dest` (created with the current schema
    if missing), one transaction per source, in order. See the module docstring.

    Args:
        sources: source store files (``shard0.db``, ...); never written.
        dest: the destination store file.

    Returns:
        One `MergeResult` per source.

    Raises:
        InvalidArgument: a source is missing, not an xlaprobe store, newer than this xlaprobe,
            or the destination itself (all checked before the destination is created or
            touched); no sources; the destination is not writable.
        CorruptArtifact: the destination exists and is not an xlaprobe store.
    """
    from xlaprobe.campaign import CAMPAIGN_SCHEMA  # campaign and store import jax: not at import
    from xlaprobe.store import Store  # imports jax: as above

    if not sources:
        raise InvalidArgument("give at least one source store to merge")
    sources = [Path(s) for s in sources]
    dest = Path(dest)
    if dest.is_dir():
        raise InvalidArgument(f"--db {dest} is a directory; give a file path")
    for source in sources:
        check_source(source, dest)
    Store(dest).close()  # creates or migrates the destination, validates it
    conn = sqlite3.connect(str(dest), timeout=30.0, isolation_level=None, uri=True)
    try:
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute(CAMPAIGN_SCHEMA)
        return [_merge_one(conn, source, dest) for source in sources]
    finally:
        conn.close()


def _columns(conn: sqlite3.Connection, schema: str, table: str) -> dict[str, str | None]:
    """column -> its default expression (None: no default), in table order; {} when missing."""
    return {row[1]: row[4] for row in conn.execute(f"PRAGMA {schema}.table_info({table})")}


def _select_list(conn: sqlite3.Connection, table: str,
                 overrides: dict[str, str]) -> tuple[str, str]:
    """(the destination's column list, the matching SELECT expressions over source alias ``s``):
    `overrides` give remapped columns; a column the (older) source lacks takes its default."""
    dest_columns = _columns(conn, "main", table)
    have = _columns(conn, "src", table)
    exprs = []
    for column, default in dest_columns.items():
        if column in overrides:
            exprs.append(overrides[column])
        elif column in have:
            exprs.append(f"s.{column}")
        else:
            exprs.append(default if default is not None else "NULL")
    return ", ".join(dest_columns), ", ".join(exprs)


def _count(conn: sqlite3.Connection, sql: str, args: tuple[Any, ...] = ()) -> int:
    return int(conn.execute(sql, args).fetchone()[0])


def _merge_one(conn: sqlite3.Connection, source: Path, dest: Path) -> MergeResult:
    start = time.perf_counter()
    result = MergeResult(str(source))
    try:
        conn.execute("ATTACH DATABASE ? AS src", (_readonly_uri(source),))
    except sqlite3.OperationalError as exc:  # e.g. a WAL store on read-only media, never opened
        raise InvalidArgument(f"cannot read {source} ({exc}); copy it somewhere writable "
                              "first") from exc
    copied: list[Path] = []
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM src.sqlite_master "
                                             "WHERE type = 'table'")}
        _copy_artifacts(conn, tables, source.resolve().parent, dest.resolve().parent, result,
                        copied)
        conn.execute("BEGIN IMMEDIATE")
        try:
            _insert_all(conn, tables, result)
        except BaseException as exc:
            conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.IntegrityError):  # e.g. a check of no stored program
                raise InvalidArgument(f"{source} holds rows that name missing ones ({exc}); "
                                      "nothing of it was merged") from exc
            raise
        conn.execute("COMMIT")
    except BaseException:
        for directory in copied:  # the rows that named them are gone with the transaction
            shutil.rmtree(directory, ignore_errors=True)
        raise
    finally:
        for name in ("path_map", "campaign_map", "check_map", "run_map", "finding_map",
                     "tuning_map"):
            conn.execute(f"DROP TABLE IF EXISTS temp.{name}")
        conn.execute("DETACH DATABASE src")
    result.added = {t: n for t, n in result.added.items() if n}
    result.seconds = time.perf_counter() - start
    return result


# -- artifact directories ----------------------------------------------------------------------

def _same_tree(a: Path, b: Path) -> bool:
    """Whether directories `a` and `b` hold the same files with the same bytes."""
    compare = filecmp.dircmp(a, b)
    if compare.left_only or compare.right_only or compare.funny_files:
        return False
    _, mismatch, errors = filecmp.cmpfiles(a, b, compare.common_files, shallow=False)
    if mismatch or errors:
        return False
    return all(_same_tree(a / d, b / d) for d in compare.common_dirs)


def _copy_artifacts(conn: sqlite3.Connection, tables: set[str], src_dir: Path, dest_dir: Path,
                    result: MergeResult, copied: list[Path]) -> None:
    """Copy the source's relative artifact directories beside the destination (appending each
    new copy to `copied`); fill ``temp.path_map``: stored path -> the path to store in the
    destination, for those that changed."""
    stored: set[str] = set()
    for table, column in _PATH_COLUMNS:
        if table in tables and column in _columns(conn, "src", table):
            stored.update(r[0] for r in conn.execute(
                f"SELECT DISTINCT {column} FROM src.{table} WHERE {column} IS NOT NULL"))
    renamed: dict[str, str] = {}
    for path in sorted(stored):
        relative = Path(path)
        if relative.is_absolute():
            continue  # outside the source's folder when stored: valid from anywhere
        origin = src_dir / relative
        if not origin.is_dir():
            result.artifacts_missing += 1
            continue
        if ".." in relative.parts:  # not inside the source's folder: store it absolute
            renamed[path] = str(origin.resolve())
            continue
        target, suffix = dest_dir / relative, 1
        while target.exists() and not (_same_file(target, origin) or _same_tree(origin, target)):
            suffix += 1
            target = dest_dir / relative.parent / f"{relative.name}-{suffix}"
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.parent / f".{target.name}.merging"
            shutil.rmtree(partial, ignore_errors=True)
            shutil.copytree(origin, partial, symlinks=True)
            partial.rename(target)  # a kill mid-copy leaves only the hidden partial copy
            copied.append(target)
            result.artifacts_copied += 1
        if suffix > 1:
            renamed[path] = str(target.relative_to(dest_dir))
            result.artifacts_renamed += 1
    conn.execute("CREATE TEMP TABLE path_map (old TEXT PRIMARY KEY, new TEXT NOT NULL)")
    conn.executemany("INSERT INTO temp.path_map VALUES (?, ?)", renamed.items())


def _path(column: str) -> str:
    return f"COALESCE((SELECT new FROM temp.path_map WHERE old = s.{column}), s.{column})"


# -- rows ----------------------------------------------------------------------------------------

def _insert_all(conn: sqlite3.Connection, tables: set[str], result: MergeResult) -> None:
    """Insert the attached source's rows (inside the caller's transaction), in reference order."""
    rows = _Rows(conn, tables, result)
    rows.campaigns()
    rows.programs()
    rows.checks()
    rows.findings()
    rows.tuning()


class _Rows:
    """The row copies of one source: each method fills the ``temp`` id maps the next ones read
    (old id -> id in the destination)."""

    def __init__(self, conn: sqlite3.Connection, tables: set[str], result: MergeResult):
        self.conn, self.tables, self.result = conn, tables, result
        for name in ("campaign_map", "check_map", "run_map", "finding_map", "tuning_map"):
            conn.execute(f"CREATE TEMP TABLE {name} (old INTEGER PRIMARY KEY, "
                         "new INTEGER NOT NULL)")
        self.first_check = self.next_id("checks")

    def insert(self, table: str, sql: str, args: tuple[Any, ...] = ()) -> None:
        """Run one INSERT and count the rows it added to `table`."""
        before = self.conn.total_changes
        self.conn.execute(sql, args)
        added = self.result.added
        added[table] = added.get(table, 0) + self.conn.total_changes - before

    def next_id(self, table: str) -> int:
        """The first id above every id the destination's `table` has had."""
        return 1 + max(_count(self.conn, f"SELECT COALESCE(MAX(id), 0) FROM main.{table}"),
                       _count(self.conn, "SELECT COALESCE(MAX(seq), 0) FROM main.sqlite_sequence"
                                         " WHERE name = ?", (table,)))

    def campaigns(self) -> None:
        """New campaigns get new ids; one already there is brought up to date."""
        if "fuzz_campaigns" not in self.tables:
            return
        conn = self.conn
        for row in conn.execute("SELECT id, configs, start_seed, next_seed, state, status, "
                                "created, updated FROM src.fuzz_campaigns ORDER BY id").fetchall():
            old, configs, start_seed, next_seed, state, status, created, updated = row
            there = conn.execute("SELECT id, updated FROM main.fuzz_campaigns WHERE created = ? "
                                 "AND start_seed = ? AND configs = ?",
                                 (created, start_seed, configs)).fetchone()
            if there is None:
                new = conn.execute(
                    "INSERT INTO main.fuzz_campaigns (configs, start_seed, next_seed, state, "
                    "status, created, updated) VALUES (?,?,?,?,?,?,?)",
                    (configs, start_seed, next_seed, state, status, created, updated)).lastrowid
                self.result.added["fuzz_campaigns"] = self.result.added.get(
                    "fuzz_campaigns", 0) + 1
            else:
                new = there[0]
                if updated > there[1]:  # the shard ran on since it was merged
                    conn.execute("UPDATE main.fuzz_campaigns SET next_seed = ?, state = ?, "
                                 "status = ?, updated = ? WHERE id = ?",
                                 (next_seed, state, status, updated, new))
                    self.result.campaigns_updated += 1
            conn.execute("INSERT INTO temp.campaign_map VALUES (?, ?)", (old, new))

    def programs(self) -> None:
        """Programs by fingerprint: one already there keeps its row (and gains an artifact)."""
        if "programs" not in self.tables:
            return
        columns, exprs = _select_list(self.conn, "programs", {"artifact": _path("artifact")})
        before = _count(self.conn, "SELECT COUNT(*) FROM main.programs")
        self.conn.execute(f"INSERT INTO main.programs ({columns}) SELECT {exprs} FROM "
                          "src.programs s WHERE true ON CONFLICT(id) DO UPDATE SET "
                          "artifact = COALESCE(programs.artifact, excluded.artifact)")
        self.result.added["programs"] = _count(self.conn, "SELECT COUNT(*) FROM main.programs") \
            - before

    def checks(self) -> None:
        """Checks already there map to theirs; the others, their runs, verdicts and skipped
        runs get ids from `first_check` (and the runs' next id) on."""
        conn, tables, first = self.conn, self.tables, self.first_check
        if "checks" not in tables:
            return
        conn.execute("INSERT INTO temp.check_map SELECT s.id, MIN(m.id) FROM src.checks s JOIN "
                     "main.checks m ON m.program_id = s.program_id AND m.created = s.created "
                     "AND m.configs = s.configs GROUP BY s.id")
        self.result.checks_present = _count(conn, "SELECT COUNT(*) FROM temp.check_map")
        conn.execute("INSERT INTO temp.check_map SELECT id, ? + ROW_NUMBER() OVER (ORDER BY id) "
                     "- 1 FROM src.checks WHERE id NOT IN (SELECT old FROM temp.check_map)",
                     (first,))
        campaign = "(SELECT new FROM temp.campaign_map WHERE old = s.campaign)"
        columns, exprs = _select_list(conn, "checks", {"id": "m.new", "campaign": campaign})
        self.insert("checks", f"INSERT INTO main.checks ({columns}) SELECT {exprs} FROM "
                              "src.checks s JOIN temp.check_map m ON m.old = s.id WHERE m.new >= ?"
                              " ORDER BY s.id", (first,))
        if "runs" in tables:
            conn.execute("INSERT INTO temp.run_map SELECT r.id, ? + ROW_NUMBER() OVER (ORDER BY "
                         "r.id) - 1 FROM src.runs r JOIN temp.check_map m ON m.old = r.check_id "
                         "WHERE m.new >= ?", (self.next_id("runs"), first))
            columns, exprs = _select_list(conn, "runs", {"id": "rm.new", "check_id": "m.new"})
            self.insert("runs", f"INSERT INTO main.runs ({columns}) SELECT {exprs} FROM src.runs s"
                                " JOIN temp.run_map rm ON rm.old = s.id "
                                "JOIN temp.check_map m ON m.old = s.check_id ORDER BY s.id")
        if "verdicts" in tables:
            columns, exprs = _select_list(conn, "verdicts", {"run_id": "rm.new"})
            self.insert("verdicts", f"INSERT INTO main.verdicts ({columns}) SELECT {exprs} FROM "
                                    "src.verdicts s JOIN temp.run_map rm ON rm.old = s.run_id")
        if "run_passes" in tables:
            columns, exprs = _select_list(conn, "run_passes", {"run_id": "rm.new"})
            self.insert("run_passes", f"INSERT INTO main.run_passes ({columns}) SELECT {exprs} "
                                      "FROM src.run_passes s JOIN temp.run_map rm ON rm.old = s.run_id")
        if "skipped_runs" in tables:
            columns, exprs = _select_list(conn, "skipped_runs", {"check_id": "m.new"})
            self.insert("skipped_runs", f"INSERT INTO main.skipped_runs ({columns}) SELECT "
                                        f"{exprs} FROM src.skipped_runs s JOIN temp.check_map m "
                                        "ON m.old = s.check_id WHERE m.new >= ?", (first,))

    def findings(self) -> None:
        """Findings (``UNIQUE (program_id, config)``: the destination's stays), then the
        localizations, reductions and bisections that name them."""
        conn = self.conn
        if "findings" in self.tables:
            self.result.findings_present = _count(
                conn, "SELECT COUNT(*) FROM src.findings s JOIN main.findings f "
                      "ON f.program_id = s.program_id AND f.config = s.config")
            columns, exprs = _select_list(conn, "findings", {
                "id": "NULL", "check_id": "m.new", "artifact": _path("artifact")})
            self.insert("findings", f"INSERT INTO main.findings ({columns}) SELECT {exprs} FROM "
                                    "src.findings s JOIN temp.check_map m ON m.old = s.check_id "
                                    "WHERE true ORDER BY s.id "
                                    "ON CONFLICT(program_id, config) DO NOTHING")
            conn.execute("INSERT INTO temp.finding_map SELECT s.id, f.id FROM src.findings s JOIN "
                         "main.findings f ON f.program_id = s.program_id AND f.config = s.config")
        finding = "(SELECT new FROM temp.finding_map WHERE old = s.finding_id)"
        for table in ("localizations", "reductions", "bisections"):
            if table not in self.tables:
                continue
            overrides = {"id": "NULL", "finding_id": finding}
            if table == "reductions":
                overrides["directory"] = _path("directory")
            columns, exprs = _select_list(conn, table, overrides)
            self.insert(table, f"INSERT INTO main.{table} ({columns}) SELECT {exprs} FROM "
                               f"src.{table} s WHERE NOT EXISTS (SELECT 1 FROM main.{table} d "
                               "WHERE d.program_id = s.program_id AND d.config = s.config AND "
                               "d.created = s.created) ORDER BY s.id")

    def tuning(self) -> None:
        """Tuning runs not already there (same name, program and creation time), with their
        measurements."""
        conn = self.conn
        if "tuning_runs" in self.tables:
            conn.execute("INSERT INTO temp.tuning_map SELECT s.id, ? + ROW_NUMBER() OVER (ORDER "
                         "BY s.id) - 1 FROM src.tuning_runs s WHERE NOT EXISTS (SELECT 1 FROM "
                         "main.tuning_runs d WHERE d.name = s.name AND d.program_id = "
                         "s.program_id AND d.created = s.created)", (self.next_id("tuning_runs"),))
            columns, exprs = _select_list(conn, "tuning_runs", {"id": "t.new"})
            self.insert("tuning_runs", f"INSERT INTO main.tuning_runs ({columns}) SELECT {exprs} "
                                       "FROM src.tuning_runs s JOIN temp.tuning_map t "
                                       "ON t.old = s.id ORDER BY s.id")
        if "measurements" in self.tables:
            columns, exprs = _select_list(conn, "measurements", {"id": "NULL", "run_id": "t.new"})
            self.insert("measurements", f"INSERT INTO main.measurements ({columns}) SELECT "
                                        f"{exprs} FROM src.measurements s JOIN temp.tuning_map t "
                                        "ON t.old = s.run_id ORDER BY s.id")
