"""The Kubernetes Vertical Pod Autoscaler as a replay policy: the recommender (a faithful port,
``adares.vpa``) fed every step, and an updater that applies the target in place.

Updater (after pkg/updater/priority): a VM's request is set to the target when it lies outside
[lower bound, upper bound], right after an OOM kill when the target exceeds the request, or when
it differs from the target by more than 10% and was last changed at least 12 hours ago.

Samples: the VPA sees usage, not demand: CPU used (throttled demand is invisible to it) and
memory used; OOM kills are recorded with the memory request. Real VPA gets CPU samples every
minute; a 5-minute replay step counts as step_s / 60 samples for the confidence of the bounds.
"""

from __future__ import annotations

import math

import numpy as np

from adares.policies.base import Observation, TraceInfo
from adares.policies.common import requests_where
from adares.vpa.batch import BatchDecayingHistogram, BatchMemoryPeaks
from adares.vpa.histogram import CPU_HISTOGRAM_OPTIONS, MEMORY_HISTOGRAM_OPTIONS, MIN_SAMPLE_WEIGHT
from adares.vpa.recommender import MAX_RESOURCE_AMOUNT, MIB, RecommenderConfig


def _amount(x: np.ndarray) -> np.ndarray:
    return np.trunc(np.clip(np.nan_to_num(x, nan=0.0), 0.0, MAX_RESOURCE_AMOUNT))


def _pow(x: np.ndarray, e: float) -> np.ndarray:
    """``math.pow`` per element (the Go recommender's math.Pow; numpy's power may round the
    last bit differently, and the bounds are truncated to whole units after)."""
    u, inv = np.unique(x, return_inverse=True)  # few distinct confidences: one per arrival time
    return np.array([math.pow(v, e) for v in u.tolist()])[inv.ravel()]


class VPA:
    """VPA recommender + in-place updater (see module doc). Allocations in cores and bytes."""

    name = "vpa"

    def __init__(self, config: RecommenderConfig = RecommenderConfig(),
                 half_life_s: float = 86400.0, cpu_weight_by_request: bool = True,
                 min_change: float = 0.1, min_age_s: float = 12 * 3600.0) -> None:
        self.cfg = config
        self.half_life_s = half_life_s
        self.by_request = cpu_weight_by_request
        self.min_change, self.min_age_s = min_change, min_age_s

    def reset(self, info: TraceInfo) -> None:
        """Start a replay."""
        n = info.n_vms
        self._c, self._m = info.cpu_request.copy(), info.mem_request.copy()
        self.cpu = BatchDecayingHistogram(n, CPU_HISTOGRAM_OPTIONS, self.half_life_s)
        self.mem = BatchDecayingHistogram(n, MEMORY_HISTOGRAM_OPTIONS, self.half_life_s)
        self.peaks = BatchMemoryPeaks(self.mem)
        # Per VM: its first sample's time (NaN: none yet) and its samples, for the confidence
        # of its bounds (one VPA object per VM: a new VM starts with no history).
        self.first_s = np.full(n, np.nan)
        self.last_s: float | None = None
        self.samples = np.zeros(n)
        self.per_step = info.step_s / 60.0
        self.changed_s = np.full(n, info.start_s)
        self._req = (info.cpu_request.copy(), info.mem_request.copy())

    def arrive(self, mask: np.ndarray) -> None:
        """New VMs start at their requests with empty histograms (no history of their own)."""
        self._c, self._m = requests_where(mask, self._req, self._c, self._m)
        self.cpu.forget(mask)
        self.peaks.forget(mask)
        self.first_s[mask] = np.nan
        self.samples[mask] = 0.0
        if self.last_s is not None:
            self.changed_s[mask] = self.last_s

    def allocate(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """Current requests."""
        return self._c, self._m

    def _confidence(self) -> np.ndarray:
        """(N,) the recommender's confidence per VM: the days of history, at most the samples
        over a day's worth (0 without samples)."""
        iv = self.cfg.confidence_interval_s
        last = np.nan if self.last_s is None else self.last_s
        span = np.nan_to_num((last - self.first_s) / iv, nan=0.0)
        return np.minimum(span, self.samples / (iv / 60.0))

    def recommendation(self) -> dict[str, np.ndarray]:
        """Target, lower and upper bounds per VM: *_cpu in millicores, *_memory in bytes."""
        cfg = self.cfg
        conf = self._confidence()
        out: dict[str, np.ndarray] = {}
        for kind, hist, unit, pcts, minimum in (
            ("cpu", self.cpu, 1000.0, (cfg.target_cpu_percentile, cfg.lower_cpu_percentile,
                                       cfg.upper_cpu_percentile),
             math.trunc(cfg.min_cpu_millicores * 0.001 * 1000.0)),
            ("memory", self.mem, 1.0, (cfg.target_memory_percentile, cfg.lower_memory_percentile,
                                       cfg.upper_memory_percentile),
             math.trunc(cfg.min_memory_mb * MIB)),
        ):
            for label, pv in zip(("target", "lower", "upper"), hist.percentiles(pcts)):
                base = _amount(pv * unit)
                v = base + _amount(base * cfg.safety_margin)
                if label != "target":
                    mult, exp = (0.001, -2.0) if label == "lower" else (1.0, 1.0)
                    with np.errstate(divide="ignore"):
                        ratio = np.where(conf == 0.0, np.inf, mult / conf)
                    v = _amount(v * _pow(1.0 + ratio, exp))
                out[f"{label}_{kind}"] = np.maximum(v, minimum)
        return out

    def observe(self, obs: Observation) -> None:
        """Feed the step's samples, record OOMs, run the updater."""
        t = obs.time_s
        millicores = np.trunc(obs.cpu_used * 1000.0)
        weight = np.maximum(self._c, MIN_SAMPLE_WEIGHT) if self.by_request else MIN_SAMPLE_WEIGHT
        self.cpu.add(millicores / 1000.0, weight, t)
        self.first_s = np.where(np.isnan(self.first_s), t, self.first_s)
        self.last_s = t
        self.samples += self.per_step
        self.peaks.add(t, obs.mem_used)
        if obs.oom.any():
            self.peaks.record_oom(t, self._m, obs.oom)
        r = self.recommendation()
        new_c, new_m = self._c.copy(), self._m.copy()
        for cur, new, key, unit in ((self._c, new_c, "cpu", 1000.0), (self._m, new_m, "memory", 1.0)):
            amount = cur * unit
            target = r[f"target_{key}"]
            outside = (amount < r[f"lower_{key}"]) | (amount > r[f"upper_{key}"])
            old_enough = (t - self.changed_s) >= self.min_age_s
            big = np.abs(target - amount) > self.min_change * np.maximum(amount, 1e-9)
            upd = outside | (old_enough & big)
            if key == "memory":
                upd |= obs.oom & (target > amount)
            new[:] = np.where(upd, target / unit, cur)
        changed = (new_c != self._c) | (new_m != self._m)
        self.changed_s = np.where(changed, t, self.changed_s)
        self._c, self._m = new_c, new_m
