"""What the commands print for people and for logs: progress (`Steps`) on a terminal and as plain
lines when stderr is a pipe, --quiet, the allowed error beside the error, ULPs in the output's own
dtype, readable times, names and paths never cut."""

import io
import json
import math
import os
import pathlib
import re
import subprocess
import sys
import time

import numpy as np
import pytest
from rich.console import Console

from xlaprobe.checking import judge
from xlaprobe import verdicts
from xlaprobe.cli.console import Steps, local_time, seconds
from xlaprobe.oracle import Verdict, judge_leaf
from xlaprobe.outcome import Outcome, OutcomeKind
from xlaprobe.program import Program, Provenance

ROOT = pathlib.Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "cases"

FNS = '''
import jax.numpy as jnp


def mixed(x, i):
    return jnp.exp(x) - 3.0 * x, i + 1
'''


def xlaprobe(*args, cwd=None, timeout=600):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "xlaprobe.cli", *args], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=timeout)


# ------------------------------------------------------------------------------ Steps


def test_steps_print_one_plain_line_per_step_when_not_a_terminal():
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=False, width=200)
    with Steps("check", total=3, console=console, quiet=False) as steps:
        steps.status("compiling")                 # a status is not a line in logs
        steps.step("xla done in 1.20 s")
        steps.note("a decision worth keeping")
        steps.step("eager crash in 0.30 s")
    assert buffer.getvalue().splitlines() == [
        "check: xla done in 1.20 s (1/3)", "check: a decision worth keeping",
        "check: eager crash in 0.30 s (2/3)"]


def test_the_default_check_plans_four_asked_and_four_added_runs_labelled_so():
    # "(1/8)" for 4 configurations asked surprised users: the 4 added runs are named as added
    from xlaprobe.checking import DEFAULT_CONFIGS, run_plan
    from xlaprobe.cli.check import _plan_line

    asked = DEFAULT_CONFIGS.split(",")
    plan = run_plan(asked, asked)
    assert [label for spec, label in plan[:4]] == asked
    assert [spec for spec, _ in plan[4:]] == ["reference:ftz", "reference:native",
                                               "reference:mca[seed=1]", "reference:mca[seed=2]"]
    assert all(label.startswith(f"{spec} (added reference variant: ") for spec, label in plan[4:])
    assert _plan_line(plan) == (
        "8 runs: 4 asked (xla, xla:O0, eager, reference), 4 added by the check (reference:ftz, "
        "reference:native, reference:mca[seed=1], reference:mca[seed=2])")
    # a configuration the target names (a case's faulty one) is added too, and says why
    named = run_plan(["eager"], ["eager", "xla:O0", "reference"])
    assert [label for _, label in named[:3]] == [
        "eager", "xla:O0 (added: named by the target)", "reference (added: the float64 oracle)"]
    assert len(named) == 7


def test_steps_on_a_terminal_keep_only_kept_lines_and_quiet_prints_nothing():
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=100)
    with Steps("tune", total=2, console=console, quiet=False) as steps:
        steps.step("faster  1.100x", keep=True)
        steps.step("a transient step")
    text = buffer.getvalue()
    assert "faster  1.100x (1/2)" in text
    # The transient line is drawn and erased; no plain "tune: ..." log line is written.
    assert "tune: a transient step (2/2)\n" not in text
    quiet = io.StringIO()
    with Steps("check", total=1, console=Console(file=quiet), quiet=True) as steps:
        steps.step("xla done")
        steps.note("note")
    assert quiet.getvalue() == "" and steps.done == 1


def test_durations_and_times_for_people(monkeypatch):
    assert [seconds(s) for s in (0.4132, 9.996, 12.34, 135.2, 3725)] == [
        "0.41 s", "10.00 s", "12.3 s", "135 s", "62 min 5 s"]
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    try:
        assert local_time(1796170860.4) == "2026-12-02 00:21"
        assert local_time(None) == "-"
    finally:
        monkeypatch.undo()
        time.tzset()


# ------------------------------------------------------------------------------ oracle figures


def test_ulps_are_counted_in_the_programs_dtype():
    """An interpreter's float64 array of a float32 output is 1 float32 ULP off, not 2**29."""
    reference = np.array([1.0, 2.0], np.float64)
    one_ulp = np.nextafter(np.float32(1.0), np.float32(2.0)).astype(np.float64)
    native = np.array([one_ulp, 2.0])
    as_float32 = judge_leaf(native, reference, dtype=np.float32)
    assert as_float32.max_ulp == 1 and as_float32.kind.value == "ok"
    assert judge_leaf(native, reference).max_ulp == 2 ** 29  # float64's own ULPs, the old count


