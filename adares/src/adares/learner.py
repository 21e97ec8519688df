"""A contextual-bandit learner with action-dependent features on Vowpal Wabbit's
``cb_explore_adf`` (Li et al., "A Contextual-Bandit Approach to Personalized News Article
Recommendation", WWW 2010, for ADF; Foster and Rakhlin, "Beyond UCB", ICML 2020, for SquareCB).

Contexts are float vectors (shared namespace C); each action k has the features ``a{k}`` plus
the given numeric features (namespace A); ``-q CA`` makes the cost model per action linear in
the context. Costs: lower is better. Choices are sampled from VW's pmf with a numpy generator
(seeded), and returned with their probabilities (propensities) for off-policy evaluation.
"""

from __future__ import annotations

import numpy as np

from adares.errors import InputError

#: Learner backends of the bandit: numpy (``RidgeCB``) or Vowpal Wabbit (``CBLearner``).
BANDIT_BACKENDS = ("numpy", "vw")


def check_backend(backend: str) -> str:
    """``backend`` if it is one of BANDIT_BACKENDS; InputError (one line) otherwise."""
    if backend not in BANDIT_BACKENDS:
        raise InputError(f"unknown bandit backend {backend!r} ({', '.join(BANDIT_BACKENDS)})")
    return backend


def _fmt_shared(ctx: np.ndarray) -> str:
    return "shared |C " + " ".join(f"f{j}:{v:.4f}" for j, v in enumerate(ctx))


