"""Azure Public Dataset vm_cpu_readings / vmtable loader on fixtures with the exact schemas,
checked against a plain csv-module reading of the same files."""

import csv
import gzip
import shutil

import numpy as np
import pytest

from adares.azure import load_vm_cpu_readings
from adares.errors import InputError
from adares.replay import load_trace
from adares.trace import GIB

from .test_adares_cli import FIX

READ = FIX / "azure_vm_cpu_readings.csv"
VMT = FIX / "azure_vmtable.csv"


def _oracle(column=4, cores=None):
    rows = list(csv.reader(READ.open()))
    ids = sorted({r[1] for r in rows})
    steps = max(int(r[0]) for r in rows) // 300 + 1
    grid = np.full((steps, len(ids)), np.nan)
    for r in rows:
        grid[int(r[0]) // 300, ids.index(r[1])] = float(r[column])
    for j in range(len(ids)):  # previous reading; before the first, the first
        col = grid[:, j]
        first = col[~np.isnan(col)][0]
        last = first
        for t in range(steps):
            if np.isnan(col[t]):
                col[t] = last
            last = col[t]
    cores = cores or {}
    c = np.array([cores.get(v, 4.0) for v in ids])
    return ids, grid / 100 * c, c


def test_readings_with_vmtable_match_the_oracle():
    tr = load_vm_cpu_readings(READ, VMT)
    rows = list(csv.reader(VMT.open()))
    # Buckets: "2" cores / "4" GB; ">24" / ">64" read as 1.5 x the bound; the third VM is not in
    # the table: 4 cores / 8 GiB.
    cores = {rows[0][0]: 2.0, rows[1][0]: 36.0}
    ids, cpu, c = _oracle(cores=cores)
    assert list(tr.vm_ids) == ids and tr.n_steps == 13 and tr.step_s == 300
    np.testing.assert_allclose(tr.cpu, cpu, rtol=1e-12)
    np.testing.assert_array_equal(tr.cpu_request, c)
    mem = {rows[0][0]: 4.0, rows[1][0]: 96.0}
    np.testing.assert_array_equal(tr.mem_request, [mem.get(v, 8.0) * GIB for v in ids])
    assert (tr.mem == tr.mem_request).all()  # no memory readings: held at the bucket


def test_maxcpu_column_gz_and_spec(tmp_path):
    gz = tmp_path / "vm_cpu_readings-file-1-of-195.csv.gz"
    with READ.open("rb") as f, gzip.open(gz, "wb") as g:
        shutil.copyfileobj(f, g)
    tr = load_trace(f"azure:{gz},cpu=maxcpu")
    ids, cpu, _ = _oracle(column=3)
    np.testing.assert_allclose(tr.cpu, cpu, rtol=1e-12)


@pytest.mark.parametrize("rows, needle", [
    ("0,a,1,2\n300,a,1,2\n", "missing columns"),
    ("0,a,1,2,-3\n300,a,1,2,4\n", "negative usage"),
    ("0,a,1,2,300\n300,a,1,2,4\n", "above 100%"),
    ("0,a,1,2,x\n300,a,1,2,4\n", "not a number"),
    ("0,a,1,2,3\ninf,a,1,2,4\n", "row 2: timestamp is not finite: 'inf'"),
    ("0,a,1,2,3\n", "less than 2 steps"),
])
def test_bad_readings(tmp_path, rows, needle):
    p = tmp_path / "r.csv"
    p.write_text(rows)
    with pytest.raises(InputError, match=needle):
        load_vm_cpu_readings(p)


def test_bad_vmtable_and_spec(tmp_path):
    p = tmp_path / "vt.csv"
    p.write_text(VMT.read_text().replace(",2,4\n", ",two,4\n"))
    with pytest.raises(InputError, match="not a bucket"):
        load_vm_cpu_readings(READ, p)
    with pytest.raises(InputError, match="unknown keys"):
        load_trace(f"azure:{READ},meta=x")
    with pytest.raises(InputError, match="cpu column"):
        load_trace(f"azure:{READ},cpu=p95")


def test_cli_replay_azure():
    import json

    from typer.testing import CliRunner

    from adares.cli import app

    res = CliRunner().invoke(app, ["replay", "--trace", f"azure:{READ},vmtable={VMT}",
                                   "--policies", "static,threshold", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["trace"]["vms"] == 3 and doc["trace"]["steps"] == 13
    # Static keeps the requests: 2 + 36 + 4 cores for 13 steps of 5 minutes.
    assert doc["policies"]["static"]["vcpu_hours"] == pytest.approx(42 * 13 / 12)
