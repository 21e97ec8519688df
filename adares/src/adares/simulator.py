"""Discrete-time replay of a trace under a rightsizing policy (vectorized over VMs).

At each step t the policy sets every VM's CPU and memory allocation from what it observed up to
step t - 1; then the step's demand is served:
- CPU demand above the allocation is throttled (unserved core-time, a latency proxy);
- memory demand above the allocation is an OOM kill (one event, a restart cost, and the
  memory the VM lacked counts as shortfall);
- a change of either allocation is one resize (done in place).
With lifetimes (``Trace.arrivals``), a new VM in a slot is announced to the policy
(``policy.arrive(mask)``, where it has that method) before the step's allocation, and is
created at the size the policy gives it: a creation, not a resize.
The policy then observes what a node agent would report: CPU used (capped at the allocation),
the throttled cores, memory used (capped at the allocation) and the OOM kills.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from collections.abc import Callable

import numpy as np

from adares.cluster import Cluster, admit, contend
from adares.costs import CostModel
from adares.policies.base import Observation, Policy, TraceInfo
from adares.trace import GIB, Trace

# The types a policy sees live beside the policies (``adares.policies.base``) and the prices in
# ``adares.costs``; they are re-exported here for the callers of ``simulate``.
__all__ = ["CostModel", "Observation", "Policy", "TraceInfo", "Result", "RESIZE_MODES", "simulate"]


@dataclass
class Result:
    """Totals of one replay. Hours are allocated resource-hours; GB means GiB.

    reward: minus the cost per VM-hour (money units, CostModel); cost: total money;
    cpu_throttled_share: throttled core-hours / demanded core-hours; extra: the same violations
    over the first simulated day (first_day_cpu_throttled_share, first_day_oom_events,
    first_day_reward), restarts, cpu_resizes / mem_resizes (changes of each allocation),
    capped_resizes (refused by ``CostModel.resize_cap``) and resize_cost (money; in ``cost``).
    With a cluster (``simulate(cluster=...)``), extra also has
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
    n, steps = trace.n_vms, trace.n_steps
    policy.reset(TraceInfo.of(trace, cluster))
    prev_c, prev_m = trace.cpu_request, trace.mem_request
    # Per step: allocated cores, allocated bytes, throttled cores, demanded cores, missing
    # bytes, OOM kills, restarts to shrink, CPU resizes, memory resizes, capped resizes.
    sums = np.zeros((steps, len(_SUMS)))
    gap = 3600.0 / (costs.resize_cap * trace.step_s)  # steps between a VM's resizes
    last = np.full(n, -np.inf)
    resizes = 0
    rec = list(record_vms)
    rec_c = np.zeros((steps, len(rec)))
    rec_m = np.zeros((steps, len(rec)))
    cl = _Nodes(cluster, n) if cluster is not None else None
    every = max(1, steps // 200)
    for t in range(steps):
        if progress is not None and t % every == 0:
            progress(t, steps)
        born = None if trace.arrivals is None or not trace.arrivals[t].any() else trace.arrivals[t]
        a_c, a_m, (prev_c, prev_m) = _allocations(policy, t, n, born, (prev_c, prev_m), last)
        capped = 0
        if gap > 1:
            a_c, a_m, capped = _cap(prev_c, prev_m, a_c, a_m, t - last < gap)
        d_c, d_m = trace.cpu[t], trace.mem[t]
        if cl is not None:
            a_c, a_m, used_c = cl.serve(prev_c, prev_m, a_c, a_m, d_c)
        else:
            used_c = np.minimum(d_c, a_c)
        throttled = d_c - used_c
        oom = d_m > a_m
        used_m = np.minimum(d_m, a_m)
        ch_c, ch_m = a_c != prev_c, a_m != prev_m
        changed = ch_c | ch_m
        last[changed] = t
        resizes += int(changed.sum())
        sums[t] = (a_c.sum(), a_m.sum(), throttled.sum(), d_c.sum(), (d_m - used_m).sum(),
                   oom.sum(), (a_m < prev_m).sum() if shrink_restarts else 0, ch_c.sum(),
                   ch_m.sum(), capped)
        if cl is not None:
            cl.account(used_c, used_m, a_c, a_m)
        if rec:
            rec_c[t], rec_m[t] = a_c[rec], a_m[rec]
        prev_c, prev_m = a_c.copy(), a_m.copy()  # a policy may update its arrays in place
        policy.observe(Observation(t, trace.start_s + t * trace.step_s, used_c, throttled,
                                   used_m, oom, a_c, a_m))
    if progress is not None:
        progress(steps, steps)
    res = _totals(trace, policy.name, costs, sums, resizes, cl)
    res.seconds = time.perf_counter() - t0
    res.alloc_cpu, res.alloc_mem = rec_c, rec_m
    return res


_SUMS = ("cpu", "mem", "throttled", "demand", "missing", "oom", "restarts", "cpu_resizes",
         "mem_resizes", "capped_resizes")


def _allocations(policy: Policy, t: int, n: int, born: np.ndarray | None,
                 prev: tuple[np.ndarray, np.ndarray], last: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """The policy's allocations for step t (cores (N,), bytes (N,)), after announcing the new
    VMs ``born`` ((N,) bool, None: none) to it, and the previous allocations, where a new VM
    counts as already at its size (a creation: no resize, no cap, no node admission); new VMs'
    resize clocks in ``last`` (N,) are reset."""
    if born is not None and hasattr(policy, "arrive"):
        policy.arrive(born)
    a_c, a_m = _checked(policy, *policy.allocate(t), n)
    if born is not None:
        prev = (np.where(born, a_c, prev[0]), np.where(born, a_m, prev[1]))
        last[born] = -np.inf
    return a_c, a_m, prev


def _cap(prev_c: np.ndarray, prev_m: np.ndarray, a_c: np.ndarray, a_m: np.ndarray,
         too_soon: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """The resize cap: VMs resized too soon after their last resize keep their allocations.
    Returns the allocations and how many resizes were refused."""
    refused = too_soon & ((a_c != prev_c) | (a_m != prev_m))
    if not refused.any():
        return a_c, a_m, 0
    return (np.where(refused, prev_c, a_c), np.where(refused, prev_m, a_m),
            int(refused.sum()))


def _checked(policy: Policy, a_c: np.ndarray, a_m: np.ndarray,
             n: int) -> tuple[np.ndarray, np.ndarray]:
    """The policy's allocations, or ValueError on a wrong shape, negative or non-finite values."""
    if a_c.shape != (n,) or a_m.shape != (n,):
        raise ValueError(f"{policy.name}: allocations must have shape ({n},)")
    if not (np.all(np.isfinite(a_c)) and np.all(np.isfinite(a_m))
            and a_c.min() >= 0 and a_m.min() >= 0):
        raise ValueError(f"{policy.name}: allocations must be finite and non-negative")
    return a_c, a_m


class _Nodes:
    """A replay's node state: admission against capacity x overcommit, CPU contention, and the
    per-node sums of served cores, used bytes, allocated cores and bytes."""

    def __init__(self, cluster: Cluster, n: int) -> None:
        cluster.validate(n)
        self.cluster = cluster
        self.lim_c = cluster.cpu_capacity * cluster.cpu_overcommit
        self.lim_m = cluster.mem_capacity * cluster.mem_overcommit
        self.sums = np.zeros((cluster.n_nodes, 4))
        self.refused = 0
        self.contention = 0.0

    def serve(self, prev_c: np.ndarray, prev_m: np.ndarray, a_c: np.ndarray, a_m: np.ndarray,
              d_c: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Admitted allocations (cores, bytes) and the cores served after contention."""
        node_of = self.cluster.node_of
        a_c, ref_c = admit(prev_c, a_c, node_of, self.lim_c)
        a_m, ref_m = admit(prev_m, a_m, node_of, self.lim_m)
        self.refused += int(ref_c.sum() + ref_m.sum())
        capped = np.minimum(d_c, a_c)
        used_c = contend(capped, node_of, self.cluster.cpu_capacity)
        self.contention += float((capped - used_c).sum())
        return a_c, a_m, used_c

    def account(self, *per_vm: np.ndarray) -> None:
        """Add one step's per-VM served cores, used bytes, allocated cores and bytes."""
        k = self.cluster.n_nodes
        for j, v in enumerate(per_vm):
            self.sums[:, j] += np.bincount(self.cluster.node_of, v, minlength=k)

    def extra(self, steps: int, demanded: float) -> tuple[dict[str, float], np.ndarray]:
        """The node results (see ``Result``) and the (K, 4) node statistics."""
        c = self.cluster
        caps = np.column_stack([c.cpu_capacity, c.mem_capacity] * 2)
        node_stats = self.sums / steps / caps
        means = node_stats.mean(axis=0)
        return ({"refused_resizes": self.refused,
                 "cpu_contention_share": self.contention / demanded if demanded > 0 else 0.0,
                 "node_cpu_utilization": float(means[0]),
                 "node_mem_utilization": float(means[1]),
                 "node_cpu_allocated": float(means[2]), "node_mem_allocated": float(means[3])},
                node_stats)


def _totals(trace: Trace, name: str, costs: CostModel, sums: np.ndarray, resizes: int,
            nodes: _Nodes | None) -> Result:
    """The Result of a replay from its per-step sums (T, len(_SUMS)): allocated cores,
    allocated bytes, throttled cores, demanded cores, missing bytes, OOM kills, restarts to
    shrink, CPU resizes, memory resizes, resizes refused by the cap."""
    n, steps, dh = trace.n_vms, trace.n_steps, trace.step_h
    step_cost = (costs.vcpu_hour * sums[:, 0] * dh + costs.gb_hour * sums[:, 1] / GIB * dh
                 + costs.throttle_penalty * sums[:, 2] * dh
                 + costs.mem_shortfall_penalty * sums[:, 4] / GIB * dh + costs.oom_cost * sums[:, 5]
                 + costs.restart_cost * sums[:, 6] + costs.cpu_resize_cost * sums[:, 7]
                 + costs.mem_resize_cost * sums[:, 8])
    tot = sums.sum(axis=0)
    day = min(steps, max(1, int(round(86400 / trace.step_s))))
    first = sums[:day].sum(axis=0)
    cost = float(step_cost.sum())
    vm_hours = n * steps * dh
    extra = {"first_day_cpu_throttled_share": float(first[2] / first[3]) if first[3] > 0 else 0.0,
             "first_day_oom_events": int(first[5]),  # counts, like oom_events
             "first_day_reward": -float(step_cost[:day].sum()) / (n * day * dh),
             "restarts": int(tot[6]), "cpu_resizes": int(tot[7]), "mem_resizes": int(tot[8]),
             "capped_resizes": int(tot[9]),
             "resize_cost": float(costs.cpu_resize_cost * tot[7] + costs.mem_resize_cost * tot[8])}
    node_stats = np.zeros((0, 4))
    if nodes is not None:
        more, node_stats = nodes.extra(steps, tot[3])
        extra |= more
    return Result(name, float(tot[0] * dh), float(tot[1] / GIB * dh),
                  float(tot[2] / tot[3]) if tot[3] > 0 else 0.0, int(tot[5]), resizes,
                  -cost / vm_hours, cost, vm_hours, 0.0, extra, step_cost,
                  node_stats=node_stats)
