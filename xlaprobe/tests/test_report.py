"""``xlaprobe report`` without a browser: error maps with known answers, what is gathered from a
store with known rows (programs/s, best speedup so far, release strip), escaping, and the
command's errors. The browser test is `test_report_browser.py`."""

import json
import pathlib
import sqlite3

import numpy as np
import pytest

from xlaprobe import errormap
from xlaprobe.campaign import CAMPAIGN_SCHEMA
from xlaprobe.errors import CorruptArtifact, InvalidArgument
from xlaprobe.oracle import Verdict, VerdictKind
from xlaprobe.report.gather import gather, programs_per_second
from xlaprobe.report.render import release_strip, render, write_atomic
from xlaprobe.store import Store


# ------------------------------------------------------------------------------ error maps


def test_element_error_is_in_units_of_the_dtype_bound():
    ref = np.array([1.0, 2.0, 0.0, np.nan, np.inf, 1.0])
    out = np.array([1.0, 2.0 + 2e-5, 0.0, np.nan, np.inf, np.nan], np.float32)
    error = errormap.element_error(out, ref)
    atol, rtol = float(np.finfo(np.float32).tiny), 1e-5
    # 2.00002 rounds to float32 first: the error is measured on the value the config produced.
    expected_1 = abs(float(np.float32(2.0 + 2e-5)) - 2.0) / (atol + rtol * 2.0)
    assert error[0] == 0 and error[1] == pytest.approx(expected_1)
    assert error[2] == 0 and error[3] == 0 and error[4] == 0  # same special values: no error
    assert error[5] == np.inf  # NaN where the reference is finite
    ints = errormap.element_error(np.array([3, 5], np.int32), np.array([3, 7], np.int32))
    assert ints.tolist() == [0.0, 2.0]
    with pytest.raises(ValueError, match="shape"):
        errormap.element_error(np.zeros(3), np.zeros(4))


