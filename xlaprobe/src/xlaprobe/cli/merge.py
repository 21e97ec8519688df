"""``xlaprobe merge SRC.db ... --db DEST``: copy seed shards' stores (or any xlaprobe stores)
into one, with their artifact directories (`xlaprobe.merge`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from xlaprobe.cli.app import app
from xlaprobe.cli.console import err, out, seconds
from xlaprobe.cli.options import DEFAULT_DB, DbOption, JsonOption
from xlaprobe.merge import merge_stores


@app.command()
def merge(sources: Annotated[list[Path], typer.Argument(
              help="stores to copy from (e.g. seed shards' shard0.db shard1.db); never written")],
          db: DbOption = DEFAULT_DB,
          as_json: JsonOption = False) -> None:
    """Merge stores into --db (created if missing): campaigns, checks, findings and their
    artifact directories; merging a store again adds only what is new."""
    raise typer.Exit(merge_command(sources, db=db, json_output=as_json))


def merge_command(sources: list[Path], *, db: Path, json_output: bool) -> int:
    """Merge `sources` into the store at `db` and print what each added (one line per source,
    or JSON).

    Returns:
        0 (every source merged).

    Raises:
        InvalidArgument: a source is missing, not an xlaprobe store, newer than this xlaprobe,
            or `db` itself (`db` is then left untouched).
    """
    try:
        results = merge_stores(sources, db)
    except KeyboardInterrupt:
        # Not the generic "results stored so far are kept": the source in flight is rolled back.
        err.print(escape(f"interrupted: the source being merged was rolled back, so {db} holds "
                         "only the sources merged before it (merging again adds only what is "
                         "missing)"), highlight=False, soft_wrap=True)
        raise SystemExit(130) from None
    if json_output:
        print(json.dumps([r.to_json() for r in results], indent=2))
        return 0
    for r in results:
        added = ", ".join(f"{n} {table}" for table, n in r.added.items()) or "nothing new"
        notes = []
        if r.checks_present:
            notes.append(f"{r.checks_present} checks already there")
        if r.findings_present:
            notes.append(f"{r.findings_present} findings already there (kept the destination's)")
        if r.campaigns_updated:
            notes.append(f"{r.campaigns_updated} campaigns brought up to date")
        if r.artifacts_copied:
            notes.append(f"{r.artifacts_copied} artifact directories copied"
                         + (f", {r.artifacts_renamed} renamed" if r.artifacts_renamed else ""))
        if r.artifacts_missing:
            notes.append(f"{r.artifacts_missing} artifact directories missing in the source")
        out.print(escape(f"{r.source}: {added} ({r.rows} rows in {seconds(r.seconds)})"
                         + (f"; {'; '.join(notes)}" if notes else "")),
                  highlight=False, soft_wrap=True)
    out.print(escape(f"merged into {db}: xlaprobe campaigns --db {db}; "
                     f"xlaprobe findings --db {db}"), highlight=False, soft_wrap=True)
    return 0
