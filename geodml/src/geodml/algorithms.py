"""Training algorithms over the simulated network, all on L2-regularized logistic regression
(objective.py). Each takes a Network (data centers + WAN + ledger), the regularization lam and its
settings, performs the real computation on each DC's rows, and accounts every message it sends.
Each returns theta = [w (d,), b] float64, the model held by the hub at the end.

Message layouts (float64): broadcast of the model: d+1 values; a DC's reply: d+2 values (gradient
sum and loss sum for gradient methods; local model and row count n_k for model-averaging methods).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

from geodml.compression import ErrorFeedback, decode
from geodml.errors import GeodmlError
from geodml.network import Network
from geodml.objective import loss_grad_sum, nnz, objective, pass_flops

ALGORITHMS = ("centralize", "lbfgs", "fedavg", "fedprox", "diloco", "oneshot", "fadl")
# FADL's line search evaluates F at theta + a * direction for these a in one round.
FADL_STEPS = tuple(2.0**-i for i in range(8))


@dataclass(frozen=True)
class Settings:
    """Hyper-parameters shared by the algorithms.

    lam: L2 strength of F (objective.py). lbfgs_maxiter / tol: distributed L-BFGS (and the
    centralized scikit-learn fit) stopping rules. rounds: communication rounds of FedAvg, FedProx
    and DiLoCo. local_steps: SGD steps per round on each DC; batch_size: rows per step (0 = full
    local batch); lr: local step size (0: each DC uses 1/L_k, see local_lr). mu: FedProx proximal strength. outer_lr, outer_momentum:
    DiLoCo's outer Nesterov SGD (Douillard et al. 2023 use 0.7 and 0.9). fadl_iters: FADL outer iterations;
    fadl_local_iters: L-BFGS iterations of each local solve. compress: uplink encoding of
    FedAvg/FedProx/DiLoCo updates with error feedback (compression.py: none, q8, topk:F); with
    none the reply is the local model and n_k as d+2 float64. seed: mini-batch order.
    """

    lam: float = 1e-4
    lbfgs_maxiter: int = 200
    tol: float = 1e-6
    rounds: int = 20
    local_steps: int = 50
    batch_size: int = 256
    lr: float = 0.0
    mu: float = 0.01
    outer_lr: float = 0.7
    outer_momentum: float = 0.9
    fadl_iters: int = 6
    compress: str = "none"
    fadl_local_iters: int = 10
    seed: int = 0


def _n_total(net: Network) -> int:
    return sum(dc.n for dc in net.dcs)


def _dims(net: Network) -> int:
    return int(net.dcs[0].X.shape[1])


def distributed_loss_grad(net: Network, theta: np.ndarray, lam: float, shards: dict | None = None) -> tuple[float, np.ndarray]:
    """One statistical-query round: the hub broadcasts theta (d+1,), every worker computes the
    loss and gradient sums of its rows, each DC reduces them to one (d+2,) message, the hub adds
    the K messages, normalizes by N and adds the regularizer. Returns (F(theta), grad (d+1,))."""
    d = len(theta) - 1
    w, b = theta[:-1], theta[-1]
    up, flops = {}, {}
    for dc in net.dcs:
        msg = np.zeros(d + 2)
        parts = shards[dc.name] if shards else [(dc.X[s], dc.y[s]) for s in dc.shards()]
        for Xs, ys in parts:
            loss, gw, gb = loss_grad_sum(Xs, ys, w, b)
            msg[:d] += gw
            msg[d] += gb
            msg[d + 1] += loss
        up[dc.name] = msg
        flops[dc.name] = pass_flops(dc.n, dc.nnz)
    net.round(theta.copy(), up, flops)
    total = np.zeros(d + 2)
    for dc in net.dcs:
        total += up[dc.name]
    n = _n_total(net)
    grad = total[: d + 1] / n
    grad[:d] += lam * w
    return float(total[d + 1] / n + 0.5 * lam * np.sum(w * w)), grad


def run_centralize(net: Network, s: Settings) -> np.ndarray:
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
    clf = LogisticRegression(C=1.0 / (s.lam * n), tol=s.tol, max_iter=max(s.lbfgs_maxiter, 1000), solver="lbfgs")
    clf.fit(X, y)
    net.notes["central_iters"] = int(clf.n_iter_[0])
    net.compute_at_hub(int(clf.n_iter_[0]) * pass_flops(n, nnz(X)))
    return np.concatenate([clf.coef_.ravel(), clf.intercept_]).astype(np.float64)


def run_lbfgs(net: Network, s: Settings) -> np.ndarray:
    """Distributed L-BFGS (scipy's L-BFGS-B at the hub) on the summed per-DC losses and gradients:
    every function evaluation is one round of distributed_loss_grad (Cano et al. 2016's
    statistical-query formulation)."""
    shards = {dc.name: [(dc.X[sl], dc.y[sl]) for sl in dc.shards()] for dc in net.dcs}
    res = minimize(lambda th: distributed_loss_grad(net, th, s.lam, shards), np.zeros(_dims(net) + 1),
                   jac=True, method="L-BFGS-B", options={"maxiter": s.lbfgs_maxiter, "gtol": s.tol, "ftol": 1e-15})
    return res.x


def local_sgd(X, y: np.ndarray, theta0: np.ndarray, lam: float, lr: float, steps: int, batch_size: int,
              rng: np.random.Generator, mu: float = 0.0) -> tuple[np.ndarray, float]:
    """``steps`` mini-batch SGD steps on one DC's local objective
        (1/|B|) sum_{i in B} loss_i + (lam/2)||w||^2 + (mu/2)||theta - theta0||^2
    (mu > 0: FedProx, Li et al. 2020). batch_size 0 or >= n means full-batch gradient descent.
    Batches walk a fresh permutation of the rows each pass. Returns (theta (d+1,), flops)."""
    n = len(y)
    theta = theta0.copy()
    flops = 0.0
    full = batch_size <= 0 or batch_size >= n
    Xp, yp, pos = X, y, n
    for _ in range(steps):
        if full:
            Xb, yb = X, y
        else:
            if pos + batch_size > n:
                perm = rng.permutation(n)
                Xp, yp, pos = X[perm], y[perm], 0
            Xb, yb = Xp[pos:pos + batch_size], yp[pos:pos + batch_size]
            pos += batch_size
        _, g = objective(Xb, yb, theta, lam)
        if mu:
            g += mu * (theta - theta0)
        theta -= lr * g
        flops += pass_flops(len(yb), nnz(Xb))
    return theta, flops


def local_lr(X, lam: float, iters: int = 30, seed: int = 0) -> float:
    """The classical 1/L step for a DC's local objective: L = lam + lambda_max(X^T X / n) / 4,
    the largest eigenvalue found by power iteration (iters multiplications by X and X^T; a
    one-time local setup, not accounted in the ledger). For sparse one-hot data L is far below
    the bound mean ||x||^2 / 4, so the step is much larger than that bound allows."""
    n, d = X.shape
    v = np.random.default_rng(seed).normal(size=d)
    lam_max = 0.0
    for _ in range(iters):
        u = np.asarray(X.T @ np.asarray(X @ v).ravel()).ravel() / n
        lam_max = float(np.sqrt(np.sum(u * u)))
        if lam_max == 0.0:
            break
        v = u / lam_max
    return 1.0 / (lam + lam_max / 4.0)


def _local_round(net: Network, theta: np.ndarray, s: Settings, rng: np.random.Generator, mu: float,
                 ef: ErrorFeedback | None = None) -> np.ndarray:
    """One round of local training on every DC from theta; returns the n_k-weighted average of
    the local models. With ef, each DC sends its compressed update theta_k - theta instead."""
    d1 = len(theta)
    up, flops, ar = {}, {}, {}
    for dc in net.dcs:
        lr = s.lr if s.lr > 0 else net.notes.setdefault("local_lr", {}).get(dc.name) or local_lr(dc.X, s.lam)
        if s.lr <= 0:
            net.notes["local_lr"][dc.name] = lr
        th, f = local_sgd(dc.X, dc.y, theta, s.lam, lr, s.local_steps, s.batch_size, rng, mu)
        up[dc.name] = np.concatenate([th, [float(dc.n)]]) if ef is None else ef.send(dc.name, th - theta, float(dc.n))
        flops[dc.name] = f
        ar[dc.name] = s.local_steps
    # inside a DC every local step allreduces a full-precision gradient (d+1 values and a count)
    net.round(theta.copy(), up, flops, ar, allreduce_nbytes=8 * (d1 + 1))
    acc = np.zeros(d1)
    n = 0.0
    for dc in net.dcs:
        if ef is None:
            vec, w = up[dc.name][:-1], up[dc.name][-1]
        else:
            delta, w = decode(ef.spec, up[dc.name], d1)
            vec = theta + delta
        acc += w * vec
        n += w
    return acc / n


def _ef(s: Settings) -> ErrorFeedback | None:
    return None if s.compress == "none" else ErrorFeedback(s.compress)


def run_fedavg(net: Network, s: Settings, mu: float = 0.0) -> np.ndarray:
    """FedAvg (McMahan et al. 2017): per round each DC runs local_steps SGD steps from the global
    model and the hub averages the local models weighted by n_k. mu > 0 gives FedProx."""
    rng = np.random.default_rng(s.seed)
    theta = np.zeros(_dims(net) + 1)
    ef = _ef(s)
    for _ in range(s.rounds):
        theta = _local_round(net, theta, s, rng, mu, ef)
    return theta


def run_fedprox(net: Network, s: Settings) -> np.ndarray:
    """FedProx (Li et al., MLSys 2020): FedAvg with the proximal term (mu/2)||theta - theta_g||^2."""
    return run_fedavg(net, s, mu=s.mu)


def run_diloco(net: Network, s: Settings) -> np.ndarray:
    """DiLoCo (Douillard et al. 2023): local_steps inner SGD steps per DC, then an outer step on
    the outer gradient delta = theta_g - avg_k(theta_k) (n_k-weighted) with Nesterov momentum:
    v = m v + delta; theta_g -= outer_lr (delta + m v). (The paper's inner optimizer is AdamW; plain
    SGD here.) With one full-batch inner step, m = 0 and outer_lr = 1 this is synchronous gradient
    descent."""
    rng = np.random.default_rng(s.seed)
    theta = np.zeros(_dims(net) + 1)
    v = np.zeros_like(theta)
    ef = _ef(s)
    for _ in range(s.rounds):
        avg = _local_round(net, theta, s, rng, 0.0, ef)
        delta = theta - avg
        v = s.outer_momentum * v + delta
        theta = theta - s.outer_lr * (delta + s.outer_momentum * v)
    return theta


def run_oneshot(net: Network, s: Settings) -> np.ndarray:
    """One-shot parameter averaging (Zhang, Duchi, Wainwright, JMLR 2013): each DC minimizes its
    own regularized objective to convergence (L-BFGS, data parallel inside the DC), sends its model
    once, and the hub averages weighted by n_k. One round, no broadcast."""
    d1 = _dims(net) + 1
    up, flops, ar = {}, {}, {}
    for dc in net.dcs:
        res = minimize(lambda th: objective(dc.X, dc.y, th, s.lam), np.zeros(d1), jac=True, method="L-BFGS-B",
                       options={"maxiter": s.lbfgs_maxiter, "gtol": s.tol, "ftol": 1e-15})
        up[dc.name] = np.concatenate([res.x, [float(dc.n)]])
        flops[dc.name] = res.nfev * pass_flops(dc.n, dc.nnz)
        ar[dc.name] = int(res.nfev)
    net.notes["oneshot_passes"] = ar
    net.round(None, up, flops, ar)
    acc = np.zeros(d1)
    for dc in net.dcs:
        acc += up[dc.name][-1] * up[dc.name][:-1]
    return acc / _n_total(net)


def run_fadl(net: Network, s: Settings) -> np.ndarray:
    """FADL-style local functional approximation (Mahajan, Keerthi, Sundararajan, Bottou, JMLR
    2017; the same local model as DANE, Shamir, Srebro, Zhang 2014). Each outer iteration:
    (1) a gradient round gives g = grad F(theta_r); (2) the hub broadcasts g and each DC k
    minimizes, with fadl_local_iters L-BFGS iterations, its local loss scaled to the whole data
    plus a linear correction that makes the approximation's gradient at theta_r equal g:
        f_k(theta) = (1/n_k) L_k(theta) + (lam/2)||w||^2 + (g - grad_k(theta_r)) . (theta - theta_r)
    and returns its minimizer (with n_k); the hub forms the n_k-weighted direction
    dir = avg_k theta_k - theta_r; (3) a line-search round: every DC returns its loss sums at
    theta_r + a * dir for the a in FADL_STEPS, and the hub takes the largest a meeting Armijo's
    condition (else the best). Three rounds per iteration; many fewer iterations than L-BFGS."""
    d1 = _dims(net) + 1
    n_tot = _n_total(net)
    theta = np.zeros(d1)
    shards = {dc.name: [(dc.X[sl], dc.y[sl]) for sl in dc.shards()] for dc in net.dcs}
    passes_log = []
    for _ in range(s.fadl_iters):
        f0, g = distributed_loss_grad(net, theta, s.lam, shards)
        up, flops, ar, passes = {}, {}, {}, {}
        for dc in net.dcs:
            _, gk = objective(dc.X, dc.y, theta, s.lam)  # the DC's own gradient at theta_r (known from round 1)
            corr = g - gk
            res = minimize(lambda th: _fadl_local(dc.X, dc.y, th, s.lam, corr, theta), theta.copy(), jac=True,
                           method="L-BFGS-B", options={"maxiter": s.fadl_local_iters, "gtol": s.tol * 1e-2, "ftol": 1e-15})
            up[dc.name] = np.concatenate([res.x, [float(dc.n)]])
            passes[dc.name] = int(res.nfev)
            flops[dc.name] = res.nfev * pass_flops(dc.n, dc.nnz)
        passes_log.append(passes)
        net.round(g.copy(), up, flops, passes)
        direction = sum(up[dc.name][-1] * up[dc.name][:-1] for dc in net.dcs) / n_tot - theta
        # line search round: loss sums at each trial point, one value per step size
        up, flops = {}, {}
        for dc in net.dcs:
            vals = np.empty(len(FADL_STEPS))
            for i, a in enumerate(FADL_STEPS):
                th = theta + a * direction
                z = np.asarray(dc.X @ th[:-1]).ravel() + th[-1]
                vals[i] = np.sum(np.logaddexp(0.0, z) - dc.y * z)
            up[dc.name] = vals
            flops[dc.name] = len(FADL_STEPS) * pass_flops(dc.n, dc.nnz)
        net.round(direction.copy(), up, flops)
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
        theta = theta + a * direction
    net.notes["fadl_passes"] = passes_log
    return theta


def _fadl_local(X, y, th, lam, corr, theta_r):
    f, gr = objective(X, y, th, lam)
    return f + float(np.sum(corr * (th - theta_r))), gr + corr


RUNNERS = {
    "centralize": run_centralize,
    "lbfgs": run_lbfgs,
    "fedavg": run_fedavg,
    "fedprox": run_fedprox,
    "diloco": run_diloco,
    "oneshot": run_oneshot,
    "fadl": run_fadl,
}


def run(name: str, net: Network, s: Settings) -> np.ndarray:
    """Run algorithm ``name`` (one of ALGORITHMS) on net. Raises GeodmlError for an unknown name,
    SovereigntyError where the algorithm would export a sovereign DC's raw rows."""
    if name not in RUNNERS:
        raise GeodmlError(f"unknown algorithm {name!r} (known: {', '.join(ALGORITHMS)})")
    return RUNNERS[name](net, s)
