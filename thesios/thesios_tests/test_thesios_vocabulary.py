"""The shared vocabulary: --out (old --output still works), --json, --quiet, --jobs; plain progress lines."""

from __future__ import annotations

import json

import numpy as np

from thesios.cli import main
from thesios.fleet import default_fleet
from thesios.partitions import LocalBackend, sample_fleet


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


def test_progress_off_a_terminal_is_one_plain_unwrapped_line_per_step(tmp_path, capsys):
    main(["synth", "-o", str(tmp_path / "t.parquet"), "--rate", "1/20", "--days", "1", "--json"])
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("thesios: sampling ") and all(line.startswith("thesios: ") for line in err)
    assert not any(".py:" in line for line in err)
    # Never wrapped at 80 columns: the step naming the group is one line however long.
    assert any(line.startswith("thesios: synthesizing a disk like 0 from its group's ") and line.endswith(" other disks") for line in err)
    assert err[-1] == f"thesios: writing {tmp_path / 't.parquet'}"


def test_jobs_give_the_same_samples_as_one_process():
    spec = default_fleet(disks_per_class=6, days=2, seed=1)
    one = sample_fleet(spec, 1 / 50, 3, LocalBackend())
    two = sample_fleet(spec, 1 / 50, 3, LocalBackend(jobs=2))
    assert len(one) > 0
    for name in ("disk_id", "start_time", "file_offset", "disk_time"):
        np.testing.assert_array_equal(getattr(one, name), getattr(two, name))
