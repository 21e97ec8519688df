"""Baseline policies: static (keep the request), threshold (reactive rules), predictive
(statsmodels OLS forecast of the next hour's peak plus a residual-quantile headroom) and the
clairvoyant lower bound (allocates exactly the coming step's demand)."""

from __future__ import annotations

import warnings

import numpy as np
import statsmodels.api as sm

from adares.policies.common import Ages, Window, requests_where
from adares.policies.base import Observation, TraceInfo
from adares.trace import GIB, Trace

MIN_CPU = 0.025           # cores: the VPA's pod minimum, used as every policy's floor
MIN_MEM = 250 * 2**20     # bytes


class Static:
    """Keeps every VM at its request (what was provisioned)."""

    name = "static"

    def reset(self, info: TraceInfo) -> None:
        """Start a replay."""
        self._c, self._m = info.cpu_request.copy(), info.mem_request.copy()

    def allocate(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """The requests."""
        return self._c, self._m

    def observe(self, obs: Observation) -> None:
        """Nothing to learn."""


class Clairvoyant:
    """Knows the trace: allocates each step's demand exactly (the cost lower bound)."""

    name = "clairvoyant"

    def __init__(self, trace: Trace) -> None:
        self._trace = trace

    def reset(self, info: TraceInfo) -> None:
        """Start a replay."""

    def allocate(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """Step t's demand."""
        return self._trace.cpu[t], self._trace.mem[t]

    def observe(self, obs: Observation) -> None:
        """Nothing to learn."""


class Threshold:
    """Reactive rules, evaluated every ``period_steps`` steps on the last period:
    CPU p95 utilization of the allocation above ``up`` -> x``grow``, below ``down`` -> x``shrink``;
    memory peak utilization likewise; an OOM grows memory by ``grow`` at once.
    (The rule-based autoscalers of cloud providers; ADARES' threshold baseline.)
    """

    name = "threshold"

    def __init__(self, period_steps: int = 12, up: float = 0.8, down: float = 0.3,
                 mem_up: float = 0.9, mem_down: float = 0.5, grow: float = 1.5,
                 shrink: float = 0.8) -> None:
        self.period, self.up, self.down = period_steps, up, down
        self.mem_up, self.mem_down, self.grow, self.shrink = mem_up, mem_down, grow, shrink

    def reset(self, info: TraceInfo) -> None:
        """Start a replay."""
        self._req = (info.cpu_request.copy(), info.mem_request.copy())
        self._c, self._m = info.cpu_request.copy(), info.mem_request.copy()
        self._w = Window(info.n_vms, self.period)
        self._age = Ages(info.n_vms)

    def arrive(self, mask: np.ndarray) -> None:
        """New VMs start at their requests; the rules wait for a period of their own usage."""
        self._c, self._m = requests_where(mask, self._req, self._c, self._m)
        self._age.arrive(mask)

    def allocate(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """Current allocations."""
        return self._c, self._m

    def observe(self, obs: Observation) -> None:
        """Apply the OOM rule now and the utilization rules at period ends."""
        self._w.push(obs)
        self._age.tick()
        c, m = self._c.copy(), self._m.copy()
        m = np.where(obs.oom, m * self.grow, m)
        if (obs.t + 1) % self.period == 0:
            ok = self._age.ready(self.period)
            uc = np.quantile(self._w.cpu(), 0.95, axis=0) / c
            c = np.where(ok & (uc > self.up), c * self.grow,
                         np.where(ok & (uc < self.down), c * self.shrink, c))
            um = self._w.mem().max(axis=0) / m
            m = np.where(ok & (um > self.mem_up), m * self.grow,
                         np.where(ok & (um < self.mem_down), m * self.shrink, m))
        self._c, self._m = np.maximum(c, MIN_CPU), np.maximum(m, MIN_MEM)


class Predictive:
    """Forecast of each VM's next-hour peak with a pooled OLS (statsmodels) on features of its
    recent history normalized by its day mean, plus a headroom: the ``quantile`` of the pooled
    normalized residuals. Refit every ``refit_steps`` on the last day of (features, outcome)
    pairs. Keeps the requests until the first fit (``refit_steps`` in).
    """

    name = "predictive"

    def __init__(self, period_steps: int = 12, refit_steps: int = 72, cpu_quantile: float = 0.95,
                 mem_quantile: float = 0.99, mem_margin: float = 0.05) -> None:
        self.period, self.refit = period_steps, refit_steps
        self.q = {"cpu": cpu_quantile, "mem": mem_quantile}
        self.mem_margin = mem_margin

    def reset(self, info: TraceInfo) -> None:
        """Start a replay."""
        self._req = (info.cpu_request.copy(), info.mem_request.copy())
        self._c, self._m = info.cpu_request.copy(), info.mem_request.copy()
        self._w = Window(info.n_vms, 288)
        self._age = Ages(info.n_vms)
        self._pending: dict[str, np.ndarray] = {}   # features awaiting their outcome
        self._rows: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {"cpu": [], "mem": []}
        self._model: dict[str, tuple[np.ndarray, float]] = {}

    def allocate(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """Current allocations."""
        return self._c, self._m

    def arrive(self, mask: np.ndarray) -> None:
        """New VMs start at their requests until a period of their own usage is seen."""
        self._c, self._m = requests_where(mask, self._req, self._c, self._m)
        self._age.arrive(mask)

    def _features(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        scale = np.maximum(x.mean(axis=0), 1e-9)
        hour = x[-self.period:]
        f = np.column_stack([np.ones(x.shape[1]), hour.max(axis=0) / scale,
                             hour.mean(axis=0) / scale, x[-6 * self.period:].max(axis=0) / scale,
                             x.max(axis=0) / scale])
        return f, scale

    def observe(self, obs: Observation) -> None:
        """Collect training pairs, refit, and set the next period's allocations."""
        self._w.push(obs)
        self._age.tick()
        if obs.oom.any():
            self._m = np.where(obs.oom, self._m * 1.2, self._m)
        if (obs.t + 1) % self.period:
            return
        k = obs.t + 1
        for r, x in (("cpu", self._w.cpu()), ("mem", self._w.mem())):
            f, scale = self._features(x)
            if r in self._pending:
                prev_f, prev_scale = self._pending[r]
                y = x[-self.period:].max(axis=0) / prev_scale
                self._rows[r].append((prev_f, y))
                self._rows[r] = self._rows[r][-24:]
            self._pending[r] = (f, scale)
            if k % self.refit == 0 and len(self._rows[r]) >= 3:
                X = np.vstack([a for a, _ in self._rows[r]])
                Y = np.concatenate([b for _, b in self._rows[r]])
                with warnings.catch_warnings():
                    # Early on some features coincide (e.g. the hour max is the day max): the
                    # pseudo-inverse fit is still the least-squares forecast.
                    warnings.simplefilter("ignore")
                    fit = sm.OLS(Y, X).fit()
                resid = Y - X @ fit.params
                self._model[r] = (np.asarray(fit.params), float(np.quantile(resid, self.q[r])))
            if r in self._model:
                beta, head = self._model[r]
                pred = (f @ beta + max(head, 0.0)) * scale
                ok = self._age.ready(self.period)
                if r == "cpu":
                    self._c = np.where(ok, np.maximum(pred, MIN_CPU), self._c)
                else:
                    floor = x[-self.period:].max(axis=0) * (1 + self.mem_margin)
                    self._m = np.where(ok, np.maximum(np.maximum(pred, floor), MIN_MEM), self._m)


__all__ = ["Static", "Clairvoyant", "Threshold", "Predictive", "GIB"]
