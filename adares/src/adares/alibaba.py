"""Loader of Alibaba cluster-trace-v2018 container usage (``container_usage.csv``).

Schema (alibaba/clusterdata, cluster-trace-v2018/schema.txt), files without a header row:

container_usage: container_id, machine_id, time_stamp (s), cpu_util_percent, mem_util_percent,
    cpi, mem_gps, mpki, net_in, net_out, disk_io_percent
container_meta:  container_id, machine_id, time_stamp (s), app_du, status, cpu_request,
    cpu_limit, mem_size

cpu_util_percent and mem_util_percent are read as percentages of the container's request:
cpu_request / 100 cores and mem_size (percent of a machine's memory, ``machine_mem_gib``) from
container_meta when it is given, else the ``default_cpu_cores`` / ``default_mem_gib`` arguments.
A step's CPU demand is the mean of its samples, its memory demand their maximum (a memory peak
inside a step is what kills a container). Gaps are filled with the container's previous value.
Parquet files with the same column names are read too.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from adares.errors import InputError
from adares.files import check_input_file
from adares.trace import GIB, STEP_S, Trace

USAGE_COLUMNS = ("container_id", "machine_id", "time_stamp", "cpu_util_percent",
                 "mem_util_percent", "cpi", "mem_gps", "mpki", "net_in", "net_out",
                 "disk_io_percent")
META_COLUMNS = ("container_id", "machine_id", "time_stamp", "app_du", "status", "cpu_request",
                "cpu_limit", "mem_size")


def _read(path: Path, columns: tuple[str, ...], needed: tuple[str, ...]) -> pd.DataFrame:
    check_input_file(path)
    try:
        if path.suffix == ".parquet":
            df = pd.read_parquet(path)
        else:
            with path.open("r", encoding="utf-8", errors="replace") as f:
                first = f.readline()
            header = 0 if first.split(",")[0].strip() == columns[0] else None
            df = pd.read_csv(path, header=header, dtype=str, keep_default_na=False)
            if header is None:
                if df.shape[1] != len(columns):
                    raise InputError(
                        f"{path}: missing columns: {df.shape[1]} fields per row, expected "
                        f"{len(columns)} ({', '.join(columns)})")
                df.columns = list(columns)
    except InputError:
        raise
    except Exception as exc:  # pandas/pyarrow parse errors: one line for the user
        raise InputError(f"{path}: unreadable ({type(exc).__name__}: {str(exc).splitlines()[0]})") from None
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise InputError(f"{path}: missing columns: {', '.join(missing)}")
    if len(df) == 0:
        raise InputError(f"{path}: no rows")
    return df


def _numeric(df: pd.DataFrame, col: str, path: Path) -> pd.Series:
    raw = df[col].astype(str).str.strip()
    vals = pd.to_numeric(raw.where(raw != "", None), errors="coerce")
    bad = vals.isna() & (raw != "") & (raw.str.lower() != "nan") & (raw.str.lower() != "none")
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise InputError(f"{path}: row {i + 1}: {col} is not a number: {raw.iloc[i]!r}")
    vals = vals.astype(np.float64)
    # NaN is a gap the loaders fill; an infinity is a corrupt cell (no step or usage it could be)
    infinite = np.isinf(vals.to_numpy())
    if infinite.any():
        i = int(np.flatnonzero(infinite)[0])
        raise InputError(f"{path}: row {i + 1}: {col} is not finite: {raw.iloc[i]!r}")
    return vals


def load_container_usage(path: str | Path, meta_path: str | Path | None = None,
                         step_s: int = STEP_S, default_cpu_cores: float = 4.0,
                         default_mem_gib: float = 8.0, machine_mem_gib: float = 96.0) -> Trace:
    """Read container_usage (and optionally container_meta) into a Trace at ``step_s`` steps.

    Returns a validated Trace with one VM per container_id (sorted), cpu in cores, mem in bytes.
    Raises InputError (one line) on a missing file, missing columns, non-numeric or negative
    usage, or a trace shorter than 2 steps.
    """
    path = Path(path)
    df = _read(path, USAGE_COLUMNS, ("container_id", "time_stamp", "cpu_util_percent",
                                     "mem_util_percent"))
    ts = _numeric(df, "time_stamp", path)
    cpu_pct = _numeric(df, "cpu_util_percent", path)
    mem_pct = _numeric(df, "mem_util_percent", path)
    for col, v in (("time_stamp", ts), ("cpu_util_percent", cpu_pct), ("mem_util_percent", mem_pct)):
        neg = v < 0
        if neg.any():
            i = int(np.flatnonzero(neg.to_numpy())[0])
            what = "negative usage" if col != "time_stamp" else "negative time_stamp"
            raise InputError(f"{path}: row {i + 1}: {what} in {col}: {v.iloc[i]:g}")
    frame = pd.DataFrame({"cid": df["container_id"].astype(str), "ts": ts, "cpu": cpu_pct,
                          "mem": mem_pct}).dropna(subset=["ts"])
    if frame[["cpu", "mem"]].isna().all(axis=None):
        raise InputError(f"{path}: no usable cpu_util_percent / mem_util_percent values")
    t0 = float(frame["ts"].min())
    frame["step"] = ((frame["ts"] - t0) // step_s).astype(np.int64)
    grouped = frame.groupby(["step", "cid"]).agg(cpu=("cpu", "mean"), mem=("mem", "max"))
    n_steps = int(frame["step"].max()) + 1
    if n_steps < 2:
        raise InputError(f"{path}: spans less than 2 steps of {step_s} s")
    ids = sorted(frame["cid"].unique())
    full = pd.MultiIndex.from_product([range(n_steps), ids], names=["step", "cid"])
    grid = grouped.reindex(full)
    cpu = grid["cpu"].unstack("cid")[ids].ffill().bfill().fillna(0.0).to_numpy(np.float64)
    mem = grid["mem"].unstack("cid")[ids].ffill().bfill().fillna(0.0).to_numpy(np.float64)

    cpu_req = np.full(len(ids), float(default_cpu_cores))
    mem_req = np.full(len(ids), float(default_mem_gib) * GIB)
    if meta_path is not None:
        mp = Path(meta_path)
        meta = _read(mp, META_COLUMNS, ("container_id", "cpu_request", "mem_size"))
        m = pd.DataFrame({"cid": meta["container_id"].astype(str),
                          "cpu_request": _numeric(meta, "cpu_request", mp),
                          "mem_size": _numeric(meta, "mem_size", mp)})
        if (m[["cpu_request", "mem_size"]] < 0).any(axis=None):
            raise InputError(f"{mp}: negative cpu_request or mem_size")
        last = m.dropna().groupby("cid").last()
        known = [i for i, c in enumerate(ids) if c in last.index]
        if known:
            sel = last.loc[[ids[i] for i in known]]
            cpu_req[known] = sel["cpu_request"].to_numpy() / 100.0
            mem_req[known] = sel["mem_size"].to_numpy() / 100.0 * machine_mem_gib * GIB
    cpu_cores = cpu / 100.0 * cpu_req
    mem_bytes = mem / 100.0 * mem_req
    return Trace(cpu_cores, mem_bytes, cpu_req, mem_req, tuple(ids), step_s, t0).validate()
