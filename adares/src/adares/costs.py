"""Prices and penalties of a replay (one money unit), shared by the simulator and the policies
that weigh costs (the bandit's reward, the Autopilot-like ensemble's recommender costs)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CostModel:
    """Prices and penalties, in one money unit.

    vcpu_hour / gb_hour: price of an allocated vCPU-hour / GiB-hour (8:1, like cloud list prices).
    throttle_penalty: per throttled vCPU-hour; mem_shortfall_penalty: per GiB-hour of memory
    demand above the allocation; oom_cost: per OOM kill (restart); restart_cost: per restart to
    shrink memory (resize mode "restart-to-shrink"); cpu_resize_cost / mem_resize_cost: per
    change of a VM's CPU / memory allocation; resize_cap: resizes allowed per VM-hour (a change
    sooner than 1 / cap hours after the VM's last one is refused: the VM keeps its allocation;
    inf: no cap).

    Resize prices (this tool's choice, in units of a vCPU-hour): a CPU change is a cgroup
    quota write in a container (in-place pod resize, Kubernetes KEP-1287) or a vCPU hot-add in
    a VM, cheap: 0.01 (36 vCPU-seconds); a memory change is slower and limited (memory
    hot-unplug must migrate pages off the removed blocks, virtio-mem, Hildenbrand and Schulz,
    VEE 2021; a container's memory limit cannot always shrink in place): 0.05. A VPA in its
    default "Recreate" mode evicts the pod instead: ``--resize restart-to-shrink`` and
    restart_cost. The penalties exceed the
    prices, so allocating exactly the demand (the clairvoyant policy) minimizes every VM-step's
    cost of allocation and violations: its reward bounds every policy's from above when resizes
    are free and in place (it resizes every step; restarts to shrink can make following demand
    down cost more than holding memory).
    """

    vcpu_hour: float = 1.0
    gb_hour: float = 0.125
    throttle_penalty: float = 10.0
    mem_shortfall_penalty: float = 1.25
    oom_cost: float = 2.0
    restart_cost: float = 0.5
    cpu_resize_cost: float = 0.01
    mem_resize_cost: float = 0.05
    resize_cap: float = float("inf")

    def __post_init__(self) -> None:
        if min(self.cpu_resize_cost, self.mem_resize_cost) < 0:
            raise ValueError("resize prices must be non-negative")
        if not self.resize_cap > 0:
            raise ValueError("the resize cap must be > 0 resizes per VM-hour")
        if min(self.restart_cost, self.oom_cost) < 0:
            raise ValueError("restart and OOM costs must be non-negative")
        if self.throttle_penalty < self.vcpu_hour or self.mem_shortfall_penalty < self.gb_hour:
            raise ValueError("penalties must be at least the prices")
        if min(self.vcpu_hour, self.gb_hour, self.oom_cost) < 0:
            raise ValueError("prices and costs must be non-negative")
