"""The columnar trace schema: the 17 columns of the public Thesios traces as an Arrow schema.

Source: Phothilimthana et al., "Thesios: Synthesizing Accurate Counterfactual I/O Traces from I/O
Samples", ASPLOS 2024, and the README of the public traces (CC-BY 4.0). One row is one I/O request
that reached the storage server's HDD layer. Times are seconds (float64); sizes are bytes (int64).
"""

from __future__ import annotations

import pyarrow as pa

#: Column names in the order the public CSV shards write them.
THESIOS_COLUMNS: tuple[str, ...] = (
    "filename",
    "file_offset",
    "application",
    "c_time",
    "io_zone",
    "redundancy_type",
    "op_type",
    "service_class",
    "from_flash_cache",
    "cache_hit",
    "request_io_size_bytes",
    "disk_io_size_bytes",
    "response_io_size_bytes",
    "start_time",
    "disk_time",
    "simulated_disk_start_time",
    "simulated_latency",
)

#: The optional extra column some mirrors append (observed latency, seconds).
EXTRA_LATENCY = "latency"

IO_ZONES = ("WARM", "COLD", "UNKNOWN")
OP_TYPES = ("READ", "WRITE")
SERVICE_CLASSES = ("LATENCY_SENSITIVE", "THROUGHPUT_ORIENTED", "OTHER")

#: Arrow schema of a trace: int64 byte counts and offsets, float64 seconds, strings for names.
THESIOS_SCHEMA: pa.Schema = pa.schema(
    [
        pa.field("filename", pa.string(), nullable=False),
        pa.field("file_offset", pa.int64(), nullable=False),
        pa.field("application", pa.string()),
        pa.field("c_time", pa.int64()),  # file creation time, seconds since epoch
        pa.field("io_zone", pa.string(), nullable=False),
        pa.field("redundancy_type", pa.string()),
        pa.field("op_type", pa.string(), nullable=False),
        pa.field("service_class", pa.string()),
        pa.field("from_flash_cache", pa.int8()),
        pa.field("cache_hit", pa.int8(), nullable=False),  # 1 hit, 0 miss, -1 write
        pa.field("request_io_size_bytes", pa.int64(), nullable=False),
        pa.field("disk_io_size_bytes", pa.int64(), nullable=False),
        pa.field("response_io_size_bytes", pa.int64(), nullable=False),
        pa.field("start_time", pa.float64(), nullable=False),  # arrival, s
        pa.field("disk_time", pa.float64(), nullable=False),  # HDD service, s; 0 for hits/writes
        pa.field("simulated_disk_start_time", pa.float64()),  # s
        pa.field("simulated_latency", pa.float64()),  # s
    ]
)

#: The schema with the mirrors' extra ``latency`` column (seconds).
THESIOS_SCHEMA_WITH_LATENCY: pa.Schema = THESIOS_SCHEMA.append(pa.field(EXTRA_LATENCY, pa.float64()))


def empty_trace(with_latency: bool = False) -> pa.Table:
    """Return an empty table in the trace schema (optionally with the ``latency`` column)."""
    schema = THESIOS_SCHEMA_WITH_LATENCY if with_latency else THESIOS_SCHEMA
    return schema.empty_table()
