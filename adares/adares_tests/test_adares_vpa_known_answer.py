"""The VPA policy's replayed requests against the Go recommender's arithmetic, worked by hand
(kubernetes/autoscaler vertical-pod-autoscaler/pkg/recommender): for steady usage the target is
the end of the histogram bucket holding the usage (``Histogram.Percentile`` returns
``GetBucketStart(bucket + 1)``; exponential buckets, first 0.01 core / 1e7 bytes, ratio 1.05),
truncated to millicores (CPU) or bytes (memory), plus the 15% safety margin, itself truncated
(``marginEstimator``: amount + ScaleResource(amount, 0.15)).

0.5 cores: bucket floor(log(0.5 * 0.05 / 0.01 + 1) / log 1.05) = 25, its end
0.01 * (1.05**26 - 1) / 0.05 = 0.51113 cores: 511 m, + trunc(76.65) = 587 millicores.
1 GiB: bucket 37, end 1e7 * (1.05**38 - 1) / 0.05 = 1,077,095,457.98 bytes: 1,077,095,457
+ trunc(161,564,318.55) = 1,238,659,775 bytes (one byte below x 1.15 in floating point).

It also checks the issue's suspicion that the default replay's round 140,000.01 vCPU-hours
came from requests pinned to a bound: on a 100-VM trace hardly any VM-step sits at the 25 m
floor or at the original request after the first day, and the requests take many values.
"""

import numpy as np

from adares.policies.vpa import VPA
from adares.simulator import simulate
from adares.synthetic import generate
from adares.trace import GIB, Trace


def test_steady_usage_gives_the_go_target():
    steps = 3 * 288
    tr = Trace(np.full((steps, 2), 0.5), np.full((steps, 2), 1.0 * GIB), np.array([4.0, 0.25]),
               np.array([8 * GIB, 0.5 * GIB]), ("big", "small"), 300, 0.0).validate()
    p = VPA()
    simulate(tr, p)
    assert np.all(p._c == 0.587)
    assert np.all(p._m == 1_238_659_775)


def test_requests_are_not_pinned_to_a_bound():
    tr = generate(100, 3, seed=0)
    r = simulate(tr, VPA(), record_vms=tuple(range(100)))
    a = r.alloc_cpu[288:]   # after the first day (confidence builds up over a day)
    assert np.mean(np.isclose(a, 0.025)) < 0.01
    assert np.mean(np.isclose(a, tr.cpu_request[None, :])) < 0.05
    assert len(np.unique(a[-1])) > 30  # on the 5%-apart bucket grid
