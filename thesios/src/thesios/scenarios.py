"""What-if scenarios on the embedded fleet: parse specs, synthesize, serve, compare with baseline.

Spec strings (the CLI's ``--scenario``):
``capacity:x2`` (merge twice the disk-days: a disk with twice the data and load), ``rpm:5400``
(spindle speed), ``spin-down:zone=COLD,timeout=300s`` (a disk holding only that zone's data, spun
down after the timeout), ``cache:x2`` (buffer cache twice the baseline, LRU against Belady, on a
spatially hash-sampled block stream: SHARDS, Waldspurger et al., FAST 2015).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from thesios.errors import ThesiosInputError
from thesios.fleet import DAY_S, FleetGenerator, FleetSpec
from thesios.identify import disk_features, identify
from thesios.reorganizer import NS_PER_S, fifo_schedule, to_ns
from thesios.requests import Requests
from thesios.schema import IO_ZONES
from thesios.samplers import hash_sample_mask  # noqa: F401 - re-exported for callers
from thesios.synth import synthesize
from thesios.whatif import (
    PowerModel,
    belady_misses,
    idle_gaps,
    lru_misses,
    rpm_whatif,
    sampled_block_keys,
    spin_down_energy,
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


_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(s|m|h)?$")


def _duration(text: str) -> float:
    m = _DURATION.match(text.strip())
    if not m:
        raise ThesiosInputError(f"bad duration {text!r} (e.g. 300s, 5m, 1h)")
    return float(m.group(1)) * {"s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]


def _factor(text: str, spec: str) -> float:
    m = re.match(r"^x(\d+(?:\.\d+)?)$", text.strip())
    if not m or float(m.group(1)) <= 0:
        raise ThesiosInputError(f"scenario {spec!r}: expected a factor like x2")
    return float(m.group(1))


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
        params = dict(p.split("=", 1) for p in arg.split(",") if "=" in p)
        unknown = set(params) - {"zone", "timeout"} or ({p for p in arg.split(",") if p and "=" not in p})
        if unknown:
            raise ThesiosInputError(f"scenario {spec!r}: unknown parameter(s) {sorted(unknown)}")
        zone = params.get("zone")
        if zone is not None and zone not in IO_ZONES:
            raise ThesiosInputError(f"scenario {spec!r}: zone must be one of {', '.join(IO_ZONES)}")
        return Scenario("spin-down", zone=zone, timeout_s=_duration(params.get("timeout", "300s")), spec=spec)
    raise ThesiosInputError(f"unknown scenario {spec!r} (capacity:xK, rpm:R, spin-down:zone=Z,timeout=T, cache:xK)")


def serve_metrics(trace: Requests) -> dict[str, float]:
    """Day-level service metrics of a one-day trace: utilization, peak-hour utilization, miss-read
    latency p50/p99 (s), requests."""
    miss = trace.is_miss_read
    a = to_ns(trace.start_time[miss])
    order = np.argsort(a, kind="stable")
    a = a[order]
    s = to_ns(trace.disk_time[miss])[order]
    start, finish = fifo_schedule(a, s)
    hours = np.bincount(np.clip((trace.start_time[miss][order] // 3600).astype(int), 0, 23), weights=s / NS_PER_S, minlength=24)
    lat = (finish - a) / NS_PER_S
    return {
        "requests": float(len(trace)),
        "utilization": float(s.sum() / NS_PER_S / DAY_S),
        "peak_hour_utilization": float(hours.max() / 3600.0),
        "read_latency_p50_s": float(np.percentile(lat, 50)) if len(lat) else float("nan"),
        "read_latency_p99_s": float(np.percentile(lat, 99)) if len(lat) else float("nan"),
    }


def _disk_events(trace: Requests) -> tuple[np.ndarray, np.ndarray]:
    """Busy intervals (s) of a disk: miss reads as served FIFO, writes as instants."""
    miss = trace.is_miss_read
    a = to_ns(trace.start_time[miss])
    order = np.argsort(a, kind="stable")
    start, finish = fifo_schedule(a[order], to_ns(trace.disk_time[miss])[order])
    w = np.sort(trace.start_time[~trace.is_read])
    st = np.concatenate((start / NS_PER_S, w))
    fi = np.concatenate((finish / NS_PER_S, w))
    order = np.argsort(st, kind="stable")
    st, fi = st[order], np.maximum.accumulate(fi[order])
    return st, fi


def run_scenarios(
    spec: FleetSpec, rate: float, scenarios: list[Scenario], seed: int = 0, power: PowerModel = PowerModel(),
    cache_blocks: int = 262_144, shards_rate: float = 0.002,
) -> dict:
    """Baseline and what-ifs for one synthesized disk per group of the fleet (day 0).

    Returns a JSON-ready dict: ``{"rate", "groups": [{"group", "disks", "baseline", "scenarios":
    {spec: {...}}}]}``.
    """
    gen = FleetGenerator(spec)
    rng = np.random.default_rng([seed, 10])
    samples = gen.sample_fleet(rate, rng)
    grouping = identify(disk_features(samples, spec.n_disks, spec.days), seed=seed)
    rpm0 = spec.hdd.rpm
    groups = []
    for g in range(grouping.k):
        members = np.flatnonzero(grouping.labels == g)
        base = synthesize(samples, members, rate, days=spec.days)
        entry: dict = {"group": g, "disks": int(len(members)), "coverage": base.coverage,
                       "baseline": serve_metrics(base.trace), "scenarios": {}}
        for sc in scenarios:
            if sc.kind == "capacity":
                res = synthesize(samples, members, rate, days=spec.days, scale=sc.factor)
                out = serve_metrics(res.trace) | {"coverage": res.coverage}
            elif sc.kind == "rpm":
                out = serve_metrics(rpm_whatif(base.trace, rpm0, sc.rpm))
            elif sc.kind == "spin-down":
                sub = samples if sc.zone is None else samples.take(samples.zone == IO_ZONES.index(sc.zone))
                res = synthesize(sub, members, rate, days=spec.days)
                st, fi = _disk_events(res.trace)
                gaps = idle_gaps(st, fi, (0.0, DAY_S))
                e = spin_down_energy(gaps, sc.timeout_s, power)
                out = {
                    "zone": sc.zone, "timeout_s": sc.timeout_s, "idle_energy_j": e.energy_j,
                    "always_on_idle_energy_j": e.always_on_j, "saving": e.saving, "spin_ups": e.spin_ups,
                    "added_latency_s": e.added_latency_s, "mean_idle_gap_s": float(gaps.mean()) if len(gaps) else 0.0,
                    "share_of_gaps_beyond_break_even": float((gaps > power.break_even_s).mean()) if len(gaps) else 0.0,
                    "break_even_s": power.break_even_s,
                }
            else:  # cache: a member's disk-day at full rate, spatially sampled blocks (SHARDS)
                disk = int(members[0])
                full = gen.generate(np.array([disk]), 0, 1.0, np.random.default_rng([seed, 30, disk])).sorted_by_time()
                kept = sampled_block_keys(full, shards_rate, seed)
                c0 = max(1, round(cache_blocks * shards_rate))
                c1 = max(1, round(cache_blocks * sc.factor * shards_rate))
                out = {
                    "blocks_sampled": int(len(kept)), "cache_blocks": cache_blocks, "factor": sc.factor,
                    "lru_miss_ratio": float(lru_misses(kept, c0).mean()) if len(kept) else 0.0,
                    "lru_miss_ratio_scaled": float(lru_misses(kept, c1).mean()) if len(kept) else 0.0,
                    "belady_miss_ratio_scaled": float(belady_misses(kept, c1).mean()) if len(kept) else 0.0,
                }
            entry["scenarios"][sc.spec] = out
        groups.append(entry)
    return {"rate": rate, "disks": spec.n_disks, "groups": groups}
