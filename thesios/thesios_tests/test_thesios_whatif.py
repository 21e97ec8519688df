"""What-ifs: RPM scaling, spin-down energy closed form, LRU (cachetools) against Belady."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thesios.errors import ThesiosInputError
from thesios.fleet import FleetGenerator, default_fleet
from thesios.whatif import (
    PowerModel,
    belady_misses,
    block_keys,
    idle_gaps,
    lru_misses,
    next_use,
    rpm_whatif,
    spin_down_energy,
)


@pytest.fixture(scope="module")
def trace():
    gen = FleetGenerator(default_fleet(disks_per_class=2, days=1))
    return gen.generate(np.array([0, 2]), 0, 0.02, np.random.default_rng(0)).sorted_by_time()


def test_rpm_whatif_scales_the_rotational_part_exactly(trace):
    slow = rpm_whatif(trace, 7200, 5400, scale_transfer=False)
    miss = trace.is_miss_read
    np.testing.assert_allclose(slow.rotation_time[miss], trace.rotation_time[miss] * 7200 / 5400, rtol=1e-15)
    np.testing.assert_allclose(slow.disk_time - trace.disk_time, (7200 / 5400 - 1) * trace.rotation_time, atol=1e-15)
    assert np.all(slow.disk_time[~miss] == 0)
    # Mean rotation goes from 30/7200 s to 30/5400 s.
    assert slow.rotation_time[miss].mean() == pytest.approx(30 / 5400, rel=0.05)
    both = rpm_whatif(trace, 7200, 5400)
    seek = trace.disk_time - trace.rotation_time - trace.transfer_time
    np.testing.assert_allclose(both.disk_time[miss], seek[miss] + (trace.rotation_time + trace.transfer_time)[miss] * 4 / 3, rtol=1e-12)
    with pytest.raises(ThesiosInputError):
        rpm_whatif(trace, 7200, 0)


def test_spin_down_energy_closed_form_on_hand_made_gaps():
    pm = PowerModel(active_w=8, idle_w=5, standby_w=1, spinup_j=40, spinup_s=8)
    assert pm.break_even_s == 10.0
    gaps = np.array([5.0, 30.0, 100.0, 20.0])
    res = spin_down_energy(gaps, timeout_s=20.0, power=pm)
    # 5 -> 25; 30 -> 5*20 + 1*10 + 40 = 150; 100 -> 100 + 80 + 40 = 220; 20 (not beyond) -> 100
    assert res.energy_j == 25 + 150 + 220 + 100
    assert res.always_on_j == 5 * 155
    assert res.spin_ups == 2 and res.added_latency_s == 16
    # Timeout 0 saves energy iff every gap exceeds the break-even time.
    assert spin_down_energy(np.array([11.0, 50.0]), 0.0, pm).saving > 0
    assert spin_down_energy(np.array([9.0, 5.0]), 0.0, pm).saving < 0
    with pytest.raises(ThesiosInputError):
        spin_down_energy(np.array([-1.0]), 1.0, pm)


def test_idle_gaps_of_a_schedule():
    start = np.array([1.0, 3.0, 3.5])
    finish = np.array([2.0, 3.5, 4.0])
    np.testing.assert_allclose(idle_gaps(start, finish, (0.0, 10.0)), [1.0, 1.0, 6.0])


def test_belady_and_lru_on_a_hand_made_sequence():
    keys = np.array([1, 2, 3, 1, 2, 4, 1, 2, 3, 4])
    # capacity 3. LRU: 1m 2m 3m 1h 2h 4m(evict 3) 1h 2h 3m(evict 4) 4m(evict 1) -> 6 misses
    assert lru_misses(keys, 3).sum() == 6
    # MIN: 1m 2m 3m 1h 2h 4m(evict 3: next use 8 vs 1@6, 2@7) 1h 2h 3m(evict 1 or 2) 4h -> 5 misses
    assert belady_misses(keys, 3).sum() == 5
    np.testing.assert_array_equal(next_use(keys), [3, 4, 8, 6, 7, 9, 10, 10, 10, 10])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 12), min_size=1, max_size=80), st.integers(1, 8))
def test_lru_misses_at_least_belady(seq, capacity):
    keys = np.array(seq, dtype=np.int64)
    lru = lru_misses(keys, capacity).sum()
    opt = belady_misses(keys, capacity).sum()
    distinct = len(set(seq))
    assert distinct <= opt <= lru  # first accesses always miss; MIN is optimal
    if capacity >= distinct:
        assert opt == lru == distinct


def test_block_keys_expand_requests(trace):
    trace = trace.take(np.arange(400))
    keys, req = block_keys(trace)
    n_blocks = np.bincount(req, minlength=len(trace))
    expected = (trace.file_offset + trace.size + 4095) // 4096 - trace.file_offset // 4096
    np.testing.assert_array_equal(n_blocks, expected)
    assert len(np.unique(keys[req == 0])) == n_blocks[0]
    lru = lru_misses(keys, 500).sum()
    assert belady_misses(keys, 500).sum() <= lru <= len(keys)


def test_spin_down_with_spinup_feedback_closed_form_on_hand_made_gaps():
    from thesios.reorganizer import fifo_schedule
    from thesios.whatif import spin_down_schedule

    S = 10**9
    a = np.array([0, 400, 405, 1000, 1305, 1316]) * S
    s = np.array([0, 2, 0, 0, 0, 0]) * S  # a 2 s read, instant writes
    sched = spin_down_schedule(a, s, 300 * S, 10 * S, (0, 2000 * S))
    # 400: idle 400 s > 300 -> spun down, waits the 10 s spin-up, done at 412; 405 queues behind
    # it until 412; 1000: idle 588 s -> spin-up, done at 1010; 1305: idle 295 s only, because the
    # spin-up delayed the previous finish (the always-spinning schedule sees 305 s: a spin-up).
    np.testing.assert_array_equal(sched.finish_ns, np.array([0, 412, 412, 1010, 1305, 1316]) * S)
    np.testing.assert_array_equal(sched.start_ns, np.array([0, 410, 412, 1010, 1305, 1316]) * S)
    np.testing.assert_array_equal(sched.spun_up, [False, True, False, True, False, False])
    np.testing.assert_array_equal(sched.gaps_ns, np.array([400, 588, 295, 11, 684]) * S)
    _, base_finish = fifo_schedule(a, s)
    added = (sched.finish_ns - base_finish) / S
    np.testing.assert_array_equal(added, [0, 10, 7, 10, 0, 0])  # 27 s in all
    pm = PowerModel()  # 5.5 W idle, 0.8 W standby, 120 J spin-up
    res = spin_down_energy(sched.gaps_ns / S, 300.0, pm)
    down = [400, 588, 684]
    closed = sum(5.5 * 300 + 0.8 * (g - 300) + 120 for g in down) + 5.5 * (295 + 11)
    assert res.energy_j == pytest.approx(closed) == pytest.approx(7610.6)
    assert res.always_on_j == pytest.approx(5.5 * 1978) and res.spin_ups == 3
    # The first-order view of the always-spinning gaps (400, 595, 305, 11, 684) counts 4.
    assert spin_down_energy(np.array([400, 595, 305, 11, 684.0]), 300.0, pm).spin_ups == 4
    with pytest.raises(ThesiosInputError):
        spin_down_schedule(a, s, -1, 0, (0, 1))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 8)), min_size=1, max_size=40),
       st.integers(0, 20), st.integers(0, 15))
def test_spin_down_schedule_equals_a_per_request_loop(reqs, timeout, spinup):
    from thesios.whatif import spin_down_schedule, spin_down_schedule_loop

    a = np.cumsum([r[0] for r in reqs]).astype(np.int64)
    s = np.array([r[1] for r in reqs], np.int64)
    sched = spin_down_schedule(a, s, timeout, spinup, (0, int(a[-1] + 100)))
    start, finish, down = spin_down_schedule_loop(a, s, timeout, spinup, 0)
    np.testing.assert_array_equal(sched.start_ns, start)
    np.testing.assert_array_equal(sched.finish_ns, finish)
    np.testing.assert_array_equal(sched.spun_up, down)
