"""Files written whole or not at all (the one atomic writer of the package), and `.npz` archives
read without pickles."""

from __future__ import annotations

import os
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from xlaprobe.errors import CorruptArtifact


def write_atomic(path: str | Path, text: str | bytes) -> Path:
    """Write `text` (a str as UTF-8, bytes as they are) to `path` through a temporary file in its
    folder and a rename: a reader sees the old file or the new one, never half of one. The folder
    must exist.

    Returns:
        `path` as a Path.

    Raises:
        OSError: the folder is missing or cannot be written (the temporary file is removed).
    """
    path = Path(path)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8") if isinstance(text, str) else text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def read_npz(path: str | Path) -> dict[str, Any]:
    """Every array of an ``.npz`` archive by name (NumPy arrays), read without pickles.

    Raises:
        CorruptArtifact: not a zip archive (`np.load` would try to unpickle it), or an archive
            NumPy cannot read (names the file and why).
    """
    import numpy as np  # here: the command line imports this module and must not load numpy

    path = Path(path)
    if path.is_file() and not zipfile.is_zipfile(path):
        raise CorruptArtifact(f"cannot read {path}: not an .npz (zip) archive; the artifact is "
                              "corrupt")
    try:
        with np.load(path, allow_pickle=False) as data:
            return {name: data[name] for name in data.files}
    except Exception as exc:
        raise CorruptArtifact(f"cannot read {path}: {type(exc).__name__}: {exc}") from exc
