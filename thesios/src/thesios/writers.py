"""Writers of traces; every output is written atomically (temp file in the same folder + rename)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def _umask_mode() -> int:
    """Mode a plain ``open()`` would give a new file (mkstemp's temp files are 0600)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def write_parquet(table: pa.Table, path: str | Path) -> Path:
    """Write ``table`` to Parquet at ``path`` atomically; return the path.

    The bytes go to a temporary file beside ``path`` which is renamed over it only once complete, so
    a crash or a bad input never leaves a half-written file behind.

    Raises:
        OSError: the folder does not exist or is not writable.
    """
    path = Path(path)
    if not isinstance(table, pa.Table):
        raise TypeError("write_parquet takes a pyarrow.Table")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        pq.write_table(table, tmp, compression="zstd")
        os.chmod(tmp, _umask_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def read_parquet(path: str | Path) -> pa.Table:
    """Read a Parquet trace written by :func:`write_parquet` (no code is executed on load)."""
    return pq.read_table(str(path))


def _atomic_bytes(data: bytes, path: Path) -> Path:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, _umask_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_thesios_csv(table: pa.Table, path: str | Path) -> Path:
    """Write a trace as a Thesios CSV shard (header + rows, the 17 columns in order) atomically.

    Extra columns other than ``latency`` (e.g. ``disk_id``) are dropped; nulls become empty
    fields. :func:`thesios.readers.read_thesios_csv` reads the result back to an equal table.

    Raises:
        ValueError: a column of the 17 is missing.
    """
    import io

    import pyarrow.csv as pcsv

    from thesios.schema import EXTRA_LATENCY, THESIOS_COLUMNS

    names = [*THESIOS_COLUMNS, *([EXTRA_LATENCY] if EXTRA_LATENCY in table.column_names else [])]
    missing = [n for n in names if n not in table.column_names]
    if missing:
        raise ValueError(f"trace lacks columns {missing}")
    buf = io.BytesIO()
    buf.write((",".join(names) + "\n").encode())  # pyarrow quotes header names; shards do not
    pcsv.write_csv(table.select(names), buf, pcsv.WriteOptions(quoting_style="none", include_header=False))
    return _atomic_bytes(buf.getvalue(), Path(path))
