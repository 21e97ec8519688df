"""Utilization and offered load of one disk's schedule.

Two figures that agree on a lightly loaded disk and part ways on an overloaded one:

- **utilization**: the disk's busy time over the simulated span, from the horizon's begin to the
  later of its end and the last operation's finish (the queue drains after the last arrival), so
  it never exceeds 1 (iostat's %util of the simulated disk);
- **offered load** (rho in queueing theory: arrival rate times mean service time): the service the
  requests ask for over the span they arrive in. A single-server queue is stable only for rho < 1
  (Kleinrock, "Queueing Systems", vol. 1, 1975, sec. 2.1); above it the queue grows for as long as
  requests arrive, and so do their latencies: they say how long the trace is, not how the disk
  behaves.
"""

from __future__ import annotations

import numpy as np

HOUR_S = 3600.0


def busy_time_until(start_s: np.ndarray, finish_s: np.ndarray, edges_s: np.ndarray) -> np.ndarray:
    """Total busy time (s) of a single server up to each time T in ``edges_s`` (float64).

    Args:
        start_s, finish_s: float64 begin and end (s) of each operation, sorted and
            non-overlapping (one server), shape (n,).
        edges_s: float64 times T (s), shape (m,).

    Returns:
        float64 array of shape (m,): the busy time before each T; ``np.diff`` of it gives the
        busy time of each window between edges.
    """
    start_s, finish_s = np.asarray(start_s, dtype=np.float64), np.asarray(finish_s, dtype=np.float64)
    edges_s = np.asarray(edges_s, dtype=np.float64)
    if len(start_s) == 0:
        return np.zeros(len(edges_s))
    service = finish_s - start_s
    cum = np.concatenate(([0.0], np.cumsum(service)))
    k = np.searchsorted(finish_s, edges_s, side="right")  # jobs finished by T
    partial = np.where(k < len(start_s), np.clip(edges_s - start_s[np.minimum(k, len(start_s) - 1)], 0.0, None), 0.0)
    return cum[k] + partial


def load_metrics(start_s: np.ndarray, finish_s: np.ndarray, horizon_s: tuple[float, float]) -> dict[str, float | None]:
    """Utilization, peak-hour utilization and offered load of a single server's schedule.

    Args:
        start_s, finish_s: float64 begin and end (s) of each disk operation (requests, destages;
            a spin-up counts in the operation that waited for it), sorted and non-overlapping,
            shape (n,).
        horizon_s: (begin, end) of the arrivals, s (the trace's first and last arrival, or the
            day of a synthesized disk).

    Returns:
        ``{"utilization", "peak_hour_utilization", "offered_load", "busy_s", "span_s", "drain_s"}``:
        utilization = busy time over ``span_s`` (begin to the later of end and the last finish;
        in [0, 1]); peak-hour utilization the same over the busiest one-hour window from the
        begin (the last window takes the remainder, so none is shorter than an hour unless the
        whole span is); offered load = busy time over the arrivals' span (None when that span
        is 0 with work to do); ``drain_s`` how long after the horizon's end the last operation
        finishes (0 if before).

    Example:
        Two requests 1 s apart, each needing 2 s: the disk is busy 4 s of a 4 s span, but
        it is offered 4 s of work a second.

        >>> m = load_metrics(np.array([0.0, 2.0]), np.array([2.0, 4.0]), (0.0, 1.0))
        >>> m["utilization"], m["offered_load"], m["drain_s"]
        (1.0, 4.0, 3.0)
    """
    start_s, finish_s = np.asarray(start_s, dtype=np.float64), np.asarray(finish_s, dtype=np.float64)
    t0, t1 = float(horizon_s[0]), float(horizon_s[1])
    busy = float((finish_s - start_s).sum())
    end = max(t1, float(finish_s[-1]) if len(finish_s) else t1)
    span = end - t0
    n_win = max(1, int((span // HOUR_S)))
    edges = np.concatenate((t0 + HOUR_S * np.arange(n_win), [end]))
    per_window = np.diff(busy_time_until(start_s, finish_s, edges))
    lengths = np.diff(edges)
    peak = float(np.max(np.where(lengths > 0, per_window / np.where(lengths > 0, lengths, 1.0), 0.0)))
    arrivals = t1 - t0
    offered = busy / arrivals if arrivals > 0 else (0.0 if busy == 0 else None)
    return {"utilization": min(busy / span, 1.0) if span > 0 else 0.0, "peak_hour_utilization": min(peak, 1.0),
            "offered_load": offered, "busy_s": busy, "span_s": span, "drain_s": max(end - t1, 0.0)}


def overload_note(m: dict) -> str | None:
    """One line for a schedule whose offered load exceeds what the disk can serve, else None.

    ``m``: a dict with the keys of :func:`load_metrics`.
    """
    rho = m.get("offered_load")
    if rho is None and m.get("busy_s", 0.0) > 0:
        return "overloaded: every request arrives at one instant; utilization and latency describe that burst only"
    if rho is None or rho <= 1.0:
        return None
    return (f"overloaded: offered load {rho:.2f}x what the disk can serve ({m['busy_s']:.3g} s of service in "
            f"{m['busy_s'] / rho:.3g} s of arrivals); the queue never drains while requests arrive, latencies grow "
            "with the trace's length")
