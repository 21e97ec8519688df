"""What-ifs on a (synthesized) trace: spindle speed, spin-down of idle disks, buffer-cache size.

Each what-if changes how requests are served, then the reorganizer re-serves them. Capacity and
placement what-ifs change what is merged instead (:func:`thesios.synth.synthesize` with ``scale``
and a predicate on the samples).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, replace

import cachetools
import numpy as np

from thesios.errors import ThesiosInputError
from thesios.requests import Requests
from thesios.samplers import hash_sample_mask

BLOCK_BYTES = 4096


def rpm_whatif(trace: Requests, rpm_from: float, rpm_to: float, scale_transfer: bool = True) -> Requests:
    """The trace served by disks spinning at ``rpm_to`` instead of ``rpm_from``.

    The rotational part of each miss read's ``disk_time`` scales exactly by ``rpm_from / rpm_to``
    (a revolution takes 60/RPM s); with ``scale_transfer`` the media-transfer part scales the same
    way (fixed linear bit density: bytes per second proportional to RPM); seek time is unchanged.

    Raises:
        ThesiosInputError: a non-positive RPM, or a trace whose decomposition is unknown (NaN).
    """
    if rpm_from <= 0 or rpm_to <= 0:
        raise ThesiosInputError("RPM must be positive")
    miss = trace.is_miss_read
    if np.isnan(trace.rotation_time[miss]).any() or (scale_transfer and np.isnan(trace.transfer_time[miss]).any()):
        raise ThesiosInputError("the trace lacks the rotation/transfer split of disk_time; fit an HDD model first")
    factor = rpm_from / rpm_to
    rot = trace.rotation_time * factor
    xfer = trace.transfer_time * factor if scale_transfer else trace.transfer_time
    disk_time = trace.disk_time - trace.rotation_time - trace.transfer_time + rot + xfer
    return replace(trace, disk_time=np.where(miss, disk_time, 0.0), rotation_time=rot, transfer_time=xfer)


@dataclass(frozen=True)
class PowerModel:
    """HDD power states (watts) and the spin-up cost (joules, seconds).

    Defaults are illustrative, of the order of a 3.5-inch 7200 RPM drive's data sheet (8 W active,
    5.5 W idle spinning, 0.8 W standby, a 10 s spin-up costing 120 J); pass a drive's own numbers.
    """

    active_w: float = 8.0
    idle_w: float = 5.5
    standby_w: float = 0.8
    spinup_j: float = 120.0
    spinup_s: float = 10.0

    @property
    def break_even_s(self) -> float:
        """Idle-gap length beyond which spinning down saves energy: E_up / (P_idle - P_standby)."""
        return self.spinup_j / (self.idle_w - self.standby_w)


@dataclass(frozen=True)
class SpinDownResult:
    """Energy over the idle gaps (J) with and without spin-down, spin-ups, added latency (s)."""

    energy_j: float
    always_on_j: float
    spin_ups: int
    added_latency_s: float

    @property
    def saving(self) -> float:
        """Fraction of the always-on idle energy saved (negative: spin-down costs energy)."""
        return 1.0 - self.energy_j / self.always_on_j if self.always_on_j > 0 else 0.0


def spin_down_energy(gaps_s: np.ndarray, timeout_s: float, power: PowerModel = PowerModel()) -> SpinDownResult:
    """Idle energy of a disk that spins down after ``timeout_s`` of idleness (closed form).

    A gap g <= timeout costs ``P_idle * g``; a longer one costs ``P_idle * timeout +
    P_standby * (g - timeout) + E_spinup``; ``added_latency_s`` is the first-order view (each
    spin-up delays one request by the spin-up time). Pass the gaps of
    :func:`spin_down_schedule`, which feeds the delay back into the queue, for the exact
    schedule's energy; its finish times give the added latency of every request. Fixed-timeout
    spin-down as analyzed by Douglis, Krishnan, Marsh, "Thwarting the power-hungry disk", USENIX
    Winter 1994.

    Args:
        gaps_s: float64 idle-gap lengths, seconds (>= 0).
        timeout_s: spin-down timeout, seconds (>= 0).

    Raises:
        ThesiosInputError: negative gaps or timeout.
    """
    g = np.asarray(gaps_s, dtype=np.float64)
    if timeout_s < 0 or (g < 0).any():
        raise ThesiosInputError("gaps and timeout must be non-negative")
    down = g > timeout_s
    energy = np.where(down, power.idle_w * timeout_s + power.standby_w * (g - timeout_s) + power.spinup_j, power.idle_w * g)
    n_up = int(down.sum())
    return SpinDownResult(float(energy.sum()), float(power.idle_w * g.sum()), n_up, n_up * power.spinup_s)


@dataclass(frozen=True)
class SpinDownSchedule:
    """A FIFO disk that spins down after a timeout, served with the spin-up delay fed back.

    All arrays have one entry per request, in arrival order (int64 nanoseconds):
    ``start_ns`` when the disk begins serving it (after any spin-up), ``finish_ns``,
    ``spun_up`` (bool: it found the disk spun down and waited for the spin-up), ``gaps_ns``
    the disk's idle gaps (finish of one request, or the horizon's begin, to the next arrival
    that finds the disk idle, and the last finish to the horizon's end), ``iterations`` of the
    fixed point (see :func:`spin_down_schedule`).
    """

    start_ns: np.ndarray
    finish_ns: np.ndarray
    spun_up: np.ndarray
    gaps_ns: np.ndarray
    iterations: int


def spin_down_schedule(
    arrival_ns: np.ndarray, service_ns: np.ndarray, timeout_ns: int, spinup_ns: int, horizon_ns: tuple[int, int],
) -> SpinDownSchedule:
    """Serve requests FIFO on a disk that spins down after ``timeout_ns`` of idleness.

    A request arriving when the disk has been idle longer than the timeout waits ``spinup_ns``
    for the spin-up before its service; requests arriving meanwhile queue behind it, so the delay
    also shifts the queue behind it and shortens the next idle gap (which may then no longer
    reach the timeout). The disk spins at the horizon's begin. Given which requests find the disk
    down, the schedule is Lindley's recursion with those requests' service lengthened by the
    spin-up (:func:`thesios.reorganizer.fifo_schedule`, vectorized); which requests find it down
    depends on the schedule before them only, so iterating the two from "none" reaches the exact
    fixed point: each pass re-serves only the requests from the first one still wrong (which it
    fixes) on, so there are at most n passes, a few in practice, each shorter than the last.

    Args:
        arrival_ns: int64 arrivals, non-decreasing, shape (n,).
        service_ns: int64 service times >= 0, shape (n,).
        timeout_ns, spinup_ns: spin-down timeout and spin-up time (int ns, >= 0).
        horizon_ns: (begin, end) of the observed period, int ns, begin <= every arrival.

    Raises:
        ThesiosInputError: negative timeout or spin-up, arrivals before the horizon, or the
            queue errors of :func:`~thesios.reorganizer.fifo_schedule`.
    """
    a = np.asarray(arrival_ns, dtype=np.int64)
    s = np.asarray(service_ns, dtype=np.int64)
    begin, end = int(horizon_ns[0]), int(horizon_ns[1])
    if timeout_ns < 0 or spinup_ns < 0:
        raise ThesiosInputError("timeout and spin-up time must be non-negative")
    if a.shape != s.shape or a.ndim != 1:
        raise ThesiosInputError("arrivals and service times must be 1-D arrays of the same length")
    if len(a) and (a[0] < begin or np.any(np.diff(a) < 0) or np.any(s < 0)):
        raise ThesiosInputError("arrivals must be sorted and not precede the horizon; service times >= 0")
    n = len(a)
    down = np.zeros(n, dtype=bool)
    finish = np.empty(n, dtype=np.int64)
    j, passes = 0, 0  # down[:j] and finish[:j] are final
    while j < n:
        passes += 1
        # Lindley's closed form on the suffix, the disk free from finish[j - 1] (or the begin).
        free = begin if j == 0 else int(finish[j - 1])
        served = s[j:] + spinup_ns * down[j:]
        cum = np.cumsum(served)
        lead = a[j:] - (cum - served)
        lead[0] = max(int(lead[0]), free)
        finish[j:] = cum + np.maximum.accumulate(lead)
        prev = np.concatenate(([free], finish[j:-1]))
        now = a[j:] - prev > timeout_ns
        changed = np.flatnonzero(now != down[j:])
        if len(changed) == 0:
            break
        # Everything before the first change is final, and so is the change itself (it
        # depends on finishes before it only): re-serve from there, with the new guesses behind
        # it; that pass finds its first change further on.
        down[j:] = now
        j += int(changed[0])
    prev_finish = np.concatenate(([begin], finish[:-1]))
    gaps = np.concatenate((a - prev_finish, [end - (int(finish[-1]) if n else begin)]))
    return SpinDownSchedule(finish - s, finish, down, gaps[gaps > 0], passes)


def spin_down_schedule_loop(
    arrival_ns: np.ndarray, service_ns: np.ndarray, timeout_ns: int, spinup_ns: int, begin_ns: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Reference per-request loop of :func:`spin_down_schedule` (for tests and benchmarks only):
    ``(start_ns, finish_ns, spun_up)``."""
    start = np.empty(len(arrival_ns), dtype=np.int64)
    finish = np.empty(len(arrival_ns), dtype=np.int64)
    spun = np.zeros(len(arrival_ns), dtype=bool)
    free = int(begin_ns)
    for i, (a, s) in enumerate(zip(arrival_ns.tolist(), service_ns.tolist())):
        spun[i] = a - free > timeout_ns
        start[i] = a + spinup_ns if spun[i] else max(a, free)
        free = int(start[i]) + s
        finish[i] = free
    return start, finish, spun


