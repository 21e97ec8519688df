"""``xlaprobe campaigns``: the fuzz campaigns of a store, each with its programs, coverage,
findings and rate, and the command that continues it."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from xlaprobe.cli.app import app
from xlaprobe.cli.console import out
from xlaprobe.cli.options import DEFAULT_DB, DbOption, JsonOption


@app.command()
def campaigns(db: DbOption = DEFAULT_DB,
              as_json: JsonOption = False) -> None:
    """List the fuzz campaigns of the store: programs, seeds, rate, coverage, findings."""
    campaigns_command(db=db, json_output=as_json)


def campaigns_command(*, db: Path, json_output: bool) -> None:
    """Print the campaigns of the store at `db` as a table (or JSON), oldest first.

    Raises:
        InvalidArgument: no store at `db`.
    """
    from xlaprobe.campaign import list_campaigns  # imports jax: not for `xlaprobe --help`

    records = list_campaigns(db)
    if json_output:
        print(json.dumps([r.to_json() for r in records], indent=2))
        return
    if not records:
        out.print(f"no fuzz campaign in {escape(str(db))}; start one with xlaprobe fuzz")
        return
    table = Table()
    for column in ("id", "configurations", "schedule", "backend", "shard", "status", "programs",
                   "seeds", "programs/s",
                   "covered", "findings", "distinct", "sessions", "started"):
        table.add_column(column, overflow="fold",
                         justify="right" if column in ("programs", "programs/s", "findings",
                                                       "distinct", "sessions") else "left")
    for r in records:
        schedule = r.schedule + (f" ({r.skipped} runs skipped)" if r.skipped else "")
        shard = f"{r.shard[0]}/{r.shard[1]}" if r.shard[1] > 1 else "-"
        table.add_row(str(r.id), escape(",".join(r.configs)), schedule, r.backend, shard,
                      r.status, str(r.programs),
                      f"{r.start_seed}..{r.next_seed - 1}" if r.next_seed > r.start_seed else "-",
                      f"{r.programs_per_s:.2f}", f"{r.covered} primitives", str(r.findings),
                      str(r.unique_findings), str(r.sessions),
                      time.strftime("%Y-%m-%d %H:%M", time.localtime(r.created)))
    out.print(table)
    out.print(escape(f"continue one: xlaprobe fuzz --campaign ID --db {db}"), soft_wrap=True)
