"""A Resource Central-style policy (after Cortez et al., "Resource Central: Understanding and
Predicting Workloads for Improved Resource Management in Large Cloud Platforms", SOSP 2017):
size a VM from what is known when it is created, its metadata, and the history of VMs of its
class, rather than from its own recent usage.

Here the metadata is the VM's flavor (requested cores and memory) and the class is every VM of
the same flavor. Until ``learn_steps`` have been seen the VMs keep their requests; then, and
every ``learn_steps`` after, each VM is sized at its flavor times its class's ``class_quantile``
of the per-VM ``vm_quantile`` utilization (CPU: demand / cores; memory: peak use / memory) over
the history so far. An OOM grows memory at once by max(20%, 100 MiB) (the VPA's bump). This is
not Microsoft's code: RC's models are gradient-boosted trees over many metadata fields.
"""

from __future__ import annotations

import numpy as np

from adares.policies.base import Observation, TraceInfo
from adares.policies.baselines import MIN_CPU, MIN_MEM


class ResourceCentral:
    """Sizes by flavor class (see module doc). Allocations in cores and bytes."""

    name = "resource-central"

    def __init__(self, learn_steps: int = 288, vm_quantile: float = 0.95,
                 class_quantile: float = 0.9) -> None:
        self.learn_steps, self.vm_q, self.class_q = learn_steps, vm_quantile, class_quantile

    def reset(self, info: TraceInfo) -> None:
        """Start a replay: classes from the flavors; no history yet."""
        self._req_c, self._req_m = info.cpu_request.copy(), info.mem_request.copy()
        self._c, self._m = self._req_c.copy(), self._req_m.copy()
        self._pred = (self._req_c.copy(), self._req_m.copy())  # the class prediction per VM
        flavors = np.column_stack([self._req_c, self._req_m])
        _, self._cls = np.unique(flavors, axis=0, return_inverse=True)
        self._cls = self._cls.ravel()
        self._cpu: list[np.ndarray] = []
        self._mem: list[np.ndarray] = []

    def arrive(self, mask: np.ndarray) -> None:
        """New VMs are sized at creation: their class's current prediction (their requests
        before the first one); the slot's OOM bumps are dropped."""
        self._c = np.where(mask, self._pred[0], self._c)
        self._m = np.where(mask, self._pred[1], self._m)

    def allocate(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """Current allocations."""
        return self._c, self._m

    def _by_class(self, util: np.ndarray) -> np.ndarray:
        """(N,) the class quantile of the per-VM utilizations ``util`` (N,), per VM."""
        out = np.empty_like(util)
        for k in np.unique(self._cls):
            sel = self._cls == k
            out[sel] = np.quantile(util[sel], self.class_q)
        return out

    def observe(self, obs: Observation) -> None:
        """Record the step; re-predict every ``learn_steps``."""
        self._cpu.append((obs.cpu_used + obs.cpu_throttled) / self._req_c)
        self._mem.append(obs.mem_used / self._req_m)
        if obs.oom.any():
            self._m = np.where(obs.oom, np.maximum(self._m * 1.2, self._m + 100 * 2**20), self._m)
        if (obs.t + 1) % self.learn_steps:
            return
        cpu_u = np.quantile(np.asarray(self._cpu), self.vm_q, axis=0)
        mem_u = np.asarray(self._mem).max(axis=0)
        self._c = np.maximum(self._by_class(cpu_u) * self._req_c, MIN_CPU)
        self._m = np.maximum(self._by_class(mem_u) * self._req_m, MIN_MEM)
        self._pred = (self._c.copy(), self._m.copy())
