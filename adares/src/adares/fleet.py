"""A fleet of clusters replayed one (cluster, policy) pair at a time, in this process or in
parallel on Ray (``pip install 'adares[ray]'``), with the same code and the same results.

ADARES ran over thousands of private clusters, each learning on its own VMs. Here a trace's VMs
are split into K clusters (contiguous blocks of VM columns, ``split``); each cluster is replayed
under each policy by ``replay_part`` with its own policy state (a bandit per cluster, seeded
``seed + c * CLUSTER_SEED_STRIDE``) and, when a node spec is given, its own nodes. The
(cluster, policy) pairs are independent, so the "ray" backend runs them as Ray tasks (one CPU
each) and the "local" backend runs them in order; ``merge`` sums the clusters' totals into one
Result per policy. Both backends call ``replay_part`` on the same contiguous arrays and merge in
cluster order, so their results are equal bit for bit (wall time aside).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from adares.backends import BACKENDS, ray_result, ray_session
from adares.cluster import Cluster
from adares.errors import InputError
from adares.policies import get
from adares.policies.bandit import DecisionLog
from adares.simulator import CostModel, Result
from adares.trace import Trace

# Seeds of cluster c's bandit: seed + c * stride; the bandit seeds its two resources seed and
# seed + 1, so a stride > 1 keeps every cluster's random streams apart (cluster 0 keeps seed).
CLUSTER_SEED_STRIDE = 1_000_003
# Result.extra entries that add up over clusters.
SUMMED = ("restarts", "cpu_resizes", "mem_resizes", "capped_resizes", "resize_cost")
__all__ = ["BACKENDS", "Fleet", "split", "replay_part", "merge", "merge_logs", "replay_fleet"]


@dataclass(frozen=True)
class Fleet:
    """A trace split into clusters. parts: the clusters' traces (contiguous arrays, VM columns
    ``blocks[c]`` of the whole trace); blocks: (N_c,) int64 VM indices of each cluster;
    nodes: each cluster's nodes (``adares.cluster.Cluster``) or None (unlimited)."""

    parts: tuple[Trace, ...]
    blocks: tuple[np.ndarray, ...]
    nodes: tuple[Cluster | None, ...]


def split(trace: Trace, k: int, node_spec: str = "") -> Fleet:
    """Split ``trace``'s N VMs into ``k`` clusters of contiguous VMs (sizes differ by at most
    one; ``numpy.array_split``); with ``node_spec`` (``nodes=K,cpu=C,mem=GIB[,overcommit=R]``)
    each cluster gets K such nodes of its own (``adares.cluster.parse_cluster``).
    Raises InputError when k < 1 or k > N, or on a bad node spec."""
    from adares.cluster import parse_cluster

    if not 1 <= k <= trace.n_vms:
        raise InputError(f"--clusters must be in 1..{trace.n_vms} (the VMs), got {k}")
    if k == 1:
        # Contiguous as Ray's object store hands them to tasks (no copy when they already are).
        blocks = (np.arange(trace.n_vms),)
        arr = None if trace.arrivals is None else np.ascontiguousarray(trace.arrivals)
        parts = (Trace(np.ascontiguousarray(trace.cpu), np.ascontiguousarray(trace.mem),
                       trace.cpu_request, trace.mem_request, trace.vm_ids, trace.step_s,
                       trace.start_s, arr),)
    else:
        blocks = tuple(np.array_split(np.arange(trace.n_vms), k))
        parts = tuple(trace.vms(b) for b in blocks)
    nodes = tuple(parse_cluster(node_spec, p) if node_spec else None for p in parts)
    return Fleet(parts, blocks, nodes)


def replay_part(trace: Trace, name: str, seed: int, costs: CostModel,
                warm_start: DecisionLog | None, keep_log: bool, record_vms: tuple[int, ...],
                resize_mode: str, bandit: str, nodes: Cluster | None,
                margin: tuple[float, float],
                knobs: dict[str, dict[str, float | int]] | None = None,
                progress: Callable[[int, int], None] | None = None
                ) -> tuple[Result, DecisionLog | None]:
    """One cluster under one policy: ``adares.replay.replay`` of that policy alone; returns its
    Result and, when ``keep_log``, the bandit's decision log (None for other policies). This is
    the function both backends run (a Ray task on the "ray" backend)."""
    from adares.replay import replay

    logs: dict[str, DecisionLog] | None = {} if keep_log else None
    res = replay(trace, [name], seed, costs, warm_start=warm_start, logs=logs,
                 record_vms=record_vms, resize_mode=resize_mode, bandit=bandit, cluster=nodes,
                 margin=margin, knobs=knobs,
                 progress=None if progress is None else (lambda _n, d, t: progress(d, t)))[name]
    return res, (logs or {}).get(name)


