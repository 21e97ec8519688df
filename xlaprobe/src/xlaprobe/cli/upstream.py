"""``xlaprobe upstream ID``: a ready-to-file upstream issue for a finding."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from xlaprobe.cli.app import app
from xlaprobe.cli.options import DEFAULT_DB, DbOption, JsonOption
from xlaprobe.cli.paths import check_out_file, write_text_atomic


@app.command()
def upstream(
    finding_id: Annotated[int, typer.Argument(help="finding id (xlaprobe findings lists them)")],
    out: Annotated[Path | None, typer.Option("--out", help="write the Markdown here")] = None,
    db: DbOption = DEFAULT_DB,
    run: Annotated[bool, typer.Option(help="run the reproducer once and include its "
                                           "output")] = True,
    as_json: JsonOption = False,
) -> None:
    """Draft a ready-to-file upstream issue (openxla/xla or jax-ml/jax) for a finding.

    Exit 0 when drafted and its reproducer shows the fault (or was not run), 1 when it did not."""
    raise typer.Exit(upstream_command(finding_id, out=out, db=db, run=run, json_output=as_json))


def upstream_command(finding_id: int, *, out: Path | None, db: Path, run: bool,
                     json_output: bool) -> int:
    """Print (or, with `out`, write) the Markdown issue of finding `finding_id`.

    Returns:
        Exit code: 0 when the reproducer shows the fault (exit 1) or was not run; 1 when it ran
        and did not show it (the draft is still printed or written, with its output).

    Raises:
        InvalidArgument: `out` is a directory or in a missing folder, or cannot be written; no
            store, no such finding, no artifact or reference to draft from.
    """
    from xlaprobe.upstream import draft, gather, to_json_text  # imports jax: not for --help

    if out is not None:
        check_out_file(out, example=f"finding-{finding_id}.md")
    report = draft(gather(db, finding_id), run=run)
    if out is not None:
        write_text_atomic(out, report.markdown)
    if json_output:
        print(to_json_text(report))
    elif out is None:
        print(report.markdown)
    else:
        print(f"wrote {out}: {report.title} (for {report.repository})")
    if report.repro_exit is not None and report.repro_exit != 1:
        print(f"warning: the reproducer exited {report.repro_exit} here, not 1: it does not show "
              "the fault on this machine", file=sys.stderr)
        return 1
    return 0
