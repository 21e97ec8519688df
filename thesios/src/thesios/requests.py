"""A batch of I/O requests as numpy columns (the fast in-memory form of a trace).

Strings (file names, zones, op types) are kept as small integer codes until a table is needed;
:meth:`Requests.to_table` builds the Arrow trace (:data:`thesios.schema.THESIOS_SCHEMA` plus
``disk_id``) with vectorized Arrow kernels.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from thesios.schema import IO_ZONES, SERVICE_CLASSES, THESIOS_SCHEMA

ZONE_WARM, ZONE_COLD = 0, 1


@dataclass
class Requests:
    """Columns of n requests, all numpy arrays of length n.

    Attributes:
        disk_id: int32, the disk (storage server HDD) that served the request.
        start_time: float64 seconds, arrival time.
        is_read: bool, READ (else WRITE).
        cache_hit: int8, 1 hit, 0 miss, -1 write.
        file_id: int64, file identifier (unique per disk in generated fleets).
        file_offset: int64 bytes.
        size: int64 bytes requested.
        zone: int8 index into :data:`thesios.schema.IO_ZONES` (0 WARM, 1 COLD, 2 UNKNOWN).
        service_class: int8 index into :data:`thesios.schema.SERVICE_CLASSES`.
        disk_time: float64 seconds of HDD service (0 for hits and writes).
        rotation_time: float64 seconds, the rotational part of ``disk_time`` (NaN if unknown).
        transfer_time: float64 seconds, the media-transfer part of ``disk_time`` (NaN if unknown).
        app: int16 index into the fleet's application names.
    """

    disk_id: np.ndarray
    start_time: np.ndarray
    is_read: np.ndarray
    cache_hit: np.ndarray
    file_id: np.ndarray
    file_offset: np.ndarray
    size: np.ndarray
    zone: np.ndarray
    service_class: np.ndarray
    disk_time: np.ndarray
    rotation_time: np.ndarray
    transfer_time: np.ndarray
    app: np.ndarray

    def __len__(self) -> int:
        return len(self.start_time)

    @property
    def is_miss_read(self) -> np.ndarray:
        """bool mask of the cache-miss reads (the requests the HDD serves)."""
        return self.is_read & (self.cache_hit == 0)

    def take(self, index: np.ndarray) -> Requests:
        """Rows selected by a bool mask or an integer index array, as a new batch."""
        return Requests(**{f.name: getattr(self, f.name)[index] for f in fields(self)})

    def sorted_by_time(self) -> Requests:
        """The batch in arrival order (stable)."""
        return self.take(np.argsort(self.start_time, kind="stable"))

    @staticmethod
    def concat(parts: list[Requests]) -> Requests:
        """Concatenate batches (in the given order)."""
        return Requests(**{f.name: np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(Requests)})

    @staticmethod
    def from_table(table: pa.Table) -> tuple[Requests, tuple[str, ...]]:
        """Columns of a trace table (Thesios schema, optional ``disk_id``) and its application names.

        File names are dictionary-encoded into ``file_id``; unknown zones map to UNKNOWN and
        unknown or missing service classes to OTHER; the rotation/transfer split is unknown (NaN).
        Null ``disk_time`` counts as 0.
        """
        n = table.num_rows

        def codes(name: str) -> tuple[np.ndarray, list]:
            enc = pc.dictionary_encode(table.column(name).combine_chunks())
            idx = enc.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
            return idx, enc.dictionary.to_pylist()

        def recode(name: str, vocab: tuple[str, ...], default: int) -> np.ndarray:
            idx, words = codes(name)
            table_map = np.array([vocab.index(w) if w in vocab else default for w in words] + [default], dtype=np.int8)
            return table_map[idx]  # -1 (null) picks the trailing default

        def num(name: str, dtype) -> np.ndarray:
            return np.asarray(table.column(name).fill_null(0).to_numpy(), dtype=dtype)

        file_id, _ = codes("filename")
        app, app_names = codes("application")
        disk = num("disk_id", np.int32) if "disk_id" in table.column_names else np.zeros(n, np.int32)
        op = table.column("op_type").to_numpy(zero_copy_only=False)
        nan = np.full(n, np.nan)
        req = Requests(
            disk_id=disk,
            start_time=num("start_time", np.float64),
            is_read=np.asarray(op == "READ", dtype=bool),
            cache_hit=num("cache_hit", np.int8),
            file_id=file_id,
            file_offset=num("file_offset", np.int64),
            size=num("request_io_size_bytes", np.int64),
            zone=recode("io_zone", IO_ZONES, 2),
            service_class=recode("service_class", SERVICE_CLASSES, 2),
            disk_time=num("disk_time", np.float64),
            rotation_time=nan,
            transfer_time=nan.copy(),
            app=np.maximum(app, 0).astype(np.int16),
        )
        return req, tuple(str(a) for a in app_names) or ("app",)

    def to_table(self, applications: tuple[str, ...] = ("app",), with_disk_id: bool = True) -> pa.Table:
        """Arrow table in the Thesios schema (+ ``disk_id`` int32 when asked); ``simulated_*`` null.

        File names are ``d<disk>/f<file>``; sizes on disk are the request rounded up to 4 KiB for
        misses and writes, 0 for hits; response sizes equal the request for reads, 0 for writes.
        """
        n = len(self)
        disk_str = pc.cast(pa.array(self.disk_id), pa.string())
        file_str = pc.cast(pa.array(self.file_id), pa.string())
        filename = pc.binary_join_element_wise("d", disk_str, "/f", file_str, "")
        disk_io = np.where(self.cache_hit == 1, 0, (self.size + 4095) // 4096 * 4096).astype(np.int64)
        cols = {
            "filename": filename,
            "file_offset": pa.array(self.file_offset, pa.int64()),
            "application": pa.DictionaryArray.from_arrays(pa.array(self.app.astype(np.int32)), pa.array(applications)).cast(pa.string()),
            "c_time": pa.array(np.full(n, 1_700_000_000, np.int64) - self.file_id % 86400 * 1000),
            "io_zone": pa.DictionaryArray.from_arrays(pa.array(self.zone.astype(np.int32)), pa.array(IO_ZONES)).cast(pa.string()),
            "redundancy_type": pa.array(np.full(n, "REPLICATED", dtype=object), pa.string()),
            "op_type": pa.array(np.where(self.is_read, "READ", "WRITE").astype(object), pa.string()),
            "service_class": pa.DictionaryArray.from_arrays(pa.array(self.service_class.astype(np.int32)), pa.array(SERVICE_CLASSES)).cast(pa.string()),
            "from_flash_cache": pa.array(np.zeros(n, np.int8)),
            "cache_hit": pa.array(self.cache_hit.astype(np.int8)),
            "request_io_size_bytes": pa.array(self.size, pa.int64()),
            "disk_io_size_bytes": pa.array(disk_io),
            "response_io_size_bytes": pa.array(np.where(self.is_read, self.size, 0).astype(np.int64)),
            "start_time": pa.array(self.start_time, pa.float64()),
            "disk_time": pa.array(self.disk_time, pa.float64()),
            "simulated_disk_start_time": pa.nulls(n, pa.float64()),
            "simulated_latency": pa.nulls(n, pa.float64()),
        }
        table = pa.table(cols, schema=THESIOS_SCHEMA)
        if with_disk_id:
            table = table.append_column("disk_id", pa.array(self.disk_id.astype(np.int32)))
        return table
