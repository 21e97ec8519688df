"""Speed and memory of thesios, measured side by side in one run.

Prints: reorganizer requests/s (vectorized) vs the same FIFO queue in SimPy and as a Python loop,
with ratios; the spin-down schedule (spin-up delay fed back) vs its per-request loop; synthesis requests/s; one disk-day (~1 M requests) end to end; memory of 10,000
sampled disks. Run from the thesios/ folder: ``python benchmarks/bench_thesios.py [--json]``.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from dataclasses import fields

import numpy as np
import simpy

from thesios.fleet import FleetGenerator
from thesios.identify import disk_features, identify
from thesios.reorganizer import fifo_schedule, fifo_schedule_loop, to_ns
from thesios.requests import Requests
from thesios.synth import synthesize
from thesios.validate import auto_fleet, window_metrics
from thesios.whatif import spin_down_schedule, spin_down_schedule_loop


def best_of(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def simpy_fifo(arrival_ns: np.ndarray, service_ns: np.ndarray) -> None:
    env = simpy.Environment()
    disk = simpy.Resource(env, capacity=1)

    def request(s: int):
        with disk.request() as req:
            yield req
            yield env.timeout(s)

    def source():
        for a, s in zip(arrival_ns.tolist(), service_ns.tolist()):
            yield env.timeout(a - env.now)
            env.process(request(s))

    env.process(source())
    env.run()


def main() -> None:
    out: dict[str, float] = {}
    rng = np.random.default_rng(0)
    n = 1_000_000
    arrival = to_ns(np.cumsum(rng.exponential(0.012, n)))
    service = to_ns(rng.uniform(0.002, 0.02, n))
    t_vec = best_of(lambda: fifo_schedule(arrival, service))
    m = 100_000
    t_simpy = best_of(lambda: simpy_fifo(arrival[:m], service[:m]), repeat=1)
    t_loop = best_of(lambda: fifo_schedule_loop(arrival[:m], service[:m]), repeat=1)
    out["reorganizer_requests_per_s"] = n / t_vec
    out["simpy_requests_per_s"] = m / t_simpy
    out["python_loop_requests_per_s"] = m / t_loop
    out["reorganizer_vs_simpy"] = out["reorganizer_requests_per_s"] / out["simpy_requests_per_s"]
    out["reorganizer_vs_loop"] = out["reorganizer_requests_per_s"] / out["python_loop_requests_per_s"]

    # Spin-down with the spin-up delay fed back (fixed point of vectorized passes) against its
    # per-request loop: gaps of mean 1 s, 3 s timeout, 1 s spin-up (~5% of requests spin up).
    gaps_arrival = to_ns(np.cumsum(rng.exponential(1.0, n)))
    horizon = (0, int(gaps_arrival[-1]) + 1)
    sd = spin_down_schedule(gaps_arrival, service, 3 * 10**9, 10**9, horizon)
    t_sd = best_of(lambda: spin_down_schedule(gaps_arrival, service, 3 * 10**9, 10**9, horizon), repeat=1)
    t_sd_loop = best_of(lambda: spin_down_schedule_loop(gaps_arrival[:m], service[:m], 3 * 10**9, 10**9, 0), repeat=1)
    out["spin_down_requests_per_s"] = n / t_sd
    out["spin_down_fixed_point_passes"] = sd.iterations
    out["spin_down_loop_requests_per_s"] = m / t_sd_loop
    out["spin_down_vs_loop"] = out["spin_down_requests_per_s"] / out["spin_down_loop_requests_per_s"]

    # 10,000 sampled disks at p = 1/10,000 over four days.
    spec = auto_fleet(1e-4)
    gen = FleetGenerator(spec)
    t = time.perf_counter()
    samples = gen.sample_fleet(1e-4, np.random.default_rng(1))
    out["sample_fleet_s"] = time.perf_counter() - t
    out["sampled_disks"] = spec.n_disks
    out["samples"] = len(samples)
    out["samples_mib"] = sum(getattr(samples, f.name).nbytes for f in fields(Requests)) / 2**20
    t = time.perf_counter()
    grouping = identify(disk_features(samples, spec.n_disks, spec.days))
    out["identify_s"] = time.perf_counter() - t
    members = np.flatnonzero(grouping.labels == grouping.labels[0])
    t_syn = best_of(lambda: synthesize(samples, members, 1e-4, days=spec.days))
    res = synthesize(samples, members, 1e-4, days=spec.days)
    out["synthesis_requests_per_s"] = len(samples) / t_syn  # samples scanned per second
    out["synthesized_requests"] = len(res.trace)

    # One disk-day at full rate (~0.9 M requests): generate, reorganize, window metrics.
    t = time.perf_counter()
    full = gen.generate(np.array([0]), 0, 1.0, np.random.default_rng(2)).sorted_by_time()
    t_gen = time.perf_counter() - t
    t = time.perf_counter()
    window_metrics(full, 0)
    t_metrics = time.perf_counter() - t
    out["disk_day_requests"] = len(full)
    out["disk_day_generate_s"] = t_gen
    out["disk_day_reorganize_and_metrics_s"] = t_metrics
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if "--json" in sys.argv:
        print(json.dumps(out, indent=2))
        return
    for k, v in out.items():
        print(f"{k:40s} {v:,.3f}" if isinstance(v, float) else f"{k:40s} {v:,}")


if __name__ == "__main__":
    main()
