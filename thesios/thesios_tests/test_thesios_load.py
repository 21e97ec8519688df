"""Utilization (busy time over the simulated span, never above 100%) against offered load (service
asked over the arrivals' span): known answers, SimPy as the queueing oracle, and the CLI's line."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from thesios.cli import main
from thesios.diskmodel import HDDModel
from thesios.load import HOUR_S, load_metrics, overload_note
from thesios.requests import Requests
from thesios.scenarios import positional_metrics, run_trace_scenarios, serve_metrics
from thesios.writers import write_parquet


def reads(arrival_s: np.ndarray, service_s: np.ndarray, size: int = 4096) -> Requests:
    """Cache-miss reads of one file arriving at ``arrival_s`` and served for ``service_s`` (s)."""
    n = len(arrival_s)
    return Requests(
        disk_id=np.zeros(n, np.int32), start_time=np.asarray(arrival_s, np.float64), is_read=np.ones(n, bool),
        cache_hit=np.zeros(n, np.int8), file_id=np.zeros(n, np.int64), file_offset=np.arange(n, dtype=np.int64) * size,
        size=np.full(n, size, np.int64), zone=np.full(n, 2, np.int8), service_class=np.full(n, 2, np.int8),
        disk_time=np.asarray(service_s, np.float64), rotation_time=np.full(n, np.nan),
        transfer_time=np.full(n, np.nan), app=np.zeros(n, np.int16),
    )


def test_back_to_back_requests_twice_what_the_disk_serves():
    # 2,000 reads 1 ms apart, 2 ms each: 4 s of service asked in 1.999 s of arrivals (2n/(n-1) =
    # 2.001x). The disk never idles from the first arrival to the last finish (at 4 s).
    n = 2000
    m = serve_metrics(reads(np.arange(n) * 1e-3, np.full(n, 2e-3)), (0.0, (n - 1) * 1e-3))
    assert m["offered_load"] == pytest.approx(2 * n / (n - 1), rel=1e-9)
    assert m["utilization"] == pytest.approx(1.0, abs=1e-12) and m["peak_hour_utilization"] == pytest.approx(1.0, abs=1e-12)
    assert m["span_s"] == pytest.approx(4.0, rel=1e-9) and m["drain_s"] == pytest.approx(4.0 - 1.999, rel=1e-9)
    # The last read waits for the 1,999 before it: 4 s - 1.999 s; the latencies grow with n.
    assert m["read_latency_p99_s"] > 1.9
    assert overload_note(m).startswith("overloaded: offered load 2.00x what the disk can serve (4 s of service in 2 s")


def test_a_light_trace_utilization_and_offered_load_agree():
    # 1,000 reads 10 ms apart, 1 ms each: offered 0.1; busy 1 s of a 9.991 s span (the last
    # finishes 1 ms after the last arrival). No request waits, so each read takes its 1 ms.
    n = 1000
    m = serve_metrics(reads(np.arange(n) * 1e-2, np.full(n, 1e-3)), (0.0, (n - 1) * 1e-2))
    assert m["offered_load"] == pytest.approx(n * 1e-3 / ((n - 1) * 1e-2), rel=1e-9)
    assert m["utilization"] == pytest.approx(n * 1e-3 / ((n - 1) * 1e-2 + 1e-3), rel=1e-9)
    assert m["utilization"] == pytest.approx(m["offered_load"], rel=2e-4)
    assert m["read_latency_p99_s"] == pytest.approx(1e-3, rel=1e-9)
    assert overload_note(m) is None


def simpy_busy(arrival_s: np.ndarray, service_s: np.ndarray) -> list[tuple[float, float]]:
    """Each request's (begin, end) of service on a SimPy one-server Resource."""
    env = simpy.Environment()
    disk = simpy.Resource(env, capacity=1)
    spans: list[tuple[float, float]] = []

    def request(s: float):
        with disk.request() as req:
            yield req
            begin = env.now
            yield env.timeout(s)
            spans.append((begin, env.now))

    def source():
        for a, s in zip(arrival_s.tolist(), service_s.tolist()):
            yield env.timeout(a - env.now)
            env.process(request(s))

    env.process(source())
    env.run()
    return sorted(spans)


@pytest.mark.parametrize("rho", [0.3, 0.9, 1.6])
def test_utilization_and_peak_hour_equal_simpy_busy_intervals(rho):
    # Poisson arrivals over 3 hours, twice as dense in the second hour, exponential service at
    # offered load rho; SimPy's busy intervals clipped to each hour are the oracle.
    rng = np.random.default_rng(7)
    rate = np.array([1.0, 2.0, 1.0]) * 0.5  # requests/s per hour
    a = np.sort(np.concatenate([h * HOUR_S + rng.uniform(0, HOUR_S, rng.poisson(r * HOUR_S)) for h, r in enumerate(rate)]))
    s = rng.exponential(rho / rate.mean(), len(a))
    horizon = (0.0, 3 * HOUR_S)
    m = serve_metrics(reads(a, s), horizon)
    spans = np.array(simpy_busy(a, np.round(s * 1e9) / 1e9))
    end = max(horizon[1], spans[-1, 1])
    busy = (spans[:, 1] - spans[:, 0]).sum()
    assert m["utilization"] == pytest.approx(busy / end, rel=1e-6) and m["utilization"] <= 1.0
    assert m["offered_load"] == pytest.approx(busy / horizon[1], rel=1e-6)
    edges = [0.0, HOUR_S, 2 * HOUR_S, end]  # the drain goes to the last hour
    per_hour = [np.clip(np.minimum(spans[:, 1], w1) - np.maximum(spans[:, 0], w0), 0, None).sum() / (w1 - w0)
                for w0, w1 in zip(edges[:-1], edges[1:])]
    assert m["peak_hour_utilization"] == pytest.approx(max(per_hour), rel=1e-6)
    assert (overload_note(m) is not None) == (m["offered_load"] > 1)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 10), st.floats(0, 3)), min_size=1, max_size=40))
