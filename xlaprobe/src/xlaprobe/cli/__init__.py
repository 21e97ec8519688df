"""The xlaprobe command line; ``xlaprobe`` and ``python -m xlaprobe.cli`` run `main`."""

from xlaprobe.cli.commands import app, main

__all__ = ["app", "main"]
