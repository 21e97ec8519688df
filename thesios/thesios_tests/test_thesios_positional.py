"""The order-dependent disk: known answers by hand, and SimPy where SimPy can model it."""

from __future__ import annotations

import math

import numpy as np
import pytest
import simpy

from thesios.diskmodel import HDDModel
from thesios.errors import ThesiosInputError
from thesios.positional import PositionalDisk, serve

HDD = HDDModel(rpm=6000.0, seek_min_s=0.001, seek_max_s=0.011, outer_rate_bps=100e6, inner_rate_bps=100e6)
DISK = PositionalDisk(hdd=HDD, capacity_bytes=1_000_000_000, track_bytes=1_000_000)  # one revolution: 10 ms
GB = 1_000_000_000


def test_service_by_hand():
    # Head at 0, target at the middle (d = 0.5), its sector at angle 0.25, 1 MB at 100 MB/s.
    svc, pos = DISK.service(0.0, 0.0, GB // 2 + 250_000, 1_000_000)
    seek = 0.001 + 0.010 * math.sqrt(0.5 + 250_000 / GB)
    phase = (seek / 0.010) % 1.0
    assert pos == pytest.approx(0.5 + 250_000 / GB)
    assert svc == pytest.approx(seek + ((0.25 - phase) % 1.0) * 0.010 + 0.010)
    # The same LBA again right after: no seek, a full turn minus the transfer's... by hand:
    svc2, _ = DISK.service(0.0, pos, GB // 2 + 250_000, 0)
    assert svc2 == pytest.approx(((0.25 - 0.0) % 1.0) * 0.010)


def test_fifo_by_hand_two_requests_queue_behind_each_other():
    sched = serve(np.array([0.0, 0.001]), np.array([0, 500_000]), np.array([0, 0]), np.array([False, False]), DISK)
    # First: at LBA 0, angle 0, phase 0: zero service. Second arrives at 1 ms: same track (d = 5e-4).
    assert sched.finish[0] == 0.0
    seek = 0.001 + 0.010 * math.sqrt(500_000 / GB)
    phase = ((0.001 + seek) / 0.010) % 1.0
    assert sched.finish[1] == pytest.approx(0.001 + seek + ((0.5 - phase) % 1.0) * 0.010)
    assert sched.busy_s == pytest.approx(sched.finish[1] - 0.001)


def _order(sched) -> list[int]:
    return list(np.argsort(sched.start[1:], kind="stable") + 1)


def test_elevator_serves_ahead_of_the_head_then_turns():
    # Request 0 keeps the disk busy at LBA 50%; 1-4 wait at 10%, 60%, 90%, 40%; head moving up.
    lba = np.array([50, 10, 60, 90, 40]) * GB // 100
    a = np.array([0.0, 0.0001, 0.0002, 0.0003, 0.0004])
    size = np.array([20_000_000, 4096, 4096, 4096, 4096])  # request 0 takes 200 ms of transfer
    fifo = serve(a, lba, size, np.zeros(5, bool), DISK, "fifo")
    look = serve(a, lba, size, np.zeros(5, bool), DISK, "elevator")
    assert _order(fifo) == [1, 2, 3, 4]
    assert _order(look) == [2, 3, 4, 1]  # 60, 90, then down: 40, 10


def test_elevator_and_deadline_cut_mean_latency_under_load_where_fifo_cannot():
    rng = np.random.default_rng(3)
    n = 3000
    a = np.cumsum(rng.exponential(0.0105, n))  # near saturation for random 4 KiB reads
    lba, size = rng.integers(0, GB, n), np.full(n, 4096)
    mean = {s: serve(a, lba, size, np.zeros(n, bool), DISK, s).latency.mean() for s in ("fifo", "elevator", "deadline")}
    assert mean["elevator"] < 0.8 * mean["fifo"] and mean["deadline"] < mean["fifo"]


def test_deadline_serves_an_expired_request_first():
    lba = np.array([50, 10, 60, 55]) * GB // 100
    a = np.array([0.0, 0.0001, 0.05, 0.06])
    size = np.array([20_000_000, 4096, 4096, 4096])
    look = serve(a, lba, size, np.zeros(4, bool), DISK, "elevator")
    late = serve(a, lba, size, np.zeros(4, bool), PositionalDisk(HDD, GB, 1_000_000, read_expire_s=0.18), "deadline")
    assert _order(look) == [3, 2, 1]  # 55, 60, then 10
    assert _order(late) == [1, 3, 2]  # 10 waited 210 ms > 180 ms: first; then elevator from 10: 55, 60


def test_priority_serves_the_lower_class_first():
    lba = np.array([0, 10, 20, 30]) * GB // 100
    a = np.array([0.0, 0.0001, 0.0002, 0.0003])
    size = np.array([20_000_000, 4096, 4096, 4096])
    sched = serve(a, lba, size, np.zeros(4, bool), DISK, "priority", priority=np.array([0, 2, 1, 0]))
    assert _order(sched) == [3, 2, 1]


def test_write_back_absorbs_writes_and_destages_them_on_the_disk():
    a = np.arange(10) * 0.1  # one write every 100 ms, 1 MB each
    lba = np.arange(10) * 50_000_000
    size = np.full(10, 1_000_000)
    w = np.ones(10, bool)
    through = serve(a, lba, size, w, DISK)
    back = serve(a, lba, size, w, PositionalDisk(HDD, GB, 1_000_000, write_cache_bytes=64_000_000))
    assert not through.absorbed.any() and (through.latency >= 0.009).all()
    assert back.absorbed.all() and (back.latency == 0).all() and back.destages == 10
    assert back.busy_s == pytest.approx(through.busy_s, rel=0.5)  # the disk still does the work
    # A full cache (2 MB for 1 MB writes arriving together) destages first: writes wait again.
    burst = serve(np.zeros(6), lba[:6], size[:6], w[:6], PositionalDisk(HDD, GB, 1_000_000, write_cache_bytes=2_000_000))
    assert burst.absorbed.sum() == 2 and (burst.latency[~burst.absorbed] > 0).all()


def simpy_positional(a, lba, size, disk, prio=None):
    """The same disk in SimPy: a (priority) resource of capacity 1, service computed when granted."""
    env = simpy.Environment()
    res = simpy.PriorityResource(env, capacity=1)
    state = {"head": 0.0}
    n = len(a)
    start, finish = np.zeros(n), np.zeros(n)

    def request(i):
        with res.request(priority=0 if prio is None else int(prio[i])) as req:
            yield req
            start[i] = env.now
            svc, state["head"] = disk.service(env.now, state["head"], int(lba[i]), int(size[i]))
            yield env.timeout(svc)
            finish[i] = env.now

    def source():
        for i in range(n):
            yield env.timeout(a[i] - env.now)
            env.process(request(i))

    env.process(source())
    env.run()
    return start, finish


@pytest.mark.parametrize("scheduler", ["fifo", "priority"])
def test_equals_simpy_where_simpy_can_model_it(scheduler):
    rng = np.random.default_rng(7)
    n = 400
    a = np.cumsum(rng.exponential(0.012, n))  # ~70% busy: queues form
    lba = rng.integers(0, GB, n)
    size = rng.choice([4096, 65536, 262144], n)
    prio = rng.integers(0, 3, n) if scheduler == "priority" else None
    sched = serve(a, lba, size, np.zeros(n, bool), DISK, scheduler, priority=prio)
    s_start, s_finish = simpy_positional(a, lba, size, DISK, prio)
    np.testing.assert_allclose(sched.start, s_start, rtol=0, atol=1e-9)
    np.testing.assert_allclose(sched.finish, s_finish, rtol=0, atol=1e-9)
    assert (sched.start[1:] >= a[1:]).all()


def test_bad_arguments():
    with pytest.raises(ThesiosInputError, match="unknown scheduler 'cfq'"):
        serve(np.zeros(1), np.zeros(1), np.zeros(1), np.zeros(1, bool), DISK, "cfq")
    with pytest.raises(ThesiosInputError, match="sorted"):
        serve(np.array([1.0, 0.0]), np.zeros(2), np.zeros(2), np.zeros(2, bool), DISK)


def test_disk_what_if_parses_and_serves_a_trace_on_the_positional_disk():
    from pathlib import Path

    from thesios.cli import _load_trace
    from thesios.scenarios import parse_scenario, run_trace_scenarios

    sc = parse_scenario("disk:elevator,writeback=64MiB")
    assert (sc.kind, sc.scheduler, sc.cache_bytes) == ("disk", "elevator", 64 << 20)
    for bad, msg in [("disk:cfq", "scheduler must be one of fifo, elevator, deadline, priority"),
                     ("disk:fifo,writeback=lots", "expected writeback=SIZE like 64MiB")]:
        with pytest.raises(ThesiosInputError, match=msg):
            parse_scenario(bad)
    trace = _load_trace(Path(__file__).parent / "fixtures" / "thesios_shard.csv")
    doc = run_trace_scenarios(trace, [parse_scenario("disk:fifo"), parse_scenario("disk:fifo,writeback=64MiB")])
    fifo, back = doc["scenarios"]["disk:fifo"], doc["scenarios"]["disk:fifo,writeback=64MiB"]
    # The same reads and writes on the same disk: the write-back disk does the same work (destages),
    # so its utilization is the same to within the rotational phases the destage order shifts.
    assert fifo["destages"] == 0 and back["destages"] == int((~trace.is_read).sum())
    assert back["utilization"] == pytest.approx(fifo["utilization"], rel=0.5)
    assert 0 < fifo["read_latency_p50_s"] < 0.1


def test_spin_down_by_hand_and_as_a_what_if():
    a, lba, size, w = np.array([0.0, 20.0, 100.0]), np.zeros(3, np.int64), np.zeros(3, np.int64), np.zeros(3, bool)
    sleepy = PositionalDisk(HDD, GB, 1_000_000, spindown_s=30.0, spinup_s=10.0)
    sched = serve(a, lba, size, w, sleepy)
    # 0 -> 20 s idle: still spinning; 20 -> 100 s idle: spun down, the third waits 10 s first.
    assert sched.spin_ups == 1
    assert sched.finish[1] == pytest.approx(20.0 + DISK.service(20.0, 0.0, 0, 0)[0])
    assert sched.finish[2] == pytest.approx(110.0 + DISK.service(110.0, 0.0, 0, 0)[0])
    from thesios.scenarios import parse_scenario

    sc = parse_scenario("disk:fifo,spindown=5m,zone=COLD")
    assert (sc.timeout_s, sc.zone) == (300.0, "COLD")
    with pytest.raises(ThesiosInputError, match="spindown"):
        parse_scenario("disk:fifo,spindown=soon")
