"""What every rightsizing policy shares: the information it gets (``TraceInfo``,
``Observation``), the protocol it implements (``Policy``), the options a factory receives
(``PolicyOptions``), a tunable knob's declaration (``Knob``) and the margin decorator
(``Margined``) that the equal-violation search and ``replay --margin`` put around any policy.

A policy's whole record (name, factory, knobs) is one ``adares.policies.registry.PolicySpec``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from adares.costs import CostModel
from adares.errors import InputError
from adares.trace import Trace


@dataclass(frozen=True)
class TraceInfo:
    """What a policy may know up front: sizes, step, start time and the VMs' requests; on
    nodes, the placement: node_of (N,) int node of each VM, node_cpu / node_mem (K,) physical
    cores and bytes of each node (None without nodes)."""

    n_vms: int
    n_steps: int
    step_s: int
    start_s: float
    cpu_request: np.ndarray
    mem_request: np.ndarray
    node_of: np.ndarray | None = None
    node_cpu: np.ndarray | None = None
    node_mem: np.ndarray | None = None

    @classmethod
    def of(cls, trace: Trace, cluster: Any = None) -> TraceInfo:
        """The info of ``trace`` (no demand), with the placement of ``cluster``
        (an ``adares.cluster.Cluster``) when given."""
        nodes = ((None, None, None) if cluster is None else
                 (cluster.node_of.copy(), cluster.cpu_capacity.copy(),
                  cluster.mem_capacity.copy()))
        return cls(trace.n_vms, trace.n_steps, trace.step_s, trace.start_s,
                   trace.cpu_request.copy(), trace.mem_request.copy(), *nodes)


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
    """A rightsizing policy: ``reset`` once, then per step ``allocate`` and ``observe``.

    On traces with lifetimes, a policy may also have ``arrive(mask)`` ((N,) bool: a new VM
    starts in these slots at the coming step, before ``allocate``): it sizes the new VM from
    what is known at creation (its flavor; a class's history) until it has the VM's own
    history. A policy without it keeps the slot's state (``static`` and ``clairvoyant``
    need none).
    """

    name: str

    def reset(self, info: TraceInfo) -> None:
        """Start a replay."""

    def allocate(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """Allocations for step t: (cores (N,), bytes (N,)), float64, non-negative."""

    def observe(self, obs: Observation) -> None:
        """Learn from step ``obs.t``."""


@dataclass(frozen=True)
class Knob:
    """One tunable setting of a policy, with the range the fair-baseline search explores and
    the command line accepts (``--knob POLICY.NAME=VALUE``).

    name: the factory's keyword; lo, hi: inclusive bounds; default: the policy's own default;
    integer: rounded to an int; log: searched on a log scale; doc: what it changes, with units.
    """

    name: str
    lo: float
    hi: float
    default: float
    doc: str
    integer: bool = False
    log: bool = False

    def check(self, policy: str, value: float) -> float | int:
        """``value`` as the factory takes it. Raises InputError outside [lo, hi], non-finite,
        or a fraction for an integer knob (rounding it would run another setting than typed)."""
        if not (math.isfinite(value) and self.lo <= value <= self.hi):
            raise InputError(f"knob {policy}.{self.name}={value:g} is outside "
                             f"[{self.lo:g}, {self.hi:g}] ({self.doc})")
        if self.integer and value != int(value):
            raise InputError(f"knob {policy}.{self.name}={value:g} must be a whole number "
                             f"({self.doc})")
        return int(value) if self.integer else float(value)


@dataclass(frozen=True)
class PolicyOptions:
    """What a policy factory receives besides the trace.

    seed: exploration seed (learners); costs: the replay's prices; knobs: checked knob values
    by name (``Knob.check``), absent knobs take the policy's defaults; warm_start (a
    ``DecisionLog``), keep_log and bandit (learner backend, ``numpy`` or ``vw``): the learning
    policies' transfer, logging and backend.
    """

    seed: int = 0
    costs: CostModel = CostModel()
    knobs: dict[str, float | int] = field(default_factory=dict)
    warm_start: Any = None
    keep_log: bool = False
    bandit: str = "numpy"


class Margined:
    """``inner``'s allocations times (1 + cpu_margin) cores and (1 + mem_margin) bytes; the
    inner policy observes what happened under them. Margins must be > -1 (ValueError)."""

    def __init__(self, inner: Policy, cpu_margin: float = 0.0, mem_margin: float = 0.0) -> None:
        if not (cpu_margin > -1 and mem_margin > -1 and np.isfinite(cpu_margin)
                and np.isfinite(mem_margin)):
            raise ValueError(f"margins must be finite and > -1, got {cpu_margin}, {mem_margin}")
        self.inner, self.cpu_margin, self.mem_margin = inner, cpu_margin, mem_margin
        self.name = inner.name

    def reset(self, info: TraceInfo) -> None:
        """Start a replay."""
        self.inner.reset(info)

    def allocate(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """The inner allocations with the margins."""
        c, m = self.inner.allocate(t)
        return c * (1 + self.cpu_margin), m * (1 + self.mem_margin)

    def observe(self, obs: Observation) -> None:
        """Passed to the inner policy."""
        self.inner.observe(obs)

    def arrive(self, mask: np.ndarray) -> None:
        """Passed to the inner policy, where it has ``arrive``."""
        if hasattr(self.inner, "arrive"):
            self.inner.arrive(mask)
