"""Output paths a command writes to: refused before any work, written atomically.

One rule for every command's ``--db`` and ``--out``: what the command writes (a store, a file, an
output directory) may be created, but the folder it goes in must exist; the one folder created
for the user is the default store's, ``.xlaprobe/``. A missing folder is one line and exit 2,
before any work (as thesios, adares and geodml refuse theirs).
"""

from __future__ import annotations

from pathlib import Path

from xlaprobe.errors import InvalidArgument
from xlaprobe.files import write_atomic


def check_folder_of(path: Path, *, flag: str, default_folder: Path | None = None) -> None:
    """Refuse `path` when the folder it goes in does not exist (nothing is created for the user,
    except `default_folder`, the default store's).

    Args:
        path: the file or output directory the command will write.
        flag: the option that named it, for the message (``"--db"``, ``"--out"``).
        default_folder: the one folder that may be missing (it is created when written).

    Raises:
        InvalidArgument: the folder does not exist (or is a file).

    >>> check_folder_of(Path("x.db"), flag="--db")  # the working directory
    >>> check_folder_of(Path(".xlaprobe/x.db"), flag="--db", default_folder=Path(".xlaprobe"))
    """
    folder = path.parent
    if default_folder is not None and (folder == default_folder or
                                       folder.resolve() == default_folder.resolve()):
        return
    if not folder.is_dir():
        raise InvalidArgument(f"{flag} {path}: the folder {folder} does not exist; create it "
                              "first (nothing is created for you)")


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
    check_folder_of(out, flag="--out")


def write_text_atomic(out: Path, text: str) -> None:
    """`xlaprobe.files.write_atomic`, its failure as a one-line error.

    Raises:
        InvalidArgument: the file cannot be written (permissions, disk full, ...).
    """
    try:
        write_atomic(out, text)
    except OSError as exc:
        raise InvalidArgument(f"cannot write {out}: {exc}") from exc