class CBLearner:
    """``n_actions`` actions with optional numeric features ``action_features`` (K, m).

    exploration: a VW exploration spec, e.g. "--epsilon 0.05" (epsilon-greedy) or "--squarecb".
    Raises ValueError on an action mask that allows nothing.
    """

    def __init__(self, n_actions: int, action_features: np.ndarray | None = None,
                 exploration: str = "--epsilon 0.05", seed: int = 0) -> None:
        import vowpalwabbit

        self.k = n_actions
        feats = [] if action_features is None else np.asarray(action_features, dtype=np.float64)
        self._actions = []
        for a in range(n_actions):
            extra = "" if action_features is None else " " + " ".join(
                f"x{j}:{v:.5f}" for j, v in enumerate(feats[a]))
            self._actions.append(f"|A a{a}{extra}")
        self._vw = vowpalwabbit.Workspace(
            f"--cb_explore_adf {exploration} -q CA --quiet --random_seed {seed}",
            enable_logging=False)
        self._rng = np.random.default_rng(seed)
        self.decisions = 0

    def shared_lines(self, contexts: np.ndarray) -> list[str]:
        """VW text of each context row (reuse it for ``choose`` and ``learn``)."""
        return [_fmt_shared(row) for row in np.asarray(contexts, dtype=np.float64)]

    def choose(self, shared: list[str], allowed: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sample one action per context. Returns (actions (n,) int64, their probabilities (n,),
        full pmfs (n, K) with zeros on masked actions)."""
        n = len(shared)
        allowed = np.ones((n, self.k), dtype=bool) if allowed is None else allowed
        chosen = np.zeros(n, dtype=np.int64)
        probs = np.zeros(n)
        pmfs = np.zeros((n, self.k))
        u = self._rng.random(n)
        for i in range(n):
            idx = np.flatnonzero(allowed[i])
            if idx.size == 0:
                raise ValueError("an action mask allows no action")
            # One multi-line string parses faster in pyvw than a list of lines (same examples).
            pmf = np.asarray(self._vw.predict("\n".join([shared[i]] + [self._actions[k] for k in idx])))
            pmf = pmf / pmf.sum()
            j = min(int(np.searchsorted(np.cumsum(pmf), u[i], side="right")), idx.size - 1)
            chosen[i], probs[i] = idx[j], pmf[j]
            pmfs[i, idx] = pmf
        self.decisions += n
        return chosen, probs, pmfs

    def learn(self, shared: list[str], chosen: np.ndarray, probs: np.ndarray, costs: np.ndarray,
              allowed: np.ndarray | None = None) -> None:
        """Update on logged (context, action, probability, cost) rows."""
        n = len(shared)
        allowed = np.ones((n, self.k), dtype=bool) if allowed is None else allowed
        for i in range(n):
            lines = [shared[i]]
            for k in np.flatnonzero(allowed[i]):
                a = self._actions[k]
                lines.append(f"0:{costs[i]:.6f}:{probs[i]:.6f} {a}" if k == chosen[i] else a)
            self._vw.learn("\n".join(lines))

    def greedy(self, shared: list[str], allowed: np.ndarray | None = None) -> np.ndarray:
        """The exploitation choice per context (the action VW scores lowest cost)."""
        n = len(shared)
        allowed = np.ones((n, self.k), dtype=bool) if allowed is None else allowed
        out = np.zeros(n, dtype=np.int64)
        for i in range(n):
            idx = np.flatnonzero(allowed[i])
            pmf = np.asarray(self._vw.predict("\n".join([shared[i]] + [self._actions[k] for k in idx])))
            out[i] = idx[int(np.argmax(pmf))]
        return out


class RidgeCB:
    """The same contextual bandit in numpy, vectorized over contexts: per action a ridge
    regression of cost on the context (the direct method, as in LinUCB's per-arm models, Li et
    al. 2010), epsilon-greedy over the allowed actions, propensities exact. Same interface as
    CBLearner (contexts instead of VW text): ``shared_lines`` returns the context array itself.
    """

    def __init__(self, n_actions: int, action_features: np.ndarray | None = None,
                 exploration: str = "--epsilon 0.05", seed: int = 0, l2: float = 1.0,
                 span: int | None = None) -> None:
        parts = exploration.split()
        if len(parts) != 2 or parts[0] != "--epsilon":
            raise ValueError("the numpy backend explores with '--epsilon E' only")
        self.k, self.epsilon, self.l2 = n_actions, float(parts[1]), l2
        # Local exploration: explore only among the allowed actions within ``span`` places of
        # the greedy one (None: all of them), so an exploratory size is near the one the model
        # prefers instead of anywhere on the grid.
        self.span = n_actions if span is None else span
        self._rng = np.random.default_rng(seed)
        self._a: np.ndarray | None = None
        self.decisions = 0

    def shared_lines(self, contexts: np.ndarray) -> np.ndarray:
        """The contexts with an intercept column, float64 (n, d + 1)."""
        x = np.asarray(contexts, dtype=np.float64)
        return np.column_stack([np.ones(len(x)), x])

    def _init(self, d: int) -> None:
        self._a = np.repeat(np.eye(d)[None] * self.l2, self.k, axis=0)
        self._b = np.zeros((self.k, d))
        self._theta = np.zeros((self.k, d))

    def _pred(self, x: np.ndarray) -> np.ndarray:
        if self._a is None:
            self._init(x.shape[1])
        return x @ self._theta.T

    def choose(self, shared: np.ndarray, allowed: np.ndarray | None = None,
               default: np.ndarray | None = None, conservative: float = 0.0
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sample one action per context: (actions, probabilities, pmfs (n, K)).

        ``default`` (n,) int: a safe action per context (the rule without learning); the
        exploitation choice leaves it only where the model predicts a cost lower by more than
        ``conservative`` x |its predicted cost| (a conservative bandit, after Wu et al.,
        "Conservative Bandits", ICML 2016)."""
        n = len(shared)
        allowed = np.ones((n, self.k), dtype=bool) if allowed is None else allowed
        if not allowed.any(axis=1).all():
            raise ValueError("an action mask allows no action")
        pred = np.where(allowed, self._pred(shared), np.inf)
        greedy = np.argmin(pred, axis=1)
        if default is not None and conservative > 0:
            rows = np.arange(n)
            p_def = pred[rows, default]
            gain = p_def - pred[rows, greedy]
            greedy = np.where(gain > conservative * np.abs(p_def), greedy, default)
        near = allowed & (np.abs(np.arange(self.k)[None, :] - greedy[:, None]) <= self.span)
        pmf = near * (self.epsilon / near.sum(axis=1, keepdims=True))
        pmf[np.arange(n), greedy] += 1.0 - self.epsilon
        u = self._rng.random(n)
        chosen = np.minimum((pmf.cumsum(axis=1) <= u[:, None]).sum(axis=1), self.k - 1)
        # Never land on a masked action through rounding at the top of the cumulative sum.
        chosen = np.where(allowed[np.arange(n), chosen], chosen, greedy)
        self.decisions += n
        return chosen, pmf[np.arange(n), chosen], pmf

    def learn(self, shared: np.ndarray, chosen: np.ndarray, probs: np.ndarray, costs: np.ndarray,
              allowed: np.ndarray | None = None) -> None:
        """Add the rows to the chosen actions' regressions and refit them."""
        if self._a is None:
            self._init(shared.shape[1])
        for a in np.unique(chosen):
            sel = chosen == a
            xs = shared[sel]
            self._a[a] += xs.T @ xs
            self._b[a] += xs.T @ costs[sel]
            self._theta[a] = np.linalg.solve(self._a[a], self._b[a])

    def greedy(self, shared: np.ndarray, allowed: np.ndarray | None = None) -> np.ndarray:
        """The exploitation choice per context."""
        allowed = np.ones((len(shared), self.k), dtype=bool) if allowed is None else allowed
        return np.argmin(np.where(allowed, self._pred(shared), np.inf), axis=1)
