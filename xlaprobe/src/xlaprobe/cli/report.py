"""``xlaprobe report``: the store as one self-contained HTML page (`xlaprobe.report`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from xlaprobe.cli.app import app
from xlaprobe.cli.console import say
from xlaprobe.cli.options import DEFAULT_DB, DbOption
from xlaprobe.cli.paths import check_out_file
from xlaprobe.errors import InvalidArgument


@app.command()
def report(db: DbOption = DEFAULT_DB,
           out: Annotated[Path, typer.Option("--out", "-o", help="HTML file to write")] =
           Path("report.html")) -> None:
    """Write the store as one self-contained HTML page (findings, error maps, localizations,
    reduced repros, release windows, campaigns, tuning searches); opens offline."""
    report_command(db=db, out=out)


def report_command(*, db: Path, out: Path) -> Path:
    """Write the report of the store at `db` to `out` (atomically) and say so on stderr.

    Returns:
        The written path.

    Raises:
        InvalidArgument: no store at `db`, or `out` cannot be written.
        CorruptArtifact: `db` is not a readable xlaprobe store.
    """
    # The store imports jax and the page matplotlib: loaded to write, not for `xlaprobe --help`.
    from xlaprobe.report.gather import gather
    from xlaprobe.report.render import render, write_atomic

    if db.is_dir():
        raise InvalidArgument(f"--db {db} is a directory; give the store's file path, e.g. "
                              f"{db / 'xlaprobe.db'}")
    if not db.is_file():
        raise InvalidArgument(f"no store at {db}; run xlaprobe check first or pass --db")
    check_out_file(out, example="report.html")
    if out.exists() and (out.resolve() == db.resolve() or _is_sqlite(out)):
        what = "the store itself" if out.resolve() == db.resolve() else "an SQLite database"
        raise InvalidArgument(f"--out {out} is {what}; give the HTML file another path, e.g. "
                              "report.html")
    with _open(db) as store:
        data = gather(store, db=str(db))
    page = render(data)
    try:
        written = write_atomic(out, page)
    except OSError as exc:
        raise InvalidArgument(f"cannot write {out}: {exc}") from exc
    say(f"wrote {written} ({len(page) // 1024} kB): {len(data.findings)} finding(s), "
        f"{len(data.campaigns)} campaign(s), {len(data.tunings)} tuning search(es); open it "
        "in a browser (works offline)")
    return written


def _is_sqlite(path: Path) -> bool:
    """Does `path` start like an SQLite database (a store a report must never replace)?"""
    try:
        with path.open("rb") as handle:
            return handle.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def _open(db: Path) -> Any:
    """The store at `db`, read-only (a running campaign keeps writing undisturbed); a store of
    an older schema is opened for writing instead, which upgrades it (as `findings` does).

    Raises:
        CorruptArtifact: not a readable xlaprobe store.
    """
    from xlaprobe.store import SCHEMA_VERSION, Store  # imports jax: not for --help

    store = Store(db, readonly=True)
    if int(store.select("SELECT value FROM meta WHERE key = 'schema'")[0][0]) >= SCHEMA_VERSION:
        return store
    store.close()
    return Store(db)
