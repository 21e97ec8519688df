"""Per-VM demand traces: CPU cores and memory bytes at fixed steps (5 minutes by default)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from adares.errors import InputError

GIB = float(1 << 30)
STEP_S = 300


@dataclass(frozen=True)
class Trace:
    """Demand of N VMs (or containers) over T steps.

    cpu: (T, N) float64, cores demanded (what the VM would use if never throttled).
    mem: (T, N) float64, bytes demanded (what the VM would hold if never OOM-killed).
    cpu_request: (N,) float64 cores and mem_request: (N,) float64 bytes, the size each VM was
        provisioned with (the starting allocation of every policy).
    step_s: step length in seconds; start_s: time of step 0 (Unix seconds).
    vm_ids: N names.
    arrivals: (T, N) bool or None: True where a new VM starts in slot i at step t (the one
        before departed; same flavor, ``adares.lifetimes``); None: every VM lives the whole
        trace.

    Raises InputError (see ``validate``) on wrong shapes, non-finite or negative values.
    """

    cpu: np.ndarray
    mem: np.ndarray
    cpu_request: np.ndarray
    mem_request: np.ndarray
    vm_ids: tuple[str, ...]
    step_s: int = STEP_S
    start_s: float = 0.0
    arrivals: np.ndarray | None = None

    @property
    def n_steps(self) -> int:
        """T."""
        return int(self.cpu.shape[0])

    @property
    def n_vms(self) -> int:
        """N."""
        return int(self.cpu.shape[1])

    @property
    def step_h(self) -> float:
        """Step length in hours."""
        return self.step_s / 3600.0

    def validate(self) -> Trace:
        """Check shapes and values; returns self. Raises InputError with one line."""
        if self.cpu.ndim != 2 or self.cpu.shape != self.mem.shape:
            raise InputError(f"trace: cpu {self.cpu.shape} and mem {self.mem.shape} must be (T, N)")
        t, n = self.cpu.shape
        if t < 2 or n < 1:
            raise InputError(f"trace: needs at least 2 steps and 1 VM, got {t} x {n}")
        if self.cpu_request.shape != (n,) or self.mem_request.shape != (n,) or len(self.vm_ids) != n:
            raise InputError("trace: requests and vm_ids must have one entry per VM")
        if self.step_s <= 0:
            raise InputError(f"trace: step_s must be positive, got {self.step_s}")
        for name, a in (("cpu", self.cpu), ("mem", self.mem), ("cpu_request", self.cpu_request),
                        ("mem_request", self.mem_request)):
            if not np.all(np.isfinite(a)):
                raise InputError(f"trace: {name} has non-finite values")
            if np.any(a < 0):
                raise InputError(f"trace: {name} has negative usage")
        if self.arrivals is not None and (self.arrivals.shape != (t, n)
                                          or self.arrivals.dtype != bool):
            raise InputError(f"trace: arrivals must be a (T, N) bool mask, got "
                             f"{self.arrivals.shape} {self.arrivals.dtype}")
        return self

    def vms(self, cols: np.ndarray) -> Trace:
        """The VMs ``cols`` ((k,) int indices), every step, arrays contiguous."""
        arr = None if self.arrivals is None else np.ascontiguousarray(self.arrivals[:, cols])
        return Trace(np.ascontiguousarray(self.cpu[:, cols]), np.ascontiguousarray(self.mem[:, cols]),
                     self.cpu_request[cols].copy(), self.mem_request[cols].copy(),
                     tuple(self.vm_ids[i] for i in cols), self.step_s, self.start_s, arr)

    def head(self, n_vms: int | None = None, n_steps: int | None = None) -> Trace:
        """The first ``n_vms`` VMs and ``n_steps`` steps."""
        v = slice(None, n_vms)
        s = slice(None, n_steps)
        return Trace(self.cpu[s, v], self.mem[s, v], self.cpu_request[v], self.mem_request[v],
                     self.vm_ids[v], self.step_s, self.start_s,
                     None if self.arrivals is None else self.arrivals[s, v])
