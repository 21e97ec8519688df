"""Each data center as a Ray actor (ray_pool.RayPool) computes exactly what the in-process
simulation computes: the same model bits and the same ledger, message by message; the bytes that
really crossed between the driver and the actors are measured beside the simulated ones."""

import numpy as np
import pytest

from geodml.algorithms import Settings, run
from geodml.network import Network

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def ray_pool(request):
    from geodml.data import load_dataset
    from geodml.network import build_dcs
    from geodml.partition import partition
    from geodml.ray_pool import RayPool
    from geodml.wan import load_wan

    wan = load_wan()
    ds = load_dataset("sklearn:breast_cancer", seed=0)
    parts = partition("dirichlet:1.0", ds.X_train, ds.y_train, 4, seed=1)
    dcs = build_dcs(ds.X_train, ds.y_train, parts, wan)
    pool = RayPool(dcs, seed=0, num_cpus=2)
    yield wan, dcs, pool
    pool.close()


def _both(name, s, wan, dcs, pool):
    local, remote = Network(wan, dcs, "us-east"), Network(wan, dcs, "us-east")
    th_local = run(name, local, s)
    before = (pool.payload_bytes, pool.serialized_bytes, pool.calls)
    th_remote = run(name, remote, s, pool)
    after = (pool.payload_bytes, pool.serialized_bytes, pool.calls)
    return local, th_local, remote, th_remote, [b - a for a, b in zip(before, after)]


@pytest.mark.parametrize("name", ["lbfgs", "fedavg"])
def test_ray_actors_give_the_in_process_model_bit_for_bit_and_the_same_ledger(ray_pool, name):
    wan, dcs, pool = ray_pool
    s = Settings(lam=1e-3, tol=1e-8, lbfgs_maxiter=60, rounds=4, local_steps=5, batch_size=32)
    local, th_local, remote, th_remote, (payload, serialized, calls) = _both(name, s, wan, dcs, pool)
    np.testing.assert_array_equal(th_remote, th_local)
    assert remote.ledger == local.ledger
    assert remote.summary() == local.summary()
    # Closed form of what crossed process boundaries: every round the driver sends each of the
    # K DCs theta (d+1 float64) and gets back d+2 float64 (gradient and loss sums for L-BFGS;
    # local model and n_k for FedAvg), the hub's own DC included, unlike the WAN ledger.
    K, d = len(dcs), dcs[0].X.shape[1]
    assert calls == local.rounds + 1  # + the reset that starts every run on a reused pool
    assert payload == local.rounds * K * 8 * ((d + 1) + (d + 2))
    # Ray's serializer adds framing and pickle headers (and FedAvg's flops/lr floats) to the
    # arrays: more than the arrays, by a bounded amount per message.
    assert payload < serialized < payload + (calls * K * 2) * 1024


@pytest.mark.slow
@pytest.mark.parametrize("name", ["diloco", "fadl", "oneshot", "fedprox"])
def test_ray_actors_match_in_process_for_the_other_model_exchange_algorithms(ray_pool, name):
    wan, dcs, pool = ray_pool
    s = Settings(lam=1e-3, rounds=3, local_steps=4, batch_size=32, fadl_iters=2, compress="topk:0.2", compress_down="q8")
    local, th_local, remote, th_remote, _ = _both(name, s, wan, dcs, pool)
    np.testing.assert_array_equal(th_remote, th_local)
    assert remote.ledger == local.ledger
