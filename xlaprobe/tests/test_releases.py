"""XLA releases as configurations (``jaxlib==V``) and release bisection.

The bisection algorithm is tested with known answers on synthetic release histories (no XLA);
the configuration kind runs for real on the installed release (no environment needed) and, in
the slow tests, on release environments the tests make themselves.
"""

import pathlib
import stat

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from xlaprobe.checking import REFERENCE, check_program
from xlaprobe.checker import Failure
from xlaprobe.releases import kind as release
from xlaprobe.configs.registry import Configuration
from xlaprobe.errors import InvalidArgument, Unsupported
from xlaprobe.oracle import VerdictKind
from xlaprobe.outcome import OutcomeKind
from xlaprobe.releases import envs
from xlaprobe.releases.bisection import ReleaseRun, bisect, run_bound
from xlaprobe.releases.kind import release_options
from xlaprobe.releases.program import bisect_program
from xlaprobe.sources.user import load_case

CASES = pathlib.Path(__file__).parent / "cases"
RELEASES = ["0.4.33", "0.5.3", "0.6.2", "0.7.2", "0.8.3", "0.9.2", "0.10.2", "0.11.2", "0.12.0.1"]


# -- specs ------------------------------------------------------------------------------------

@pytest.mark.parametrize("spec", ["jaxlib==0.5.3", "jaxlib==0.10.2[xla_cpu_enable_fast_math=true]",
                                  "jaxlib==0.9.0.1"])
def test_release_specs_round_trip(spec):
    config = Configuration.parse(spec)
    assert (config.kind, str(config)) == ("jaxlib", spec)
    assert Configuration.parse(str(config)) == config


@pytest.mark.parametrize("bad, words", [
    ("jaxlib", "names no release"),
    ("jaxlib==latest", "not a jaxlib release version"),
    ("jaxlib==0.5", "not a jaxlib release version"),
    ("jaxlib:0.5.3", "write jaxlib==0.5.3"),
    ("xla==0.5.3", "takes :VARIANT"),
])
def test_bad_release_specs_are_one_line_errors(bad, words):
    with pytest.raises(InvalidArgument, match=words):
        Configuration.parse(bad)


def test_options_carry_over_to_releases():
    assert release_options(Configuration.parse("xla:fastmath")) == \
        (("xla_cpu_enable_fast_math", "true"),)
    assert release_options(Configuration.parse("xla[xla_backend_optimization_level=0]")) == \
        (("xla_backend_optimization_level", "0"),)
    assert release_options(Configuration.parse("jaxlib==0.5.3[xla_cpu_enable_fast_math=true]")) \
        == (("xla_cpu_enable_fast_math", "true"),)
    with pytest.raises(InvalidArgument, match="not an XLA configuration"):
        release_options(Configuration.parse("eager"))


def test_default_releases_take_the_newest_of_each_minor_line():
    available = ["0.4.30", "0.4.33", "0.4.38", "0.5.0", "0.5.3", "0.9.0", "0.9.0.1", "0.12.0.1"]
    assert envs.default_releases(available) == ["0.4.33", "0.5.3", "0.9.0.1", "0.12.0.1"]


def test_old_releases_get_their_numpy_pins():
    assert "numpy<2" in envs.pins("0.4.25") and "numpy<2" not in envs.pins("0.4.33")


# -- bisection on synthetic histories (known answers) ------------------------------------------

def _history(bad: set[str], unsupported: frozenset[str] = frozenset()):
    calls: list[str] = []

    def judge(version: str) -> ReleaseRun:
        calls.append(version)
        verdict = "unsupported" if version in unsupported else \
            "mismatch" if version in bad else "ok"
        return ReleaseRun(version, verdict)
    return judge, calls


