"""Readers of block-trace files into the Arrow trace schema (:mod:`thesios.schema`).

Parsing is pyarrow's CSV reader; validation is vectorized with ``pyarrow.compute``. A malformed row
raises :class:`~thesios.errors.TraceFormatError` whose message is ``file:line: reason`` (physical
1-based line numbers), or, in lenient mode, is dropped and counted in the :class:`ReadReport`.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from thesios.errors import ThesiosInputError, TraceFormatError
from thesios.schema import (
    EXTRA_LATENCY,
    IO_ZONES,
    OP_TYPES,
    THESIOS_COLUMNS,
    THESIOS_SCHEMA,
    THESIOS_SCHEMA_WITH_LATENCY,
)

_INT_RE = r"^\s*[-+]?\d+\s*$"
_FLOAT_RE = r"^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$"


@dataclass
class ReadReport:
    """What a read dropped: ``skipped`` malformed rows (lenient), the first few
    ``file:line: reason``, repeated headers, and unpaired blkparse events."""

    rows: int = 0
    skipped: int = 0
    header_repeats: int = 0
    unpaired: int = 0  # blkparse: D or C events whose partner is not in the trace
    examples: list[str] = field(default_factory=list)



def _collect_invalid(bad_rows: list[tuple[int, str]]) -> Callable[[pcsv.InvalidRow], str]:
    """A pyarrow ``invalid_row_handler`` that records (row number, reason) in ``bad_rows`` and
    skips the row (the caller turns the records into ``file:line: reason`` errors)."""
    def on_invalid(row: pcsv.InvalidRow) -> str:
        bad_rows.append((row.number, f"expected {row.expected_columns} fields, got {row.actual_columns}"))
        return "skip"
    return on_invalid

def check_distinct(paths: list[Path]) -> None:
    """Refuse a trace file named twice (by its resolved path, so ``a.csv`` and ``./a.csv`` are one):
    its rows, or its disks, would count twice.

    Raises:
        ThesiosInputError: ``one.csv: given twice; each trace file counts once``.
    """
    seen: dict[Path, Path] = {}
    for path in paths:
        key = path.resolve()
        if key in seen:
            also = f" (also as {seen[key]})" if str(seen[key]) != str(path) else ""
            raise ThesiosInputError(f"{path}: given twice{also}; each trace file counts once")
        seen[key] = path


def _read_bytes(path: Path) -> bytes:
    # Plain words for the common cases; pyarrow's own messages repeat the path and the errno.
    if path.is_dir():
        raise TraceFormatError(f"{path}: is a folder, not a trace file")
    if not path.exists():
        raise TraceFormatError(f"{path}: no such file")
    try:
        with pa.input_stream(str(path), compression="detect") as stream:
            data = stream.read()
    except (OSError, pa.ArrowInvalid) as err:
        raise TraceFormatError(f"{path}: cannot read: {err}") from None
    if data.startswith(b"PAR1"):  # its bytes would make a header message of binary noise
        raise TraceFormatError(f"{path}: is a Parquet file, not a text trace (give --format parquet, or auto)")
    return data


def _nonempty_line_numbers(data: bytes) -> np.ndarray:
    """Physical 1-based numbers of the non-empty lines (pyarrow skips empty ones), int64."""
    buf = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(buf == ord("\n"))
    if len(buf) and buf[-1] != ord("\n"):
        ends = np.append(ends, len(buf))
    starts = np.concatenate(([0], ends[:-1] + 1)) if len(ends) else np.zeros(0, np.int64)
    lengths = ends - starts
    # A line of just "\r" is empty too (CRLF files).
    cr_only = (lengths == 1) & (buf[np.minimum(starts, max(len(buf) - 1, 0))] == ord("\r"))
    return np.flatnonzero((lengths > 0) & ~cr_only).astype(np.int64) + 1


def _header_mismatch(names: list[str]) -> str:
    """Why a header is not the Thesios one, naming the first column out of place (1-based)."""
    expected = [*THESIOS_COLUMNS, EXTRA_LATENCY]
    for i, name in enumerate(names):
        if i >= len(expected) or name != expected[i]:
            if i >= len(expected):
                return f"header has {len(names)} columns, expected the 17 Thesios columns (optionally + '{EXTRA_LATENCY}')"
            where = f"column {i + 1} is {name[:40]!r}, expected {expected[i]!r}"
            return f"header is not the 17 Thesios columns in order: {where}"
    return f"header has only {len(names)} of the 17 Thesios columns (next expected: {expected[len(names)]!r})"


def read_thesios_csv(path: str | Path, lenient: bool = False, report: ReadReport | None = None) -> pa.Table:
    """Read one Thesios CSV shard (plain or compressed) into a table of :data:`THESIOS_SCHEMA`.

    The first line must name the 17 columns in the public order, optionally followed by the
    ``latency`` column some mirrors add (the result then has it too, float64 seconds). Header
    lines repeated mid-file are dropped. Empty ``simulated_*``/``latency`` fields become nulls.

    Args:
        path: the shard; compression (gzip, bz2, zstd) is detected from the extension.
        lenient: drop malformed rows and count them in ``report`` instead of raising.
        report: filled with row, skip and header-repeat counts when given.

    Returns:
        A ``pyarrow.Table`` with one row per request, in file order.

    Raises:
        TraceFormatError: ``file:line: reason`` for a wrong header, a row with the wrong number
            of fields, a non-numeric number, an unknown ``op_type``/``io_zone``, a ``cache_hit``
            outside {-1, 0, 1}, negative sizes or times, non-finite times, or a last line
            without a line end (a truncated file; unless lenient).
    """
    path = Path(path)
    report = report if report is not None else ReadReport()
    data = _read_bytes(path)
    lines = _nonempty_line_numbers(data)
    if len(lines) == 0:
        raise TraceFormatError(f"{path}:1: empty file (no header line)")
    first_end = data.find(b"\n")
    header = data[: first_end if first_end >= 0 else len(data)].decode("utf-8", "replace").strip()
    names = [h.strip().strip('"') for h in header.split(",")]
    if names == list(THESIOS_COLUMNS):
        schema = THESIOS_SCHEMA
    elif names == [*THESIOS_COLUMNS, EXTRA_LATENCY]:
        schema = THESIOS_SCHEMA_WITH_LATENCY
    else:
        raise TraceFormatError(f"{path}:{lines[0]}: {_header_mismatch(names)}")
    raw, row_lines, errors, n_invalid = _parse_rows(data, path, lines, names, skip_header=True)
    is_header = pc.equal(raw.column("filename"), "filename")
    header_repeats = pc.sum(is_header).as_py() or 0
    ok = pc.fill_null(pc.invert(is_header), True)
    columns, ok = _thesios_columns(raw, schema, ok, row_lines, errors)
    ok = _thesios_value_checks(columns, ok, row_lines, errors)
    # A shard cut inside its last field still parses (0.009858898 -> 0.009858); a last line
    # without a line end is the one sign of it left, so that row counts as malformed.
    if not data.endswith(b"\n") and raw.num_rows and int(row_lines[-1]) == int(lines[-1]):
        last = np.zeros(raw.num_rows, dtype=bool)
        last[-1] = True
        if ok.to_numpy(zero_copy_only=False)[-1]:
            errors.append((int(lines[-1]), "last line has no line end: the file looks truncated"))
            ok = pc.and_(ok, pa.chunked_array([pa.array(~last)]))
    n_bad = n_invalid + int(raw.num_rows - header_repeats - (pc.sum(ok).as_py() or 0))
    _raise_or_count(path, data, lines, errors, n_bad, lenient, report, "rows")
    table = pa.table(columns, schema=schema).filter(ok)
    report.rows += table.num_rows
    report.header_repeats += header_repeats
    return table


def _is_utf8(data: bytes) -> bool:
    """Whether ``data`` is UTF-8, checked by Arrow in place (``bytes.decode`` made a str as large
    as the file to find out: 0.36 s and 200 MB for a 200 MB trace, Arrow 0.016 s and no copy)."""
    offsets = pa.py_buffer(np.array([0, len(data)], dtype=np.int64))
    try:
        pa.Array.from_buffers(pa.large_binary(), 1, [None, offsets, pa.py_buffer(data)]).cast(pa.large_string())
    except pa.ArrowInvalid:
        return False
    return True


def _parse_rows(data: bytes, path: Path, lines: np.ndarray, names: list[str], skip_header: bool) -> tuple[pa.Table, np.ndarray, list[tuple[int, str]], int]:
    """Parse CSV text as strings: ``(rows, each row's physical line, errors, rows of a wrong
    field count)``; a row with the wrong number of fields is dropped and becomes an error."""
    bad_rows: list[tuple[int, str]] = []  # (1-based non-empty row number, reason)
    if not _is_utf8(data):
        # pyarrow decodes a malformed row's text strictly before the handler sees it and prints the
        # UnicodeDecodeError as "Exception ignored"; U+FFFD keeps every line end, so line numbers hold.
        data = data.decode("utf-8", errors="replace").encode("utf-8")
    try:
        raw = pcsv.read_csv(
            io.BytesIO(data),
            read_options=pcsv.ReadOptions(use_threads=False, column_names=names, skip_rows=1 if skip_header else 0),
            parse_options=pcsv.ParseOptions(invalid_row_handler=_collect_invalid(bad_rows), newlines_in_values=False),
            convert_options=pcsv.ConvertOptions(column_types={n: pa.string() for n in names}, strings_can_be_null=False),
        )
    except pa.ArrowInvalid as err:
        raise TraceFormatError(f"{path}: {err}") from None
    # The handler numbers non-empty rows from 1 (the header included): row n is lines[n - 1].
    keep_mask = np.ones(len(lines), dtype=bool)
    if skip_header:
        keep_mask[0] = False
    for n, _ in bad_rows:
        keep_mask[min(n - 1, len(lines) - 1)] = False
    row_lines = lines[keep_mask]
    if len(row_lines) != raw.num_rows:  # defensive: never report a wrong line number
        row_lines = np.full(raw.num_rows, -1, dtype=np.int64)
    errors = [(int(lines[min(n - 1, len(lines) - 1)]), reason) for n, reason in bad_rows]
    return raw, row_lines, errors, len(bad_rows)


def _thesios_columns(raw: pa.Table, schema: pa.Schema, ok: pa.ChunkedArray, row_lines: np.ndarray,
                     errors: list[tuple[int, str]]) -> tuple[dict[str, pa.Array], pa.ChunkedArray]:
    """Typed columns of a shard's string rows. An empty cell of an optional (nullable) column is
    a null, as pyarrow writes a Parquet trace's nulls to CSV; one of a required column, or a
    non-number, is an error and its row not ``ok``."""
    columns: dict[str, pa.Array] = {}
    for f in schema:
        col = raw.column(f.name)
        empty = pc.equal(pc.utf8_trim_whitespace(col), "")
        if pa.types.is_string(f.type):
            columns[f.name] = pc.if_else(empty, pa.scalar(None, pa.string()), col) if f.nullable else col
            continue
        parses = pc.match_substring_regex(col, _INT_RE if pa.types.is_integer(f.type) else _FLOAT_RE)
        if f.nullable:
            parses = pc.or_(parses, empty)
        else:
            ok = _flag_rows(pc.and_(empty, ok), ok, row_lines, errors, lambda v: f"{f.name}: empty, but the column is required")
        ok = _flag_rows(pc.and_(pc.invert(parses), ok), ok, row_lines, errors, lambda v: f"{f.name}: {v!r} is not a number", col)
        cleaned = pc.if_else(pc.or_(pc.invert(ok), empty), None, col)
        columns[f.name] = pc.cast(cleaned, f.type) if not pa.types.is_integer(f.type) else pc.cast(
            pc.cast(cleaned, pa.int64()), f.type
        )
    return columns, ok


def _flag_rows(bad: pa.ChunkedArray, ok: pa.ChunkedArray, row_lines: np.ndarray, errors: list[tuple[int, str]],
               reason: Callable[[object], str], col: pa.ChunkedArray | None = None) -> pa.ChunkedArray:
    """``ok`` without the ``bad`` rows; the first five become errors, ``reason(cell)`` each (cell:
    the row's value in ``col``, None without one)."""
    if not pc.any(bad).as_py():
        return ok
    idx = np.flatnonzero(bad.to_numpy(zero_copy_only=False))[:5]
    vals = col.take(pa.array(idx)).to_pylist() if col is not None else [None] * len(idx)
    errors.extend((int(row_lines[i]), reason(v)) for i, v in zip(idx, vals))
    return pc.and_(ok, pc.invert(bad))


def _thesios_value_checks(columns: dict[str, pa.Array], ok: pa.ChunkedArray, row_lines: np.ndarray,
                          errors: list[tuple[int, str]]) -> pa.ChunkedArray:
    """The rows of a shard whose values are in range; the first five of each fault become errors."""
    checks: list[tuple[str, pa.ChunkedArray]] = [
        ("op_type not READ/WRITE", pc.is_in(columns["op_type"], pa.array(OP_TYPES))),
        ("io_zone not WARM/COLD/UNKNOWN", pc.is_in(columns["io_zone"], pa.array(IO_ZONES))),
        ("cache_hit not in {-1, 0, 1}", pc.is_in(columns["cache_hit"], pa.array([-1, 0, 1], pa.int8()))),
        ("start_time negative or not finite", pc.and_(pc.is_finite(columns["start_time"]), pc.greater_equal(columns["start_time"], 0.0))),
        ("disk_time negative or not finite", pc.and_(pc.is_finite(columns["disk_time"]), pc.greater_equal(columns["disk_time"], 0.0))),
    ]
    for size_col in ("file_offset", "request_io_size_bytes", "disk_io_size_bytes", "response_io_size_bytes"):
        checks.append((f"{size_col} negative", pc.greater_equal(columns[size_col], 0)))
    for reason, good in checks:
        ok = _flag_rows(pc.and_(ok, pc.invert(pc.fill_null(good, False))), ok, row_lines, errors, lambda v, r=reason: r)
    return ok


def _raise_or_count(path: Path, data: bytes, lines: np.ndarray, errors: list[tuple[int, str]], n_bad: int,
                    lenient: bool, report: ReadReport, unit: str) -> None:
    """Raise the first error as ``file:line: reason`` (strict), or count the bad ``unit`` (lenient)."""
    errors.sort()
    if errors and not lenient:
        line, reason = errors[0]
        more = f" (and {n_bad - 1} more bad {unit})" if n_bad > 1 else ""
        if line == int(lines[-1]) and not data.endswith(b"\n") and "truncated" not in reason:
            more += "; the last line has no line end: the file looks truncated"
        raise TraceFormatError(f"{path}:{line}: {reason}{more}")
    report.skipped += n_bad
    report.examples.extend(f"{path}:{line}: {reason}" for line, reason in errors[: max(0, 5 - len(report.examples))])


#: Column names of the MSR Cambridge block traces (SNIA IOTTA; Narayanan, Donnelly, Rowstron,
#: "Write off-loading", FAST 2008): no header line.
MSR_COLUMNS = ("Timestamp", "Hostname", "DiskNumber", "Type", "Offset", "Size", "ResponseTime")
_FILETIME_TO_UNIX_S = 11_644_473_600  # seconds from 1601-01-01 (Windows FILETIME) to 1970-01-01


def _parse_headerless(
    path: Path, columns: tuple[str, ...], int_columns: tuple[str, ...], op_column: str,
    op_values: dict[str, bool], lenient: bool, report: ReadReport,
) -> tuple[pa.Table, np.ndarray]:
    """Parse a header-less block-trace CSV; validate integers and the op column vectorized.

    Returns the valid rows (strings) and their is-read flags; raises ``file:line: reason``.
    """
    data = _read_bytes(path)
    lines = _nonempty_line_numbers(data)
    if len(lines) == 0:
        raise TraceFormatError(f"{path}:1: empty file")
    raw, row_lines, errors, n_invalid = _parse_rows(data, path, lines, list(columns), skip_header=False)
    ok = pa.chunked_array([pa.array(np.ones(raw.num_rows, dtype=bool))])
    for name in int_columns:
        bad = pc.invert(pc.match_substring_regex(raw.column(name), r"^\s*\d+\s*$"))
        if pc.any(bad).as_py():
            idx = np.flatnonzero(bad.to_numpy(zero_copy_only=False))
            vals = raw.column(name).take(pa.array(idx[:5])).to_pylist()
            errors.extend((int(row_lines[i]), f"{name}: {v!r} is not a non-negative integer") for i, v in zip(idx, vals))
            ok = pc.and_(ok, pc.invert(bad))
    op = pc.utf8_upper(pc.utf8_trim_whitespace(raw.column(op_column)))
    keys = [k.upper() for k in op_values]
    bad_op = pc.and_(ok, pc.invert(pc.is_in(op, pa.array(keys))))
    if pc.any(bad_op).as_py():
        idx = np.flatnonzero(bad_op.to_numpy(zero_copy_only=False))
        errors.extend((int(row_lines[i]), f"{op_column} not one of {'/'.join(op_values)}") for i in idx[:5])
        ok = pc.and_(ok, pc.invert(bad_op))
    n_bad = n_invalid + raw.num_rows - (pc.sum(ok).as_py() or 0)
    _raise_or_count(path, data, lines, errors, n_bad, lenient, report, "rows")
    read_keys = [k.upper() for k, v in op_values.items() if v]
    is_read = np.asarray(pc.is_in(op.filter(ok), pa.array(read_keys)).to_numpy(zero_copy_only=False), dtype=bool)
    return raw.filter(ok), is_read


def _ints(raw: pa.Table, name: str) -> np.ndarray:
    return np.asarray(pc.cast(pc.utf8_trim_whitespace(raw.column(name)), pa.int64()).to_numpy(), dtype=np.int64)


def _block_table(
    device: pa.Array, offset: np.ndarray, size: np.ndarray, is_read: np.ndarray, start_time: np.ndarray,
    latency: np.ndarray | None,
) -> pa.Table:
    """A block trace in :data:`THESIOS_SCHEMA_WITH_LATENCY`: ``filename`` = device, ``io_zone``
    UNKNOWN, ``cache_hit`` 0 for reads (below the buffer cache) and -1 for writes, ``disk_time`` of
    reads = the latency when known (an upper bound of service) else 0, ``latency`` null if unknown."""
    n = len(offset)
    lat = np.zeros(n) if latency is None else latency
    return pa.table(
        {
            "filename": device,
            "file_offset": pa.array(offset),
            "application": device,
            "c_time": pa.nulls(n, pa.int64()),
            "io_zone": pa.array(np.full(n, "UNKNOWN", dtype=object), pa.string()),
            "redundancy_type": pa.nulls(n, pa.string()),
            "op_type": pa.array(np.where(is_read, "READ", "WRITE").astype(object), pa.string()),
            "service_class": pa.nulls(n, pa.string()),
            "from_flash_cache": pa.array(np.zeros(n, np.int8)),
            "cache_hit": pa.array(np.where(is_read, 0, -1).astype(np.int8)),
            "request_io_size_bytes": pa.array(size),
            "disk_io_size_bytes": pa.array(size),
            "response_io_size_bytes": pa.array(np.where(is_read, size, 0)),
            "start_time": pa.array(start_time, pa.float64()),
            "disk_time": pa.array(np.where(is_read, lat, 0.0)),
            "simulated_disk_start_time": pa.nulls(n, pa.float64()),
            "simulated_latency": pa.nulls(n, pa.float64()),
            EXTRA_LATENCY: pa.nulls(n, pa.float64()) if latency is None else pa.array(latency),
        },
        schema=THESIOS_SCHEMA_WITH_LATENCY,
    )


def read_msr_csv(path: str | Path, lenient: bool = False, report: ReadReport | None = None) -> pa.Table:
    """Read an MSR Cambridge trace CSV into :data:`THESIOS_SCHEMA_WITH_LATENCY`.

    Each line is ``Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`` with times in
    100 ns ticks (Timestamp a Windows FILETIME). Mapping: ``filename`` = ``host/disk``,
    ``start_time`` = Unix seconds, ``op_type`` from Type, sizes = Size, ``io_zone`` UNKNOWN,
    ``cache_hit`` 0 for reads (the trace is below the buffer cache) and -1 for writes, ``latency``
    = ResponseTime in seconds; MSR records no service time, so ``disk_time`` of reads is the
    response time (an upper bound) and 0 for writes, as in the Thesios schema.

    Raises:
        TraceFormatError: ``file:line: reason`` for a row with the wrong number of fields, a
            non-integer number, an unknown Type, or negative values (unless lenient).
    """
    path = Path(path)
    report = report if report is not None else ReadReport()
    raw, is_read = _parse_headerless(
        path, MSR_COLUMNS, ("Timestamp", "DiskNumber", "Offset", "Size", "ResponseTime"), "Type",
        {"Read": True, "Write": False}, lenient, report,
    )
    ticks = _ints(raw, "Timestamp")
    host = pc.utf8_trim_whitespace(raw.column("Hostname"))
    device = pc.binary_join_element_wise(host, pc.utf8_trim_whitespace(raw.column("DiskNumber")), "/")
    start = ticks // 10_000_000 - _FILETIME_TO_UNIX_S + (ticks % 10_000_000) / 1e7
    table = _block_table(device, _ints(raw, "Offset"), _ints(raw, "Size"), is_read, start, _ints(raw, "ResponseTime") / 1e7)
    table = table.set_column(table.schema.get_field_index("application"), "application", host)
    report.rows += table.num_rows
    return table


#: Alibaba block traces (2020; Li et al., "An In-Depth Analysis of Cloud Block Storage Workloads
#: in Large-Scale Production", IISWC 2020): ``device_id,opcode,offset,length,timestamp``, no
#: header; opcode R/W, bytes, timestamp in microseconds (Unix).
ALIBABA_COLUMNS = ("device_id", "opcode", "offset", "length", "timestamp")

#: Tencent CBS traces (SNIA IOTTA; Zhang et al., "OSCA", USENIX ATC 2020):
#: ``Timestamp,Offset,Size,IOType,VolumeID``, no header; Unix seconds, offset and size in
#: 512-byte sectors, IOType 0 read / 1 write.
TENCENT_COLUMNS = ("Timestamp", "Offset", "Size", "IOType", "VolumeID")


def read_alibaba_csv(path: str | Path, lenient: bool = False, report: ReadReport | None = None) -> pa.Table:
    """Read an Alibaba block trace CSV into :data:`THESIOS_SCHEMA_WITH_LATENCY` (no latency: null).

    ``filename`` = ``device_id``; ``start_time`` = timestamp / 1e6 (s).

    Raises:
        TraceFormatError: ``file:line: reason`` (wrong field count, non-integers, opcode not R/W).
    """
    path = Path(path)
    report = report if report is not None else ReadReport()
    raw, is_read = _parse_headerless(
        path, ALIBABA_COLUMNS, ("device_id", "offset", "length", "timestamp"), "opcode", {"R": True, "W": False}, lenient, report,
    )
    device = pc.utf8_trim_whitespace(raw.column("device_id"))
    table = _block_table(device, _ints(raw, "offset"), _ints(raw, "length"), is_read, _ints(raw, "timestamp") / 1e6, None)
    report.rows += table.num_rows
    return table


def read_tencent_csv(path: str | Path, lenient: bool = False, report: ReadReport | None = None) -> pa.Table:
    """Read a Tencent CBS trace CSV into :data:`THESIOS_SCHEMA_WITH_LATENCY` (no latency: null).

    ``filename`` = VolumeID; offsets and sizes are sectors times 512 bytes.

    Raises:
        TraceFormatError: ``file:line: reason`` (wrong field count, non-integers, IOType not 0/1).
    """
    path = Path(path)
    report = report if report is not None else ReadReport()
    raw, is_read = _parse_headerless(
        path, TENCENT_COLUMNS, ("Timestamp", "Offset", "Size", "VolumeID"), "IOType", {"0": True, "1": False}, lenient, report,
    )
    device = pc.utf8_trim_whitespace(raw.column("VolumeID"))
    table = _block_table(device, _ints(raw, "Offset") * 512, _ints(raw, "Size") * 512, is_read,
                         _ints(raw, "Timestamp").astype(np.float64), None)
    report.rows += table.num_rows
    return table


#: One event line of blkparse's default output (blktrace 1.x, ``blkparse_fmt.c``): the header
#: ``"%3d,%-3d %2d %8d %5d.%09lu %5u %2s %3s "`` (device major,minor; CPU; sequence; seconds
#: since the trace began; pid; action; RWBS), then action-specific text.
_BLK_EVENT = (
    r"^\s*(?P<major>\d+),(?P<minor>\d+)\s+(?P<cpu>\d+)\s+(?P<seq>\d+)\s+(?P<sec>\d+)\.(?P<nsec>\d{9})"
    r"\s+(?P<pid>\d+)\s+(?P<action>[A-Za-z]{1,2})\s+(?P<rwbs>[A-Z]+)(?:\s+(?P<rest>.*?))?\s*$"
)
#: The text after the header of a D (issue) or C (complete) event on a file-system request:
#: ``sector + blocks [process]`` for D, ``sector + blocks [error]`` for C, an elapsed time in
#: parentheses between them when blkparse tracked it.
_BLK_SECTORS = r"^(?P<sector>\d+) \+ (?P<blocks>\d+)(?: \(\s*\d+\))? \[(?P<tail>.*)\]$"
#: D/C text of a SCSI pass-through (PC) request or one without sectors: not a data request.
_BLK_NO_SECTORS = r"^(?:\d+ )?(?:\(.*\) )?\[.*\]$|^\(\s*\d+\) \[.*\]$"
#: The first line of blkparse's closing summary (``CPU0 (8,0):``, ``Total (sda):``): everything
#: from there on is statistics, not events. Every statistics block, the per-process ones of
#: ``blkparse -s`` too (titled ``fio (4162)``), opens with its title then `` Reads Queued:``.
_BLK_SUMMARY = r"^(?:CPU\d+|Total) \([^)]*\):\s*$"
_BLK_STATS_FIRST = r"^ Reads Queued:\s"
SECTOR_BYTES = 512


def read_blkparse(path: str | Path, lenient: bool = False, report: ReadReport | None = None) -> pa.Table:
    """Read blkparse's default text output into :data:`THESIOS_SCHEMA_WITH_LATENCY`.

    Each request is the pair of its D (issued to the device) and C (completed) events on the same
    device, sector and size, in time order: ``start_time`` = the D time (s since the trace began),
    ``latency`` = C time - D time (the device's service time, D2C; Brunelle, "blktrace User
    Guide", 2007), ``disk_time`` of reads = that latency; ``op_type`` READ if the RWBS field
    has R, WRITE if W; ``file_offset`` = sector * 512, sizes = blocks * 512 bytes; ``filename`` =
    ``major,minor``; ``application`` = the process named on the D line. Other actions (Q, G, I,
    M, P, U, A, X, m, ...), D/C events without data (flushes, discards, SCSI pass-through),
    ``Input file ... added`` lines and the closing statistics (from the title of the first block,
    ``CPU<n> (dev):``, ``Total (dev):`` or, with ``blkparse -s``, ``process (pid)``, on) are ignored; a D without its C or a C without its D (the trace cut
    them apart) is dropped and counted in ``report.unpaired``. Rows are in D-time order.

    Args:
        path: blkparse output (plain or compressed).
        lenient: drop malformed lines and count them in ``report`` instead of raising.
        report: filled with row, skip and unpaired counts when given.

    Raises:
        TraceFormatError: ``file:line: reason`` for a line that is not a blkparse event, a D or C
            data event without ``sector + blocks``, or a last event line without a line end (a
            truncated file; unless lenient), or a file with no D/C pairs at all.
    """
    path = Path(path)
    report = report if report is not None else ReadReport()
    text = _read_bytes(path).decode("utf-8", "replace")
    truncated = bool(text) and not text.endswith("\n")
    lines = pa.array(text.split("\n")[: -1 if text.endswith("\n") else None], pa.string())
    lines = pc.utf8_rtrim(lines, characters="\r")
    n_lines = len(lines)
    summary = np.flatnonzero(pc.match_substring_regex(lines, _BLK_SUMMARY).to_numpy(zero_copy_only=False))
    stats = np.flatnonzero(pc.match_substring_regex(lines, _BLK_STATS_FIRST).to_numpy(zero_copy_only=False))
    body_end = min(int(summary[0]) if len(summary) else n_lines, int(stats[0]) - 1 if len(stats) else n_lines)
    body_end = max(body_end, 0)
    body = lines.slice(0, body_end)
    blank = pc.equal(pc.utf8_trim_whitespace(body), "").to_numpy(zero_copy_only=False)
    banner = pc.match_substring_regex(body, r"^Input file .* added$").to_numpy(zero_copy_only=False)
    ev = pc.extract_regex(body, _BLK_EVENT)
    is_event = np.asarray(ev.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    errors: list[tuple[int, str]] = [
        (int(i) + 1, "not a blkparse event line") for i in np.flatnonzero(~is_event & ~blank & ~banner)
    ]
    action = pc.fill_null(ev.field("action"), "")
    rwbs = pc.fill_null(ev.field("rwbs"), "")
    rest = pc.fill_null(ev.field("rest"), "")
    is_dc = pc.is_in(action, pa.array(["D", "C"])).to_numpy(zero_copy_only=False) & is_event
    # The data direction is the first of R/W/D/N after an optional F (flush) in RWBS.
    direction = pc.extract_regex(rwbs, r"^F?(?P<d>[RWDN])").field("d")
    direction = pc.fill_null(direction, "").to_numpy(zero_copy_only=False)
    data = is_dc & np.isin(direction, ["R", "W"])
    sec = pc.extract_regex(rest, _BLK_SECTORS)
    has_sectors = np.asarray(sec.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    no_sectors = pc.match_substring_regex(rest, _BLK_NO_SECTORS).to_numpy(zero_copy_only=False)
    bad_dc = data & ~has_sectors & ~no_sectors
    errors.extend((int(i) + 1, f"{action[int(i)].as_py()} event without 'sector + blocks'") for i in np.flatnonzero(bad_dc))
    if truncated and body_end == n_lines and not blank[-1]:
        # Cut anywhere: inside the header (no event) or inside the sectors (a wrong size).
        errors = [e for e in errors if e[0] != n_lines] + [(n_lines, "last line has no line end: the file looks truncated")]
        data[-1] = False
    _raise_or_count(path, b"" if truncated else b"\n", np.array([n_lines]), errors, len(errors), lenient, report, "lines")
    table = _blk_pairs(path, ev, sec, direction, np.flatnonzero(data & has_sectors), report)
    report.rows += table.num_rows
    return table


def _blk_pairs(path: Path, ev: pa.StructArray, sec: pa.StructArray, direction: np.ndarray, use: np.ndarray,
               report: ReadReport) -> pa.Table:
    """The requests of blkparse's data events ``use``: each C paired with the D just before it on
    the same device, sector, size and direction; unpaired events are counted in ``report``."""
    take = pa.array(use)
    ev_u, sec_u = ev.take(take), sec.take(take)

    def ints(arr: pa.Array) -> np.ndarray:
        return np.asarray(pc.cast(arr, pa.int64()).to_numpy(zero_copy_only=False), dtype=np.int64)

    time_ns = ints(ev_u.field("sec")) * 1_000_000_000 + ints(ev_u.field("nsec"))
    major, minor = ints(ev_u.field("major")), ints(ev_u.field("minor"))
    sector, blocks = ints(sec_u.field("sector")), ints(sec_u.field("blocks"))
    is_read = direction[use] == "R"
    is_c = np.asarray(pc.equal(ev_u.field("action"), "C").to_numpy(zero_copy_only=False), dtype=bool)
    # Pair each C with the D just before it on the same (device, sector, blocks, direction):
    # sort by that key, then time, D before C at equal times, and match neighbours.
    order = np.lexsort((is_c, time_ns, is_read, blocks, sector, minor, major))
    key = np.stack([major, minor, sector, blocks, is_read.astype(np.int64)], axis=1)[order]
    same = np.all(key[1:] == key[:-1], axis=1)
    paired = same & ~is_c[order][:-1] & is_c[order][1:]
    d_idx, c_idx = order[:-1][paired], order[1:][paired]
    report.unpaired += len(use) - 2 * len(d_idx)
    by_time = np.argsort(time_ns[d_idx], kind="stable")
    d_idx, c_idx = d_idx[by_time], c_idx[by_time]
    if len(d_idx) == 0:
        raise TraceFormatError(f"{path}:1: no issue (D) / complete (C) pairs of data requests found")
    device = pc.binary_join_element_wise(
        pc.cast(pa.array(major[d_idx]), pa.string()), pc.cast(pa.array(minor[d_idx]), pa.string()), ","
    )
    latency = (time_ns[c_idx] - time_ns[d_idx]) / 1e9
    table = _block_table(device, sector[d_idx] * SECTOR_BYTES, blocks[d_idx] * SECTOR_BYTES, is_read[d_idx],
                         time_ns[d_idx] / 1e9, latency)
    process = sec_u.field("tail").take(pa.array(d_idx))
    return table.set_column(table.schema.get_field_index("application"), "application", process)


#: One line of ``strace -f -ttt -T -y`` for a positioned read or write: pid, absolute time,
#: call, fd with its path, the buffer (``-s 0`` prints ``""...``), count, offset, result, duration.
#: A call interrupted by another thread's line is split into ``<unfinished ...>`` and
#: ``<... pread64 resumed>`` halves (strace(1), ``-f``).
_STRACE_CALL = (
    r"^(?P<pid>\d+)\s+(?P<t>\d+\.\d+)\s+(?P<call>pread64|pwrite64)\((?P<fd>\d+)<(?P<path>[^>]*)>,\s*"
    r"(?P<rest>.*)$"
)
_STRACE_RESUMED = r"^(?P<pid>\d+)\s+(?P<t>\d+\.\d+)\s+<\.\.\. (?P<call>pread64|pwrite64) resumed>(?P<rest>.*)$"
_STRACE_TAIL = r'(?:"[^"]*"(?:\.\.\.)?|0x[0-9a-f]+|NULL),\s*(?P<count>\d+),\s*(?P<offset>\d+)\)\s*=\s*(?P<ret>-?\d+)(?:\s+\w+\s+\([^)]*\))?\s*<(?P<dur>\d+\.\d+)>$'


def read_strace(path: str | Path, lenient: bool = False, report: ReadReport | None = None) -> pa.Table:
    """Read ``strace -f -ttt -T -y`` output of ``pread64``/``pwrite64`` calls into a trace.

    Each completed call is one request: ``start_time`` = the call's entry time (s, as strace
    printed it), ``latency`` (and ``disk_time`` of reads) = its duration from ``-T`` (s),
    ``filename`` = the file's path from ``-y``, ``file_offset`` and sizes = the call's offset and
    count (bytes), ``op_type`` READ for ``pread64``; ``application`` = ``pid <n>`` (the thread).
    Reads count as cache misses (``cache_hit`` 0): trace programs that open their files with
    ``O_DIRECT`` so the page cache does not answer. Calls that failed (negative result) are
    dropped and counted in ``report.skipped``; other system calls, signals and exit lines are
    ignored. Rows come in entry-time order.

    Raises:
        TraceFormatError: ``file:line: reason`` for a ``pread64``/``pwrite64`` line whose
            arguments do not parse, a ``resumed`` line without its start, or a file with no
            completed call (unless lenient for the first two).
    """
    import re

    path = Path(path)
    report = report if report is not None else ReadReport()
    lines = _read_bytes(path).decode("utf-8", "replace").split("\n")
    call_re, resumed_re, tail_re = re.compile(_STRACE_CALL), re.compile(_STRACE_RESUMED), re.compile(_STRACE_TAIL)
    pending: dict[str, tuple[float, str, str, str]] = {}  # pid -> (time, call, path, args so far)
    rows: list[tuple[float, str, bool, int, int, float, str]] = []
    errors: list[tuple[int, str]] = []
    for no, line in enumerate(lines, 1):
        m = call_re.match(line)
        if m is not None:
            if m["rest"].endswith("<unfinished ...>"):
                pending[m["pid"]] = (float(m["t"]), m["call"], m["path"], m["rest"][: -len("<unfinished ...>")].rstrip())
                continue
            t, call, fpath, rest, pid = float(m["t"]), m["call"], m["path"], m["rest"], m["pid"]
        else:
            r = resumed_re.match(line)
            if r is None:
                continue
            if r["pid"] not in pending:
                errors.append((no, f"{r['call']} resumed without its start"))
                continue
            t, call, fpath, head = pending.pop(r["pid"])
            # strace splits the arguments anywhere: the halves joined are one call's text.
            tail_text = r["rest"].lstrip()
            glue = ", " if head and not head.endswith(",") and not tail_text.startswith((")", ",")) else ""
            rest, pid = head + glue + tail_text, r["pid"]
        tail = tail_re.search(rest)
        if tail is None:
            errors.append((no, f"{call}: arguments do not parse"))
            continue
        if int(tail["ret"]) < 0:
            report.skipped += 1
            continue
        rows.append((t, fpath, call == "pread64", int(tail["offset"]), int(tail["count"]), float(tail["dur"]), f"pid {pid}"))
    _raise_or_count(path, b"\n", np.array([len(lines)]), errors, len(errors), lenient, report, "lines")
    if not rows:
        raise TraceFormatError(f"{path}:1: no completed pread64/pwrite64 call (trace with strace -f -ttt -T -y -e trace=pread64,pwrite64)")
    rows.sort(key=lambda r: r[0])
    t, fpath, is_read, offset, size, dur, app = (list(c) for c in zip(*rows))
    table = _block_table(pa.array(fpath, pa.string()), np.array(offset, np.int64), np.array(size, np.int64),
                         np.array(is_read, bool), np.array(t, np.float64), np.array(dur, np.float64))
    table = table.set_column(table.schema.get_field_index("application"), "application", pa.array(app, pa.string()))
    report.rows += table.num_rows
    return table


def read_parquet_trace(path: str | Path, lenient: bool = False, report: ReadReport | None = None) -> pa.Table:
    """Read a Parquet trace (thesios's own schema, optionally with ``latency``, ``disk_id`` and more).

    ``lenient`` has no effect (a Parquet file has no malformed rows to skip).

    Raises:
        TraceFormatError: a missing, corrupt or foreign file, or one without the 17 trace columns.
    """
    from thesios.writers import read_parquet

    path = Path(path)
    report = report if report is not None else ReadReport()
    if path.is_dir():
        raise TraceFormatError(f"{path}: is a folder, not a trace file")
    if not path.exists():
        raise TraceFormatError(f"{path}: no such file")
    try:
        table = read_parquet(path)
    except (OSError, ValueError, pa.ArrowException) as err:  # a corrupt or foreign file
        # pyarrow's message repeats the path ("Could not open Parquet input source '...': ").
        reason = str(err).splitlines()[0].split("': ", 1)[-1].split(". ")[0][:120]
        raise TraceFormatError(f"{path}: not a readable Parquet trace ({reason})") from None
    missing = [c for c in THESIOS_COLUMNS if c not in table.column_names]
    if missing:
        raise TraceFormatError(f"{path}: missing trace columns {missing[:4]}")
    report.rows += table.num_rows
    return table


# ---------------------------------------------------------------------------------------------
# The registry: every command finds a trace format here, by name or by sniffing a file.

#: ``reader(path, lenient, report) -> pa.Table`` in the trace schema (optionally + ``latency``).
Reader = Callable[[Path, bool, ReadReport], pa.Table]
#: ``sniffer(path, head) -> bool``: whether a file is of the format, from its name and first 4 KiB.
Sniffer = Callable[[Path, bytes], bool]


@dataclass(frozen=True)
class TraceFormat:
    """One trace format: how to read it and how to recognize it.

    Attributes:
        name: the ``--format`` value.
        reader: reads one file (see :data:`Reader`); raises ``TraceFormatError`` on bad input.
        sniffer: recognizes a file of the format (see :data:`Sniffer`), or None when the format
            cannot be told from its content (header-less CSV): then ``--format`` names it.
        block: True when ``filename`` names a device (a block trace): a file of several devices
            needs ``--device`` where one disk is wanted.
        summary: one line for ``--help``.
    """

    name: str
    reader: Reader
    sniffer: Sniffer | None = None
    block: bool = False
    summary: str = ""


FORMATS: dict[str, TraceFormat] = {}


def register_format(fmt: TraceFormat) -> TraceFormat:
    """Add (or replace) a format; sniffers are tried in registration order. Returns ``fmt``."""
    FORMATS[fmt.name] = fmt
    return fmt


def _first_line(head: bytes) -> str:
    return head.decode("utf-8", "replace").lstrip("\n").split("\n", 1)[0]


def _sniff_parquet(path: Path, head: bytes) -> bool:
    return path.suffix == ".parquet" or head.startswith(b"PAR1")


def _sniff_blkparse(path: Path, head: bytes) -> bool:
    import re

    return re.match(_BLK_EVENT, _first_line(head)) is not None


def _sniff_strace(path: Path, head: bytes) -> bool:
    import re

    return re.match(r"^\d+\s+\d+\.\d+\s+(?:[a-z_0-9]+\(|<\.\.\. )", _first_line(head)) is not None


def _sniff_thesios(path: Path, head: bytes) -> bool:
    return _first_line(head).startswith("filename,")


register_format(TraceFormat("thesios", read_thesios_csv, _sniff_thesios, summary="Thesios CSV shard (.csv, .csv.gz)"))
register_format(TraceFormat("parquet", read_parquet_trace, _sniff_parquet, summary="thesios's Parquet trace"))
register_format(TraceFormat("blkparse", read_blkparse, _sniff_blkparse, block=True, summary="blkparse's default text output"))
register_format(TraceFormat("strace", read_strace, _sniff_strace, summary="strace -f -ttt -T -y of pread64/pwrite64"))
register_format(TraceFormat("msr", read_msr_csv, block=True, summary="MSR Cambridge CSV"))
register_format(TraceFormat("alibaba", read_alibaba_csv, block=True, summary="Alibaba block trace CSV"))
register_format(TraceFormat("tencent", read_tencent_csv, block=True, summary="Tencent CBS CSV"))

#: What an unrecognized file is read as: its reader then names the problem in one line.
FALLBACK_FORMAT = "thesios"


def format_names() -> list[str]:
    """The registered format names, ``auto`` first (for ``--format`` help and errors)."""
    return ["auto", *FORMATS]


def recognized_format(path: str | Path) -> str | None:
    """The name of the first registered format whose sniffer accepts ``path`` (a ``.parquet``
    name: parquet), or None for a file no sniffer recognizes or that cannot be read."""
    path = Path(path)
    try:
        with pa.input_stream(str(path), compression="detect") as stream:
            head = stream.read(4096)
    except (OSError, pa.ArrowInvalid):
        return None  # the reader names the problem (a missing file, a folder) in one line
    if path.suffix == ".parquet":
        return "parquet"
    for fmt in FORMATS.values():
        if fmt.sniffer is not None and head and fmt.sniffer(path, head):
            return fmt.name
    return None


def sniff_format(path: str | Path) -> str:
    """The name of the first registered format whose sniffer accepts ``path`` (else the fallback)."""
    return recognized_format(path) or FALLBACK_FORMAT


def get_format(name: str) -> TraceFormat:
    """The registered format ``name`` (``auto`` is resolved by the caller with :func:`sniff_format`).

    Raises:
        ThesiosInputError: an unknown name (the message lists the known ones).
    """
    from thesios.errors import ThesiosInputError

    if name not in FORMATS:
        raise ThesiosInputError(f"--format must be one of {', '.join(format_names())}, got {name!r}")
    return FORMATS[name]


def read_trace(path: str | Path, fmt: str = "auto", lenient: bool = False, report: ReadReport | None = None) -> tuple[pa.Table, TraceFormat]:
    """Read one trace file in format ``fmt`` (``auto``: sniffed) with the registry's reader.

    Returns:
        ``(table, format)``: the rows in the trace schema (plus whatever columns the format adds)
        and the format that read them.

    Raises:
        ThesiosInputError: an unknown format; TraceFormatError from the reader on a bad file.
    """
    path = Path(path)
    if fmt != "auto":
        get_format(fmt)  # an unknown name before the file is opened
    fmt = sniff_format(path) if fmt == "auto" else fmt
    spec = get_format(fmt)
    report = report if report is not None else ReadReport()
    return spec.reader(path, lenient, report), spec
