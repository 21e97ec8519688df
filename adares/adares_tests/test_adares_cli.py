"""The command line: replay --json on a small trace, and one-line errors with exit 2."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from adares.cli import app

FIX = Path(__file__).parent / "fixtures"
runner = CliRunner()


def test_replay_json_small_synthetic():
    res = runner.invoke(app, ["replay", "--trace", "synthetic:vms=8,days=1.5,seed=2",
                              "--policies", "clairvoyant,static,threshold,predictive,vpa", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    pol = doc["policies"]
    assert set(pol) == {"clairvoyant", "static", "threshold", "predictive", "vpa"}
    for r in pol.values():
        assert {"vcpu_hours", "gb_hours", "cpu_throttled_share", "oom_events", "resizes", "reward"} <= set(r)
    assert all(r["reward"] <= pol["clairvoyant"]["reward"] for r in pol.values())
    s = doc["savings"]["vpa"]["vs_threshold"]
    assert s["vcpu_hours"] == pytest.approx(1 - pol["vpa"]["vcpu_hours"] / pol["threshold"]["vcpu_hours"])
    assert "vs_predictive" in doc["savings"]["threshold"] and "vs_threshold" not in doc["savings"]["threshold"]


def test_replay_alibaba_fixture_table():
    spec = f"alibaba:{FIX / 'container_usage.csv'},meta={FIX / 'container_meta.csv'}"
    res = runner.invoke(app, ["replay", "--trace", spec, "--policies", "static,threshold"])
    assert res.exit_code == 0, res.output
    assert "threshold" in res.stdout


@pytest.mark.parametrize("args, needle", [
    (["--policies", "static,nope"], "unknown policy 'nope'"),
    (["--trace", "synthetic:vms=x"], "vms and seed must be integers"),
    (["--trace", "weird:1"], "unknown kind"),
    (["--trace", "alibaba:/nonexistent.csv"], "no such file"),
    (["--trace", "synthetic:vms=2,days=nan"], "days must be a finite number"),
    (["--trace", "synthetic:vms=2,days=inf"], "days must be a finite number"),
    (["--trace", "synthetic:vms=2,days=1,seed=-1"], "seed must be >= 0"),
])
def test_bad_input_one_line_exit_2(args, needle):
    res = runner.invoke(app, ["replay", *args])
    assert res.exit_code == 2
    err = res.stderr.strip()
    assert needle in err and "\n" not in err and "Traceback" not in err


def test_missing_columns_exit_2(tmp_path):
    p = tmp_path / "usage.csv"
    p.write_text("c_1,m_1,0,5,40,,,,,\n")
    res = runner.invoke(app, ["replay", "--trace", f"alibaba:{p}", "--policies", "static"])
    assert res.exit_code == 2 and "missing columns" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("line, needle", [
    ("c_1,m_1,0,-5,40,,,,,,\nc_1,m_1,600,5,40,,,,,,\n", "negative usage"),
])
def test_bad_alibaba_files_exit_2_in_a_real_process(tmp_path, line, needle):
    p = tmp_path / "usage.csv"
    p.write_text(line)
    proc = subprocess.run([sys.executable, "-m", "adares.cli", "replay", "--trace", f"alibaba:{p}",
                           "--policies", "static"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert needle in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
