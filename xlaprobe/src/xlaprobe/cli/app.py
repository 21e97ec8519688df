"""The xlaprobe typer app and its global options. Each command module of this package
(`check`, `fuzz`, ...) registers its own commands on `app`, its options declared once beside its
work; `xlaprobe.cli.commands` imports them in the order ``xlaprobe --help`` lists them."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from xlaprobe.cli.console import set_quiet, set_wide
from xlaprobe.version import __version__

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Differential checking of XLA (from JAX): finds miscompilations.")


def _version(value: bool) -> None:
    if value:
        import jax  # heavy: loaded only for --version, so --help stays quick
        print(f"xlaprobe {__version__} (jax {jax.__version__}, jaxlib {jax.lib.__version__})")
        raise typer.Exit(0)


#: Set by the global --traceback option: an error prints its whole traceback, not one line.
SHOW_TRACEBACK = {"on": False}


@app.callback()
def _options(version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True,
        help="print the versions of xlaprobe, jax and jaxlib and exit")] = False,
             quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress on stderr "
                                                 "(results and errors still print)")] = False,
             traceback: Annotated[bool, typer.Option(
                 "--traceback", help="on an error print the whole traceback (your code's "
                 "frames included), not one line")] = False) -> None:
    """Differential checking of XLA (from JAX): finds miscompilations."""
    set_quiet(quiet)
    SHOW_TRACEBACK["on"] = traceback
    if os.environ.get("XLAPROBE_EXTENSIONS"):
        from xlaprobe.extend import load_extensions  # imports jax: only when extensions are named
        load_extensions()


def display(quiet: bool, wide: bool = False) -> None:
    """Apply a command's --quiet (on top of the global one) and --wide."""
    if quiet:
        set_quiet(True)
    if wide:
        set_wide()