def merge(fleet: Fleet, parts: list[Result], record_vms: tuple[int, ...] = ()) -> Result:
    """One policy's Result over the fleet from its clusters' Results (in cluster order):
    hours, OOM kills, resizes, costs and step costs summed; throttled shares weighted by each
    cluster's demanded core-hours (over the whole trace, or its first day); node statistics
    stacked (node means over every node of the fleet); ``seconds`` summed (CPU time of the
    replays, not wall time); recorded allocations in the order of ``record_vms`` (global VM
    indices). A fleet of one cluster gives its Result back unchanged."""
    if len(parts) == 1:
        return parts[0]
    tr0 = fleet.parts[0]
    day = min(tr0.n_steps, max(1, int(round(86400 / tr0.step_s))))
    dem = np.array([p.cpu.sum() for p in fleet.parts]) * tr0.step_h
    dem_day = np.array([p.cpu[:day].sum() for p in fleet.parts]) * tr0.step_h

    def share(key: str | None, weights: np.ndarray) -> float:
        vals = np.array([r.cpu_throttled_share if key is None else r.extra[key] for r in parts])
        return float((vals * weights).sum() / weights.sum()) if weights.sum() > 0 else 0.0

    step_cost = np.sum([r.step_cost for r in parts], axis=0)
    cost = float(sum(r.cost for r in parts))
    vm_hours = float(sum(r.vm_hours for r in parts))
    n = sum(p.n_vms for p in fleet.parts)
    extra: dict[str, float] = {
        "first_day_cpu_throttled_share": share("first_day_cpu_throttled_share", dem_day),
        "first_day_oom_events": int(sum(r.extra["first_day_oom_events"] for r in parts)),
        "first_day_reward": -float(step_cost[:day].sum()) / (n * day * tr0.step_h),
        **{k: sum(r.extra[k] for r in parts) for k in SUMMED}}
    node_stats = np.vstack([r.node_stats for r in parts])
    if "refused_resizes" in parts[0].extra:
        means = node_stats.mean(axis=0)
        extra |= {"refused_resizes": int(sum(r.extra["refused_resizes"] for r in parts)),
                  "cpu_contention_share": share("cpu_contention_share", dem),
                  "node_cpu_utilization": float(means[0]), "node_mem_utilization": float(means[1]),
                  "node_cpu_allocated": float(means[2]), "node_mem_allocated": float(means[3])}
    where = {int(v): (c, j) for c, b in enumerate(fleet.blocks) for j, v in enumerate(b)}
    cols = [(where[v][0], _local_record(fleet, record_vms, where[v][0]).index(where[v][1]))
            for v in record_vms]
    steps = tr0.n_steps
    alloc_cpu = np.zeros((steps, len(cols)))
    alloc_mem = np.zeros((steps, len(cols)))
    for i, (c, j) in enumerate(cols):
        alloc_cpu[:, i], alloc_mem[:, i] = parts[c].alloc_cpu[:, j], parts[c].alloc_mem[:, j]
    return Result(parts[0].policy, float(sum(r.vcpu_hours for r in parts)),
                  float(sum(r.gb_hours for r in parts)), share(None, dem),
                  int(sum(r.oom_events for r in parts)), int(sum(r.resizes for r in parts)),
                  -cost / vm_hours, cost, vm_hours, float(sum(r.seconds for r in parts)), extra,
                  step_cost, alloc_cpu, alloc_mem, node_stats)


def _local_record(fleet: Fleet, record_vms: tuple[int, ...], c: int) -> list[int]:
    """The VMs of ``record_vms`` that cluster c holds, as its local column indices (in the
    order of ``record_vms``; for one cluster, ``record_vms`` itself)."""
    b = fleet.blocks[c]
    return [int(v - b[0]) for v in record_vms if b[0] <= v <= b[-1]]


