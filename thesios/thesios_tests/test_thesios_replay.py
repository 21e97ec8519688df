"""thesios replay: a trace replayed on a real file with fio (direct I/O), one latency per request."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from thesios.cli import main
from thesios.replay import replay

FIX = Path(__file__).parent / "fixtures"
needs_fio = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed (Debian: apt-get install fio; .ci/run installs it as root)")


@needs_fio
def test_replay_gives_one_latency_per_request_and_keeps_the_trace_clock(tmp_path):
    rng = np.random.default_rng(0)
    n = 60
    t = np.sort(rng.uniform(0, 0.6, n))
    is_read = rng.random(n) < 0.7
    target = tmp_path / "target"
    res = replay(t, is_read, rng.integers(0, 3, n), rng.integers(0, 32 << 20, n), np.full(n, 6000), target,
                 target_bytes=64 << 20, jobs=2, region_bytes=16 << 20)
    assert target.stat().st_size == 64 << 20  # laid out with data first
    assert len(res.latency_s) == n and res.is_read.sum() == is_read.sum()
    assert (res.latency_s > 0).all() and (res.latency_s < 5).all()
    assert res.seconds >= 0.6 * 0.9  # fio waits for each request's time: the replay spans the trace


@needs_fio
def test_replay_command_on_a_block_trace(tmp_path, capsys):
    main(["replay", str(FIX / "msr_hm_0_head.csv"), "--format", "msr", "--target", str(tmp_path / "t"),
          "--size-mib", "64", "--seconds", "1.5", "--json", "--quiet"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["reads"] + doc["writes"] == 2  # the fixture's first 1.5 s hold two requests
    assert doc["target"] == str(tmp_path / "t")


def test_replay_bad_inputs_are_one_line(tmp_path, capsys):
    for args, msg in [
        (["--target", str(tmp_path), "--size-mib", "64"], f"{tmp_path}: is a folder; --target names a file"),
        (["--target", str(tmp_path / "t"), "--size-mib", "8"], "--size-mib must be >= 64, got 8"),
        (["--target", str(tmp_path / "t"), "--jobs", "0"], "--jobs must be >= 1, got 0"),
        (["--target", str(tmp_path / "t"), "--seconds", "-1"], "--seconds must be a positive number, got -1.0"),
        (["--target", str(tmp_path / "no" / "t")], f"{tmp_path / 'no' / 't'}: its folder {tmp_path / 'no'} does not exist"),
    ]:
        with pytest.raises(SystemExit) as exc:
            main(["replay", str(FIX / "msr_hm_0_head.csv"), "--format", "msr", *args, "--quiet"])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert err == f"thesios: error: {msg}\n"  # all checked before fio is looked for
