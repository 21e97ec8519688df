"""Writers of traces; every output is written atomically (temp file in the same folder + rename)."""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def _umask_mode() -> int:
    """Mode a plain ``open()`` would give a new file (mkstemp's temp files are 0600)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def _temp_beside(path: Path) -> tuple[int, str]:
    """Open a temp file beside ``path`` for an atomic write; errors name ``path``, not the temp.

    The folder is never created: a mistyped path is refused (naming the missing folder), not
    turned into a new folder the user would not look in.

    Raises:
        OSError: ``path`` is a folder, its folder does not exist (or is a file), or it is not
            writable (``err.filename`` is ``path``; the message names the folder).
    """
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a folder, not a file", str(path))
    folder = path.parent
    if not folder.is_dir():
        if folder.exists():
            raise NotADirectoryError(errno.ENOTDIR, f"its folder {folder} is a file", str(path))
        raise FileNotFoundError(errno.ENOENT, f"its folder {folder} does not exist", str(path))
    try:
        return tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as err:
        raise type(err)(err.errno, f"cannot write there ({err.strerror})", str(path)) from None


def check_writable(path: str | Path) -> Path:
    """Fail now, before long work, if an atomic write to ``path`` could not even start.

    Creates and removes the temp file a writer would use; ``path`` itself is not touched.

    Raises:
        OSError: as :func:`write_parquet` would, with ``filename`` = ``path``.
    """
    path = Path(path)
    fd, tmp = _temp_beside(path)
    os.close(fd)
    os.unlink(tmp)
    return path


def write_parquet(table: pa.Table, path: str | Path, compression_level: int | None = None) -> Path:
    """Write ``table`` to Parquet (zstd, at ``compression_level`` when given) at ``path``
    atomically; return the path.

    The bytes go to a temporary file beside ``path`` which is renamed over it only once complete, so
    a crash or a bad input never leaves a half-written file behind.

    Raises:
        OSError: ``path`` is a folder, its folder does not exist or is not writable (the error's
            ``filename`` is ``path``).
    """
    path = Path(path)
    if not isinstance(table, pa.Table):
        raise TypeError("write_parquet takes a pyarrow.Table")
    return _atomic(path, lambda tmp: pq.write_table(table, tmp, compression="zstd", compression_level=compression_level))


def read_parquet(path: str | Path) -> pa.Table:
    """Read a Parquet trace written by :func:`write_parquet` (no code is executed on load)."""
    return pq.read_table(str(path))


def _atomic(path: Path, write: Callable[[str], object]) -> Path:
    """Run ``write(temp_path)`` on a temp file beside ``path``, then rename it over ``path``
    with the umask's mode; on any error (Ctrl-C included) the temp file is removed."""
    fd, tmp = _temp_beside(path)
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, _umask_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _atomic_bytes(data: bytes, path: Path) -> Path:
    return _atomic(path, lambda tmp: Path(tmp).write_bytes(data))


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


def write_fio_iolog(
    start_time_s, is_read, file_id, file_offset, size, path: str | Path,
    device: str = "/dev/sdX", device_bytes: int = 1 << 40, file_span_bytes: int = 64 << 20, t0_s: float | None = None,
) -> Path:
    """Write requests as a fio replay log, iolog version 3, atomically; return the path.

    Format (fio's ``iolog.c``): the line ``fio version 3 iolog``, then ``<t> <device> add``,
    ``<t> <device> open``, one ``<t> <device> read|write <offset> <length>`` per request and
    ``<t> <device> close``; ``t`` is integer microseconds since the first request (fio writes
    ``utime_since`` there). Files have no device address in the trace, so file k occupies the
    ``file_span_bytes`` region ``k`` (modulo the device) and the request its offset inside it,
    rounded down to 4 KiB and kept on the device. Replay with ``fio --read_iolog=PATH``.

    Args:
        start_time_s: float64 arrival times (s), any order (the log is sorted).
        is_read: bool array; file_id, file_offset, size: int64 arrays (bytes).
        t0_s: the time (s) the log's clock starts at (default: its first request), so several
            logs replayed side by side by one fio run keep one clock.

    Raises:
        ValueError: arrays of different lengths, a device name with spaces, sizes beyond the span.
    """
    import numpy as np
    import pyarrow.compute as pc

    t = np.asarray(start_time_s, dtype=np.float64)
    arrays = [np.asarray(x) for x in (is_read, file_id, file_offset, size)]
    if any(len(x) != len(t) for x in arrays):
        raise ValueError("all request arrays must have the same length")
    if not device or any(c.isspace() for c in device):
        raise ValueError("the device name must be non-empty and without spaces")
    is_read, file_id, file_offset, size = arrays
    size = size.astype(np.int64)
    if len(size) and (size.max() > file_span_bytes or size.min() < 0):
        raise ValueError("request sizes must be in [0, file_span_bytes]")
    order = np.argsort(t, kind="stable")
    t0 = t0_s if t0_s is not None else (t[order[0]] if len(t) else 0.0)
    us = np.rint((t[order] - t0) * 1e6).astype(np.int64)
    regions = max(device_bytes // file_span_bytes, 1)
    within = (file_offset[order].astype(np.int64) % file_span_bytes) // 4096 * 4096
    within = np.minimum(within, file_span_bytes - size[order]) // 4096 * 4096
    offset = (file_id[order].astype(np.int64) % regions) * file_span_bytes + within
    ops = pa.array(np.where(is_read[order], "read", "write").astype(object), pa.string())
    lines = pc.binary_join_element_wise(
        pc.cast(pa.array(us), pa.string()), device, ops,
        pc.cast(pa.array(offset), pa.string()), pc.cast(pa.array(size[order]), pa.string()), " ",
    )
    last = int(us[-1]) if len(us) else 0
    body = "\n".join(lines.to_pylist())
    text = f"fio version 3 iolog\n0 {device} add\n0 {device} open\n" + (body + "\n" if body else "") + f"{last} {device} close\n"
    return _atomic_bytes(text.encode(), Path(path))