def test_integer_outputs_have_no_ulps_and_an_exact_allowance():
    ok = judge_leaf(np.array([1, 2], np.int32), np.array([1, 2], np.int32))
    wrong = judge_leaf(np.array([1, 5], np.int32), np.array([1, 2], np.int32))
    assert math.isnan(ok.max_ulp) and ok.allowed_abs == 0 and ok.margin == 0
    assert math.isnan(wrong.max_ulp) and wrong.margin == math.inf and wrong.max_abs == 3


def test_allowed_error_and_margin_of_a_float32_leaf():
    """No budget: an element may be off by max(atol, 1e-5 |ref|); half of that is margin 0.5."""
    reference = np.array([1.0, 4.0], np.float64)
    actual = np.array([1.0, 4.0 + 2e-5], np.float32)
    v = judge_leaf(actual, reference)
    error = float(np.float32(4.0 + 2e-5)) - 4.0
    assert v.kind.value == "ok"
    assert v.allowed_abs == pytest.approx(4e-5) and v.allowed_rel == pytest.approx(1e-5)
    assert v.margin == pytest.approx(error / 4e-5)
    bad = judge_leaf(np.array([1.0, 4.001], np.float32), reference)
    assert bad.kind.value == "mismatch" and bad.margin > 1
    nan = judge_leaf(np.array([1.0, np.nan], np.float32), reference)
    assert nan.kind.value == "nan-mismatch" and nan.margin == math.inf


def test_a_verdict_stored_before_the_allowance_fields_reads_them_as_nan():
    data = Verdict("xla", "[0]", 0, judge_leaf(np.ones(2), np.ones(2)).kind).to_json()
    for key in ("allowed_abs", "allowed_rel", "margin"):
        data.pop(key)
    old = Verdict.from_json(data)
    assert math.isnan(old.allowed_abs) and math.isnan(old.margin)


def test_rows_of_a_configuration_that_did_not_run_show_no_share_over():
    """A tool error compared no element: its rows say '-' for share over, not 100.0%."""
    program = Program.from_function(lambda x: x * 2.0, (np.ones(4, np.float32),),
                                    Provenance("double", "user"))
    outcomes = [Outcome("xla", OutcomeKind.RAN, (np.full(4, 2.0, np.float32),), seconds=0.5),
                Outcome("eager", OutcomeKind.TOOL_ERROR, error="no rule for a primitive"),
                Outcome("reference", OutcomeKind.RAN, (np.full(4, 2.0),))]
    result = judge(program, ["xla", "eager", "reference"], outcomes)
    console = Console(width=400, color_system=None)
    with console.capture() as captured:
        verdicts.print_result(result, {}, all_outputs=True, console=console)
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[1:-1]]
            for line in captured.get().splitlines() if line.startswith("│ ")}
    header = [c.strip() for c in next(line for line in captured.get().splitlines()
                                      if "share over" in line).split("┃")[1:-1]]
    assert rows["eager"][header.index("share over")] == "-"
    assert rows["xla"][header.index("share over")] == "0.0%"
    # The oracle's own rows compared nothing either: no ULP count.
    assert rows["reference"][header.index("max ULP")] == "-"


# ------------------------------------------------------------------------------ commands


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    """One check of a float32 and an int32 output under reference:native, piped."""
    tmp = tmp_path_factory.mktemp("output")
    (tmp / "fns.py").write_text(FNS)
    run = xlaprobe("check", f"{tmp / 'fns.py'}:mixed", "--inputs", "f32[8],i32[8]", "--configs",
                   "xla,reference:native", "--all-outputs", "--db", str(tmp / "x.db"))
    return tmp, run


