"""Validation metrics, the accuracy definition, and `thesios validate` end to end."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from thesios.cli import main
from thesios.fleet import DEFAULT_CLASSES, FleetGenerator, FleetSpec, default_fleet
from thesios.reorganizer import fifo_schedule, to_ns
from thesios.validate import METRICS, PAPER_BANDS, accuracy, validate, window_metrics


def test_accuracy_is_one_minus_relative_error_averaged_over_windows():
    real = np.array([100.0, 200.0, 0.0, np.nan, 50.0])
    synth = np.array([90.0, 260.0, 5.0, 1.0, 200.0])
    # windows 0, 1, 4 count: 0.9, 0.7, max(0, 1 - 3) = 0
    assert accuracy(synth, real) == pytest.approx((0.9 + 0.7 + 0.0) / 3)
    assert np.isnan(accuracy(np.array([1.0]), np.array([0.0])))


def test_window_metrics_counts_and_utilization_from_the_schedule():
    gen = FleetGenerator(default_fleet(disks_per_class=2, days=1))
    trace = gen.generate(np.array([2]), 0, 1.0, np.random.default_rng(3)).sorted_by_time()
    m = window_metrics(trace, 0, window_s=3600.0)
    assert m["read_count"].sum() == trace.is_read.sum()
    assert m["write_count"].sum() == (~trace.is_read).sum()
    # Over the whole day, busy time equals the total service of the miss reads (none spill past
    # midnight in this trace: checked), i.e. mean utilization = total service / day.
    miss = trace.is_miss_read
    a = to_ns(trace.start_time[miss])
    s = to_ns(trace.disk_time[miss])
    _, finish = fifo_schedule(a, s)
    assert finish[-1] < 86400 * 1e9
    assert m["utilization"].sum() * 3600.0 == pytest.approx(s.sum() / 1e9, rel=1e-9)
    # Latency percentiles of a window are those of its miss reads' latencies.
    w0 = (trace.start_time[miss] < 3600.0)
    lat = (finish - a)[w0] / 1e9
    assert m["read_latency_p99"][0] == pytest.approx(np.percentile(lat, 99))


def test_homogeneous_fleet_is_synthesized_to_poisson_noise():
    """Disks that differ only by chance: counts and utilization are off only by Poisson noise."""
    # Half the default rates keeps the test light; the noise of an hour's counts is then about
    # 2 / sqrt(pi * N), 1-2.5% for N = 2,000-14,000 requests of a kind per hour.
    classes = tuple(dataclasses.replace(c, rate_sigma=0.0, read_jitter=0.0, rate=c.rate / 2) for c in DEFAULT_CLASSES)
    spec = FleetSpec(classes, disks_per_class=51, days=1, seed=1)
    res = validate(spec, rate=1 / 50, seed=1, held_out_per_class=1)
    assert res.purity == 1.0 and res.groups == 4
    assert res.coverage == pytest.approx(1.0)
    assert res.accuracy["read_count"] >= 0.97
    assert res.accuracy["write_count"] >= 0.97
    assert res.accuracy["utilization"] >= 0.95
    assert res.accuracy["read_latency_p50"] >= 0.95


def light_fleet_json(path, disks_per_class: int, rate_divisor: float = 4.0):
    """A fleet spec file like the default one at a fraction of its rates (fast CLI tests)."""
    classes = [dataclasses.asdict(dataclasses.replace(c, rate=c.rate / rate_divisor)) for c in DEFAULT_CLASSES]
    path.write_text(json.dumps({"classes": classes, "disks_per_class": disks_per_class, "days": 1}))
    return path


def test_validate_cli_json_shape_and_report(capsys, tmp_path):
    report = tmp_path / "report.html"
    fleet = light_fleet_json(tmp_path / "fleet.json", 101)
    main(["validate", "--rate", "1/100", "--held-out", "1", "--fleet", str(fleet), "--json", "--report", str(report)])
    doc = json.loads(capsys.readouterr().out)
    text = report.read_text()
    assert text.count("<img src='data:image/png;base64,") == 3 and "paper" in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fleet.json", "report.html"]
    assert doc["rate"] == 0.01
    assert doc["disks"] == 4 * 101
    assert set(doc["accuracy"]) == set(METRICS)
    assert doc["paper"] == {m: list(b) for m, b in PAPER_BANDS.items()}
    assert doc["grouping"]["purity"] == 1.0
    for m, value in doc["accuracy"].items():
        assert 0.8 <= value <= 1.0, m


@pytest.mark.parametrize(
    "args",
    [
        ["validate", "--rate", "0"],
        ["validate", "--rate", "1/0"],
        ["validate", "--rate", "nan"],
        ["validate", "--days", "0"],
        ["validate", "--held-out", "0"],
        ["validate", "--rate", "1e-9"],
        ["validate", "--no-such-option"],
        ["frobnicate"],
    ],
)
def test_validate_bad_input_is_one_line_and_exit_2(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("thesios: error: ") and "\n" not in err


def test_fleet_spec_json(tmp_path, capsys):
    from thesios.errors import ThesiosInputError
    from thesios.fleet import fleet_from_json

    spec = fleet_from_json('{"classes": "default", "disks_per_class": 7, "days": 2, "hdd": {"rpm": 5400}}')
    assert spec.n_disks == 28 and spec.hdd.rpm == 5400 and spec.classes == DEFAULT_CLASSES
    custom = fleet_from_json(json.dumps({"classes": [dataclasses.asdict(DEFAULT_CLASSES[0]) | {"name": "only"}]}))
    assert custom.classes[0].name == "only" and custom.classes[0].sizes == DEFAULT_CLASSES[0].sizes
    for bad in ["{", "[]", '{"colour": 1}', '{"classes": []}', '{"classes": [{"name": "x"}]}',
                json.dumps({"classes": [dataclasses.asdict(DEFAULT_CLASSES[0]) | {"size_probs": [0.5, 0.2, 0.2]}]}),
                json.dumps({"classes": [dataclasses.asdict(DEFAULT_CLASSES[0]) | {"rate": -1}]}),
                '{"hdd": {"rpm": 0}}', '{"disks_per_class": 1}', '{"days": "many"}']:
        with pytest.raises(ThesiosInputError):
            fleet_from_json(bad)
    path = tmp_path / "fleet.json"
    path.write_text('{"classes": "default", "disks_per_class": "x"}')
    with pytest.raises(SystemExit) as exc:
        main(["validate", "--fleet", str(path)])
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip().startswith(f"thesios: error: {path}: ")
