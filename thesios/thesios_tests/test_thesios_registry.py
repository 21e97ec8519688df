"""The reader registry: a new trace format registered in one place works through every command."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from thesios import readers
from thesios.cli import main
from thesios.errors import TraceFormatError
from thesios.readers import FORMATS, ReadReport, TraceFormat, read_strace, register_format, sniff_format
from thesios.writers import read_parquet

TOY_LINES = ["#toy", "0.0 R 0 4096 0.004", "0.5 W 8192 4096 0.002", "1.0 R 4096 8192 0.006", "3.0 R 0 4096 0.005"]


def read_toy(path: Path, lenient: bool, report: ReadReport) -> pa.Table:
    """A toy format: '#toy' then 'time op offset size latency' lines."""
    rows = [line.split() for line in Path(path).read_text().splitlines()[1:]]
    t, op, off, size, lat = (np.array(c) for c in zip(*rows))
    is_read = op == "R"
    table = readers._block_table(pa.array(["toy0"] * len(rows)), off.astype(np.int64), size.astype(np.int64), is_read,
                                 t.astype(float), lat.astype(float))
    report.rows += table.num_rows
    return table


@pytest.fixture
def toy_format():
    fmt = register_format(TraceFormat("toy", read_toy, lambda path, head: head.startswith(b"#toy"), block=True))
    yield fmt
    del FORMATS["toy"]


def test_a_toy_format_registered_in_one_place_works_end_to_end(tmp_path, capsys, toy_format):
    trace = tmp_path / "disk.txt"
    trace.write_text("\n".join(TOY_LINES) + "\n")
    assert sniff_format(trace) == "toy"
    out = tmp_path / "t.parquet"
    main(["convert", str(trace), "--format", "toy", "--out", str(out), "--quiet"])
    table = read_parquet(out)
    assert table.column("op_type").to_pylist() == ["READ", "WRITE", "READ", "READ"]
    assert table.column("latency").to_pylist() == [0.004, 0.002, 0.006, 0.005]
    # whatif sniffs it, knows it is a block trace (--device is accepted), and serves its reads.
    main(["whatif", str(trace), "--device", "toy0", "-s", "rpm:5400", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["requests"] == 4
    # Reads at 0, 1 and 3 s served 4, 6 and 5 ms each: no queueing, p50 = 5 ms.
    assert doc["baseline"]["read_latency_p50_s"] == pytest.approx(0.005)
    # Its name is in the help and in the error for an unknown format.
    with pytest.raises(SystemExit):
        main(["convert", str(trace), "--format", "nope", "-o", str(tmp_path / "x.parquet")])
    assert "toy" in capsys.readouterr().err


STRACE_TEXT = """\
101  1700000000.000100 pread64(7</db/000009.sst>, ""..., 4096, 8192) = 4096 <0.000500>
102  1700000000.000200 pwrite64(8</db/000012.sst>, ""..., 1048576, 0 <unfinished ...>
101  1700000000.000300 pread64(7</db/000009.sst>,  <unfinished ...>
102  1700000000.002200 <... pwrite64 resumed>) = 1048576 <0.002000>
101  1700000000.000900 <... pread64 resumed>""..., 2560, 5741568) = 2560 <0.000600>
101  1700000000.003000 pread64(7</db/000009.sst>, ""..., 4096, 0) = -1 EINVAL (Invalid argument) <0.000010>
101  1700000000.004000 read(3</etc/hosts>, ""..., 832) = 832 <0.000009>
"""


def test_strace_reader_joins_split_calls_and_drops_failed_ones(tmp_path):
    path = tmp_path / "st.txt"
    path.write_text(STRACE_TEXT)
    assert sniff_format(path) == "strace"
    report = ReadReport()
    t = read_strace(path, report=report)
    assert t.column("start_time").to_pylist() == [1700000000.0001, 1700000000.0002, 1700000000.0003]
    assert t.column("op_type").to_pylist() == ["READ", "WRITE", "READ"]
    assert t.column("file_offset").to_pylist() == [8192, 0, 5741568]
    assert t.column("request_io_size_bytes").to_pylist() == [4096, 1048576, 2560]
    assert t.column("latency").to_pylist() == [0.0005, 0.002, 0.0006]
    assert t.column("disk_time").to_pylist() == [0.0005, 0.0, 0.0006]
    assert t.column("filename").to_pylist() == ["/db/000009.sst", "/db/000012.sst", "/db/000009.sst"]
    assert report.skipped == 1 and report.rows == 3


def test_strace_reader_names_a_bad_line(tmp_path):
    path = tmp_path / "st.txt"
    path.write_text("101  1700000000.000900 <... pread64 resumed>\"\"..., 2560, 5741568) = 2560 <0.000600>\n")
    with pytest.raises(TraceFormatError, match=r"st.txt:1: pread64 resumed without its start"):
        read_strace(path)
    path.write_text("101  1700000000.000900 read(3</x>, \"\"..., 5) = 5 <0.1>\n")
    with pytest.raises(TraceFormatError, match="no completed pread64/pwrite64 call"):
        read_strace(path)
