"""Heterogeneous populations: the kinds' shares and shapes as CALIBRATION sets them, seeded,
loadable by spec; the trace carries no kind."""

import numpy as np
import pytest

from adares.errors import InputError
from adares.population import CALIBRATION, generate_population, population_kinds
from adares.replay import load_trace, planned_size


def test_mix_and_shapes_follow_the_calibration():
    tr = generate_population(400, 3, seed=2)
    kind = population_kinds(400, seed=2)
    for k, share in CALIBRATION["mix"].items():
        assert abs(np.mean(kind == k) - share) < 0.06, k
    util = tr.cpu / tr.cpu_request
    mem = tr.mem / tr.mem_request
    # batch: long idle stretches and near-full episodes; steady: flat CPU, high memory
    batch, steady, idle = kind == "batch", kind == "steady", kind == "idle"
    assert np.median(np.quantile(util[:, batch], 0.95, axis=0)) > 0.5
    assert np.median(util[:, batch], axis=0).mean() < 0.1
    cv = util.std(axis=0) / util.mean(axis=0)
    assert cv[steady].mean() < cv[batch].mean() / 3
    assert mem[:, steady].mean() > mem[:, idle].mean() + 0.3
    assert set(np.unique(tr.cpu_request)) <= set(CALIBRATION["cores"][0])
    assert (tr.cpu <= tr.cpu_request[None, :] + 1e-9).all()   # a VM uses at most its flavor


def test_seeded_and_loadable_by_spec():
    a = load_trace("population:vms=20,days=1,seed=3")
    b = generate_population(20, 1, seed=3)
    assert np.array_equal(a.cpu, b.cpu) and np.array_equal(a.mem, b.mem)
    assert not np.array_equal(a.cpu, generate_population(20, 1, seed=4).cpu)
    assert planned_size("population:vms=20,days=1") == (20, 288)
    with pytest.raises(InputError):
        load_trace("population:vms=0")


def test_an_empty_synthetic_spec_names_its_key():
    # the message named the generator's parameter n_vms, not the spec's key vms
    with pytest.raises(InputError, match=r"synthetic: needs at least 1 VM \(vms=\) and 2 steps, "
                                         r"got 0 VMs"):
        load_trace("synthetic:vms=0")
