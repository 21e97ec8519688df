"""Histograms of the Kubernetes Vertical Pod Autoscaler recommender, ported to Python.

Source: kubernetes/autoscaler, vertical-pod-autoscaler/pkg/recommender/util (histogram.go,
decaying_histogram.go, histogram_options.go). The behaviour, including its corner cases (the
percentile returns the *end* of the bucket that crosses the threshold, buckets lighter than
epsilon do not count, the reference timestamp of a decaying histogram moves in whole half-lives),
is the Go code's; its unit tests' numbers are reproduced in ``adares_tests``.

Timestamps are seconds (float, Unix epoch). Go's zero ``time.Time`` is represented by ``None``.
Rounding to the half-life is relative to the Unix epoch, which equals Go's rounding (relative to
year 1) for half-lives that divide one day.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MAX_DECAY_EXPONENT = 100


def _go_round(x: float) -> int:
    """Go's ``round`` helper of decaying_histogram.go: floor(x + 0.5)."""
    return math.floor(x + 0.5)


@dataclass(frozen=True)
class LinearHistogramOptions:
    """Buckets of equal size: bucket i covers [i * bucket_size, (i + 1) * bucket_size).

    Raises ValueError unless max_value, bucket_size and epsilon are positive.
    """

    max_value: float
    bucket_size: float
    epsilon: float

    def __post_init__(self) -> None:
        if self.max_value <= 0.0 or self.bucket_size <= 0.0 or self.epsilon <= 0.0:
            raise ValueError("max_value, bucket_size and epsilon must be positive")

    @property
    def num_buckets(self) -> int:
        """Number of buckets: ceil(max_value / bucket_size) + 1."""
        return int(math.ceil(self.max_value / self.bucket_size)) + 1

    def find_bucket(self, value: float) -> int:
        """Index of the bucket holding ``value``, clamped to [0, num_buckets - 1]."""
        bucket = int(value / self.bucket_size)
        return min(max(bucket, 0), self.num_buckets - 1)

    def bucket_start(self, bucket: int) -> float:
        """Lower end of ``bucket``; IndexError outside [0, num_buckets - 1]."""
        if bucket < 0 or bucket >= self.num_buckets:
            raise IndexError(f"bucket {bucket} out of range [0..{self.num_buckets - 1}]")
        return float(bucket) * self.bucket_size


@dataclass(frozen=True)
class ExponentialHistogramOptions:
    """Buckets growing by ``ratio``: bucket i starts at first * (ratio**i - 1) / (ratio - 1).

    The VPA uses first=0.01 core, ratio=1.05, max=1000 cores for CPU and first=1e7 bytes,
    ratio=1.05, max=1e12 bytes for memory, epsilon=1e-4 (model/aggregations_config.go).
    Raises ValueError on non-positive sizes or ratio <= 1.
    """

    max_value: float
    first_bucket_size: float
    ratio: float
    epsilon: float

    def __post_init__(self) -> None:
        if (self.max_value <= 0.0 or self.first_bucket_size <= 0.0 or self.ratio <= 1.0
                or self.epsilon <= 0.0):
            raise ValueError("max_value, first_bucket_size and epsilon must be > 0, ratio > 1")

    @property
    def num_buckets(self) -> int:
        """ceil(log_ratio(max * (ratio - 1) / first + 1)) + 1."""
        x = self.max_value * (self.ratio - 1) / self.first_bucket_size + 1
        return int(math.ceil(math.log(x) / math.log(self.ratio))) + 1

    def find_bucket(self, value: float) -> int:
        """Index of the bucket holding ``value``, clamped to [0, num_buckets - 1]."""
        if value < self.first_bucket_size:
            return 0
        x = value * (self.ratio - 1) / self.first_bucket_size + 1
        bucket = int(math.log(x) / math.log(self.ratio))
        return min(bucket, self.num_buckets - 1)

    def bucket_start(self, bucket: int) -> float:
        """Lower end of ``bucket``; IndexError outside [0, num_buckets - 1]."""
        if bucket < 0 or bucket >= self.num_buckets:
            raise IndexError(f"bucket {bucket} out of range [0..{self.num_buckets - 1}]")
        if bucket == 0:
            return 0.0
        return self.first_bucket_size * (math.pow(self.ratio, bucket) - 1) / (self.ratio - 1)


