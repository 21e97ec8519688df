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
