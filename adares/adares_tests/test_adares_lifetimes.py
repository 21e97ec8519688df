"""VM lifetimes (adares.lifetimes): the frozen Azure table is what the sampler draws from, and
the arrivals of a steady-state cluster follow from it."""

import numpy as np

from adares.lifetimes import arrival_mask, azure_lifetime_table, sample_lifetimes


def test_sampled_lifetimes_follow_the_table():
    hours, cdf = azure_lifetime_table()
    s = sample_lifetimes(np.random.default_rng(0), 200_000)
    for h, c in zip(hours[1:-1], cdf[1:-1]):
        assert abs((s <= h).mean() - c) < 0.005, h
    assert s.min() >= hours[0] - 1e-9 and s.max() <= hours[-1] + 1e-9


def test_arrivals_are_a_renewal_process_in_steady_state():
    t_steps, n = 2304, 2000
    m = arrival_mask(t_steps, n, seed=0)
    assert m.shape == (t_steps, n) and m.dtype == bool and not m[0].any()
    assert np.array_equal(m, arrival_mask(t_steps, n, seed=0))
    # Renewal theory: the long-run arrival rate per slot is 1 / the mean lifetime.
    u = (np.arange(200_000) + 0.5) / 200_000
    hours, cdf = azure_lifetime_table()
    mean_h = np.exp(np.interp(u, cdf, np.log(hours))).mean()
    rate = m.sum() / (n * t_steps / 12)
    assert abs(rate * mean_h - 1) < 0.1


import pytest  # noqa: E402

from adares.population import generate_population  # noqa: E402
from adares.replay import load_trace, replay  # noqa: E402
from adares.trace import GIB, Trace  # noqa: E402

POLICIES = ["threshold", "vpa", "autopilot", "predictive", "adares", "adares-nolearn"]


def _two_vms_one_arrival(t_steps=400, born=320):
    """VM 0 idles at 0.1 core / 1 GiB of a 4-core, 8-GiB flavor; in slot 1 a new VM arrives
    at step ``born``; both use the same, so only the arrival tells them apart."""
    cpu = np.full((t_steps, 2), 0.1)
    mem = np.full((t_steps, 2), 1.0 * GIB)
    arr = np.zeros((t_steps, 2), dtype=bool)
    arr[born, 1] = True
    return Trace(cpu, mem, np.full(2, 4.0), np.full(2, 8 * GIB), ("a", "b"), 300, 0.0,
                 arr).validate()


@pytest.mark.parametrize("name", POLICIES)
def test_a_new_vm_starts_at_its_flavor_and_is_not_a_resize(name):
    trace, born = _two_vms_one_arrival(), 320
    res = replay(trace, [name], record_vms=(0, 1))[name]
    same = replay(Trace(trace.cpu, trace.mem, trace.cpu_request, trace.mem_request,
                        trace.vm_ids, 300, 0.0), [name], record_vms=(0, 1))[name]
    c, m = res.alloc_cpu, res.alloc_mem
    assert c[born, 1] == 4.0 and m[born, 1] == 8 * GIB        # created at its flavor
    assert c[born - 1, 1] < 4.0                                # the slot had been shrunk
    # Until it has a period (12 steps) of its own usage, no policy sizes it from history
    # (the VPA by its own rule: its bounds are wide while its confidence is low).
    end = born + 2 if name == "vpa" else (born // 12 + 2) * 12
    assert np.all(c[born:end - 1, 1] == 4.0) and np.all(m[born:end - 1, 1] == 8 * GIB)
    # Every change of a VM's allocation is a resize, except the creation at step ``born``.
    req_c, req_m = trace.cpu_request[None, :], trace.mem_request[None, :]
    dc = np.diff(np.vstack([req_c, c]), axis=0) != 0
    dm = np.diff(np.vstack([req_m, m]), axis=0) != 0
    changed = dc | dm
    assert changed[born, 1]
    assert res.resizes == changed.sum() - 1
    if name != "adares":  # the bandit's one model learns from every VM
        assert np.array_equal(c[:, 0], same.alloc_cpu[:, 0])    # the other VM is untouched


def test_resource_central_sizes_a_new_vm_from_its_class_at_creation():
    trace, born = _two_vms_one_arrival(born=350), 350
    res = replay(trace, ["resource-central"], record_vms=(0, 1))["resource-central"]
    assert res.alloc_cpu[born, 1] == res.alloc_cpu[born, 0] < 4.0


def test_lifetimes_none_is_the_old_trace_and_azure_adds_arrivals():
    a = generate_population(30, 2, 1)
    b = load_trace("population:vms=30,days=2,seed=1,lifetimes=none")
    c = load_trace("population:vms=30,days=2,seed=1,lifetimes=azure")
    assert a.arrivals is None and b.arrivals is None and np.array_equal(a.cpu, b.cpu)
    assert c.arrivals is not None and c.arrivals.any()
    assert np.array_equal(c.cpu_request, a.cpu_request)
    # Before a slot's first arrival, its VM is the one of the trace without lifetimes.
    first = np.where(c.arrivals.any(axis=0), c.arrivals.argmax(axis=0), c.n_steps)
    for i in range(c.n_vms):
        assert np.array_equal(c.cpu[:first[i], i], a.cpu[:first[i], i])
