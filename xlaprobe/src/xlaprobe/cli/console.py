"""The two consoles every command prints on, the progress display every long command uses
(`Steps`), and the time and duration formats they share."""

from __future__ import annotations

import datetime
import sys
from types import TracebackType

from rich.console import Console
from rich.markup import escape
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn,
                           TimeElapsedColumn)

#: Width of ``--wide`` output and of output that is not a terminal (CI logs, pipes, where rich
#: would wrap at 80 columns): wider than any table, so tables are as wide as their content and
#: no name or path is folded or cut.
WIDE = 10_000
out = Console(width=None if sys.stdout.isatty() else WIDE)
err = Console(stderr=True, width=None if sys.stderr.isatty() else WIDE)

#: Set by ``--quiet``: progress is not shown (results, warnings and errors still are).
_quiet = False


def set_quiet(quiet: bool) -> None:
    """Silence (True) or show (False) progress for the rest of the process (``--quiet``)."""
    global _quiet
    _quiet = bool(quiet)


def is_quiet() -> bool:
    """Whether ``--quiet`` was given."""
    return _quiet


def set_wide() -> None:
    """Print stdout's tables as wide as their content (``--wide``): no name or path folded."""
    out.width = WIDE


def seconds(value: float) -> str:
    """A duration for people, the one format every command prints: 2 decimals under 10 s, 1 under
    100 s, then whole seconds, and minutes from 10 minutes on.

    >>> seconds(0.4132), seconds(12.34), seconds(135.2), seconds(3725)
    ('0.41 s', '12.3 s', '135 s', '62 min 5 s')
    """
    if value != value:
        return "-"
    if value < 10:
        return f"{value:.2f} s"
    if value < 100:
        return f"{value:.1f} s"
    if value < 600:
        return f"{value:.0f} s"
    minutes, rest = divmod(int(round(value)), 60)
    return f"{minutes} min {rest} s"


def local_time(unix_s: float | None) -> str:
    """A Unix time (s) as local ISO date and time to the minute, e.g. ``2026-12-02 00:31``;
    ``-`` for None."""
    if unix_s is None:
        return "-"
    return datetime.datetime.fromtimestamp(float(unix_s)).strftime("%Y-%m-%d %H:%M")


def say(text: str) -> None:
    """One progress line on stderr (markup in `text` is printed as is); nothing with ``--quiet``."""
    if not _quiet:
        err.print(escape(text), soft_wrap=True, highlight=False)


def tell(text: str) -> None:
    """One result line on stderr (markup in `text` is printed as is), shown even with
    ``--quiet``: what a command concludes when stdout carries its JSON."""
    err.print(escape(text), soft_wrap=True, highlight=False)


class Steps:
    """The progress of one command, step by step, on stderr.

    On a terminal: a transient rich progress line (spinner, the last step, a bar when the total is
    known, elapsed time) that vanishes when the command ends. Not on a terminal (CI logs, pipes):
    one plain line per completed step as it happens, ``COMMAND: TEXT (DONE/TOTAL)``. With
    ``--quiet``: nothing. Use as a context manager::

        with Steps("check", total=8) as steps:
            steps.step("xla done in 1.20 s")      # "check: xla done in 1.20 s (1/8)"

    Args:
        command: the command's name, prefixed to plain lines.
        total: steps expected, or None when unknown (no bar, no "/TOTAL").
        console: where to draw (default: the stderr console `err`).
        quiet: show nothing (default: ``--quiet``'s setting).
    """

    def __init__(self, command: str, total: int | None = None, *,
                 console: Console | None = None, quiet: bool | None = None) -> None:
        self.command = command
        self.total = total
        self.done = 0
        self.console = console or err
        self.quiet = _quiet if quiet is None else quiet
        self.live = self.console.is_terminal and not self.quiet
        self._progress: Progress | None = None
        self._task: object = None

    def __enter__(self) -> Steps:
        if self.live:
            columns = [SpinnerColumn(), TextColumn("{task.description}")]
            if self.total is not None:
                columns += [BarColumn(bar_width=20), MofNCompleteColumn()]
            self._progress = Progress(*columns, TimeElapsedColumn(), console=self.console,
                                      transient=True)
            self._progress.start()
            self._task = self._progress.add_task(escape(self.command), total=self.total)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 trace: TracebackType | None) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def status(self, text: str) -> None:
        """What the command is doing now (a terminal shows it; plain output waits for steps)."""
        if self._progress is not None:
            self._progress.update(self._task, description=escape(f"{self.command}: {text}"))

    def step(self, text: str, *, keep: bool = False) -> None:
        """One completed step: counted, shown on a terminal (printed above the progress line,
        to stay, with `keep`), one line when not on a terminal."""
        self.done += 1
        if self.quiet:
            return
        count = f" ({self.done}/{self.total})" if self.total is not None else ""
        if self._progress is not None:
            if keep:
                self._progress.console.print(escape(text + count), soft_wrap=True,
                                             highlight=False)
            # A kept line already says what finished: the progress line shows the bar only.
            shown = self.command if keep else f"{self.command}: {' '.join(text.split())}"
            self._progress.update(self._task, completed=self.done, description=escape(shown))
            return
        self.console.print(escape(f"{self.command}: {text.strip()}{count}"), soft_wrap=True,
                           highlight=False)

    def note(self, text: str) -> None:
        """A line that is not a step (a decision, a warning of the run): kept on a terminal, one
        plain line otherwise; nothing with ``--quiet``."""
        if self.quiet:
            return
        if self._progress is not None:
            self._progress.console.print(escape(text), soft_wrap=True, highlight=False)
        else:
            self.console.print(escape(f"{self.command}: {text.strip()}"), soft_wrap=True,
                               highlight=False)
