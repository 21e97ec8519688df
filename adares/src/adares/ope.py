"""Off-policy evaluation of a target policy from logged bandit data (numpy).

Estimators of V(pi) = E_x[sum_a pi(a|x) r(x, a)] from n logged rows (x_i, a_i, p_i, r_i), where
p_i is the logging policy's probability of a_i:
- IPS (Horvitz and Thompson, 1952): mean(w_i r_i), w_i = pi(a_i|x_i) / p_i;
- SNIPS (Swaminathan and Joachims, NeurIPS 2015): sum(w_i r_i) / sum(w_i);
- DR (Dudik, Langford and Li, ICML 2011): mean(sum_a pi(a|x_i) q(x_i, a) + w_i (r_i - q(x_i, a_i)))
  with a reward model q (``ridge_reward_model``: per-action ridge regression, cross-fitted).
Confidence intervals: normal approximation with the sample standard error (delta method for
SNIPS), at level ``level``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import norm


@dataclass(frozen=True)
class Estimate:
    """An estimate of a policy's value with its confidence interval and the importance
    weights' effective sample size (sum w)^2 / sum w^2."""

    value: float
    low: float
    high: float
    n: int
    ess: float

    def covers(self, x: float) -> bool:
        """low <= x <= high."""
        return self.low <= x <= self.high


def _check(actions: np.ndarray, probs: np.ndarray, rewards: np.ndarray, target: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray]:
    n = len(rewards)
    if actions.shape != (n,) or probs.shape != (n,) or target.ndim != 2 or target.shape[0] != n:
        raise ValueError("actions, probs, rewards: (n,); target: (n, K)")
    if np.any(probs <= 0) or np.any(probs > 1):
        raise ValueError("logged probabilities must lie in (0, 1]")
    w = target[np.arange(n), actions] / probs
    return w, np.asarray(rewards, dtype=np.float64)


def _ci(values: np.ndarray, center: float, level: float, w: np.ndarray) -> Estimate:
    n = len(values)
    se = float(values.std(ddof=1) / np.sqrt(n)) if n > 1 else float("inf")
    z = float(norm.ppf(0.5 + level / 2))
    ess = float(w.sum() ** 2 / max((w**2).sum(), 1e-300))
    return Estimate(center, center - z * se, center + z * se, n, ess)


def ips(actions: np.ndarray, probs: np.ndarray, rewards: np.ndarray, target: np.ndarray,
        level: float = 0.95) -> Estimate:
    """Inverse propensity scoring. target: (n, K) probabilities of the evaluated policy."""
    w, r = _check(actions, probs, rewards, target)
    terms = w * r
    return _ci(terms, float(terms.mean()), level, w)


def snips(actions: np.ndarray, probs: np.ndarray, rewards: np.ndarray, target: np.ndarray,
          level: float = 0.95) -> Estimate:
    """Self-normalized IPS; the interval from the delta method's linearization."""
    w, r = _check(actions, probs, rewards, target)
    v = float((w * r).sum() / w.sum())
    infl = w * (r - v) / w.mean()
    n = len(r)
    se = float(infl.std(ddof=1) / np.sqrt(n))
    z = float(norm.ppf(0.5 + level / 2))
    ess = float(w.sum() ** 2 / max((w**2).sum(), 1e-300))
    return Estimate(v, v - z * se, v + z * se, n, ess)


def dr(actions: np.ndarray, probs: np.ndarray, rewards: np.ndarray, target: np.ndarray,
       q: np.ndarray, level: float = 0.95) -> Estimate:
    """Doubly robust. q: (n, K) predicted reward of every action for every row (fitted on
    other rows than the one it predicts, e.g. ``ridge_reward_model``)."""
    w, r = _check(actions, probs, rewards, target)
    if q.shape != target.shape:
        raise ValueError("q must have the shape of target")
    n = len(r)
    terms = (target * q).sum(axis=1) + w * (r - q[np.arange(n), actions])
    return _ci(terms, float(terms.mean()), level, w)


def ridge_reward_model(x: np.ndarray, actions: np.ndarray, rewards: np.ndarray, n_actions: int,
                       folds: int = 2, alpha: float = 1.0, seed: int = 0) -> np.ndarray:
    """Cross-fitted per-action ridge regression of reward on context (scikit-learn).

    x: (n, d); returns q: (n, K), each row predicted by models fitted on the other folds.
    Actions never logged in the training folds get the training folds' mean reward.
    """
    from sklearn.linear_model import Ridge

    n = len(rewards)
    fold = np.random.default_rng(seed).integers(0, folds, n)
    q = np.zeros((n, n_actions))
    for f in range(folds):
        test, train = fold == f, fold != f
        fallback = float(rewards[train].mean()) if train.any() else 0.0
        for a in range(n_actions):
            sel = train & (actions == a)
            if sel.sum() < 2:
                q[test, a] = fallback
                continue
            q[test, a] = Ridge(alpha=alpha).fit(x[sel], rewards[sel]).predict(x[test])
    return q


def fixed_policy(allowed: np.ndarray, multipliers: np.ndarray, m: float) -> np.ndarray:
    """Target probabilities (n, K) of "size = m x base": the smallest allowed multiplier >= m,
    else the largest allowed one. allowed: (n, K) bool."""
    allowed = np.asarray(allowed, dtype=bool)
    ok = allowed & (np.asarray(multipliers)[None, :] >= m - 1e-12)
    k_any = allowed.shape[1] - 1 - np.argmax(allowed[:, ::-1], axis=1)
    k = np.where(ok.any(axis=1), np.argmax(ok, axis=1), k_any)
    out = np.zeros(allowed.shape)
    out[np.arange(len(k)), k] = 1.0
    return out


def evaluate_log(log, multipliers: np.ndarray, targets: list[float], level: float = 0.95,
                 seed: int = 0) -> dict[str, dict[str, dict[str, float]]]:
    """Off-policy estimates of the cost of each fixed-multiplier target (and of the logging
    policy itself, "logged") from a bandit decision log, per resource: IPS, SNIPS and DR
    (cross-fitted ridge on the logged contexts, its folds drawn with ``seed``). Values are mean
    costs per decision (lower is better), with their intervals."""
    res = np.asarray(log.resource)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for r in ("cpu", "mem"):
        rows = np.flatnonzero(res == r)
        if rows.size < 10:
            continue
        x = np.vstack([log.context[i] for i in rows])
        allowed = np.vstack([log.allowed[i] for i in rows])
        a = np.asarray(log.action)[rows]
        p = np.asarray(log.prob)[rows]
        c = np.asarray(log.cost)[rows]
        k = allowed.shape[1]
        q = ridge_reward_model(x, a, c, k, seed=seed)
        per: dict[str, dict[str, float]] = {"logged": {"mean": float(c.mean()), "n": float(len(c))}}
        for m in targets:
            tgt = fixed_policy(allowed, multipliers, m)
            row: dict[str, float] = {}
            for name, est in (("ips", ips(a, p, c, tgt, level)), ("snips", snips(a, p, c, tgt, level)),
                              ("dr", dr(a, p, c, tgt, q, level))):
                row[name], row[f"{name}_low"], row[f"{name}_high"] = est.value, est.low, est.high
            row["ess"] = est.ess
            per[f"x{m:g}"] = row
        out[r] = per
    return out
