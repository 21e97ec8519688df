"""adares evaluate: off-policy costs of fixed-size policies from a decision log with known costs."""

import json

import numpy as np
from typer.testing import CliRunner

from adares.cli import app
from adares.ope import fixed_policy
from adares.policies.bandit import MULTIPLIERS, DecisionLog, save_log

runner = CliRunner()
K = len(MULTIPLIERS)


def test_fixed_policy_picks_smallest_allowed_at_least_m():
    allowed = np.array([[True] * K, [False, False, True] + [True] * (K - 3), [True] + [False] * (K - 1)])
    t = fixed_policy(allowed, np.asarray(MULTIPLIERS), 1.0)
    assert t.argmax(axis=1).tolist() == [MULTIPLIERS.index(1.0), 2, 0]
    assert (t.sum(axis=1) == 1).all()


def _uniform_log(n: int, seed: int, noise: float, width: int, recorded: bool = False) -> DecisionLog:
    """n cpu decisions, each size drawn uniformly (p = 1/K), cost = the multiplier + noise."""
    rng = np.random.default_rng(seed)
    log = DecisionLog(multipliers=MULTIPLIERS, floor_action=False) if recorded else DecisionLog()
    for _ in range(n):
        a = int(rng.integers(0, K))
        log.resource.append("cpu")
        log.context.append(rng.normal(size=width))
        log.allowed.append(np.ones(K, dtype=bool))
        log.action.append(a)
        log.prob.append(1.0 / K)
        log.cost.append(float(MULTIPLIERS[a]) + rng.normal() * noise)
    return log


def test_evaluate_recovers_known_costs(tmp_path):
    save_log(_uniform_log(4000, seed=0, noise=0.1, width=4), tmp_path / "l.npz")
    res = runner.invoke(app, ["evaluate", str(tmp_path / "l.npz"), "--targets", "1.25,2", "--json"])
    assert res.exit_code == 0, res.output
    cpu = json.loads(res.stdout)["cpu"]
    for m in (1.25, 2.0):
        row = cpu[f"x{m:g}"]
        for est in ("ips", "snips", "dr"):
            assert row[f"{est}_low"] <= m <= row[f"{est}_high"], (m, est, row)
    bad = runner.invoke(app, ["evaluate", str(tmp_path / "l.npz"), "--targets", "a,b"])
    assert bad.exit_code == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_evaluate_reads_a_log_with_its_own_recorded_action_set(tmp_path):
    # A log that records its sizes (x1, x3) is read with them; the count check against this
    # version's sizes came first and refused it ("2 actions, this version has 8").
    log = DecisionLog(multipliers=(1.0, 3.0), floor_action=False)
    for i in range(40):
        log.resource.append("cpu")
        log.context.append(np.array([float(i % 7), 1.0]))
        log.allowed.append(np.ones(2, dtype=bool))
        log.action.append(i % 2)
        log.prob.append(0.5)
        log.cost.append((1.0, 3.0)[i % 2])  # cost = the size, exactly
    save_log(log, tmp_path / "own.npz")
    res = runner.invoke(app, ["evaluate", str(tmp_path / "own.npz"), "--targets", "1,3", "--json"])
    assert res.exit_code == 0, res.output
    cpu = json.loads(res.stdout)["cpu"]
    # IPS: 20 of 40 decisions took each size with p = 1/2, so each size's mean cost comes back exactly
    assert cpu["x1"]["ips"] == 1.0 and cpu["x3"]["ips"] == 3.0
    assert cpu["x1"]["snips"] == 1.0 and cpu["x3"]["snips"] == 3.0
    unrecorded = DecisionLog(resource=log.resource, context=log.context, allowed=log.allowed, action=log.action,
                             prob=log.prob, cost=log.cost)
    save_log(unrecorded, tmp_path / "bare.npz")
    bad = runner.invoke(app, ["evaluate", str(tmp_path / "bare.npz")])
    assert bad.exit_code == 2
    assert bad.stderr.strip() == f"adares: error: {tmp_path / 'bare.npz'}: 2 actions, this version has {K}"


def test_evaluate_seed_is_the_doubly_robust_folds_seed_and_quiet_drops_its_lines(tmp_path):
    from adares.ope import evaluate_log

    log = _uniform_log(600, seed=1, noise=1.0, width=3, recorded=True)
    save_log(log, tmp_path / "l.npz")
    got = {}
    for seed in ("0", "7"):
        res = runner.invoke(app, ["evaluate", str(tmp_path / "l.npz"), "--targets", "1.5", "--seed", seed, "--json"])
        assert res.exit_code == 0, res.output
        got[seed] = json.loads(res.stdout)["cpu"]["x1.5"]
        # stderr: one line per step, e.g. "[12:00:00] decision log ...: 600 decisions (cpu 600, mem 0), 8 sizes"
        assert f"decision log {tmp_path / 'l.npz'}: 600 decisions (cpu 600, mem 0), 8 sizes" in res.stderr
    # the seed is the cross-fitting folds' (what evaluate_log computes with it), not ignored
    want = evaluate_log(log, np.asarray(MULTIPLIERS), [1.5], seed=7)["cpu"]["x1.5"]
    assert got["7"]["dr"] == want["dr"] and got["0"]["dr"] != got["7"]["dr"]
    assert got["0"]["ips"] == got["7"]["ips"]  # IPS fits no model: no seed in it
    quiet = runner.invoke(app, ["evaluate", str(tmp_path / "l.npz"), "--targets", "1.5", "--quiet", "--json"])
    assert quiet.exit_code == 0 and quiet.stderr == ""
    assert json.loads(quiet.stdout)["cpu"]["x1.5"] == got["0"]
    bad = runner.invoke(app, ["evaluate", str(tmp_path / "l.npz"), "--seed", "-1"])
    assert bad.exit_code == 2 and bad.stderr == "adares: error: --seed must be >= 0, got -1\n"
