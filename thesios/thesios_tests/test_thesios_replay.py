"""thesios replay: a trace replayed on a real file with fio (direct I/O), one latency per request."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from thesios.cli import main
from thesios.replay import prepare_target, replay

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
        (["--target", str(tmp_path / "t"), "--jobs", "0"], "--jobs must be in [1, 256], got 0"),
        (["--target", str(tmp_path / "t"), "--jobs", "100000"], "--jobs must be in [1, 256], got 100000"),
        (["--target", str(tmp_path / "t"), "--seconds", "-1"], "--seconds must be a positive number, got -1.0"),
        (["--target", str(tmp_path / "no" / "t")], f"{tmp_path / 'no' / 't'}: its folder {tmp_path / 'no'} does not exist"),
    ]:
        with pytest.raises(SystemExit) as exc:
            main(["replay", str(FIX / "msr_hm_0_head.csv"), "--format", "msr", *args, "--quiet"])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert err == f"thesios: error: {msg}\n"  # all checked before fio is looked for


def _refused(args: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        main(["replay", str(FIX / "msr_hm_0_head.csv"), "--format", "msr", *args, "--quiet"])
    assert exc.value.code == 2
    return capsys.readouterr().err


def test_replay_refuses_a_size_beyond_the_free_space_before_fio(tmp_path, capsys):
    free_mib = shutil.disk_usage(tmp_path).free >> 20
    err = _refused(["--target", str(tmp_path / "t"), "--size-mib", "999999999999"], capsys)
    got = err.removeprefix("thesios: error: --size-mib 999999999999 does not fit: ")
    assert err.count("\n") == 1 and got != err
    reported = int(got.split(" has ")[1].split(" MiB free")[0])
    assert abs(reported - free_mib) < 1024  # the free space it names is the filesystem's (give or take others' writes)
    assert got.endswith("and replay keeps 1024 MiB spare\n")
    assert not (tmp_path / "t").exists()  # nothing written


def test_replay_never_overwrites_an_existing_file_unasked(tmp_path, capsys):
    victim = tmp_path / "victim.dat"
    victim.write_bytes(b"x" * 5000)
    err = _refused(["--target", str(victim), "--size-mib", "64"], capsys)
    assert err == f"thesios: error: {victim}: exists (5000 bytes); replay overwrites it with data: give --overwrite or a new file\n"
    assert victim.read_bytes() == b"x" * 5000


@needs_fio
def test_replay_overwrites_an_existing_file_when_asked(tmp_path, capsys):
    victim = tmp_path / "victim.dat"
    victim.write_bytes(b"x" * 5000)
    main(["replay", str(FIX / "msr_hm_0_head.csv"), "--format", "msr", "--target", str(victim), "--size-mib", "64",
          "--seconds", "1.5", "--overwrite", "--json", "--quiet"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["reads"] + doc["writes"] == 2
    assert victim.stat().st_size == 64 << 20


def _interrupted_layout(target: Path, size: int, overwrite: bool) -> None:
    """prepare_target with a SIGINT sent to this process once fio has made ``target``."""
    def interrupt():
        deadline = time.monotonic() + 30
        while not (target.exists() and target.stat().st_size >= size) and time.monotonic() < deadline:
            time.sleep(0.005)  # fio allocates the file whole before it writes it
        os.kill(os.getpid(), signal.SIGINT)

    old = signal.signal(signal.SIGINT, signal.default_int_handler)  # a background runner ignores SIGINT
    try:
        threading.Thread(target=interrupt, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            prepare_target(target, size, overwrite)
    finally:
        signal.signal(signal.SIGINT, old)


@needs_fio
def test_an_interrupted_layout_leaves_no_file_a_later_replay_would_trust(tmp_path):
    # fio allocates the whole file before it writes it: a layout stopped by Ctrl-C left a file of
    # full size, mostly unwritten extents, and the next replay (--overwrite) skipped the layout and
    # measured reads that return zeros without reaching the device.
    size = 2 << 30  # seconds of direct writes even on a fast disk: the SIGINT comes well before the end
    if shutil.disk_usage(tmp_path).free < size + (3 << 30):
        pytest.skip("needs 5 GiB free")
    new = tmp_path / "new"
    _interrupted_layout(new, size, overwrite=False)
    assert not new.exists()  # made by the layout: removed
    old = tmp_path / "old"
    old.write_bytes(b"x" * 5000)
    _interrupted_layout(old, size, overwrite=True)
    assert old.stat().st_size == 5000  # an existing file goes back to its size: the next replay lays it out


def _fio_processes(marker: str) -> list[int]:
    """Pids of live processes whose command line holds ``marker``."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            cmd = (entry / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        if entry.name.isdigit() and b"fio" in cmd and marker.encode() in cmd:
            pids.append(int(entry.name))
    return pids


@needs_fio
@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 130)])
def test_ctrl_c_or_kill_of_replay_leaves_no_fio_behind(tmp_path, sig, code):
    # 40 requests over 20 s: fio is still replaying when the signal comes. SIGTERM (kill, a job
    # scheduler) ended Python at once and left fio, in its own session, replaying to the end.
    n = 40
    t0 = 128166372003061629
    rows = [f"{t0 + k * 5_000_000},hm,0,{'Read' if k % 2 else 'Write'},{k * 8192},4096,100" for k in range(n)]
    trace = tmp_path / "slow.csv"
    trace.write_text("\n".join(rows) + "\n")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = os.environ | {"TMPDIR": str(tmp)}  # fio's job files live here: the marker of its processes
    proc = subprocess.Popen([sys.executable, "-m", "thesios.cli", "replay", str(trace), "--format", "msr", "--target",
                             str(tmp_path / "t"), "--size-mib", "64", "--jobs", "8"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            # a runner started in the background (`cmd &`) ignores SIGINT, and
                            # Python keeps an ignored SIGINT ignored: give the child the default
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while not _fio_processes(str(tmp)) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert _fio_processes(str(tmp)), "the replay's fio never started"
    time.sleep(0.5)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == code and err.strip().splitlines()[-1] == "thesios: interrupted"
    assert _fio_processes(str(tmp)) == [] and _fio_processes(str(tmp_path / "t")) == []
    assert list(tmp.iterdir()) == []  # the replay's temporary folder is gone too
