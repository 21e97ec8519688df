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
from collections.abc import Callable
from typing import Protocol

import numpy as np

from adares.cluster import Cluster, admit, contend
from adares.trace import GIB, Trace


@dataclass(frozen=True)
class CostModel:
    """Prices and penalties, in one money unit.

    vcpu_hour / gb_hour: price of an allocated vCPU-hour / GiB-hour (8:1, like cloud list prices).
    throttle_penalty: per throttled vCPU-hour; mem_shortfall_penalty: per GiB-hour of memory
    demand above the allocation; oom_cost: per OOM kill (restart); restart_cost: per restart to
    shrink memory (resize mode "restart-to-shrink"). The penalties exceed the
    prices, so allocating exactly the demand (the clairvoyant policy) minimizes every VM-step's
    cost: its reward bounds every policy's from above (its cost from below) when resizes are in
    place (restarts to shrink can make following demand down cost more than holding memory).
    """

    vcpu_hour: float = 1.0
    gb_hour: float = 0.125
    throttle_penalty: float = 10.0
    mem_shortfall_penalty: float = 1.25
    oom_cost: float = 2.0
    restart_cost: float = 0.5

    def __post_init__(self) -> None:
        if min(self.restart_cost, self.oom_cost) < 0:
            raise ValueError("restart and OOM costs must be non-negative")
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
    first_day_reward). With a cluster (``simulate(cluster=...)``), extra also has
    refused_resizes (refused growths, one per VM and resource), cpu_contention_share (core-hours
    lost to node contention / demanded core-hours, included in cpu_throttled_share) and the
    node-level means over nodes and steps node_cpu_utilization / node_mem_utilization (served
    cores / cores, used bytes / bytes) and node_cpu_allocated / node_mem_allocated (allocations
    / physical capacity); node_stats is (K, 4): those four per node, means over steps.
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
    step_cost: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    alloc_cpu: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)), repr=False)
    alloc_mem: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)), repr=False)
    node_stats: np.ndarray = field(default_factory=lambda: np.zeros((0, 4)), repr=False)

    def as_dict(self) -> dict[str, float | int | str]:
        """JSON-ready fields."""
        d: dict[str, float | int | str] = {
            "vcpu_hours": self.vcpu_hours, "gb_hours": self.gb_hours,
            "cpu_throttled_share": self.cpu_throttled_share, "oom_events": self.oom_events,
            "resizes": self.resizes, "reward": self.reward, "cost": self.cost,
            "seconds": self.seconds}
        d.update(self.extra)
        return d


RESIZE_MODES = ("in-place", "restart-to-shrink")


