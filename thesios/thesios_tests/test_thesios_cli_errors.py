"""Bad input found by trying the CLI as a new user: one line on stderr, exit 2 (130 for Ctrl-C),
messages naming what the user typed, and no file left behind."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from thesios.cli import main

FIX = Path(__file__).parent / "fixtures"
SHARD = FIX / "thesios_shard.csv"


def fails(args: list[str], capsys, code: int = 2) -> str:
    """Run the CLI expecting exit ``code``; return its stderr, checked to be one line."""
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    return err.strip()



def test_ctrl_c_exits_130_with_one_line_and_no_file(tmp_path, capsys, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("thesios.cli.read_trace", interrupted)
    out = tmp_path / "t.parquet"
    assert fails(["convert", str(SHARD), "-o", str(out)], capsys, code=130) == "thesios: interrupted"
    assert list(tmp_path.iterdir()) == []
    # During a write: the temp file goes too.
    monkeypatch.setattr("pyarrow.parquet.write_table", interrupted)
    assert fails(["sample", "-o", str(out), "--disks-per-class", "1"], capsys, code=130) == "thesios: interrupted"
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_while_importing_exits_130(monkeypatch, capsys):
    from thesios._console import main as console_main

    class Importing(types.ModuleType):
        def __getattr__(self, name):
            raise KeyboardInterrupt

    monkeypatch.setitem(sys.modules, "thesios.cli", Importing("thesios.cli"))
    with pytest.raises(SystemExit) as exc:
        console_main()
    assert exc.value.code == 130
    assert capsys.readouterr().err == "thesios: interrupted\n"


def test_output_errors_name_the_output_not_a_temp_file(tmp_path, capsys, monkeypatch):
    out = tmp_path / "no" / "t.parquet"
    assert fails(["convert", str(SHARD), "-o", str(out)], capsys) == f"thesios: error: {out}: its folder {out.parent} does not exist"
    assert fails(["sample", "-o", str(out), "--disks-per-class", "1"], capsys).endswith(f"{out}: its folder {out.parent} does not exist")
    folder = tmp_path / "d.parquet"
    folder.mkdir()
    assert fails(["convert", str(SHARD), "-o", str(folder)], capsys) == f"thesios: error: {folder}: is a folder, not a file"

    # Unwritable folder (tests may run as root, who may write anywhere: deny the temp file instead).
    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("tempfile.mkstemp", denied)
    out = tmp_path / "t.parquet"
    err = fails(["convert", str(SHARD), "-o", str(out)], capsys)
    assert err == f"thesios: error: {out}: cannot write there (Permission denied)"
    assert [p.name for p in tmp_path.iterdir()] == ["d.parquet"]  # nothing written, no folder made


def test_report_path_is_checked_before_the_run(tmp_path, capsys, monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("validation ran although its report could not be written")

    monkeypatch.setattr("thesios.cli.validate", never)
    assert fails(["validate", "--report", str(tmp_path)], capsys) == f"thesios: error: {tmp_path}: is a folder, not a file"
    assert fails(["synth", "-o", str(tmp_path / "x" / "t.csv")], capsys).endswith(f"its folder {tmp_path / 'x'} does not exist")


def test_every_output_in_a_missing_folder_is_refused_before_any_work(tmp_path, capsys, monkeypatch):
    """A mistyped folder is named in one line, exit 2, before any work or output; no folder is made."""
    def never(*args, **kwargs):
        raise AssertionError("work started although the output's folder does not exist")

    for name in ("validate", "_fleet_spec", "_load_trace", "read_trace"):
        monkeypatch.setattr(f"thesios.cli.{name}", never)
    monkeypatch.setattr("thesios.fleet.FleetGenerator", never)
    typo = tmp_path / "reprots" / "deeper"
    cases = {
        "r.html": [["validate", "--report"], ["whatif", "-s", "rpm:5400", "--report"],
                   ["whatif", str(SHARD), "-s", "rpm:5400", "--json", "--report"]],
        "t.csv": [["synth", "-o"]],
        "t.iolog": [["synth", "-o"]],
        "t.parquet": [["convert", str(SHARD), "-o"], ["sample", "-o"]],
    }
    for file, commands in cases.items():
        for args in commands:
            out = typo / file
            with pytest.raises(SystemExit) as exc:
                main([*args, str(out)])
            assert exc.value.code == 2
            assert capsys.readouterr() == ("", f"thesios: error: {out}: its folder {typo} does not exist\n")
    # A file where the folder should be: named as such.
    (tmp_path / "plain").write_text("x")
    out = tmp_path / "plain" / "r.html"
    assert fails(["validate", "--report", str(out)], capsys) == f"thesios: error: {out}: its folder {out.parent} is a file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain"]


def test_parquet_outputs_must_be_named_parquet(tmp_path, capsys):
    for args in (["convert", str(SHARD), "-o", str(tmp_path / "t.csv")], ["sample", "-o", str(tmp_path / "s.csv")]):
        assert fails(args, capsys).endswith("the output is Parquet, its name must end in .parquet")
    assert list(tmp_path.iterdir()) == []


def test_missing_inputs_and_folders_in_plain_words(tmp_path, capsys):
    missing = tmp_path / "missing.csv"
    assert fails(["convert", str(missing), "-o", str(tmp_path / "t.parquet")], capsys) == f"thesios: error: {missing}: no such file"
    assert fails(["whatif", str(tmp_path), "-s", "rpm:5400"], capsys) == f"thesios: error: {tmp_path}: is a folder, not a trace file"
    assert fails(["convert", "--format", "msr", str(tmp_path), "-o", str(tmp_path / "t.parquet")], capsys).endswith("is a folder, not a trace file")
    assert fails(["validate", "--fleet", str(missing)], capsys) == f"thesios: error: {missing}: no such file"
    assert fails(["validate", "--fleet", str(tmp_path)], capsys) == f"thesios: error: {tmp_path}: is a folder, not a fleet spec file"


@pytest.mark.parametrize("spec, message", [
    ("spin-down:timeout=-5", "scenario 'spin-down:timeout=-5': timeout '-5' is not a non-negative duration"),
    ("capacity:x0", "scenario 'capacity:x0': expected a factor in (0, 100] like x2"),
    ("cache:x1e300", "scenario 'cache:x1e300': expected a factor in (0, 100] like x2"),
    ("rpm:abc", "scenario 'rpm:abc': expected rpm:<number>"),
])
def test_malformed_scenarios_say_which(spec, message, capsys):
    assert fails(["whatif", str(SHARD), "-s", spec], capsys).startswith(f"thesios: error: {message}")


def test_whatif_table_keeps_scenario_names_whole_on_80_columns(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    spin = "spin-down:zone=COLD,timeout=300s"
    main(["whatif", str(SHARD), "-s", "rpm:5400", "-s", spin, "-s", "cache:x2"])
    out = capsys.readouterr().out
    assert "rpm:5400" in out and f"{spin}: energy saving" in out
    assert "cache:x2: LRU miss ratio" in out
    # The group's title holds the trace's path, which may wrap where the checkout is deep.
    assert "(1 disk)" in " ".join(out.split())
    assert "0.00%" not in out  # the fixture's tiny utilization keeps significant digits


def test_whatif_refuses_a_many_disk_trace(tmp_path, capsys):
    samples = tmp_path / "samples.parquet"
    main(["sample", "-o", str(samples), "--disks-per-class", "1", "--rate", "1/1000"])
    capsys.readouterr()
    err = fails(["whatif", str(samples), "-s", "rpm:5400"], capsys)
    assert err == f"thesios: error: {samples}: holds 4 disks (column disk_id); pick one with --device DISK_ID"
    assert fails(["whatif", str(samples), "-s", "rpm:5400", "--device", "9"], capsys) == \
        f"thesios: error: {samples}: no disk_id '9' (disk_ids: 0, 1, 2, 3)"
    main(["whatif", str(samples), "-s", "rpm:5400", "--device", "2", "--json"])
    assert json.loads(capsys.readouterr().out)["requests"] > 0


def test_sample_refuses_a_draw_too_big_for_memory(tmp_path, capsys):
    out = tmp_path / "s.parquet"
    err = fails(["sample", "-o", str(out), "--rate", "1"], capsys)  # 400 disk-days at full rate
    assert err.startswith("thesios: error: p=1 of 400 disks x 1 days is about ") and "lower --rate" in err
    assert list(tmp_path.iterdir()) == []


def test_whatif_on_another_format_says_to_name_it(capsys):
    err = fails(["whatif", str(FIX / "msr_hm_0_head.csv"), "-s", "rpm:5400"], capsys)
    assert ":1: header " in err and err.endswith("give --format msr|alibaba|tencent")


def test_whatif_fleet_options_with_a_trace_are_refused(capsys):
    err = fails(["whatif", str(SHARD), "-s", "rpm:5400", "--rate", "1/100", "--days", "2"], capsys)
    assert err == "thesios: error: --rate, --days: only for the embedded fleet, not with a TRACE"
    main(["whatif", str(SHARD), "-s", "rpm:5400", "--seed", "3", "--rpm", "5400"])  # trace options still work


def test_parquet_read_as_text_a_cut_parquet_and_a_cut_row_say_so_in_one_line(tmp_path, capsys):
    good = tmp_path / "good.parquet"
    main(["convert", str(SHARD), "-o", str(good)])
    capsys.readouterr()
    err = fails(["convert", str(good), "--format", "thesios", "-o", str(tmp_path / "o.parquet")], capsys)
    assert err == f"thesios: error: {good}: is a Parquet file, not a text trace (give --format parquet, or auto)"
    # whatif knows Parquet by its magic bytes, whatever the name; a cut one says why.
    renamed = tmp_path / "trace.bin"
    renamed.write_bytes(good.read_bytes())
    main(["whatif", str(renamed), "-s", "rpm:5400", "--json"])
    assert json.loads(capsys.readouterr().out)["requests"] == 46
    cut = tmp_path / "cut.parquet"
    cut.write_bytes(good.read_bytes()[:2000])
    err = fails(["whatif", str(cut), "-s", "rpm:5400", "--report", str(tmp_path / "r.html")], capsys)
    assert err == f"thesios: error: {cut}: not a readable Parquet trace (Parquet magic bytes not found in footer)"
    data = SHARD.read_bytes()
    shard = tmp_path / "cut.csv"
    shard.write_bytes(data[: data.rfind(b",", 0, len(data) - 30)])  # cut inside its last row
    err = fails(["whatif", str(shard), "-s", "rpm:5400", "--report", str(tmp_path / "r.html")], capsys)
    assert ": expected 17 fields, got " in err and err.endswith("; the last line has no line end: the file looks truncated")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.csv", "cut.parquet", "good.parquet", "trace.bin"]


def test_convert_sniffs_by_default_like_every_command_and_a_wrong_format_says_auto(tmp_path, capsys):
    # convert's --format defaulted to thesios while whatif, replay and validate sniffed (auto).
    blk = FIX / "blkparse_sda.txt"
    out = tmp_path / "x.parquet"
    main(["convert", str(blk), "-o", str(out)])
    assert capsys.readouterr().err.startswith("3 rows -> ")  # the fixture holds 3 requests
    for cmd in (["convert", str(blk), "-o", str(out)], ["whatif", str(blk), "-s", "rpm:5400"]):
        err = fails([*cmd, "--format", "msr"], capsys)
        assert err.startswith(f"thesios: error: {blk}:1: ")
        assert err.endswith("; the file looks like a blkparse trace: give --format auto (or --format blkparse)")
    # A file no sniffer knows, read as a Thesios shard by default: the formats to name instead.
    err = fails(["convert", str(FIX / "msr_hm_0_head.csv"), "-o", str(out)], capsys)
    assert err.endswith("; for other trace formats give --format msr|alibaba|tencent")


@pytest.mark.parametrize("args", [["validate"], ["whatif", "-s", "cache:x2"], ["synth", "-o", "OUT"], ["sample", "-o", "OUT"]])
def test_every_command_takes_seeds_0_to_2_32_minus_1(args, tmp_path, capsys):
    args = [str(tmp_path / "x.parquet") if a == "OUT" else a for a in args]
    # the tool's own words, as a fleet file's seed and adares's and geodml's --seed (not the option parser's)
    assert fails([*args, "--seed", "-1"], capsys) == "thesios: error: --seed must be an integer in [0, 4294967295], got -1"
    assert fails([*args, "--seed", "99999999999999999999"], capsys) == (
        "thesios: error: --seed must be an integer in [0, 4294967295], got an integer of 20 digits")
    assert fails([*args, "--seed", str(2**32)], capsys) == "thesios: error: --seed must be an integer in [0, 4294967295], got 4294967296"
    fleet = tmp_path / "f.json"
    fleet.write_text('{"seed": -5}')
    if args[0] != "sample":
        assert fails([*args, "--fleet", str(fleet)], capsys) == f"thesios: error: {fleet}: seed must be an integer in [0, 4294967295], got -5"
    assert list(tmp_path.iterdir()) == [fleet]


@pytest.mark.parametrize("fmt, fields", [("msr", 7), ("alibaba", 5), ("tencent", 5)])
def test_binary_garbage_is_one_line_without_an_ignored_exception(fmt, fields, tmp_path, capsys):
    import numpy as np

    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(b"0He5\x9f" + np.random.default_rng(0).bytes(3000))  # not UTF-8 from byte 4
    err = fails(["convert", str(garbage), "--format", fmt, "-o", str(tmp_path / "g.parquet")], capsys)
    assert err.startswith(f"thesios: error: {garbage}:1: expected {fields} fields, got ")
    assert err.endswith("more bad rows)")
    assert list(tmp_path.iterdir()) == [garbage]


@pytest.mark.parametrize("args", [["validate"], ["whatif", "-s", "cache:x2"], ["synth", "-o", "OUT"], ["sample", "-o", "OUT"]])
def test_days_are_bounded_up_front_in_every_command(args, tmp_path, capsys):
    args = [str(tmp_path / "x.parquet") if a == "OUT" else a for a in args]
    for days, got in (("100000", "100000"), ("99999999999999999999", "an integer of 20 digits"), ("32", "32"), ("0", "0")):
        assert fails([*args, "--days", days], capsys) == f"thesios: error: --days must be an integer in [1, 31], got {got}"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("spec, message", [
    ("spin-down:zone=COLD,,timeout=300s", "an empty item between commas"),
    ("disk:fifo,,writeback=1MiB", "an empty item between commas"),
    ("disk:fifo,writeback=64MiB,writeback=1MiB", "writeback is given twice"),
    ("spin-down:zone=COLD,zone=WARM", "zone is given twice"),
    ("disk:fifo,zone=COLD,zone=WARM", "zone is given twice"),
    ("spin-down:=3", "'=3' names no parameter"),
])
def test_every_scenario_kind_refuses_empty_items_and_repeated_keys(spec, message, capsys):
    assert fails(["whatif", str(SHARD), "-s", spec], capsys) == f"thesios: error: scenario {spec!r}: {message}"


def test_a_trace_file_given_twice_is_refused(tmp_path, capsys):
    out = tmp_path / "t.parquet"
    assert fails(["convert", str(SHARD), str(SHARD), "-o", str(out)], capsys) == (
        f"thesios: error: {SHARD}: given twice; each trace file counts once")
    assert not out.exists()
    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "a.csv").write_bytes(SHARD.read_bytes())
    assert fails(["validate", "--traces", str(folder), "--traces", str(folder / "a.csv")], capsys) == (
        f"thesios: error: {folder / 'a.csv'}: given twice; each trace file counts once")
    assert fails(["validate", "--traces", str(folder / "a.csv"), "--traces", str(folder / ".." / "traces" / "a.csv")], capsys) == (
        f"thesios: error: {folder / '..' / 'traces' / 'a.csv'}: given twice (also as {folder / 'a.csv'}); each trace file counts once")


@pytest.mark.parametrize("rate, message", [
    ("1e-300", "p=1e-300 over 4 days needs 2.5e+299 disks per class (limit 50,000); raise --rate or use more days"),
    ("1e-9", "p=1e-09 over 4 days needs 250,000,002 disks per class (limit 50,000); raise --rate or use more days"),
    ("-1/-5", "--rate: '-1/-5' has a part that is not above 0; write a fraction like 1/10000"),
    ("1/-5", "--rate: '1/-5' has a part that is not above 0; write a fraction like 1/10000"),
    # the third part was ignored: 1/2/3 ran at p = 0.5
    ("1/2/3", "--rate: '1/2/3' is not a number or a fraction like 1/10000"),
    ("1/", "--rate: '1/' is not a number or a fraction like 1/10000"),
])
def test_tiny_rates_and_negative_fractions_in_plain_words(rate, message, capsys):
    assert fails(["validate", "--rate", rate], capsys) == f"thesios: error: {message}"
