"""The shared vocabulary: --out (old --output still works), --json, --quiet, --jobs; plain progress lines."""

from __future__ import annotations

import json

from pathlib import Path

import numpy as np
import pytest

from thesios.cli import main
from thesios.fleet import default_fleet
from thesios.partitions import LocalBackend, sample_fleet

RECORDED = Path(__file__).parents[1] / "data" / "recorded"


def test_out_and_its_hidden_old_spelling_write_the_same_file(tmp_path, capsys):
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    main(["sample", "--out", str(a), "--disks-per-class", "2", "--rate", "1/1000", "--json"])
    doc = json.loads(capsys.readouterr().out)
    main(["sample", "--output", str(b), "--disks-per-class", "2", "--rate", "1/1000", "--quiet"])
    assert capsys.readouterr() == ("", "")
    assert doc["out"] == str(a) and doc["samples"] > 0
    assert a.read_bytes() == b.read_bytes()
    main(["sample", "--help"])
    assert "--output" not in capsys.readouterr().out


@pytest.mark.skipif(not RECORDED.is_dir(), reason="the committed recording is missing")
def test_progress_off_a_terminal_is_one_plain_unwrapped_line_per_step(capsys):
    """Off a terminal: one plain ``thesios: step`` line per step, never wrapped, no source locations;
    groups counted from 0 as in the JSON. (Also: identification on real traces reports its purity.)"""
    main(["validate", "--traces", str(RECORDED), "--group-by", "workload", "--identify", "--json"])
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    err = captured.err.splitlines()
    assert doc["grouping"]["by"] == "identification" and 0.0 < doc["grouping"]["purity"] <= 1.0
    assert err[0] == f"thesios: 96 disks in {doc['grouping']['groups']} groups (identification)"
    assert all(line.startswith("thesios: ") and ".py:" not in line for line in err)
    first = min(doc["groups"])
    assert first == "group 0" and any(line.startswith("thesios: group 0: ") for line in err)


def test_jobs_give_the_same_samples_as_one_process():
    spec = default_fleet(disks_per_class=6, days=2, seed=1)
    one = sample_fleet(spec, 1 / 50, 3, LocalBackend())
    two = sample_fleet(spec, 1 / 50, 3, LocalBackend(jobs=2))
    assert len(one) > 0
    for name in ("disk_id", "start_time", "file_offset", "disk_time"):
        np.testing.assert_array_equal(getattr(one, name), getattr(two, name))


@pytest.mark.parametrize("command", [["validate"], ["whatif", "-s", "rpm:5400"]])
def test_the_html_report_is_out_and_report_its_hidden_old_spelling(tmp_path, capsys, command):
    # validate and whatif wrote their report with --report while adares and geodml use --out.
    for flag in ("--out", "--report"):
        with pytest.raises(SystemExit) as code:
            main([*command, flag, str(tmp_path)])
        assert code.value.code == 2
        assert capsys.readouterr().err == f"thesios: error: {tmp_path}: is a folder, not a file\n"
    main([command[0], "--help"])
    shown = capsys.readouterr().out
    assert "--out" in shown and "--report" not in shown
