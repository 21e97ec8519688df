"""Output paths a command writes to: refused before any work, written atomically."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from xlaprobe.errors import InvalidArgument


def check_out_file(out: Path, *, example: str) -> None:
    """Refuse an output file path before any work is done: a directory, or a path in a folder
    that does not exist (nothing is created for the user).

    Args:
        out: the ``--out`` path.
        example: a file name to suggest when `out` is a directory, e.g. ``"report.html"``.

    Raises:
        InvalidArgument: as above.
    """
    if out.is_dir():
        raise InvalidArgument(f"--out {out} is a directory; give a file path, e.g. "
                              f"{out / example}")
    if not out.parent.is_dir():
        raise InvalidArgument(f"--out {out}: the folder {out.parent} does not exist; create it "
                              "first (nothing is created for you)")


def write_text_atomic(out: Path, text: str) -> None:
    """Write `text` (UTF-8) to `out` through a temporary file and a rename: a reader sees the
    old file or the new one, never half of one.

    Raises:
        InvalidArgument: the file cannot be written (permissions, disk full, ...).
    """
    try:
        fd, temporary = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    except OSError as exc:
        raise InvalidArgument(f"cannot write {out}: {exc}") from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, out)
    except BaseException as exc:
        Path(temporary).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise InvalidArgument(f"cannot write {out}: {exc}") from exc
        raise