def simulate(trace: Trace, policy: Policy, costs: CostModel = CostModel(),
             record_vms: tuple[int, ...] = (), resize_mode: str = "in-place",
             cluster: Cluster | None = None,
             progress: Callable[[int, int], None] | None = None) -> Result:
    """Replay ``trace`` under ``policy``; returns the totals, the cost of every step
    (``Result.step_cost``, (T,)) and, for the VMs in ``record_vms``, their allocations
    (``Result.alloc_cpu`` / ``Result.alloc_mem``, (T, len(record_vms)), cores and bytes).

    resize_mode: "in-place" (every resize is free of restarts) or "restart-to-shrink" (lowering
    a VM's memory restarts it: ``restarts`` in the results, ``CostModel.restart_cost`` each).

    cluster: nodes and placement (``adares.cluster``): resizes that do not fit a node's
    capacity x overcommit are refused, CPU beyond a node's physical cores is shared
    proportionally (contention throttling); None: unlimited nodes.

    progress: called as progress(steps done, steps) about every 0.5% of the steps and at the end
    (for a progress bar with an ETA; the VPA port replays ~0.1-0.2 M VM-steps/s).

    Raises ValueError when the policy returns allocations of the wrong shape, negative or
    non-finite, or for an unknown resize_mode.
    """
    if resize_mode not in RESIZE_MODES:
        raise ValueError(f"unknown resize mode {resize_mode!r} ({', '.join(RESIZE_MODES)})")
    shrink_restarts = resize_mode == "restart-to-shrink"
    t0 = time.perf_counter()
    n, steps, dh = trace.n_vms, trace.n_steps, trace.step_h
    policy.reset(TraceInfo.of(trace))
    prev_c, prev_m = trace.cpu_request, trace.mem_request
    # Per step: allocated cores, allocated bytes, throttled cores, demanded cores, missing
    # bytes, OOM kills, restarts to shrink.
    sums = np.zeros((steps, 7))
    resizes = 0
    rec = list(record_vms)
    rec_c = np.zeros((steps, len(rec)))
    rec_m = np.zeros((steps, len(rec)))
    refused = 0
    contention = 0.0
    if cluster is not None:
        cluster.validate(n)
        k = cluster.n_nodes
        node_of = cluster.node_of
        lim_c = cluster.cpu_capacity * cluster.cpu_overcommit
        lim_m = cluster.mem_capacity * cluster.mem_overcommit
        node_sums = np.zeros((k, 4))   # served cores, used bytes, allocated cores, bytes
    every = max(1, steps // 200)
    for t in range(steps):
        if progress is not None and t % every == 0:
            progress(t, steps)
        a_c, a_m = policy.allocate(t)
        if a_c.shape != (n,) or a_m.shape != (n,):
            raise ValueError(f"{policy.name}: allocations must have shape ({n},)")
        if not (np.all(np.isfinite(a_c)) and np.all(np.isfinite(a_m))
                and a_c.min() >= 0 and a_m.min() >= 0):
            raise ValueError(f"{policy.name}: allocations must be finite and non-negative")
        d_c, d_m = trace.cpu[t], trace.mem[t]
        if cluster is not None:
            a_c, ref_c = admit(prev_c, a_c, node_of, lim_c)
            a_m, ref_m = admit(prev_m, a_m, node_of, lim_m)
            refused += int(ref_c.sum() + ref_m.sum())
            capped = np.minimum(d_c, a_c)
            used_c = contend(capped, node_of, cluster.cpu_capacity)
            contention += float((capped - used_c).sum())
        else:
            used_c = np.minimum(d_c, a_c)
        throttled = d_c - used_c
        oom = d_m > a_m
        used_m = np.minimum(d_m, a_m)
        resizes += int(((a_c != prev_c) | (a_m != prev_m)).sum())
        sums[t] = (a_c.sum(), a_m.sum(), throttled.sum(), d_c.sum(), (d_m - used_m).sum(),
                   oom.sum(), (a_m < prev_m).sum() if shrink_restarts else 0)
        if cluster is not None:
            for j, v in enumerate((used_c, used_m, a_c, a_m)):
                node_sums[:, j] += np.bincount(node_of, v, minlength=k)
        if rec:
            rec_c[t], rec_m[t] = a_c[rec], a_m[rec]
        prev_c, prev_m = a_c.copy(), a_m.copy()  # a policy may update its arrays in place
        policy.observe(Observation(t, trace.start_s + t * trace.step_s, used_c, throttled,
                                   used_m, oom, a_c, a_m))
    if progress is not None:
        progress(steps, steps)
    step_cost = (costs.vcpu_hour * sums[:, 0] * dh + costs.gb_hour * sums[:, 1] / GIB * dh
                 + costs.throttle_penalty * sums[:, 2] * dh
                 + costs.mem_shortfall_penalty * sums[:, 4] / GIB * dh + costs.oom_cost * sums[:, 5]
                 + costs.restart_cost * sums[:, 6])
    tot = sums.sum(axis=0)
    day = min(steps, max(1, int(round(86400 / trace.step_s))))
    first = sums[:day].sum(axis=0)
    cost = float(step_cost.sum())
    vm_hours = n * steps * dh
    extra = {"first_day_cpu_throttled_share": float(first[2] / first[3]) if first[3] > 0 else 0.0,
             "first_day_oom_events": int(first[5]),  # counts, like oom_events
             "first_day_reward": -float(step_cost[:day].sum()) / (n * day * dh),
             "restarts": int(tot[6])}
    node_stats = np.zeros((0, 4))
    if cluster is not None:
        caps = np.column_stack([cluster.cpu_capacity, cluster.mem_capacity] * 2)
        node_stats = node_sums / steps / caps
        means = node_stats.mean(axis=0)
        extra |= {"refused_resizes": refused,
                  "cpu_contention_share": contention / tot[3] if tot[3] > 0 else 0.0,
                  "node_cpu_utilization": float(means[0]), "node_mem_utilization": float(means[1]),
                  "node_cpu_allocated": float(means[2]), "node_mem_allocated": float(means[3])}
    return Result(policy.name, float(tot[0] * dh), float(tot[1] / GIB * dh),
                  float(tot[2] / tot[3]) if tot[3] > 0 else 0.0, int(tot[5]), resizes,
                  -cost / vm_hours, cost, vm_hours, time.perf_counter() - t0, extra,
                  step_cost, rec_c, rec_m, node_stats)
