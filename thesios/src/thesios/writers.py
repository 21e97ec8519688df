"""Writers of traces; every output is written atomically (temp file in the same folder + rename)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def write_parquet(table: pa.Table, path: str | Path) -> Path:
    """Write ``table`` to Parquet at ``path`` atomically; return the path.

    The bytes go to a temporary file beside ``path`` which is renamed over it only once complete, so
    a crash or a bad input never leaves a half-written file behind.

    Raises:
        OSError: the folder does not exist or is not writable.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        pq.write_table(table, tmp, compression="zstd")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def read_parquet(path: str | Path) -> pa.Table:
    """Read a Parquet trace written by :func:`write_parquet` (no code is executed on load)."""
    return pq.read_table(str(path))
