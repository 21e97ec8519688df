"""Refusals that can be told before any work come before any work and any output: the refusal
is the only line on stderr, exit 2, nothing loaded (for specs that say their size), replayed or
written. Known answers: the VM count of a synthetic spec, and the bandit's real decision log on
traces one step either side of its first logged decision."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from adares.cli import main
from adares.policies.bandit import (CONTEXT_DIM, MULTIPLIERS, PERIOD_STEPS, DecisionLog,
                                    logs_a_decision, save_log)
from adares.replay import load_trace, planned_size, replay
from adares.synthetic import generate
from adares.trace import STEP_S

FIX = Path(__file__).parent / "fixtures"
ALIBABA = f"alibaba:{FIX / 'container_usage.csv'},meta={FIX / 'container_meta.csv'}"


def _run(monkeypatch, capsys, *args: str) -> str:
    """stderr of a run expected to be refused with exit 2 and nothing on stdout."""
    monkeypatch.setattr("sys.argv", ["adares", *args])
    with pytest.raises(SystemExit) as exc:
        main()
    out = capsys.readouterr()
    assert exc.value.code == 2 and out.out == ""
    return out.err


@pytest.fixture
def no_work(monkeypatch):
    """Loading or replaying a trace fails the test."""
    def never(*args, **kwargs):
        raise AssertionError("work started before the refusal")

    for target in ("adares.replay.load_trace", "adares.fleet.replay_fleet", "adares.recommend.recommend"):
        monkeypatch.setattr(target, never)


def _log(path: Path, n_actions: int) -> Path:
    """A valid decision log of 2 rows offering ``n_actions`` sizes (this version's sizes when
    there are as many, with the default floor_action)."""
    allowed = np.ones(n_actions, dtype=bool)
    sizes = MULTIPLIERS if n_actions == len(MULTIPLIERS) else tuple(range(1, n_actions + 1))
    save_log(DecisionLog(["cpu", "mem"], [np.zeros(CONTEXT_DIM)] * 2, [allowed] * 2, [0, 1],
                         [0.5, 0.5], [1.0, 2.0], tuple(float(x) for x in sizes), True), path)
    return path


def test_planned_size_matches_the_loaded_trace():
    for spec in ("synthetic:vms=3,days=0.5,seed=1", "synthetic:vms=2,days=0.08"):
        tr = load_trace(spec)
        assert planned_size(spec) == (tr.n_vms, tr.n_steps)
    assert planned_size("synthetic") == (500, 8 * 86400 // STEP_S)
    assert planned_size(ALIBABA) == (None, None)


def test_too_many_clusters_refused_before_loading(monkeypatch, capsys, no_work, tmp_path):
    err = _run(monkeypatch, capsys, "replay", "--trace", "synthetic:vms=2,days=1", "--policies",
               "static", "--clusters", "3", "--report", str(tmp_path / "r.html"))
    assert err == "adares: error: --clusters must be in 1..2 (the VMs), got 3\n"
    assert list(tmp_path.iterdir()) == []


def test_too_many_clusters_of_a_file_trace_is_the_only_line(monkeypatch, capsys, tmp_path):
    # A file's VMs are known once it is read: no line (warm start, trace) may come first.
    warm = _log(tmp_path / "warm.npz", len(MULTIPLIERS))
    n_vms = load_trace(ALIBABA).n_vms
    err = _run(monkeypatch, capsys, "replay", "--trace", ALIBABA, "--policies", "adares",
               "--transfer-from", str(warm), "--clusters", str(n_vms + 1))
    assert err == f"adares: error: --clusters must be in 1..{n_vms} (the VMs), got {n_vms + 1}\n"


def test_a_warm_start_log_of_other_actions_refused_before_loading(monkeypatch, capsys, no_work, tmp_path):
    warm = _log(tmp_path / "warm.npz", 3)
    err = _run(monkeypatch, capsys, "replay", "--trace", "synthetic:vms=2,days=1", "--policies",
               "adares", "--transfer-from", str(warm))
    assert err == f"adares: error: --transfer-from {warm}: 3 actions, this version has {len(MULTIPLIERS)}\n"


def test_save_log_of_a_too_short_trace_refused_before_the_replay(monkeypatch, capsys, no_work, tmp_path):
    steps = 2 * PERIOD_STEPS - 1
    err = _run(monkeypatch, capsys, "replay", "--trace", f"synthetic:vms=1,days={steps * STEP_S / 86400}",
               "--policies", "adares", "--save-log", str(tmp_path / "a.npz"))
    assert err == (f"adares: error: --save-log: the bandit makes no decision in {steps} steps "
                   "(too short); nothing written\n")
    assert list(tmp_path.iterdir()) == []


def test_logs_a_decision_agrees_with_the_real_bandit():
    for steps in (2 * PERIOD_STEPS - 1, 2 * PERIOD_STEPS):
        logs: dict[str, DecisionLog] = {}
        replay(generate(2, steps * STEP_S / 86400, seed=0), ["adares"], logs=logs)
        assert bool(logs["adares"].action) == logs_a_decision(steps)
    assert not logs_a_decision(2 * PERIOD_STEPS - 1) and logs_a_decision(2 * PERIOD_STEPS)


def test_recommend_clairvoyant_refused_before_loading(monkeypatch, capsys, no_work):
    err = _run(monkeypatch, capsys, "recommend", "--trace", "synthetic:vms=2,days=1", "--policy", "clairvoyant")
    assert err == ("adares: error: clairvoyant knows each step's demand and has no recommendation "
                   "past the trace; pick another --policy\n")
