"""Discrete-time replay of a trace under a rightsizing policy (vectorized over VMs).

At each step t the policy sets every VM's CPU and memory allocation from what it observed up to
step t - 1; then the step's demand is served:
- CPU demand above the allocation is throttled (unserved core-time, a latency proxy);
- memory demand above the allocation is an OOM kill (one event, a restart cost, and the
  memory the VM lacked counts as shortfall);
- a change of either allocation is one resize (done in place).
The policy then observes what a node agent would report: CPU used (capped at the allocation),
the throttled cores, memory used (capped at the allocation) and the OOM kills.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from adares.trace import GIB, Trace


@dataclass(frozen=True)
class CostModel:
    """Prices and penalties, in one money unit.

    vcpu_hour / gb_hour: price of an allocated vCPU-hour / GiB-hour (8:1, like cloud list prices).
    throttle_penalty: per throttled vCPU-hour; mem_shortfall_penalty: per GiB-hour of memory
    demand above the allocation; oom_cost: per OOM kill (restart). The penalties exceed the
    prices, so allocating exactly the demand (the clairvoyant policy) minimizes every VM-step's
    cost: its reward bounds every policy's from above (its cost from below).
    """

    vcpu_hour: float = 1.0
    gb_hour: float = 0.125
    throttle_penalty: float = 10.0
    mem_shortfall_penalty: float = 1.25
    oom_cost: float = 2.0

    def __post_init__(self) -> None:
        if self.throttle_penalty < self.vcpu_hour or self.mem_shortfall_penalty < self.gb_hour:
            raise ValueError("penalties must be at least the prices")
        if min(self.vcpu_hour, self.gb_hour, self.oom_cost) < 0:
            raise ValueError("prices and costs must be non-negative")


@dataclass(frozen=True)
class TraceInfo:
    """What a policy may know up front: sizes, step, start time and the VMs' requests."""

    n_vms: int
    n_steps: int
    step_s: int
    start_s: float
    cpu_request: np.ndarray
    mem_request: np.ndarray

    @classmethod
    def of(cls, trace: Trace) -> TraceInfo:
        """The info of ``trace`` (no demand)."""
        return cls(trace.n_vms, trace.n_steps, trace.step_s, trace.start_s,
                   trace.cpu_request.copy(), trace.mem_request.copy())


@dataclass(frozen=True)
class Observation:
    """What is observed of step ``t`` (arrays of shape (N,), float64 unless said).

    cpu_used: cores used (<= allocation); cpu_throttled: cores demanded but not served;
    mem_used: bytes used (<= allocation); oom: bool, the VM was OOM-killed in the step;
    cpu_alloc / mem_alloc: the allocations in force (cores, bytes); time_s: step start (s).
    """

    t: int
    time_s: float
    cpu_used: np.ndarray
    cpu_throttled: np.ndarray
    mem_used: np.ndarray
    oom: np.ndarray
    cpu_alloc: np.ndarray
    mem_alloc: np.ndarray


class Policy(Protocol):
    """A rightsizing policy: ``reset`` once, then per step ``allocate`` and ``observe``."""

    name: str

    def reset(self, info: TraceInfo) -> None:
        """Start a replay."""

    def allocate(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """Allocations for step t: (cores (N,), bytes (N,)), float64, non-negative."""

    def observe(self, obs: Observation) -> None:
        """Learn from step ``obs.t``."""


@dataclass
class Result:
    """Totals of one replay. Hours are allocated resource-hours; GB means GiB.

    reward: minus the cost per VM-hour (money units, CostModel); cost: total money;
    cpu_throttled_share: throttled core-hours / demanded core-hours; extra: the same violations
    over the first simulated day (first_day_cpu_throttled_share, first_day_oom_events,
    first_day_reward).
    """

    policy: str
    vcpu_hours: float
    gb_hours: float
    cpu_throttled_share: float
    oom_events: int
    resizes: int
    reward: float
    cost: float
    vm_hours: float
    seconds: float = 0.0
    extra: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, float | int | str]:
        """JSON-ready fields."""
        d: dict[str, float | int | str] = {
            "vcpu_hours": self.vcpu_hours, "gb_hours": self.gb_hours,
            "cpu_throttled_share": self.cpu_throttled_share, "oom_events": self.oom_events,
            "resizes": self.resizes, "reward": self.reward, "cost": self.cost,
            "seconds": self.seconds}
        d.update(self.extra)
        return d


