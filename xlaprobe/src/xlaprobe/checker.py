"""One definition of "the same failure", used by the check itself (which configurations failed
alike, the data campaigns triage by), localization's segment, cut and in-kernel searches,
reduction, pass blame and release bisection.

A `Failure` is what one check showed for one configuration: its summary verdict kind, the output
leaves that failed and, for a crash, the crash's signature. A `Checker` holds the finding's
failure and answers, for any later check of the same or a cut-down program, whether it fails the
same way: the same failure class (any of the three mismatch kinds count as one; a crash, timeout
or compile error is its own class), the same crash signature, and at least one of the finding's
failing outputs failing again (where the outputs are the finding's: a cut-down program with other
outputs is compared by class and signature only, ``outputs=False``). Every user asks the checker;
none re-derives the rule.

Source: Hypothesis's "interesting origin" (a failure is the same when its exception type and
location are) and XLA's ``hlo_bisect`` BugCheckerInterface (one object answers "still buggy?").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from xlaprobe.oracle import Verdict, VerdictKind, summary_kind
from xlaprobe.outcome import Outcome
from xlaprobe.triage import crash_signature


@dataclasses.dataclass(frozen=True, slots=True)
class Failure:
    """What one configuration's run showed, as far as "the same failure" is concerned.

    Attributes:
        kind: the most severe verdict kind over its output leaves (a finding kind).
        outputs: names of the failing output leaves, in output order.
        signature: `xlaprobe.triage.crash_signature` of a crash, else ``""``.
    """

    kind: VerdictKind
    outputs: tuple[str, ...]
    signature: str = ""

    @classmethod
    def of(cls, verdicts: Sequence[Verdict], outcome: Outcome | None = None) -> Failure | None:
        """The failure shown by one configuration's leaf verdicts, or None when it passed.

        Args:
            verdicts: its verdicts, one per output leaf.
            outcome: its outcome (for a crash's signature); None: no signature.
        """
        kind = summary_kind(v.kind for v in verdicts)
        if not kind.is_finding:
            return None
        signature = crash_signature(outcome.error) if (
            kind is VerdictKind.CRASH and outcome is not None) else ""
        return cls(kind, tuple(v.output for v in verdicts if v.kind.is_finding), signature)


class Checker:
    """Does a run fail like the finding? One object handed to every search.

    Args:
        target: the finding's failure.
        outputs: also require one of the target's failing outputs to fail again (for programs
            with the finding's outputs); False for cut-down programs with outputs of their own.
    """

    def __init__(self, target: Failure, *, outputs: bool = True):
        self.target = target
        self.outputs = outputs

    @property
    def kind(self) -> VerdictKind:
        """The finding's verdict kind."""
        return self.target.kind

    def matches_kind(self, kind: VerdictKind) -> bool:
        """Is one leaf's (or one run's) verdict kind of the finding's failure class?

        >>> Checker(Failure(VerdictKind.MISMATCH, ("[0]",))).matches_kind(VerdictKind.NAN_MISMATCH)
        True
        >>> Checker(Failure(VerdictKind.CRASH, ("[0]",))).matches_kind(VerdictKind.TIMEOUT)
        False
        """
        return kind.is_finding and kind.family == self.target.kind.family

    def same(self, failure: Failure | None) -> bool:
        """Is `failure` the finding's failure (class, crash signature, outputs)?

        >>> finding = Failure(VerdictKind.MISMATCH, ("[0]", "[1]"))
        >>> Checker(finding).same(Failure(VerdictKind.NAN_MISMATCH, ("[1]",)))
        True
        >>> Checker(finding).same(Failure(VerdictKind.MISMATCH, ("[2]",)))
        False
        """
        if failure is None or not self.matches_kind(failure.kind):
            return False
        if self.target.signature and failure.signature \
                and failure.signature != self.target.signature:
            return False
        return not self.outputs or bool(set(failure.outputs) & set(self.target.outputs))

    @staticmethod
    def fixed(ran: bool, failure: Failure | None) -> bool:
        """Did a change (passes disabled, an older release) fix the finding's failure? Only when
        the run ran and failed in no way at all: a crash, or a mismatch of other outputs, may be
        the same fault showing differently, so it is not a fix (hlo_bisect's "still buggy?"
        negated conservatively).

        >>> Checker.fixed(True, None), Checker.fixed(False, None)
        (True, False)
        >>> Checker.fixed(True, Failure(VerdictKind.MISMATCH, ("[1]",)))
        False
        """
        return ran and failure is None

    def anchored(self, failure: Failure) -> Checker:
        """A checker of the same failure class whose outputs are `failure`'s: after a cut-down
        program replaced the original (reduction's equation pass), later edits keep its
        failing outputs failing."""
        return Checker(dataclasses.replace(failure, signature=failure.signature
                                           or self.target.signature))

