"""(class, day) partitions: the same bits in any order, across a process boundary, and on Ray."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path

import numpy as np
import pytest

from thesios.cli import main
from thesios.fleet import DEFAULT_CLASSES, FleetSpec
from thesios.partitions import LocalBackend, partitions, sample_fleet, sample_partition
from thesios.requests import Requests
from thesios.validate import validate

SHARD = Path(__file__).parent / "fixtures" / "thesios_shard.csv"


class ReversedPickledBackend:
    """Runs the items last to first, each on pickled copies of its arguments, and hands back
    pickled copies of the results: what a cluster may do (another order, another process's copy)."""

    name = "reversed"

    def map(self, fn, items, shared=()):
        out = {}
        for i in reversed(range(len(items))):
            args = pickle.loads(pickle.dumps((*shared, *items[i])))
            out[i] = pickle.loads(pickle.dumps(fn(*args)))
        return [out[i] for i in range(len(items))]

    def close(self):
        pass


def _light_spec(disks_per_class: int = 16, days: int = 2) -> FleetSpec:
    classes = tuple(dataclasses.replace(c, rate=c.rate / 100) for c in DEFAULT_CLASSES)
    return FleetSpec(classes, disks_per_class=disks_per_class, days=days, seed=3)


def _assert_same_requests(a: Requests, b: Requests) -> None:
    for f in dataclasses.fields(Requests):
        np.testing.assert_array_equal(getattr(a, f.name), getattr(b, f.name), err_msg=f.name)


def _assert_same_validation(a, b) -> None:
    assert a.accuracy == b.accuracy and a.per_disk == b.per_disk
    assert (a.purity, a.groups, a.coverage, a.sampled_requests) == (b.purity, b.groups, b.coverage, b.sampled_requests)
    for disk in a.series:
        for kind in ("real", "synth"):
            for name, arr in a.series[disk][kind].items():
                np.testing.assert_array_equal(arr, b.series[disk][kind][name], err_msg=f"{disk} {kind} {name}")


def test_partitions_cover_every_disk_day_once_and_hold_only_their_class_and_day():
    spec = _light_spec()
    parts = partitions(spec)
    assert parts == [(c, d) for d in range(2) for c in range(4)]
    samples = sample_fleet(spec, 0.5, seed=1)
    n = 0
    for c, d in parts:
        part = sample_partition(spec, 0.5, 1, c, d)
        assert (spec.disk_class(part.disk_id) == c).all()
        assert ((part.start_time >= d * 86400.0) & (part.start_time < (d + 1) * 86400.0)).all()
        n += len(part)
    assert n == len(samples)


def test_sampling_and_validation_give_the_same_bits_in_reverse_order_on_pickled_copies():
    spec = _light_spec()
    _assert_same_requests(sample_fleet(spec, 0.5, 1), sample_fleet(spec, 0.5, 1, ReversedPickledBackend()))
    local = validate(spec, rate=0.1, seed=3, held_out_per_class=1)
    other = validate(spec, rate=0.1, seed=3, held_out_per_class=1, backend=ReversedPickledBackend())
    _assert_same_validation(local, other)
    assert local.groups == 4 and local.purity == 1.0


def test_cli_refuses_an_unknown_backend_or_a_backend_with_a_trace_in_one_line(capsys):
    for args, msg in [
        (["validate", "--backend", "spark"], "--backend must be one of local, ray, got 'spark'"),
        (["whatif", str(SHARD), "-s", "rpm:5400", "--backend", "ray"], "--backend: only for the embedded fleet, not with a TRACE"),
    ]:
        with pytest.raises(SystemExit) as exc:
            main(args)
        assert exc.value.code == 2
        assert capsys.readouterr().err.splitlines() == [f"thesios: error: {msg}"]


@pytest.mark.slow
def test_ray_run_equals_the_local_run_bit_for_bit():
    ray = pytest.importorskip("ray")
    from thesios.partitions import RayBackend
    from thesios.scenarios import parse_scenario, run_scenarios

    spec = _light_spec()
    local = validate(spec, rate=0.1, seed=3, held_out_per_class=1, backend=LocalBackend())
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        backend = RayBackend()  # joins the instance started above
        _assert_same_validation(local, validate(spec, rate=0.1, seed=3, held_out_per_class=1, backend=backend))
        scenarios = [parse_scenario("rpm:5400"), parse_scenario("capacity:x2")]
        assert run_scenarios(spec, 0.1, scenarios, seed=3, backend=backend) == run_scenarios(spec, 0.1, scenarios, seed=3)
    finally:
        ray.shutdown()
