"""Exact accounting: byte counts equal their closed forms, time and dollars follow the WAN model,
and a sovereign data center's raw rows never leave it."""

import numpy as np
import pytest

from geodml.algorithms import ALGORITHMS, Settings, run
from geodml.errors import SovereigntyError
from geodml.network import Network, build_dcs, central_hub
from geodml.partition import partition

S = Settings(lam=1e-3, rounds=3, local_steps=2, batch_size=32, lr=0.1, lbfgs_maxiter=15, tol=1e-6)


def _model_bytes_closed_form(dcs, hub, d, rounds, down=True, hierarchical=True):
    """WAN and intra bytes of `rounds` rounds: hub -> DC (d+1 float64) and DC -> hub (d+2 float64)."""
    down_b = 8 * (d + 1) if down else 0
    up_b = 8 * (d + 2)
    wan = intra = 0
    for dc in dcs:
        W = dc.workers
        if dc.name == hub:
            intra += rounds * (W - 1) * (down_b + up_b)
        elif hierarchical:
            wan += rounds * (down_b + up_b)
            intra += rounds * (W - 1) * (down_b + up_b)
        else:
            wan += rounds * W * (down_b + up_b)
    return wan, intra


@pytest.mark.parametrize("algo", ["lbfgs", "fedavg", "diloco", "oneshot"])
def test_wan_bytes_equal_closed_form(ctr_dcs, wan, algo):
    net = Network(wan, ctr_dcs, "us-west")
    run(algo, net, S)
    d = ctr_dcs[0].X.shape[1]
    expect_wan, expect_intra = _model_bytes_closed_form(ctr_dcs, "us-west", d, net.rounds, down=algo != "oneshot")
    assert net.wan_bytes == expect_wan
    if algo == "lbfgs":  # no local steps: only the reduce/broadcast inside each DC
        assert net.intra_bytes == expect_intra
    assert net.rounds == {"fedavg": 3, "diloco": 3, "oneshot": 1}.get(algo, net.rounds)
    # dollars: each WAN message priced by its sending region
    dollars = sum(wan.egress_usd(t.src, t.dst, t.nbytes) for t in net.ledger if t.inter)
    assert net.dollars == pytest.approx(dollars, rel=1e-12)


def test_flat_aggregation_moves_workers_times_more(ctr_dcs, wan):
    hier, flat = Network(wan, ctr_dcs, "us-west"), Network(wan, ctr_dcs, "us-west", hierarchical=False)
    run("lbfgs", hier, S)
    run("lbfgs", flat, S)
    d = ctr_dcs[0].X.shape[1]
    assert flat.wan_bytes == _model_bytes_closed_form(ctr_dcs, "us-west", d, flat.rounds, hierarchical=False)[0]
    assert flat.wan_bytes == 8 * hier.wan_bytes  # 8 workers per region in the default WAN


def test_centralize_bytes_time_and_dollars(ctr_dcs, wan):
    hub = central_hub(wan, ctr_dcs)
    net = Network(wan, ctr_dcs, hub)
    net.centralize()
    others = [d for d in ctr_dcs if d.name != hub]
    assert net.wan_bytes == sum(d.raw_nbytes for d in others)
    assert net.sim_seconds == pytest.approx(max(wan.transfer_seconds(d.name, hub, d.raw_nbytes) for d in others), rel=1e-12)
    assert net.dollars == pytest.approx(sum(d.raw_nbytes / 1e9 * wan.region(d.name).egress_usd_per_gb for d in others), rel=1e-12)
    # the cheapest hub receives from ap-southeast (the expensive egress) nothing
    assert hub == "ap-southeast"


def test_one_round_time_closed_form(ctr_dcs, wan):
    net = Network(wan, ctr_dcs, "us-west")
    d = ctr_dcs[0].X.shape[1]
    down = np.zeros(d + 1)
    up = {dc.name: np.zeros(d + 2) for dc in ctr_dcs}
    flops = {dc.name: 1e9 * (i + 1) for i, dc in enumerate(ctr_dcs)}
    net.round(down, up, flops)
    expect = 0.0
    for dc in ctr_dcs:
        t = wan.intra_seconds(dc.name, down.nbytes) + wan.intra_seconds(dc.name, up[dc.name].nbytes)
        t += flops[dc.name] / (dc.workers * dc.region.compute_gflops * 1e9)
        if dc.name != "us-west":
            t += wan.transfer_seconds("us-west", dc.name, down.nbytes) + wan.transfer_seconds(dc.name, "us-west", up[dc.name].nbytes)
        expect = max(expect, t)
    assert net.sim_seconds == pytest.approx(expect, rel=1e-12)


def test_sovereign_rows_never_leave_under_any_algorithm(small_ctr, wan):
    X, y = small_ctr
    parts = partition("iid", X, y, 4, seed=0)
    dcs = build_dcs(X, y, parts, wan, sovereign=["eu-west", "us-east"])
    assert central_hub(wan, dcs) is None
    for algo in ALGORITHMS:
        for hub in ("us-east", "us-west"):
            net = Network(wan, dcs, hub)
            if algo == "centralize":
                with pytest.raises(SovereigntyError):
                    run(algo, net, S)
            else:
                run(algo, net, S)
            assert net.raw_bytes_from("eu-west") == 0
            assert net.raw_bytes_from("us-east") == 0
            assert net.summary()["raw_bytes_by_source"]["eu-west"] == 0


def test_centralizing_into_the_single_sovereign_dc_is_allowed(small_ctr, wan):
    X, y = small_ctr
    dcs = build_dcs(X, y, partition("iid", X, y, 4), wan, sovereign=["eu-west"])
    hub = central_hub(wan, dcs)
    assert hub == "eu-west"
    net = Network(wan, dcs, hub)
    run("centralize", net, S)
    assert net.raw_bytes_from("eu-west") == 0
    assert net.summary()["raw_bytes"] == sum(d.raw_nbytes for d in dcs if d.name != "eu-west")
