"""An Autopilot-like ensemble (after Rzadca et al., "Autopilot: workload autoscaling at Google",
EuroSys 2020): many moving-window recommenders, and per VM and resource the one whose
recommendations would have cost least recently.

Recommenders: a decayed percentile (p50, p90, p95, p99 or the maximum) of the VM's usage with a
half-life (6 h, 24 h or 72 h), plus a safety margin (0%, 10% or 25%): 45 per resource, each a
(VPA-style) decaying histogram of 5-minute samples. Every step, each recommender's limit is
charged what it would have cost against the step's demand estimate (CPU: used + throttled;
memory: used, or after an OOM kill the VPA-style bump max(1.2 x, +100 MiB) of the allocation) with the replay's CostModel (allocation price, throttling or shortfall penalty,
OOM cost); charges decay with ``cost_half_life_s``. Every ``period_steps`` the VM takes the
cheapest recommender's limit if it beats the current one by ``switch_margin`` (hysteresis, the
paper's w_delta_m), after a warm-up of ``warmup_s`` on the most conservative one. An OOM grows memory at once by max(20%, 100 MiB).
This is not Google's code: the recommender set and weights are this tool's choices.
"""

from __future__ import annotations

import math

import numpy as np

from adares.costs import CostModel
from adares.policies.base import Observation, TraceInfo
from adares.policies.common import Ages, requests_where
from adares.policies.baselines import MIN_CPU, MIN_MEM
from adares.trace import GIB
from adares.vpa.batch import BatchDecayingHistogram
from adares.vpa.histogram import CPU_HISTOGRAM_OPTIONS, MEMORY_HISTOGRAM_OPTIONS

HALF_LIVES_S = (6 * 3600.0, 24 * 3600.0, 72 * 3600.0)
PERCENTILES = (0.5, 0.9, 0.95, 0.99, 1.0)
MARGINS = (0.0, 0.1, 0.25)


class AutopilotLike:
    """The ensemble (see module doc). Allocations in cores and bytes."""

    name = "autopilot"

    def __init__(self, period_steps: int = 12, costs: CostModel = CostModel(),
                 cost_half_life_s: float = 12 * 3600.0, switch_margin: float = 0.05,
                 warmup_s: float = 24 * 3600.0) -> None:
        self.period, self.costs, self.warmup_s = period_steps, costs, warmup_s
        self.cost_half_life_s, self.switch_margin = cost_half_life_s, switch_margin

    def reset(self, info: TraceInfo) -> None:
        """Start a replay."""
        n = info.n_vms
        self._c, self._m = info.cpu_request.copy(), info.mem_request.copy()
        self._hist = {
            "cpu": [BatchDecayingHistogram(n, CPU_HISTOGRAM_OPTIONS, h) for h in HALF_LIVES_S],
            "mem": [BatchDecayingHistogram(n, MEMORY_HISTOGRAM_OPTIONS, h) for h in HALF_LIVES_S]}
        n_models = len(HALF_LIVES_S) * len(PERCENTILES) * len(MARGINS)
        self._limits = {r: np.zeros((n_models, n)) for r in ("cpu", "mem")}
        self._cost = {r: np.zeros((n_models, n)) for r in ("cpu", "mem")}
        # Start from the most conservative recommender (longest half-life, maximum, largest
        # margin: the last index) until the others have a cost record.
        self._chosen = {r: np.full(n, n_models - 1) for r in ("cpu", "mem")}
        self._decay = math.pow(0.5, info.step_s / self.cost_half_life_s)
        self._step_h = info.step_s / 3600.0
        self._ready = False
        self._start_s = info.start_s
        self._req = (info.cpu_request.copy(), info.mem_request.copy())
        self._age = Ages(n)

    def arrive(self, mask: np.ndarray) -> None:
        """New VMs start at their requests on the most conservative recommender, with empty
        histograms and no cost record."""
        self._c, self._m = requests_where(mask, self._req, self._c, self._m)
        for r in ("cpu", "mem"):
            for h in self._hist[r]:
                h.forget(mask)
            self._cost[r][:, mask] = 0.0
            self._chosen[r][mask] = self._cost[r].shape[0] - 1
        self._age.arrive(mask)

    def allocate(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """Current allocations."""
        return self._c, self._m

    def _recompute(self) -> None:
        margins = np.asarray(MARGINS)[:, None, None]
        for r in ("cpu", "mem"):
            rows = []
            for h in self._hist[r]:
                p = np.stack(h.percentiles(PERCENTILES))            # (P, N)
                rows.append(p[None, :, :] * (1 + margins))           # (Mg, P, N)
            self._limits[r] = np.concatenate([x.reshape(-1, x.shape[-1]) for x in rows])
        self._ready = True

    def _charge(self, obs: Observation, d_m: np.ndarray) -> None:
        c, dh = self.costs, self._step_h
        d_c = obs.cpu_used + obs.cpu_throttled
        lc = self._limits["cpu"]
        step_c = (c.vcpu_hour * lc + c.throttle_penalty * np.maximum(d_c - lc, 0.0)) * dh
        lm = self._limits["mem"]
        step_m = ((c.gb_hour * lm + c.mem_shortfall_penalty * np.maximum(d_m - lm, 0.0)) / GIB * dh
                  + c.oom_cost * (d_m > lm))
        for r, s in (("cpu", step_c), ("mem", step_m)):
            self._cost[r] = self._cost[r] * self._decay + s

    def observe(self, obs: Observation) -> None:
        """Feed the histograms, charge the recommenders, pick per VM at period ends."""
        t = obs.time_s
        self._age.tick()
        # Memory use is capped at the allocation: an OOM-killed VM needed more. Like the VPA,
        # count it as the bumped size, so the recommenders learn from the kill.
        bumped = np.maximum(obs.mem_alloc * 1.2, obs.mem_alloc + 100 * 2**20)
        d_m = np.where(obs.oom, bumped, obs.mem_used)
        for h in self._hist["cpu"]:
            h.add(obs.cpu_used + obs.cpu_throttled, 1.0, t)
        for h in self._hist["mem"]:
            h.add(d_m, 1.0, t)
        if self._ready:
            self._charge(obs, d_m)
        if obs.oom.any():
            self._m = np.where(obs.oom, np.maximum(self._m, bumped), self._m)
        if (obs.t + 1) % self.period:
            return
        self._recompute()
        cols = np.arange(len(self._c))
        ok = self._age.ready(self.period)  # new VMs keep their requests for a period
        for r in ("cpu", "mem"):
            cost = self._cost[r]
            best = np.argmin(cost, axis=0)
            cur = self._chosen[r]
            keep = cost[best, cols] >= (1 - self.switch_margin) * cost[cur, cols]
            if obs.time_s - self._start_s < self.warmup_s:
                keep[:] = True  # too little cost history to trust a cheaper recommender yet
            pick = np.where(keep, cur, best)
            self._chosen[r] = pick
            limit = self._limits[r][pick, cols]
            if r == "cpu":
                self._c = np.where(ok, np.maximum(limit, MIN_CPU), self._c)
            else:
                # Memory never drops below what is in use now (a shrink under use is an OOM).
                self._m = np.where(ok, np.maximum(np.maximum(limit, d_m), MIN_MEM), self._m)
