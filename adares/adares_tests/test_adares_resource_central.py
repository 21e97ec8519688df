"""The Resource Central-style policy against a closed form: after the learning day every VM of a
flavor class gets the class quantile of its members' utilization times the flavor."""

import numpy as np
import pytest

from adares.policies.resource_central import ResourceCentral
from adares.simulator import simulate
from adares.trace import GIB, Trace


def test_sized_by_its_class_history():
    steps = 300
    util = np.array([0.1, 0.2, 0.3, 0.5])            # of 4 cores (three VMs) and 2 cores (one)
    cores = np.array([4.0, 4.0, 4.0, 2.0])
    tr = Trace(np.tile(util * cores, (steps, 1)), np.tile(util * 8 * GIB, (steps, 1)), cores,
               np.full(4, 8 * GIB), ("a", "b", "c", "d"), 300, 0.0).validate()
    p = ResourceCentral()
    r = simulate(tr, p)
    # class {a, b, c}: 0.9 quantile of (0.1, 0.2, 0.3) = 0.28 -> 1.12 cores; d alone: 0.5 x 2.
    # memory: classes by (cores, memory) as well; peaks 0.8, 1.6, 2.4 GiB -> 0.28 x 8 = 2.24
    # GiB, below c's 2.4 GiB: c is OOM-killed once and bumped by 20%.
    np.testing.assert_allclose(p._c, [1.12, 1.12, 1.12, 1.0])
    np.testing.assert_allclose(p._m, [2.24 * GIB, 2.24 * GIB, 1.2 * 2.24 * GIB, 4 * GIB])
    assert r.oom_events == 1
    assert r.resizes == 4 + 1   # once at the end of the learning day, and c's bump
    assert r.vcpu_hours == pytest.approx((14.0 * 288 + (3 * 1.12 + 1.0) * 12) / 12)
