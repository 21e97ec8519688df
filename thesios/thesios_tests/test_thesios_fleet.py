"""Fleet generator (ground truth), HDD model, samplers and the synthesizer's merge."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from thesios.diskmodel import HDDModel
from thesios.errors import ThesiosInputError
from thesios.fleet import DAY_S, FleetGenerator, default_fleet
from thesios.samplers import bernoulli_sample
from thesios.identify import disk_features, identify, purity
from thesios.synth import synthesize


@pytest.fixture(scope="module")
def gen() -> FleetGenerator:
    return FleetGenerator(default_fleet(disks_per_class=30, days=2, seed=4))


def test_hdd_mean_service_time_matches_closed_form():
    hdd = HDDModel(rpm=5400)
    rng = np.random.default_rng(0)
    n = 400_000
    size, pos = 256 * 1024, 0.3
    s = hdd.service_time(np.full(n, size), np.full(n, pos), np.abs(rng.random(n) - rng.random(n)), rng.random(n))
    half = 4 * s.std() / np.sqrt(n)
    assert abs(s.mean() - hdd.mean_service_time(size, pos)) < half
    rot = hdd.rotation_time(rng.random(n))
    assert abs(rot.mean() - 30.0 / hdd.rpm) < 4 * rot.std() / np.sqrt(n)
    assert rot.max() < 60.0 / hdd.rpm


def test_full_trace_counts_and_diurnal_shape_match_the_intensity(gen):
    rng = np.random.default_rng(1)
    disks = np.array([0, 30, 60, 90])
    full = gen.generate(disks, 1, 1.0, rng)
    expected = gen.expected_requests(disks, 1)
    counts = np.bincount(full.disk_id, minlength=120)[disks]
    assert np.all(np.abs(counts - expected) < 4 * np.sqrt(expected))
    # Requests of the batch class (with its daily burst) fall in hours as the profile says.
    batch = full.take(full.disk_id == 30)
    hours = ((batch.start_time - DAY_S) // 3600).astype(int)
    cdf, _ = gen.profile(1, 1)
    per_min = np.diff(np.concatenate(([0.0], cdf)))
    per_hour = per_min.reshape(24, 60).sum(axis=1)
    observed = np.bincount(hours, minlength=24)
    assert stats.chisquare(observed, per_hour * observed.sum()).pvalue > 1e-3


def test_direct_sampling_equals_bernoulli_thinning_of_full_traces(gen):
    """Thinning theorem: a direct Poisson draw at rate p and Bernoulli(p) of the full trace agree."""
    p = 0.1
    disks = np.arange(30, 34)  # batch class
    direct = gen.generate(disks, 0, p, np.random.default_rng(2))
    thinned = bernoulli_sample(gen.generate(disks, 0, 1.0, np.random.default_rng(3)), p, np.random.default_rng(4))
    mu = p * gen.expected_requests(disks, 0).sum()
    assert abs(len(direct) - mu) < 4 * np.sqrt(mu)
    assert abs(len(thinned) - mu) < 4 * np.sqrt(mu)
    assert stats.ks_2samp(direct.start_time, thinned.start_time).pvalue > 1e-3
    assert stats.ks_2samp(direct.disk_time[direct.is_miss_read], thinned.disk_time[thinned.is_miss_read]).pvalue > 1e-3
    table = np.array([[direct.is_read.sum(), (~direct.is_read).sum()], [thinned.is_read.sum(), (~thinned.is_read).sum()]])
    assert stats.chi2_contingency(table).pvalue > 1e-3


def test_merged_sample_counts_match_sum_of_p_times_n(gen):
    p = 0.02
    rng = np.random.default_rng(5)
    members = np.arange(60, 90)  # archive class, both days: 60 disk-days >= 1/p = 50
    samples = gen.sample_fleet(p, rng, disk_ids=members)
    res = synthesize(samples, members, p, target_day=0, days=2)
    assert len(res.disk_days) == 50 and res.coverage == pytest.approx(1.0)
    day0 = res.disk_days[res.disk_days[:, 1] == 0, 0]
    day1 = res.disk_days[res.disk_days[:, 1] == 1, 0]
    assert len(day0) == 30 and len(day1) == 20  # same day first
    mu = p * (gen.expected_requests(day0, 0).sum() + gen.expected_requests(day1, 1).sum())
    assert abs(len(res.trace) - mu) < 4 * np.sqrt(mu)
    # Exactly the chosen disk-days' samples, folded onto day 0's clock and sorted.
    day_of = (samples.start_time // DAY_S).astype(int)
    chosen = {(int(d), int(k)) for d, k in res.disk_days}
    n_exact = sum((int(d), int(k)) in chosen for d, k in zip(samples.disk_id, day_of))
    assert len(res.trace) == n_exact
    assert res.trace.start_time.min() >= 0 and res.trace.start_time.max() < DAY_S
    assert np.all(np.diff(res.trace.start_time) >= 0)
    # Scaling (capacity what-if): twice the disk-days; too few exist, so coverage says so.
    big = synthesize(samples, members, p, days=2, scale=2.0)
    assert big.coverage == pytest.approx(60 * p)


def test_identification_recovers_classes_from_samples(gen):
    samples = gen.sample_fleet(0.01, np.random.default_rng(6))
    x = disk_features(samples, gen.spec.n_disks, gen.spec.days)
    grouping = identify(x, seed=0)
    assert grouping.k == 4
    assert purity(grouping.labels, gen.spec.disk_class(np.arange(gen.spec.n_disks))) == 1.0


def test_purity_on_hand_made_labels():
    assert purity(np.array([0, 0, 1, 1]), np.array([0, 1, 1, 1])) == 0.75
    assert purity(np.array([0, 1, 2, 3]), np.array([0, 0, 1, 1])) == 1.0


def test_generator_rejects_bad_arguments(gen):
    rng = np.random.default_rng(0)
    with pytest.raises(ThesiosInputError):
        gen.generate(np.array([0]), 0, 0.0, rng)
    with pytest.raises(ThesiosInputError):
        gen.generate(np.array([0]), 5, 0.1, rng)
    with pytest.raises(ThesiosInputError):
        gen.generate(np.array([10_000]), 0, 0.1, rng)


def test_per_disk_parameters_depend_on_the_seed_only():
    a = FleetGenerator(default_fleet(disks_per_class=5, days=1, seed=9))
    b = FleetGenerator(default_fleet(disks_per_class=5, days=1, seed=9))
    np.testing.assert_array_equal(a.rate_mult, b.rate_mult)
    assert a.rate_mult.std() > 0


def test_to_table_is_in_the_trace_schema(gen):
    from thesios.schema import THESIOS_SCHEMA

    req = gen.generate(np.array([0, 45]), 0, 0.001, np.random.default_rng(0))
    table = req.to_table(gen.applications)
    assert table.schema.names == [*THESIOS_SCHEMA.names, "disk_id"]
    assert table.num_rows == len(req)
    names = table.column("filename").to_pylist()
    assert names[0] == f"d{req.disk_id[0]}/f{req.file_id[0]}"


def _fleet_error(doc: dict) -> str:
    import json

    from thesios.fleet import fleet_from_json

    with pytest.raises(ThesiosInputError) as exc:
        fleet_from_json(json.dumps(doc), "f.json")
    return str(exc.value)


NAN = float("nan")


@pytest.mark.parametrize("change, message", [
    ({"read_fraction": "a"}, "classes[0] (serving): read_fraction must be a number in [0, 1], got 'a'"),
    ({"sizes": 4096}, "classes[0] (serving): sizes must be a non-empty list, got 4096"),
    ({"diurnal_amplitude": NAN}, "classes[0] (serving): diurnal_amplitude must be a number in [0, 1), got nan"),
    ({"peak_hour": NAN}, "classes[0] (serving): peak_hour must be a number in [0, 24), got nan"),
    ({"n_files": 1e12}, "classes[0] (serving): n_files must be an integer in [1, 1000000], got 1000000000000.0"),
    ({"rate": 1e12}, "classes[0] (serving): rate must be a number in (0, 1000], got 1000000000000.0"),
    ({"burst_hour": 99}, "classes[0] (serving): burst_hour must be a number in [0, 24), got 99"),
    ({"burst_minutes": -30}, "classes[0] (serving): burst_minutes must be a number in (0, 1440], got -30"),
    ({"burst_factor": -2}, "classes[0] (serving): burst_factor must be a number in (0, 100], got -2"),
    ({"rate_sigma": -1}, "classes[0] (serving): rate_sigma must be a number in [0, 5], got -1"),
    ({"zipf_s": -3}, "classes[0] (serving): zipf_s must be a number in [0, 10], got -3"),
    ({"read_jitter": NAN}, "classes[0] (serving): read_jitter must be a number in [0, 1], got nan"),
    ({"name": None}, "classes[0]: name must be a non-empty string, got None"),
    ({"rate": True}, "classes[0] (serving): rate must be a number in (0, 1000], got True"),
    # JSON integers have any number of digits; one beyond a float's range was an OverflowError traceback
    ({"rate": 10**400}, "classes[0] (serving): rate must be a number in (0, 1000], got an integer of 401 digits"),
])
def test_fleet_file_fields_are_checked_for_type_finiteness_and_range(change, message):
    import dataclasses

    from thesios.fleet import DEFAULT_CLASSES

    assert _fleet_error({"classes": [dataclasses.asdict(DEFAULT_CLASSES[0]) | change]}) == f"f.json: {message}"


@pytest.mark.parametrize("doc, message", [
    ({"hdd": {"rpm": "x"}}, "hdd: rpm must be a number in (0, 30000], got 'x'"),
    ({"hdd": {"rpm": NAN}}, "hdd: rpm must be a number in (0, 30000], got nan"),
    ({"disks_per_class": 1e9}, "disks_per_class must be an integer in [2, 100000], got 1000000000.0"),
    ({"days": 100000}, "days must be an integer in [1, 31], got 100000"),
    ({"seed": -5}, "seed must be an integer in [0, 4294967295], got -5"),
    ({"seed": 10**400}, "seed must be an integer in [0, 4294967295], got an integer of 401 digits"),
    ({"days": -10**400}, "days must be an integer in [1, 31], got a negative integer of 401 digits"),
])
def test_fleet_file_top_level_and_hdd_fields_are_bounded(doc, message):
    assert _fleet_error(doc) == f"f.json: {message}"


def test_fleet_file_with_an_integer_beyond_pythons_digit_limit_is_one_line():
    # json.loads raised ValueError (not JSONDecodeError) past CPython's 4300 digits: a traceback
    from thesios.fleet import fleet_from_json

    with pytest.raises(ThesiosInputError) as exc:
        fleet_from_json('{"seed": 1' + "0" * 5000 + "}", "f.json")
    assert str(exc.value) == "f.json: a number of more than 4300 digits"


def test_fleet_file_refuses_two_classes_of_one_name_and_round_trips_the_default():
    import dataclasses
    import json

    from thesios.fleet import DEFAULT_CLASSES, fleet_from_json

    one = dataclasses.asdict(DEFAULT_CLASSES[0])
    assert _fleet_error({"classes": [one, one]}) == "f.json: two classes are named 'serving'; names must differ"
    doc = {"classes": [dataclasses.asdict(c) for c in DEFAULT_CLASSES], "hdd": dataclasses.asdict(HDDModel())}
    assert fleet_from_json(json.dumps(doc)).classes == DEFAULT_CLASSES
