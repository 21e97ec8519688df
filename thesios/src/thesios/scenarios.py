"""What-if scenarios on the embedded fleet: parse specs, synthesize, serve, compare with baseline.

Spec strings (the CLI's ``--scenario``):
``capacity:x2`` (merge twice the disk-days: a disk with twice the data and load), ``rpm:5400``
(spindle speed), ``spin-down:zone=COLD,timeout=300s`` (a disk holding only that zone's data, spun
down after the timeout), ``cache:x2`` (buffer cache twice the baseline, LRU against Belady, on a
spatially hash-sampled block stream: SHARDS, Waldspurger et al., FAST 2015),
``disk:elevator[,writeback=64MiB][,spindown=300s][,zone=COLD]`` (the disk where order matters,
:mod:`thesios.positional`, with a scheduler, fifo, elevator, deadline or priority, optionally a
write-back cache, spin-down after an idle timeout, and only one zone's data: the miss reads and the
writes served by seek, rotation and transfer; compare with ``disk:fifo``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from thesios.diskmodel import fit_service_time, split_service_time
from thesios.errors import ThesiosInputError
from thesios.fleet import DAY_S, FleetGenerator, FleetSpec
from thesios.identify import disk_features, identify
from thesios.load import load_metrics
from thesios.partitions import Backend, LocalBackend, sample_fleet
from thesios.reorganizer import NS_PER_S, fifo_schedule, to_ns
from thesios.requests import Requests
from thesios.samplers import hash_sample_mask  # noqa: F401 - re-exported for callers
from thesios.schema import IO_ZONES
from thesios.synth import synthesize
from thesios.whatif import (
    PowerModel,
    belady_misses,
    lru_misses,
    rpm_whatif,
    sampled_block_keys,
    spin_down_energy,
    spin_down_schedule,
)


@dataclass(frozen=True)
class Scenario:
    """A parsed what-if: ``kind`` in {capacity, rpm, spin-down, cache} and its parameters."""

    kind: str
    factor: float = 1.0
    rpm: float = 0.0
    zone: str | None = None
    timeout_s: float = 300.0
    spec: str = ""
    scheduler: str = "fifo"
    cache_bytes: int = 0


_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(s|m|h)?$")


def _duration(text: str) -> float:
    m = _DURATION.match(text.strip())
    if not m:
        raise ThesiosInputError(f"{text!r} is not a non-negative duration (e.g. 300s, 5m, 1h)")
    return float(m.group(1)) * {"s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]


#: Largest capacity:/cache: factor: capacity:xK merges K/p disk-days into one disk.
MAX_FACTOR = 100.0


def _factor(text: str, spec: str) -> float:
    m = re.match(r"^x(.+)$", text.strip())
    try:
        factor = float(m.group(1)) if m else math.nan
    except ValueError:
        factor = math.nan
    if not 0 < factor <= MAX_FACTOR:  # NaN fails too
        raise ThesiosInputError(f"scenario {spec!r}: expected a factor in (0, {MAX_FACTOR:g}] like x2")
    return factor


def _key_values(items: list[str], spec: str) -> list[tuple[str, str | None]]:
    """The ``key=value`` items of a scenario as (key, value) pairs, value ``None`` for an item
    without ``=``; one parser for every kind, so all refuse the same things.

    Raises:
        ThesiosInputError: an empty item (``a,,b``) or a key given twice (``zone=COLD,zone=WARM``).
    """
    pairs = []
    for item in items:
        key, eq, value = item.strip().partition("=")
        key = key.strip()
        if not item.strip():
            raise ThesiosInputError(f"scenario {spec!r}: an empty item between commas")
        if not key:
            raise ThesiosInputError(f"scenario {spec!r}: {item.strip()!r} names no parameter")
        if any(key == k for k, _ in pairs):
            raise ThesiosInputError(f"scenario {spec!r}: {key} is given twice")
        pairs.append((key, value.strip() if eq else None))
    return pairs


def parse_scenario(spec: str) -> Scenario:
    """Parse one ``--scenario`` string.

    Raises:
        ThesiosInputError: unknown kind, malformed parameter, or an out-of-range value.
    """
    kind, _, arg = spec.partition(":")
    kind = kind.strip()
    if kind == "capacity":
        return Scenario("capacity", factor=_factor(arg, spec), spec=spec)
    if kind == "cache":
        return Scenario("cache", factor=_factor(arg, spec), spec=spec)
    if kind == "rpm":
        try:
            rpm = float(arg)
        except ValueError:
            raise ThesiosInputError(f"scenario {spec!r}: expected rpm:<number>") from None
        if not 0 < rpm <= 30000:
            raise ThesiosInputError(f"scenario {spec!r}: RPM must be in (0, 30000]")
        return Scenario("rpm", rpm=rpm, spec=spec)
    if kind == "spin-down":
        pairs = _key_values(arg.split(",") if arg.strip() else [], spec)
        unknown = sorted(k for k, v in pairs if k not in ("zone", "timeout") or v is None)
        if unknown:
            raise ThesiosInputError(f"scenario {spec!r}: unknown parameter(s) {unknown}")
        params = dict(pairs)
        zone = params.get("zone")
        if zone is not None and zone not in IO_ZONES:
            raise ThesiosInputError(f"scenario {spec!r}: zone must be one of {', '.join(IO_ZONES)}")
        try:
            timeout_s = _duration(params.get("timeout", "300s"))
        except ThesiosInputError as err:
            raise ThesiosInputError(f"scenario {spec!r}: timeout {err}") from None
        return Scenario("spin-down", zone=zone, timeout_s=timeout_s, spec=spec)
    if kind == "disk":
        return _disk_scenario(arg, spec)
    raise ThesiosInputError(f"unknown scenario {spec!r} (capacity:xK, rpm:R, spin-down:zone=Z,timeout=T, cache:xK, disk:SCHEDULER[,writeback=SIZE])")


def _disk_scenario(arg: str, spec: str) -> Scenario:
    """``disk:SCHEDULER[,writeback=SIZE]`` with SIZE like 64MiB (KiB, MiB, GiB or bytes)."""
    from thesios.positional import SCHEDULERS

    scheduler, *params = [p.strip() for p in arg.split(",")]
    if scheduler not in SCHEDULERS:
        raise ThesiosInputError(f"scenario {spec!r}: the scheduler must be one of {', '.join(SCHEDULERS)}")
    cache, spindown, zone = 0, None, None
    for key, value in _key_values(params, spec):
        p = key if value is None else f"{key}={value}"
        value = value or ""
        m = re.match(r"^(\d+)(KiB|MiB|GiB)?$", value)
        if key == "writeback" and m:
            cache = int(m.group(1)) << {None: 0, "KiB": 10, "MiB": 20, "GiB": 30}[m.group(2)]
        elif key == "spindown":
            try:
                spindown = _duration(value)
            except ThesiosInputError as err:
                raise ThesiosInputError(f"scenario {spec!r}: spindown {err}") from None
        elif key == "zone" and value in IO_ZONES:
            zone = value
        else:
            raise ThesiosInputError(f"scenario {spec!r}: expected writeback=SIZE like 64MiB, spindown=DURATION "
                                    f"like 300s or zone={'|'.join(IO_ZONES)}, got {p!r}")
    return Scenario("disk", scheduler=scheduler, cache_bytes=cache, spec=spec, zone=zone,
                    timeout_s=spindown if spindown is not None else -1.0)


def _spindown(sc: Scenario) -> float | None:
    return sc.timeout_s if sc.kind == "disk" and sc.timeout_s >= 0 else None


def positional_metrics(trace: Requests, hdd, scheduler: str = "fifo", cache_bytes: int = 0,
                       horizon: tuple[float, float] = (0.0, DAY_S), spindown_s: float | None = None,
                       power: PowerModel | None = None) -> dict[str, float]:
    """:func:`serve_metrics` on the disk where order matters: the miss reads and the writes of
    ``trace`` served by :func:`thesios.positional.serve` (each file in a region at a hashed place of
    a 4 TB disk, :func:`thesios.positional.lba_of`), with ``scheduler`` and a write-back cache of
    ``cache_bytes``; utilization counts destages too. With ``spindown_s`` the platters spin down
    after that long idle (spin-up ``power.spinup_s``, fed back into the queue) and the idle energy
    over the schedule's gaps is given beside the always-spinning disk's."""
    from thesios.positional import PositionalDisk, lba_of, serve

    tr = trace.take(trace.is_miss_read | ~trace.is_read).sorted_by_time()
    power = power or PowerModel()
    disk = PositionalDisk(hdd=hdd, write_cache_bytes=cache_bytes, spindown_s=spindown_s, spinup_s=power.spinup_s)
    fid = tr.disk_id.astype(np.int64) * 1_000_003 + tr.file_id
    sched = serve(tr.start_time, lba_of(fid, tr.file_offset, disk.capacity_bytes), tr.size, ~tr.is_read, disk,
                  scheduler, priority=tr.service_class)
    lat = sched.latency[tr.is_read]
    return {
        "requests": float(len(trace)),
        **load_metrics(sched.job_start, sched.job_start + sched.job_service, horizon),
        "read_latency_p50_s": float(np.percentile(lat, 50)) if len(lat) else float("nan"),
        "read_latency_p99_s": float(np.percentile(lat, 99)) if len(lat) else float("nan"),
        "scheduler": scheduler, "write_cache_bytes": cache_bytes, "destages": sched.destages,
    } | ({} if spindown_s is None else _positional_energy(sched, spindown_s, power, horizon))


def _positional_energy(sched, spindown_s: float, power: PowerModel, horizon: tuple[float, float]) -> dict:
    """Idle energy over the gaps of a positional schedule with spin-down (closed form,
    :func:`thesios.whatif.spin_down_energy`), spin-ups counted by the schedule."""
    ends = np.concatenate(([horizon[0]], sched.job_start + sched.job_service))
    begins = np.concatenate((sched.job_start, [max(horizon[1], float(ends[-1]))]))
    gaps = np.clip(begins - ends, 0.0, None)
    e = spin_down_energy(gaps[gaps > 0], spindown_s, power)
    return {"spindown_s": spindown_s, "spin_ups": sched.spin_ups, "idle_energy_j": e.energy_j,
            "always_on_idle_energy_j": e.always_on_j, "saving": e.saving, "break_even_s": power.break_even_s}


def serve_metrics(trace: Requests, horizon: tuple[float, float] = (0.0, DAY_S)) -> dict[str, float]:
    """Service metrics of a trace's cache-miss reads served FIFO for their ``disk_time``, arrivals
    over ``horizon`` (s): requests, the keys of :func:`thesios.load.load_metrics` (utilization over
    the span including the queue's drain, peak-hour utilization, offered load) and miss-read
    latency p50/p99 (s)."""
    miss = trace.is_miss_read
    a = to_ns(trace.start_time[miss])
    order = np.argsort(a, kind="stable")
    a = a[order]
    s = to_ns(trace.disk_time[miss])[order]
    start, finish = fifo_schedule(a, s)
    lat = (finish - a) / NS_PER_S
    return {
        "requests": float(len(trace)),
        **load_metrics(start / NS_PER_S, finish / NS_PER_S, horizon),
        "read_latency_p50_s": float(np.percentile(lat, 50)) if len(lat) else float("nan"),
        "read_latency_p99_s": float(np.percentile(lat, 99)) if len(lat) else float("nan"),
    }


def _spin_down(trace: Requests, sc: Scenario, power: PowerModel, horizon: tuple[float, float]) -> dict:
    """Spin-down of a disk serving ``trace`` (miss reads with their service, writes as instants),
    the spin-up delay fed back into the queue (:func:`thesios.whatif.spin_down_schedule`);
    energy over the idle gaps in closed form; latency beside the always-spinning baseline."""
    miss = trace.is_miss_read
    disk = miss | ~trace.is_read
    order = np.argsort(trace.start_time[disk], kind="stable")
    a = to_ns(trace.start_time[disk][order])
    s = to_ns(np.where(miss, trace.disk_time, 0.0)[disk][order])
    is_miss = miss[disk][order]
    begin = min(to_ns(np.array([horizon[0]]))[0], a[0] if len(a) else 0)
    _, base_finish = fifo_schedule(a, s)
    end = max(to_ns(np.array([horizon[1]]))[0], base_finish[-1] if len(a) else 0)
    sched = spin_down_schedule(a, s, int(to_ns(np.array([sc.timeout_s]))[0]), int(to_ns(np.array([power.spinup_s]))[0]), (begin, end))
    gaps = sched.gaps_ns / NS_PER_S
    e = spin_down_energy(gaps, sc.timeout_s, power)
    # The first-order view (gaps of the always-spinning schedule, each spin-up delaying one
    # request by the spin-up time) beside it, to show what the feedback changes.
    base_gaps = spin_down_schedule(a, s, 2**62, 0, (begin, end)).gaps_ns / NS_PER_S
    first = spin_down_energy(base_gaps, sc.timeout_s, power)
    added = (sched.finish_ns - base_finish) / NS_PER_S
    lat, base_lat = (sched.finish_ns - a)[is_miss] / NS_PER_S, (base_finish - a)[is_miss] / NS_PER_S

    def pct(x: np.ndarray, q: float) -> float:
        return float(np.percentile(x, q)) if len(x) else float("nan")

    q = np.linspace(0.0, 1.0, 101)
    return {
        "read_latency_quantiles_s": [float(x) for x in np.quantile(lat, q)] if len(lat) else [],
        "baseline_read_latency_quantiles_s": [float(x) for x in np.quantile(base_lat, q)] if len(base_lat) else [],
        "zone": sc.zone, "timeout_s": sc.timeout_s, "spinup_s": power.spinup_s, "idle_energy_j": e.energy_j,
        "always_on_idle_energy_j": e.always_on_j, "saving": e.saving, "spin_ups": e.spin_ups,
        "requests_spun_up": int(sched.spun_up.sum()), "requests_delayed": int((added > 0).sum()),
        "added_latency_s": float(added.sum()), "added_latency_mean_s": float(added.mean()) if len(added) else 0.0,
        "added_latency_max_s": float(added.max()) if len(added) else 0.0,
        "read_latency_p50_s": pct(lat, 50), "read_latency_p99_s": pct(lat, 99),
        "baseline_read_latency_p50_s": pct(base_lat, 50), "baseline_read_latency_p99_s": pct(base_lat, 99),
        "first_order_spin_ups": first.spin_ups, "first_order_added_latency_s": first.added_latency_s,
        "mean_idle_gap_s": float(gaps.mean()) if len(gaps) else 0.0,
        "share_of_gaps_beyond_break_even": float((gaps > power.break_even_s).mean()) if len(gaps) else 0.0,
        "break_even_s": power.break_even_s, "fixed_point_iterations": sched.iterations,
    }


def _one_namespace(trace: Requests) -> Requests:
    """A synthesized trace with its source disks' names merged into one disk's.

    The samples of a group's disks name files by their popularity rank within the disk
    (:mod:`thesios.fleet`), so keying blocks by (file, block) without the source disk makes the
    merged samples one disk's reference stream: a request of one disk and a sampled request of a
    similar disk draw file and block from the same distribution. Keyed by source disk, two samples
    would share a block only within one source disk (probability ~p^2), and a cache would see no
    reuse at all."""
    return replace(trace, disk_id=np.zeros_like(trace.disk_id))


def _cache(trace: Requests, sc: Scenario, cache_blocks: int, shards_rate: float, seed: int) -> dict:
    kept = sampled_block_keys(trace, shards_rate, seed)
    c0 = max(1, round(cache_blocks * shards_rate))
    c1 = max(1, round(cache_blocks * sc.factor * shards_rate))
    return {
        "blocks_sampled": len(kept), "shards_rate": shards_rate, "cache_blocks": cache_blocks, "factor": sc.factor,
        "lru_miss_ratio": float(lru_misses(kept, c0).mean()) if len(kept) else 0.0,
        "lru_miss_ratio_scaled": float(lru_misses(kept, c1).mean()) if len(kept) else 0.0,
        "belady_miss_ratio_scaled": float(belady_misses(kept, c1).mean()) if len(kept) else 0.0,
    }


def recorded_overlap(trace: Requests) -> float:
    """Share of a trace's cache-miss reads that began while an earlier one was still in service
    by the trace's own ``disk_time`` (0 to 1; 0 with fewer than two): above 0 the recorded device
    served several reads at once (flash, several in flight), which one FIFO disk cannot."""
    miss = trace.is_miss_read
    a = trace.start_time[miss]
    order = np.argsort(a, kind="stable")
    a, f = a[order], (a + trace.disk_time[miss])[order]
    if len(a) < 2:
        return 0.0
    return float(np.mean(a[1:] < np.maximum.accumulate(f[:-1])))


def check_zones(zone: np.ndarray, scenarios: list[Scenario], where: str) -> None:
    """Refuse a scenario of one zone's data (``zone=Z``) where no request is in zone Z.

    Args:
        zone: int8 zone codes of the requests (indices into :data:`thesios.schema.IO_ZONES`).
        scenarios: the parsed scenarios; those without a zone pass.
        where: the trace's name (a file) or what the requests are, for the message.

    Raises:
        ThesiosInputError: naming the zone and the zones present (with their request counts).
    """
    counts = np.bincount(np.asarray(zone, dtype=np.int64), minlength=len(IO_ZONES))
    for sc in scenarios:
        if sc.zone is not None and counts[IO_ZONES.index(sc.zone)] == 0:
            present = ", ".join(f"{z} ({c:,} requests)" for z, c in zip(IO_ZONES, counts.tolist()) if c) or "none"
            raise ThesiosInputError(f"{where}: scenario {sc.spec!r}: no request is in zone {sc.zone}; zones present: {present}")


def _fit_split(trace: Requests, rpm: float, where: str) -> tuple[Requests, dict]:
    """``trace`` with the rotation/transfer split of its miss reads' ``disk_time`` from a size-linear
    fit (:func:`thesios.diskmodel.fit_service_time`), and the fit as a dict; errors begin with ``where``."""
    miss = trace.is_miss_read
    try:
        fit = fit_service_time(trace.disk_time[miss], trace.size[miss])
    except ThesiosInputError as err:
        sizes = np.unique(trace.size[miss])
        seen = f" (all {int(miss.sum()):,} are {int(sizes[0]):,} bytes)" if len(sizes) == 1 else ""
        raise ThesiosInputError(f"{where}: {err}{seen}; the modelled disk needs no fit: compare "
                                "`-s disk:fifo` with `--rpm R -s disk:fifo`") from None
    rot, xfer = split_service_time(trace.disk_time, trace.size, rpm, fit)
    t = replace(trace, rotation_time=np.where(miss, rot, 0.0), transfer_time=np.where(miss, xfer, 0.0))
    return t, {"overhead_s": fit.overhead_s, "rate_bps": fit.rate_bps, "residual_s": fit.residual_s}


def run_trace_scenarios(
    trace: Requests, scenarios: list[Scenario], rpm: float = 7200.0, power: PowerModel | None = None,
    cache_blocks: int = 262_144, shards_rate: float = 0.002, seed: int = 0, source: str = "the trace",
) -> dict:
    """What-ifs on one disk's trace (e.g. a Thesios shard): rpm, spin-down and cache.

    The rotation/transfer split of ``disk_time`` comes from the trace when known, else from a
    size-linear fit (:func:`thesios.diskmodel.fit_service_time`) with mean rotation 30/RPM.
    ``source`` names the trace (its file) in error messages.

    Raises:
        ThesiosInputError: a capacity scenario (it needs a fleet's samples), an empty trace, a
            scenario of a zone no request is in (before any simulation), or an rpm what-if whose
            fit fails (miss reads of one size).
    """
    power = power or PowerModel()
    if len(trace) == 0:
        raise ThesiosInputError(f"{source}: the trace has no requests")
    check_zones(trace.zone, scenarios, source)
    horizon = (float(trace.start_time.min()), float(trace.start_time.max()))
    trace = trace.sorted_by_time()
    out: dict = {"requests": len(trace), "horizon_s": list(horizon), "baseline": serve_metrics(trace, horizon),
                 "recorded_overlap": recorded_overlap(trace), "scenarios": {}}
    for sc in scenarios:
        if sc.kind == "capacity":
            raise ThesiosInputError("capacity what-ifs merge samples of more disks: run `thesios whatif` without TRACE")
        if sc.kind == "rpm":
            t = trace
            if np.isnan(trace.rotation_time[trace.is_miss_read]).any():
                t, out["fit"] = _fit_split(trace, rpm, f"{source}: scenario {sc.spec!r}")
            out["scenarios"][sc.spec] = serve_metrics(rpm_whatif(t, rpm, sc.rpm), horizon)
        elif sc.kind == "spin-down":
            sub = trace if sc.zone is None else trace.take(trace.zone == IO_ZONES.index(sc.zone))
            out["scenarios"][sc.spec] = _spin_down(sub, sc, power, horizon)
        elif sc.kind == "disk":
            from thesios.diskmodel import HDDModel

            sub = trace if sc.zone is None else trace.take(trace.zone == IO_ZONES.index(sc.zone))
            out["scenarios"][sc.spec] = positional_metrics(sub, HDDModel(rpm=rpm), sc.scheduler, sc.cache_bytes, horizon,
                                                           _spindown(sc), power)
        else:
            out["scenarios"][sc.spec] = _cache(trace, sc, cache_blocks, shards_rate, seed)
    return out


def group_whatifs(
    samples: Requests, spec: FleetSpec, rate: float, scenarios: list[Scenario], seed: int, power: PowerModel,
    cache_blocks: int, shards_rate: float, group: int, members: np.ndarray, n_groups: int,
    progress: Callable[[str], None] | None = None,
) -> dict:
    """Baseline and what-ifs of one group's synthesized disk (day 0): one task of :func:`run_scenarios`.

    ``members``: int64 disk ids of the group. Returns ``{"group", "disks", "coverage", "baseline",
    "scenarios": {spec: {...}}}`` (JSON-ready); depends on its arguments alone.
    """
    say = progress or (lambda _msg: None)
    gen = FleetGenerator(spec)
    rpm0 = spec.hdd.rpm
    say(f"group {group} of {n_groups} (0-{n_groups - 1}; {len(members)} disks): baseline")
    base = synthesize(samples, members, rate, days=spec.days)
    entry: dict = {"group": group, "disks": len(members), "coverage": base.coverage,
                   "baseline": serve_metrics(base.trace), "scenarios": {}}
    for sc in scenarios:
        say(f"group {group} of {n_groups}: {sc.spec}")
        if sc.kind == "capacity":
            res = synthesize(samples, members, rate, days=spec.days, scale=sc.factor)
            out = serve_metrics(res.trace) | {"coverage": res.coverage}
        elif sc.kind == "rpm":
            out = serve_metrics(rpm_whatif(base.trace, rpm0, sc.rpm))
        elif sc.kind == "spin-down":  # placement: a disk holding only that zone's data
            sub = samples if sc.zone is None else samples.take(samples.zone == IO_ZONES.index(sc.zone))
            res = synthesize(sub, members, rate, days=spec.days)
            out = _spin_down(res.trace, sc, power, (0.0, DAY_S))
        elif sc.kind == "disk":
            disk_trace = base.trace if sc.zone is None else \
                synthesize(samples.take(samples.zone == IO_ZONES.index(sc.zone)), members, rate, days=spec.days).trace
            out = positional_metrics(disk_trace, spec.hdd, sc.scheduler, sc.cache_bytes, (0.0, DAY_S), _spindown(sc), power)
        else:
            out = _cache(_one_namespace(base.trace), sc, cache_blocks, shards_rate, seed)
            # The fleet is synthetic, so the what-if can be checked against a member's real
            # disk-day (full rate, the same spatial sampling); a real fleet has only the above.
            disk = int(members[0])
            full = gen.generate(np.array([disk]), 0, 1.0, np.random.default_rng([seed, 30, disk])).sorted_by_time()
            truth = _cache(full, sc, cache_blocks, shards_rate, seed)
            out |= {f"full_trace_{k}": truth[k] for k in ("lru_miss_ratio", "lru_miss_ratio_scaled", "belady_miss_ratio_scaled")}
        entry["scenarios"][sc.spec] = out
    return entry


def run_scenarios(
    spec: FleetSpec, rate: float, scenarios: list[Scenario], seed: int = 0, power: PowerModel | None = None,
    cache_blocks: int = 262_144, shards_rate: float = 0.002, progress: Callable[[str], None] | None = None,
    backend: Backend | None = None,
) -> dict:
    """Baseline and what-ifs for one synthesized disk per group of the fleet (day 0).

    Sampling runs one task per (class, day) partition, the what-ifs one task per group, on
    ``backend`` (default: in process; the same result on every backend).

    Returns a JSON-ready dict: ``{"rate", "groups": [{"group", "disks", "baseline", "scenarios":
    {spec: {...}}}]}``. ``progress`` is called with one line per step (minutes at p = 1/1000).
    """
    say = progress or (lambda _msg: None)
    power = power or PowerModel()
    backend = backend or LocalBackend()
    FleetGenerator(spec)  # checks the spec before any task starts
    say(f"sampling {spec.n_disks} disks x {spec.days} days at p={rate:g} ({len(spec.classes) * spec.days} class-day partitions, {backend.name})")
    samples = sample_fleet(spec, rate, seed, backend)
    check_zones(samples.zone, scenarios, f"the fleet's {len(samples):,} samples")
    say(f"identifying groups from {len(samples)} samples")
    grouping = identify(disk_features(samples, spec.n_disks, spec.days), seed=seed)
    # In process the steps of each group are shown as they run; a worker's would be lost.
    step = say if getattr(backend, "in_process", False) else None
    if step is None:
        say(f"{grouping.k} groups: baseline and {len(scenarios)} what-ifs each, one {backend.name} task per group")
    items = [(g, np.flatnonzero(grouping.labels == g), grouping.k, step) for g in range(grouping.k)]
    groups = backend.map(group_whatifs, items, shared=(samples, spec, rate, scenarios, seed, power, cache_blocks, shards_rate))
    return {"rate": rate, "disks": spec.n_disks, "groups": groups}
