"""Replay a trace on a real device with fio and measure each request's latency.

The practitioner's check of a synthesized trace needs no model of the disk: replay it and the real
trace it stands for on the same device and compare the latencies the device gives. A trace becomes
fio replay logs (iolog v3, :func:`thesios.writers.write_fio_iolog`) aimed at one target file, the
requests dealt round-robin to ``jobs`` logs that fio replays side by side on one clock, each with
``ioengine=psync`` and ``direct=1`` (fio 3.33 records no latency when an asynchronous engine replays
a log, so concurrency comes from jobs: up to ``jobs`` requests in flight). Each file of the trace
gets its own ``region_bytes`` region of the target (modulo the target's size); sizes are rounded up
to 4 KiB for direct I/O. fio's per-I/O latency logs (``write_lat_log``, ``log_avg_msec=0``) give
each request's total latency (submission plus completion).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv

from thesios.errors import ThesiosInputError
from thesios.writers import write_fio_iolog

BLOCK = 4096


@dataclass(frozen=True)
class ReplayResult:
    """Latencies of a replay: ``is_read`` (bool) and ``latency_s`` (float64 s) per completed
    request, in completion order; ``seconds`` the replay's wall time."""

    is_read: np.ndarray
    latency_s: np.ndarray
    seconds: float

    def summary(self) -> dict:
        """Counts and read/write latency p50/p90/p99 (s), JSON-ready."""
        out: dict = {"reads": int(self.is_read.sum()), "writes": int((~self.is_read).sum()), "seconds": self.seconds}
        for name, mask in (("read", self.is_read), ("write", ~self.is_read)):
            if mask.any():
                p50, p90, p99 = np.percentile(self.latency_s[mask], [50, 90, 99])
                out |= {f"{name}_latency_p50_s": float(p50), f"{name}_latency_p90_s": float(p90), f"{name}_latency_p99_s": float(p99)}
        return out


def check_target(target: Path) -> None:
    """Refuse a ``--target`` that cannot be a file before any work starts.

    Raises:
        ThesiosInputError: ``target`` is a folder or its folder is missing.
    """
    if target.is_dir():
        raise ThesiosInputError(f"{target}: is a folder; --target names a file")
    if not target.parent.is_dir():
        raise ThesiosInputError(f"{target}: its folder {target.parent} does not exist")


def prepare_target(target: Path, size_bytes: int) -> None:
    """Make ``target`` a file of at least ``size_bytes`` written with data (sequential direct
    writes by fio), so replayed reads reach the device (reads of holes or unwritten extents
    return zeros without any I/O).

    Raises:
        ThesiosInputError: ``target`` is a folder or its folder is missing; fio fails.
    """
    check_target(target)
    if target.exists() and target.stat().st_size >= size_bytes:
        return
    _fio(["--name=layout", f"--filename={target}", f"--size={size_bytes}", "--rw=write", "--bs=1M", "--direct=1",
          "--ioengine=psync", "--output=/dev/null"])


def _fio(args: list[str]) -> None:
    fio = shutil.which("fio")
    if fio is None:
        raise ThesiosInputError("replay needs fio on PATH (Debian: apt-get install fio)")
    done = subprocess.run([fio, *args], capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise ThesiosInputError(f"fio failed (exit {done.returncode}): {tail[0][:200]}")


def replay(start_s: np.ndarray, is_read: np.ndarray, file_id: np.ndarray, offset: np.ndarray, size: np.ndarray,
           target: Path, target_bytes: int = 1 << 30, jobs: int = 4, region_bytes: int = 64 << 20) -> ReplayResult:
    """Replay requests on ``target`` with fio; see the module docstring.

    Args:
        start_s: float64 arrival times, s; is_read: bool; file_id, offset, size: int64 (bytes).
        target: the file to replay on (laid out to ``target_bytes`` first when smaller).
        jobs: fio jobs replaying side by side (the most requests in flight).

    Returns:
        A :class:`ReplayResult` with one latency per request.

    Raises:
        ThesiosInputError: no requests, ``jobs < 1``, a target smaller than one region, no fio,
            or fio failing.
    """
    import time

    n = len(start_s)
    if n == 0:
        raise ThesiosInputError("nothing to replay: the trace has no requests")
    if jobs < 1 or target_bytes < region_bytes:
        raise ThesiosInputError(f"--jobs must be >= 1 and the target at least {region_bytes >> 20} MiB")
    prepare_target(target, target_bytes)
    size = np.minimum((np.maximum(size, 1) + BLOCK - 1) // BLOCK * BLOCK, region_bytes)
    t0 = float(np.min(start_s))
    with tempfile.TemporaryDirectory(prefix="thesios-replay-") as tmp:
        args = ["--direct=1", "--ioengine=psync", f"--write_lat_log={tmp}/lat", "--log_avg_msec=0", "--output=/dev/null"]
        for k in range(min(jobs, n)):
            mine = np.arange(k, n, jobs)
            log = Path(tmp) / f"job{k}.iolog"
            write_fio_iolog(start_s[mine], is_read[mine], file_id[mine], offset[mine], size[mine], log,
                            device=str(target), device_bytes=target_bytes, file_span_bytes=region_bytes, t0_s=t0)
            args += [f"--name=job{k}", f"--read_iolog={log}"]
        began = time.perf_counter()
        _fio(args)
        seconds = time.perf_counter() - began
        parts = [pcsv.read_csv(p, read_options=pcsv.ReadOptions(autogenerate_column_names=True))
                 for p in sorted(Path(tmp).glob("lat_lat.*.log")) if p.stat().st_size]
    if not parts:
        raise ThesiosInputError("fio logged no latencies")
    table = pa.concat_tables([t.select([1, 2]).rename_columns(["lat_ns", "dir"]) for t in parts])
    lat = np.asarray(table.column("lat_ns").to_numpy(), dtype=np.float64) / 1e9
    return ReplayResult(np.asarray(table.column("dir").to_numpy()) == 0, lat, seconds)
