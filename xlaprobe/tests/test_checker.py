"""One definition of "the same failure" (xlaprobe.checker) and one severity order (oracle)."""

import numpy as np
import pytest

from xlaprobe.checking import judge
from xlaprobe.checker import Checker, Failure
from xlaprobe.oracle import SEVERITY, VerdictKind, summary_kind
from xlaprobe.outcome import Outcome, OutcomeKind
from xlaprobe.program import Program, Provenance
from xlaprobe.triage import finding_key


def test_severity_is_one_total_order():
    assert set(SEVERITY) == set(VerdictKind)
    assert summary_kind([]) is VerdictKind.OK
    assert summary_kind(["ok", "ftz"]) is VerdictKind.FTZ
    assert summary_kind([VerdictKind.MISMATCH, VerdictKind.CRASH]) is VerdictKind.CRASH
    assert summary_kind(["mismatch", "nan-mismatch", "inf-mismatch"]) is VerdictKind.NAN_MISMATCH
    with pytest.raises(ValueError):
        summary_kind(["wrong"])


def _program():
    x = np.linspace(0.5, 1.5, 4, dtype=np.float32)
    return Program.from_function(lambda a: (a * 2.0, a + 1.0), (x,), Provenance("user", "two"))


def _check(first, second, config="xla", kind=OutcomeKind.RAN, error=""):
    program = _program()
    right = (program.inputs[0].astype(np.float64) * 2, program.inputs[0].astype(np.float64) + 1)
    outputs = (np.float32(right[0] + first), np.float32(right[1] + second)) \
        if kind is OutcomeKind.RAN else ()
    return judge(program, [config, "reference"],
                 [Outcome(config, kind, outputs, error=error),
                  Outcome("reference", OutcomeKind.RAN, right)])


def test_failure_of_a_check_names_class_outputs_and_signature():
    assert _check(0.0, 0.0).failure('xla') is None
    wrong = _check(1.0, 0.0).failure('xla')
    assert wrong == Failure(VerdictKind.MISMATCH, ("[0]",), "")
    crash = _check(0, 0, kind=OutcomeKind.CRASH,
                                    error="munmap_chunk(): invalid pointer").failure('xla')
    assert crash.kind is VerdictKind.CRASH and crash.outputs == ("[0]", "[1]")
    assert crash.signature == "heap corruption (glibc allocator abort)"


def test_checker_compares_class_outputs_and_crash_signature():
    checker = Checker(_check(1.0, 0.0).failure('xla'))
    assert checker.same(_check(5.0, 0.0).failure('xla'))               # same output, other error
    assert checker.same(_check(np.nan, 0.0).failure('xla'))            # NaN: same numeric class
    assert not checker.same(_check(0.0, 1.0).failure('xla'))           # another output: another bug
    assert not checker.same(_check(0.0, 0.0).failure('xla'))           # passes
    assert not checker.same(_check(0, 0, kind=OutcomeKind.CRASH, error="x").failure('xla'))
    # Without output identity (a cut-down program): class only.
    assert Checker(checker.target, outputs=False).same(_check(0.0, 1.0).failure('xla'))
    crash = Checker(Failure(VerdictKind.CRASH, ("[0]", "[1]"), "a.cc:1 Check failed: x"))
    assert crash.same(_check(0, 0, kind=OutcomeKind.CRASH,
                              error="F0101 00:00:00.0 1 a.cc:1] Check failed: x (5 vs 6)").failure('xla'))
    assert not crash.same(_check(0, 0, kind=OutcomeKind.CRASH,
                                  error="F0101 00:00:00.0 1 b.cc:9] Check failed: y").failure('xla'))


def test_anchoring_moves_the_outputs_and_keeps_the_signature():
    checker = Checker(Failure(VerdictKind.CRASH, ("[0]",), "sig"), outputs=False)
    anchored = checker.anchored(Failure(VerdictKind.CRASH, ("eqn3:c",), ""))
    assert anchored.outputs and anchored.target == Failure(VerdictKind.CRASH, ("eqn3:c",), "sig")


