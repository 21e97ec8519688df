"""The synthesizer: one representative disk's full-rate trace from the samples of similar disks.

Thesios (Phothilimthana et al., ASPLOS 2024, sec. 4): the union of Bernoulli samples at rate p of
about 1/p similar disks over a window is, by superposition and thinning of Poisson processes, a
full-rate trace of one disk of their kind. Where a class has fewer than 1/p disks, the union runs
over disk-days (days folded onto one day's clock), same day first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from thesios.errors import ThesiosInputError
from thesios.fleet import DAY_S
from thesios.requests import Requests
from thesios.samplers import check_rate


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
    check_rate(rate)
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


def synth(
    spec,
    rate: float,
    disk: int = 0,
    seed: int = 0,
    discipline: str = "fifo",
    progress: Callable[[str], None] | None = None,
    backend=None,
) -> tuple[pa.Table, SynthResult]:
    """One day of a full-rate trace of a disk like ``disk`` of the fleet ``spec``, from samples.

    Samples the fleet at ``rate`` (one task per (class, day) partition on ``backend``), groups its
    disks from their samples alone (:mod:`thesios.identify`), merges the samples of ~1/p
    disk-days of ``disk``'s group, itself excluded (:func:`synthesize`), and reorganizes them
    (:func:`trace_table`).

    Args:
        spec: a :class:`thesios.fleet.FleetSpec`.
        rate: sampling rate p in (0, 1].
        disk: the disk whose likeness is synthesized, in [0, spec.n_disks).
        seed: seed of the sampler and the grouping.
        discipline: the reorganizer's queue, ``fifo`` or ``priority``.
        progress: called with one line per step.
        backend: a :class:`thesios.partitions.Backend` (default: in process).

    Returns:
        ``(table, result)``: the trace in the Thesios schema with ``simulated_*`` filled, and the
        merged requests with the disk-days that went into them.

    Raises:
        ThesiosInputError: p outside (0, 1], a disk outside the fleet, an unknown discipline.
    """
    from thesios.fleet import FleetGenerator
    from thesios.identify import disk_features, identify
    from thesios.partitions import sample_fleet

    check_rate(rate)
    if discipline not in ("fifo", "priority"):
        raise ThesiosInputError(f"--discipline must be fifo or priority, got {discipline!r}")
    if not 0 <= disk < spec.n_disks:
        raise ThesiosInputError(f"--disk must be in [0, {spec.n_disks})")
    say = progress or (lambda _msg: None)
    gen = FleetGenerator(spec)
    say(f"sampling {spec.n_disks} disks x {spec.days} days at p={rate:g}")
    samples = sample_fleet(spec, rate, seed, backend)
    say(f"identifying groups from {len(samples)} samples")
    labels = identify(disk_features(samples, spec.n_disks, spec.days), seed=seed).labels
    members = np.flatnonzero(labels == labels[disk])
    say(f"synthesizing a disk like {disk} from its group's {len(members) - 1} other disks")
    result = synthesize(samples, members[members != disk], rate, days=spec.days)
    say(f"reorganizing {len(result.trace)} requests ({discipline})")
    return trace_table(result.trace, gen.applications, discipline), result
