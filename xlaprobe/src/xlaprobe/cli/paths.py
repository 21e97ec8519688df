"""Output paths a command writes to: refused before any work, written atomically."""

from __future__ import annotations

from pathlib import Path

from xlaprobe.errors import InvalidArgument
from xlaprobe.files import write_atomic


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
    """`xlaprobe.files.write_atomic`, its failure as a one-line error.

    Raises:
        InvalidArgument: the file cannot be written (permissions, disk full, ...).
    """
    try:
        write_atomic(out, text)
    except OSError as exc:
        raise InvalidArgument(f"cannot write {out}: {exc}") from exc
