"""The synthesizer: one representative disk's full-rate trace from the samples of similar disks.

Thesios (Phothilimthana et al., ASPLOS 2024, sec. 4): the union of Bernoulli samples at rate p of
about 1/p similar disks over a window is, by superposition and thinning of Poisson processes, a
full-rate trace of one disk of their kind. Where a class has fewer than 1/p disks, the union runs
over disk-days (days folded onto one day's clock), same day first.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from thesios.errors import ThesiosInputError
from thesios.fleet import DAY_S
from thesios.requests import Requests


@dataclass(frozen=True)
class SynthResult:
    """A synthesized trace and what went into it.

    Attributes:
        trace: the merged requests, times folded onto ``target_day``, sorted by time.
        disk_days: int64 array (k, 2) of the (disk, day) pairs merged.
        coverage: merged disk-days times p (1.0 = exactly 1/p disk-days).
    """

    trace: Requests
    disk_days: np.ndarray
    coverage: float


def synthesize(
    samples: Requests,
    members: np.ndarray,
    rate: float,
    target_day: int = 0,
    days: int = 1,
    scale: float = 1.0,
) -> SynthResult:
    """Merge the samples of ``round(scale / rate)`` disk-days of ``members`` into one day's trace.

    Args:
        samples: Bernoulli samples at ``rate`` of a fleet (``start_time`` absolute seconds).
        members: int disk ids judged similar (the held-out disk excluded by the caller).
        rate: the sampling rate p in (0, 1].
        target_day: the day whose clock the result uses; its disk-days are merged first.
        days: days present in ``samples``.
        scale: what-if scaling (``capacity:x2`` merges 2/p disk-days: twice the load).

    Returns:
        A :class:`SynthResult`; ``coverage < scale`` when too few disk-days exist.

    Raises:
        ThesiosInputError: p outside (0, 1], no members, or ``scale <= 0``.
    """
    if not 0.0 < rate <= 1.0:
        raise ThesiosInputError(f"sampling rate must be in (0, 1], got {rate}")
    if scale <= 0:
        raise ThesiosInputError("scale must be positive")
    members = np.unique(np.asarray(members, dtype=np.int64))
    if len(members) == 0:
        raise ThesiosInputError("no similar disks to merge")
    want = round(scale / rate)
    day_order = [target_day] + [d for d in range(days) if d != target_day]
    pairs = np.array([(m, d) for d in day_order for m in members][:want], dtype=np.int64)
    day_of = np.floor(samples.start_time / DAY_S).astype(np.int64)
    n_disks = int(max(samples.disk_id.max(initial=0), members.max())) + 1
    chosen = np.zeros((n_disks, max(days, int(day_of.max(initial=0)) + 1)), dtype=bool)
    chosen[pairs[:, 0], pairs[:, 1]] = True
    keep = chosen[samples.disk_id, day_of]
    trace = samples.take(keep)
    trace.start_time = trace.start_time - (day_of[keep] - target_day) * DAY_S
    return SynthResult(trace.sorted_by_time(), pairs, len(pairs) * rate)


def trace_table(trace: Requests, applications: tuple[str, ...], discipline: str = "fifo") -> pa.Table:
    """A synthesized (or real) one-disk trace as a Thesios-schema table with the reorganizer's
    ``simulated_disk_start_time`` and ``simulated_latency`` filled: for cache-miss reads the
    simulated disk start and latency (s); for hits and writes the arrival time and 0."""
    from thesios.reorganizer import reorganize

    trace = trace.sorted_by_time()
    _, start, latency = reorganize(trace, discipline)
    miss = trace.is_miss_read
    sim_start = trace.start_time.copy()
    sim_lat = np.zeros(len(trace))
    sim_start[miss] = start  # reorganize serves the misses in this (stable, sorted) order
    sim_lat[miss] = latency
    table = trace.to_table(applications, with_disk_id=False)
    table = table.set_column(15, "simulated_disk_start_time", pa.array(sim_start))
    return table.set_column(16, "simulated_latency", pa.array(sim_lat))
