"""A disk where order matters: service from the head's position, a write-back cache, schedulers.

The reorganizer (:mod:`thesios.reorganizer`) serves each read for its recorded ``disk_time``, so no
order can change a service time. Here a request's service depends on what the disk did before it
(Ruemmler and Wilkes, "An introduction to disk drive modeling", IEEE Computer 27(3), 1994):

- **seek** over the radial distance from the previous request's position to this one's
  (:meth:`thesios.diskmodel.HDDModel.seek_time`, a square root of the distance), a request's
  radial position being its byte address (LBA) over the capacity;
- **rotation**: the platter turns continuously (angle = time / revolution), each LBA sits at angle
  ``(lba / track_bytes) mod 1``; after the seek the head waits for its sector to come round;
- **transfer** at the zoned rate of the position;
- **write-back with destage**: a write that fits in the write cache completes at once and is
  destaged later, occupying the disk like a read (when no request waits, or first of all once the
  dirty bytes pass half the cache); a write that does not fit is served synchronously;
- **schedulers** pick the next request when the disk frees: ``fifo`` (arrival order), ``elevator``
  (LOOK: the nearest address ahead of the head in its direction of travel, reversing at the last),
  ``deadline`` (Linux's deadline scheduler: elevator order, but a read waiting longer than
  ``read_expire_s`` or a write longer than ``write_expire_s`` goes first, oldest first) and
  ``priority`` (lowest class first, non-preemptive, arrival order within a class).

Service is computed per request in a loop (a scheduler's choice depends on the head's position,
so there is no closed form as for FIFO with fixed service times).
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from thesios.diskmodel import HDDModel
from thesios.errors import ThesiosInputError

SCHEDULERS = ("fifo", "elevator", "deadline", "priority")


@dataclass(frozen=True)
class PositionalDisk:
    """An HDD whose service depends on the head position and the platter's phase.

    Attributes:
        hdd: seek curve, RPM and zoned transfer rates.
        capacity_bytes: addressable bytes (LBA / capacity is the radial position, 0 = outer).
        track_bytes: bytes per track: sets the angle of an LBA, ``(lba / track_bytes) mod 1``.
        write_cache_bytes: write-back cache size (0: every write is served synchronously).
        read_expire_s, write_expire_s: the deadline scheduler's expiry times (Linux's defaults).
        spindown_s: spin the platters down after this long idle (None: never); the next operation
            then waits ``spinup_s`` first, and so does everything queued behind it.
        spinup_s: the spin-up time, s.
    """

    hdd: HDDModel = field(default_factory=HDDModel)
    capacity_bytes: int = 4 << 40
    track_bytes: int = 2 << 20
    write_cache_bytes: int = 0
    read_expire_s: float = 0.5
    write_expire_s: float = 5.0
    spindown_s: float | None = None
    spinup_s: float = 10.0

    def service(self, t_start: float, head: float, lba: int, size: int) -> tuple[float, float]:
        """``(service_s, position)`` of a request begun at ``t_start`` (s) with the head at radial
        ``head`` in [0, 1]: seek + rotational wait + transfer, and the head's new position."""
        hdd = self.hdd
        pos = min(max(lba / self.capacity_bytes, 0.0), 1.0)
        d = abs(pos - head)
        seek = hdd.seek_min_s + (hdd.seek_max_s - hdd.seek_min_s) * math.sqrt(d) if d > 0 else 0.0
        rev = 60.0 / hdd.rpm
        phase = ((t_start + seek) / rev) % 1.0
        rotation = ((lba / self.track_bytes - phase) % 1.0) * rev
        transfer = size / (hdd.outer_rate_bps + (hdd.inner_rate_bps - hdd.outer_rate_bps) * pos)
        return seek + rotation + transfer, pos


@dataclass(frozen=True)
class PositionalSchedule:
    """What :func:`serve` did, per request in the input order (float64 s unless said).

    ``start``/``finish``: service on the disk (a write absorbed by the cache: its arrival, twice),
    ``latency`` = finish - arrival, ``absorbed`` (bool) writes completed by the cache,
    ``busy_s`` the disk's total busy time (destages included), ``destages`` their count,
    ``job_start``/``job_service`` every disk operation's begin and length (s, destages included;
    a spin-up counts in the service of the operation that waited for it), ``spin_ups`` their count.
    """

    start: np.ndarray
    finish: np.ndarray
    latency: np.ndarray
    absorbed: np.ndarray
    busy_s: float
    destages: int
    job_start: np.ndarray
    job_service: np.ndarray
    spin_ups: int = 0


