"""The Flower bridge (flower_bridge.py): each data center as a Flower ClientApp computes exactly
what the in-process simulation computes. Fast tests: a DCWorker's state survives the trip through
Flower's records and protobuf serde (a ClientApp is stateless between messages), and every value
the algorithms send arrives bit for bit. Slow test: compare --flower on Flower's simulation engine
gives the in-process figures exactly, with Flower's message bytes beside them."""

import numpy as np
import pytest

from geodml.dcside import DCWorker


def _bits(a):
    return (a.dtype.str, a.shape, a.tobytes())


def _same(x, y):
    """Equal bit for bit (arrays: dtype, shape and bytes; tuples elementwise)."""
    if isinstance(x, tuple):
        return isinstance(y, tuple) and len(x) == len(y) and all(_same(a, b) for a, b in zip(x, y))
    if isinstance(x, np.ndarray):
        return isinstance(y, np.ndarray) and _bits(x) == _bits(y)
    return type(x) is type(y) and (x == y or (x != x and y != y))


def _steps(w, n, start=0):
    """n local rounds of FedAvg-style training with top-k uplink and q8 downlink: every piece of
    DCWorker state (rng, Adam moments, cached step size, error feedback, replica) is used and
    changed."""
    from geodml.compression import encode

    down = encode("q8", np.linspace(-1, 1, w.X.shape[1] + 1), 0.0)
    # Adam and SGD with the automatic step (1/L, computed once and cached) alternate.
    return [w.local_train_down(down, "q8", 1e-3, 0.0, 3, 16, 0.0, "topk:0.3", ("adam", "sgd")[i % 2]) for i in range(start, start + n)]


def test_dcworker_state_restored_continues_exactly_as_the_uninterrupted_worker(cancer):
    X, y = cancer.X_train[:120], cancer.y_train[:120]
    straight = DCWorker(X, y, 2, index=1, seed=5)
    expected = _steps(straight, 3)
    first = DCWorker(X, y, 2, index=1, seed=5)
    got = _steps(first, 1)
    for i in (1, 2):
        resumed = DCWorker(X, y, 2, index=1, seed=999)  # a fresh worker: only the restored state may matter
        resumed.set_state(*first.get_state())
        got += _steps(resumed, 1, start=i)
        first = resumed
    assert all(_same(a, b) for a, b in zip(got, expected))


def test_values_and_state_cross_flowers_records_and_protobuf_bit_for_bit(cancer):
    pytest.importorskip("flwr", reason="Flower is not installed (pip install 'geodml[flower]')")
    from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict
    from flwr.common.serde import recorddict_from_proto, recorddict_to_proto
    from flwr.proto.recorddict_pb2 import RecordDict as ProtoRecordDict

    from geodml.algorithms import FADL_STEPS
    from geodml.flower_bridge import from_recorddict, to_recorddict

    def wire(rd):
        return recorddict_from_proto(ProtoRecordDict.FromString(recorddict_to_proto(rd).SerializeToString()))

    tricky = np.array([0.1, -0.0, np.inf, -np.inf, np.nan, 5e-324, 1 / 3, 1e308], dtype=np.float64)
    values = (tricky, np.arange(7, dtype=np.uint8), 3, 2**62, 1e-4, 0.1 + 0.2, "topk:0.01", FADL_STEPS, None,
              np.float64(1 / 7), np.int64(-5))
    back = from_recorddict(wire(to_recorddict(values, {"method": "local_train"})))
    assert _same(back[:9], values[:9])
    assert _same(back[9:], (float(np.float64(1 / 7)), -5))

    # The ClientApp keeps its DCWorker's state in context.state the same way.
    X, y = cancer.X_train[:120], cancer.y_train[:120]
    w = DCWorker(X, y, 2, index=0, seed=1)
    _steps(w, 2)
    scalars, arrays = w.get_state()
    rd = wire(RecordDict({"s": ConfigRecord(scalars), "a": ArrayRecord({k: Array(v) for k, v in arrays.items()})}))
    w2 = DCWorker(X, y, 2, index=0, seed=7)
    w2.set_state({k: rd["s"][k] for k in scalars}, {k: a.numpy() for k, a in rd["a"].items()})
    assert all(_same(a, b) for a, b in zip(_steps(w2, 2, start=2), _steps(w, 2, start=2)))


