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