class _Queue:
    """The waiting requests, ordered by one scheduler; ``pop`` gets the next to serve."""

    def __init__(self, scheduler: str, lba: np.ndarray, arrival: np.ndarray, prio: np.ndarray,
                 expire: np.ndarray) -> None:
        self.kind, self.lba, self.arrival, self.prio, self.expire = scheduler, lba, arrival, prio, expire
        self.fifo: deque[int] = deque()
        self.heap: list[tuple[int, int]] = []
        self.by_lba: list[tuple[int, int]] = []
        self.up = True
        self.gone: set[int] = set()
        self.n = 0

    def push(self, i: int) -> None:
        self.n += 1
        if self.kind == "priority":
            heapq.heappush(self.heap, (int(self.prio[i]), i))
            return
        self.fifo.append(i)
        if self.kind in ("elevator", "deadline"):
            bisect.insort(self.by_lba, (int(self.lba[i]), i))

    def _look(self, head_lba: int) -> int:
        k = bisect.bisect_left(self.by_lba, (head_lba, -1))
        if self.up and k == len(self.by_lba):
            self.up = False
        elif not self.up and k == 0:
            self.up = True
        k = k if self.up else k - 1
        return self.by_lba[k][1]

    def pop(self, now: float, head_lba: int) -> int:
        self.n -= 1
        if self.kind == "priority":
            return heapq.heappop(self.heap)[1]
        while self.fifo[0] in self.gone:
            self.gone.discard(self.fifo.popleft())
        oldest = self.fifo[0]
        if self.kind == "fifo":
            return self.fifo.popleft()
        expired = self.kind == "deadline" and now - self.arrival[oldest] > self.expire[oldest]
        i = oldest if expired else self._look(head_lba)
        self.by_lba.pop(bisect.bisect_left(self.by_lba, (int(self.lba[i]), i)))
        if i == oldest:
            self.fifo.popleft()
        else:
            self.gone.add(i)
        return i


def serve(arrival_s: np.ndarray, lba: np.ndarray, size: np.ndarray, is_write: np.ndarray,
          disk: PositionalDisk = PositionalDisk(), scheduler: str = "fifo", priority: np.ndarray | None = None) -> PositionalSchedule:
    """Serve requests on a :class:`PositionalDisk` with ``scheduler``; see the module docstring.

    Args:
        arrival_s: float64 arrival times (s), non-decreasing, shape (n,).
        lba: int64 byte addresses; size: int64 bytes; is_write: bool; priority: int (lower first,
            for ``priority``; default all 0).

    Returns:
        A :class:`PositionalSchedule`. The head starts at position 0 at time 0.

    Raises:
        ThesiosInputError: an unknown scheduler, arrays of different lengths, unsorted arrivals.
    """
    if scheduler not in SCHEDULERS:
        raise ThesiosInputError(f"unknown scheduler {scheduler!r} ({', '.join(SCHEDULERS)})")
    a = np.asarray(arrival_s, dtype=np.float64)
    lba, size, is_write = (np.asarray(x) for x in (lba, size, is_write))
    prio = np.zeros(len(a), np.int64) if priority is None else np.asarray(priority)
    if not (len(a) == len(lba) == len(size) == len(is_write) == len(prio)):
        raise ThesiosInputError("arrival, lba, size, is_write and priority must have the same length")
    if len(a) and np.any(np.diff(a) < 0):
        raise ThesiosInputError("arrival times must be sorted (non-decreasing)")
    expire = np.where(is_write, disk.write_expire_s, disk.read_expire_s)
    return _run(a, lba.astype(np.int64), size.astype(np.int64), is_write.astype(bool), disk,
                _Queue(scheduler, lba, a, prio, expire))


def _run(a: np.ndarray, lba: np.ndarray, size: np.ndarray, is_write: np.ndarray, disk: PositionalDisk, queue: _Queue) -> PositionalSchedule:
    """The event loop of :func:`serve`: admit arrivals, destage or serve the scheduler's pick."""
    n = len(a)
    start, finish = a.copy(), a.copy()
    absorbed = np.zeros(n, dtype=bool)
    dirty, destage = 0, deque()
    t, head, head_lba, busy, destages, i = 0.0, 0.0, 0, 0.0, 0, 0
    jobs: list[tuple[float, float]] = []
    idle_since, spin_ups = 0.0, 0
    al, ll, sl, wl = a.tolist(), lba.tolist(), size.tolist(), is_write.tolist()
    while i < n or queue.n or destage:
        if not queue.n and not destage:
            t = max(t, al[i])
        while i < n and al[i] <= t:
            if wl[i] and dirty + sl[i] <= disk.write_cache_bytes:
                absorbed[i] = True
                dirty += sl[i]
                destage.append(i)
            else:
                queue.push(i)
            i += 1
        if destage and (not queue.n or 2 * dirty > disk.write_cache_bytes):
            j, job = destage.popleft(), None  # a destage: the disk is busy, the write long done
            dirty -= sl[j]
            destages += 1
        elif queue.n:
            j = job = queue.pop(t, head_lba)
            start[j] = t
        else:
            continue
        up = disk.spindown_s is not None and t - idle_since > disk.spindown_s
        spin_ups += up
        svc, head = disk.service(t + disk.spinup_s * up, head, ll[j], sl[j])
        svc += disk.spinup_s * up
        head_lba = ll[j]
        jobs.append((t, svc))
        t += svc
        busy += svc
        if job is not None:
            finish[job] = t
        idle_since = t
    job = np.array(jobs, dtype=np.float64).reshape(-1, 2)
    return PositionalSchedule(start, finish, finish - a, absorbed, busy, destages, job[:, 0], job[:, 1], spin_ups)


def lba_of(file_id: np.ndarray, offset: np.ndarray, capacity_bytes: int, region_bytes: int = 256 << 20) -> np.ndarray:
    """Byte addresses of (file, offset) pairs: file k in the ``region_bytes`` region at a fixed
    pseudo-random place on the disk (Fibonacci hashing of k), the offset inside it (int64)."""
    regions = max(capacity_bytes // region_bytes, 1)
    k = (np.asarray(file_id, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(40)
    return (k.astype(np.int64) % regions) * region_bytes + np.asarray(offset, dtype=np.int64) % region_bytes