@pytest.mark.slow
def test_flower_clientapps_give_the_in_process_model_bit_for_bit_and_the_same_ledger():
    pytest.importorskip("flwr", reason="Flower is not installed (pip install 'geodml[flower]')")
    pytest.importorskip("ray", reason="Flower's simulation engine needs Ray (pip install 'geodml[flower]')")
    from geodml.algorithms import Settings, run
    from geodml.data import load_dataset
    from geodml.flower_bridge import FederationSpec, run_federation
    from geodml.network import Network, build_dcs
    from geodml.partition import partition
    from geodml.wan import load_wan

    wan = load_wan()
    ds = load_dataset("sklearn:breast_cancer", seed=0)
    dcs = build_dcs(ds.X_train, ds.y_train, partition("dirichlet:1.0", ds.X_train, ds.y_train, 4, seed=0), wan)
    spec = FederationSpec("sklearn:breast_cancer", "dirichlet:1.0", 4, 0, tuple(dc.workers for dc in dcs))
    s = Settings(lam=1e-3, tol=1e-8, lbfgs_maxiter=40, rounds=4, local_steps=5, batch_size=32, compress="topk:0.2")
    names = ("lbfgs", "fedavg")
    got = {}

    def work(pool):  # one Flower start for both algorithms (the engine's start dominates)
        for name in names:
            net = Network(wan, dcs, "us-east")
            before = (pool.payload_bytes, pool.serialized_bytes, pool.calls)
            theta = run(name, net, s, pool)
            got[name] = (theta, net, [b - a for a, b in zip(before, (pool.payload_bytes, pool.serialized_bytes, pool.calls))])

    run_federation(spec, [dc.name for dc in dcs], work, num_cpus=1)
    for name in names:
        theta, net, (payload, serialized, calls) = got[name]
        local = Network(wan, dcs, "us-east")
        np.testing.assert_array_equal(theta, run(name, local, s))
        assert net.ledger == local.ledger
        assert calls == local.rounds + 1  # + the reset that starts every run
        if name == "lbfgs":  # theta (d+1 float64) out, gradient and loss sums (d+2) back, per DC and round
            d = dcs[0].X.shape[1]
            assert payload == local.rounds * len(dcs) * 8 * ((d + 1) + (d + 2))
        # Flower's wire form adds headers, metadata and the scalars to the arrays' bytes.
        assert payload < serialized < payload + calls * len(dcs) * 2 * 4096


@pytest.mark.slow
def test_compare_on_flower_equals_the_in_process_run():
    pytest.importorskip("flwr", reason="Flower is not installed (pip install 'geodml[flower]')")
    pytest.importorskip("ray", reason="Flower's simulation engine needs Ray (pip install 'geodml[flower]')")
    from geodml.algorithms import Settings
    from geodml.compare import CompareConfig, compare

    s = Settings(lam=1e-3, tol=1e-8, lbfgs_maxiter=40, rounds=4, local_steps=5, batch_size=32)
    cfg = dict(data="sklearn:breast_cancer", partition="dirichlet:1.0", algos=("lbfgs", "fedavg"), settings=s)
    local = compare(CompareConfig(**cfg))
    remote = compare(CompareConfig(**cfg, backend="flower"))
    d = local["data"]["features"]
    K = len(local["dcs"])
    for a in cfg["algos"]:
        r, l = dict(remote["algorithms"][a]), dict(local["algorithms"][a])
        m = r.pop("measured")
        for x in (r, l):
            x.pop("wall_seconds")
        assert r == l  # accuracy, log loss, bytes, rounds, simulated seconds, dollars: exactly
        assert m["executor"] == "flower"
        # Every round the hub sends each of the K ClientApps theta (d+1 float64) and gets d+2
        # float64 back (+ the reset message that starts each run, no arrays).
        assert m["payload_bytes"] == l["rounds"] * K * 8 * ((d + 1) + (d + 2))
        # Flower's wire form adds headers, metadata and the scalars to the arrays' bytes.
        assert m["payload_bytes"] < m["serialized_bytes"] < m["payload_bytes"] + (l["rounds"] + 1) * K * 2 * 4096
    assert remote["crossover"] == local["crossover"]


def test_a_clientapps_error_reason_becomes_one_line():
    from geodml.flower_bridge import _reason

    ray_wrapped = ("<class 'ray.exceptions.RayTaskError(ClientAppException)'>:<'ray::ClientAppActor.run() (pid=1)\n"
                   "  File \"x.py\", line 1, in run\n    raise ClientAppException(str(ex)) from ex\n"
                   "flwr.clientapp.client_app.ClientAppException: \n"
                   "Exception ClientAppException occurred. Message: libsvm file not found: '/no.svm''>")
    assert _reason(ray_wrapped) == "libsvm file not found: '/no.svm'"
    assert _reason("first\nsecond\n") == "second"
    assert _reason("") == "no reason given"
    dead = ("<class 'ray.exceptions.ActorDiedError'>:<'The actor died unexpectedly before finishing this task.\n"
            "\tclass_name: ClientAppActor\nThe actor is dead because its worker process has died. Worker exit type: "
            "SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file. "
            "Some common causes include: (1) the process was killed by the OOM killer due to high memory usage'>")
    assert _reason(dead) == "The actor is dead because its worker process has died."
