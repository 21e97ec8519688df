"""Nodes with CPU and memory capacity, the placement of VMs on them, overcommit admission of
resizes and CPU contention (vectorized over VMs; used by ``adares.simulator.simulate``).

The rules (what a hypervisor or the kubelet does, simplified):
- Admission: a node admits allocations summing to at most ``capacity x overcommit`` per
  resource. At every step each VM's proposed CPU and memory allocations are checked separately:
  shrinks are always admitted (first, so they free room); growths are admitted in VM order while
  they fit; a growth that does not fit is refused and the VM keeps its previous allocation of
  that resource (no migration: a refused resize is counted, the policy sees the allocation in
  force in its next observation).
- Contention: when the CPU the VMs of a node would use (demand capped at each allocation) sums
  above the node's physical cores, every VM on the node is throttled proportionally (each gets
  ``capacity / sum`` of what it would use): the extra unserved core-time counts as throttling,
  a latency proxy. Memory used above a node's physical capacity is not modeled beyond the
  node-level utilization (it can exceed 1 with memory overcommit).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from adares.errors import InputError
from adares.trace import GIB, Trace


@dataclass(frozen=True)
class Cluster:
    """K nodes and the node of each of N VMs.

    node_of: (N,) int64, the node index of each VM (0 <= node < K).
    cpu_capacity: (K,) float64 physical cores; mem_capacity: (K,) float64 physical bytes.
    cpu_overcommit / mem_overcommit: allocatable / physical (1.0: no overcommit; 1.5: the
    allocations on a node may sum to 1.5 x its capacity).

    Raises InputError (``validate``) on wrong shapes, a node index out of range, non-positive
    capacity or an overcommit ratio that is not a positive finite number.
    """

    node_of: np.ndarray
    cpu_capacity: np.ndarray
    mem_capacity: np.ndarray
    cpu_overcommit: float = 1.0
    mem_overcommit: float = 1.0

    @property
    def n_nodes(self) -> int:
        """K."""
        return int(self.cpu_capacity.shape[0])

    def validate(self, n_vms: int) -> Cluster:
        """Check against a trace of ``n_vms`` VMs; returns self. InputError with one line."""
        k = self.cpu_capacity.shape
        if self.node_of.shape != (n_vms,):
            raise InputError(f"cluster: node_of must have one entry per VM ({n_vms})")
        if self.cpu_capacity.ndim != 1 or self.mem_capacity.shape != k or k[0] < 1:
            raise InputError("cluster: cpu_capacity and mem_capacity must be (K,) with K >= 1")
        if n_vms and (self.node_of.min() < 0 or self.node_of.max() >= k[0]):
            raise InputError(f"cluster: node index out of range 0..{k[0] - 1}")
        for name, a in (("cpu_capacity", self.cpu_capacity), ("mem_capacity", self.mem_capacity)):
            if not (np.all(np.isfinite(a)) and np.all(a > 0)):
                raise InputError(f"cluster: {name} must be positive and finite")
        for name, v in (("cpu_overcommit", self.cpu_overcommit),
                        ("mem_overcommit", self.mem_overcommit)):
            if not (np.isfinite(v) and v > 0):
                raise InputError(f"cluster: {name} must be a positive number, got {v}")
        return self

    @classmethod
    def place(cls, trace: Trace, n_nodes: int, cpu: float, mem_gib: float,
              overcommit: float = 1.0) -> Cluster:
        """``n_nodes`` identical nodes of ``cpu`` cores and ``mem_gib`` GiB; VMs placed by
        first fit of their requests in VM order against ``capacity x overcommit``; a VM that
        fits nowhere goes to the node with the most free CPU (it is over-full from the start).
        Raises InputError on bad sizes."""
        if n_nodes < 1 or not (cpu > 0 and mem_gib > 0):
            raise InputError("cluster: give nodes >= 1 and positive cpu and mem")
        cap_c, cap_m = cpu * overcommit, mem_gib * GIB * overcommit
        used_c, used_m = np.zeros(n_nodes), np.zeros(n_nodes)
        node_of = np.zeros(trace.n_vms, dtype=np.int64)
        for i, (c, m) in enumerate(zip(trace.cpu_request, trace.mem_request)):
            fits = np.flatnonzero((used_c + c <= cap_c) & (used_m + m <= cap_m))
            j = int(fits[0]) if fits.size else int(np.argmin(used_c))
            node_of[i] = j
            used_c[j] += c
            used_m[j] += m
        return cls(node_of, np.full(n_nodes, float(cpu)), np.full(n_nodes, mem_gib * GIB),
                   overcommit, overcommit).validate(trace.n_vms)


def parse_cluster(spec: str, trace: Trace) -> Cluster:
    """A cluster from ``nodes=K,cpu=C,mem=GIB[,overcommit=R]`` (identical nodes, first-fit
    placement, see ``Cluster.place``). InputError on a malformed spec."""
    n, c, m, oc = parse_node_spec(spec)
    return Cluster.place(trace, n, c, m, oc)


#: The largest cluster ``--cluster`` takes (placement keeps arrays per node), and node sizes
#: beyond any machine built (larger ones overflow the capacity arithmetic).
MAX_NODES, MAX_NODE_CPU, MAX_NODE_GIB = 1_000_000, 1e5, 1e7


def parse_node_spec(spec: str) -> tuple[int, float, float, float]:
    """``nodes=K,cpu=C,mem=GIB[,overcommit=R]`` as (K, cores, GiB, R), checked without a trace
    (so the command line refuses a bad spec before loading one). InputError when malformed."""
    kv: dict[str, str] = {}
    for it in (s for s in spec.split(",") if s.strip()):
        k, eq, v = (x.strip() for x in it.partition("="))
        if not eq or not k or k in kv:
            raise InputError(f"--cluster {spec!r}: expected nodes=K,cpu=C,mem=GIB[,overcommit=R]")
        kv[k] = v
    unknown = set(kv) - {"nodes", "cpu", "mem", "overcommit"}
    if unknown or not {"nodes", "cpu", "mem"} <= set(kv):
        raise InputError(f"--cluster {spec!r}: expected nodes=K,cpu=C,mem=GIB[,overcommit=R]")
    try:
        n, c, m = int(kv["nodes"]), float(kv["cpu"]), float(kv["mem"])
        oc = float(kv.get("overcommit", 1.0))
    except ValueError:
        raise InputError(f"--cluster {spec!r}: nodes must be an integer, cpu, mem and "
                         "overcommit numbers") from None
    if not all(np.isfinite(v) and v > 0 for v in (c, m, oc)):
        raise InputError(f"--cluster {spec!r}: cpu, mem and overcommit must be positive numbers")
    if not 1 <= n <= MAX_NODES:
        raise InputError(f"--cluster {spec!r}: nodes must be between 1 and {MAX_NODES:,}")
    if c > MAX_NODE_CPU or m > MAX_NODE_GIB:
        raise InputError(f"--cluster {spec!r}: at most {MAX_NODE_CPU:g} cores and "
                         f"{MAX_NODE_GIB:g} GiB per node")
    return n, c, m, oc


def admit(prev: np.ndarray, new: np.ndarray, node_of: np.ndarray,
          limit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Admission of one resource's proposed allocations (see the module docstring).

    prev, new: (N,) float64 allocations in force and proposed; node_of: (N,) int node indices;
    limit: (K,) float64 allocatable per node (capacity x overcommit). Returns the admitted
    allocations (N,) and a bool mask (N,) of the refused growths.
    """
    k = limit.shape[0]
    keep = np.minimum(prev, new)
    grow = new - keep
    base = np.bincount(node_of, keep, minlength=k)
    over = base + np.bincount(node_of, grow, minlength=k) > limit
    refused = np.zeros(new.shape, dtype=bool)
    if not over.any():
        return new, refused
    out = new.copy()
    for node in np.flatnonzero(over):
        room = limit[node] - base[node]
        for i in np.flatnonzero((node_of == node) & (grow > 0)):
            if grow[i] <= room:
                room -= grow[i]
            else:
                out[i] = prev[i]
                refused[i] = True
    return out, refused


def contend(used: np.ndarray, node_of: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """CPU served under contention: ``used`` (N,) cores each VM would use (demand capped at
    its allocation), scaled on every node whose sum exceeds ``capacity`` (K,) cores by
    capacity / sum. Returns (N,) cores served."""
    total = np.bincount(node_of, used, minlength=capacity.shape[0])
    factor = np.minimum(1.0, capacity / np.maximum(total, 1e-300))
    return used * factor[node_of]