def test_fixed_means_ran_without_any_failure():
    assert Checker.fixed(True, _check(0.0, 0.0).failure('xla'))
    assert not Checker.fixed(True, _check(0.0, 1.0).failure('xla'))
    assert not Checker.fixed(False, _check(0, 0, kind=OutcomeKind.CRASH, error="x").failure('xla'))


class _Replay:
    """A pool that answers each compile with the next prepared outcome (renamed to its spec)."""

    size = 1

    def __init__(self, outcomes):
        self.outcomes = list(outcomes)

    def run_many(self, jobs, timeout_s=None):
        for index, (_, spec) in enumerate(jobs):
            outcome = self.outcomes.pop(0)
            yield index, Outcome(str(spec), outcome.kind, outcome.outputs, error=outcome.error)


def test_pass_blame_asks_the_findings_checker_and_agrees_with_the_check():
    # Each pass-blame test (passes disabled) is judged by the finding's Checker; its verdict
    # must be the check's own: fixed exactly when a check of that run has no finding. Known
    # answers: only the right run fixes the fault; the same wrong output, another output wrong,
    # a NaN, a crash and a compile error do not.
    from xlaprobe.configs.registry import Configuration
    from xlaprobe.localization.passes import _Tests

    finding = _check(1.0, 0.0)
    program = finding.program
    reference = finding.outcomes[finding.configs.index("reference")]
    runs = {"right": _check(0.0, 0.0), "same output wrong": _check(3.0, 0.0),
            "other output wrong": _check(0.0, 2.0), "nan": _check(np.nan, 0.0),
            "crash": _check(0, 0, kind=OutcomeKind.CRASH, error="munmap_chunk(): invalid pointer"),
            "compile error": _check(0, 0, kind=OutcomeKind.COMPILE_ERROR, error="bad")}
    checker = Checker(finding.failure("xla"))
    tests = _Tests(program, Configuration.parse("xla"), _Replay(r.outcomes[0] for r in
                   runs.values()), finding, reference, 60.0, None, checker)
    verdicts = tests.fixes_many([[f"pass{i}"] for i in range(len(runs))])
    from_check = [not r.findings for r in runs.values()]
    from_checker = [checker.fixed(r.outcomes[0].ran, r.failure("xla")) for r in runs.values()]
    assert tests.checker is checker
    assert verdicts == from_check == from_checker == [True, False, False, False, False, False]


def test_configurations_fail_alike_by_the_checker():
    # xla: a NaN in output 0; mutant: a finite wrong value in output 0 and output 1 wrong too;
    # eager: only output 1 wrong. The first two share a failing output and the numeric class,
    # so the mutant's planted name leaves its fingerprint; eager shares an output with the mutant
    # only.
    program = _program()
    right = (program.inputs[0].astype(np.float64) * 2, program.inputs[0].astype(np.float64) + 1)
    nan = np.float32(right[0]).copy()
    nan[1] = np.nan
    result = judge(program, ["xla", "mutant:sub_to_add", "eager", "reference"], [
        Outcome("xla", OutcomeKind.RAN, (nan, np.float32(right[1]))),
        Outcome("mutant:sub_to_add", OutcomeKind.RAN,
                (np.float32(right[0] + 3), np.float32(right[1] + 3))),
        Outcome("eager", OutcomeKind.RAN, (np.float32(right[0]), np.float32(right[1] - 3))),
        Outcome("reference", OutcomeKind.RAN, right)])
    alike = {f.config: f.alike for f in result.findings}
    assert alike == {"xla": ("mutant:sub_to_add", "xla"),
                     "mutant:sub_to_add": ("eager", "mutant:sub_to_add", "xla"),
                     "eager": ("eager", "mutant:sub_to_add")}
    # A configuration without a planted fault failed like the mutant: no planted name in its key.
    mutant = {f.config: f for f in result.findings}["mutant:sub_to_add"]
    assert mutant.fingerprint == finding_key(program, "xla", mutant.kind, (0, 1))
    assert mutant.fingerprint != finding_key(program, "mutant:sub_to_add", mutant.kind, (0, 1))
