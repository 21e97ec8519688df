"""The command line: replay --json on a small trace, and one-line errors with exit 2."""

import json
import signal
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
    (["--trace", "synthetic:vms=2,days=1,vms=3"], "vms given twice"),
    (["--trace", "synthetic:vms=2,=3"], "expected key=value, got '=3'"),
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


SMALL = ["--trace", "synthetic:vms=2,days=1", "--policies", "static"]


@pytest.mark.parametrize("cmd, needle", [
    (["replay", *SMALL, "--report", "{tmp}"], "--report {tmp}: is a folder"),
    (["replay", "--trace", "synthetic:vms=2,days=1", "--policies", "adares", "--save-log", "{tmp}"],
     "--save-log {tmp}: is a folder"),
    (["replay", *SMALL, "--report", "/proc/adares-report.html"], "cannot write"),
    (["replay", *SMALL[:2], "--policies", "adares", "--seed", "-1"], "--seed must be >= 0"),
    (["recommend", "--trace", "synthetic:vms=2,days=1", "--plan", "{tmp}"], "--plan {tmp}: is a folder"),
    (["recommend", "--trace", "synthetic:vms=2,days=1", "--yaml", "/proc/adares.yaml"], "cannot write"),
    (["recommend", "--trace", "synthetic:vms=2,days=1", "--seed", "-3"], "--seed must be >= 0"),
])
def test_unwritable_outputs_and_bad_seed_exit_2(tmp_path, cmd, needle):
    cmd = [c.replace("{tmp}", str(tmp_path)) for c in cmd]
    res = runner.invoke(app, cmd)
    err = res.stderr.strip()
    assert res.exit_code == 2, res.output
    assert needle.replace("{tmp}", str(tmp_path)) in err and "\n" not in err
    assert not list(tmp_path.iterdir())


def test_save_log_of_a_trace_too_short_for_a_decision(tmp_path):
    res = runner.invoke(app, ["replay", "--trace", "synthetic:vms=1,days=0.007", "--policies",
                              "adares", "--save-log", str(tmp_path / "a.npz")])
    assert res.exit_code == 2 and "makes no decision in 2 steps" in res.stderr
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("targets", ["nan", "1,inf", "0", "a"])
def test_evaluate_rejects_bad_targets(tmp_path, targets):
    res = runner.invoke(app, ["evaluate", str(tmp_path / "missing.npz"), "--targets", targets])
    assert res.exit_code == 2 and "--targets" in res.stderr


def test_ctrl_c_is_one_line_and_exit_130(tmp_path):
    # A shell that started this run in the background ignores SIGINT, and its children inherit
    # that: the child gets the default disposition back, as in a terminal.
    proc = subprocess.Popen([sys.executable, "-m", "adares.cli", "replay", "--trace",
                             "synthetic:vms=300,days=8", "--policies", "vpa", "--report",
                             str(tmp_path / "r.html")], stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    # Wait for the trace line, so that the interrupt lands in the replay, not in the imports.
    for line in proc.stderr:
        if "trace synthetic" in line:
            break
    proc.send_signal(signal.SIGINT)
    rest = proc.stderr.read()
    assert proc.wait(timeout=60) == 130
    assert "adares: interrupted" in rest and "Traceback" not in rest
    assert not list(tmp_path.iterdir())


def test_table_says_why_savings_columns_are_empty_and_counts_are_ints():
    res = runner.invoke(app, ["replay", *SMALL])
    assert res.exit_code == 0
    assert "add threshold and predictive to --policies" in " ".join(res.stdout.split())
    doc = json.loads(runner.invoke(app, ["replay", *SMALL, "--json"]).stdout)
    r = doc["policies"]["static"]
    assert all(isinstance(r[k], int) for k in ("oom_events", "first_day_oom_events", "restarts"))


def test_recommend_clairvoyant_is_refused():
    res = runner.invoke(app, ["recommend", "--trace", "synthetic:vms=2,days=1", "--policy", "clairvoyant"])
    assert res.exit_code == 2 and "no recommendation past the trace" in res.stderr


def test_trace_too_large_for_memory_exit_2():
    import resource

    def cap() -> None:  # 2 GiB of address space: the allocation fails at once, safely
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    proc = subprocess.run([sys.executable, "-m", "adares.cli", "replay", "--trace",
                           # under the VM-step cap (refused before any array), over 2 GiB
                           "synthetic:vms=1000000,days=1", "--policies", "static"],
                          capture_output=True, text=True, timeout=120, preexec_fn=cap)
    assert proc.returncode == 2, proc.stderr[-500:]
    assert "not enough memory" in proc.stderr and "Traceback" not in proc.stderr


def test_ctrl_c_while_the_command_line_loads(monkeypatch, capsys):
    # The console script's guard: an interrupt raised by the import of adares.cli (typer, rich,
    # numpy load for about a second) ends in one line and 130, not a traceback.
    import builtins

    from adares.entry import main

    real_import = builtins.__import__

    def interrupted_import(name, *args, **kwargs):
        if name == "adares.cli":
            raise KeyboardInterrupt
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", interrupted_import)
    with pytest.raises(SystemExit) as exc:
        main()
    assert exc.value.code == 130
    assert capsys.readouterr().err == "adares: interrupted\n"
