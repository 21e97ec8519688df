"""Atomic writes: every file adares writes goes through a temporary file in the same folder and a
rename, so a crash or Ctrl-C never leaves a half-written output."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from adares.errors import InputError


def check_input_file(path: Path) -> None:
    """InputError (one line) unless ``path`` is an existing file: "no such file", or "is a
    folder" for a directory (reading one fails later with a less clear message)."""
    if path.is_dir():
        raise InputError(f"{path}: is a folder, give a file")
    if not path.is_file():
        raise InputError(f"{path}: no such file")


def write_atomic(path: str | Path, data: str | bytes) -> None:
    """Write `data` (text as UTF-8, or bytes) to `path` through a temporary file beside it and a
    rename; the file gets the umask's usual mode (mkstemp alone makes 0600).

    Raises:
        OSError: the folder does not exist or cannot be written (the temporary file is removed).
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
