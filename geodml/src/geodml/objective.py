"""L2-regularized logistic regression, written as sums over examples (a statistical-query
learner: the loss and gradient of the union of partitions are sums of per-partition terms).

Global objective over N rows (labels y in {0, 1}, intercept b not penalized, as scikit-learn):
    F(w, b) = (1/N) * sum_i [log(1 + exp(z_i)) - y_i z_i] + (lam/2) ||w||^2,   z_i = x_i.w + b
which is scikit-learn's LogisticRegression(C) objective divided by C*N when lam = 1/(C*N).
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

# Flop model of one pass over the rows (z = Xw: 2 flops/non-zero; X^T r: 2 flops/non-zero;
# sigmoid, loss and residual: ~10 flops/row). Used for simulated compute seconds.
FLOPS_PER_NNZ = 4.0
FLOPS_PER_ROW = 10.0


def nnz(X) -> int:
    """Stored non-zeros of a CSR matrix, or n*d for a dense array."""
    return int(X.nnz) if hasattr(X, "nnz") else int(np.asarray(X).size)


def pass_flops(n_rows: int, n_nnz: int) -> float:
    """Flops of one loss+gradient pass over n_rows rows holding n_nnz non-zeros."""
    return FLOPS_PER_NNZ * n_nnz + FLOPS_PER_ROW * n_rows


def loss_grad_sum(X, y: np.ndarray, w: np.ndarray, b: float) -> tuple[float, np.ndarray, float]:
    """Sum over rows of the logistic loss and its gradient (no regularizer, no 1/N).

    X: (n, d) dense or CSR; y: (n,) in {0, 1}; w: (d,) float64; b: intercept.
    Returns (loss_sum, grad_w_sum (d,) float64, grad_b_sum).
    """
    z = np.asarray(X @ w, dtype=np.float64).ravel() + b
    loss = float(np.sum(np.logaddexp(0.0, z) - y * z))
    r = expit(z) - y
    g = np.asarray(X.T @ r, dtype=np.float64).ravel()
    return loss, g, float(r.sum())


def objective(X, y: np.ndarray, theta: np.ndarray, lam: float, n_total: int | None = None) -> tuple[float, np.ndarray]:
    """F(theta) and its gradient on one machine; theta = [w (d,), b]. Normalized by n_total
    (default the rows of X). Returns (value, gradient (d+1,) float64)."""
    n = len(y) if n_total is None else n_total
    w, b = theta[:-1], theta[-1]
    loss, gw, gb = loss_grad_sum(X, y, w, b)
    # np.sum(w * w), not w @ w: a BLAS ddot can stall on spinning OpenBLAS threads of a busy machine.
    val = loss / n + 0.5 * lam * float(np.sum(w * w))
    grad = np.empty_like(theta)
    grad[:-1] = gw / n + lam * w
    grad[-1] = gb / n
    return val, grad


def predict_proba(X, theta: np.ndarray) -> np.ndarray:
    """P(y = 1 | x) for each row of X: (n,) float64."""
    return expit(np.asarray(X @ theta[:-1], dtype=np.float64).ravel() + theta[-1])
