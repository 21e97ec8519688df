"""compare's jobs: resizes held equal (the resize cap bisected to a common count), the shared
``--backend local|ray`` and ``--jobs`` vocabulary, and the bandit's exploration and floor."""

import json
import re
import sys

import numpy as np
import pytest
from typer.testing import CliRunner

from adares.backends import map_jobs
from adares.cli import app
from adares.costs import CostModel
from adares.frontier import equal_resizes, equal_violation
from adares.learner import RidgeCB
from adares.policies import PolicyOptions, make_policy
from adares.synthetic import generate

runner = CliRunner()
KW = dict(target_cpu=0.01, target_oom=0.01, lo=-0.5, hi=1.5, iters=2)


@pytest.fixture(scope="module")
def small():
    return generate(6, 1.5, 4)


def test_equal_resizes_reaches_the_count_and_keeps_the_free_result_when_under_it(small):
    def make():
        return make_policy("threshold", small, PolicyOptions())

    free = equal_violation(small, make, **KW)
    # Under the free count the free result is returned as it is, without a cap.
    same, cap = equal_resizes(small, make, free.at.resizes, free=free, **KW)
    assert same is free and cap == float("inf")
    target = free.at.resizes // 4
    caps = []
    ev, cap = equal_resizes(small, make, target, CostModel(), 3, free=free,
                            on_cap=lambda c, r: caps.append((c, r.at.resizes)), **KW)
    assert len(caps) == 3 and cap in [c for c, _ in caps]
    # The largest cap tried whose count is within the target.
    assert ev.at.resizes <= target
    assert cap == max(c for c, n in caps if n <= target)
    # A resize at most once every 1 / cap hours: the count is bounded by VM-hours x cap + VMs.
    hours = small.n_steps * small.step_s / 3600
    assert ev.at.resizes <= 2 * small.n_vms * (hours * cap + 1)
    with pytest.raises(ValueError):
        equal_resizes(small, make, -1, **KW)


def test_compare_equal_resizes_on_the_command_line():
    res = runner.invoke(app, ["compare", "--trace", "synthetic:vms=4,days=1,seed=1", "--policies",
                              "threshold,adares-nolearn", "--iters", "1", "--equal-resizes",
                              "--json", "--quiet"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)["policies"]
    fewest = min(p["resizes"] for p in doc.values())
    assert doc["threshold"]["resize_cap"] is None  # it made the fewest: no cap
    assert doc["adares-nolearn"]["resize_cap"] > 0
    assert doc["adares-nolearn"]["resizes"] <= max(fewest, doc["threshold"]["resizes"])


def test_compare_backend_and_jobs_refusals_one_line(monkeypatch):
    base = ["compare", "--trace", "synthetic:vms=2,days=1", "--policies", "static"]
    for args, needle in ((["--backend", "spark"], "unknown backend 'spark'"),
                         (["--jobs", "-1"], "--jobs must be >= 0"),
                         (["--jobs", "2"], "--jobs sets the CPUs of the Ray instance")):
        res = runner.invoke(app, base + args)
        assert res.exit_code == 2, res.output
        assert res.stderr.startswith(f"adares: error: {needle}") and res.stderr.count("\n") == 1
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    res = runner.invoke(app, base + ["--backend", "ray"])
    assert res.exit_code == 2
    assert res.stderr.strip() == ("adares: error: --backend ray: Ray is not installed "
                                  "(pip install 'adares[ray]')")


def _square(x, y):
    return x * x + y


def test_map_jobs_local_keeps_order_and_reports_each():
    seen = []
    out = map_jobs(_square, [(1, 0), (2, 1), (3, 2)], on_result=lambda i, r: seen.append((i, r)))
    assert out == [1, 5, 11] and seen == [(0, 1), (1, 5), (2, 11)]


def test_map_jobs_on_ray_gives_the_local_results():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        assert map_jobs(_square, [(1, 0), (2, 1), (3, 2)], "ray") == [1, 5, 11]
    finally:
        ray.shutdown()


def test_local_exploration_stays_within_its_span():
    cb = RidgeCB(8, exploration="--epsilon 1.0", seed=3, span=1)
    x = cb.shared_lines(np.zeros((4000, 2)))
    # An untrained model's greedy choice is the first allowed action (all predictions 0).
    allowed = np.ones((4000, 8), dtype=bool)
    allowed[:, :3] = False
    chosen, probs, pmf = cb.choose(x, allowed)
    assert set(np.unique(chosen)) == {3, 4}
    np.testing.assert_allclose(pmf.sum(axis=1), 1.0)
    assert np.all(pmf[:, 5:] == 0) and np.allclose(probs, 0.5)
    wide = RidgeCB(8, exploration="--epsilon 1.0", seed=3)
    assert set(np.unique(wide.choose(x, allowed)[0])) == {3, 4, 5, 6, 7}


def test_the_floor_is_one_of_the_bandit_sizes():
    from adares.policies.bandit import Adares
    from adares.policies.base import TraceInfo

    tr = generate(3, 1.0, 0)
    pol = Adares(epsilon=0.0)
    pol.reset(TraceInfo.of(tr))
    base = np.array([1.0, 1.0, 1.0])
    floor = np.array([1.05, 0.5, 2.2])
    ctx = np.zeros((3, 18))
    size = pol._decide("cpu", ctx, base, floor)
    allowed = pol._pending["cpu"][2]
    # VM 0: 1.0 x base is below the floor and lifted to it; VM 1: every size is above it;
    # VM 2: the floor is above 2.0 x base: 2.0 (lifted) and 2.5 are offered.
    assert allowed[0, 1] and not allowed[0, 0]
    assert allowed[1].all()
    assert allowed[2].tolist() == [False] * 6 + [True, True]
    assert np.all(size >= floor)
    off = Adares(epsilon=0.0, floor_action=False)
    off.reset(pol._info)
    off._decide("cpu", ctx, base, floor)
    assert not off._pending["cpu"][2][0, 1]


def test_compare_table_in_a_file_is_not_cut():
    # off a terminal the table once got 150 columns and cut headers and cells ("-63/-1…")
    res = runner.invoke(app, ["compare", "--trace", "synthetic:vms=4,days=1,seed=1", "--policies",
                              "threshold,vpa,autopilot,resource-central,adares-nolearn",
                              "--iters", "1", "--quiet"])
    assert res.exit_code == 0, res.output
    assert "…" not in res.stdout
    rows = [line.split() for line in res.stdout.splitlines() if "+0.50/" in line or "+1.50/" in line]
    assert [row[0] for row in rows] == ["threshold", "vpa", "autopilot", "resource-central",
                                        "adares-nolearn"]
    assert all(re.fullmatch(r"-|[+-]\d+/[+-]\d+", cell) for row in rows for cell in row[-5:])