def simulate(trace: Trace, policy: Policy, costs: CostModel = CostModel()) -> Result:
    """Replay ``trace`` under ``policy``; returns the totals.

    Raises ValueError when the policy returns allocations of the wrong shape, negative or
    non-finite.
    """
    t0 = time.perf_counter()
    n, steps, dh = trace.n_vms, trace.n_steps, trace.step_h
    policy.reset(TraceInfo.of(trace))
    prev_c, prev_m = trace.cpu_request, trace.mem_request
    alloc_c = alloc_m = thr = dem_c = short_m = 0.0
    ooms = resizes = 0
    day_steps = max(1, int(round(86400 / trace.step_s)))
    first: tuple[float, ...] = ()
    for t in range(steps):
        a_c, a_m = policy.allocate(t)
        if a_c.shape != (n,) or a_m.shape != (n,):
            raise ValueError(f"{policy.name}: allocations must have shape ({n},)")
        if not (np.all(np.isfinite(a_c)) and np.all(np.isfinite(a_m))
                and a_c.min() >= 0 and a_m.min() >= 0):
            raise ValueError(f"{policy.name}: allocations must be finite and non-negative")
        d_c, d_m = trace.cpu[t], trace.mem[t]
        used_c = np.minimum(d_c, a_c)
        throttled = d_c - used_c
        oom = d_m > a_m
        used_m = np.minimum(d_m, a_m)
        resized = (a_c != prev_c) | (a_m != prev_m)
        alloc_c += float(a_c.sum())
        alloc_m += float(a_m.sum())
        thr += float(throttled.sum())
        dem_c += float(d_c.sum())
        short_m += float((d_m - used_m).sum())
        ooms += int(oom.sum())
        resizes += int(resized.sum())
        prev_c, prev_m = a_c, a_m
        if t == day_steps - 1:
            first = (alloc_c, alloc_m, thr, dem_c, short_m, ooms, t + 1)
        policy.observe(Observation(t, trace.start_s + t * trace.step_s, used_c, throttled,
                                   used_m, oom, a_c, a_m))
    def money(a_c: float, a_m: float, th: float, sh: float, oo: float) -> float:
        return (costs.vcpu_hour * a_c * dh + costs.gb_hour * a_m / GIB * dh
                + costs.throttle_penalty * th * dh + costs.mem_shortfall_penalty * sh / GIB * dh
                + costs.oom_cost * oo)

    vcpu_h = alloc_c * dh
    gb_h = alloc_m / GIB * dh
    cost = money(alloc_c, alloc_m, thr, short_m, ooms)
    vm_hours = n * steps * dh
    if not first:
        first = (alloc_c, alloc_m, thr, dem_c, short_m, ooms, steps)
    f_ac, f_am, f_thr, f_dem, f_sh, f_oom, f_steps = first
    extra = {"first_day_cpu_throttled_share": f_thr / f_dem if f_dem > 0 else 0.0,
             "first_day_oom_events": float(f_oom),
             "first_day_reward": -money(f_ac, f_am, f_thr, f_sh, f_oom) / (n * f_steps * dh)}
    return Result(policy.name, vcpu_h, gb_h, thr / dem_c if dem_c > 0 else 0.0, ooms, resizes,
                  -cost / vm_hours, cost, vm_hours, time.perf_counter() - t0, extra)
