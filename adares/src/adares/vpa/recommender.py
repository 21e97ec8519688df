"""The VPA recommender's estimators and per-container aggregation, ported to Python.

Source: kubernetes/autoscaler, vertical-pod-autoscaler/pkg/recommender/logic (estimator.go,
recommender.go) and model (container.go, aggregate_container_state.go, types.go).

Amounts follow the Go types: CPU as integer millicores, memory as integer bytes, both truncated
toward zero and capped at 1e14 (``model.ResourceAmount``). Timestamps are seconds.

Defaults (recommender flags): target at the 90th percentile, bounds at the 50th and 95th, a 15%
safety margin, pod minimums of 25 millicores and 250 MiB, a 24 h confidence interval, 24 h
half-lives, memory peaks per 24 h window (8 windows of history), and after an OOM a peak of
max(used + 100 MiB, 1.2 * used).

CPU sample weight: the VPA releases the brief describes weight each CPU sample by the container's
request in cores, at least 0.1 (``max(request, minSampleWeight)``); newer releases use 0.1 for every
sample. ``ContainerAggregate(cpu_weight_by_request=...)`` chooses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from adares.vpa.histogram import (
    CPU_HISTOGRAM_OPTIONS,
    MEMORY_HISTOGRAM_OPTIONS,
    MIN_SAMPLE_WEIGHT,
    DecayingHistogram,
    Histogram,
)

MAX_RESOURCE_AMOUNT = int(1e14)
DAY_S = 24 * 3600.0
MIB = 1024 * 1024


def _amount(x: float) -> int:
    """Go's resourceAmountFromFloat: cap at 1e14, negative to 0, truncate toward zero."""
    if math.isnan(x):
        return 0
    if x > MAX_RESOURCE_AMOUNT:
        return MAX_RESOURCE_AMOUNT
    return int(max(x, 0.0))


def cpu_amount_from_cores(cores: float) -> int:
    """Cores (float) -> millicores (int, truncated)."""
    return _amount(cores * 1000.0)


def cores_from_cpu_amount(millicores: int) -> float:
    """Millicores (int) -> cores (float)."""
    return millicores / 1000.0


def memory_amount_from_bytes(nbytes: float) -> int:
    """Bytes (float) -> bytes (int, truncated)."""
    return _amount(nbytes)


def scale_resource(amount: int, factor: float) -> int:
    """amount * factor as a resource amount (truncated, capped at 1e14)."""
    return _amount(amount * factor)


@dataclass
class AggregateState:
    """What the estimators read (model.AggregateContainerState): the CPU usage histogram, the
    memory peaks histogram, the first and last CPU sample times (s) and the CPU sample count."""

    cpu: Histogram
    memory_peaks: Histogram
    first_sample_s: float | None = None
    last_sample_s: float | None = None
    total_samples: int = 0

    @classmethod
    def new(cls, half_life_s: float = DAY_S) -> AggregateState:
        """Empty state with the VPA's decaying CPU and memory histograms."""
        return cls(DecayingHistogram(CPU_HISTOGRAM_OPTIONS, half_life_s),
                   DecayingHistogram(MEMORY_HISTOGRAM_OPTIONS, half_life_s))


def confidence(s: AggregateState, interval_s: float = DAY_S) -> float:
    """min(history span / interval, sample count / interval-in-minutes) (estimator.go)."""
    if s.first_sample_s is None or s.last_sample_s is None:
        span = 0.0
    else:
        span = (s.last_sample_s - s.first_sample_s) / interval_s
    return min(span, s.total_samples / (interval_s / 60.0))


# An estimator maps an AggregateState to a resource amount (millicores or bytes).
class Estimator:
    """Base of the composable estimators: ``estimate(state) -> int`` amount."""

    def estimate(self, s: AggregateState) -> int:  # pragma: no cover - interface
        """Resource amount for ``s``."""
        raise NotImplementedError


@dataclass
class Const(Estimator):
    """Always ``value``."""

    value: int

    def estimate(self, s: AggregateState) -> int:
        """``value``."""
        return self.value


