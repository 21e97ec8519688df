"""geodml on Flower's Deployment Runtime with real processes (flower_deploy.py): a SuperLink and
one SuperNode per data center of a real dataset split by its own geography, each SuperNode given
only its own rows. Known answer: every algorithm's final parameters equal the in-process run's
bit for bit (same seed), and the bytes counted on each DC's socket are at least the arrays' bytes
of every round and the ledger's WAN bytes of its link. Slow (a minute or more: Flower starts a
ClientApp process per message and polls every 3 s); the relay and the byte split are tested
fast in test_geodml_wire.py."""

import numpy as np
import pytest

pytestmark = pytest.mark.slow


def test_deployment_equals_in_process_and_wire_covers_the_ledger():
    pytest.importorskip("flwr", reason="Flower is not installed (pip install 'geodml[flower]')")
    from geodml import registry
    from geodml.compare import CompareConfig, _federation, _run_one
    from geodml.flower_deploy import run_deployment
    from geodml.settings import Settings

    cfg = CompareConfig(data="dataset:gapminder", algos=("fedavg", "oneshot"), settings=Settings(rounds=2, local_steps=5),
                        backend="flower-deployment", flower_timeout=240.0)
    fed = _federation(cfg)
    res = run_deployment(cfg, fed.dcs)
    local_thetas: dict = {}
    for a in cfg.algos:
        local = _run_one(registry.get(a), cfg, fed, {}, None, lambda m: None, local_thetas)
        row = res["algorithms"][a]
        assert np.array_equal(np.asarray(res["thetas"][a]), local_thetas[a]), a
        for key in ("test_accuracy", "test_logloss", "bytes", "rounds", "sim_seconds", "wan_bytes_by_dc"):
            assert row[key] == local[key], (a, key)
        m = row["measured"]
        assert m["executor"] == "flower-deployment"
        assert len(m["rounds"]) == row["rounds"] + 1  # each round's call plus the pool's reset
        for r in m["rounds"]:
            assert all(r["wire"][n] >= r["payload"][n] > 0 or r["method"] == "reset" for n in r["wire"])
        for n, v in m["wire"]["by_dc"].items():
            assert v["wire"] >= v["payload"] >= v["ledger"]
        assert m["wire"]["by_dc"][fed.hub_m]["ledger"] == 0 < m["wire"]["by_dc"][fed.hub_m]["wire"]
    w = res["wire"]
    in_rounds = sum(res["algorithms"][a]["measured"]["wire"]["wire_bytes"] for a in cfg.algos)
    assert w["total_bytes"] == in_rounds + w["control_bytes"] and w["control_bytes"] > 0
