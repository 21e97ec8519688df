"""The ``adares`` console script: loads the command line inside a Ctrl-C guard."""

from __future__ import annotations

import sys


def main() -> None:
    """Entry point of the ``adares`` console script. Loading typer, rich and numpy takes about a
    second; a Ctrl-C then (before the commands' own handler runs) gets one line and exit code
    130 instead of a KeyboardInterrupt traceback."""
    try:
        from adares.cli import main as cli_main

        cli_main()
    except KeyboardInterrupt:
        sys.stderr.write("adares: interrupted\n")
        raise SystemExit(130) from None