@pytest.mark.parametrize("k", range(1, len(RELEASES)))
def test_first_bad_release_within_the_bound(k):
    judge, _ = _history(set(RELEASES[k:]))
    result = bisect(RELEASES, judge)
    assert (result.last_good, result.first_bad, result.first_fixed) == \
        (RELEASES[k - 1], RELEASES[k], None)
    assert result.release_runs <= run_bound(len(RELEASES)) == 6
    assert [r.release for r in result.runs if r.rerun] == [RELEASES[k - 1]]  # the confirmation


@pytest.mark.parametrize("k", range(1, len(RELEASES)))
def test_first_fixed_release_within_the_bound(k):
    judge, _ = _history(set(RELEASES[:k]))
    result = bisect(list(reversed(RELEASES)), judge)  # any order in, sorted inside
    assert (result.first_bad, result.last_good, result.first_fixed) == \
        (RELEASES[0], None, RELEASES[k])
    assert result.release_runs <= 6


def test_a_bug_that_came_and_went_is_found_from_the_known_bad_release():
    # gather_constant_fold: wrong on 0.5.3-0.7.2 only, right at both ends.
    judge, calls = _history({"0.5.3", "0.6.2", "0.7.2"})
    result = bisect(RELEASES, judge, known_bad="0.6.2")
    assert (result.last_good, result.first_bad, result.first_fixed) == ("0.4.33", "0.5.3", "0.8.3")
    assert calls == ["0.4.33", "0.12.0.1", "0.6.2", "0.5.3", "0.4.33", "0.9.2", "0.7.2", "0.8.3",
                     "0.8.3"]  # both sides of the known bad release, each confirmed


def test_a_bug_that_came_and_went_is_found_between_right_ends_midpoints_first():
    # The same history without the known bad release: the listed releases between the ends are
    # run midpoints first (0.8.3 right, then 0.6.2 wrong), then both boundaries are searched.
    judge, calls = _history({"0.5.3", "0.6.2", "0.7.2"})
    lines: list[str] = []
    result = bisect(RELEASES, judge, note=lines.append)
    assert (result.last_good, result.first_bad, result.first_fixed) == ("0.4.33", "0.5.3", "0.8.3")
    assert result.both_ends_right and result.boundary and not result.fails_nowhere
    assert calls == ["0.4.33", "0.12.0.1", "0.8.3", "0.6.2", "0.5.3", "0.4.33", "0.9.2", "0.7.2",
                     "0.8.3"]
    assert lines == ["both ends are right (jaxlib==0.4.33 and jaxlib==0.12.0.1): looking for a "
                     "failing release between them (7 listed)"]


def test_few_listed_releases_are_filled_in_from_between():
    # The case: a bug on 0.6.2-0.8.3 only, the user lists the ends and one right release;
    # `between` offers the minor lines in between (and some outside the ends, which are ignored).
    judge, calls = _history({"0.6.2", "0.7.2", "0.8.3"})
    asked: list[tuple[str, str]] = []

    def between(lo: str, hi: str) -> list[str]:
        asked.append((lo, hi))
        return ["0.4.30", *RELEASES, "0.13.0"]
    result = bisect(["0.4.33", "0.10.2", "0.12.0.1"], judge, between=between)
    assert asked == [("0.4.33", "0.12.0.1")]
    assert result.added == ("0.5.3", "0.6.2", "0.7.2", "0.8.3", "0.9.2", "0.11.2")
    assert (result.last_good, result.first_bad, result.first_fixed) == ("0.5.3", "0.6.2", "0.9.2")
    assert result.releases == tuple(RELEASES)
    assert "0.4.30" not in calls and "0.13.0" not in calls


def test_a_bug_found_nowhere_says_so():
    judge, calls = _history(set())
    result = bisect(["0.4.33", "0.8.3", "0.12.0.1"], judge, between=lambda lo, hi: ["0.6.2"])
    assert result.fails_nowhere and result.both_ends_right and not result.boundary
    assert result.added == ("0.6.2",) and sorted(calls) == ["0.12.0.1", "0.4.33", "0.6.2", "0.8.3"]
    assert result.to_json()["fails_nowhere"] is True


