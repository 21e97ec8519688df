"""validate --traces: known answers, bad inputs, and the committed recording of real software."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from thesios.cli import main
from thesios.trace_validation import Disk, busy_union, trace_window_metrics, validate_traces

FIX = Path(__file__).parent / "fixtures"
RECORDED = Path(__file__).parents[1] / "data" / "recorded"


def fails(args: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    return err.strip()


def test_busy_union_is_the_union_of_in_flight_intervals_per_window():
    start = np.array([0.5, 0.0, 3.0, 3.2])
    finish = np.array([2.0, 1.0, 4.0, 3.5])
    # [0, 2) busy, [3, 4) busy: windows [0, 1), [1, 2.5), [2.5, 4) hold 1, 1 and 1 s.
    np.testing.assert_allclose(busy_union(start, finish, np.array([0.0, 1.0, 2.5, 4.0])), [1.0, 1.0, 1.0])
    np.testing.assert_allclose(busy_union(start, finish, np.array([0.0, 4.0])), [3.0])


def test_window_metrics_known_answer():
    t = np.array([0.1, 0.2, 0.3, 1.5])
    m = trace_window_metrics(t, np.array([True, True, False, True]), np.array([0.1, 0.3, 0.05, 0.2]), np.array([0.0, 1.0, 2.0]))
    assert m["read_count"].tolist() == [2, 1] and m["write_count"].tolist() == [1, 0]
    np.testing.assert_allclose(m["utilization"], [0.4, 0.2])  # [0.1, 0.5) and [1.5, 1.7)
    np.testing.assert_allclose(m["read_latency_p50"], [0.2, 0.2])


def _disk(name: str, group: str, rng: np.random.Generator, n: int = 4000, rate: float = 400.0) -> Disk:
    t = np.sort(rng.uniform(0, n / rate, n))
    return Disk(name, group, t - t[0], rng.random(n) < 0.7, np.full(n, 4096), rng.lognormal(-7, 0.5, n),
                rng.integers(0, 8, n), rng.integers(0, 1 << 20, n))


def test_copies_of_one_disk_at_p_1_synthesize_it_exactly():
    d = _disk("a", "g", np.random.default_rng(0))
    copies = [Disk(f"c{i}", "g", d.start_s, d.is_read, d.size, d.latency_s, d.file_id, d.offset) for i in range(3)]
    doc = validate_traces(copies, rate=1.0, held_out=1)
    assert doc["accuracy"] == {m: 1.0 for m in doc["accuracy"]}
    assert doc["groups"]["g"]["donors"] == 1 and doc["groups"]["g"]["p"] == 1.0


def test_similar_disks_validate_well_and_p_is_raised_to_what_the_group_supports():
    rng = np.random.default_rng(1)
    disks = [_disk(f"d{i}", "g", rng) for i in range(12)] + [_disk(f"x{i}", "h", rng, rate=50.0, n=500) for i in range(2)]
    doc = validate_traces(disks, rate=1e-4, held_out=2)
    g = doc["groups"]["g"]
    assert g["p"] == 1 / 10 and g["donors"] == 10
    assert g["note"].startswith("the asked p 1/10,000 is below what the group's 10 donor disks support; used 1/10")
    assert doc["p_asked"] == 1e-4 and doc["p_used"] == {"g": 1 / 10}  # h was skipped: no p
    assert "skipped" in doc["groups"]["h"]["note"]  # 2 disks cannot hold 2 out
    assert "samples in" not in g["note"]  # ~4,000 samples over 10 windows
    sparse = validate_traces(disks[:12], rate=1e-4, held_out=2, window_s=0.05)["groups"]["g"]["note"]
    assert "samples in 199 windows (< 20 a window): widen --window or raise --rate" in sparse
    assert doc["accuracy"]["read_count"] > 0.85 and doc["accuracy"]["read_latency_p50"] > 0.85


def test_bad_inputs_are_one_line_exit_2(tmp_path, capsys):
    assert fails(["validate", "--traces", str(FIX / "msr_hm_0_head.csv"), "--format", "msr"], capsys) == \
        "thesios: error: 1 disk in the traces: validation holds disks out and synthesizes them from others of their group"
    err = fails(["validate", "--traces", str(FIX / "alibaba_io_traces_head.csv"), "--format", "alibaba"], capsys)
    assert err.endswith("no read has a latency (column latency or disk_time); validation compares read latency")
    assert fails(["validate", "--traces", str(tmp_path / "none")], capsys) == f"thesios: error: {tmp_path / 'none'}: no such file or folder"
    err = fails(["validate", "--traces", str(FIX / "msr_hm_0_head.csv"), "--format", "msr", "--group-by", "cluster"], capsys)
    assert err.endswith("no column 'cluster' to group by (columns: filename, file_offset, application, c_time, io_zone, "
                        "redundancy_type, op_type, service_class, from_flash_cache, cache_hit, request_io_size_bytes, "
                        "disk_io_size_bytes, response_io_size_bytes, start_time, disk_time, simulated_disk_start_time, "
                        "simulated_latency, latency)")
    assert fails(["validate", "--group-by", "workload"], capsys) == \
        "thesios: error: --format, --group-by, --identify and --window describe --traces; none was given"
    assert fails(["validate", "--traces", str(FIX), "--window", "-1"], capsys) == \
        "thesios: error: --window must be a positive number of seconds, got -1.0"


@pytest.mark.skipif(not RECORDED.is_dir(), reason="the committed recording is missing")
def test_validate_on_the_committed_recording_of_real_software(capsys):
    main(["validate", "--traces", str(RECORDED), "--group-by", "workload", "--json", "--quiet"])
    doc = json.loads(capsys.readouterr().out)
    assert set(doc["accuracy"]) == {"read_count", "write_count", "utilization", "read_latency_p50", "read_latency_p99"}
    assert doc["p_asked"] == 1e-4 and doc["disks"] >= 72
    assert doc["p_used"] == {name: g["p"] for name, g in doc["groups"].items()}
    assert {"rocksdb-readrandom", "rocksdb-readwhilewriting", "rocksdb-mixgraph"} <= set(doc["groups"])
    for g in doc["groups"].values():
        assert g["p"] == 1 / g["donors"] and g["donors"] == g["disks"] - 2  # never extrapolated
        # No --rate was given: the note says the default was raised, not that a p was asked.
        assert g["note"].startswith(f"the default p 1/10,000 is below what the group's {g['donors']} donor disks "
                                    f"support; used 1/{g['donors']}")
        assert all(0.0 <= v <= 1.0 for v in g["accuracy"].values() if v == v)
    # Grouping by identification (purity against the column): test_thesios_vocabulary.


def test_table_output_names_a_skipped_group_instead_of_crashing(monkeypatch, capsys):
    # Regression: the table (not --json) indexed g["accuracy"] of a group too small to hold
    # disks out and died with a KeyError traceback (e.g. validate --traces fio-randrw.parquet).
    rng = np.random.default_rng(1)
    disks = [_disk(f"d{i}", "g", rng) for i in range(6)] + [_disk(f"x{i}", "h", rng, rate=50.0, n=500) for i in range(2)]
    monkeypatch.setattr("thesios.trace_validation.load_disks", lambda *_a, **_k: disks)
    main(["validate", "--traces", str(FIX), "--group-by", "g", "--quiet"])
    out = capsys.readouterr().out
    assert "h: 2 disks: too few disks to hold 2 out and merge the rest: skipped" in out
    assert "g: 6 disks, p = 1/4" in out
