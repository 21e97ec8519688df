"""The HTML report: table, sample VMs' allocations, regret curve, frontier; written atomically."""

import os

import numpy as np
from typer.testing import CliRunner

from adares.cli import app
from adares.report import sample_vms
from adares.simulator import simulate
from adares.policies.baselines import Static
from adares.synthetic import generate

runner = CliRunner()


def test_report_written(tmp_path):
    out = tmp_path / "r.html"
    res = runner.invoke(app, ["replay", "--trace", "synthetic:vms=6,days=1", "--policies",
                              "clairvoyant,static,threshold,vpa", "--report", str(out)])
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert text.count("data:image/png;base64,") == 3 + 2  # 3 sample VMs, regret, frontier
    assert "<td>vpa</td>" in text and "Regret" in text
    assert oct(os.stat(out).st_mode & 0o777) != "0o600"
    assert not list(tmp_path.glob(".*.tmp"))
    assert "refused resizes" not in text
    res = runner.invoke(app, ["replay", "--trace", "synthetic:vms=6,days=1", "--policies",
                              "static,threshold", "--cluster", "nodes=2,cpu=8,mem=32",
                              "--report", str(out)])
    assert res.exit_code == 0, res.output
    assert "refused resizes" in out.read_text()


def test_recorded_allocations_and_step_costs():
    tr = generate(5, 1, seed=3)
    vms = sample_vms(tr, 2)
    r = simulate(tr, Static(), record_vms=vms)
    assert r.alloc_cpu.shape == (tr.n_steps, 2)
    assert np.all(r.alloc_cpu == tr.cpu_request[list(vms)])
    assert np.isclose(r.step_cost.sum(), r.cost)