def test_bad_everywhere_and_good_everywhere():
    judge, _ = _history(set(RELEASES))
    assert (bisect(RELEASES, judge).first_bad, bisect(RELEASES, judge).last_good) == ("0.4.33", None)
    judge, calls = _history(set())
    result = bisect(RELEASES, judge)
    # Both ends right: every release between them is run once before "found nowhere".
    assert (result.first_bad, result.last_good, len(calls)) == (None, "0.12.0.1", len(RELEASES))
    assert result.fails_nowhere


def test_unsupported_releases_give_way_to_their_neighbours():
    judge, calls = _history(set(RELEASES[4:]), unsupported=frozenset({"0.4.33", "0.7.2"}))
    result = bisect(RELEASES, judge)
    assert (result.last_good, result.first_bad) == ("0.6.2", "0.8.3")
    assert {r.release for r in result.runs if r.verdict == "unsupported"} <= {"0.4.33", "0.7.2"}
    # Midpoints 4 and 2, then 3 does not run and nothing else lies between 2 and 4; the rerun
    # confirms 0.6.2 (the run order of the search before `xlaprobe.search`, commit 8e3115d).
    assert calls == ["0.4.33", "0.5.3", "0.12.0.1", "0.8.3", "0.6.2", "0.7.2", "0.6.2"]


def test_a_failure_that_vanishes_on_one_run_is_flaky():
    seen: dict[str, int] = {}

    def judge(version: str) -> ReleaseRun:
        seen[version] = seen.get(version, 0) + 1
        bad = version in RELEASES[5:] or (version == "0.8.3" and seen[version] > 1)
        return ReleaseRun(version, "mismatch" if bad else "ok")
    result = bisect(RELEASES, judge)
    assert result.flaky == ("0.8.3",)
    assert result.last_good is None


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 30), st.data())
def test_one_change_is_always_found_within_the_bound(count, data):
    releases = [f"0.{i}.0" for i in range(count)]
    k = data.draw(st.integers(1, count - 1))
    fixed = data.draw(st.booleans())
    bad = set(releases[:k]) if fixed else set(releases[k:])
    judge, _ = _history(bad)
    result = bisect(releases, judge)
    if fixed:
        assert result.first_fixed == releases[k]
    else:
        assert (result.last_good, result.first_bad) == (releases[k - 1], releases[k])
    assert result.release_runs <= run_bound(count)


# -- the jaxlib== kind, for real ----------------------------------------------------------------

def test_installed_release_runs_the_exported_module_like_xla(pool):
    # dus_shifted_self_update is wrong on the installed release: the release kind must show the
    # same wrong value through StableHLO as `xla` does through jit, and the reference the right one.
    case = load_case(str(CASES / "dus_shifted_self_update.py"))
    spec = f"jaxlib=={envs.installed_version()}"
    result = check_program(case.program, ["xla", spec, REFERENCE], pool)
    kinds = {f.config: f.kind for f in result.findings}
    assert kinds == {"xla": VerdictKind.MISMATCH, spec: VerdictKind.MISMATCH}, result.to_json()
    np.testing.assert_array_equal(result.outcomes[0].outputs[0], result.outcomes[1].outputs[0])
    np.testing.assert_array_equal(result.outcomes[1].outputs[0].ravel(), [1, 1, 1, 1])  # right: 1 1 2 3


def test_a_module_the_release_cannot_load_is_unsupported():
    import sys
    with pytest.raises(Unsupported):
        release.run_module(sys.executable, "this is not stablehlo", [], {})


def test_unsupported_is_an_outcome_and_never_a_finding():
    from xlaprobe.checking import judge
    from xlaprobe.outcome import Outcome
    case = load_case(str(CASES / "dus_shifted_self_update.py"))
    reference = Outcome(REFERENCE, OutcomeKind.RAN, outputs=case.program.expected)
    old = Outcome("jaxlib==0.4.33", OutcomeKind.UNSUPPORTED, error="cannot parse")
    result = judge(case.program, [REFERENCE, "jaxlib==0.4.33"], [reference, old])
    assert result.ok and result.verdicts[1][0].kind is VerdictKind.UNSUPPORTED