def merge_logs(logs: list[DecisionLog]) -> DecisionLog:
    """The clusters' decision logs, one after another (cluster order), with the first one's
    action set (every cluster's bandit has the same)."""
    out = DecisionLog(multipliers=logs[0].multipliers if logs else None,
                      floor_action=logs[0].floor_action if logs else None)
    for lg in logs:
        for f in ("resource", "context", "allowed", "action", "prob", "cost"):
            getattr(out, f).extend(getattr(lg, f))
    return out


def replay_fleet(fleet: Fleet, names: list[str], seed: int = 0, costs: CostModel = CostModel(),
                 warm_start: DecisionLog | None = None, keep_log: bool = False,
                 record_vms: tuple[int, ...] = (), resize_mode: str = "in-place",
                 bandit: str = "numpy", margin: tuple[float, float] = (0.0, 0.0),
                 backend: str = "local", workers: int | None = None,
                 on_done: Callable[[Result], None] | None = None,
                 progress: Callable[[str, int, int], None] | None = None,
                 knobs: dict[str, dict[str, float | int]] | None = None
                 ) -> tuple[dict[str, Result], dict[str, DecisionLog]]:
    """Replay every cluster of ``fleet`` under each named policy; returns the merged Result per
    policy (in ``names`` order) and, when ``keep_log``, the bandit's merged decision log under
    its name. backend "local" runs the (cluster, policy) pairs here in order; "ray" runs them as
    Ray tasks (num_cpus=1 each) on the running Ray instance, or on one started here with
    ``workers`` CPUs (None: every core) and shut down at the end. ``on_done`` gets each policy's
    merged Result when its last cluster finishes; ``progress(label, done, total)``: replay steps
    per (policy, cluster) on "local", finished pairs on "ray"; ``knobs``: per policy, knob
    values (``adares.policies.parse_knobs``).
    Raises InputError for an unknown backend, or when Ray is not installed."""
    if backend not in BACKENDS:
        raise InputError(f"unknown backend {backend!r} ({', '.join(BACKENDS)})")
    k = len(fleet.parts)
    local_rec = [tuple(_local_record(fleet, record_vms, c)) for c in range(k)]
    jobs = [(n, c) for n in names for c in range(k)]
    args = {(n, c): (n, seed + c * CLUSTER_SEED_STRIDE, costs, warm_start, keep_log, local_rec[c],
                     resize_mode, bandit, fleet.nodes[c], margin, knobs) for n, c in jobs}
    done: dict[tuple[str, int], tuple[Result, DecisionLog | None]] = {}
    results: dict[str, Result] = {}

    def finish(n: str) -> None:
        if all((n, c) in done for c in range(k)) and n not in results:
            results[n] = merge(fleet, [done[n, c][0] for c in range(k)], record_vms)
            if on_done is not None:
                on_done(results[n])

    if backend == "local":
        for n, c in jobs:
            label = n if k == 1 else f"{n} [{c + 1}/{k}]"
            done[n, c] = replay_part(fleet.parts[c], *args[n, c], progress=None if progress is None
                                     else (lambda d, t, lb=label: progress(lb, d, t)))
            finish(n)
    else:
        _ray_run(fleet, jobs, args, workers, done, finish, progress)
    logs = {}
    for n in names if keep_log else ():
        if get(n).learns:
            logs[n] = merge_logs([done[n, c][1] for c in range(k)])
    return {n: results[n] for n in names}, logs


def _ray_run(fleet: Fleet, jobs: list, args: dict, workers: int | None, done: dict,
             finish: Callable[[str], None], progress: Callable[[str, int, int], None] | None
             ) -> None:
    """Run the jobs as Ray tasks; fill ``done`` as they finish (the order they finish in does
    not change any result: each is merged in cluster order)."""
    with ray_session(workers) as ray:
        task = ray.remote(num_cpus=1, max_retries=0)(replay_part)
        traces = [ray.put(p) for p in fleet.parts]
        # One copy of the warm-start log in the object store, not one per task.
        warm = ray.put(args[jobs[0]][3]) if jobs else None
        refs = {}
        for n, c in jobs:
            a = list(args[n, c])
            a[3] = warm
            refs[task.remote(traces[c], *a)] = (n, c)
        pending = list(refs)
        total = len(pending)
        if progress is not None:
            progress("(cluster, policy) pairs", 0, total)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                done[refs[ref]] = ray_result(ray, ref)
                finish(refs[ref][0])
            if progress is not None:
                progress("(cluster, policy) pairs", total - len(pending), total)

