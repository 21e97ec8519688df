"""The xlaprobe command line (typer + rich): `main` and the commands. Each command is declared
once, with its options, in its own module of this package beside its work (`check`, `fuzz`,
`campaigns`, `coverage`, `merge`, `localize`, `reduce`, `bisect` with `envs`, `upstream`, `agent`
(mcp), `tune` with `tune-corpus`, `listings` (models, mutants, configs), `findings`, `report`,
`capture`); importing them here registers them on `xlaprobe.cli.app.app` in the order
``xlaprobe --help`` lists them. Those modules import jax and the rest of the library inside their
command bodies, so ``xlaprobe --help`` stays quick.

Exit codes: 0 all ok, 1 findings, 2 bad input (one line on stderr, never a traceback), 3 an internal
error of xlaprobe itself (a bug: one line on stderr, the traceback in a file it names), 4 (check) no
finding but the check is incomplete (the float64 reference or one of xlaprobe's interpreters could
not run the program), 130 on Ctrl-C (everything stored so far is kept).
"""

from __future__ import annotations

import sys
import tempfile
import traceback

import typer
from rich.markup import escape

# Imported for their commands, which each registers on `app`: this order is --help's.
from xlaprobe.cli import (check, fuzz, campaigns, coverage, merge, localize,  # noqa: F401
                          reduce, bisect, upstream, agent, tune, listings, findings,
                          report, capture)
from xlaprobe.cli.app import SHOW_TRACEBACK, app
from xlaprobe.cli.console import err
from xlaprobe.errors import XlaprobeError, disk_full

__all__ = ["EXIT_INTERNAL_ERROR", "app", "main"]

#: Exit code of an internal error of xlaprobe (never 1, which means "findings").
EXIT_INTERNAL_ERROR = 3


def _internal_error(exc: BaseException) -> None:
    """Report a bug of xlaprobe in one line, its traceback in a file, and exit 3."""
    with tempfile.NamedTemporaryFile("w", prefix="xlaprobe-traceback-", suffix=".txt",
                                     delete=False) as handle:
        traceback.print_exception(exc, file=handle)
    err.print(f"[red]xlaprobe: internal error:[/] {escape(type(exc).__name__)}: "
              f"{escape(str(exc).strip().splitlines()[0] if str(exc).strip() else '')} "
              f"(a bug, not a finding; traceback in {handle.name}: please report it)",
              highlight=False, soft_wrap=True)
    sys.exit(EXIT_INTERNAL_ERROR)


def main() -> None:
    """Entry point: run the app; XlaprobeError or a full disk -> one line and exit 2; Ctrl-C ->
    exit 130; any other exception (a bug of xlaprobe) -> one line and exit 3."""
    try:
        code = app(standalone_mode=False)
    except typer.Exit as exc:
        code = exc.exit_code
    except XlaprobeError as exc:
        if SHOW_TRACEBACK["on"]:
            traceback.print_exception(exc, file=sys.stderr)
        else:
            err.print(f"[red]xlaprobe: error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
        err.print("interrupted: results stored so far are kept")
        sys.exit(130)
    except Exception as exc:
        # typer vendors click: match its usage errors and Abort by shape, not by import path.
        if type(exc).__name__ == "Abort":
            err.print("interrupted: results stored so far are kept")
            sys.exit(130)
        if type(exc).__name__ == "NoArgsIsHelpError":  # a bare command: its help was printed
            sys.exit(0)
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):
            err.print(f"[red]xlaprobe: error:[/] {escape(exc.format_message())} (see xlaprobe --help)",
                      highlight=False, soft_wrap=True)
            sys.exit(2)
        if disk_full(exc):  # the machine, not a bug: no traceback file onto the full disk
            err.print(f"[red]xlaprobe: error:[/] the disk is full ({escape(str(exc))}): free space "
                      "and run again; results stored so far are kept", highlight=False, soft_wrap=True)
            sys.exit(2)
        _internal_error(exc)
    if code == 130:  # typer turns Ctrl-C into Exit(130)
        err.print("interrupted: results stored so far are kept")
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