@pytest.mark.parametrize("kept_running", [False, True])
def test_a_crash_in_the_release_is_a_crash_outcome_with_its_stderr(pool, tmp_path, kept_running):
    # A stand-in interpreter that dies as XLA does on a failed check: glog's fatal line, SIGABRT.
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'F0000 00:00:00.0 1 hlo_verifier.cc:42] Check failed: boom' >&2\n"
                    "kill -ABRT $$\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    case = load_case(str(CASES / "dus_shifted_self_update.py"))
    outcome = pool.call(case.program, "tests.worker_kinds:run_release_module",
                        {"python": str(fake), "kept_running": kept_running},
                        group="release-crash")
    assert outcome.kind is OutcomeKind.CRASH and outcome.signal == 6
    assert "Check failed: boom" in outcome.error


def test_a_kept_runner_serves_many_requests_as_fresh_processes_do():
    # One process of the release's interpreter imports jax once and answers request after
    # request with what a fresh process per request gives; a module it cannot load is an answer
    # (unsupported), not the end of it; closing it ends the process.
    import sys
    case = load_case(str(CASES / "dus_shifted_self_update.py"))
    text, kept = release.stablehlo_text(case.program.jaxpr, case.program.inputs)
    inputs = [case.program.inputs[i] for i in kept]
    runner = release.RunnerProcess(sys.executable)
    try:
        pid = runner.process.pid
        first = release.run_module(sys.executable, text, inputs, {}, runner=runner)
        with pytest.raises(Unsupported):
            release.run_module(sys.executable, "this is not stablehlo", [], {}, runner=runner)
        again = release.run_module(sys.executable, text, inputs, {}, runner=runner)
        assert runner.alive() and runner.process.pid == pid
        fresh = release.run_module(sys.executable, text, inputs, {})
        for a, b, c in zip(first, again, fresh, strict=True):
            np.testing.assert_array_equal(a, c)
            np.testing.assert_array_equal(b, c)
        np.testing.assert_array_equal(first[0].ravel(), [1, 1, 1, 1])  # the release's wrong value
    finally:
        runner.close()
    assert not runner.alive()


def test_bisect_program_on_the_installed_release_alone(pool):
    case = load_case(str(CASES / "dus_shifted_self_update.py"))
    installed = envs.installed_version()
    result = bisect_program(case.program, Configuration.parse("xla"), [installed], pool)
    assert (result.first_bad, result.last_good) == (installed, None)
    assert result.runs[0].verdict == "mismatch"


def test_a_release_failing_otherwise_is_no_evidence(pool):
    # The installed release gives the case's mismatch; bisecting a crash finding on it finds no
    # bad release (another bug), bisecting from the release it was seen on finds it bad.
    case = load_case(str(CASES / "dus_shifted_self_update.py"))
    installed = envs.installed_version()
    crash = Failure(VerdictKind.CRASH, tuple(case.program.output_names), "x.cc:1 Check failed")
    result = bisect_program(case.program, Configuration.parse("xla"), [installed], pool,
                            failure=crash)
    assert (result.first_bad, result.last_good) == (None, None)
    assert result.runs[0].other and result.runs[0].bad is None
    assert "fails otherwise than the finding (crash" in result.runs[0].detail
    seen = bisect_program(case.program, Configuration.parse("xla"), [installed], pool,
                          known_bad=installed)
    assert seen.first_bad == installed and len(seen.runs) == 1 and not seen.runs[0].other


def test_other_failures_give_way_like_unsupported_releases():
    def judge(version: str) -> ReleaseRun:
        if version in ("0.4.33", "0.7.2"):
            return ReleaseRun(version, "crash", other=True)
        return ReleaseRun(version, "mismatch" if version in RELEASES[4:] else "ok")
    result = bisect(RELEASES, judge)
    assert (result.last_good, result.first_bad) == ("0.6.2", "0.8.3")


