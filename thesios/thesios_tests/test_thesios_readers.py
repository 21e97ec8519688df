"""Thesios CSV shard reader and Parquet writer on fixtures with the exact 17-column schema."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thesios.cli import main
from thesios.errors import TraceFormatError
from thesios.readers import ReadReport, read_thesios_csv
from thesios.schema import THESIOS_COLUMNS, THESIOS_SCHEMA, THESIOS_SCHEMA_WITH_LATENCY
from thesios.writers import read_parquet, write_parquet

FIX = Path(__file__).parent / "fixtures"
SHARD = FIX / "thesios_shard.csv"
SHARD_LAT = FIX / "thesios_shard_latency.csv"


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines()


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def test_schema_has_the_17_public_columns_in_order():
    assert len(THESIOS_COLUMNS) == 17
    assert THESIOS_SCHEMA.names == list(THESIOS_COLUMNS)
    assert lines_of(SHARD)[0].split(",") == list(THESIOS_COLUMNS)


def test_reads_shard_and_drops_repeated_header():
    raw = lines_of(SHARD)
    header_repeats = sum(1 for line in raw if line == raw[0]) - 1
    assert header_repeats == 1  # the fixture repeats the header mid-file, like real shards
    report = ReadReport()
    table = read_thesios_csv(SHARD, report=report)
    assert table.schema == THESIOS_SCHEMA
    assert table.num_rows == len(raw) - 1 - header_repeats
    assert report.header_repeats == 1 and report.skipped == 0
    ops = set(table.column("op_type").to_pylist())
    assert ops <= {"READ", "WRITE"}
    # The values round-trip: the first data row, field by field.
    first = raw[1].split(",")
    row = table.slice(0, 1).to_pylist()[0]
    assert row["filename"] == first[0]
    assert row["file_offset"] == int(first[1])
    assert row["start_time"] == float(first[13])
    assert row["cache_hit"] == int(first[9])
    # Writes and hits have no disk time; misses do.
    hit = np.array(table.column("cache_hit").to_pylist())
    dt = np.array(table.column("disk_time").to_pylist())
    assert np.all(dt[hit != 0] == 0) and np.all(dt[hit == 0] > 0)


def test_reads_the_optional_latency_column():
    table = read_thesios_csv(SHARD_LAT)
    assert table.schema == THESIOS_SCHEMA_WITH_LATENCY
    assert table.num_rows == len(lines_of(SHARD_LAT)) - 1
    lat = np.array(table.column("latency").to_pylist())
    sim = np.array(table.column("simulated_latency").to_pylist())
    np.testing.assert_allclose(lat - sim, 0.0005, atol=1e-12)


def test_reads_gzip_shards(tmp_path):
    gz = tmp_path / "shard.csv.gz"
    gz.write_bytes(gzip.compress(SHARD.read_bytes()))
    assert read_thesios_csv(gz).equals(read_thesios_csv(SHARD))


def test_empty_optional_fields_become_nulls(tmp_path):
    raw = lines_of(SHARD)
    fields = raw[1].split(",")
    fields[15] = fields[16] = ""
    table = read_thesios_csv(write_lines(tmp_path / "s.csv", [raw[0], ",".join(fields)]))
    assert table.column("simulated_latency").null_count == 1


@pytest.mark.parametrize(
    ("edit", "line", "reason"),
    [
        (lambda f: f[:-1], 5, "expected 17 fields, got 16"),
        (lambda f: [*f, "x"], 5, "expected 17 fields, got 18"),
        (lambda f: f[:1] + ["12ab"] + f[2:], 5, "file_offset: '12ab' is not a number"),
        (lambda f: f[:13] + ["-3.0"] + f[14:], 5, "start_time negative"),
        (lambda f: f[:13] + ["inf"] + f[14:], 5, "start_time: 'inf' is not a number"),
        (lambda f: f[:6] + ["DELETE"] + f[7:], 5, "op_type not READ/WRITE"),
        (lambda f: f[:9] + ["7"] + f[10:], 5, "cache_hit not in {-1, 0, 1}"),
        (lambda f: f[:10] + ["-4096"] + f[11:], 5, "request_io_size_bytes negative"),
    ],
)
def test_malformed_row_reports_file_and_line(tmp_path, edit, line, reason):
    raw = lines_of(SHARD)
    raw[line - 1] = ",".join(edit(raw[line - 1].split(",")))
    path = write_lines(tmp_path / "bad.csv", raw)
    with pytest.raises(TraceFormatError) as err:
        read_thesios_csv(path)
    assert str(err.value).startswith(f"{path}:{line}: {reason}")
    report = ReadReport()
    table = read_thesios_csv(path, lenient=True, report=report)
    assert report.skipped == 1 and table.num_rows == read_thesios_csv(SHARD).num_rows - 1
    assert report.examples[0].startswith(f"{path}:{line}: ")


def test_line_numbers_count_blank_lines_and_crlf(tmp_path):
    raw = lines_of(SHARD)
    bad = raw[3].split(",")[:-2]
    lines = [raw[0], raw[1], "", raw[2], ",".join(bad), *raw[4:]]
    path = tmp_path / "crlf.csv"
    path.write_bytes(("\r\n".join(lines) + "\r\n").encode())
    with pytest.raises(TraceFormatError, match=rf"^{path}:5: expected 17 fields, got 15"):
        read_thesios_csv(path)


def test_truncated_shard_fails_on_its_last_line(tmp_path):
    data = SHARD.read_bytes()
    cut = data[: data.rfind(b",", 0, len(data) - 30)]  # cut inside the last row
    path = tmp_path / "trunc.csv"
    path.write_bytes(cut)
    n_lines = cut.count(b"\n") + 1
    with pytest.raises(TraceFormatError, match=rf"^{path}:{n_lines}: expected 17 fields"):
        read_thesios_csv(path)


def test_shard_cut_inside_its_last_field_is_caught(tmp_path):
    data = SHARD.read_bytes()
    cut = data[: data.index(b"\n", 2000) - 3]  # a row that still has 17 well-formed fields
    path = tmp_path / "cut.csv"
    path.write_bytes(cut)
    n_lines = cut.count(b"\n") + 1
    with pytest.raises(TraceFormatError, match=rf"^{path}:{n_lines}: last line has no line end: the file looks truncated$"):
        read_thesios_csv(path)
    report = ReadReport()
    table = read_thesios_csv(path, lenient=True, report=report)
    assert report.skipped == 1 and table.num_rows == n_lines - 2  # header and the cut row
    with gzip.open(tmp_path / "cut.csv.gz", "wb") as fh:
        fh.write(cut)
    with pytest.raises(TraceFormatError, match="the file looks truncated"):
        read_thesios_csv(tmp_path / "cut.csv.gz")


def test_wrong_column_order_fails_on_line_1(tmp_path):
    raw = lines_of(SHARD)
    names = raw[0].split(",")
    names[0], names[1] = names[1], names[0]
    path = write_lines(tmp_path / "order.csv", [",".join(names), *raw[1:]])
    with pytest.raises(
        TraceFormatError,
        match=rf"^{path}:1: header is not the 17 Thesios columns in order: column 1 is 'file_offset', expected 'filename'$",
    ):
        read_thesios_csv(path)
    short = write_lines(tmp_path / "short.csv", [",".join(raw[0].split(",")[:16]), *raw[1:]])
    with pytest.raises(TraceFormatError, match=r":1: header has only 16 of the 17 Thesios columns \(next expected: 'simulated_latency'\)$"):
        read_thesios_csv(short)


def test_parquet_round_trip_is_exact(tmp_path):
    table = read_thesios_csv(SHARD)
    out = write_parquet(table, tmp_path / "t.parquet")
    assert read_parquet(out).equals(table)
    assert [p.name for p in tmp_path.iterdir()] == ["t.parquet"]  # no temp file left


def test_parquet_writer_leaves_old_file_on_failure(tmp_path):
    out = tmp_path / "t.parquet"
    out.write_bytes(b"old")
    with pytest.raises(TypeError):
        write_parquet("not a table", out)  # type: ignore[arg-type]
    assert out.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["t.parquet"]


def test_convert_cli_writes_parquet_and_fails_cleanly(tmp_path, capsys):
    out = tmp_path / "out.parquet"
    second = tmp_path / "second_shard.csv"  # a second shard of the same rows (one file twice is refused)
    second.write_bytes(SHARD.read_bytes())
    main(["convert", str(SHARD), str(second), "-o", str(out)])
    assert read_parquet(out).num_rows == 2 * read_thesios_csv(SHARD).num_rows
    capsys.readouterr()
    raw = lines_of(SHARD)
    raw[6] = raw[6][:-5] + ",x,y"
    bad = write_lines(tmp_path / "bad.csv", raw)
    out2 = tmp_path / "out2.parquet"
    with pytest.raises(SystemExit) as exc:
        main(["convert", str(bad), "-o", str(out2)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"{bad}:7:" in err
    assert not out2.exists()
    main(["convert", str(bad), "-o", str(out2), "--lenient"])
    assert read_parquet(out2).num_rows == read_thesios_csv(SHARD).num_rows - 1
    # Shards with and without the optional latency column combine: latency is null where absent.
    main(["convert", str(SHARD), str(SHARD_LAT), "-o", str(tmp_path / "mixed.parquet")])
    mixed = read_parquet(tmp_path / "mixed.parquet")
    n_plain, n_lat = read_thesios_csv(SHARD).num_rows, read_thesios_csv(SHARD_LAT).num_rows
    assert mixed.schema == THESIOS_SCHEMA_WITH_LATENCY and mixed.num_rows == n_plain + n_lat
    assert mixed.column("latency").null_count == n_plain
    assert mixed.column("latency").slice(n_plain).equals(read_thesios_csv(SHARD_LAT).column("latency"))


def test_line_numbers_stay_right_after_skipped_rows(tmp_path):
    raw = lines_of(SHARD)
    raw[3] = ",".join(raw[3].split(",")[:-1])  # line 4: short row, dropped by the parser
    f = raw[30].split(",")  # line 31, after the repeated header
    f[14] = "soon"
    raw[30] = ",".join(f)
    path = write_lines(tmp_path / "two.csv", raw)
    report = ReadReport()
    read_thesios_csv(path, lenient=True, report=report)
    assert report.skipped == 2
    assert report.examples == [
        f"{path}:4: expected 17 fields, got 16",
        f"{path}:31: disk_time: 'soon' is not a number",
    ]
    with pytest.raises(TraceFormatError, match=r":4: expected 17 fields, got 16 \(and 1 more bad rows\)$"):
        read_thesios_csv(path)


MSR = FIX / "msr_hm_0_head.csv"


def test_reads_msr_cambridge_rows():
    from thesios.readers import read_msr_csv

    table = read_msr_csv(MSR)
    assert table.schema == THESIOS_SCHEMA_WITH_LATENCY
    assert table.num_rows == 8
    row = table.slice(0, 1).to_pylist()[0]
    assert row["filename"] == "hm/0" and row["op_type"] == "READ" and row["file_offset"] == 3779678208
    assert row["request_io_size_bytes"] == 4096 and row["cache_hit"] == 0
    # FILETIME 128166372003061629 ticks after 1601-01-01 UTC, converted with datetime independently
    from datetime import UTC, datetime, timedelta

    when = datetime(1601, 1, 1, tzinfo=UTC) + timedelta(microseconds=128166372003061629 // 10)
    assert when.isoformat().startswith("2007-02-22T17:00:00.306")
    assert row["start_time"] == pytest.approx(when.timestamp(), abs=1e-6)
    assert row["latency"] == pytest.approx(0.0061330)
    assert table.column("disk_time").to_pylist()[1] == 0.0  # a write


def test_msr_bad_rows_report_lines(tmp_path):
    from thesios.readers import read_msr_csv

    raw = lines_of(MSR)
    raw[2] = raw[2].replace("Write", "Trim")
    raw[5] = raw[5] + ",extra"
    path = write_lines(tmp_path / "msr.csv", raw)
    with pytest.raises(TraceFormatError, match=rf"^{path}:3: Type not one of Read/Write \(and 1 more bad rows\)$"):
        read_msr_csv(path)
    report = ReadReport()
    assert read_msr_csv(path, lenient=True, report=report).num_rows == 6
    assert report.examples == [f"{path}:3: Type not one of Read/Write", f"{path}:6: expected 7 fields, got 8"]


def test_thesios_csv_writer_round_trips(tmp_path):
    from thesios.writers import write_thesios_csv

    for src in (SHARD, SHARD_LAT):
        table = read_thesios_csv(src)
        out = write_thesios_csv(table, tmp_path / "rt.csv")
        assert read_thesios_csv(out).equals(table)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rt.csv"]


def test_synth_cli_writes_a_trace_with_simulated_columns(tmp_path):
    from thesios_tests.test_thesios_validate import light_fleet_json

    out = tmp_path / "synth.parquet"
    fleet = light_fleet_json(tmp_path / "fleet.json", 6)
    main(["synth", "-o", str(out), "--rate", "1/5", "--fleet", str(fleet), "--disk", "3"])
    table = read_parquet(out)
    assert table.schema == THESIOS_SCHEMA
    assert table.num_rows > 1000
    rows = table.to_pydict()
    hit = np.array(rows["cache_hit"])
    op = np.array(rows["op_type"])
    start = np.array(rows["start_time"])
    sim_start = np.array(rows["simulated_disk_start_time"])
    lat = np.array(rows["simulated_latency"])
    dt = np.array(rows["disk_time"])
    miss = (op == "READ") & (hit == 0)
    assert np.all(np.diff(start) >= 0)
    assert np.all(sim_start[miss] >= start[miss] - 1e-6) and np.all(lat[miss] >= dt[miss] - 1e-6)
    assert np.all(lat[~miss] == 0)
    with pytest.raises(SystemExit) as exc:
        main(["synth", "-o", str(tmp_path / "x.txt")])
    assert exc.value.code == 2


def test_sample_cli_writes_fleet_samples(tmp_path):
    from thesios.fleet import FleetGenerator, default_fleet
    from thesios.requests import Requests

    out = tmp_path / "s.parquet"
    main(["sample", "-o", str(out), "--rate", "1/1000", "--disks-per-class", "5", "--days", "2"])
    table = read_parquet(out)
    assert table.column_names == [*THESIOS_COLUMNS, "disk_id"]
    req, _ = Requests.from_table(table)
    gen = FleetGenerator(default_fleet(disks_per_class=5, days=2))
    mu = 1e-3 * sum(gen.expected_requests(np.arange(20), d).sum() for d in range(2))
    assert abs(len(req) - mu) < 4 * np.sqrt(mu)
    assert set(np.unique(req.disk_id)) <= set(range(20)) and np.all(np.diff(req.start_time) >= 0)


def _row_strategy():
    from hypothesis import strategies as st

    name = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789/_.-", min_size=1, max_size=12).filter(lambda s: s != "filename")
    return st.fixed_dictionaries({
        "filename": name, "file_offset": st.integers(0, 2**40), "application": name,
        "c_time": st.integers(0, 2**33), "io_zone": st.sampled_from(["WARM", "COLD", "UNKNOWN"]),
        "redundancy_type": name, "op_type": st.sampled_from(["READ", "WRITE"]),
        "service_class": st.sampled_from(["LATENCY_SENSITIVE", "THROUGHPUT_ORIENTED", "OTHER"]),
        "from_flash_cache": st.integers(0, 1), "cache_hit": st.integers(-1, 1),
        "request_io_size_bytes": st.integers(0, 2**30), "disk_io_size_bytes": st.integers(0, 2**30),
        "response_io_size_bytes": st.integers(0, 2**30),
        "start_time": st.floats(0, 1e10, allow_nan=False), "disk_time": st.floats(0, 10, allow_nan=False),
        "simulated_disk_start_time": st.floats(0, 1e10, allow_nan=False),
        "simulated_latency": st.floats(0, 10, allow_nan=False),
    })


def test_any_valid_table_round_trips_through_csv(tmp_path_factory):
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from thesios.writers import write_thesios_csv

    @settings(max_examples=40, deadline=None)
    @given(st.lists(_row_strategy(), min_size=1, max_size=30))
    def check(rows):
        table = pa.Table.from_pylist(rows, schema=THESIOS_SCHEMA)
        path = write_thesios_csv(table, tmp_path_factory.mktemp("rt") / "t.csv")
        assert read_thesios_csv(path).equals(table)

    check()


def test_fio_iolog_v3_writer(tmp_path):
    from thesios.writers import write_fio_iolog

    t = np.array([2.5, 1.0, 1.0000021, 3.0])
    is_read = np.array([True, False, True, True])
    file_id = np.array([7, 1, 1, 2])
    offset = np.array([8192, 100, 64 << 20, (64 << 20) - 4096])
    size = np.array([4096, 8192, 4096, 65536])
    path = write_fio_iolog(t, is_read, file_id, offset, size, tmp_path / "x.iolog", device="/dev/sdb",
                           device_bytes=1 << 30, file_span_bytes=64 << 20)
    lines = path.read_text().splitlines()
    assert lines[:3] == ["fio version 3 iolog", "0 /dev/sdb add", "0 /dev/sdb open"]
    assert lines[-1] == "2000000 /dev/sdb close"
    span = 64 << 20
    assert lines[3:-1] == [
        "0 /dev/sdb write 67108864 8192",  # file 1 -> region 1; offset 100 -> 0 (4 KiB aligned)
        f"2 /dev/sdb read {span} 4096",  # offset 64 MiB wraps to 0 within the span; 2.1 us rounds to 2
        f"1500000 /dev/sdb read {7 * span + 8192} 4096",
        f"2000000 /dev/sdb read {2 * span + span - 65536} 65536",  # kept inside its region
    ]
    for line in lines[3:-1]:
        _, _, _, off, length = line.split()
        assert int(off) % 4096 == 0 and int(off) + int(length) <= 1 << 30
    with pytest.raises(ValueError):
        write_fio_iolog(t, is_read, file_id, offset, size, tmp_path / "y.iolog", device="my disk")


@pytest.mark.skipif(__import__("shutil").which("fio") is None, reason="fio is not installed")
def test_fio_replays_the_iolog(tmp_path):
    """fio itself (3.31+ reads v3 logs) replays every request: the count of reads and writes."""
    import json as _json
    import subprocess

    from thesios.writers import write_fio_iolog

    target = tmp_path / "target"
    with open(target, "wb") as fh:
        fh.truncate(1 << 30)  # sparse
    rng = np.random.default_rng(0)
    n = 120
    is_read = rng.random(n) < 0.6
    path = write_fio_iolog(np.sort(rng.uniform(0, 0.2, n)), is_read, rng.integers(0, 10, n), rng.integers(0, 1 << 26, n),
                           np.full(n, 4096), tmp_path / "r.iolog", device=str(target), device_bytes=1 << 30)
    out = subprocess.run(["fio", "--name=replay", f"--read_iolog={path}", "--ioengine=sync", "--output-format=json"],
                         capture_output=True, text=True, timeout=120, check=True)
    job = _json.loads(out.stdout[out.stdout.index("{"):])["jobs"][0]
    assert job["read"]["total_ios"] == is_read.sum()
    assert job["write"]["total_ios"] == (~is_read).sum()
    assert job["job_runtime"] < 10_000  # microsecond timestamps: a 0.2 s log replays in well under 10 s


def test_reads_alibaba_and_tencent_block_traces(tmp_path):
    from thesios.readers import read_alibaba_csv, read_tencent_csv

    ali = read_alibaba_csv(FIX / "alibaba_io_traces_head.csv")
    assert ali.schema == THESIOS_SCHEMA_WITH_LATENCY and ali.num_rows == 6
    row = ali.slice(2, 1).to_pylist()[0]
    assert (row["filename"], row["op_type"], row["file_offset"], row["request_io_size_bytes"]) == ("318", "READ", 13549568, 16384)
    assert row["start_time"] == pytest.approx(1577808000.000811) and row["latency"] is None
    ten = read_tencent_csv(FIX / "tencent_cbs_head.csv")
    row = ten.slice(2, 1).to_pylist()[0]
    assert (row["filename"], row["op_type"], row["file_offset"], row["request_io_size_bytes"]) == ("2121", "READ", 3062848 * 512, 16 * 512)
    assert ten.column("op_type").to_pylist().count("WRITE") == 3
    raw = lines_of(FIX / "tencent_cbs_head.csv")
    raw[3] = raw[3].replace(",0,", ",2,")
    bad = write_lines(tmp_path / "t.csv", raw)
    with pytest.raises(TraceFormatError, match=rf"^{bad}:4: IOType not one of 0/1$"):
        read_tencent_csv(bad)
    raw = lines_of(FIX / "alibaba_io_traces_head.csv")
    raw[0] = raw[0].replace("4096", "-4096")
    bad = write_lines(tmp_path / "a.csv", raw)
    with pytest.raises(TraceFormatError, match=rf"^{bad}:1: length: '-4096' is not a non-negative integer$"):
        read_alibaba_csv(bad)


def test_convert_other_formats(tmp_path, capsys):
    out = tmp_path / "msr.parquet"
    main(["convert", str(MSR), "--format", "msr", "-o", str(out)])
    assert read_parquet(out).num_rows == 8
    with pytest.raises(SystemExit) as exc:
        main(["convert", str(MSR), "--format", "spc", "-o", str(out)])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        main(["convert", str(MSR), "-o", str(tmp_path / "x.parquet")])  # an MSR file is no Thesios shard
    assert exc.value.code == 2
    assert "header is not the 17 Thesios columns" in capsys.readouterr().err


BLKPARSE = FIX / "blkparse_sda.txt"


def test_reads_blkparse_issue_complete_pairs():
    from thesios.readers import read_blkparse

    report = ReadReport()
    table = read_blkparse(BLKPARSE, report=report)
    assert table.schema == THESIOS_SCHEMA_WITH_LATENCY
    # The fixture's three complete requests (make_blkparse_fixture.py), times from the first event.
    rows = table.select(["filename", "application", "op_type", "file_offset", "request_io_size_bytes",
                         "start_time", "latency", "disk_time", "cache_hit"]).to_pylist()
    expected = [
        ("8,0", "fio", "READ", 2048 * 512, 8 * 512, 0.000100, 0.0042, 0.0042, 0),
        ("8,0", "jbd2/sda1-8", "WRITE", 1085440 * 512, 16 * 512, 0.000950, 0.008, 0.0, -1),
        ("8,0", "fio", "READ", 4096 * 512, 256 * 512, 0.009950, 0.0025, 0.0025, 0),
    ]
    assert len(rows) == 3
    for row, want in zip(rows, expected):
        got = tuple(row.values())
        assert got[:5] == want[:5] and got[8] == want[8]
        assert got[5:8] == pytest.approx(want[5:8], abs=1e-12)
    # A C with no D (777 + 8) and a D with no C (9999 + 8); the flush and the summary are not rows.
    assert report.unpaired == 2 and report.skipped == 0
    assert "Total (sda):" in BLKPARSE.read_text() and "Input file sda.blktrace.0 added" in BLKPARSE.read_text()
    # blkparse -s puts per-process statistics ("fio (4162)") before the device's: the same table.
    per_process = FIX / "blkparse_sda_per_process.txt"
    assert "\nfio (4162)\n Reads Queued:" in per_process.read_text()
    assert read_blkparse(per_process).equals(table)


def test_blkparse_malformed_lines_report_file_and_line(tmp_path):
    from thesios.readers import read_blkparse

    raw = lines_of(BLKPARSE)
    assert raw[6].split()[5:7] == ["D", "R"]  # line 7: the D of the read at 2048
    raw[6] = raw[6].replace("2048 + 8", "2048 8")
    raw[9] = "garbage in the middle"
    path = write_lines(tmp_path / "bad.txt", raw)
    with pytest.raises(TraceFormatError, match=rf"^{path}:7: D event without 'sector \+ blocks' \(and 1 more bad lines\)$"):
        read_blkparse(path)
    report = ReadReport()
    table = read_blkparse(path, lenient=True, report=report)
    assert report.skipped == 2 and report.examples == [
        f"{path}:7: D event without 'sector + blocks'", f"{path}:10: not a blkparse event line"]
    # Line 10 was the I of the write (no request lost); the read at 2048 lost its D: its C is unpaired.
    assert table.column("file_offset").to_pylist() == [1085440 * 512, 4096 * 512]
    assert report.unpaired == 3


def test_blkparse_truncated_output_fails_on_its_last_line(tmp_path):
    from thesios.readers import read_blkparse

    raw = lines_of(BLKPARSE)
    cut = raw.index("CPU0 (sda):")  # blkparse killed before its summary, mid-line
    path = tmp_path / "cut.txt"
    path.write_text("\n".join(raw[:cut - 1]) + "\n" + raw[cut - 1][:30])
    with pytest.raises(TraceFormatError, match=rf"^{path}:{cut}: last line has no line end"):
        read_blkparse(path)
    assert read_blkparse(path, lenient=True).num_rows == 3
    empty = write_lines(tmp_path / "summary_only.txt", raw[cut:])
    with pytest.raises(TraceFormatError, match="no issue \\(D\\) / complete \\(C\\) pairs"):
        read_blkparse(empty)


def test_convert_blkparse(tmp_path, capsys):
    out = tmp_path / "blk.parquet"
    main(["convert", str(BLKPARSE), "--format", "blkparse", "-o", str(out)])
    assert read_parquet(out).column("latency").to_pylist() == pytest.approx([0.0042, 0.008, 0.0025])
    assert "2 issue/complete events without their partner dropped" in " ".join(capsys.readouterr().err.split())


def _blkparse_line(dev, cpu, seq, t_ns, pid, act, rwbs, text):
    """One event line as blkparse_fmt.c prints it: "%3d,%-3d %2d %8d %5d.%09lu %5u %2s %3s " + text."""
    return f"{dev[0]:3d},{dev[1]:<3d} {cpu:2d} {seq:8d} {t_ns // 10**9:5d}.{t_ns % 10**9:09d} {pid:5d} {act:>2s} {rwbs:>3s} {text}"


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**11), st.integers(0, 10**9), st.booleans(), st.integers(1, 2048),
                          st.integers(0, 3), st.sampled_from(["", "S", "M"])),
                min_size=1, max_size=30, unique_by=lambda r: r[0]))
def test_blkparse_reader_recovers_random_requests(tmp_path_factory, reqs):
    from thesios.readers import read_blkparse

    events = []  # (time, line text without header, action, rwbs, cpu, pid)
    for i, (d_ns, lat_ns, read, blocks, cpu, flag) in enumerate(reqs):
        sector, rwbs, pid = 1000 * i, ("R" if read else "W") + flag, 100 + i
        events.append((max(0, d_ns - 500), "Q", rwbs, cpu, pid, f"{sector} + {blocks} [proc{i}]"))
        events.append((d_ns, "D", rwbs, cpu, pid, f"{sector} + {blocks} [proc{i}]"))
        events.append((d_ns + lat_ns, "C", rwbs, (cpu + 1) % 4, 0, f"{sector} + {blocks} [0]"))
    events.sort(key=lambda e: e[0])
    seq = [0, 0, 0, 0]
    lines = []
    for t, act, rwbs, cpu, pid, text in events:
        seq[cpu] += 1
        lines.append(_blkparse_line((259, 3), cpu, seq[cpu], t, pid, act, rwbs, text))
    lines += ["CPU0 (259,3):", " Reads Queued:           1,        4KiB\t Writes Queued:           0,        0KiB",
              "", "Throughput (R/W): 0KiB/s / 0KiB/s", f"Events (259,3): {len(events)} entries", "Skips: 0 forward (0 -   0.0%)"]
    path = write_lines(tmp_path_factory.mktemp("blk") / "trace.txt", lines)
    report = ReadReport()
    table = read_blkparse(path, report=report)
    want = sorted(reqs, key=lambda r: r[0])
    idx = [reqs.index(r) for r in want]
    assert report.unpaired == 0 and table.num_rows == len(reqs)
    assert table.column("filename").to_pylist() == ["259,3"] * len(reqs)
    assert table.column("file_offset").to_pylist() == [1000 * i * 512 for i in idx]
    assert table.column("request_io_size_bytes").to_pylist() == [r[3] * 512 for r in want]
    assert table.column("op_type").to_pylist() == ["READ" if r[2] else "WRITE" for r in want]
    assert table.column("start_time").to_pylist() == [r[0] / 1e9 for r in want]
    assert table.column("latency").to_pylist() == [r[1] / 1e9 for r in want]
    assert table.column("application").to_pylist() == [f"proc{i}" for i in idx]


def test_nulls_of_optional_columns_round_trip_parquet_csv_parquet(tmp_path, capsys):
    # The recorded Parquet traces hold nulls (c_time among them); pyarrow writes them to CSV as
    # empty cells, which convert refused ("c_time: '' is not a number").
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq


    table = read_thesios_csv(SHARD)
    n = table.num_rows
    nullable = [f.name for f in table.schema if f.nullable]
    assert nullable == ["application", "c_time", "redundancy_type", "service_class", "from_flash_cache",
                        "simulated_disk_start_time", "simulated_latency"]
    holes = pa.array([i % 3 == 0 for i in range(n)])  # a null in every third row of each
    for name in nullable:
        col = table.column(name)
        table = table.set_column(table.schema.get_field_index(name), table.schema.field(name),
                                 pc.if_else(holes, pa.scalar(None, col.type), col))
    pq.write_table(table, tmp_path / "recorded.parquet")
    pcsv.write_csv(pq.read_table(tmp_path / "recorded.parquet"), tmp_path / "recorded.csv")
    main(["convert", str(tmp_path / "recorded.csv"), "-o", str(tmp_path / "back.parquet"), "--quiet"])
    back = pq.read_table(tmp_path / "back.parquet")
    assert back.num_rows == n and back.schema.equals(table.schema)
    for name in table.column_names:  # every value equal, every null still null
        assert back.column(name).to_pylist() == table.column(name).to_pylist(), name
    assert back.column("c_time").null_count == (n + 2) // 3


def test_an_empty_cell_of_a_required_column_is_one_line_naming_column_and_row(tmp_path, capsys):

    lines = (SHARD).read_text().splitlines()
    cells = lines[2].split(",")
    for name in ("start_time", "file_offset", "cache_hit"):
        bad = cells.copy()
        bad[THESIOS_COLUMNS.index(name)] = ""
        path = tmp_path / f"{name}.csv"
        path.write_text("\n".join([*lines[:2], ",".join(bad), *lines[3:]]) + "\n")
        with pytest.raises(SystemExit) as exc:
            main(["convert", str(path), "-o", str(tmp_path / "x.parquet"), "--quiet"])
        assert exc.value.code == 2
        assert capsys.readouterr().err == f"thesios: error: {path}:3: {name}: empty, but the column is required\n"
    assert not (tmp_path / "x.parquet").exists()