def test_pool_keeps_the_largest_error_of_each_cell_and_where_it_is():
    error = np.zeros((130, 3))           # rows: 130 -> 65 cells of 2 rows (at most 64: 3 rows)
    error[100, 1] = 7.0
    grid, split, block = errormap.pool(error)
    assert grid.shape == (44, 3) and block == (3, 1) and split == 1
    assert grid[100 // 3, 1] == 7.0 and grid.sum() == 7.0
    # A narrow last dimension (channels) joins the columns: (4, 5, 6, 3) -> 20 rows x 18 cols.
    grid, split, block = errormap.pool(np.ones((4, 5, 6, 3)))
    assert (grid.shape, split, block) == ((20, 18), 2, (1, 1))
    assert errormap.pool(np.array(5.0))[0].tolist() == [[5.0]]  # a scalar is one cell
    wide = np.zeros(1000)
    wide[999] = np.inf
    grid, _, block = errormap.pool(wide)
    assert grid.shape == (1, 125) and block == (1, 8) and grid[0, -1] == np.inf


def test_error_maps_round_trip_without_pickle(tmp_path):
    verdicts = [Verdict("xla", "[0]", 0, VerdictKind.OK),
                Verdict("xla", "[1]", 1, VerdictKind.MISMATCH),
                Verdict("xla", "[2]", 2, VerdictKind.CRASH)]
    outputs = [np.zeros(4, np.float32), np.array([[1.0, 5.0]], np.float32), np.zeros(1)]
    reference = [np.zeros(4), np.array([[1.0, 1.0]]), np.zeros(1)]
    [only] = errormap.error_maps(outputs, reference, verdicts)
    assert only.index == 1 and only.output == "[1]" and only.shape == (1, 2)
    assert only.grid[0, 0] == 0 and only.grid[0, 1] > 1e5 and only.over == 0.5
    path = errormap.save_error_maps(tmp_path / "errors.npz", [only])
    [back] = errormap.load_error_maps(path)
    assert (back.index, back.output, back.shape, back.dtype, back.split, back.block) == \
        (1, "[1]", (1, 2), "float32", 1, (1, 1))
    np.testing.assert_array_equal(back.grid, only.grid)
    # A file holding a pickled object is refused, not unpickled.
    np.savez(tmp_path / "evil.npz", meta=np.array([{"a": 1}], dtype=object))
    with pytest.raises(CorruptArtifact, match="cannot read the error maps"):
        errormap.load_error_maps(tmp_path / "evil.npz")


# ------------------------------------------------------------------------------ gathering


def test_programs_per_second_has_known_answers():
    # 2 checks a second for 10 s, then none for 10 s: 5 bins of 4 s.
    times = [100.25 + 0.5 * i for i in range(20)]
    rate = programs_per_second(times, 100.0, 120.0, bins=5)
    assert rate == [(2.0, 2.0), (6.0, 2.0), (10.0, 1.0), (14.0, 0.0), (18.0, 0.0)]
    assert programs_per_second(times, 100.0, 100.0) == []
    # Bins are at least 1 s wide: a 3 s span gets 3 bins; times outside are ignored.
    assert programs_per_second([0.5, 1.5, 2.5, 9.0], 0.0, 3.0) == [(0.5, 1.0), (1.5, 1.0),
                                                                   (2.5, 1.0)]


def _known_store(path: pathlib.Path) -> None:
    """A store with known rows: 12 fuzz checks of one campaign (3 a second for 4 s), one
    finding on a program whose name needs escaping, one tuning run, one bisection."""
    with Store(path) as store:
        run = store.start_tuning_run("my.py:step", "p0", "tpe", 4, 0)
        for speedup, status in ((1.10, "ok"), (0.90, "ok"), (None, "compile-error"),
                                (1.30, "ok")):
            store.record_measurement(run, "p0", {"xla_cpu_use_xnnpack": speedup is None},
                                     status, {}, speedup=speedup,
                                     low=None if speedup is None else speedup - 0.05,
                                     high=None if speedup is None else speedup + 0.05)
        store.record_measurement(run, "p0", {}, "ok", {}, speedup=1.25, low=1.2, high=1.3,
                                 replicate=True)
        store.finish_tuning_run(run, {"accepted": True, "speedup": 1.25,
                                      "interval": [1.2, 1.3], "xla_flags": "--xla_x=1",
                                      "knobs": {"block": 64}})
        store.record_bisection("p1", 1, "xla", {
            "releases": ["0.4.33", "0.5.3", "0.7.2"], "first_bad": "0.5.3",
            "last_good": "0.4.33", "first_fixed": None, "bad_at_oldest": False,
            "runs": [{"release": "0.4.33", "verdict": "ok"},
                     {"release": "0.5.3", "verdict": "mismatch"}]})
    db = sqlite3.connect(path, isolation_level=None)
    db.execute(CAMPAIGN_SCHEMA)
    state = {"programs": 12, "findings": 0, "fingerprints": {}, "seconds": 4.0,
             "coverage": {"add": 12, "sub": 3}}
    db.execute("INSERT INTO fuzz_campaigns (configs, start_seed, next_seed, state, status, "
               "created, updated) VALUES ('xla,reference', 0, 12, ?, 'done', 1000.0, 1004.0)",
               (json.dumps(state),))
    for seed in range(12):
        db.execute("INSERT INTO programs VALUES (?, 'fuzz', ?, ?, '', 3, NULL, 0)",
                   (f"f{seed}", f"fuzz:{seed}", seed))
        db.execute("INSERT INTO checks (program_id, configs, judged_against, created, campaign)"
                   " VALUES (?, 'xla,reference', 'reference', ?, 1)", (f"f{seed}", 1000.1 + seed / 3))
    db.execute("INSERT INTO programs VALUES ('p1', 'user', '<script>alert(1)</script>', NULL, "
               "'', 2, NULL, 0)")
    db.execute("INSERT INTO checks (program_id, configs, judged_against, created) VALUES "
               "('p1', 'xla,reference', 'reference', 5)")
    db.execute("INSERT INTO findings (program_id, config, kind, fingerprint, artifact, check_id, "
               "created) VALUES ('p1', 'xla', 'mismatch', 'abc123', NULL, 13, 5)")
    db.close()


def test_gather_reads_known_rows(tmp_path):
    _known_store(tmp_path / "x.db")
    with Store(tmp_path / "x.db", readonly=True) as store:
        data = gather(store)
    [campaign] = data.campaigns
    assert campaign.programs == 12 and campaign.programs_per_s == 3.0
    assert [r for _, r in campaign.rate] == [3.0, 3.0, 3.0, 3.0]
    assert campaign.coverage["add"] == 12 and campaign.coverage["sub"] == 3
    # Every catalogue primitive is listed, the unexercised ones with 0.
    assert campaign.covered == 2 and campaign.coverage.get("cos") == 0
    [tuning] = data.tunings
    assert [m.status for m in tuning.measurements] == ["ok", "ok", "compile-error", "ok", "ok"]
    assert tuning.best_so_far == [1.10, 1.10, 1.10, 1.30, 1.30]  # the replicate is no candidate
    assert tuning.measurements[-1].replicate and tuning.result["xla_flags"] == "--xla_x=1"
    [finding] = data.findings
    assert finding.bisection["first_bad"] == "0.5.3" and finding.error_maps == ()
    assert "no artifact" in finding.error_note and finding.localization is None
    assert release_strip(finding.bisection) == [("0.4.33", "ok"), ("0.5.3", "mismatch"),
                                                ("0.7.2", "not run")]


def test_the_page_escapes_store_text_and_says_what_is_empty(tmp_path, monkeypatch):
    _known_store(tmp_path / "x.db")
    with Store(tmp_path / "x.db", readonly=True) as store:
        page = render(gather(store))
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "http://" not in page.replace("http://www.w3.org", "")  # nothing fetched
    assert "No finding was localized yet" in page and "No finding was reduced yet" in page
    assert "0.5.3: mismatch" in page and "0.7.2: not run" in page
    assert "No error map for finding 1: no artifact" in page  # the id, not a blank
    assert page.count('src="data:image/svg+xml;base64,') == 2  # the rate and the tuning plots
    # Past DETAILED_FINDINGS, findings are listed without their verdict tables.
    monkeypatch.setattr("xlaprobe.report.render.DETAILED_FINDINGS", 0)
    with Store(tmp_path / "x.db", readonly=True) as store:
        listed = render(gather(store))
    assert "the other 1 are listed above" in listed and 'id="finding-' not in listed
    assert 'id="finding-' in page and "abc123" in listed
    with Store(tmp_path / "empty.db") as store:
        empty = render(gather(store))
    for words in ("No findings in this store", "No fuzzing campaign", "No tuning search",
                  "No finding was bisected"):
        assert words in empty


def test_write_atomic_replaces_whole(tmp_path):
    target = write_atomic(tmp_path / "sub" / "r.html", "one")
    write_atomic(target, "two")
    assert target.read_text() == "two" and [p.name for p in target.parent.iterdir()] == ["r.html"]


def _report(capsys, monkeypatch, *args):
    """Run ``xlaprobe report ARGS`` in this process (as the entry point does): (exit code,
    stderr)."""
    from xlaprobe.cli.commands import main
    monkeypatch.setattr("sys.argv", ["xlaprobe", "report", *map(str, args)])
    with pytest.raises(SystemExit) as info:
        main()
    return info.value.code, capsys.readouterr().err


def test_report_command_errors_are_one_line(tmp_path, capsys, monkeypatch):
    code, err = _report(capsys, monkeypatch, "--db", tmp_path / "none.db")
    assert code == 2 and "no store at" in err and len(err.strip().splitlines()) == 1
    (tmp_path / "junk.db").write_text("not sqlite")
    code, err = _report(capsys, monkeypatch, "--db", tmp_path / "junk.db")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    _known_store(tmp_path / "x.db")
    code, err = _report(capsys, monkeypatch, "--db", tmp_path / "x.db", "--out", tmp_path / "r.html")
    assert code == 0, err
    assert "1 finding(s), 1 campaign(s), 1 tuning search(es)" in " ".join(err.split())
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    code, err = _report(capsys, monkeypatch, "--db", tmp_path / "x.db", "--out", tmp_path)
    assert code == 2 and "is a directory" in err
    # Like the other tools, a missing folder is refused, not created.
    code, err = _report(capsys, monkeypatch, "--db", tmp_path / "x.db",
                        "--out", tmp_path / "no" / "such" / "r.html")
    assert code == 2 and "does not exist" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "no").exists()


