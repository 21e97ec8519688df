"""Errors that the CLI turns into one line on stderr and exit code 2."""

from __future__ import annotations


class ThesiosInputError(ValueError):
    """Bad input: a malformed file, spec or argument. ``str(err)`` is the one-line message."""


class TraceFormatError(ThesiosInputError):
    """A trace file that does not follow its format; the message reads ``file:line: reason``."""
