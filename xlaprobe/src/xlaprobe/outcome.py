"""Outcome: what one run of one configuration on one Program gave."""

from __future__ import annotations

import dataclasses
import enum
import re

import numpy as np


#: A glog line's prefix: severity (F fatal, E error), MMDD, time, thread id (``F1203 22:43:41.99
#: 26870 ``); what follows is ``file.cc:line] message``.
_GLOG = re.compile(r"^([FE])\d{4} [\d:.]+\s+\d+ ")
#: Lines that never say why a process died: stack frames (``@ 0x7f.. symbol``), banners (``***
#: Check failure stack trace: ***``, ``=== Source Location Trace: ===``), bare symbol or path
#: lines of an unsymbolized trace (one word, no spaces).
_NOISE = re.compile(r"^(@\s|\*\*\*|===|\S+$)")
#: Words that name a failed check or an XLA status, best first.
_CHECK_WORDS = ("Check failed", "RET_CHECK", "INTERNAL:")


def crash_message(text: str, limit: int = 400) -> str:
    r"""The line of a crash's stderr that says why it died, for people to read (not a
    fingerprint: `xlaprobe.triage.crash_signature` is that): the first glog fatal (``F``) line,
    else the first line with ``Check failed``, ``RET_CHECK`` or ``INTERNAL:``, else the first
    glog error (``E``) line, else the first line that is not a stack frame, a banner or a bare
    symbol, else the last line. The glog prefix (severity, date, time, thread) is dropped.

    Args:
        text: the crash's stderr or its excerpt (`xlaprobe.workers.crash_excerpt`).
        limit: most characters returned; a longer line is cut at a word and ends in ``...``.

    Returns:
        One line ("" for empty text).

    >>> crash_message("E1203 22:43:41.99 26870 status_macros.cc:58] INTERNAL: RET_CHECK failure"
    ...               "\n*** Begin stack trace ***\n\tPyObject_Vectorcall\nF1203 22:43:41.99 "
    ...               "26870 algebraic_simplifier.cc:650] Check failed: x is OK (INTERNAL: y)\n"
    ...               "    @     0x7f05  PyObject_Vectorcall")
    'algebraic_simplifier.cc:650] Check failed: x is OK (INTERNAL: y)'
    >>> crash_message("munmap_chunk(): invalid pointer\n@ 0x7f05 abort")
    'munmap_chunk(): invalid pointer'
    """
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    glog = [(m.group(1), line[m.end():]) for line in lines if (m := _GLOG.match(line))]
    picked = (next((rest for severity, rest in glog if severity == "F"), None)
              or next((line for word in _CHECK_WORDS for line in lines if word in line), None)
              or next((rest for _, rest in glog), None)
              or next((line for line in lines if not _NOISE.match(line)), None)
              or (lines[-1] if lines else ""))
    picked = _GLOG.sub("", picked)
    return picked if len(picked) <= limit else picked[:limit].rsplit(" ", 1)[0] + " ..."


class OutcomeKind(enum.Enum):
    """How a run ended."""

    RAN = "ran"                      # outputs are available
    COMPILE_ERROR = "compile-error"  # the compiler or the interpreter raised
    CRASH = "crash"                  # the worker process died (abort, segfault, ...)
    TIMEOUT = "timeout"              # the run exceeded its time limit and the worker was killed
    UNSUPPORTED = "unsupported"      # the configuration cannot run this program (not a finding)
    TOOL_ERROR = "tool-error"        # xlaprobe's own interpreter could not run it (not a finding;
    #                                  the check is incomplete): no rule for a primitive, or a
    #                                  Python exception in the interpreter rather than from XLA


@dataclasses.dataclass(frozen=True, slots=True)
class MutationSite:
    """Where a planted fault (a ``mutant:<name>`` configuration) changed the compiled program: the
    ground truth that detection and localization are measured against.

    Attributes:
        mutant: the mutant's name.
        stage: the HLO pipeline stage its pass ran at (``PRE_SCHEDULER`` or ``POST_SCHEDULER``).
        instruction: name of the changed HLO instruction (e.g. ``"subtract.3"``).
        opcode: its opcode before the change (e.g. ``"subtract"``).
        computation: the HLO computation it sits in.
        fusion: the fusion instruction that calls that computation, or "" when not fused.
        op_name: the instruction's ``op_name`` metadata (JAX's name stack).
        equation: index of the top-level jaxpr equation it came from (from the ``eqnN`` named
            scope xla configurations trace with), or -1 when unknown.
        change: one line saying what was changed.
    """

    mutant: str
    stage: str
    instruction: str
    opcode: str
    computation: str
    fusion: str
    op_name: str
    equation: int
    change: str

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict."""
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    """The result of running one configuration in a worker.

    Attributes:
        config: the configuration spec string, e.g. ``"xla:O0"``.
        kind: how the run ended.
        outputs: the flat outputs (one NumPy array per jaxpr outvar) when ``kind is RAN``, else ().
        error: one-line error for COMPILE_ERROR; the stderr tail (last ~2 kB) for CRASH; a short
            description for TIMEOUT.
        signal: the signal number that killed the worker (CRASH), else None.
        seconds: wall time of compile plus run in the worker (s); for TIMEOUT the limit (s).
        mutations: where a planted-fault configuration fired during this run (empty otherwise).
        value: what a worker function returned (`xlaprobe.workers.WorkerPool.call`), else None.
        coverage: the XLA passes this run's compile ran and changed
            (`xlaprobe.coverage.PassCoverage`), or None when not recorded (a kind that compiles
            nothing with XLA, or coverage logging off).
    """

    config: str
    kind: OutcomeKind
    outputs: tuple[np.ndarray, ...] = ()
    error: str = ""
    signal: int | None = None
    seconds: float = 0.0
    mutations: tuple[MutationSite, ...] = ()
    value: object = None
    coverage: object = None

    @property
    def ran(self) -> bool:
        """True when outputs are available."""
        return self.kind is OutcomeKind.RAN

    @property
    def last_line(self) -> str:
        """The line of `error` that says what went wrong, or "": a crash's `crash_message` (its
        fatal check line, not the stack frames after it), else the last line (where a compile
        error's message is).

        >>> Outcome("xla", OutcomeKind.CRASH, error="W x\\nF0101 a.cc:1] Check failed\\n").last_line
        'F0101 a.cc:1] Check failed'
        """
        if self.kind is OutcomeKind.CRASH:
            return crash_message(self.error)
        lines = self.error.strip().splitlines()
        return lines[-1] if lines else ""
