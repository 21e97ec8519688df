"""Compression encodings, error feedback, and compressed FedAvg/DiLoCo accounting."""

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import arrays

from geodml.algorithms import Settings, run
from geodml.compression import ErrorFeedback, decode, encode, encoded_nbytes
from geodml.errors import GeodmlError
from geodml.network import Network
from geodml.objective import predict_proba

vectors = arrays(np.float64, st.integers(1, 300), elements=st.floats(-1e3, 1e3, allow_nan=False))


@settings(max_examples=60, deadline=None)
@given(v=vectors, spec=st.sampled_from(["none", "q8", "topk:0.1", "topk:0.5", "topk:1"]))
def test_encoded_size_is_the_closed_form_and_decoding_is_faithful(v, spec):
    msg = encode(spec, v, 123.0)
    assert msg.nbytes == encoded_nbytes(spec, len(v))
    vh, w = decode(spec, msg, len(v))
    assert w == 123.0
    if spec == "none":
        np.testing.assert_array_equal(vh, v)
    elif spec == "q8":
        step = (v.max() - v.min()) / 255 if v.max() > v.min() else 1.0
        assert np.max(np.abs(vh - v)) <= step / 2 + 1e-4 * (1 + np.abs(v).max())
    else:
        k = max(1, math.ceil(float(spec[5:]) * len(v)))
        kept = np.flatnonzero(vh)
        assert len(kept) <= k
        # every kept entry is (float32 of) the original, and no dropped entry beats a kept one
        np.testing.assert_allclose(vh[kept], v[kept].astype(np.float32), rtol=0)
        dropped = np.setdiff1d(np.arange(len(v)), np.sort(np.argsort(-np.abs(v), kind="stable")[:k]))
        if len(dropped) and k < len(v):
            assert np.abs(v[dropped]).max() <= np.sort(np.abs(v))[-k] + 1e-12


def test_error_feedback_loses_nothing():
    """sum of decoded messages + final memory == sum of the true updates (telescoping)."""
    rng = np.random.default_rng(0)
    ef = ErrorFeedback("topk:0.05")
    sent = np.zeros(200)
    true = np.zeros(200)
    for _ in range(30):
        delta = rng.normal(size=200)
        true += delta
        sent += decode("topk:0.05", ef.send("a", delta, 1.0), 200)[0]
    np.testing.assert_allclose(sent + ef.memory["a"], true, rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("spec", ["topk", "topk:0", "topk:2", "topk:x", "q3"])
def test_bad_specs(spec):
    with pytest.raises(GeodmlError):
        encoded_nbytes(spec, 10)


@pytest.mark.parametrize("algo", ["fedavg", "diloco"])
@pytest.mark.parametrize("spec", ["q8", "topk:0.05"])
def test_compressed_uplink_bytes_closed_form_and_accuracy(cancer, cancer_dcs, wan, algo, spec):
    base = Settings(lam=1e-3, rounds=25, local_steps=10, batch_size=64, lr=0.1)
    comp = Settings(lam=1e-3, rounds=25, local_steps=10, batch_size=64, lr=0.1, compress=spec)
    net0, net1 = Network(wan, cancer_dcs, "us-east"), Network(wan, cancer_dcs, "us-east")
    th0, th1 = run(algo, net0, base), run(algo, net1, comp)
    d1 = cancer.X_train.shape[1] + 1
    remote = len(cancer_dcs) - 1
    assert net1.wan_bytes == 25 * remote * (8 * d1 + encoded_nbytes(spec, d1))
    assert net1.wan_bytes < net0.wan_bytes
    acc = lambda th: np.mean((predict_proba(cancer.X_test, th) > 0.5) == cancer.y_test)
    assert acc(th1) >= acc(th0) - 0.03


def test_compressed_downlink_bytes_are_the_closed_form_and_the_planner_agrees(cancer_dcs, wan):
    """q8 downlink: every remote DC receives 16 + (d+1) bytes per round instead of 8(d+1); the
    uplink is unchanged; the planner predicts the same bytes."""
    from geodml.algorithms import Settings, run
    from geodml.network import Network
    from geodml.planner import DCSize, predict

    d = cancer_dcs[0].X.shape[1]
    base = Settings(lam=1e-3, rounds=3, local_steps=2, batch_size=32)
    s = Settings(lam=1e-3, rounds=3, local_steps=2, batch_size=32, compress_down="q8")
    plain, comp = Network(wan, cancer_dcs, "us-east"), Network(wan, cancer_dcs, "us-east")
    run("fedavg", plain, base)
    run("fedavg", comp, s)
    K = len(cancer_dcs)
    down = lambda n: [t.nbytes for t in n.ledger if t.inter and t.src == "us-east"]  # noqa: E731
    assert down(plain) == [8 * (d + 1)] * (3 * (K - 1))
    assert down(comp) == [16 + (d + 1)] * (3 * (K - 1))
    up = lambda n: [t.nbytes for t in n.ledger if t.inter and t.dst == "us-east"]  # noqa: E731
    assert up(comp) == up(plain)
    sizes = [DCSize.of(dc) for dc in cancer_dcs]
    assert predict("fedavg", sizes, d, wan, s, "us-east").bytes == comp.wan_bytes


def test_compressed_downlink_with_error_feedback_tracks_the_hub_model(cancer_dcs, wan):
    """The DCs' copy lags the hub's model only by what the last encoding dropped: with topk:1.0
    (every entry, as float32) FedAvg equals the uncompressed run to float32 precision, and with
    DiLoCo one full-batch inner step, plain outer SGD, the topk:0.5 downlink's residual is
    carried forward, so the model still descends F."""
    from geodml.algorithms import Settings, run
    from geodml.network import Network
    from geodml.objective import objective

    base = dict(lam=1e-2, rounds=4, local_steps=3, batch_size=0, lr=0.3)
    a = run("fedavg", Network(wan, cancer_dcs, "us-east"), Settings(**base))
    b = run("fedavg", Network(wan, cancer_dcs, "us-east"), Settings(**base, compress_down="topk:1.0"))
    np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    X = np.vstack([dc.X for dc in cancer_dcs])
    y = np.concatenate([dc.y for dc in cancer_dcs])
    f0 = objective(X, y, np.zeros(X.shape[1] + 1), 1e-2)[0]
    fs = []
    for r in (2, 6):
        th = run("diloco", Network(wan, cancer_dcs, "us-east"),
                 Settings(lam=1e-2, rounds=r, local_steps=1, batch_size=0, lr=0.3, outer_lr=1.0, outer_momentum=0.0,
                          compress_down="topk:0.5"))
        fs.append(objective(X, y, th, 1e-2)[0])
    assert f0 > fs[0] > fs[1]
