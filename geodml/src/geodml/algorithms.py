"""Training algorithms over the simulated network, all on L2-regularized logistic regression
(objective.py). Each takes a Network (data centers + WAN + ledger), the regularization lam and its
settings, performs the real computation on each DC's rows, and accounts every message it sends.
Each returns theta = [w (d,), b] float64, the model held by the hub at the end.

Message layouts (float64): broadcast of the model: d+1 values; a DC's reply: d+2 values (gradient
sum and loss sum for gradient methods; local model and row count n_k for model-averaging methods).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

from geodml import costs
from geodml.compression import decode, encode
from geodml.dcside import InProcessPool, Pool
from geodml.errors import GeodmlError
from geodml.models import get as get_model
from geodml.network import Network
from geodml.objective import nnz, pass_flops
from geodml.registry import Algorithm, get, names, register
from geodml.settings import FADL_STEPS, INNER_OPTIMIZERS, Settings

# FADL's proximal strength after a line search that found no decrease: max(10 mu, FADL_MU_FLOOR).
# F is an average over rows, so its curvature is O(1) or less for standardized or one-hot
# features: 0.01 is a gentle first restraint, and each further stall multiplies it by ten.
FADL_MU_FLOOR = 1e-2
FADL_MU_GROWTH = 10.0
# A line search that accepts only a step below this (or none) means the direction overshoots.
FADL_SHORT_STEP = 0.5


def _n_total(net: Network) -> int:
    return sum(dc.n for dc in net.dcs)


def _dims(net: Network) -> int:
    return int(net.dcs[0].X.shape[1])


def distributed_loss_grad(net: Network, theta: np.ndarray, lam: float, pool=None) -> tuple[float, np.ndarray]:
    """One statistical-query round: the hub broadcasts theta (d+1,), every worker computes the
    loss and gradient sums of its rows, each DC reduces them to one (d+2,) message, the hub adds
    the K messages, normalizes by N and adds the regularizer. Returns (F(theta), grad (d+1,)).
    pool: where the DCs compute (default: in this process)."""
    pool = pool or InProcessPool(net.dcs)
    d = len(theta) - 1
    w = theta[:-1]
    up = pool.loss_grad(theta)
    net.round(theta.copy(), up, {dc.name: pass_flops(dc.n, dc.nnz) for dc in net.dcs})
    total = np.zeros(d + 2)
    for dc in net.dcs:
        total += up[dc.name]
    n = _n_total(net)
    grad = total[: d + 1] / n
    grad[:d] += lam * w
    return float(total[d + 1] / n + 0.5 * lam * np.sum(w * w)), grad


def run_centralize(net: Network, s: Settings, pool=None) -> np.ndarray:
    """Centralize-then-train: move every DC's raw rows to the hub (refused for a sovereign DC
    other than the hub: SovereigntyError), then fit scikit-learn's LogisticRegression(lbfgs) with
    C = 1/(lam N), i.e. the same objective F. Compute is accounted as n_iter passes over the rows."""
    import scipy.sparse as sp
    from sklearn.linear_model import LogisticRegression

    net.centralize()
    Xs = [dc.X for dc in net.dcs]
    X = sp.vstack(Xs, format="csr") if sp.issparse(Xs[0]) else np.vstack(Xs)
    y = np.concatenate([dc.y for dc in net.dcs])
    n = len(y)
    if s.model != "logreg":
        return _central_mlp(net, X, y, s)
    clf = LogisticRegression(C=1.0 / (s.lam * n), tol=s.tol, max_iter=max(s.lbfgs_maxiter, 1000), solver="lbfgs")
    clf.fit(X, y)
    net.notes["central_iters"] = int(clf.n_iter_[0])
    net.compute_at_hub(int(clf.n_iter_[0]) * pass_flops(n, nnz(X)))
    return np.concatenate([clf.coef_.ravel(), clf.intercept_]).astype(np.float64)


def _central_mlp(net: Network, X, y: np.ndarray, s: Settings) -> np.ndarray:
    """The centralized MLP: scikit-learn's MLPClassifier (one hidden ReLU layer, Adam at its
    defaults, mini-batches of s.batch_size (or 200), alpha = lam B so its objective is models.MLP's,
    at most s.lbfgs_maxiter epochs with its own stopping rule); compute accounted as one pass per
    epoch. Returns theta in models.MLP's layout."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPClassifier

    m = get_model(s.model)
    batch = s.batch_size if 0 < s.batch_size < len(y) else min(200, len(y))
    # scikit-learn divides its penalty 0.5 alpha ||W||^2 by the mini-batch's size: alpha = lam B is F's lam
    clf = MLPClassifier(hidden_layer_sizes=(m.hidden,), activation="relu", alpha=s.lam * batch, batch_size=batch,
                        max_iter=s.lbfgs_maxiter, random_state=s.seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # the epoch cap is a setting, not a failure
        clf.fit(X, y)
    net.notes["central_iters"] = int(clf.n_iter_)
    net.compute_at_hub(int(clf.n_iter_) * m.pass_flops(len(y), nnz(X)))
    return np.concatenate([clf.coefs_[0].ravel(), clf.intercepts_[0], clf.coefs_[1].ravel(), clf.intercepts_[1]])


def run_lbfgs(net: Network, s: Settings, pool) -> np.ndarray:
    """Distributed L-BFGS (scipy's L-BFGS-B at the hub) on the summed per-DC losses and gradients:
    every function evaluation is one round of distributed_loss_grad (Cano et al. 2016's
    statistical-query formulation). net.notes["objective_trace"]: (rounds so far, F) of every
    evaluation; net.notes["lbfgs_rounds"]: the rounds it took."""
    trace = net.notes.setdefault("objective_trace", [])

    def fg(th):
        f, g = distributed_loss_grad(net, th, s.lam, pool)
        trace.append((net.rounds, f))
        return f, g
    res = minimize(fg, np.zeros(_dims(net) + 1), jac=True, method="L-BFGS-B",
                   options={"maxiter": s.lbfgs_maxiter, "gtol": s.tol, "ftol": 1e-15})
    net.notes["lbfgs_rounds"] = net.rounds  # the planner's count for this run (costs.predict_lbfgs)
    return res.x


def _local_round(net: Network, theta: np.ndarray, s: Settings, pool, mu: float,
                 down: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """One round of local training on every DC from the global model; returns (the n_k-weighted
    average of the local models, the model the DCs started from). With compression each DC sends
    its encoded update theta_k - start. With s.compress_down != 'none' the hub broadcasts the
    encoded change theta - replica, where replica (down["replica"], zeros at first) is the copy
    every DC holds; hub and DCs add the decoded change to it and the DCs start from it. What the
    encoding drops stays in theta - replica and is sent in later rounds: error feedback on the
    downlink (DoubleSqueeze, Tang, Yu, Lian, Zhang, Liu, ICML 2019)."""
    d1 = len(theta)
    rest = (s.lam, s.lr, s.local_steps, s.batch_size, mu, s.compress, s.inner, s.model, s.weight_decay)
    if s.compress_down == "none":
        start, msg = theta, theta.copy()
        res = pool.local_train(theta, *rest)
    else:
        replica = down.setdefault("replica", np.zeros(d1))
        msg = encode(s.compress_down, theta - replica, 0.0)
        start = down["replica"] = replica + decode(s.compress_down, msg, d1)[0]
        res = pool.local_train_down(msg, s.compress_down, *rest)
    up = {k: r[0] for k, r in res.items()}
    if s.lr <= 0:
        net.notes["local_lr"] = {k: r[2] for k, r in res.items()}
    # inside a DC every local step allreduces a full-precision gradient (d+1 values and a count)
    net.round(msg, up, {k: r[1] for k, r in res.items()}, {k: s.local_steps for k in res},
              allreduce_nbytes=8 * (d1 + 1))
    acc = np.zeros(d1)
    n = 0.0
    for dc in net.dcs:
        if s.compress == "none":
            vec, w = up[dc.name][:-1], up[dc.name][-1]
        else:
            delta, w = decode(s.compress, up[dc.name], d1)
            vec = start + delta
        acc += w * vec
        n += w
    return acc / n, start


def run_fedavg(net: Network, s: Settings, pool, mu: float = 0.0) -> np.ndarray:
    """FedAvg (McMahan et al. 2017): per round each DC runs local_steps SGD steps from the global
    model and the hub averages the local models weighted by n_k. mu > 0 gives FedProx."""
    theta = get_model(s.model).init(_dims(net), s.seed)
    down: dict = {}
    for _ in range(s.rounds):
        theta, _ = _local_round(net, theta, s, pool, mu, down)
    return theta


def run_fedprox(net: Network, s: Settings, pool) -> np.ndarray:
    """FedProx (Li et al., MLSys 2020): FedAvg with the proximal term (mu/2)||theta - theta_g||^2."""
    return run_fedavg(net, s, pool, mu=s.mu)


def run_diloco(net: Network, s: Settings, pool) -> np.ndarray:
    """DiLoCo (Douillard et al. 2023): local_steps inner SGD steps per DC, then an outer step on
    the outer gradient delta = theta_g - avg_k(theta_k) (n_k-weighted) with Nesterov momentum:
    v = m v + delta; theta_g -= outer_lr (delta + m v). Inner optimizer: SGD, or Adam with
    per-DC moments kept across rounds (Settings.inner; the paper uses AdamW). With one full-batch inner step, m = 0 and outer_lr = 1 this is synchronous gradient
    descent."""
    theta = get_model(s.model).init(_dims(net), s.seed)
    v = np.zeros_like(theta)
    down: dict = {}
    for _ in range(s.rounds):
        avg, start = _local_round(net, theta, s, pool, 0.0, down)
        # the outer gradient is what local training moved: from the DCs' start (theta itself
        # unless the downlink is compressed) to their average
        delta = start - avg
        v = s.outer_momentum * v + delta
        theta = theta - s.outer_lr * (delta + s.outer_momentum * v)
    return theta


def run_oneshot(net: Network, s: Settings, pool) -> np.ndarray:
    """One-shot parameter averaging (Zhang, Duchi, Wainwright, JMLR 2013): each DC minimizes its
    own regularized objective to convergence (L-BFGS, data parallel inside the DC), sends its model
    once, and the hub averages weighted by n_k. One round, no broadcast."""
    d1 = _dims(net) + 1
    res = pool.solve_local(s.lam, s.lbfgs_maxiter, s.tol)
    up = {k: r[0] for k, r in res.items()}
    ar = {k: r[1] for k, r in res.items()}
    net.notes["oneshot_passes"] = ar
    net.round(None, up, {dc.name: ar[dc.name] * pass_flops(dc.n, dc.nnz) for dc in net.dcs}, ar)
    acc = np.zeros(d1)
    for dc in net.dcs:
        acc += up[dc.name][-1] * up[dc.name][:-1]
    return acc / _n_total(net)


def run_fadl(net: Network, s: Settings, pool) -> np.ndarray:
    """FADL-style local functional approximation (Mahajan, Keerthi, Sundararajan, Bottou, JMLR
    2017; the same local model as DANE, Shamir, Srebro, Zhang 2014, whose proximal term it
    carries). Each outer iteration:
    (1) a gradient round gives g = grad F(theta_r); (2) the hub broadcasts g (and mu) and each DC k
    minimizes, with fadl_local_iters L-BFGS iterations, its local loss scaled to the whole data
    plus a linear correction that makes the approximation's gradient at theta_r equal g, plus a
    proximal term:
        f_k(theta) = (1/n_k) L_k(theta) + (lam/2)||w||^2 + (g - grad_k(theta_r)) . (theta - theta_r)
                     + (mu/2)||theta - theta_r||^2
    and returns its minimizer (with n_k); the hub forms the n_k-weighted direction
    dir = avg_k theta_k - theta_r; (3) a line-search round: every DC returns its loss sums at
    theta_r + a * dir for the a in FADL_STEPS, and the hub takes the largest a meeting Armijo's
    condition (else the best; else a = 0, counted in net.notes["fadl_stalled_iterations"]).

    mu starts at fadl_mu (0: plain FADL). Under strong label skew the local minimizers are far
    apart and their average overshoots every step of the line search; then the model stays, and
    mu becomes max(FADL_MU_GROWTH mu, FADL_MU_FLOOR), which pulls each local solution toward
    theta_r (as mu grows the direction tends to -g / mu, a descent direction); when the full
    step a = 1 is accepted mu is divided by FADL_MU_GROWTH again (not below fadl_mu; below the
    floor it returns to fadl_mu). Three rounds per iteration; many fewer iterations than L-BFGS.
    net.notes["objective_trace"]: (rounds so far, F(theta_r)) after each gradient round;
    net.notes["fadl_mu"]: the mu of each iteration."""
    d1 = _dims(net) + 1
    n_tot = _n_total(net)
    theta = np.zeros(d1)
    passes_log, trace, mus = [], [], []
    stalled = 0
    mu = s.fadl_mu
    for _ in range(s.fadl_iters):
        f0, g = distributed_loss_grad(net, theta, s.lam, pool)
        trace.append((net.rounds, f0))
        mus.append(mu)
        res = pool.fadl_solve(theta, g, s.lam, s.fadl_local_iters, s.tol * 1e-2, mu)
        up = {k: r[0] for k, r in res.items()}
        passes = {k: r[1] for k, r in res.items()}
        passes_log.append(passes)
        # g travels with mu: one more float64 in the broadcast
        net.round(np.concatenate([g, [mu]]), up, {dc.name: passes[dc.name] * pass_flops(dc.n, dc.nnz) for dc in net.dcs}, passes)
        direction = sum(up[dc.name][-1] * up[dc.name][:-1] for dc in net.dcs) / n_tot - theta
        up = pool.line_losses(theta, direction, FADL_STEPS)
        net.round(direction.copy(), up, {dc.name: len(FADL_STEPS) * pass_flops(dc.n, dc.nnz) for dc in net.dcs})
        total = sum(up[dc.name] for dc in net.dcs)
        slope = float(np.sum(g * direction))
        best, chosen = None, None
        for i, a in enumerate(FADL_STEPS):
            th = theta + a * direction
            f = total[i] / n_tot + 0.5 * s.lam * float(np.sum(th[:-1] ** 2))
            if best is None or f < best[0]:
                best = (f, a)
            if chosen is None and f <= f0 + 1e-4 * a * slope:
                chosen = a
        a = chosen if chosen is not None else (best[1] if best[0] < f0 else 0.0)
        stalled += a == 0.0
        if not s.fadl_adapt:
            pass
        elif a < FADL_SHORT_STEP:
            mu = max(FADL_MU_GROWTH * mu, FADL_MU_FLOOR)
        elif chosen == 1.0 and mu > s.fadl_mu:
            mu = max(mu / 2, FADL_MU_FLOOR / 64)
        theta = theta + a * direction
    net.notes["fadl_passes"] = passes_log
    # Stalled iterations cost three rounds each: the user must see how many there were.
    net.notes["fadl_stalled_iterations"] = stalled
    net.notes["objective_trace"] = trace
    net.notes["fadl_mu"] = mus
    return theta


def _fadl_warning(net: Network, s: Settings) -> str | None:
    stalled = net.notes.get("fadl_stalled_iterations", 0)
    if not stalled:
        return None
    return (f"line search found no decrease in {stalled} of {s.fadl_iters} iterations; the model did not move there "
            "(local solutions overshoot under strong skew) and the proximal term was raised, costing 3 rounds each")


_LOCAL = ("lam", "rounds", "local_steps", "batch_size", "lr", "inner", "compress", "compress_down", "seed", "model", "weight_decay")
_ANY_MODEL = ("logreg", "mlp")
_BUILTINS = (
    Algorithm("centralize", run_centralize, costs.predict_centralize_run, ("lam", "tol", "lbfgs_maxiter", "model"), moves="raw", models=_ANY_MODEL,
              summary="move every DC's raw rows to one hub and fit there (scikit-learn's L-BFGS)"),
    Algorithm("lbfgs", run_lbfgs, costs.predict_lbfgs, ("lam", "tol", "lbfgs_maxiter"),
              summary="distributed L-BFGS on the summed per-DC losses and gradients"),
    Algorithm("fedavg", run_fedavg, costs.predict_local_rounds, _LOCAL, models=_ANY_MODEL,
              summary="FedAvg: local steps, n_k-weighted model averaging"),
    Algorithm("fedprox", run_fedprox, costs.predict_local_rounds, _LOCAL + ("mu",), models=_ANY_MODEL,
              summary="FedProx: FedAvg with a proximal term"),
    Algorithm("diloco", run_diloco, costs.predict_local_rounds, _LOCAL + ("outer_lr", "outer_momentum"), models=_ANY_MODEL,
              summary="DiLoCo: local inner steps, outer Nesterov momentum on the averaged change"),
    Algorithm("oneshot", run_oneshot, costs.predict_oneshot, ("lam", "tol", "lbfgs_maxiter"), fixed_rounds=1,
              summary="one-shot parameter averaging of local optima"),
    Algorithm("fadl", run_fadl, costs.predict_fadl, ("lam", "tol", "fadl_iters", "fadl_mu", "fadl_adapt", "fadl_local_iters"),
              warn=_fadl_warning, summary="FADL: local functional approximation with a proximal term and a line search"),
)
for _a in _BUILTINS:
    register(_a)
# The built-in algorithms, in the order compare shows them (registry.names() adds any registered later).
ALGORITHMS = names()


def run(name: str, net: Network, s: Settings, pool: Pool | None = None) -> np.ndarray:
    """Run the registered algorithm ``name`` on net. pool: where the DCs compute (a dcside.Pool:
    InProcessPool, the default, ray_pool.RayPool or flower_bridge.FlowerPool); it must hold net's
    DCs, and is reset to s.seed first so a reused pool starts like a fresh one. Returns theta
    (d+1,) float64. Raises GeodmlError for an unknown name or inner optimizer, SovereigntyError
    where the algorithm would export a sovereign DC's raw rows."""
    algo = get(name)
    if s.inner not in INNER_OPTIMIZERS:
        raise GeodmlError(f"unknown inner optimizer {s.inner!r} (use {', '.join(INNER_OPTIMIZERS)})")
    kind = get_model(s.model).name
    if kind not in algo.models:
        raise GeodmlError(f"{name} trains {' or '.join(algo.models)} only, not {s.model}")
    if pool is None:
        pool = InProcessPool(net.dcs, s.seed)
    else:
        pool.reset(s.seed)
    return algo.runner(net, s, pool)
