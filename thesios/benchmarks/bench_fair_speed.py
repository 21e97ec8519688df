"""Fair speed: the vectorized reorganizer against the fastest honest alternative, side by side.

The reorganizer's FIFO queue is Lindley's recursion in closed form (numpy cumsum and cummax). Its
fair peer is the same recursion as a compiled per-request loop (numba, ``pip install numba``); SimPy
is the correctness oracle and a general event simulator, so its ratio says little about speed.
Also timed: the order-dependent disk (:mod:`thesios.positional`, a Python event loop) per scheduler.
Prints one line per figure and the load average it ran under.

    python benchmarks/bench_fair_speed.py [--json]
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

from thesios.positional import PositionalDisk, serve
from thesios.reorganizer import fifo_schedule, to_ns


def numba_fifo():
    """Lindley's recursion as a per-request loop compiled by numba (None if numba is missing)."""
    try:
        from numba import njit
    except ImportError:
        return None

    @njit(cache=False)
    def fifo(arrival, service):
        n = len(arrival)
        start = np.empty(n, np.int64)
        finish = np.empty(n, np.int64)
        free = arrival[0] if n else 0
        for i in range(n):
            s = arrival[i] if arrival[i] > free else free
            start[i] = s
            free = s + service[i]
            finish[i] = free
        return start, finish

    return fifo


def main() -> None:
    """Time each alternative on the same 1 M requests and print the ratios."""
    from bench_thesios import best_of, simpy_fifo

    out: dict = {"load_average_1min": os.getloadavg()[0]}
    rng = np.random.default_rng(0)
    n, m = 1_000_000, 100_000
    arrival = to_ns(np.cumsum(rng.exponential(0.012, n)))
    service = to_ns(rng.uniform(0.002, 0.02, n))
    out["vectorized_requests_per_s"] = n / best_of(lambda: fifo_schedule(arrival, service))
    fifo = numba_fifo()
    if fifo is not None:
        t = time.perf_counter()
        s_nb, f_nb = fifo(arrival, service)
        out["numba_compile_and_first_run_s"] = time.perf_counter() - t
        assert np.array_equal(f_nb, fifo_schedule(arrival, service)[1])  # the same schedule, to the ns
        out["numba_requests_per_s"] = n / best_of(lambda: fifo(arrival, service))
        out["vectorized_vs_numba"] = out["vectorized_requests_per_s"] / out["numba_requests_per_s"]
    out["simpy_requests_per_s"] = m / best_of(lambda: simpy_fifo(arrival[:m], service[:m]), repeat=1)
    out["vectorized_vs_simpy"] = out["vectorized_requests_per_s"] / out["simpy_requests_per_s"]
    a = np.cumsum(rng.exponential(0.012, m))
    lba = rng.integers(0, 4 << 40, m)
    size = rng.choice([4096, 65536], m)
    for sched in ("fifo", "elevator", "deadline", "priority"):
        t = best_of(lambda: serve(a, lba, size, np.zeros(m, bool), PositionalDisk(), sched), repeat=1)
        out[f"positional_{sched}_requests_per_s"] = m / t
    if "--json" in sys.argv:
        print(json.dumps(out, indent=2))
        return
    for k, v in out.items():
        print(f"{k:40s} {v:,.3f}")


if __name__ == "__main__":
    main()
