"""``xlaprobe coverage``: the optimization coverage of a store, per fuzz campaign and per program
source (fuzz, a steered campaign's runs by kind: ``fuzz (pattern)``, ``fuzz (mutation)``,
``fuzz (special-value re-run)``; zoo, third-party zoo, captures): the XLA passes that changed a
module and in how many runs, the algebraic-simplifier rewrites that fired, and the passes never
seen changing anything."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from xlaprobe.cli.app import app
from xlaprobe.cli.console import out
from xlaprobe.cli.options import DEFAULT_DB, DbOption, JsonOption
from xlaprobe.coverage_summary import Group, store_coverage


@app.command()
def coverage(db: DbOption = DEFAULT_DB,
             campaign: Annotated[int | None, typer.Option(
                 help="only this fuzz campaign's checks (xlaprobe campaigns lists them)")] = None,
             as_json: JsonOption = False) -> None:
    """Optimization coverage: per campaign and program source, the XLA passes that changed a
    module, the rewrites that fired, and the passes never seen changing anything."""
    coverage_command(db=db, campaign=campaign, json_output=as_json)


def _label(group: Group) -> str:
    campaign = "no campaign" if group.campaign is None else f"campaign {group.campaign}"
    return f"{campaign}, {group.source}"


def _summary(groups: list[Group]) -> Table:
    table = Table(title="optimization coverage")
    for column in ("campaign", "source", "runs", "programs", "passes changed", "passes ran",
                   "rewrite kinds"):
        table.add_column(column, justify="left" if column in ("campaign", "source") else "right")
    for group in groups:
        campaign = {None: "-", -1: "all"}.get(group.campaign, str(group.campaign))
        table.add_row(campaign, group.source, str(group.runs), str(len(group.programs)),
                      str(len(group.changed)), str(len(group.ran)), str(len(group.rewrites)))
    return table


def _matrix(groups: list[Group], title: str, rewrites: bool) -> Table:
    """Rows: the passes that changed a module in some group (or the rewrite kinds); a column per
    group: runs that changed the module (fired); ``0`` where a pass ran and never changed
    anything, ``-`` where it did not run."""
    table = Table(title=title)
    table.add_column("rewrite kind" if rewrites else "pass")
    for group in groups:
        table.add_column(escape(_label(group)), justify="right")
    counts = [g.rewrites if rewrites else g.changed for g in groups]
    names = {n for g in groups for n in (g.rewrites if rewrites else g.changed)}
    for name in sorted(names, key=lambda n: (-sum(c[n] for c in counts), n)):
        cells = [str(c[name]) if c[name] or rewrites or name in g.ran else "-"
                 for c, g in zip(counts, groups)]
        table.add_row(escape(name), *cells)
    return table


def coverage_command(*, db: Path, campaign: int | None, json_output: bool) -> None:
    """Print the coverage of the store at `db` as tables (or JSON): a summary per (campaign,
    source), then per pass the runs it changed the module in, then the rewrites that fired.

    Raises:
        InvalidArgument: no store at `db`.
        CorruptArtifact: not an xlaprobe store, or corrupt coverage rows.
    """
    groups, total = store_coverage(db, campaign=campaign)
    if json_output:
        print(json.dumps({"groups": [g.to_json() for g in groups], "total": total.to_json()},
                         indent=2))
        return
    if not total.runs:
        out.print(f"no optimization coverage in {escape(str(db))}: no XLA run recorded one "
                  "(xlaprobe check and fuzz record it unless XLAPROBE_COVERAGE=0)")
        return
    out.print(_summary(groups + ([total] if len(groups) > 1 else [])))
    out.print(_matrix(groups, "runs in which each pass changed the module (0: ran, never "
                              "changed it; -: did not run)", rewrites=False))
    if total.rewrites:
        out.print(_matrix(groups, "runs in which each algebraic-simplifier rewrite fired",
                          rewrites=True))
    never = total.never_changed
    out.print(f"{len(never)} of {len(total.ran)} passes that ran never changed a module: "
              + escape(", ".join(never)), soft_wrap=True)
