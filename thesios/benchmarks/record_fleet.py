"""Record a fleet of real traces: real software doing direct I/O on files of this machine's disk.

Each instance is one run of real software on its own files (one "disk"), traced with
``strace -f -ttt -T -y -e trace=pread64,pwrite64``: every positioned read and write with its
entry time, file, offset, size and duration (the latency the device gave, plus strace's own
overhead of some microseconds). The software opens its data files with ``O_DIRECT``, so the page
cache does not answer the reads. Classes (>= 24 instances each, parameters drawn per instance from
a generator seeded by (class, instance)):

- ``rocksdb-readrandom``: ``db_bench --benchmarks=readrandom`` (point lookups) with direct reads,
  on a database of 100-300 k keys (40-120 MB), 1-4 threads, a 1-8 MiB block cache.
- ``rocksdb-readwhilewriting``: ``db_bench --benchmarks=readwhilewriting``: readers plus one
  writer whose memtable flushes and compactions write with direct I/O (256 KiB-1 MiB write buffers, so flushes come every few seconds).
- ``rocksdb-mixgraph``: ``db_bench --benchmarks=mixgraph`` with the key-range, value-size and
  get/put/seek mix of Cao et al., "Characterizing, Modeling, and Benchmarking RocksDB Key-Value
  Workloads at Facebook", FAST 2020 (the parameters of RocksDB's wiki), direct reads and flushes.
- ``fio-randrw``: fio (psync, ``direct=1``) random read/write mixes with Poisson arrivals at
  100-600 IOPS per job, 1-3 jobs, 4-64 KiB blocks (a fourth class of our own design).

Each instance is saved as ``CLASS-NN.parquet`` in thesios's trace schema plus ``latency`` (s),
``disk_id`` (int32, unique over the fleet) and ``workload`` (the class); ``start_time`` counts
seconds from the instance's start, ``filename`` is relative to its folder. Instances already
recorded are skipped, so an interrupted recording resumes. ``--subset DIR`` then writes seconds
[``--subset-from``, + ``--subset-seconds``) of every instance, one file per class, for the tests.

    python benchmarks/record_fleet.py --out out/recorded            # ~30 min on a quiet machine
    python benchmarks/record_fleet.py --out out/recorded --subset data/recorded --subset-from 4 --subset-seconds 1

Needs ``db_bench`` (Debian: rocksdb-tools), ``fio`` and ``strace`` on PATH.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from thesios.readers import read_strace
from thesios.writers import read_parquet, write_parquet

CLASSES = ("rocksdb-readrandom", "rocksdb-readwhilewriting", "rocksdb-mixgraph", "fio-randrw")
DB_SIZES = (100_000, 200_000, 300_000)  # keys of 400-byte values: about 40, 80, 120 MB
STRACE = ["strace", "-f", "-qq", "-ttt", "-T", "-s", "0", "-y", "-e", "trace=pread64,pwrite64"]
#: db_bench's mixgraph parameters of RocksDB's wiki (from Cao et al., FAST 2020), rate not shaped.
MIXGRAPH = ["--keyrange_dist_a=14.18", "--keyrange_dist_b=-2.917", "--keyrange_dist_c=0.0164",
            "--keyrange_dist_d=-0.08082", "--keyrange_num=30", "--value_k=0.2615", "--value_sigma=25.45",
            "--iter_k=2.517", "--iter_sigma=14.236", "--mix_get_ratio=0.85", "--mix_put_ratio=0.14",
            "--mix_seek_ratio=0.01", "--reads=100000000"]


def base_db(work: Path, keys: int) -> Path:
    """A filled RocksDB of ``keys`` 400-byte values (made once, copied per instance)."""
    db = work / f"base-{keys}"
    if not (db / "CURRENT").exists():
        shutil.rmtree(db, ignore_errors=True)
        subprocess.run(["db_bench", "--benchmarks=fillrandom,compact", f"--db={db}", f"--num={keys}", "--value_size=400",
                        "--compression_type=none", "--use_direct_io_for_flush_and_compaction=true", "--seed=1"],
                       check=True, stdout=subprocess.DEVNULL)
    return db


def command(cls: str, i: int, run: Path, work: Path) -> tuple[list[str], float]:
    """The command line of instance ``i`` of ``cls`` (its files under ``run``) and its duration (s)."""
    rng = np.random.default_rng([CLASSES.index(cls), i])
    duration = float(rng.integers(10, 15))
    if cls == "fio-randrw":
        size_mb = int(rng.choice([64, 128, 256]))
        job = [f"--filename={run / 'data'}", f"--size={size_mb}M", "--direct=1", "--ioengine=psync", "--rw=randrw",
               f"--rwmixread={int(rng.integers(50, 96))}", f"--bs={int(rng.choice([4, 8, 16, 64]))}k",
               f"--numjobs={int(rng.integers(1, 4))}", f"--rate_iops={int(rng.integers(100, 601))}",
               "--rate_process=poisson", f"--randseed={i}", "--time_based", f"--runtime={int(duration)}",
               "--group_reporting", "--name=fleet"]
        subprocess.run(["fio", *job, "--create_only=1"], check=True, stdout=subprocess.DEVNULL)  # layout, untraced
        return ["fio", *job], duration
    keys = int(rng.choice(DB_SIZES))
    shutil.copytree(base_db(work, keys), run / "db")
    args = ["db_bench", f"--db={run / 'db'}", "--use_existing_db=true", f"--num={keys}", "--value_size=400",
            "--use_direct_reads=true", "--use_direct_io_for_flush_and_compaction=true", "--compression_type=none",
            f"--threads={int(rng.integers(1, 5))}", f"--cache_size={int(rng.choice([1, 2, 4, 8])) << 20}",
            f"--seed={1000 + i}", f"--duration={int(duration)}",
            f"--write_buffer_size={int(rng.choice([256, 512, 1024])) << 10}"]
    bench = {"rocksdb-readrandom": ["--benchmarks=readrandom"],
             "rocksdb-readwhilewriting": ["--benchmarks=readwhilewriting",
                                          f"--benchmark_write_rate_limit={int(rng.integers(1, 5)) << 20}"],
             "rocksdb-mixgraph": ["--benchmarks=mixgraph", *MIXGRAPH]}[cls]
    return args + bench, duration


def record(cls: str, i: int, disk_id: int, work: Path, out: Path) -> int:
    """Run and trace one instance; save it as ``out/CLASS-NN.parquet``; returns its request count."""
    run = work / f"{cls}-{i:02d}"
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir(parents=True)
    cmd, _ = command(cls, i, run, work)
    raw = run / "strace.txt"
    began = time.time()
    subprocess.run([*STRACE, "-o", str(raw), *cmd], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    table = read_strace(raw)
    inside = pc.starts_with(table.column("filename"), str(run) + "/")
    table = table.filter(inside)  # the software's own files, not its libraries
    n = table.num_rows
    rel = pc.utf8_slice_codeunits(table.column("filename"), len(str(run)) + 1)
    table = table.set_column(0, "filename", rel)
    table = table.set_column(table.schema.get_field_index("start_time"), "start_time",
                             pc.subtract(table.column("start_time"), began))
    table = table.append_column("disk_id", pa.array(np.full(n, disk_id, np.int32)))
    table = table.append_column("workload", pa.array([cls] * n, pa.string()))
    meta = {b"thesios.command": " ".join(cmd).replace(str(run), ".").encode(), b"thesios.recorded_at": str(began).encode()}
    write_parquet(table.replace_schema_metadata(meta), out / f"{cls}-{i:02d}.parquet")
    shutil.rmtree(run, ignore_errors=True)
    return n


def write_subset(out: Path, subset: Path, begin: float, seconds: float) -> None:
    """Seconds [begin, begin + seconds) of every recorded instance (after the software's start-up),
    times and latencies rounded to the microsecond strace measures, one Parquet file per class."""
    subset.mkdir(parents=True, exist_ok=True)
    for cls in CLASSES:
        parts = sorted(out.glob(f"{cls}-*.parquet"))
        if not parts:
            continue
        tables = []
        for p in parts:
            t = read_parquet(p).replace_schema_metadata(None)
            t = t.filter(pc.and_(pc.greater_equal(t.column("start_time"), begin), pc.less(t.column("start_time"), begin + seconds)))
            for name in ("start_time", "disk_time", "latency"):
                t = t.set_column(t.schema.get_field_index(name), name, pc.round(t.column(name), 6))
            tables.append(t)
        table = pa.concat_tables(tables)
        write_parquet(table, subset / f"{cls}.parquet", compression_level=19)  # committed: as small as it can be
        print(f"{cls}: {len(parts)} instances, {table.num_rows} requests in [{begin:g}, {begin + seconds:g}) s -> {subset}")


def main() -> None:
    """Record (or resume) the fleet, then optionally write the test subset."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("out/recorded"), help="folder of the per-instance Parquet files")
    ap.add_argument("--work", type=Path, default=Path("/var/tmp/thesios-record"), help="scratch folder on the disk to trace")
    ap.add_argument("--instances", type=int, default=24, help="instances per class")
    ap.add_argument("--classes", default=",".join(CLASSES), help="comma-separated classes to record")
    ap.add_argument("--subset", type=Path, help="also write the first --subset-seconds of each instance here")
    ap.add_argument("--subset-from", type=float, default=4.0, help="where the subset's window begins, s")
    ap.add_argument("--subset-seconds", type=float, default=1.0)
    args = ap.parse_args()
    missing = [t for t in ("db_bench", "fio", "strace") if shutil.which(t) is None]
    if missing:
        sys.exit(f"record_fleet: error: {', '.join(missing)} not on PATH (Debian: rocksdb-tools, fio, strace)")
    args.out.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    classes = [c for c in args.classes.split(",") if c]
    for i in range(args.instances):  # classes interleaved, so start times spread over the recording
        for cls in classes:
            target = args.out / f"{cls}-{i:02d}.parquet"
            if target.exists():
                continue
            t0 = time.perf_counter()
            n = record(cls, i, CLASSES.index(cls) * 1000 + i, args.work, args.out)
            print(f"{cls} {i + 1}/{args.instances}: {n} requests, {time.perf_counter() - t0:.1f} s", flush=True)
    if args.subset is not None:
        write_subset(args.out, args.subset, args.subset_from, args.subset_seconds)


if __name__ == "__main__":
    main()
