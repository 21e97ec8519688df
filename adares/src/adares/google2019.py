"""Loader of Google cluster-usage traces 2019 (ClusterData2019) ``instance_usage`` exported to
Parquet.

Schema (google/cluster-data, ClusterData2019.md; BigQuery table ``instance_usage``), the columns
read: start_time (microseconds), collection_id, instance_index, average_usage.cpus,
maximum_usage.memory (structs ``average_usage`` / ``maximum_usage`` with fields cpus and memory,
or the flattened names with a dot), assigned_memory. Usage is in normalized units (NCU, NMU:
shares of the largest machine's CPUs and memory); ``machine_cpus`` and ``machine_mem_gib`` turn
them into cores and bytes. One VM per (collection_id, instance_index). A step's CPU demand is the
mean of its windows' average CPU, its memory demand the maximum of their maximum memory. The
memory request is the last assigned_memory (the limit the instance ran with); the CPU request,
absent from this table, is ``cpu_request_factor`` x the instance's peak CPU.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from adares.errors import InputError
from adares.files import check_input_file
from adares.trace import GIB, STEP_S, Trace

NEEDED = ("start_time", "collection_id", "instance_index", "average_usage.cpus",
          "maximum_usage.memory", "assigned_memory")


def _flatten(df: pd.DataFrame) -> pd.DataFrame:
    out = {}
    for col in df.columns:
        first = df[col].dropna().head(1)
        if len(first) and isinstance(first.iloc[0], dict):
            for k in first.iloc[0]:
                out[f"{col}.{k}"] = df[col].map(lambda d, k=k: None if d is None else d.get(k))
        else:
            out[col] = df[col]
    return pd.DataFrame(out)


def load_instance_usage(path: str | Path, step_s: int = STEP_S, machine_cpus: float = 32.0,
                        machine_mem_gib: float = 128.0, cpu_request_factor: float = 1.5) -> Trace:
    """Read a Parquet export of instance_usage into a Trace at ``step_s`` steps.

    Raises InputError (one line) on a missing or unreadable file, missing columns, negative or
    non-numeric usage, or fewer than 2 steps.
    """
    path = Path(path)
    check_input_file(path)
    try:
        df = _flatten(pd.read_parquet(path))
    except Exception as exc:
        # Arrow's first line says why (empty file, not Parquet); the class name alone did not.
        why = (str(exc).splitlines() or [""])[0].split(": ", 1)[-1]
        raise InputError(f"{path}: not a readable Parquet file ({type(exc).__name__}: {why})") from None
    missing = [c for c in NEEDED if c not in df.columns]
    if missing:
        raise InputError(f"{path}: missing columns: {', '.join(missing)}")
    if len(df) == 0:
        raise InputError(f"{path}: no rows")
    vals = {}
    for c in ("start_time", "average_usage.cpus", "maximum_usage.memory", "assigned_memory"):
        v = pd.to_numeric(df[c], errors="coerce")
        if v.isna().any():
            i = int(np.flatnonzero(v.isna().to_numpy())[0])
            raise InputError(f"{path}: row {i + 1}: {c} is missing or not a number")
        if (v < 0).any():
            i = int(np.flatnonzero((v < 0).to_numpy())[0])
            raise InputError(f"{path}: row {i + 1}: negative usage in {c}: {v.iloc[i]:g}")
        vals[c] = v.astype(np.float64)
    vm = df["collection_id"].astype(str) + "/" + df["instance_index"].astype(str)
    ts = vals["start_time"] / 1e6
    t0 = float(ts.min())
    frame = pd.DataFrame({"vm": vm, "step": ((ts - t0) // step_s).astype(np.int64),
                          "cpu": vals["average_usage.cpus"] * machine_cpus,
                          "mem": vals["maximum_usage.memory"] * machine_mem_gib * GIB,
                          "req": vals["assigned_memory"] * machine_mem_gib * GIB})
    n_steps = int(frame["step"].max()) + 1
    if n_steps < 2:
        raise InputError(f"{path}: spans less than 2 steps of {step_s} s")
    ids = sorted(frame["vm"].unique())
    g = frame.groupby(["step", "vm"]).agg(cpu=("cpu", "mean"), mem=("mem", "max"))
    full = pd.MultiIndex.from_product([range(n_steps), ids], names=["step", "vm"])
    grid = g.reindex(full)
    cpu = grid["cpu"].unstack("vm")[ids].ffill().bfill().to_numpy(np.float64)
    mem = grid["mem"].unstack("vm")[ids].ffill().bfill().to_numpy(np.float64)
    last = frame.sort_values("step").groupby("vm")["req"].last()
    mem_req = np.maximum(last.loc[ids].to_numpy(np.float64), 0.0)
    mem_req = np.where(mem_req > 0, mem_req, mem.max(axis=0))
    cpu_req = cpu.max(axis=0) * cpu_request_factor
    return Trace(cpu, mem, cpu_req, mem_req, tuple(ids), step_s, t0).validate()
