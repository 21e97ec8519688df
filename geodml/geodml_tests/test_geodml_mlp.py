"""The MLP: its loss and gradient against scikit-learn's MLPClassifier (a reference
implementation) and finite differences; FedAvg, FedProx, DiLoCo (inner AdamW) and centralizing on
it, with the planner's costs equal to the ledger."""

import json
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from geodml.algorithms import Settings, run
from geodml.models import MLP, get
from geodml.network import Network


def _sklearn_loss_grad(m: MLP, X, y, theta, lam):
    """Loss and gradient from scikit-learn's own backpropagation (MLPClassifier._backprop) at theta."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPClassifier

    n, d = X.shape
    clf = MLPClassifier(hidden_layer_sizes=(m.hidden,), activation="relu", alpha=lam * n, max_iter=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit(X, y)  # builds its structures; the weights are replaced below
    W1, b1, w2, b2 = m.unpack(theta, d)
    clf.coefs_ = [W1.copy(), w2.reshape(-1, 1).copy()]
    clf.intercepts_ = [b1.copy(), np.array([b2])]
    acts = [X, np.empty((n, m.hidden)), np.empty((n, 1))]
    deltas = [np.empty_like(a) for a in acts[1:]]
    cg = [np.empty_like(c) for c in clf.coefs_]
    ig = [np.empty_like(c) for c in clf.intercepts_]
    loss, cg, ig = clf._backprop(X, y.reshape(-1, 1), None, acts, deltas, cg, ig)
    return loss, np.concatenate([cg[0].ravel(), ig[0], cg[1].ravel(), ig[1]]), clf


@pytest.mark.parametrize("sparse", [False, True])
def test_mlp_loss_gradient_and_probabilities_equal_scikit_learns(cancer, sparse):
    X, y = cancer.X_train[:120], cancer.y_train[:120]
    m = MLP(6)
    theta = m.init(X.shape[1], 3)
    theta[-1] = 0.2
    lam = 0.03
    f, g = m.objective(sp.csr_matrix(X) if sparse else X, y, theta, lam)
    f_ref, g_ref, clf = _sklearn_loss_grad(m, X, y, theta, lam)
    assert f == pytest.approx(f_ref, rel=1e-12)
    np.testing.assert_allclose(g, g_ref, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(m.predict_proba(X, theta), clf.predict_proba(X)[:, 1], rtol=1e-12)


def test_mlp_gradient_equals_central_finite_differences(cancer):
    X, y = cancer.X_train[:60, :8], cancer.y_train[:60]
    m = MLP(4)
    theta = m.init(8, 5)
    _, g = m.objective(X, y, theta, 0.01)
    rng = np.random.default_rng(0)
    for i in rng.choice(len(theta), 12, replace=False):
        e = np.zeros_like(theta)
        e[i] = 1e-6
        fd = (m.objective(X, y, theta + e, 0.01)[0] - m.objective(X, y, theta - e, 0.01)[0]) / 2e-6
        assert g[i] == pytest.approx(fd, rel=1e-5, abs=1e-9)


def test_fedavg_mlp_with_one_full_batch_step_is_one_centralized_gradient_step(wan, cancer_dcs):
    s = Settings(lam=1e-3, rounds=1, local_steps=1, batch_size=0, lr=0.5, model="mlp:5")
    theta = run("fedavg", Network(wan, cancer_dcs, "us-east"), s)
    X = np.vstack([dc.X for dc in cancer_dcs])
    y = np.concatenate([dc.y for dc in cancer_dcs])
    m = get("mlp:5")
    t0 = m.init(X.shape[1], s.seed)
    _, g = m.objective(X, y, t0, s.lam)
    np.testing.assert_allclose(theta, t0 - s.lr * g, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("algo", ["fedavg", "fedprox", "diloco", "centralize"])
def test_mlp_algorithms_learn_and_the_planner_predicts_their_ledger(geodml, algo):
    r = geodml("compare", "--data", "sklearn:breast_cancer", "--model", "mlp:8", "--inner", "adamw", "--algos", algo,
               "--rounds", "5", "--local-steps", "10", "--batch-size", "32", "--json", "-q")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    row = res["algorithms"][algo]
    d = res["data"]["features"]
    assert res["data"]["model_bytes"] == 8 * (d * 8 + 2 * 8 + 1)
    assert row["predicted"]["bytes"] == row["bytes"]
    assert row["predicted"]["sim_seconds"] == pytest.approx(row["sim_seconds"], rel=1e-9)
    assert row["test_accuracy"] > 0.9
    if algo != "centralize":  # K-1 remote DCs, 5 rounds, P float64 down and P+1 up
        P = d * 8 + 2 * 8 + 1
        assert row["bytes"] == 5 * (len(res["dcs"]) - 1) * 8 * (P + P + 1)


def test_diloco_inner_adamw_decays_the_weights(wan, cancer_dcs):
    """AdamW's decoupled decay: with weight decay the DCs' weights end up smaller than with plain Adam."""
    base = dict(lam=1e-4, rounds=3, local_steps=20, batch_size=32, model="mlp:8")
    a = run("diloco", Network(wan, cancer_dcs, "us-east"), Settings(**base, inner="adam"))
    w = run("diloco", Network(wan, cancer_dcs, "us-east"), Settings(**base, inner="adamw", weight_decay=2.0))
    assert np.linalg.norm(w) < 0.9 * np.linalg.norm(a)


def test_model_bad_input_and_logreg_only_algorithms_are_one_line_exit_2(geodml):
    for args, needle in ((["--model", "mlp:0"], "unknown model"), (["--model", "mlp", "--algos", "lbfgs"], "lbfgs trains logreg only"),
                         (["--inner", "lion"], "inner optimizer")):
        r = geodml("compare", "--data", "sklearn:breast_cancer", *args)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and needle in r.stderr, r.stderr
