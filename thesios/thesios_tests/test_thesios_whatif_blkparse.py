"""`thesios whatif` straight on blkparse text: the same answer as the library on the same requests."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from thesios.cli import main
from thesios.fleet import FleetGenerator, default_fleet
from thesios.requests import Requests
from thesios.scenarios import parse_scenario, run_trace_scenarios

SCENARIOS = ["rpm:5400", "spin-down:timeout=2s", "cache:x2"]


def _line(dev: tuple[int, int], seq: int, t_ns: int, pid: int, act: str, rwbs: str, text: str) -> str:
    """One event line as blkparse_fmt.c prints it: "%3d,%-3d %2d %8d %5d.%09lu %5u %2s %3s " + text."""
    return f"{dev[0]:3d},{dev[1]:<3d} {0:2d} {seq:8d} {t_ns // 10**9:5d}.{t_ns % 10**9:09d} {pid:5d} {act:>2s} {rwbs:>3s} {text}"


def _disk_requests(n: int = 3000) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The first ``n`` cache-miss reads and writes of a generated disk: D times and D-to-C
    latencies (int ns; reads take their HDD service time, writes 1 ms), read flags, sectors, blocks."""
    gen = FleetGenerator(default_fleet(disks_per_class=1, days=1))
    full = gen.generate(np.array([0]), 0, 1.0, np.random.default_rng(8)).sorted_by_time()
    full = full.take(full.is_miss_read | ~full.is_read)
    full = full.take(np.arange(n))
    d_ns = np.round(full.start_time * 1e9).astype(np.int64)
    lat_ns = np.where(full.is_read, np.round(full.disk_time * 1e9), 1_000_000).astype(np.int64)
    return d_ns, lat_ns, full.is_read, full.file_offset // 512, full.size // 512


def _blkparse_text(devices: list[tuple[int, int]]) -> tuple[str, tuple]:
    reqs = _disk_requests()
    d_ns, lat_ns, is_read, sector, blocks = reqs
    events = []
    for dev_i, dev in enumerate(devices):
        for i in range(len(d_ns)):
            rwbs = "R" if is_read[i] else "WS"
            text = f"{sector[i]} + {blocks[i]}"
            events.append((d_ns[i] + dev_i, dev, 4162, "D", rwbs, text + " [fio]"))
            events.append((d_ns[i] + dev_i + lat_ns[i], dev, 0, "C", rwbs, text + " [0]"))
    events.sort(key=lambda e: e[0])
    lines = [_line(dev, k + 1, t, pid, act, rwbs, text) for k, (t, dev, pid, act, rwbs, text) in enumerate(events)]
    lines += ["CPU0 (sda):", " Reads Queued:           0,        0KiB\t Writes Queued:           0,        0KiB", ""]
    return "\n".join(lines) + "\n", reqs


def _expected(reqs) -> dict:
    """The library's what-ifs on the same requests, built by hand in the form a block trace reads to."""
    d_ns, lat_ns, is_read, sector, blocks = reqs
    n = len(d_ns)
    req = Requests(
        disk_id=np.zeros(n, np.int32), start_time=d_ns / 1e9, is_read=is_read,
        cache_hit=np.where(is_read, 0, -1).astype(np.int8), file_id=np.zeros(n, np.int64),
        file_offset=sector * 512, size=blocks * 512, zone=np.full(n, 2, np.int8),
        service_class=np.full(n, 2, np.int8), disk_time=np.where(is_read, lat_ns / 1e9, 0.0),
        rotation_time=np.full(n, np.nan), transfer_time=np.full(n, np.nan), app=np.zeros(n, np.int16),
    )
    out = run_trace_scenarios(req, [parse_scenario(s) for s in SCENARIOS], rpm=7200.0, seed=0)
    return json.loads(json.dumps(out))


def _whatif(args: list[str], capsys) -> dict:
    main(["whatif", *args, *[a for s in SCENARIOS for a in ("-s", s)], "--json"])
    doc = json.loads(capsys.readouterr().out)
    doc.pop("trace")
    return doc


def test_whatif_reads_blkparse_text_directly(tmp_path: Path, capsys):
    text, reqs = _blkparse_text([(8, 0)])
    path = tmp_path / "sda.txt"  # no telling suffix: the first line says blkparse
    path.write_text(text)
    want = _expected(reqs)
    assert _whatif([str(path)], capsys) == want
    assert _whatif([str(path), "--format", "blkparse"], capsys) == want
    # Closed form: offered load = total read service over the trace's span; the disk is light,
    # so utilization (over the span including the queue's drain) is the same to within the drain.
    d_ns, lat_ns, is_read = reqs[:3]
    assert want["baseline"]["offered_load"] == pytest.approx(lat_ns[is_read].sum() / (d_ns[-1] - d_ns[0]), rel=1e-9)
    assert want["baseline"]["utilization"] == pytest.approx(want["baseline"]["offered_load"], rel=1e-3)
    assert want["scenarios"]["rpm:5400"]["utilization"] > want["baseline"]["utilization"]


def test_whatif_on_blkparse_of_two_devices_needs_a_device(tmp_path: Path, capsys):
    text, reqs = _blkparse_text([(8, 0), (8, 16)])
    path = tmp_path / "two.blktrace.txt"
    path.write_text(text)
    with pytest.raises(SystemExit) as exc:
        main(["whatif", str(path), "-s", "rpm:5400"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        f"thesios: error: {path}: holds 2 devices (8,0, 8,16); pick one with --device"]
    assert _whatif([str(path), "--device", "8,0"], capsys) == _expected(reqs)
    for args, msg in [
        (["--device", "8,32"], f"{path}: no device '8,32' (devices: 8,0, 8,16)"),
        (["--format", "spc"], "--format must be one of auto, thesios, parquet, blkparse, strace, msr, alibaba, tencent, got 'spc'"),
    ]:
        with pytest.raises(SystemExit) as exc:
            main(["whatif", str(path), "-s", "rpm:5400", *args])
        assert exc.value.code == 2
        assert capsys.readouterr().err.splitlines() == [f"thesios: error: {msg}"]
