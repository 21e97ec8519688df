"""The VPA decaying histogram and memory-peak aggregation for N containers at once (numpy).

Same arithmetic as ``adares.vpa.histogram.DecayingHistogram`` and
``adares.vpa.recommender.ContainerAggregate`` (tests check equality on random sample streams),
with one reference timestamp and one memory window shared by all containers, which holds when
all are sampled at the same times (a replay).
"""

from __future__ import annotations

import math

import numpy as np

from adares.vpa.histogram import MAX_DECAY_EXPONENT, ExponentialHistogramOptions, _go_round


class BatchDecayingHistogram:
    """N decaying histograms over the same exponential buckets.

    weights: (N, B) float64; total: (N,); lo/hi: (N,) int, the tracked bucket range.
    """

    def __init__(self, n: int, options: ExponentialHistogramOptions, half_life_s: float) -> None:
        self.options = options
        b = options.num_buckets
        self.b = b
        self.weights = np.zeros((n, b))
        self.total = np.zeros(n)
        self.lo = np.full(n, b - 1, dtype=np.int64)
        self.hi = np.zeros(n, dtype=np.int64)
        self.half_life_s = float(half_life_s)
        self.reference_s: float | None = None
        self.starts = np.array([options.bucket_start(i) for i in range(b)])
        self._rows = np.arange(n)
        self._cols = np.arange(b)

    def find_bucket(self, values: np.ndarray) -> np.ndarray:
        """Bucket index per value (ExponentialHistogramOptions.find_bucket, vectorized)."""
        o = self.options
        with np.errstate(divide="ignore", invalid="ignore"):
            x = np.log(values * (o.ratio - 1) / o.first_bucket_size + 1) / math.log(o.ratio)
        b = np.where(values < o.first_bucket_size, 0, np.floor(np.nan_to_num(x, nan=0.0)))
        return np.minimum(b.astype(np.int64), self.b - 1)

    def _decay(self, t_s: float) -> float:
        if self.reference_s is None or t_s > self.reference_s + self.half_life_s * MAX_DECAY_EXPONENT:
            self._shift(t_s)
        assert self.reference_s is not None
        return math.pow(2.0, (t_s - self.reference_s) / self.half_life_s)

    def _shift(self, t_s: float) -> None:
        h = self.half_life_s
        new_ref = _go_round(t_s / h) * h
        factor = 0.0 if self.reference_s is None else math.ldexp(1.0, _go_round((self.reference_s - new_ref) / h))
        inside = (self._cols >= self.lo[:, None]) & (self._cols <= self.hi[:, None])
        self.weights = np.where(inside, self.weights * factor, self.weights)
        self.total *= factor
        self._update_range(np.ones(len(self.total), dtype=bool))
        self.reference_s = new_ref

    def _update_range(self, mask: np.ndarray) -> None:
        eps = self.options.epsilon
        heavy = self.weights >= eps
        up = heavy & (self._cols >= self.lo[:, None])
        new_lo = np.where(up.any(axis=1), np.argmax(up, axis=1), self.b - 1)
        down = heavy & (self._cols <= self.hi[:, None])
        new_hi = np.where(down.any(axis=1), self.b - 1 - np.argmax(down[:, ::-1], axis=1), 0)
        self.lo = np.where(mask, new_lo, self.lo)
        self.hi = np.where(mask, new_hi, self.hi)

    def add(self, values: np.ndarray, weights: np.ndarray | float, t_s: float,
            mask: np.ndarray | None = None) -> None:
        """Add one sample per container where ``mask`` (default all): value, weight at t_s."""
        w = np.broadcast_to(np.asarray(weights, dtype=np.float64), self.total.shape) * self._decay(t_s)
        rows = self._rows if mask is None else self._rows[mask]
        if rows.size == 0:
            return
        b = self.find_bucket(values[rows])
        self.weights[rows, b] += w[rows]
        self.total[rows] += w[rows]
        heavy = self.weights[rows, b] >= self.options.epsilon
        self.lo[rows] = np.where(heavy & (b < self.lo[rows]), b, self.lo[rows])
        self.hi[rows] = np.where(heavy & (b > self.hi[rows]), b, self.hi[rows])

    def subtract(self, values: np.ndarray, weights: np.ndarray | float, t_s: float,
                 mask: np.ndarray) -> None:
        """Remove one sample per container where ``mask``."""
        w = np.broadcast_to(np.asarray(weights, dtype=np.float64), self.total.shape) * self._decay(t_s)
        rows = self._rows[mask]
        if rows.size == 0:
            return
        eps = self.options.epsilon
        b = self.find_bucket(values[rows])
        tot = self.total[rows] - w[rows]
        self.total[rows] = np.where(tot < eps, 0.0, tot)
        bw = self.weights[rows, b] - w[rows]
        self.weights[rows, b] = np.where(bw < eps, 0.0, bw)
        self._update_range(mask)

    def forget(self, mask: np.ndarray) -> None:
        """Empty the histograms of the containers ``mask`` ((N,) bool): new ones (lifetimes)."""
        self.weights[mask] = 0.0
        self.total[mask] = 0.0
        self.lo[mask] = self.b - 1
        self.hi[mask] = 0

    def percentile(self, p: float) -> np.ndarray:
        """Per container: end of the bucket crossing p * total (0.0 where empty)."""
        return self.percentiles((p,))[0]

    def percentiles(self, ps: tuple[float, ...]) -> list[np.ndarray]:
        """``percentile`` for several p at once (one cumulative sum)."""
        # Only the columns some container tracks matter; cutting the rest keeps the replay fast.
        c0 = int(self.lo.min())
        c1 = max(int(self.hi.max()) + 1, c0 + 1)
        cols = self._cols[c0:c1]
        inside = cols >= self.lo[:, None]
        cs = np.cumsum(np.where(inside, self.weights[:, c0:c1], 0.0), axis=1)
        valid = inside & (cols < self.hi[:, None])
        empty = self.weights[self._rows, self.lo] < self.options.epsilon
        out = []
        for p in ps:
            hit = (cs >= (p * self.total)[:, None]) & valid
            bucket = np.where(hit.any(axis=1), c0 + np.argmax(hit, axis=1), self.hi)
            val = np.where(bucket < self.b - 1, self.starts[np.minimum(bucket + 1, self.b - 1)],
                           self.starts[bucket])
            out.append(np.where(empty, 0.0, val))
        return out


