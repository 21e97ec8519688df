"""The bandit's base level and safety floor follow the last decision period (known bounds): after
a day-high phase ends, every allocation lies between the floor (the period's quantile x (1 +
margin)) and the largest multiplier x the period's p95, far below the earlier high phase, which
the old day window kept as the floor."""

import numpy as np
import pytest

from adares.policies.bandit import MULTIPLIERS, Adares
from adares.simulator import simulate
from adares.trace import GIB, Trace


def _step_trace(n=6, steps=288):
    cpu = np.full((steps, n), 1.0)
    cpu[:144] = 4.0                       # 12 hours at 4 cores, then 12 at 1 core
    mem = np.full((steps, n), 2 * GIB)
    mem[:144] = 6 * GIB
    return Trace(cpu, mem, np.full(n, 8.0), np.full(n, 8 * GIB), tuple(f"vm{i}" for i in range(n)))


@pytest.mark.parametrize("window, low", [(None, True), (288, False)])
def test_allocations_follow_the_last_period_down(window, low):
    tr = _step_trace()
    p = Adares(cpu_window_steps=window, mem_window_steps=window, margin=0.05)
    r = simulate(tr, p, record_vms=tuple(range(6)))
    # Decisions at the ends of periods; from two periods after the drop on, the window holds
    # only the low phase.
    c, m = r.alloc_cpu[144 + 24:], r.alloc_mem[144 + 24:]
    if low:
        assert c.min() >= 1.0 * 1.05 - 1e-9 and c.max() <= max(MULTIPLIERS) * 1.0 + 1e-9
        assert m.min() >= 2 * GIB * 1.05 - 1 and m.max() <= max(MULTIPLIERS) * 2 * GIB + 1
    else:  # the day window keeps the high phase as the floor all day
        assert c.min() >= 4.0 * 1.05 - 1e-9 and m.min() >= 6 * GIB * 1.05 - 1
    assert r.oom_events == 0 and r.cpu_throttled_share < 0.05
