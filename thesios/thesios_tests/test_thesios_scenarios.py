"""Scenario specs, hash (spatial) sampling and SHARDS, and `thesios whatif`."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from thesios.cli import main
from thesios.errors import ThesiosInputError
from thesios.fleet import DEFAULT_CLASSES, FleetGenerator, FleetSpec, default_fleet
from thesios.samplers import hash_sample, hash_sample_mask, request_keys
from thesios.scenarios import parse_scenario, run_scenarios
from thesios.whatif import block_keys, lru_misses, sampled_block_keys


def test_parse_scenarios():
    assert parse_scenario("capacity:x2").factor == 2.0
    assert parse_scenario("rpm:5400").rpm == 5400.0
    sd = parse_scenario("spin-down:zone=COLD,timeout=5m")
    assert sd.zone == "COLD" and sd.timeout_s == 300.0
    assert parse_scenario("cache:x1.5").factor == 1.5
    for bad in ["capacity:2", "rpm:fast", "rpm:-1", "spin-down:zone=HOT", "spin-down:timeout=soon",
                "spin-down:zone=COLD,speed=3", "cache:x0", "teleport:x2"]:
        with pytest.raises(ThesiosInputError):
            parse_scenario(bad)


def test_hash_sampling_keeps_whole_keys_at_the_rate():
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 50_000, 400_000)
    mask = hash_sample_mask(keys, 0.1)
    kept_keys = np.unique(keys[mask])
    assert abs(len(kept_keys) / len(np.unique(keys)) - 0.1) < 0.01
    # every access to a kept key is kept, none to a dropped one
    assert np.array_equal(np.isin(keys, kept_keys), mask)
    gen = FleetGenerator(default_fleet(disks_per_class=1, days=1))
    req = gen.generate(np.array([0]), 0, 0.05, rng)
    sub = hash_sample(req, 0.5)
    assert np.all(hash_sample_mask(request_keys(sub), 0.5))
    with pytest.raises(ThesiosInputError):
        hash_sample(req, 0.0)


def test_shards_estimates_the_lru_miss_ratio():
    """SHARDS: LRU of capacity C*R over a hash-sampled stream ~ LRU of C over the full stream."""
    rng = np.random.default_rng(1)
    ranks = np.arange(1, 20_001, dtype=np.float64)
    w = ranks**-0.9
    keys = rng.choice(20_000, size=150_000, p=w / w.sum()).astype(np.int64) * 7919
    full = lru_misses(keys, 2000).mean()
    sampled = keys[hash_sample_mask(keys, 0.1, salt=3)]
    est = lru_misses(sampled, 200).mean()
    assert abs(est - full) < 0.03, (est, full)


def test_sampled_block_keys_match_expanding_everything():
    gen = FleetGenerator(default_fleet(disks_per_class=1, days=1))
    req = gen.generate(np.array([1]), 0, 0.01, np.random.default_rng(2)).sorted_by_time()
    keys, _ = block_keys(req)
    np.testing.assert_array_equal(sampled_block_keys(req, 0.3, 5, chunk=100), keys[hash_sample_mask(keys, 0.3, 5)])


def test_whatif_scenarios_on_a_light_fleet():
    # Lighter than the default (a fifth of the rate, small requests) to keep the test fast.
    classes = tuple(dataclasses.replace(c, rate=c.rate / 5, sizes=(4096, 65536), size_probs=(0.7, 0.3)) for c in DEFAULT_CLASSES)
    spec = FleetSpec(classes, disks_per_class=2 * 50 + 1, days=1, seed=2)
    scenarios = [parse_scenario(s) for s in ["capacity:x2", "rpm:5400", "spin-down:zone=COLD,timeout=10s", "cache:x2"]]
    steps: list[str] = []
    doc = run_scenarios(spec, 1 / 50, scenarios, seed=2, cache_blocks=40_000, shards_rate=0.005, progress=steps.append)
    assert len(doc["groups"]) == 4
    # one progress line per step: sampling, grouping, then per group its baseline and each scenario
    assert steps[0].startswith("sampling 404 disks") and steps[1].startswith("identifying groups")
    assert len(steps) == 2 + 4 * (1 + len(scenarios)) and steps[-1] == "group 3 of 4: cache:x2"
    for g in doc["groups"]:
        base, sc = g["baseline"], g["scenarios"]
        # twice the disk-days merged: twice the load, within Poisson noise
        assert sc["capacity:x2"]["coverage"] == pytest.approx(2.0)
        assert sc["capacity:x2"]["requests"] == pytest.approx(2 * base["requests"], rel=0.05)
        assert sc["capacity:x2"]["utilization"] == pytest.approx(2 * base["utilization"], rel=0.08)
        # slower spindle: longer service, more utilization, same requests
        assert sc["rpm:5400"]["requests"] == base["requests"]
        assert sc["rpm:5400"]["utilization"] > base["utilization"]
        sd = sc["spin-down:zone=COLD,timeout=10s"]
        assert sd["idle_energy_j"] > 0 and sd["break_even_s"] > 0
        assert sd["saving"] <= 1.0 and sd["requests_spun_up"] <= sd["spin_ups"] <= sd["requests_spun_up"] + 1
        # each request that found the disk down waits the whole spin-up; those behind it wait too
        assert sd["added_latency_s"] >= sd["requests_spun_up"] * 10.0 - 1e-6
        assert sd["requests_delayed"] >= sd["requests_spun_up"]
        assert sd["read_latency_p99_s"] >= sd["baseline_read_latency_p99_s"]
        c = sc["cache:x2"]
        assert c["belady_miss_ratio_scaled"] <= c["lru_miss_ratio_scaled"] <= c["lru_miss_ratio"]
        # From the samples alone, the miss ratios of a member's real disk-day (measured 0.2-3.7
        # points apart on this fleet: SHARDS noise of 2-5 k sampled blocks)
        for k in ("lru_miss_ratio", "lru_miss_ratio_scaled", "belady_miss_ratio_scaled"):
            assert c[k] == pytest.approx(c[f"full_trace_{k}"], abs=0.06), k


def test_whatif_cli_json(capsys, tmp_path):
    from thesios_tests.test_thesios_validate import light_fleet_json

    fleet = light_fleet_json(tmp_path / "fleet.json", 21)
    report = tmp_path / "whatif.html"
    main(["whatif", "--rate", "1/20", "--fleet", str(fleet), "-s", "rpm:5400", "-s", "spin-down:zone=COLD,timeout=10s",
          "--json", "--report", str(report)])
    doc = json.loads(capsys.readouterr().out)
    assert doc["rate"] == 0.05 and len(doc["groups"]) == 4
    for g in doc["groups"]:
        assert g["scenarios"]["rpm:5400"]["read_latency_p50_s"] > g["baseline"]["read_latency_p50_s"]
    sections = _report_sections(report)
    assert list(sections) == ["baseline", "rpm:5400", "spin-down:zone=COLD,timeout=10s"]
    sd = [g["scenarios"]["spin-down:zone=COLD,timeout=10s"] for g in doc["groups"]]
    # the spin-down table shows each group's numbers from the same run
    assert all(f"<td>{m['spin_ups']}</td>" in sections["spin-down:zone=COLD,timeout=10s"] for m in sd)
    assert all(f"<td>{m['idle_energy_j']:.4g}</td>" in sections["spin-down:zone=COLD,timeout=10s"] for m in sd)


def _report_sections(path) -> dict[str, str]:
    """A what-if report's sections by title; checks each scenario section has one real PNG."""
    import base64
    import re

    text = path.read_text()
    parts = re.split(r"<h2>(.*?)</h2>", text)[1:]
    sections = {__import__("html").unescape(t): body for t, body in zip(parts[::2], parts[1::2])}
    for title, body in sections.items():
        pngs = re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", body)
        assert len(pngs) == (0 if title == "baseline" else 1), title
        assert all(base64.b64decode(p)[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    return sections


@pytest.mark.parametrize("args", [["whatif", "-s", "warp:x9"], ["whatif", "-s", "rpm:0"], ["whatif"]])
def test_whatif_bad_input_exit_2(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("thesios: error: ") and "\n" not in err


def test_fit_service_time_recovers_the_generators_parts():
    from thesios.diskmodel import fit_service_time

    gen = FleetGenerator(default_fleet(disks_per_class=1, days=1))
    req = gen.generate(np.array([1]), 0, 0.5, np.random.default_rng(4))  # one class: position independent of size
    m = req.is_miss_read
    fit = fit_service_time(req.disk_time[m], req.size[m])
    # intercept = mean of seek + rotation; slope = mean of 1/rate (position independent of size)
    assert fit.overhead_s == pytest.approx((req.disk_time - req.transfer_time)[m].mean(), rel=0.03)
    assert 1 / fit.rate_bps == pytest.approx((req.transfer_time / req.size)[m].mean(), rel=0.03)
    # exact on noiseless data
    x = np.array([4096, 65536, 1 << 20, 4 << 20], dtype=np.float64)
    exact = fit_service_time(0.012 + x / 150e6, x)
    assert exact.overhead_s == pytest.approx(0.012) and exact.rate_bps == pytest.approx(150e6)
    with pytest.raises(ThesiosInputError):
        fit_service_time(np.array([0.01, 0.02]), np.array([4096, 4096]))


def test_table_round_trip_into_requests():
    from thesios.requests import Requests

    gen = FleetGenerator(default_fleet(disks_per_class=2, days=1))
    req = gen.generate(np.array([0, 3, 5]), 0, 0.01, np.random.default_rng(5))
    back, apps = Requests.from_table(req.to_table(gen.applications))
    for name in ("disk_id", "start_time", "is_read", "cache_hit", "file_offset", "size", "zone", "service_class", "disk_time"):
        np.testing.assert_array_equal(getattr(back, name), getattr(req, name), err_msg=name)
    assert [apps[a] for a in back.app[:20]] == [gen.applications[a] for a in req.app[:20]]
    # distinct (disk, file) names get distinct ids
    pairs = set(zip(req.disk_id.tolist(), req.file_id.tolist()))
    assert len(np.unique(back.file_id)) == len(pairs)


def test_whatif_on_a_thesios_shard(tmp_path, capsys):
    shard = __import__("pathlib").Path(__file__).parent / "fixtures" / "thesios_shard.csv"
    report = tmp_path / "shard.html"
    main(["whatif", str(shard), "-s", "rpm:5400", "-s", "spin-down:timeout=60s", "-s", "cache:x2", "--json",
          "--report", str(report)])
    doc = json.loads(capsys.readouterr().out)
    sections = _report_sections(report)
    assert list(sections) == ["baseline", "rpm:5400", "spin-down:timeout=60s", "cache:x2"]
    assert f"<td>{doc['scenarios']['cache:x2']['lru_miss_ratio']:.4g}</td>" in sections["cache:x2"]
    base, sc = doc["baseline"], doc["scenarios"]
    assert sc["rpm:5400"]["utilization"] > base["utilization"]
    assert "fit" in doc  # the shard has no rotation split: it was fitted
    assert sc["spin-down:timeout=60s"]["spin_ups"] > 0
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 not really")
    with pytest.raises(SystemExit) as exc:
        main(["whatif", str(bad), "-s", "rpm:5400"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        main(["whatif", str(shard), "-s", "capacity:x2"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.count("\n") == 2
