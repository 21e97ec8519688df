"""Arguments and options several commands share, as typer ``Annotated`` aliases; a command's own
options are declared in its module, beside its work."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from xlaprobe.cli.paths import check_folder_of

# The store's default path (`xlaprobe.store.DEFAULT_DB`), spelled here so --help needs no store import.
DEFAULT_DB = Path(".xlaprobe/xlaprobe.db")


def _store_path(value: Path) -> Path:
    # `none` keeps nothing in pytest's --xlaprobe-db and is None in Python: here every command
    # records, so a file called "none" would surprise.
    if str(value).strip().lower() in ("none", "null", ""):
        raise typer.BadParameter("the command line always records its results: give a file "
                                 "path (db=None in Python and --xlaprobe-db none in pytest "
                                 "keep nothing)")
    check_folder_of(value, flag="--db", default_folder=DEFAULT_DB.parent)
    return value


DbOption = Annotated[Path, typer.Option(help="SQLite store", callback=_store_path)]
JobsOption = Annotated[int, typer.Option("--jobs", "-j", min=1, help="worker processes")]
JsonOption = Annotated[bool, typer.Option("--json", help="print JSON to stdout")]
FindingTarget = Annotated[str, typer.Argument(help="finding id, artifact directory, case module, "
                                                   "zoo MODEL, FILE.py:FN or module:fn")]
RunTimeoutOption = Annotated[float, typer.Option(help="per-run limit (s)", min=0.1,
                                                max=7 * 24 * 3600.0)]
InputsOption = Annotated[str, typer.Option("--inputs", help="input spec for FILE:FN, e.g. "
                                           "'f32[8,128],i32[8]'")]
QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="no progress on stderr "
                                          "(results and errors still print)")]
WideOption = Annotated[bool, typer.Option("--wide", help="tables as wide as their content: names "
                                         "and paths never folded")]
AddressOption = Annotated[str | None, typer.Option(
    "--address", help="Ray cluster HOST:PORT or auto [default: a new local one]",
    show_default=False)]
FaultyConfig = Annotated[str, typer.Argument(help="the faulty configuration (default: the "
                                                  "finding's or the case's FAULTY_CONFIG)")]
