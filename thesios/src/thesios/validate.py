"""Validation: synthesized traces of held-out disks against their full ground-truth traces.

For each held-out disk (one per class of the fleet): the fleet is sampled at rate p; disks are
grouped from their samples alone (:mod:`thesios.identify`); the held-out disk's group, minus the
disk itself, gives ~1/p disk-days whose samples are merged (:mod:`thesios.synth`); the merged and
the real trace are both re-served on a FIFO disk (:mod:`thesios.reorganizer`). Per one-hour window
we compare read and write counts, disk utilization (busy time of the disk within the window over
the window) and the 50th/99th percentiles of cache-miss read latency. Accuracy of a metric in a
window is ``max(0, 1 - |synth - real| / real)`` (windows with ``real == 0`` skipped), averaged over
the day's windows, then over the held-out disks.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from thesios.errors import ThesiosInputError
from thesios.fleet import DAY_S, FleetGenerator, FleetSpec, default_fleet
from thesios.identify import disk_features, identify, purity
from thesios.load import busy_time_until
from thesios.partitions import Backend, LocalBackend, sample_fleet
from thesios.reorganizer import NS_PER_S, fifo_schedule, reorganize, to_ns
from thesios.requests import Requests
from thesios.samplers import check_rate
from thesios.synth import synthesize

#: Accuracy bands the Thesios paper reports against real disks (ASPLOS 2024, abstract and sec. 6).
PAPER_BANDS: dict[str, tuple[float, float]] = {
    "read_count": (0.95, 0.995),
    "write_count": (0.95, 0.995),
    "utilization": (0.90, 0.97),
    "read_latency_p50": (0.80, 0.998),
    "read_latency_p99": (0.80, 0.998),
}
METRICS = tuple(PAPER_BANDS)


def window_metrics(trace: Requests, day: int, window_s: float = 3600.0) -> dict[str, np.ndarray]:
    """Per-window metrics of one disk-day's trace (times absolute), each float64 of shape (W,).

    Keys: the names in :data:`METRICS`; latency percentiles are NaN in windows without misses.
    """
    t0 = day * DAY_S
    n_win = math.ceil(DAY_S / window_s)
    edges = t0 + np.arange(n_win + 1) * window_s
    win = np.clip(np.floor((trace.start_time - t0) / window_s).astype(np.int64), 0, n_win - 1)
    out = {
        "read_count": np.bincount(win[trace.is_read], minlength=n_win).astype(np.float64),
        "write_count": np.bincount(win[~trace.is_read], minlength=n_win).astype(np.float64),
    }
    miss = trace.is_miss_read
    arrival = trace.start_time[miss]
    order = np.argsort(arrival, kind="stable")
    a_ns = to_ns(arrival[order])
    start_ns, finish_ns = fifo_schedule(a_ns, to_ns(trace.disk_time[miss][order]))
    busy = busy_time_until(start_ns / NS_PER_S, finish_ns / NS_PER_S, edges)
    out["utilization"] = np.diff(busy) / window_s
    latency = (finish_ns - a_ns) / NS_PER_S
    mwin = win[miss][order]
    p50 = np.full(n_win, np.nan)
    p99 = np.full(n_win, np.nan)
    bounds = np.searchsorted(mwin, np.arange(n_win + 1))
    for w in range(n_win):  # one vectorized percentile per window (24 a day), not per request
        lo, hi = bounds[w], bounds[w + 1]
        if hi > lo:
            p50[w], p99[w] = np.percentile(latency[lo:hi], [50, 99])
    out["read_latency_p50"] = p50
    out["read_latency_p99"] = p99
    return out


def accuracy(synth: np.ndarray, real: np.ndarray) -> float:
    """Mean over windows of ``max(0, 1 - |synth - real| / real)``, skipping windows with real <= 0 or NaN."""
    ok = np.isfinite(real) & (real > 0) & np.isfinite(synth)
    if not ok.any():
        return float("nan")
    return float(np.mean(np.clip(1.0 - np.abs(synth[ok] - real[ok]) / real[ok], 0.0, None)))


@dataclass(frozen=True)
class ValidationResult:
    """Outcome of :func:`validate`; :meth:`to_json` gives the CLI's ``--json`` document."""

    rate: float
    disks: int
    days: int
    held_out: list[int]
    accuracy: dict[str, float]
    per_disk: dict[int, dict[str, float]]
    purity: float
    groups: int
    coverage: float
    sampled_requests: int
    seconds: float
    series: dict[int, dict[str, dict[str, np.ndarray]]] = field(default_factory=dict, repr=False)

    def to_json(self) -> dict:
        """``{"rate", "disks", "accuracy": {...}, "paper": {...}, ...}`` (plain JSON types)."""
        return {
            "rate": self.rate,
            "disks": self.disks,
            "days": self.days,
            "accuracy": self.accuracy,
            "paper": {m: list(b) for m, b in PAPER_BANDS.items()},
            "accuracy_definition": "per 1-hour window max(0, 1 - |synth - real| / real), averaged over windows then held-out disks; latency over cache-miss reads",
            "held_out_disks": self.held_out,
            "per_disk": {str(k): v for k, v in self.per_disk.items()},
            "grouping": {"groups": self.groups, "purity": self.purity},
            "coverage": self.coverage,
            "sampled_requests": self.sampled_requests,
            "seconds": self.seconds,
        }