def idle_gaps(start_s: np.ndarray, finish_s: np.ndarray, horizon: tuple[float, float]) -> np.ndarray:
    """Idle gaps (s) of a FIFO schedule within ``horizon`` = (begin, end), float64 array."""
    if len(start_s) == 0:
        return np.array([horizon[1] - horizon[0]])
    begins = np.concatenate(([horizon[0]], finish_s))
    ends = np.concatenate((start_s, [horizon[1]]))
    gaps = ends - begins
    return gaps[gaps > 0]


def block_keys(trace: Requests) -> tuple[np.ndarray, np.ndarray]:
    """Expand requests into 4 KiB block accesses in time order.

    Returns:
        ``(keys, request_index)``: int64 keys unique per (disk, file, block) and, for each block
        access, the index of its request in ``trace``.
    """
    first = trace.file_offset // BLOCK_BYTES
    n_blocks = np.maximum((trace.file_offset + trace.size + BLOCK_BYTES - 1) // BLOCK_BYTES - first, 1)
    req = np.repeat(np.arange(len(trace)), n_blocks)
    within = np.arange(len(req)) - np.repeat(np.cumsum(n_blocks) - n_blocks, n_blocks)
    block = first[req] + within
    # (disk < 2^20, file < 2^22, block < 2^21) packed into one int64.
    keys = (trace.disk_id[req].astype(np.int64) << 43) | (trace.file_id[req].astype(np.int64) << 21) | block
    return keys, req


def sampled_block_keys(trace: Requests, rate: float, salt: int = 0, chunk: int = 32_768) -> np.ndarray:
    """Block keys of ``trace`` (see :func:`block_keys`) kept by spatial hash sampling at ``rate``.

    Expands ``chunk`` requests at a time, so memory stays bounded for multi-MiB requests.
    """
    parts = []
    for lo in range(0, len(trace), chunk):
        keys, _ = block_keys(trace.take(np.arange(lo, min(lo + chunk, len(trace)))))
        parts.append(keys[hash_sample_mask(keys, rate, salt)])
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def lru_misses(keys: np.ndarray, capacity: int) -> np.ndarray:
    """Miss flags (bool, per access) of an LRU cache of ``capacity`` blocks (cachetools.LRUCache)."""
    if capacity < 1:
        raise ThesiosInputError("cache capacity must be >= 1 block")
    cache: cachetools.LRUCache = cachetools.LRUCache(maxsize=capacity)
    miss = np.zeros(len(keys), dtype=bool)
    for i, k in enumerate(keys.tolist()):  # a cache replay is inherently sequential
        if k in cache:
            _ = cache[k]  # a read refreshes recency
        else:
            miss[i] = True
            cache[k] = True
    return miss


def next_use(keys: np.ndarray) -> np.ndarray:
    """For each access, the index of the next access to the same key (len(keys) if none), int64."""
    n = len(keys)
    order = np.lexsort((np.arange(n), keys))
    nxt = np.full(n, n, dtype=np.int64)
    same = keys[order[1:]] == keys[order[:-1]]
    nxt[order[:-1][same]] = order[1:][same]
    return nxt


def belady_misses(keys: np.ndarray, capacity: int) -> np.ndarray:
    """Miss flags of Belady's MIN (evict the block used furthest in the future): the optimal
    offline policy (Belady, IBM Systems Journal 5(2), 1966), a lower bound on any cache's misses."""
    if capacity < 1:
        raise ThesiosInputError("cache capacity must be >= 1 block")
    nxt = next_use(keys)
    resident: dict[int, int] = {}  # key -> its next use
    heap: list[tuple[int, int]] = []  # (-next use, key), lazily invalidated
    miss = np.zeros(len(keys), dtype=bool)
    for i, (k, nu) in enumerate(zip(keys.tolist(), nxt.tolist())):
        if k not in resident:
            miss[i] = True
            if len(resident) >= capacity:
                while True:
                    neg, victim = heapq.heappop(heap)
                    if resident.get(victim) == -neg:
                        del resident[victim]
                        break
        resident[k] = nu
        heapq.heappush(heap, (-nu, k))
    return miss
