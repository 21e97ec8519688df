"""One definition of "the same failure" (xlaprobe.checker) and one severity order (oracle)."""

import numpy as np
import pytest

from xlaprobe.check import judge
from xlaprobe.checker import Checker, Failure, passes_clean
from xlaprobe.oracle import SEVERITY, VerdictKind, summary_kind
from xlaprobe.outcome import Outcome, OutcomeKind
from xlaprobe.program import Program, Provenance


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
    assert Failure.in_check(_check(0.0, 0.0), "xla") is None
    wrong = Failure.in_check(_check(1.0, 0.0), "xla")
    assert wrong == Failure(VerdictKind.MISMATCH, ("[0]",), "")
    crash = Failure.in_check(_check(0, 0, kind=OutcomeKind.CRASH,
                                    error="munmap_chunk(): invalid pointer"), "xla")
    assert crash.kind is VerdictKind.CRASH and crash.outputs == ("[0]", "[1]")
    assert crash.signature == "heap corruption (glibc allocator abort)"


def test_checker_compares_class_outputs_and_crash_signature():
    checker = Checker(Failure.in_check(_check(1.0, 0.0), "xla"))
    assert checker.fails(_check(5.0, 0.0), "xla")               # same output, other error
    assert checker.fails(_check(np.nan, 0.0), "xla")            # NaN: same numeric class
    assert not checker.fails(_check(0.0, 1.0), "xla")           # another output: another bug
    assert not checker.fails(_check(0.0, 0.0), "xla")           # passes
    assert not checker.fails(_check(0, 0, kind=OutcomeKind.CRASH, error="x"), "xla")
    # Without output identity (a cut-down program): class only.
    assert Checker(checker.target, outputs=False).fails(_check(0.0, 1.0), "xla")
    crash = Checker(Failure(VerdictKind.CRASH, ("[0]", "[1]"), "a.cc:1 Check failed: x"))
    assert crash.fails(_check(0, 0, kind=OutcomeKind.CRASH,
                              error="F0101 00:00:00.0 1 a.cc:1] Check failed: x (5 vs 6)"), "xla")
    assert not crash.fails(_check(0, 0, kind=OutcomeKind.CRASH,
                                  error="F0101 00:00:00.0 1 b.cc:9] Check failed: y"), "xla")


def test_anchoring_moves_the_outputs_and_keeps_the_signature():
    checker = Checker(Failure(VerdictKind.CRASH, ("[0]",), "sig"), outputs=False)
    anchored = checker.anchored(Failure(VerdictKind.CRASH, ("eqn3:c",), ""))
    assert anchored.outputs and anchored.target == Failure(VerdictKind.CRASH, ("eqn3:c",), "sig")


def test_clean_means_ran_without_any_finding():
    assert passes_clean(_check(0.0, 0.0), "xla")
    assert not passes_clean(_check(0.0, 1.0), "xla")
    assert not passes_clean(_check(0, 0, kind=OutcomeKind.CRASH, error="x"), "xla")
