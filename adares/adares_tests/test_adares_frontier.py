"""Margins and equal-violation bisection against closed forms (static policy, ramp demand)."""

import numpy as np
import pytest
from scipy.optimize import brentq

from adares.frontier import (EqualViolation, Margined, Point, equal_violation, frontier_png,
                             pareto, savings_at_equal_violation, sweep)
from adares.policies.baselines import Static
from adares.simulator import simulate
from adares.trace import GIB, Trace

T = 100


def _ramp():
    # One VM, 100 one-hour steps: demand 0.02, 0.04, ..., 2.0 cores and GiB; request 1 / 1 GiB.
    d = 0.02 * np.arange(1, T + 1)
    return Trace(d[:, None], d[:, None] * GIB, np.array([1.0]), np.array([GIB]), ("v",),
                 3600, 0.0).validate(), d


def test_margin_scales_allocations():
    tr, d = _ramp()
    r = simulate(tr, Margined(Static(), 0.5, -0.25))
    assert r.vcpu_hours == pytest.approx(1.5 * T) and r.gb_hours == pytest.approx(0.75 * T)
    assert r.oom_events == int((d > 0.75).sum())
    assert r.cpu_throttled_share == pytest.approx(np.maximum(d - 1.5, 0).sum() / d.sum())
    with pytest.raises(ValueError):
        Margined(Static(), -1.0, 0.0)


def test_bisection_finds_the_closed_form_margins():
    tr, d = _ramp()
    target_cpu = 0.05
    # Throttled share of a static allocation 1 + m: sum(max(d - 1 - m, 0)) / sum(d), continuous
    # and decreasing: its root is the exact margin.
    m_cpu = brentq(lambda m: np.maximum(d - 1 - m, 0).sum() / d.sum() - target_cpu, -0.5, 1.5)
    # OOM kills per VM-day: 24 / 100 per kill; at most 10 kills (2.4 / VM-day) needs
    # 1 + m >= 1.8 (the 90th step's demand): exactly m = 0.8.
    lo, hi, iters = -0.5, 1.5, 10
    ev = equal_violation(tr, Static, target_cpu, 2.4, lo, hi, iters)
    width = (hi - lo) / 2**iters
    assert m_cpu <= ev.at.cpu_margin <= m_cpu + width + 1e-12
    assert 0.8 <= ev.at.mem_margin <= 0.8 + width + 1e-12
    assert ev.reached_cpu and ev.reached_mem and ev.policy == "static"
    assert ev.at.oom_events == 10 and ev.at.cpu_throttled_share <= target_cpu
    assert ev.at.vcpu_hours == pytest.approx(T * (1 + ev.at.cpu_margin))
    assert len(ev.points) == iters + 1
    # A target no margin in range reaches: flagged, reported at the upper end.
    ev = equal_violation(tr, Static, 0.0, 0.0, lo, 0.5, 3)
    assert not ev.reached_cpu and not ev.reached_mem and ev.at.cpu_margin == 0.5


def test_sweep_and_savings():
    tr, _ = _ramp()
    pts = sweep(tr, Static, [0.0, 0.5])
    assert [p.vcpu_hours for p in pts] == pytest.approx([T, 1.5 * T])

    def ev(name, c, g):
        p = Point(0, 0, c, g, 0.0, 0.0, 0, 0.0)
        return EqualViolation(name, p, True, True, [p])

    s = savings_at_equal_violation({"adares": ev("adares", 60, 30), "vpa": ev("vpa", 80, 40),
                                    "threshold": ev("threshold", 100, 100)})
    assert s["adares"]["vs_vpa"] == pytest.approx({"vcpu_hours": 0.25, "gb_hours": 0.25})
    assert s["adares"]["vs_threshold"] == pytest.approx({"vcpu_hours": 0.4, "gb_hours": 0.7})
    assert "vs_adares" not in s["vpa"] and "vs_vpa" not in s["vpa"]
    png = frontier_png({"adares": ev("adares", 60, 30)}, 0.01, 0.01, {"adares": pts})
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def _cli(args):
    import json

    from typer.testing import CliRunner

    from adares.cli import app

    res = CliRunner().invoke(app, args)
    return res, (json.loads(res.stdout) if res.exit_code == 0 and "--json" in args else None)


def test_cli_replay_margin_scales_static_exactly():
    tr = ["--trace", "synthetic:vms=5,days=0.5,seed=3", "--policies", "static,clairvoyant", "--json"]
    _, plain = _cli(["replay", *tr])
    _, more = _cli(["replay", *tr, "--margin", "0.5,0.25"])
    a, b = plain["policies"], more["policies"]
    assert b["static"]["vcpu_hours"] == pytest.approx(1.5 * a["static"]["vcpu_hours"])
    assert b["static"]["gb_hours"] == pytest.approx(1.25 * a["static"]["gb_hours"])
    assert b["clairvoyant"] == a["clairvoyant"] | {"seconds": b["clairvoyant"]["seconds"]}


def test_cli_compare_json():
    res, doc = _cli(["compare", "--trace", "synthetic:vms=6,days=1,seed=2", "--policies",
                     "threshold,vpa", "--iters", "2", "--sweep-margin", "0.1", "--json"])
    assert res.exit_code == 0, res.output
    pol = doc["policies"]
    assert set(pol) == {"threshold", "vpa"}
    for p in pol.values():
        assert len(p["points"]) in (3 + 1, 2 + 1)  # iters + final (may repeat one) + sweep
        assert p["reached_cpu"] == (p["cpu_throttled_share"] <= 0.01)
        assert {"cpu_margin", "mem_margin", "vcpu_hours", "gb_hours", "oom_per_vm_day"} <= set(p)
    s = doc["savings"]["vpa"]["vs_threshold"]
    assert s["vcpu_hours"] == pytest.approx(1 - pol["vpa"]["vcpu_hours"] / pol["threshold"]["vcpu_hours"])


@pytest.mark.parametrize("args, needle", [
    (["replay", "--margin", "-1"], "--margin"),
    (["replay", "--margin", "a,b"], "--margin"),
    (["compare", "--policies", "clairvoyant"], "clairvoyant"),
    (["compare", "--range", "1,0"], "--range"),
    (["compare", "--target-throttle", "nan"], "--target-throttle"),
    (["compare", "--sweep-margin", "x"], "--sweep-margin"),
])
def test_cli_margin_bad_input(args, needle):
    res, _ = _cli(args)
    assert res.exit_code == 2 and needle in res.stderr
    assert res.stderr.startswith("adares: error:") and len(res.stderr.strip().splitlines()) == 1


def test_pareto_by_brute_force():
    rng = np.random.default_rng(4)
    for _ in range(20):
        xs, ys = rng.integers(0, 6, 12).tolist(), rng.integers(0, 6, 12).tolist()
        keep = sorted({(x, y) for x, y in zip(xs, ys)
                       if not any(a <= x and b <= y and (a, b) != (x, y) for a, b in zip(xs, ys))})
        assert list(zip(*pareto(xs, ys))) == keep
