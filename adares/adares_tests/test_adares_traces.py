"""Traces: the synthetic generator's properties and the Alibaba v2018 loader on a fixture with
the exact schema (headerless container_usage, 11 columns; container_meta, 8 columns)."""

from pathlib import Path

import numpy as np
import pytest

from adares.alibaba import USAGE_COLUMNS, load_container_usage
from adares.errors import InputError
from adares.synthetic import generate
from adares.trace import GIB

FIX = Path(__file__).parent / "fixtures"


def test_synthetic_shape_determinism_and_features():
    a = generate(40, 3, seed=3)
    b = generate(40, 3, seed=3)
    assert a.cpu.shape == (864, 40) and np.array_equal(a.cpu, b.cpu) and np.array_equal(a.mem, b.mem)
    assert not np.array_equal(a.cpu, generate(40, 3, seed=4).cpu)
    assert (a.cpu >= 0).all() and (a.mem > 0).all()
    # Daily cycle: the mean profile over the day has a clear peak-to-trough swing.
    prof = a.cpu.sum(axis=1).reshape(3, 288).mean(axis=0)
    assert prof.max() / prof.min() > 1.3
    # Most VMs are over-provisioned: request above the 99th percentile of demand.
    assert (a.cpu_request > np.quantile(a.cpu, 0.99, axis=0)).mean() > 0.5
    # Some VMs leak memory: their last-day mean exceeds their first-day mean by > 5%.
    growth = a.mem[-288:].mean(axis=0) / a.mem[:288].mean(axis=0)
    assert (growth > 1.05).any() and (growth < 1.03).any()


def test_alibaba_fixture_loads_with_meta():
    tr = load_container_usage(FIX / "container_usage.csv", FIX / "container_meta.csv")
    assert tr.vm_ids == ("c_10021", "c_10457", "c_11873")
    assert tr.n_steps == 24 and tr.step_s == 300
    assert tr.cpu_request.tolist() == [4.0, 8.0, 2.0]
    assert np.allclose(tr.mem_request / GIB, [1.56 * 0.96, 3.13 * 0.96, 0.78 * 0.96])
    # Step 0 of c_10021: CPU demand = mean cpu_util_percent of its rows in [39600, 39900) x 4 cores.
    rows = [ln.split(",") for ln in (FIX / "container_usage.csv").read_text().splitlines()]
    mine = [r for r in rows if r[0] == "c_10021" and 39600 <= int(r[2]) < 39900]
    assert tr.cpu[0, 0] == pytest.approx(np.mean([float(r[3]) for r in mine]) / 100 * 4.0)
    assert tr.mem[0, 0] == pytest.approx(max(float(r[4]) for r in mine) / 100 * tr.mem_request[0])


def test_alibaba_without_meta_uses_defaults(tmp_path):
    tr = load_container_usage(FIX / "container_usage.csv", default_cpu_cores=2.0)
    assert (tr.cpu_request == 2.0).all() and len(USAGE_COLUMNS) == 11


@pytest.mark.parametrize("mutate, message", [
    (lambda r: r[:9], "missing columns"),
    (lambda r: r[:3] + ["-5"] + r[4:], "negative usage"),
    (lambda r: r[:4] + ["abc"] + r[5:], "not a number"),
    # an infinite time stamp crashed the step grid's int cast (a traceback, exit 1)
    (lambda r: r[:2] + ["inf"] + r[3:], "row 6: time_stamp is not finite: 'inf'"),
    (lambda r: r[:3] + ["-Infinity"] + r[4:], "row 6: cpu_util_percent is not finite"),
])
def test_alibaba_bad_input(tmp_path, mutate, message):
    lines = (FIX / "container_usage.csv").read_text().splitlines()
    bad = [",".join(mutate(ln.split(","))) if i == 5 or message == "missing columns" else ln
           for i, ln in enumerate(lines)]
    p = tmp_path / "usage.csv"
    p.write_text("\n".join(bad) + "\n")
    with pytest.raises(InputError, match=message) as e:
        load_container_usage(p)
    assert "\n" not in str(e.value)


