"""The one check every input file goes through before it is read (--wan, libsvm:, csv:, parquet:)."""

from __future__ import annotations

from pathlib import Path

from geodml.errors import GeodmlError


def existing_file(path: str | Path, what: str) -> Path:
    """`path` as a Path, once it names a file.

    Args:
        path: the path the user gave.
        what: what the file holds, for the message ("WAN", "csv", "libsvm").

    Raises:
        GeodmlError: "WHAT file is a folder: PATH" or "WHAT file not found: PATH".
    """
    p = Path(path)
    if p.is_dir():
        raise GeodmlError(f"{what} file is a folder: {str(path)!r}")
    if not p.is_file():
        raise GeodmlError(f"{what} file not found: {str(path)!r}")
    return p