def test_store_select_runs_queries_only(tmp_path):
    with Store(tmp_path / "x.db") as store:
        assert store.select("SELECT COUNT(*) FROM findings") == [(0,)]
        for statement in ("DELETE FROM findings", "WITH x AS (SELECT 1) DELETE FROM findings"):
            with pytest.raises(InvalidArgument, match="SELECT queries only"):
                store.select(statement)


def test_report_never_writes_over_the_store_or_another_database(tmp_path):
    from xlaprobe.cli.report import report_command
    from xlaprobe.errors import InvalidArgument
    db = tmp_path / "x.db"
    Store(db).close()
    other = tmp_path / "other.db"
    Store(other).close()
    before = db.read_bytes()
    for out in (db, other):
        with pytest.raises(InvalidArgument, match="the store itself|an SQLite database"):
            report_command(db=db, out=out)
    assert db.read_bytes() == before


def test_a_freedom_finding_is_shown_with_its_label_and_why_it_has_no_error_map():
    # A freedom differs from the honest float32 run, not from float64 (excess range gives
    # float64's answer): an error map against the reference would show nothing.
    from xlaprobe.report.gather import _error_maps
    from xlaprobe.store import StoredFinding

    stored = StoredFinding(3, "p", "prog", "xla", "freedom", "k", None, 0.0, freedom="fma+ftz")
    assert stored.label == "freedom:fma+ftz"
    assert StoredFinding(4, "p", "prog", "xla", "mismatch", "k", None, 0.0).label == "mismatch"
    maps, note = _error_maps(None, stored.freedom)
    assert maps == [] and "freedom:fma, freedom:ftz" in note and "honest run" in note


def test_findings_of_one_check_print_their_verdict_table_once(tmp_path):
    # xla and eager failing on one program are two findings of one check: one table, and the
    # second finding points to it; a finding of another check keeps its own table.
    _known_store(tmp_path / "x.db")
    db = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
    db.execute("INSERT INTO findings (program_id, config, kind, fingerprint, artifact, check_id, "
               "created) VALUES ('p1', 'eager', 'mismatch', 'abc124', NULL, 13, 6)")
    db.execute("INSERT INTO findings (program_id, config, kind, fingerprint, artifact, check_id, "
               "created) VALUES ('f0', 'xla', 'mismatch', 'abc125', NULL, 1, 7)")
    db.close()
    with Store(tmp_path / "x.db", readonly=True) as store:
        data = gather(store)
    ids = {f.stored.config + ":" + f.stored.program_id: f.stored.id for f in data.findings}
    page = render(data)
    assert page.count("Verdicts of every configuration of the check that stored it") == 2
    assert page.count("Stored by the same check as") == 1
    # Newest first: the eager finding is listed before the xla one, so xla's points to eager's.
    assert (f'<a href="#finding-{ids["eager:p1"]}">finding {ids["eager:p1"]}</a>' in page)