@dataclass
class CPUPercentile(Estimator):
    """The ``p`` percentile of the CPU usage histogram, in millicores."""

    p: float

    def estimate(self, s: AggregateState) -> int:
        """Millicores."""
        return cpu_amount_from_cores(s.cpu.percentile(self.p))


@dataclass
class MemoryPercentile(Estimator):
    """The ``p`` percentile of the memory peaks histogram, in bytes."""

    p: float

    def estimate(self, s: AggregateState) -> int:
        """Bytes."""
        return memory_amount_from_bytes(s.memory_peaks.percentile(self.p))


@dataclass
class Margin(Estimator):
    """base + base * fraction (each term truncated)."""

    fraction: float
    base: Estimator

    def estimate(self, s: AggregateState) -> int:
        """Amount with the margin added."""
        b = self.base.estimate(s)
        return b + scale_resource(b, self.fraction)


@dataclass
class ConfidenceMultiplier(Estimator):
    """base * (1 + multiplier / confidence) ** exponent: wide bounds while history is short."""

    multiplier: float
    exponent: float
    base: Estimator
    interval_s: float = DAY_S

    def estimate(self, s: AggregateState) -> int:
        """Scaled amount (1e14 or 0 when there is no history, by the exponent's sign)."""
        c = confidence(s, self.interval_s)
        ratio = math.inf if c == 0.0 else self.multiplier / c
        return scale_resource(self.base.estimate(s), math.pow(1.0 + ratio, self.exponent))


@dataclass
class MinResource(Estimator):
    """max(base, minimum)."""

    minimum: int
    base: Estimator

    def estimate(self, s: AggregateState) -> int:
        """Amount, at least ``minimum``."""
        return max(self.base.estimate(s), self.minimum)


@dataclass(frozen=True)
class RecommenderConfig:
    """Recommender flags (defaults of the VPA recommender binary)."""

    safety_margin: float = 0.15
    min_cpu_millicores: float = 25.0
    min_memory_mb: float = 250.0
    target_cpu_percentile: float = 0.9
    lower_cpu_percentile: float = 0.5
    upper_cpu_percentile: float = 0.95
    target_memory_percentile: float = 0.9
    lower_memory_percentile: float = 0.5
    upper_memory_percentile: float = 0.95
    confidence_interval_s: float = DAY_S


@dataclass(frozen=True)
class Recommendation:
    """Target, lower and upper bound: CPU in millicores, memory in bytes."""

    target_cpu: int
    target_memory: int
    lower_cpu: int
    lower_memory: int
    upper_cpu: int
    upper_memory: int


def build_estimators(cfg: RecommenderConfig = RecommenderConfig(), containers: int = 1
                     ) -> dict[str, Estimator]:
    """The six estimators of CreatePodResourceRecommender, with the pod minimums split evenly
    over ``containers`` containers (GetRecommendedPodResources). Keys: target_cpu, ..."""
    fraction = 1.0 / containers
    min_cpu = scale_resource(cpu_amount_from_cores(cfg.min_cpu_millicores * 0.001), fraction)
    min_mem = scale_resource(memory_amount_from_bytes(cfg.min_memory_mb * MIB), fraction)
    iv = cfg.confidence_interval_s
    est: dict[str, Estimator] = {}
    for kind, pct, mk, minimum in (
        ("cpu", (cfg.target_cpu_percentile, cfg.lower_cpu_percentile, cfg.upper_cpu_percentile),
         CPUPercentile, min_cpu),
        ("memory", (cfg.target_memory_percentile, cfg.lower_memory_percentile,
                    cfg.upper_memory_percentile), MemoryPercentile, min_mem),
    ):
        target = Margin(cfg.safety_margin, mk(pct[0]))
        lower = ConfidenceMultiplier(0.001, -2.0, Margin(cfg.safety_margin, mk(pct[1])), iv)
        upper = ConfidenceMultiplier(1.0, 1.0, Margin(cfg.safety_margin, mk(pct[2])), iv)
        est[f"target_{kind}"] = MinResource(minimum, target)
        est[f"lower_{kind}"] = MinResource(minimum, lower)
        est[f"upper_{kind}"] = MinResource(minimum, upper)
    return est


