"""The models geodml trains, each a flat float64 parameter vector theta with its objective
F(theta) = (1/N) sum_i logloss_i + (lam/2) ||weights||^2 (biases not penalized, as scikit-learn):

- ``logreg``: L2-regularized logistic regression (objective.py), theta = [w (d,), b]; d + 1
  parameters; starts at zero.
- ``mlp:H`` (``mlp`` = ``mlp:32``): one hidden layer of H ReLU units and a sigmoid output,
  theta = [W1 (d*H, row-major d x H), b1 (H,), w2 (H,), b2]; d*H + 2H + 1 parameters; starts at
  He-uniform weights from the run's seed (zero is a saddle point of an MLP). Its loss and
  gradient equal scikit-learn's MLPClassifier(activation="relu") with alpha = lam * N (tested
  against its _backprop).

Messages of model-exchange algorithms carry n_params float64 values (the planner's cost model
treats a model of P parameters as d = P - 1 features).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from geodml import objective as lr_objective
from geodml.errors import GeodmlError


@dataclass(frozen=True)
class LogReg:
    """L2-regularized logistic regression (objective.py)."""

    name: str = "logreg"

    def n_params(self, d: int) -> int:
        """d + 1."""
        return d + 1

    def init(self, d: int, seed: int) -> np.ndarray:
        """Zeros (d+1,) float64 (the problem is convex)."""
        return np.zeros(d + 1)

    def objective(self, X, y: np.ndarray, theta: np.ndarray, lam: float) -> tuple[float, np.ndarray]:
        """F on these rows and its gradient (objective.objective)."""
        return lr_objective.objective(X, y, theta, lam)

    def predict_proba(self, X, theta: np.ndarray) -> np.ndarray:
        """P(y = 1 | x): (n,) float64."""
        return lr_objective.predict_proba(X, theta)

    def pass_flops(self, n_rows: float, n_nnz: float) -> float:
        """Flops of one loss+gradient pass (objective.pass_flops)."""
        return lr_objective.pass_flops(n_rows, n_nnz)


@dataclass(frozen=True)
class MLP:
    """One hidden layer of ``hidden`` ReLU units, sigmoid output, log loss (see the module docstring)."""

    hidden: int = 32
    name: str = "mlp"

    def n_params(self, d: int) -> int:
        """d*H + 2H + 1."""
        return d * self.hidden + 2 * self.hidden + 1

    def unpack(self, theta: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        """Views (W1 (d, H), b1 (H,), w2 (H,), b2) of theta."""
        H = self.hidden
        return theta[: d * H].reshape(d, H), theta[d * H: d * H + H], theta[d * H + H: d * H + 2 * H], float(theta[-1])

    def init(self, d: int, seed: int) -> np.ndarray:
        """He-uniform weights (limit sqrt(6 / fan_in)), zero biases; (n_params,) float64."""
        rng = np.random.default_rng([seed, 7])
        H = self.hidden
        theta = np.zeros(self.n_params(d))
        theta[: d * H] = rng.uniform(-1, 1, d * H) * np.sqrt(6.0 / d)
        theta[d * H + H: d * H + 2 * H] = rng.uniform(-1, 1, H) * np.sqrt(6.0 / H)
        return theta

    def _forward(self, X, theta: np.ndarray):
        d = X.shape[1]
        W1, b1, w2, b2 = self.unpack(theta, d)
        a = np.asarray(X @ W1) + b1
        h = np.maximum(a, 0.0)
        return W1, w2, a, h, h @ w2 + b2

    def objective(self, X, y: np.ndarray, theta: np.ndarray, lam: float) -> tuple[float, np.ndarray]:
        """F on these rows (normalized by their count) and its gradient (n_params,) float64, by
        backpropagation."""
        n, d = X.shape
        W1, w2, a, h, z = self._forward(X, theta)
        loss = float(np.sum(np.logaddexp(0.0, z) - y * z)) / n
        r = (expit(z) - y) / n  # dF/dz
        g = np.empty_like(theta)
        H = self.hidden
        dh = np.outer(r, w2) * (a > 0)
        g[: d * H] = (np.asarray(X.T @ dh) + lam * W1).ravel()
        g[d * H: d * H + H] = dh.sum(axis=0)
        g[d * H + H: d * H + 2 * H] = h.T @ r + lam * w2
        g[-1] = r.sum()
        reg = 0.5 * lam * (float(np.sum(W1 * W1)) + float(np.sum(w2 * w2)))
        return loss + reg, g

    def predict_proba(self, X, theta: np.ndarray) -> np.ndarray:
        """P(y = 1 | x): (n,) float64."""
        return expit(self._forward(X, theta)[4])

    def pass_flops(self, n_rows: float, n_nnz: float) -> float:
        """Flops of one forward+backward pass: 4 per non-zero and hidden unit (X W1, X^T dh), about
        10 per row and hidden unit (ReLU, output layer, their gradients)."""
        return self.hidden * (4.0 * n_nnz + 10.0 * n_rows)


def get(spec: str):
    """The model of a spec: ``logreg``, ``mlp`` or ``mlp:H`` (H >= 1 hidden units). Raises
    GeodmlError for anything else."""
    kind, _, arg = spec.partition(":")
    if kind == "logreg" and not arg:
        return LogReg()
    if kind == "mlp":
        try:
            h = int(arg) if arg else 32
        except ValueError:
            h = 0
        if h >= 1:
            return MLP(h)
    raise GeodmlError(f"unknown model {spec!r} (use logreg, mlp or mlp:HIDDEN)")