HistogramOptions = LinearHistogramOptions | ExponentialHistogramOptions

# VPA defaults (model/aggregations_config.go): minSampleWeight 0.1, epsilon = 0.001 * 0.1.
MIN_SAMPLE_WEIGHT = 0.1
VPA_EPSILON = 0.001 * MIN_SAMPLE_WEIGHT
CPU_HISTOGRAM_OPTIONS = ExponentialHistogramOptions(1000.0, 0.01, 1.05, VPA_EPSILON)
MEMORY_HISTOGRAM_OPTIONS = ExponentialHistogramOptions(1e12, 1e7, 1.05, VPA_EPSILON)


class Histogram:
    """Weighted histogram over ``options``' buckets (VPA util.histogram).

    Weights are floats; a bucket lighter than ``options.epsilon`` counts as empty. Raises
    ValueError on negative sample weights.
    """

    def __init__(self, options: HistogramOptions) -> None:
        self.options = options
        n = options.num_buckets
        self.bucket_weight = [0.0] * n
        self.total_weight = 0.0
        self.min_bucket = n - 1
        self.max_bucket = 0

    def add_sample(self, value: float, weight: float, timestamp: float | None = None) -> None:
        """Add ``weight`` to the bucket of ``value`` (timestamp unused here)."""
        if weight < 0.0:
            raise ValueError("sample weight must be non-negative")
        b = self.options.find_bucket(value)
        self.bucket_weight[b] += weight
        self.total_weight += weight
        eps = self.options.epsilon
        if b < self.min_bucket and self.bucket_weight[b] >= eps:
            self.min_bucket = b
        if b > self.max_bucket and self.bucket_weight[b] >= eps:
            self.max_bucket = b

    def subtract_sample(self, value: float, weight: float, timestamp: float | None = None) -> None:
        """Remove ``weight`` from the bucket of ``value``; results under epsilon become 0."""
        if weight < 0.0:
            raise ValueError("sample weight must be non-negative")
        b = self.options.find_bucket(value)
        eps = self.options.epsilon
        self.total_weight = _safe_subtract(self.total_weight, weight, eps)
        self.bucket_weight[b] = _safe_subtract(self.bucket_weight[b], weight, eps)
        self._update_min_max()

    def merge(self, other: Histogram) -> None:
        """Add ``other``'s weights (same options required, else ValueError)."""
        if self.options != other.options:
            raise ValueError("cannot merge histograms with different options")
        for b in range(other.min_bucket, other.max_bucket + 1):
            self.bucket_weight[b] += other.bucket_weight[b]
        self.total_weight += other.total_weight
        self.min_bucket = min(self.min_bucket, other.min_bucket)
        self.max_bucket = max(self.max_bucket, other.max_bucket)

    def percentile(self, p: float) -> float:
        """End of the first bucket whose cumulative weight reaches p * total (0.0 if empty)."""
        if self.is_empty():
            return 0.0
        partial = 0.0
        threshold = p * self.total_weight
        b = self.min_bucket
        while b < self.max_bucket:
            partial += self.bucket_weight[b]
            if partial >= threshold:
                break
            b += 1
        if b < self.options.num_buckets - 1:
            return self.options.bucket_start(b + 1)
        return self.options.bucket_start(b)

    def is_empty(self) -> bool:
        """True when the lowest tracked bucket is lighter than epsilon."""
        return self.bucket_weight[self.min_bucket] < self.options.epsilon

    def equals(self, other: Histogram, tol: float = 1e-15) -> bool:
        """Same options, same tracked range and weights within ``tol``."""
        if (self.options != other.options or self.min_bucket != other.min_bucket
                or self.max_bucket != other.max_bucket):
            return False
        return all(abs(self.bucket_weight[b] - other.bucket_weight[b]) <= tol
                   for b in range(self.min_bucket, self.max_bucket + 1))

    def _update_min_max(self) -> None:
        eps = self.options.epsilon
        last = self.options.num_buckets - 1
        while self.bucket_weight[self.min_bucket] < eps and self.min_bucket < last:
            self.min_bucket += 1
        while self.bucket_weight[self.max_bucket] < eps and self.max_bucket > 0:
            self.max_bucket -= 1

    def scale(self, factor: float) -> None:
        """Multiply the tracked buckets and the total by ``factor`` (>= 0, else ValueError)."""
        if factor < 0.0:
            raise ValueError("scale factor must be non-negative")
        for b in range(self.min_bucket, self.max_bucket + 1):
            self.bucket_weight[b] *= factor
        self.total_weight *= factor
        self._update_min_max()


