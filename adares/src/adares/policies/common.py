"""Pieces the policies share: a rolling window of observations and VM ages (lifetimes)."""

from __future__ import annotations

import numpy as np

from adares.policies.base import Observation


class Window:
    """The last ``size`` steps of observations of N VMs, oldest first on read.

    cpu: (k, N) estimated CPU demand (used + throttled cores); mem: (k, N) bytes used;
    thr: (k, N) throttled cores; oom: (k, N) bool; k = min(steps seen, size).
    """

    def __init__(self, n: int, size: int) -> None:
        self.size = size
        self._cpu = np.zeros((size, n))
        self._mem = np.zeros((size, n))
        self._thr = np.zeros((size, n))
        self._oom = np.zeros((size, n), dtype=bool)
        self.count = 0

    def push(self, obs: Observation) -> None:
        """Append one step."""
        i = self.count % self.size
        self._cpu[i] = obs.cpu_used + obs.cpu_throttled
        self._mem[i] = obs.mem_used
        self._thr[i] = obs.cpu_throttled
        self._oom[i] = obs.oom
        self.count += 1

    def _last(self, a: np.ndarray, k: int | None) -> np.ndarray:
        have = min(self.count, self.size)
        k = have if k is None else min(k, have)
        idx = (np.arange(self.count - k, self.count)) % self.size
        return a[idx]

    def cpu(self, k: int | None = None) -> np.ndarray:
        """Last k steps of CPU demand estimates (cores)."""
        return self._last(self._cpu, k)

    def mem(self, k: int | None = None) -> np.ndarray:
        """Last k steps of memory used (bytes)."""
        return self._last(self._mem, k)

    def thr(self, k: int | None = None) -> np.ndarray:
        """Last k steps of throttled cores."""
        return self._last(self._thr, k)

    def oom(self, k: int | None = None) -> np.ndarray:
        """Last k steps of OOM flags."""
        return self._last(self._oom, k)


class Ages:
    """Steps each of N VMs has been observed since it arrived (``adares.lifetimes``): a policy
    uses a VM's own history only once it has a full window of it (``ready``)."""

    def __init__(self, n: int) -> None:
        self._age = np.zeros(n, dtype=np.int64)

    def arrive(self, mask: np.ndarray) -> None:
        """New VMs in the slots ``mask`` ((N,) bool): no history of their own yet."""
        self._age[mask] = 0

    def tick(self) -> None:
        """One more step observed."""
        self._age += 1

    def ready(self, k: int) -> np.ndarray:
        """(N,) bool: the VM has been observed for at least k steps."""
        return self._age >= k


def requests_where(mask: np.ndarray, req: tuple[np.ndarray, np.ndarray], c: np.ndarray,
                   m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(cores (N,), bytes (N,)): the requests ``req`` (cores, bytes) where ``mask`` ((N,) bool,
    new VMs), else ``c`` and ``m``: a new VM starts at its flavor."""
    return np.where(mask, req[0], c), np.where(mask, req[1], m)