def test_utilization_never_exceeds_one(pairs):
    a = np.sort(np.array([p[0] for p in pairs]))
    s = np.array([p[1] for p in pairs])
    m = serve_metrics(reads(a, s), (float(a[0]), float(a[-1])))
    assert 0.0 <= m["utilization"] <= 1.0 and 0.0 <= m["peak_hour_utilization"] <= 1.0
    if m["offered_load"] is not None and m["span_s"] > 0:  # the same busy time over two spans
        assert m["utilization"] == pytest.approx(m["offered_load"] * (a[-1] - a[0]) / m["span_s"], rel=1e-6, abs=1e-12)


def test_load_metrics_of_no_work_and_of_one_instant():
    assert load_metrics(np.zeros(0), np.zeros(0), (0.0, 5.0))["utilization"] == 0.0
    burst = load_metrics(np.array([1.0, 2.0]), np.array([2.0, 3.0]), (1.0, 1.0))
    assert burst["offered_load"] is None and burst["utilization"] == 1.0
    assert overload_note(burst).startswith("overloaded: every request arrives at one instant")


def test_the_positional_disk_overloaded_stays_at_most_100_percent():
    # 400 random 4 KiB reads in 0.1 s: each takes a seek and a rotation (milliseconds), so the
    # 7200 RPM disk is offered far more than it serves.
    rng = np.random.default_rng(3)
    tr = reads(np.sort(rng.uniform(0, 0.1, 400)), np.zeros(400))
    tr = replace(tr, file_id=rng.integers(0, 1000, 400))
    m = positional_metrics(tr, HDDModel(), "fifo", horizon=(float(tr.start_time[0]), float(tr.start_time[-1])))
    assert m["offered_load"] > 10 and m["utilization"] <= 1.0
    assert m["utilization"] == pytest.approx(m["busy_s"] / m["span_s"], rel=1e-12)


def test_cli_says_overloaded_in_one_line_per_scenario(tmp_path: Path, capsys):
    n = 2000
    path = write_parquet(reads(np.arange(n) * 1e-3, np.full(n, 2e-3)).to_table(), tmp_path / "b2b.parquet")
    main(["whatif", str(path), "-s", "cache:x2"])
    out = capsys.readouterr().out
    assert "100.00%" in out and "200.1" not in out  # was 200.10%: offered load read as utilization
    lines = [ln for ln in out.splitlines() if ": overloaded" in ln]
    assert len(lines) == 1 and lines[0].startswith("baseline: overloaded: offered load 2.00x")
    assert "the trace's own reads overlap (100% began while an earlier one was in service)" in out
    doc = run_trace_scenarios(reads(np.arange(n) * 1e-3, np.full(n, 2e-3)), [])
    assert json.loads(json.dumps(doc))["baseline"]["offered_load"] == pytest.approx(2 * n / (n - 1))


def test_a_zone_no_request_is_in_is_refused_before_any_simulation(tmp_path: Path, capsys, monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("simulated a zone with no requests")

    monkeypatch.setattr("thesios.scenarios.spin_down_schedule", never)
    monkeypatch.setattr("thesios.scenarios.serve_metrics", never)
    path = write_parquet(reads(np.arange(30) * 0.5, np.full(30, 1e-3)).to_table(), tmp_path / "unknown_zone.parquet")
    for spec in ("spin-down:zone=COLD,timeout=1s", "disk:fifo,zone=WARM"):
        with pytest.raises(SystemExit) as exc:
            main(["whatif", str(path), "-s", "cache:x2", "-s", spec])
        assert exc.value.code == 2
        zone = spec.split("zone=")[1].split(",")[0]
        assert capsys.readouterr().err.splitlines() == [
            f"thesios: error: {path}: scenario {spec!r}: no request is in zone {zone}; zones present: UNKNOWN (30 requests)"]


def test_an_rpm_fit_that_fails_names_the_file(tmp_path: Path, capsys):
    path = write_parquet(reads(np.arange(30) * 0.5, np.full(30, 8e-3)).to_table(), tmp_path / "one_size.parquet")
    with pytest.raises(SystemExit) as exc:
        main(["whatif", str(path), "-s", "rpm:5400"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        f"thesios: error: {path}: scenario 'rpm:5400': fitting the HDD model needs cache-miss reads of at least two "
        "sizes (all 30 are 4,096 bytes); the modelled disk needs no fit: compare `-s disk:fifo` with `--rpm R -s disk:fifo`"]


def test_the_spin_down_line_says_whose_latency_it_gives(tmp_path: Path, capsys):
    tr = reads(np.arange(30) * 20.0, np.full(30, 8e-3))
    path = write_parquet(replace(tr, zone=np.where(np.arange(30) % 2, 1, 0).astype(np.int8)).to_table(), tmp_path / "z.parquet")
    main(["whatif", str(path), "-s", "spin-down:zone=COLD,timeout=10s", "-s", "spin-down:timeout=10s"])
    out = capsys.readouterr().out
    assert "read p99 of the COLD-only disk (always spinning -> spun down) 8.0 -> 10008.0 ms" in out
    assert "spin-down:timeout=10s: " in out and "read p99 (always spinning -> spun down) 8.0 -> 10008.0 ms" in out
