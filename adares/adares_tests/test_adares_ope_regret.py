"""Off-policy estimates cover the true value of a policy in a synthetic contextual environment
with known mean rewards, and the bandit learner's regret against the known best action grows
sublinearly."""

import numpy as np
import pytest

from adares.learner import CBLearner
from adares.ope import dr, ips, ridge_reward_model, snips

K, D = 4, 3


def _env(seed):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(K, D)), rng.normal(size=K) * 0.5


def _softmax(s):
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _logged(theta, b, n, rng):
    x = rng.normal(size=(n, D))
    mean = x @ theta.T + b                              # (n, K) true mean rewards
    logging = _softmax(0.5 * x @ rng.normal(size=(D, K)))
    a = (logging.cumsum(axis=1) > rng.random(n)[:, None]).argmax(axis=1)
    r = mean[np.arange(n), a] + rng.normal(size=n) * 0.5
    return x, mean, logging, a, r


def _target(x, theta, b):
    # An epsilon-greedy policy on a noisy copy of the true model: a policy worth evaluating.
    scores = x @ (theta + 0.3).T + b
    t = np.full((len(x), K), 0.1 / K)
    t[np.arange(len(x)), scores.argmax(axis=1)] += 0.9
    return t


def test_ope_estimates_cover_the_true_value():
    theta, b = _env(11)
    big = np.random.default_rng(99).normal(size=(400_000, D))
    true = float(((big @ theta.T + b) * _target(big, theta, b)).sum(axis=1).mean())
    covered = {"ips": 0, "snips": 0, "dr": 0}
    reps = 30
    for rep in range(reps):
        rng = np.random.default_rng(rep)
        x, _, logging, a, r = _logged(theta, b, 3000, rng)
        p = logging[np.arange(len(a)), a]
        tgt = _target(x, theta, b)
        q = ridge_reward_model(x, a, r, K, seed=rep)
        est = {"ips": ips(a, p, r, tgt), "snips": snips(a, p, r, tgt), "dr": dr(a, p, r, tgt, q)}
        for k, e in est.items():
            covered[k] += e.covers(true)
        # DR's interval is narrower than IPS's: the reward model removes most variance.
        assert est["dr"].high - est["dr"].low < est["ips"].high - est["ips"].low
    # 95% intervals: over 30 replications each covers the true value at least 80% of the time
    # (P[Binomial(30, 0.95) < 24] < 0.2%).
    for k, c in covered.items():
        assert c / reps >= 0.8, (k, c)


def test_ope_rejects_bad_propensities():
    with pytest.raises(ValueError):
        ips(np.array([0]), np.array([0.0]), np.array([1.0]), np.ones((1, 2)) / 2)


def test_bandit_regret_is_sublinear():
    theta, b = _env(3)
    rng = np.random.default_rng(0)
    learner = CBLearner(K, exploration="--squarecb", seed=0)
    T = 3000
    regret = np.zeros(T)
    for t in range(T):
        x = rng.normal(size=(1, D))
        mean_cost = (x @ theta.T + b)[0]              # the learner minimizes cost
        shared = learner.shared_lines(x)
        a, p, _ = learner.choose(shared)
        c = mean_cost[a[0]] + rng.normal() * 0.1
        learner.learn(shared, a, p, np.array([c]))
        regret[t] = mean_cost[a[0]] - mean_cost.min()
    cum = np.cumsum(regret)
    ts = np.arange(1, T + 1)
    slope = np.polyfit(np.log(ts[T // 4:]), np.log(cum[T // 4:]), 1)[0]
    assert slope < 0.8, slope                          # R(T) ~ T^slope, linear would be 1
    assert cum[-1] / cum[T // 2 - 1] < 1.6             # the second half adds less than the first
    assert regret[-500:].mean() < 0.25 * regret[:500].mean()


def test_ridge_cb_learns_the_best_action_and_reports_exact_propensities():
    from adares.learner import RidgeCB

    theta, b = _env(7)
    rng = np.random.default_rng(1)
    cb = RidgeCB(K, exploration="--epsilon 0.1", seed=0)
    for _ in range(40):
        x = rng.normal(size=(50, D))
        sh = cb.shared_lines(x)
        allowed = rng.random((50, K)) < 0.8
        allowed[:, 0] = True
        a, p, pmf = cb.choose(sh, allowed)
        assert np.allclose(pmf.sum(axis=1), 1) and (pmf[~allowed] == 0).all()
        assert allowed[np.arange(50), a].all() and np.allclose(p, pmf[np.arange(50), a])
        assert (p >= 0.1 / K - 1e-12).all()
        cost = (x @ theta.T + b)[np.arange(50), a] + rng.normal(size=50) * 0.1
        cb.learn(sh, a, p, cost)
    x = rng.normal(size=(2000, D))
    best = np.argmin(x @ theta.T + b, axis=1)
    assert (cb.greedy(cb.shared_lines(x)) == best).mean() > 0.95
