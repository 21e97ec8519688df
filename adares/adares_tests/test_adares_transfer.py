"""Transfer: decision logs round-trip through .npz, a warm start learns the logged best action,
and the CLI saves and reads logs (bad logs: one line, exit 2)."""

import os

import numpy as np
import pytest
from typer.testing import CliRunner

from adares.cli import app
from adares.errors import InputError
from adares.learner import CBLearner
from adares.policies.bandit import CONTEXT_DIM, MULTIPLIERS, Adares, DecisionLog, load_log, save_log
from adares.simulator import TraceInfo

runner = CliRunner()
K = len(MULTIPLIERS)


def _log(n=600, best=3, seed=0):
    rng = np.random.default_rng(seed)
    log = DecisionLog()
    for i in range(n):
        a = int(rng.integers(0, K))
        log.resource.append("cpu" if i % 2 else "mem")
        log.context.append(rng.normal(size=CONTEXT_DIM))
        log.allowed.append(np.ones(K, dtype=bool))
        log.action.append(a)
        log.prob.append(1.0 / K)
        log.cost.append(0.0 if a == best else 1.0)
    return log


def test_log_roundtrip(tmp_path):
    log = _log(50)
    save_log(log, tmp_path / "l.npz")
    back = load_log(tmp_path / "l.npz")
    assert back.action == log.action and back.resource == log.resource
    assert np.array_equal(np.vstack(back.context), np.vstack(log.context))
    assert not list(tmp_path.glob(".*.tmp"))
    umask = os.umask(0)
    os.umask(umask)
    # mkstemp's 0600 must not leak into the log: it gets the mode of any file the user writes.
    assert (tmp_path / "l.npz").stat().st_mode & 0o777 == 0o666 & ~umask


def test_bad_logs(tmp_path):
    (tmp_path / "x.npz").write_bytes(b"not a zip")
    with pytest.raises(InputError, match="not a decision log"):
        load_log(tmp_path / "x.npz")
    with pytest.raises(InputError, match="no such file"):
        load_log(tmp_path / "none.npz")
    log = _log(10)
    log.prob[0] = 0.0
    save_log(log, tmp_path / "p.npz")
    with pytest.raises(InputError, match="invalid probabilities"):
        load_log(tmp_path / "p.npz")


def _rewritten(path, **arrays):
    with np.load(path, allow_pickle=False) as z:
        data = {k: z[k] for k in z.files}
    np.savez(path, **(data | arrays))


@pytest.mark.parametrize("arrays, needle", [
    ({"action": np.zeros(10, np.float64)}, "wrong type"),      # was an IndexError traceback
    ({"context": np.full((10, CONTEXT_DIM), "a")}, "wrong type"),  # was a TypeError traceback
    ({"prob": np.full(10, np.nan)}, "invalid probabilities")])  # was accepted: nan tables
def test_a_log_of_wrong_types_or_nan_propensities_is_refused(tmp_path, arrays, needle):
    save_log(_log(10), tmp_path / "l.npz")
    _rewritten(tmp_path / "l.npz", **arrays)
    with pytest.raises(InputError, match=needle):
        load_log(tmp_path / "l.npz")
    res = runner.invoke(app, ["evaluate", str(tmp_path / "l.npz")])
    assert res.exit_code == 2 and needle in res.stderr, res.output


def _corrupt(log, how):
    if how == "width":
        log.context = [c[:3] for c in log.context]
    elif how == "nan":
        log.context[4] = np.full(CONTEXT_DIM, np.nan)
    else:
        log.allowed[2] = np.zeros(K, dtype=bool)
    return log


@pytest.mark.parametrize("how, needle", [("width", "3 features, the bandit uses 18"),
                                         ("nan", "non-finite contexts"),
                                         ("allowed", "outside their allowed set")])
def test_corrupt_logs_are_refused_by_replay_and_evaluate(tmp_path, how, needle):
    # These used to crash the warm start (width), or the evaluation (NaN), or pass silently.
    save_log(_corrupt(_log(10), how), tmp_path / "c.npz")
    for cmd in (["replay", "--trace", "synthetic:vms=2,days=1", "--policies", "adares",
                 "--transfer-from", str(tmp_path / "c.npz")], ["evaluate", str(tmp_path / "c.npz")]):
        if how == "width" and cmd[0] == "evaluate":
            continue  # off-policy evaluation takes contexts of any width
        res = runner.invoke(app, cmd)
        assert res.exit_code == 2 and needle in res.stderr, res.output


def test_warm_start_learns_the_logged_best_action():
    pol = Adares(warm_start=_log(), seed=0)
    pol.reset(TraceInfo(1, 10, 300, 0.0, np.ones(1), np.ones(1) * 2**30))
    cold = CBLearner(K, np.log(MULTIPLIERS)[:, None], seed=0)
    ctx = np.random.default_rng(5).normal(size=(50, CONTEXT_DIM))
    for r in ("cpu", "mem"):
        cb = pol._cb[r]
        assert (cb.greedy(cb.shared_lines(ctx)) == 3).all()
    assert not (cold.greedy(cold.shared_lines(ctx)) == 3).all()


def test_cli_save_then_transfer(tmp_path):
    path = tmp_path / "src.npz"
    res = runner.invoke(app, ["replay", "--trace", "synthetic:vms=6,days=1.5,seed=1", "--policies",
                              "adares", "--save-log", str(path), "--json"])
    assert res.exit_code == 0, res.output
    assert len(load_log(path).action) == 2 * 6 * (36 - 1)  # 36 hourly decisions, the last uncosted
    res = runner.invoke(app, ["replay", "--trace", "synthetic:vms=6,days=1,seed=2", "--policies",
                              "adares", "--transfer-from", str(path), "--json"])
    assert res.exit_code == 0, res.output
    assert "first_day_reward" in res.stdout
    (tmp_path / "bad.npz").write_text("x")
    for args in (["--policies", "static", "--save-log", str(tmp_path / "a.npz")],
                 ["--policies", "adares", "--transfer-from", str(tmp_path / "bad.npz")]):
        res = runner.invoke(app, ["replay", "--trace", "synthetic:vms=2,days=1", *args])
        assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1


def test_a_log_of_another_floor_action_is_refused_in_one_line(tmp_path):
    runner = CliRunner()
    path = tmp_path / "f0.npz"
    res = runner.invoke(app, ["replay", "--trace", "synthetic:vms=4,days=1,seed=2", "--policies",
                              "adares", "--knob", "adares.floor_action=0", "--save-log",
                              str(path), "--quiet"])
    assert res.exit_code == 0, res.output
    lg = load_log(path)
    assert lg.floor_action is False and len(lg.multipliers) == len(lg.allowed[0])
    res = runner.invoke(app, ["replay", "--trace", "synthetic:vms=4,days=1,seed=2", "--policies",
                              "adares", "--transfer-from", str(path), "--quiet"])
    assert res.exit_code == 2
    assert res.output.strip().count("\n") == 0 and "floor_action=0" in res.output


def test_bad_log_messages_name_the_problem(tmp_path):
    (tmp_path / "x.npz").write_bytes(b"not a zip")
    with pytest.raises(InputError) as info:
        load_log(tmp_path / "x.npz")
    assert str(info.value) == f"{tmp_path / 'x.npz'}: not a decision log (not a .npz archive of arrays)"
    np.savez(tmp_path / "y.npz", resource=np.zeros(3), context=np.zeros((3, 2)))
    with pytest.raises(InputError) as info:
        load_log(tmp_path / "y.npz")
    assert str(info.value) == (f"{tmp_path / 'y.npz'}: not a decision log "
                               "(no array allowed, action, prob, cost)")
