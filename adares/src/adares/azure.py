"""Loader of the Azure Public Dataset VM traces (V1, 2017; V2, 2019): ``vm_cpu_readings`` with,
optionally, ``vmtable``.

Schema (Azure/AzurePublicDataset, AzurePublicDatasetV1.md / V2.md), files without a header row
(a header row with these names is accepted; ``.csv.gz`` is read too):

vm_cpu_readings-file-*: timestamp (s, every 5 minutes), vmid, mincpu, maxcpu, avgcpu
    (CPU utilization during the 5 minutes, percent of the VM's virtual cores)
vmtable: vmid, subscriptionid, deploymentid, vmcreated, vmdeleted, maxcpu, avgcpu, p95maxcpu,
    vmcategory, vmcorecountbucket, vmmemorybucket (buckets: "2", "4", "8", "24", ">24" cores;
    "2", "4", "8", "32", "64", ">64" GB)

CPU demand is ``cpu_column`` (avgcpu by default; maxcpu is the 5-minute peak) / 100 x the VM's
cores: vmcorecountbucket from vmtable, an open top bucket ">N" read as ``top_bucket_factor`` x N,
or ``default_cpu_cores`` without vmtable. The VM's cores and its memory bucket (GiB) are its
requests. Azure publishes no memory readings: memory demand is held at ``mem_used_fraction`` of
the memory bucket for the whole trace, so memory savings cannot be measured on these traces
(CPU savings can). Gaps are filled with the VM's previous reading (its first before it starts).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from adares.alibaba import _numeric, _read
from adares.errors import InputError
from adares.trace import GIB, STEP_S, Trace

READING_COLUMNS = ("timestamp", "vmid", "mincpu", "maxcpu", "avgcpu")
VMTABLE_COLUMNS = ("vmid", "subscriptionid", "deploymentid", "vmcreated", "vmdeleted", "maxcpu",
                   "avgcpu", "p95maxcpu", "vmcategory", "vmcorecountbucket", "vmmemorybucket")


def _bucket(raw: str, col: str, path: Path, row: int, top_factor: float) -> float:
    s = str(raw).strip()
    top = s.startswith(">")
    try:
        v = float(s[1:] if top else s)
    except ValueError:
        raise InputError(f"{path}: row {row}: {col} is not a bucket: {s!r}") from None
    if not (np.isfinite(v) and v > 0):
        raise InputError(f"{path}: row {row}: {col} must be positive: {s!r}")
    return v * top_factor if top else v


def load_vm_cpu_readings(path: str | Path, vmtable_path: str | Path | None = None,
                         step_s: int = STEP_S, cpu_column: str = "avgcpu",
                         default_cpu_cores: float = 4.0, default_mem_gib: float = 8.0,
                         mem_used_fraction: float = 1.0, top_bucket_factor: float = 1.5) -> Trace:
    """Read Azure vm_cpu_readings (and optionally vmtable) into a Trace at ``step_s`` steps: one
    VM per vmid (sorted), cpu in cores, mem in bytes (see the module docstring).

    Raises InputError (one line) on a missing or unreadable file, missing columns, non-numeric,
    negative or above-100 utilization, a bad bucket, or a trace shorter than 2 steps.
    """
    if cpu_column not in ("mincpu", "maxcpu", "avgcpu"):
        raise InputError(f"azure: cpu column must be mincpu, maxcpu or avgcpu, got {cpu_column!r}")
    path = Path(path)
    df = _read(path, READING_COLUMNS, ("timestamp", "vmid", cpu_column))
    ts = _numeric(df, "timestamp", path)
    pct = _numeric(df, cpu_column, path)
    for col, v in (("timestamp", ts), (cpu_column, pct)):
        if (v < 0).any():
            i = int(np.flatnonzero((v < 0).to_numpy())[0])
            what = "negative usage" if col != "timestamp" else "negative timestamp"
            raise InputError(f"{path}: row {i + 1}: {what} in {col}: {v.iloc[i]:g}")
    # Utilization is a percentage of the VM's cores: above 100 is a corrupt row, not demand.
    if (pct > 100 + 1e-9).any():
        i = int(np.flatnonzero((pct > 100 + 1e-9).to_numpy())[0])
        raise InputError(f"{path}: row {i + 1}: {cpu_column} above 100%: {pct.iloc[i]:g}")
    frame = pd.DataFrame({"vm": df["vmid"].astype(str), "ts": ts, "cpu": pct}).dropna()
    if len(frame) == 0:
        raise InputError(f"{path}: no usable {cpu_column} values")
    t0 = float(frame["ts"].min())
    frame["step"] = ((frame["ts"] - t0) // step_s).astype(np.int64)
    n_steps = int(frame["step"].max()) + 1
    if n_steps < 2:
        raise InputError(f"{path}: spans less than 2 steps of {step_s} s")
    ids = sorted(frame["vm"].unique())
    g = frame.groupby(["step", "vm"])["cpu"].mean()
    full = pd.MultiIndex.from_product([range(n_steps), ids], names=["step", "vm"])
    pct_grid = g.reindex(full).unstack("vm")[ids].ffill().bfill().to_numpy(np.float64)

    cores = np.full(len(ids), float(default_cpu_cores))
    mem_gib = np.full(len(ids), float(default_mem_gib))
    if vmtable_path is not None:
        vp = Path(vmtable_path)
        vt = _read(vp, VMTABLE_COLUMNS, ("vmid", "vmcorecountbucket", "vmmemorybucket"))
        pos = {v: i for i, v in enumerate(ids)}
        for row, (vm, c, m) in enumerate(zip(vt["vmid"].astype(str), vt["vmcorecountbucket"],
                                             vt["vmmemorybucket"]), start=1):
            i = pos.get(vm)
            if i is not None:
                cores[i] = _bucket(c, "vmcorecountbucket", vp, row, top_bucket_factor)
                mem_gib[i] = _bucket(m, "vmmemorybucket", vp, row, top_bucket_factor)
    cpu = pct_grid / 100.0 * cores
    mem = np.broadcast_to(mem_gib * GIB * mem_used_fraction, cpu.shape).copy()
    return Trace(cpu, mem, cores, mem_gib * GIB, tuple(ids), step_s, t0).validate()
