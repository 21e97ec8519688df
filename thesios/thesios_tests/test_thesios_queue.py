"""The reorganizer's vectorized FIFO queue against a per-request loop, SimPy and M/G/1 theory."""

from __future__ import annotations

import numpy as np
import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from thesios.errors import ThesiosInputError
from thesios.reorganizer import fifo_schedule, fifo_schedule_loop, reorganize, to_ns
from thesios.validate import busy_time_until


def simpy_fifo(arrival_ns: np.ndarray, service_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The same queue as a SimPy discrete-event simulation with integer clock (ns)."""
    env = simpy.Environment()
    disk = simpy.Resource(env, capacity=1)
    n = len(arrival_ns)
    start = np.zeros(n, dtype=np.int64)
    finish = np.zeros(n, dtype=np.int64)

    def request(i: int):
        with disk.request() as req:
            yield req
            start[i] = env.now
            yield env.timeout(int(service_ns[i]))
            finish[i] = env.now

    def source():
        for i in range(n):
            yield env.timeout(int(arrival_ns[i]) - env.now)
            env.process(request(i))

    env.process(source())
    env.run()
    return start, finish


arrays = st.integers(min_value=0, max_value=60).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(0, 50_000), min_size=n, max_size=n),
        st.lists(st.integers(0, 20_000), min_size=n, max_size=n),
    )
)


@settings(max_examples=150, deadline=None)
@given(arrays)
def test_vectorized_queue_equals_loop_and_simpy_exactly(data):
    gaps, service = data
    arrival = np.cumsum(np.array(gaps, dtype=np.int64))  # ties (gap 0) included
    service = np.array(service, dtype=np.int64)
    start, finish = fifo_schedule(arrival, service)
    l_start, l_finish = fifo_schedule_loop(arrival, service)
    s_start, s_finish = simpy_fifo(arrival, service)
    np.testing.assert_array_equal(start, l_start)
    np.testing.assert_array_equal(finish, l_finish)
    np.testing.assert_array_equal(start, s_start)
    np.testing.assert_array_equal(finish, s_finish)


def test_queue_equals_simpy_on_a_large_hdd_like_input():
    rng = np.random.default_rng(3)
    arrival = to_ns(np.cumsum(rng.exponential(0.012, 20_000)))
    service = to_ns(rng.uniform(0.002, 0.02, 20_000))
    start, finish = fifo_schedule(arrival, service)
    s_start, s_finish = simpy_fifo(arrival, service)
    np.testing.assert_array_equal(start, s_start)
    np.testing.assert_array_equal(finish, s_finish)


def test_mean_wait_matches_pollaczek_khinchine():
    """M/G/1: W_q = lambda E[S^2] / (2 (1 - rho)); 30 independent replications give a 99% CI."""
    lam, lo, hi = 60.0, 0.004, 0.016  # uniform service: E[S] = 0.01, rho = 0.6
    es, es2 = (lo + hi) / 2, (lo * lo + lo * hi + hi * hi) / 3
    rho = lam * es
    theory = lam * es2 / (2 * (1 - rho))
    rng = np.random.default_rng(11)
    means = []
    for _ in range(30):
        n = 40_000
        arrival = to_ns(np.cumsum(rng.exponential(1 / lam, n)))
        service = to_ns(rng.uniform(lo, hi, n))
        start, _ = fifo_schedule(arrival, service)
        wait = (start - arrival)[2000:] / 1e9  # drop the warm-up from an empty queue
        means.append(wait.mean())
    means = np.array(means)
    half = stats.t.ppf(0.995, len(means) - 1) * means.std(ddof=1) / np.sqrt(len(means))
    assert abs(means.mean() - theory) <= half, (means.mean(), theory, half)
    assert half < 0.05 * theory  # the interval is tight enough to mean something


def test_utilization_equals_total_service_over_the_window():
    rng = np.random.default_rng(5)
    arrival_s = np.sort(rng.uniform(0, 3000, 5000))
    service_s = rng.uniform(0.001, 0.03, 5000)
    start, finish = fifo_schedule(to_ns(arrival_s), to_ns(service_s))
    busy = busy_time_until(start / 1e9, finish / 1e9, np.array([0.0, 1e6]))
    assert np.diff(busy)[0] == pytest.approx(to_ns(service_s).sum() / 1e9, rel=1e-12)
    # Partial windows: busy time at T counts the part of the job in service at T.
    edges = np.array([start[10] / 1e9 + 0.0005])
    expected = (to_ns(service_s)[:10].sum()) / 1e9 + 0.0005
    assert busy_time_until(start / 1e9, finish / 1e9, edges)[0] == pytest.approx(expected, rel=1e-9)


def test_bad_queue_inputs_raise():
    with pytest.raises(ThesiosInputError):
        fifo_schedule(np.array([2, 1]), np.array([1, 1]))
    with pytest.raises(ThesiosInputError):
        fifo_schedule(np.array([1, 2]), np.array([1, -1]))
    with pytest.raises(ThesiosInputError):
        fifo_schedule(np.array([1.0, 2.0]), np.array([1.0, 1.0]))


def test_reorganize_serves_only_miss_reads_in_arrival_order():
    from thesios.fleet import FleetGenerator, default_fleet

    gen = FleetGenerator(default_fleet(disks_per_class=2, days=1))
    req = gen.generate(np.array([1]), 0, 0.01, np.random.default_rng(1))  # unsorted on purpose
    arrival, start, latency = reorganize(req)
    assert len(arrival) == req.is_miss_read.sum()
    assert np.all(np.diff(arrival) >= 0)
    assert np.all(start >= arrival - 1e-9)
    assert np.all(latency >= np.sort(req.disk_time[req.is_miss_read]).min() - 1e-9)


def simpy_priority(arrival_ns, service_ns, priority):
    """Non-preemptive priority queue in SimPy (PriorityResource)."""
    env = simpy.Environment()
    disk = simpy.PriorityResource(env, capacity=1)
    n = len(arrival_ns)
    start = np.zeros(n, dtype=np.int64)

    def request(i: int):
        with disk.request(priority=int(priority[i])) as req:
            yield req
            start[i] = env.now
            yield env.timeout(int(service_ns[i]))

    def source():
        for i in range(n):
            yield env.timeout(int(arrival_ns[i]) - env.now)
            env.process(request(i))

    env.process(source())
    env.run()
    return start


@pytest.mark.parametrize("seed", range(5))
def test_priority_queue_equals_simpy(seed):
    from thesios.reorganizer import priority_schedule

    rng = np.random.default_rng(seed)
    n = 3000
    # times drawn from a wide range: no arrival coincides with a departure (SimPy orders such
    # simultaneous events by scheduling, which is not a queueing rule)
    arrival = np.cumsum(rng.integers(1, 20_000_000, n))
    service = rng.integers(1_000_000, 25_000_000, n)
    prio = rng.integers(0, 3, n)
    start, finish = priority_schedule(arrival, service, prio)
    np.testing.assert_array_equal(start, simpy_priority(arrival, service, prio))
    assert np.all(start >= arrival)
    np.testing.assert_array_equal(finish, start + service)
    # one class only: priority scheduling is FIFO
    same = priority_schedule(arrival, service, np.zeros(n, dtype=np.int64))[0]
    np.testing.assert_array_equal(same, fifo_schedule(arrival, service)[0])
    # latency-sensitive requests wait less on average than the others
    wait = start - arrival
    assert wait[prio == 0].mean() < wait[prio == 2].mean()


def test_reorganize_priority_discipline():
    from thesios.fleet import FleetGenerator, default_fleet

    gen = FleetGenerator(default_fleet(disks_per_class=2, days=1))
    req = gen.generate(np.array([2, 3]), 0, 0.3, np.random.default_rng(8))
    a_f, _, l_f = reorganize(req, "fifo")
    a_p, _, l_p = reorganize(req, "priority")
    np.testing.assert_array_equal(a_f, a_p)
    # Both disciplines are work-conserving: same busy periods, so the same last completion.
    assert (a_f + l_f).max() == pytest.approx((a_p + l_p).max(), abs=1e-9)
    with pytest.raises(ThesiosInputError):
        reorganize(req, "lifo")