def auto_fleet(rate: float, days: int = 4, seed: int = 0, held_out_per_class: int = 2, scale: float = 1.0) -> FleetSpec:
    """The default fleet sized so each class has ``scale``/p disk-days besides its held-out disks.

    At p = 1/10,000 over 4 days that is 2,502 disks per class, 10,008 sampled disks.
    """
    check_rate(rate)
    if days < 1 or held_out_per_class < 1:
        raise ThesiosInputError("days and held-out disks per class must be >= 1")
    per_class = math.ceil(scale / (rate * days)) + held_out_per_class
    limit = 200_000 // len(default_fleet().classes)
    if per_class > limit:
        need = f"{per_class:,}" if per_class < 1e9 else f"{per_class:.3g}"  # not a 300-digit integer at p = 1e-300
        raise ThesiosInputError(f"p={rate:g} over {days} days needs {need} disks per class (limit {limit:,}); "
                                "raise --rate or use more days")
    return default_fleet(disks_per_class=max(per_class, 2), days=days, seed=seed)


def evaluate_class(
    samples: Requests, spec: FleetSpec, rate: float, seed: int, window_s: float, day: int,
    disks: list[int], members_of: list[np.ndarray],
) -> list[tuple[dict[str, float], dict[str, dict[str, np.ndarray]], float]]:
    """The (class, day) partition of a validation: each held-out disk of one class on ``day``.

    For each disk in ``disks``: its full trace on ``day`` (the generator seeded by
    ``[seed, 20, disk]``), the synthesis from the samples of its group's members ``members_of[i]``
    (int64 disk ids, held-out disks removed), both windowed. Returns per disk ``(accuracy per
    metric, series {"real", "synth"} of window metrics and latency quantiles, coverage)``.
    """
    gen = FleetGenerator(spec)
    out = []
    quantiles = np.linspace(0, 100, 201)
    for disk, members in zip(disks, members_of, strict=True):
        real = gen.generate(np.array([disk]), day, 1.0, np.random.default_rng([seed, 20, disk])).sorted_by_time()
        result = synthesize(samples, members, rate, target_day=day, days=spec.days)
        m_real = window_metrics(real, day, window_s)
        m_syn = window_metrics(result.trace, day, window_s)
        series = {
            "real": m_real | {"latency_quantiles": np.percentile(reorganize(real)[2], quantiles)},
            "synth": m_syn | {"latency_quantiles": np.percentile(reorganize(result.trace)[2], quantiles)},
        }
        out.append(({m: accuracy(m_syn[m], m_real[m]) for m in METRICS}, series, result.coverage))
    return out


def validate(
    spec: FleetSpec | None = None,
    rate: float = 1e-4,
    seed: int = 0,
    window_s: float = 3600.0,
    held_out_per_class: int = 2,
    progress: Callable[[str], None] | None = None,
    backend: Backend | None = None,
) -> ValidationResult:
    """Run the validation described in this module's docstring; returns accuracies in [0, 1].

    Sampling runs one task per (class, day) partition and the held-out disks one task per
    (class, day 0) partition on ``backend`` (default: in process); grouping runs here. Every
    backend gives the same result, bit for bit.

    Raises:
        ThesiosInputError: p outside (0, 1] or a fleet too small to group.
    """
    t_begin = time.perf_counter()
    say = progress or (lambda _msg: None)
    backend = backend or LocalBackend()
    spec = spec or auto_fleet(rate, seed=seed, held_out_per_class=held_out_per_class)
    if not 1 <= held_out_per_class < spec.disks_per_class:
        raise ThesiosInputError("need 1 <= held-out disks per class < disks per class")
    FleetGenerator(spec)  # checks the spec before any task starts
    n_parts = len(spec.classes) * spec.days
    say(f"sampling {spec.n_disks} disks x {spec.days} days at p={rate:g} ({n_parts} class-day partitions, {backend.name})")
    samples = sample_fleet(spec, rate, seed, backend)
    say(f"identifying groups from {len(samples)} samples")
    features = disk_features(samples, spec.n_disks, spec.days)
    grouping = identify(features, seed=seed)
    truth = spec.disk_class(np.arange(spec.n_disks))
    pur = purity(grouping.labels, truth)
    held_out = [c * spec.disks_per_class + j for c in range(len(spec.classes)) for j in range(held_out_per_class)]
    is_held_out = np.zeros(spec.n_disks, dtype=bool)
    is_held_out[held_out] = True
    items = []
    for c in range(len(spec.classes)):
        disks = held_out[c * held_out_per_class:(c + 1) * held_out_per_class]
        members_of = []
        for disk in disks:
            members = np.flatnonzero(grouping.labels == grouping.labels[disk])
            members_of.append(members[~is_held_out[members]])  # held-out disks never feed a synthesis
        items.append((0, disks, members_of))
    say(f"{len(held_out)} held-out disks: full traces, synthesis, reorganization ({len(items)} class-day partitions)")
    results = [r for part in backend.map(evaluate_class, items, shared=(samples, spec, rate, seed, window_s)) for r in part]
    per_disk = {disk: r[0] for disk, r in zip(held_out, results, strict=True)}
    series = {disk: r[1] for disk, r in zip(held_out, results, strict=True)}
    acc = {m: float(np.nanmean([per_disk[d][m] for d in held_out])) for m in METRICS}
    return ValidationResult(
        rate=rate, disks=spec.n_disks, days=spec.days, held_out=held_out, accuracy=acc, per_disk=per_disk,
        purity=pur, groups=grouping.k, coverage=float(np.mean([r[2] for r in results])), sampled_requests=len(samples),
        seconds=time.perf_counter() - t_begin, series=series,
    )