def _safe_subtract(value: float, sub: float, epsilon: float) -> float:
    value -= sub
    return 0.0 if value < epsilon else value


class DecayingHistogram(Histogram):
    """Histogram whose samples lose half their weight every ``half_life_s`` seconds.

    Rather than decaying old samples, a sample at time t is added with weight
    w * 2**((t - reference) / half_life); the reference moves forward in whole half-lives (and
    all weights are rescaled) once a sample is more than 100 half-lives after it.
    """

    def __init__(self, options: HistogramOptions, half_life_s: float) -> None:
        super().__init__(options)
        self.half_life_s = float(half_life_s)
        self.reference_s: float | None = None

    def add_sample(self, value: float, weight: float, timestamp: float | None = None) -> None:
        """Add a sample observed at ``timestamp`` seconds (required)."""
        super().add_sample(value, weight * self._decay_factor(_need_time(timestamp)), timestamp)

    def subtract_sample(self, value: float, weight: float, timestamp: float | None = None) -> None:
        """Remove a sample previously added at ``timestamp`` seconds (required)."""
        super().subtract_sample(value, weight * self._decay_factor(_need_time(timestamp)),
                                timestamp)

    def merge(self, other: Histogram) -> None:
        """Merge another decaying histogram, aligning both reference timestamps first."""
        if not isinstance(other, DecayingHistogram) or other.half_life_s != self.half_life_s:
            raise ValueError("cannot merge decaying histograms with different half-lives")
        if _before(self.reference_s, other.reference_s):
            self._shift_reference(other.reference_s)
        elif _before(other.reference_s, self.reference_s):
            other._shift_reference(self.reference_s)
        super().merge(other)

    def equals(self, other: Histogram, tol: float = 1e-15) -> bool:
        """Same half-life, same reference and equal weights."""
        return (isinstance(other, DecayingHistogram) and other.half_life_s == self.half_life_s
                and other.reference_s == self.reference_s and super().equals(other, tol))

    def _shift_reference(self, new_reference_s: float | None) -> None:
        assert new_reference_s is not None
        h = self.half_life_s
        new_ref = _go_round(new_reference_s / h) * h
        if self.reference_s is None:
            # Go's zero time lies ~2000 years back: the exponent underflows to a factor of 0.
            factor = 0.0
        else:
            factor = math.ldexp(1.0, _go_round((self.reference_s - new_ref) / h))
        self.scale(factor)
        self.reference_s = new_ref

    def _decay_factor(self, timestamp: float) -> float:
        if self.reference_s is None or timestamp > self.reference_s + self.half_life_s * MAX_DECAY_EXPONENT:
            self._shift_reference(timestamp)
        assert self.reference_s is not None
        return math.pow(2.0, (timestamp - self.reference_s) / self.half_life_s)


def _need_time(timestamp: float | None) -> float:
    if timestamp is None:
        raise ValueError("a decaying histogram needs sample timestamps")
    return float(timestamp)


def _before(a: float | None, b: float | None) -> bool:
    """Go's a.Before(b) with None as the zero time."""
    if a is None:
        return b is not None
    return b is not None and a < b