def recommend(s: AggregateState, cfg: RecommenderConfig = RecommenderConfig(),
              containers: int = 1) -> Recommendation:
    """Recommendation for one container's aggregate state."""
    e = build_estimators(cfg, containers)
    return Recommendation(**{k: v.estimate(s) for k, v in e.items()})


@dataclass
class ContainerAggregate:
    """One container's samples feeding its AggregateState (model.ContainerState plus the
    aggregation of aggregate_container_state.go): CPU samples into the decaying CPU histogram,
    memory as one peak per ``window_s`` window, OOMs as bumped peaks.

    ``request_cpu`` (millicores) and ``request_memory`` (bytes) are the container's requests.
    """

    request_cpu: int = 0
    request_memory: int = 0
    state: AggregateState = field(default_factory=AggregateState.new)
    window_s: float = DAY_S
    oom_bump_ratio: float = 1.2
    oom_min_bump_bytes: float = 100 * MIB
    cpu_weight_by_request: bool = True
    last_cpu_sample_s: float | None = None
    last_memory_sample_s: float | None = None
    window_end_s: float | None = None
    memory_peak: int = 0
    oom_peak: int = 0

    def add_cpu_sample(self, t_s: float, millicores: int) -> bool:
        """Add a CPU usage sample; False (ignored) when negative or not after the last one."""
        if millicores < 0 or (self.last_cpu_sample_s is not None and t_s <= self.last_cpu_sample_s):
            return False
        s = self.state
        weight = MIN_SAMPLE_WEIGHT
        if self.cpu_weight_by_request:
            weight = max(cores_from_cpu_amount(self.request_cpu), MIN_SAMPLE_WEIGHT)
        s.cpu.add_sample(cores_from_cpu_amount(millicores), weight, t_s)
        if s.last_sample_s is None or t_s > s.last_sample_s:
            s.last_sample_s = t_s
        if s.first_sample_s is None or t_s < s.first_sample_s:
            s.first_sample_s = t_s
        s.total_samples += 1
        self.last_cpu_sample_s = t_s
        return True

    def max_memory_peak(self) -> int:
        """Largest of this window's usage peak and OOM peak (bytes)."""
        return max(self.memory_peak, self.oom_peak)

    def add_memory_sample(self, t_s: float, nbytes: int, is_oom: bool = False) -> bool:
        """Fold a memory sample into this window's peak; False when negative or outdated."""
        if nbytes < 0 or (not is_oom and self.last_memory_sample_s is not None
                          and t_s < self.last_memory_sample_s):
            return False
        self.last_memory_sample_s = t_s
        if self.window_end_s is None:
            self.window_end_s = t_s
        hist = self.state.memory_peaks
        add_new = False
        if t_s < self.window_end_s:
            old = self.max_memory_peak()
            if old != 0 and nbytes > old:
                hist.subtract_sample(float(old), 1.0, self.window_end_s)
                add_new = True
        else:
            shift = math.floor((t_s - self.window_end_s) / self.window_s) * self.window_s
            self.window_end_s += shift + self.window_s
            self.memory_peak = 0
            self.oom_peak = 0
            add_new = True
        if add_new:
            hist.add_sample(float(nbytes), 1.0, self.window_end_s)
            if is_oom:
                self.oom_peak = nbytes
            else:
                self.memory_peak = nbytes
        return True

    def record_oom(self, t_s: float, requested_memory: int) -> None:
        """Record an OOM kill at ``t_s`` of a container that had ``requested_memory`` bytes:
        a peak of max(used + 100 MiB, 1.2 * used), used = max(request, this window's peak).

        Raises ValueError when the OOM is older than the last memory sample minus one window.
        """
        if (self.last_memory_sample_s is not None
                and t_s < self.last_memory_sample_s - self.window_s):
            raise ValueError(f"OOM at {t_s} is too old")
        used = max(requested_memory, self.memory_peak)
        needed = max(used + memory_amount_from_bytes(self.oom_min_bump_bytes),
                     scale_resource(used, self.oom_bump_ratio))
        if not self.add_memory_sample(t_s, needed, is_oom=True):
            raise ValueError("adding the OOM sample failed")
