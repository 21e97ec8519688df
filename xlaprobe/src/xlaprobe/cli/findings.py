"""``xlaprobe findings [ID]``: the stored findings and how many distinct bugs they are, or one
finding with its localization, reduction and release window."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from xlaprobe.cli.app import app, display
from xlaprobe.cli.console import local_time, out
from xlaprobe.cli.options import DEFAULT_DB, DbOption, JsonOption, WideOption
from xlaprobe.errors import InvalidArgument


@app.command()
def findings(finding_id: Annotated[int | None, typer.Argument(
                 help="show this finding with its localization, reduction and release window")] = None,
             db: DbOption = DEFAULT_DB,
             as_json: JsonOption = False,
             wide: WideOption = False) -> None:
    """List stored findings, newest first, and how many distinct bugs they are; or show one."""
    display(False, wide)
    findings_command(finding_id, db=db, json_output=as_json)


def findings_command(finding_id: int | None, *, db: Path, json_output: bool) -> None:
    """List the findings of the store at `db` (or show finding `finding_id`).

    Raises:
        InvalidArgument: no store at `db`, or no such finding.
    """
    from xlaprobe.store import Store  # imports the checker (jax): not for `xlaprobe --help`

    if not db.exists():
        raise InvalidArgument(f"no store at {db}; run xlaprobe check first or pass --db")
    # Opened for writing: a store of an older schema is upgraded (a read-only one lacks the
    # columns and tables findings are read from).
    with Store(db) as store:
        if finding_id is not None:
            found = store.finding(finding_id)
            if found is None:
                raise InvalidArgument(f"no finding {finding_id} in {db}; xlaprobe findings "
                                      "lists them")
            detail = {**found.to_json(), "created_local": local_time(found.created),
                      "localizations": store.localizations(finding_id),
                      "reductions": store.reductions(finding_id),
                      "bisections": store.bisections(finding_id)}
            if json_output:
                print(json.dumps(detail, indent=2, default=str))
            else:
                _print_finding(detail, db)
            return
        rows = [{**row, "created_local": local_time(row.get("created"))}
                for row in store.findings()]
        bugs = store.distinct_bugs()
    if json_output:
        print(json.dumps(rows, indent=2))
        return
    table = Table()
    # Names and paths are never cut ("…"); at a terminal's width they fold (--wide: never).
    for column in ("id", "created", "program", "config", "kind", "bug", "also failing",
                   "artifact"):
        table.add_column(column, overflow="fold", no_wrap=column == "created")
    for row in rows:
        also = ",".join(a for a in row["alike"] if a != row["config"])
        table.add_row(*(escape(str(v or "")) for v in (
            row["id"], row["created_local"], row["name"], row["config"],
            f"freedom:{row['freedom']}" if row.get("freedom") else row["kind"], row["bug"] or row["fingerprint"], also, row["artifact"])))
    out.print(table)
    freedoms = sum(row["kind"] == "freedom" for row in rows)
    out.print(f"{len(rows)} finding{'s' if len(rows) != 1 else ''}, {bugs} distinct "
              f"bug{'s' if bugs != 1 else ''} (by localized operation where "
              "localized, else by fingerprint)"
              + (f", {freedoms} labelled freedom{'s' if freedoms != 1 else ''} (legal, not "
                 "bugs)" if freedoms else ""))


def _print_finding(detail: dict[str, Any], db: Path) -> None:
    from xlaprobe.verdicts import next_commands, replay_line  # imports jax: not for --help

    kind = f"freedom:{detail['freedom']}" if detail.get("freedom") else detail["kind"]
    out.print(f"[bold]finding {detail['id']}[/]: {escape(detail['config'])} {kind} on "
              f"{escape(detail['name'])} (program {detail['program_id']})")
    out.print(f"  fingerprint {detail['fingerprint']}; bug {detail['bug'] or '(not localized)'}; "
              f"failing alike: {escape(', '.join(detail['alike']) or detail['config'])}")
    out.print(f"  created {detail['created_local']}; artifact: "
              f"{escape(str(detail['artifact'] or '(none)'))}", soft_wrap=True)
    if detail["artifact"] and Path(detail["artifact"]).is_dir():
        out.print(escape(f"  {replay_line(detail['config'], str(detail['artifact']))}"),
                  soft_wrap=True)
    for loc in detail["localizations"][:1]:
        out.print(f"  localized: {escape(_localized(loc))}")
    for red in detail["reductions"][:1]:
        out.print(f"  reduced: {red.get('equations_before')} -> {red.get('equations_after')} "
                  f"equations ({escape(', '.join(red.get('primitives', [])))}) in "
                  f"{escape(str(red.get('directory') or ''))}")
    for bis in detail["bisections"][:1]:
        out.print(f"  releases: last good {bis.get('last_good') or '-'}, first bad "
                  f"{bis.get('first_bad') or '-'}, first fixed {bis.get('first_fixed') or '-'}")
    if not (detail["localizations"] or detail["reductions"] or detail["bisections"]):
        out.print(escape(f"  {next_commands(detail['id'], db)}"), soft_wrap=True)


def _localized(loc: dict[str, Any]) -> str:
    """One line of a stored localization's JSON (``format`` 2: one object per tier; older rows
    are one flat object)."""
    if loc.get("format", 1) >= 2:
        eq, op, blame = loc.get("equation") or {}, loc.get("op") or {}, loc.get("pass") or {}
        index, primitive = eq.get("index", -1), eq.get("primitive", "")
        instruction, opcode = op.get("instruction", ""), op.get("opcode", "")
        guilty = blame.get("compiler_pass", "")
    else:
        index, primitive = loc.get("equation", -1), loc.get("primitive", "")
        instruction, opcode = loc.get("op_instruction", ""), loc.get("op_opcode", "")
        guilty = loc.get("compiler_pass", "")
    where = f"equation {index} {primitive}" if index >= 0 else "nothing localized"
    return (where + (f"; op {instruction} ({opcode})" if instruction else "")
            + (f"; pass {guilty}" if guilty else ""))