def test_alibaba_header_with_missing_column(tmp_path):
    p = tmp_path / "u.csv"
    p.write_text("container_id,machine_id,time_stamp,cpu_util_percent\nc_1,m_1,0,5\n")
    with pytest.raises(InputError, match="missing columns: mem_util_percent"):
        load_container_usage(p)


def test_shaped_generator_total_follows_the_series():
    t = 2 * 288
    series = 50 + 20 * np.sin(np.arange(t + 10) / 37.0) + np.arange(t + 10) * 0.05
    tr = generate(30, 2, seed=1, cpu_shape=series, mem_shape=series[::-1].copy())
    tot = tr.cpu.sum(axis=1)
    assert np.allclose(tot / tot.mean(), series[:t] / series[:t].mean())
    mt = tr.mem.sum(axis=1)
    assert np.allclose(mt / mt.mean(), series[::-1][:t] / series[::-1][:t].mean())
    with pytest.raises(InputError, match="shape needs"):
        generate(3, 2, cpu_shape=series[:100])


def test_shaped_by_real_cluster_series():
    from adares.replay import load_trace
    from adares.shaping import real_series

    for src in ("alibaba2018", "google2019", "azure_v2"):
        tr = load_trace(f"shaped:{src},vms=10,days=2")
        cpu, _ = real_series(src)
        s = cpu[: tr.n_steps]
        assert np.allclose(tr.cpu.sum(axis=1) / tr.cpu.sum(axis=1).mean(), s / s.mean())
    assert load_trace("shaped:alibaba2018,vms=2").n_steps == 2243  # the series' 7.8 days
    with pytest.raises(InputError, match="unknown real series"):
        load_trace("shaped:nope")


def test_google2019_instance_usage_fixture():
    import pandas as pd
    import pyarrow.parquet as pq

    from adares.google2019 import load_instance_usage

    path = FIX / "google2019_instance_usage.parquet"
    names = pq.read_schema(path).names
    assert names[:4] == ["start_time", "end_time", "collection_id", "instance_index"]
    assert "tail_cpu_usage_distribution" in names and len(names) == 18
    tr = load_instance_usage(path, machine_cpus=32.0, machine_mem_gib=128.0)
    assert tr.vm_ids == ("375289393412/0", "375289393412/1", "382704155632/17")
    assert tr.n_steps == 24
    raw = pd.read_parquet(path)
    first = raw[(raw.collection_id == 375289393412) & (raw.instance_index == 1)].iloc[0]
    assert tr.cpu[0, 1] == pytest.approx(first.average_usage["cpus"] * 32.0)
    assert tr.mem[0, 1] == pytest.approx(first.maximum_usage["memory"] * 128.0 * GIB)
    assert tr.mem_request[1] == pytest.approx(first.assigned_memory * 128.0 * GIB)


def test_google2019_bad_input(tmp_path):
    import pandas as pd

    from adares.google2019 import load_instance_usage

    raw = pd.read_parquet(FIX / "google2019_instance_usage.parquet")
    raw.drop(columns=["assigned_memory"]).to_parquet(tmp_path / "a.parquet")
    with pytest.raises(InputError, match="missing columns: assigned_memory"):
        load_instance_usage(tmp_path / "a.parquet")
    neg = raw.copy()
    neg.loc[3, "assigned_memory"] = -1.0
    neg.to_parquet(tmp_path / "b.parquet")
    with pytest.raises(InputError, match="negative usage"):
        load_instance_usage(tmp_path / "b.parquet")
    (tmp_path / "c.parquet").write_text("nope")
    with pytest.raises(InputError, match="not a readable Parquet file .*footer"):
        load_instance_usage(tmp_path / "c.parquet")
    (tmp_path / "d.parquet").write_text("")
    with pytest.raises(InputError, match="size is 0 bytes"):
        load_instance_usage(tmp_path / "d.parquet")