def test_check_piped_prints_a_line_per_configuration_and_the_allowance(checked):
    tmp, run = checked
    assert run.returncode == 0, run.stdout + run.stderr
    # xla and reference:native asked; the reference and its four honest runs added, said
    # first and labelled on their lines, so that the count of 7 is no surprise
    assert ("check: 7 runs: 2 asked (xla, reference:native), 5 added by the check (reference, "
            "reference:ftz, reference:native, reference:mca[seed=1], reference:mca[seed=2])\n"
            ) in run.stderr
    steps = re.findall(r"^check: (.+) done in \d+\.\d\d s \((\d)/7\)$", run.stderr, re.M)
    assert [n for _, n in steps] == [str(i) for i in range(1, 8)]
    variant = "(added reference variant: "
    assert sorted(label for label, _ in steps) == sorted([
        "xla", "reference:native", "reference (added: the float64 oracle)",
        f"reference:ftz {variant}subnormals flushed, explains ftz differences)",
        f"reference:native {variant}error budget in the program's own dtypes)",
        f"reference:mca[seed=1] {variant}error budget, Monte Carlo rounding sample 1)",
        f"reference:mca[seed=2] {variant}error budget, Monte Carlo rounding sample 2)"])
    header = next(line for line in run.stdout.splitlines() if "configuration" in line)
    assert "max rel" in header and "allowed rel" in header and "error/allowed" in header
    # ULPs: float32 ones for reference:native (its float64 array counted 1e10 before); an
    # integer output has none.
    native = next(line for line in run.stdout.splitlines() if line.startswith("│ reference:native"))
    assert float(native.split("│")[9]) < 100
    int_rows = [line for line in run.stdout.splitlines() if re.match(r"│ (xla|reference:native) +│ \[1\]", line)]
    detail_header = [c.strip() for c in next(
        line for line in run.stdout.splitlines() if "share over" in line).split("┃")[1:-1]]
    assert len(int_rows) == 2
    for line in int_rows:
        assert line.split("│")[1 + detail_header.index("max ULP")].strip() == "-"


def test_check_quiet_and_json(checked):
    tmp, _ = checked
    target = f"{tmp / 'fns.py'}:mixed"
    quiet = xlaprobe("check", target, "--inputs", "f32[8],i32[8]", "--configs", "xla", "--quiet",
                     "--db", str(tmp / "x.db"))
    assert quiet.returncode == 0 and quiet.stderr == "" and "all ok" in quiet.stdout
    as_json = xlaprobe("check", target, "--inputs", "f32[8],i32[8]", "--configs",
                       "xla,reference:native", "--json", "--db", str(tmp / "x.db"))
    data = json.loads(as_json.stdout)  # progress went to stderr: stdout stays JSON
    assert "check: xla done in" in as_json.stderr
    leaves = {c["config"]: c["outputs"] for c in data["configs"]}
    assert leaves["reference:native"][0]["max_ulp"] < 100
    assert leaves["xla"][1]["max_ulp"] is None and leaves["xla"][1]["allowed_abs"] == 0
    assert 0 <= leaves["xla"][0]["margin"] <= 1 and leaves["xla"][0]["allowed_rel"] > 0


def test_findings_print_created_time_and_whole_paths(tmp_path):
    db = tmp_path / "a-long-directory-name-for-the-store" / "x.db"
    db.parent.mkdir()  # a folder named with --db must exist (only .xlaprobe/ is created)
    run = xlaprobe("check", str(CASES / "dus_shifted_self_update.py"), "--json", "--db", str(db))
    assert run.returncode == 1, run.stderr
    artifact = {f["config"]: f for f in json.loads(run.stdout)["findings"]}["xla"]["artifact"]
    listed = xlaprobe("findings", "--db", str(db))
    line = next(line for line in listed.stdout.splitlines() if line.startswith("│ ")
                and "xla " in line)
    assert artifact in line  # one line, not folded at 160 columns
    assert re.search(r"│ \d{4}-\d\d-\d\d \d\d:\d\d │", line)
    rows = json.loads(xlaprobe("findings", "--json", "--db", str(db)).stdout)
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", r["created_local"]) for r in rows)


def test_fuzz_piped_prints_each_program_as_it_is_checked(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "xlaprobe.cli", "fuzz", "--time", "10s",
                             "--configs", "xla,reference", "--db", str(tmp_path / "f.db")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        first = proc.stderr.readline()
        running = proc.poll() is None
        result, rest = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    # Two programs are in flight at once: either may finish first.
    assert re.fullmatch(r"fuzz: program 1 seed [01]: \d+ equations?, .+, \d+\.\d\d programs/s\n",
                        first), first
    assert running  # printed while the campaign was still going
    # Progress on stderr, the summary (a result) on stdout, so `fuzz > out.txt` keeps it.
    assert proc.returncode == 0 and "fuzz campaign 1:" in result and "fuzz campaign" not in rest
