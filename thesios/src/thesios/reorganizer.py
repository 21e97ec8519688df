"""The reorganizer: re-serves cache-miss reads on one simulated disk (a single FIFO server).

Start and finish times follow Lindley's recursion ``finish_i = max(finish_{i-1}, a_i) + s_i``
(Lindley, "The theory of queues with a single server", Proc. Cambridge Phil. Soc. 48, 1952),
computed without a Python loop through its closed form
``finish_i = S_i + max_{j <= i} (a_j - S_{j-1})`` with ``S_i = s_0 + ... + s_i`` (a cumulative sum
and a cumulative maximum). Times are integer nanoseconds inside, so the result is exact: it equals
a per-request loop and an event simulation to the nanosecond.
"""

from __future__ import annotations

import heapq

import numpy as np

from thesios.errors import ThesiosInputError
from thesios.requests import Requests

NS_PER_S = 1_000_000_000


def to_ns(seconds: np.ndarray) -> np.ndarray:
    """Seconds (float64) to integer nanoseconds (int64), rounded to nearest."""
    return np.rint(np.asarray(seconds, dtype=np.float64) * NS_PER_S).astype(np.int64)


def fifo_schedule(arrival_ns: np.ndarray, service_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and finish times (int64 ns) of a single-server FIFO queue, vectorized.

    Args:
        arrival_ns: int64 arrival times, non-decreasing, shape (n,).
        service_ns: int64 service times >= 0, shape (n,).

    Returns:
        ``(start_ns, finish_ns)``, int64 arrays of shape (n,); waiting time is ``start - arrival``.

    Raises:
        ThesiosInputError: shapes differ, arrivals decrease, or a service time is negative.
    """
    a = np.asarray(arrival_ns)
    s = np.asarray(service_ns)
    if a.shape != s.shape or a.ndim != 1:
        raise ThesiosInputError("arrivals and service times must be 1-D arrays of the same length")
    if not (np.issubdtype(a.dtype, np.integer) and np.issubdtype(s.dtype, np.integer)):
        raise ThesiosInputError("fifo_schedule takes integer nanoseconds (use to_ns)")
    if len(a) == 0:
        return a.astype(np.int64), a.astype(np.int64)
    if np.any(np.diff(a) < 0):
        raise ThesiosInputError("arrival times must be sorted (non-decreasing)")
    if np.any(s < 0):
        raise ThesiosInputError("service times must be non-negative")
    a = a.astype(np.int64)
    cum = np.cumsum(s, dtype=np.int64)
    prev = cum - s  # S_{i-1}
    finish = cum + np.maximum.accumulate(a - prev)
    return finish - s, finish


def fifo_schedule_loop(arrival_ns: np.ndarray, service_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Reference per-request loop of Lindley's recursion (for tests and benchmarks only)."""
    start = np.empty(len(arrival_ns), dtype=np.int64)
    finish = np.empty(len(arrival_ns), dtype=np.int64)
    free = None
    for i, (a, s) in enumerate(zip(arrival_ns.tolist(), service_ns.tolist())):
        st = a if free is None or a >= free else free
        start[i] = st
        free = st + s
        finish[i] = free
    return start, finish


def reorganize(requests: Requests, discipline: str = "fifo") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Re-serve the cache-miss reads of a (synthesized or real) trace on one disk.

    Args:
        requests: any batch; only ``is_miss_read`` rows are served, each taking its ``disk_time``.
        discipline: ``fifo`` (vectorized) or ``priority`` (by ``service_class`` index, lowest
            first, non-preemptive).

    Returns:
        ``(arrival_s, start_s, latency_s)`` float64 arrays over the miss reads in arrival order:
        arrival, simulated disk start time and simulated latency (wait + service), seconds.
    """
    miss = requests.is_miss_read
    arrival = requests.start_time[miss]
    order = np.argsort(arrival, kind="stable")
    arrival = arrival[order]
    service = requests.disk_time[miss][order]
    a_ns = to_ns(arrival)
    if discipline == "fifo":
        start_ns, finish_ns = fifo_schedule(a_ns, to_ns(service))
    elif discipline == "priority":
        start_ns, finish_ns = priority_schedule(a_ns, to_ns(service), requests.service_class[miss][order])
    else:
        raise ThesiosInputError(f"unknown queue discipline {discipline!r} (fifo, priority)")
    return arrival, start_ns / NS_PER_S, (finish_ns - a_ns) / NS_PER_S


def priority_schedule(arrival_ns: np.ndarray, service_ns: np.ndarray, priority: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and finish times (int64 ns) of a single server with non-preemptive priorities.

    When the disk frees, it serves the waiting request of the lowest ``priority`` value (e.g. the
    index of its ``service_class``: LATENCY_SENSITIVE first), ties in arrival order; a request
    arriving exactly when the disk frees competes. Unlike FIFO this has no closed form: it is an
    event loop over a heap (O(n log n), about a million requests per second or so).

    Raises:
        ThesiosInputError: shapes differ, arrivals decrease, or a service time is negative.
    """
    a = np.asarray(arrival_ns)
    s = np.asarray(service_ns)
    pr = np.asarray(priority)
    if not (a.shape == s.shape == pr.shape) or a.ndim != 1:
        raise ThesiosInputError("arrivals, service times and priorities must be 1-D arrays of the same length")
    if len(a) and (np.any(np.diff(a) < 0) or np.any(s < 0)):
        raise ThesiosInputError("arrival times must be sorted and service times non-negative")
    n = len(a)
    start = np.empty(n, dtype=np.int64)
    al, sl, pl = a.tolist(), s.tolist(), pr.tolist()
    waiting: list[tuple[int, int]] = []
    free = al[0] if n else 0
    i = 0
    for _ in range(n):
        if not waiting and al[i] > free:
            free = al[i]
        while i < n and al[i] <= free:
            heapq.heappush(waiting, (pl[i], i))
            i += 1
        _, j = heapq.heappop(waiting)
        start[j] = free
        free += sl[j]
    return start, start + s.astype(np.int64)
