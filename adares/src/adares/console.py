"""What the commands say while they work: one line per step on stderr (``[HH:MM:SS] text``,
never wrapped, no source locations, so logs grep well) and, on a terminal, a progress bar per
replay with an ETA. ``--quiet`` silences both; errors are printed elsewhere and always."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator

from rich.console import Console


class Reporter:
    """Progress of one command on stderr. ``quiet``: say nothing."""

    def __init__(self, quiet: bool = False) -> None:
        self.quiet = quiet
        # log_path=False: no "cli.py:220" locations; soft_wrap: a long line stays one line.
        self.err = Console(stderr=True, log_path=False, soft_wrap=True)

    def line(self, msg: str) -> None:
        """One step's line: rich's log on a terminal, a plain timestamped line otherwise."""
        if self.quiet:
            return
        if self.err.is_terminal:
            self.err.log(msg)
        else:
            sys.stderr.write(f"[{time.strftime('%H:%M:%S')}] {msg}\n")
            sys.stderr.flush()

    @contextlib.contextmanager
    def bars(self) -> Iterator[Callable[[str, int, int], None]]:
        """A rich progress bar per replay (steps done, ETA) on a terminal; nothing in logs,
        which get the one line per replay that the callers print."""
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeElapsedColumn, TimeRemainingColumn)

        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                      console=self.err, transient=True,
                      disable=self.quiet or not self.err.is_terminal) as prog:
            tasks: dict[str, object] = {}

            def update(name: str, done: int, total: int) -> None:
                if name not in tasks or done == 0:
                    if name in tasks:
                        prog.remove_task(tasks[name])
                    tasks[name] = prog.add_task(f"{name} (steps)", total=total)
                prog.update(tasks[name], completed=done)

            yield update