# -- other releases (slow: the tests make the environments, ~0.5 GB and ~10-60 s each) ------------

@pytest.mark.slow
def test_bisect_finds_the_first_bad_release_of_dus_shifted_self_update(pool):
    case = load_case(str(CASES / "dus_shifted_self_update.py"))
    releases = ["0.4.33", "0.5.3", "0.7.2", "0.10.2", envs.installed_version()]
    result = bisect_program(case.program, Configuration.parse("xla"), releases, pool)
    assert (result.last_good, result.first_bad, result.first_fixed) == ("0.4.33", "0.5.3", None)
    assert result.release_runs <= run_bound(len(releases))


def test_scalar_outputs_keep_their_shape_through_a_release(pool):
    # while_loop_skipped returns two int32 scalars (and 0.12 computes them right).
    case = load_case(str(CASES / "while_loop_skipped.py"))
    spec = f"jaxlib=={envs.installed_version()}"
    result = check_program(case.program, [spec, REFERENCE], pool)
    assert result.ok, result.to_json()
    assert [o.shape for o in result.outcomes[0].outputs] == [(), ()]


def test_options_the_release_does_not_know_are_bad_input():
    kind = release.KIND
    spec = f"jaxlib=={envs.installed_version()}"
    kind.prepare(Configuration.parse(spec + "[xla_cpu_enable_fast_math=true]"))  # a real option
    with pytest.raises(InvalidArgument, match="xla_bogus"):
        kind.prepare(Configuration.parse(spec + "[xla_bogus=1]"))


def test_releases_between_take_the_default_range_inside_the_ends():
    from xlaprobe.releases.program import releases_between
    available = ["0.4.30", "0.4.33", "0.5.0", "0.5.3", "0.6.2", "0.9.0", "0.9.0.1", "0.12.0.1"]
    assert releases_between("0.4.33", "0.9.0.1", available=lambda: available) == ["0.5.3", "0.6.2"]
    lines: list[str] = []

    def offline() -> list[str]:
        raise envs.EnvironmentUnavailable("no network")
    assert releases_between("0.4.33", "0.12.0.1", available=offline, say=lines.append) == []
    assert lines == ["cannot add releases between 0.4.33 and 0.12.0.1: no network"]


def test_bisect_command_says_not_found_in_this_range_and_exits_0(tmp_path, capsys):
    # while_loop_skipped is right on the installed release: nothing fails in the range.
    from xlaprobe.cli.bisect import bisect_command
    code = bisect_command(str(CASES / "while_loop_skipped.py"), "xla",
                          releases=envs.installed_version(), db=tmp_path / "x.db",
                          json_output=False, timeout_s=300)
    assert code == 0
    assert "not found in this range: every release tried (1, " in capsys.readouterr().out


def test_a_release_that_cannot_be_made_leaves_no_lock_and_names_every_python(tmp_path,
                                                                              monkeypatch):
    # `bisect --releases 0.0.0` left .lock-0.0.0 in the cache and named only the first Python
    # of the three it tried. The installer is replaced by one that fails as uv does for a
    # release that does not exist.
    monkeypatch.setenv("XLAPROBE_CACHE", str(tmp_path))
    monkeypatch.setattr(envs, "_interpreters", lambda: ["/usr/bin/python3.12", "/usr/bin/python3.10"])
    monkeypatch.setattr(envs, "_install", lambda path, python, pins: (
        False, "no version of jaxlib==0.0.0"))
    with pytest.raises(envs.EnvironmentUnavailable) as raised:
        envs.ensure_env("0.0.0", log=lambda line: None)
    assert ("tried python3.12 and python3.10; python3.12 said: no version of jaxlib==0.0.0"
            in str(raised.value))
    leftovers = [p.name for p in envs.env_path("0.0.0").parent.iterdir()]
    assert leftovers == [], leftovers
