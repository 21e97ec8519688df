"""The two consoles every command prints on, and number formatting they share."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.markup import escape

# Not a terminal (CI logs, pipes): rich would wrap tables at 80 columns.
out = Console(width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 160)


def fmt(value: float) -> str:
    """A short number for a table cell: ``-`` for NaN, ``0``, else 3 significant digits.

    >>> fmt(float("nan")), fmt(0.0), fmt(0.000123456)
    ('-', '0', '0.000123')
    """
    if value != value:  # NaN
        return "-"
    if value == 0:
        return "0"
    return f"{value:.3g}"


def say(text: str) -> None:
    """One progress line on stderr (markup in `text` is printed as is)."""
    err.print(escape(text), soft_wrap=True, highlight=False)
