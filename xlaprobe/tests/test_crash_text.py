"""A crash's stderr as people read it: the check-failure line, not the stack frames after it
(`xlaprobe.outcome.crash_message`), in verdicts, localize notes and upstream drafts."""

from types import SimpleNamespace

import numpy as np
from jax import lax

from xlaprobe.outcome import Outcome, OutcomeKind, crash_message
from xlaprobe.program import Program, Provenance
from xlaprobe.triage import crash_signature
from xlaprobe.upstream_text import _worst, error_text, search_terms
from xlaprobe.workers import crash_excerpt

# The stderr of jaxlib 0.12.0.1 aborting on tests/fuzz_cases/reduce_window_negative_padding_abort.py
# (jit of reduce_window max with padding (-1, 0)), cut: 37 of its 43 blank trace lines and 41 of
# its 48 frames left out.
MESSAGE = ('ShapeUtil::Compatible(old_instruction->shape(), new_instruction->shape()) '
           '"reduce-window" (f32[1,1]{0,1}) vs "maximum" (f32[2,1]{0,1})')
REAL_ABORT = (
    "E1203 22:43:41.991560   26870 status_macros.cc:58] INTERNAL: RET_CHECK failure "
    f"(external/xla+/xla/hlo/ir/hlo_computation.cc:1975) {MESSAGE}\n"
    "=== Source Location Trace: ===\nexternal/xla+/xla/status_macros.cc:81\n\n"
    "*** Begin stack trace ***\n" + "\t\n" * 6 +
    "\tPyObject_Vectorcall\n\t_PyEval_EvalFrameDefault\n\tPy_RunMain\n\t__libc_start_main\n"
    "\t_start\n*** End stack trace ***\n\n"
    "F1203 22:43:41.991663   26870 algebraic_simplifier.cc:650] Check failed: "
    "computation->Accept(this) is OK (INTERNAL: RET_CHECK failure "
    f"(external/xla+/xla/hlo/ir/hlo_computation.cc:1975) {MESSAGE}\n"
    "=== Source Location Trace: ===\nexternal/xla+/xla/status_macros.cc:81\n"
    "external/xla+/xla/hlo/ir/hlo_instruction.cc:5297\n) \n"
    "*** Check failure stack trace: ***\n"
    "    @     0x7ff12b6f01b4  absl::lts_20260526::log_internal::LogMessage::SendToLog()\n"
    "    @     0x7ff12ba6a444  xla::AlgebraicSimplifierVisitor::Run()\n"
    "    @     0x7ff1281500d6  jax::PyClient::CompileAndLoad()\n"
    "    @     0x7ff128277b48  nanobind::detail::nb_func_vectorcall_complex()\n"
    "    @     0x7ff13af7050f  PyObject_Vectorcall\n")
FATAL = ("algebraic_simplifier.cc:650] Check failed: computation->Accept(this) is OK (INTERNAL: "
         f"RET_CHECK failure (external/xla+/xla/hlo/ir/hlo_computation.cc:1975) {MESSAGE}")
#: What findings stored before `crash_message` kept as a crash verdict's detail: the last frame.
OLD_DETAIL = "signal 6:     @     0x7f057157050f  PyObject_Vectorcall"


def test_a_real_aborts_message_is_its_fatal_check_line_not_a_frame():
    assert crash_message(REAL_ABORT, 1000) == FATAL
    # A worker keeps only an excerpt of a long stderr, led by the fatal line.
    excerpt = crash_excerpt(REAL_ABORT + "    @     0x7ff1 xla::HloPassPipeline::RunImpl()\n" * 60)
    assert crash_message(excerpt, 1000) == FATAL
    assert Outcome("xla", OutcomeKind.CRASH, error=excerpt, signal=6).last_line == crash_message(
        excerpt)
    cut = crash_message(REAL_ABORT, 100)
    assert cut.endswith(" ...") and len(cut) <= 100 and FATAL.startswith(cut[:-4])


def test_without_a_fatal_line_the_message_is_the_check_or_status_line():
    error_only = REAL_ABORT.split("F1203")[0]  # the process died before logging its fatal line
    assert crash_message(error_only, 1000) == (
        "status_macros.cc:58] INTERNAL: RET_CHECK failure "
        f"(external/xla+/xla/hlo/ir/hlo_computation.cc:1975) {MESSAGE}")
    heap = "free(): invalid next size (fast)\n*** Check failure stack trace: ***\n    @ 0x7f abort\n"
    assert crash_message(heap) == "free(): invalid next size (fast)"
    died = "worker process 5754 died from signal 11 (SIGSEGV) and wrote nothing to stderr"
    assert crash_message(died) == died
    assert crash_message("") == ""
    # A compile error's last line is still its message.
    assert Outcome("xla", OutcomeKind.COMPILE_ERROR, error="Traceback\nINTERNAL: x").last_line == (
        "INTERNAL: x")


def test_the_crash_fingerprint_is_unchanged():
    # Fingerprints of stored crash findings are made of `crash_signature`: it stays as it was.
    assert crash_signature(REAL_ABORT) == (
        "algebraic_simplifier.cc:650 Check failed: computation->Accept(this) is OK")


def _crash_evidence():
    program = Program.from_function(
        lambda x: lax.reduce_window(x, -np.inf, lax.max, (1,), (1,), ((-1, 0),)),
        (np.float32([3.0, 5.0]),), Provenance("user", "t"))
    verdicts = tuple(SimpleNamespace(kind=SimpleNamespace(value="crash", is_finding=True),
                                     worst=-1, output=f"o{i}", detail=OLD_DETAIL)
                     for i in range(9))
    error = crash_excerpt(REAL_ABORT + "    @     0x7ff1 xla::HloPassPipeline::RunImpl()\n" * 60)
    return SimpleNamespace(program=program, localization=None, error=error, verdicts=verdicts,
                           finding=SimpleNamespace(kind="crash", config="xla"))


def test_an_upstream_draft_of_a_crash_leads_with_its_check_failure():
    evidence = _crash_evidence()
    summary = _worst(evidence)
    assert summary == ("- 9 outputs `o0`, `o1`, `o2`, `o3`, `o4`, `o5`, ...: crash "
                       f"(signal 6: {crash_message(evidence.error, 300)})")
    assert "@ 0x" not in summary and "Check failed: computation->Accept(this)" in summary
    error = error_text(evidence)
    assert error.splitlines()[0] == FATAL and len(error) <= 1500
    assert error.splitlines()[2].startswith("    @ ")  # the tail starts at a line's start
    assert search_terms(evidence) == [
        "reduce_window_max CPU crash",
        "algebraic_simplifier Check failed computation->Accept(this) is OK",
        "RET_CHECK hlo_computation ShapeUtil::Compatible"]


def test_a_compile_errors_search_terms_have_no_ellipsis():
    # A RET_CHECK compile error's first line, cut at 120 characters, ended in " ...", and its
    # words after the last colon made the search term "1975) ...".
    evidence = _crash_evidence()
    evidence.finding.kind = "compile-error"
    evidence.error = f"JaxRuntimeError: INTERNAL: RET_CHECK failure (external/xla+/xla/hlo/ir/" \
                     f"hlo_computation.cc:1975) {MESSAGE}"
    assert search_terms(evidence) == ["reduce_window_max CPU wrong",
                                      "RET_CHECK hlo_computation ShapeUtil::Compatible"]
    evidence.error = "JaxRuntimeError: UNIMPLEMENTED: Unsupported element type " + "word " * 40
    assert search_terms(evidence)[1] == "Unsupported element type word word word"
