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

import contextlib
import os
import shutil
import signal
import stat
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


#: Free space a replay leaves on the target's filesystem, bytes.
SPARE_BYTES = 1 << 30
#: Most fio jobs of one replay: each is a thread with its own log; beyond a few hundred requests in
#: flight no disk queue (SATA NCQ 32, a typical NVMe benchmark's 256) tells anything new.
MAX_JOBS = 256
#: Seconds fio gets to stop its jobs after SIGINT before it is killed.
STOP_GRACE_S = 5.0


def check_target(target: Path, size_bytes: int | None = None, overwrite: bool = False) -> None:
    """Refuse a ``--target`` before any work starts: one that cannot be a file, an existing file
    the user did not allow overwriting, or a size the target's filesystem cannot hold.

    Args:
        target: the file (or block device) to replay on.
        size_bytes: the size it will be laid out to, bytes; ``None`` skips the free-space check.
        overwrite: an existing regular file may be overwritten.

    Raises:
        ThesiosInputError: ``target`` is a folder or its folder is missing; it is an existing
            regular file and ``overwrite`` is false; laying it out to ``size_bytes`` would leave
            less than :data:`SPARE_BYTES` free on its filesystem.
    """
    if target.is_dir():
        raise ThesiosInputError(f"{target}: is a folder; --target names a file")
    if not target.parent.is_dir():
        raise ThesiosInputError(f"{target}: its folder {target.parent} does not exist")
    mode = target.stat().st_mode if target.exists() else None
    if mode is not None and stat.S_ISBLK(mode):
        return  # a device is the point of replaying; its size bounds fio, not free space
    if mode is not None and not overwrite:
        raise ThesiosInputError(f"{target}: exists ({target.stat().st_size} bytes); replay overwrites it with data: "
                                "give --overwrite or a new file")
    if size_bytes is not None:
        have = target.stat().st_size if mode is not None else 0
        free = shutil.disk_usage(target.parent).free
        if size_bytes - have > free - SPARE_BYTES:
            raise ThesiosInputError(f"--size-mib {size_bytes >> 20} does not fit: {target.parent} has {free >> 20} MiB "
                                    f"free and replay keeps {SPARE_BYTES >> 20} MiB spare")


def prepare_target(target: Path, size_bytes: int, overwrite: bool = True) -> None:
    """Make ``target`` a file of at least ``size_bytes`` written with data (sequential direct
    writes by fio), so replayed reads reach the device (reads of holes or unwritten extents
    return zeros without any I/O).

    A layout cut short (fio failing, Ctrl-C) leaves no file that looks laid out: fio allocates
    the whole file before writing it, and the next replay would take that file's unwritten
    extents for data. A file the layout made is removed; an existing regular file is truncated
    back to its size.

    Raises:
        ThesiosInputError: see :func:`check_target`; fio fails.
    """
    check_target(target, size_bytes, overwrite)
    st = target.stat() if target.exists() else None
    mode, had = (st.st_mode, st.st_size) if st is not None else (None, 0)
    if had >= size_bytes:
        return
    try:
        _fio(["--name=layout", f"--filename={target}", f"--size={size_bytes}", "--rw=write", "--bs=1M",
              "--direct=1", "--ioengine=psync", "--output=/dev/null"])
    except BaseException:
        if mode is None:
            target.unlink(missing_ok=True)
        elif stat.S_ISREG(mode):
            os.truncate(target, had)
        raise


def _fio(args: list[str]) -> None:
    """Run fio with its jobs as threads of one process (``--thread``) in a session of its own, so
    that Ctrl-C here stops all of it: fio is sent SIGINT, waited for, then killed."""
    fio = shutil.which("fio")
    if fio is None:
        raise ThesiosInputError("replay needs fio on PATH (Debian: apt-get install fio)")
    proc = subprocess.Popen([fio, "--thread", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        with _sigterm_as_interrupt():
            out, err = proc.communicate()
    except BaseException:
        _stop(proc)
        raise
    if proc.returncode != 0:
        tail = (err or out).strip().splitlines()[-1:] or ["no output"]
        raise ThesiosInputError(f"fio failed (exit {proc.returncode}): {tail[0][:200]}")


@contextlib.contextmanager
def _sigterm_as_interrupt():
    """SIGTERM (kill, a job scheduler) raises KeyboardInterrupt while fio runs, so it is stopped as
    on Ctrl-C: by default Python ends at once and fio, in a session of its own, replays on. Only
    the main thread may set a handler; elsewhere this does nothing."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    try:
        old = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _stop(proc: subprocess.Popen) -> None:
    """Stop fio's process group: SIGINT (fio ends its jobs), then SIGKILL after the grace period."""
    for sig, grace in ((signal.SIGINT, STOP_GRACE_S), (signal.SIGKILL, None)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.communicate(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def replay(start_s: np.ndarray, is_read: np.ndarray, file_id: np.ndarray, offset: np.ndarray, size: np.ndarray,
           target: Path, target_bytes: int = 1 << 30, jobs: int = 4, region_bytes: int = 64 << 20,
           overwrite: bool = True) -> ReplayResult:
    """Replay requests on ``target`` with fio; see the module docstring.

    Args:
        start_s: float64 arrival times, s; is_read: bool; file_id, offset, size: int64 (bytes).
        target: the file to replay on (laid out to ``target_bytes`` first when smaller).
        jobs: fio jobs replaying side by side (the most requests in flight), at most :data:`MAX_JOBS`.
        overwrite: an existing regular ``target`` may be overwritten (the command asks ``--overwrite``).

    Returns:
        A :class:`ReplayResult` with one latency per request.

    Raises:
        ThesiosInputError: no requests, ``jobs`` outside [1, :data:`MAX_JOBS`], a target smaller
            than one region or refused by :func:`check_target`, no fio, or fio failing.
    """
    import time

    n = len(start_s)
    if n == 0:
        raise ThesiosInputError("nothing to replay: the trace has no requests")
    if not 1 <= jobs <= MAX_JOBS or target_bytes < region_bytes:
        raise ThesiosInputError(f"--jobs must be in [1, {MAX_JOBS}] and the target at least {region_bytes >> 20} MiB")
    prepare_target(target, target_bytes, overwrite)
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