class BatchMemoryPeaks:
    """Per-window memory peaks and OOM bumps of N containers feeding a BatchDecayingHistogram
    (model.ContainerState.addMemorySample / RecordOOM). Amounts are bytes (integers held in
    float64, exact below 2**53)."""

    def __init__(self, hist: BatchDecayingHistogram, window_s: float = 86400.0,
                 oom_bump_ratio: float = 1.2, oom_min_bump_bytes: float = 100 * 2**20) -> None:
        n = len(hist.total)
        self.hist = hist
        self.window_s = window_s
        self.ratio = oom_bump_ratio
        self.min_bump = float(math.trunc(oom_min_bump_bytes))
        self.window_end_s: float | None = None
        self.memory_peak = np.zeros(n)
        self.oom_peak = np.zeros(n)

    def add(self, t_s: float, nbytes: np.ndarray, is_oom: bool = False,
            mask: np.ndarray | None = None) -> None:
        """Fold one sample per container (where ``mask``) into the current window's peak.
        A sample that opens a new window must cover all containers (ValueError otherwise)."""
        n = len(self.memory_peak)
        mask = np.ones(n, dtype=bool) if mask is None else mask
        nbytes = np.trunc(nbytes)
        if self.window_end_s is None:
            self.window_end_s = t_s
        if t_s < self.window_end_s:
            old = np.maximum(self.memory_peak, self.oom_peak)
            # As the Go code: a sample above the window's peak replaces it (the old peak is
            # subtracted unless there was none: a container forgotten mid-window).
            sel = mask & (nbytes > old)
            self.hist.subtract(old, 1.0, self.window_end_s, sel & (old != 0))
        else:
            if not mask.all():
                raise ValueError("a new memory window must be opened by all containers")
            shift = math.floor((t_s - self.window_end_s) / self.window_s) * self.window_s
            self.window_end_s += shift + self.window_s
            self.memory_peak[:] = 0.0
            self.oom_peak[:] = 0.0
            sel = mask
        self.hist.add(nbytes, 1.0, self.window_end_s, sel)
        if is_oom:
            self.oom_peak = np.where(sel, nbytes, self.oom_peak)
        else:
            self.memory_peak = np.where(sel, nbytes, self.memory_peak)

    def forget(self, mask: np.ndarray) -> None:
        """Forget the containers ``mask`` ((N,) bool): their histogram and window peaks."""
        self.hist.forget(mask)
        self.memory_peak[mask] = 0.0
        self.oom_peak[mask] = 0.0

    def record_oom(self, t_s: float, requested: np.ndarray, mask: np.ndarray) -> None:
        """OOM kills at t_s where ``mask``: peak max(used + 100 MiB, trunc(1.2 * used)),
        used = max(request, window peak)."""
        used = np.maximum(np.trunc(requested), self.memory_peak)
        needed = np.maximum(used + self.min_bump, np.trunc(used * self.ratio))
        self.add(t_s, needed, is_oom=True, mask=mask)
