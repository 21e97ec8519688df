"""The planner's predictions against the simulation, and the crossover to centralizing."""

import pytest

from geodml.algorithms import Settings, run
from geodml.data import make_ctr
from geodml.network import Network, build_dcs, central_hub, model_hub
from geodml.partition import partition
from geodml.planner import DCSize, PlanCounts, crossover, csr_sizes, plan, predict

S = Settings(lam=1e-3, rounds=4, local_steps=3, batch_size=64, lr=0.2, lbfgs_maxiter=12, tol=1e-6, fadl_iters=2, fadl_local_iters=4)


@pytest.mark.parametrize("algo", ["centralize", "lbfgs", "fedavg", "fedprox", "diloco", "oneshot", "fadl"])
@pytest.mark.parametrize("hierarchical", [True, False])
def test_prediction_equals_simulation(ctr_dcs, wan, algo, hierarchical):
    names = [d.name for d in ctr_dcs]
    hub = central_hub(wan, ctr_dcs) if algo == "centralize" else model_hub(wan, names)
    net = Network(wan, ctr_dcs, hub, hierarchical=hierarchical)
    run(algo, net, S)
    counts = PlanCounts(lbfgs_rounds=net.rounds, oneshot_passes=net.notes.get("oneshot_passes", 1),
                        central_iters=net.notes.get("central_iters", 1), fadl_passes=net.notes.get("fadl_passes", 1))
    p = predict(algo, [DCSize.of(d) for d in ctr_dcs], ctr_dcs[0].X.shape[1], wan, S, hub, counts, hierarchical)
    assert p.bytes == net.wan_bytes
    assert p.intra_bytes == net.intra_bytes
    assert p.rounds == net.rounds
    assert p.sim_seconds == pytest.approx(net.sim_seconds, rel=1e-9)
    assert p.dollars == pytest.approx(net.dollars, rel=1e-9)


@pytest.mark.parametrize("spec", ["q8", "topk:0.02"])
def test_prediction_equals_simulation_with_compression(ctr_dcs, wan, spec):
    s = Settings(lam=1e-3, rounds=3, local_steps=2, batch_size=64, lr=0.2, compress=spec)
    net = Network(wan, ctr_dcs, "us-west")
    run("diloco", net, s)
    p = predict("diloco", [DCSize.of(d) for d in ctr_dcs], ctr_dcs[0].X.shape[1], wan, s, "us-west")
    assert (p.bytes, p.intra_bytes) == (net.wan_bytes, net.intra_bytes)
    assert p.sim_seconds == pytest.approx(net.sim_seconds, rel=1e-9)


def test_csr_sizes_match_real_ctr_data(wan):
    X, y = make_ctr(3000, features=512, fields=6, seed=0)
    dcs = build_dcs(X, y, partition("iid", X, y, 4), wan)
    sizes = csr_sizes([d.name for d in dcs], [d.n for d in dcs], 6)
    assert [s.raw_nbytes for s in sizes] == [d.memory_nbytes for d in dcs]  # the closed form of the in-memory layout
    assert [s.nnz for s in sizes] == [d.nnz for d in dcs]
    # with a measured encoding (bytes per file and per row, from another sample of the same shape) the planner's centralizing
    # bytes are within 5% of the Parquet bytes the DCs measure
    from geodml.costs import ctr_encoding

    est = csr_sizes([d.name for d in dcs], [d.n for d in dcs], 6, encoding=ctr_encoding(512, 6, 3000, seed=9))
    assert sum(s.raw_nbytes for s in est) == pytest.approx(sum(d.raw_nbytes for d in dcs), rel=0.05)


def test_sovereignty_refuses_centralizing_in_the_plan(wan):
    sizes = csr_sizes(wan.names, [1000] * 4, 10, sovereign=("eu-west", "us-east"))
    r = plan(sizes, 100, wan, S, "us-west", None)
    assert r["predictions"]["centralize"]["refused"]
    assert r["recommend"] != "centralize"


def test_large_data_few_rounds_model_exchange_wins_and_small_data_many_rounds_centralizing_wins(wan):
    big = csr_sizes(wan.names, [2_500_000] * 4, 20)
    r = plan(big, 65536, wan, S, "us-west", "ap-southeast", objective="bytes")
    assert r["recommend"] != "centralize"
    small = csr_sizes(wan.names, [2_000] * 4, 20)
    many = Settings(rounds=200)
    r2 = plan(small, 65536, wan, many, "us-west", "ap-southeast", strategies=("centralize", "fedavg", "lbfgs"), objective="bytes")
    assert r2["recommend"] == "centralize"


def test_crossover_in_bytes_is_the_closed_form(wan):
    sizes = csr_sizes(wan.names, [100_000] * 4, 20)
    d = 4096
    c = crossover("fedavg", sizes, d, wan, S, "us-west", "ap-southeast")
    central = sum(s.raw_nbytes for s in sizes if s.name != "ap-southeast")
    per_round = 3 * 8 * ((d + 1) + (d + 2))
    # the first whole round at which centralizing moves fewer bytes (262.36 rounds is no answer)
    assert c["rounds_bytes"] == 263
    assert (c["rounds_bytes"] - 1) * per_round <= central < c["rounds_bytes"] * per_round
    # at the crossover row count the two byte totals tie (raw bytes are linear in rows)
    fed_bytes = S.rounds * per_round
    assert c["rows_bytes"] == pytest.approx(400_000 * fed_bytes / central, rel=1e-3)


def test_crossover_found_by_the_planner_is_confirmed_by_simulation(wan):
    """Small data, many rounds: the planner says centralizing moves fewer bytes and is cheaper;
    running both confirms it, and with 50x the rows the order flips in both."""
    # Parquet ships these one-hot rows in ~10 B each, so the crossover sits near 25k rows at 5 rounds
    s = Settings(lam=1e-3, rounds=5, local_steps=2, batch_size=64, lr=0.2)
    for rows, central_wins in ((2_000, True), (100_000, False)):
        X, y = make_ctr(rows, features=1024, fields=10, seed=1)
        dcs = build_dcs(X, y, partition("iid", X, y, 4), wan)
        hub_m, hub_c = model_hub(wan, [d.name for d in dcs]), central_hub(wan, dcs)
        r = plan([DCSize.of(d) for d in dcs], 1024, wan, s, hub_m, hub_c, strategies=("centralize", "fedavg"), objective="bytes")
        assert (r["recommend"] == "centralize") == central_wins
        sim = {}
        for a, hub in (("centralize", hub_c), ("fedavg", hub_m)):
            net = Network(wan, dcs, hub)
            run(a, net, s)
            sim[a] = (net.wan_bytes, net.dollars)
        assert (sim["centralize"][0] < sim["fedavg"][0]) == central_wins
        assert (sim["centralize"][1] < sim["fedavg"][1]) == central_wins
