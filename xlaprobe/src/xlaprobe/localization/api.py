"""Localization, tiers 1-5: failing outputs -> the jaxpr equation XLA gets wrong -> the fused
kernels it sits in, with the smallest segment around it that fails compiled alone -> the HLO
instruction inside the kernel -> the HLO pass that introduces the fault.

1. **Outputs.** The finding's failing output leaves and their cone of influence (the top-level
   equations they depend on); the rest of the program is never blamed.
2. **Equation** (`xlaprobe.localization.bisect`). The reference interpreter and the honest runs of
   the error budget run once on the program with every intermediate as an output.

   *Cuts* (numeric findings, ``method="cuts"``): a binary search compiles the *whole* program
   under the faulty configuration, also returning the values computed before a cut, and judges
   them against that recording; the first cut whose values are wrong names the equation, in the
   module XLA builds for this very program. A failing cut is rerun under a trusted configuration
   (`bisect.baseline_spec`): values it gets "wrong" too are rounding noise the outputs' budget
   absorbs, not evidence. Segments compiled *alone* (fed the reference values of their inputs)
   then check the equation: it fails alone; or XLA fused a copy of an earlier equation into the
   kernel of the first wrong value while computing that equation's own exposed value apart (the
   copy is what it gets wrong): a binary search over the equations fused into that kernel finds
   the latest start whose segment fails alone, named if it fails alone by itself; or the fault
   needs context, and the smallest window around it that fails alone is the segment. A reshape
   (or other data movement) XLA folded into its producer passes the blame to that producer.

   *Segments* (crashes, timeouts, compile errors, where the whole program shows nothing at every
   cut; or ``method="segments"``): a binary search over segments compiled alone finds the latest
   failing suffix, then the earliest failing end; the window is re-verified and, if wider than one
   equation, run once more with its intermediates exposed: its first wrong value names the
   equation.
3. **Kernel** (`xlaprobe.localization.fusion`). The faulty configuration's optimized HLO of the whole
   program (and of the segment alone) maps the equation to the fusions that hold its
   instructions, through the ``eqnN`` named scope every ``xla`` compile traces equation N in.
   For an ``spmd`` configuration the module is one device's partitioned program, and the
   collectives the partitioner made for the equation are named first (`kernels.Placement`).
4. **Op** (`xlaprobe.localization.inside`). The failing fused kernel is compiled alone, fed the values
   it reads; a binary search over its instructions with a right value (an equation's reference
   value, or the twin's in the trusted compile), each earlier one replaced by it, names the
   latest whose suffix still fails: the HLO instruction, with its equation. Its compiles are
   counted apart (``op_cycles``, with the trusted compile).
5. **Compiler pass** (`xlaprobe.localization.passes`). ddmin over ``xla_disable_hlo_passes``, latest
   pass first, among the passes that changed this program's module: the pass whose disabling
   alone fixes the fault, or ``"none"``; a planted fault's own pass for ``mutant`` configurations.
   For ``spmd`` the candidates include the partitioner's and the collective passes (Shardy's
   or GSPMD's pipeline, all-reduce combiners and decomposers) that changed the module.
   Its compiles are counted apart (``pass_cycles``).

Every compile and run happens in the worker pool. ``cycles`` counts the runs of the faulty
configuration (cuts, segments and HLO compiles); the reference and trusted-configuration runs that
judge them are not counted. A failure that vanishes on re-verification is rerun up to five times
and reported ``flaky``.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

from xlaprobe import freedoms
from xlaprobe.checking import CheckResult, check_program
from xlaprobe.configs.registry import Configuration
from xlaprobe.errors import InvalidArgument, NotReproducible
from xlaprobe.hlo import kernel_text
from xlaprobe.localization.bisect import RERUNS, Recording, Searcher, Step, baseline_spec, record
from xlaprobe.localization.equation import Equation, find_equation
from xlaprobe.localization.inside import Inside
from xlaprobe.localization.kernels import Placement, place
from xlaprobe.localization.op import locate, skipped
from xlaprobe.localization.outputs import Outputs, failing_outputs
from xlaprobe.localization.passes import PassBlame, blame_pass
from xlaprobe.localization.segments import Segmenter, recording_program
from xlaprobe.oracle import VerdictKind, summary_kind
from xlaprobe.program import Program
from xlaprobe.triage import localized_key, planted_fault, planted_name, result_dtypes

METHODS = ("auto", "cuts", "segments")
#: Longest failing-kernel HLO text kept in a localization (characters; the store keeps it).
KERNEL_HLO_CHARS = 20_000


@dataclasses.dataclass(frozen=True, slots=True)
class Localization:
    """Where a failing configuration goes wrong in a program: one record per tier, composed by
    `localize`.

    Attributes:
        program: the program's name (provenance).
        fingerprint: the program's fingerprint.
        config: the faulty configuration spec.
        kind: verdict kind of the finding (``mismatch``, ``crash``, ...).
        equations: number of top-level equations of the program.
        outputs: tier 1, the failing outputs and their cone (`outputs.Outputs`).
        equation: tier 2, the equation (`equation.Equation`; ``index`` -1 when nothing was
            localized).
        kernels: tier 3, the kernels holding it (`kernels.Placement`).
        op: tier 4, the HLO instruction inside the kernel (`inside.Inside`, its ``cycles`` the
            kernel compiles of every kernel tried, not counted in `cycles`); no instruction and
            evidence ``"skipped: <why>"`` when tier 4 did not run (no equation named, a
            crash-like finding or a labelled freedom, a configuration with no fused kernels, no
            optimized HLO, or ``inside=False``).
        blame: tier 5, the compiler pass (`passes.PassBlame`, its compiles not counted in
            `cycles`); None when it did not run or failed (a note says why).
        cycles: compile+run cycles of the faulty configuration spent by tiers 1-3.
        seconds: wall time of the whole localization (s).
        flaky: True when a failure vanished on a rerun.
        steps: every cycle, in order.
        notes: what the user should know (fallbacks taken, why a tier is missing).
        kernel_hlo: the optimized HLO text of the failing kernel (tier 4's, else tier 3's
            fusions) in the faulty configuration's compile of the whole program, at most
            `KERNEL_HLO_CHARS` characters; "" when there is none.
    """

    program: str
    fingerprint: str
    config: str
    kind: str
    equations: int
    outputs: Outputs
    equation: Equation
    kernels: Placement
    op: Inside
    blame: PassBlame | None
    cycles: int
    seconds: float
    flaky: bool
    steps: tuple[Step, ...] = ()
    notes: tuple[str, ...] = ()
    kernel_hlo: str = ""

    @property
    def located(self) -> bool:
        """Was an equation named, on a failure that did not vanish?"""
        return self.equation.index >= 0 and not self.flaky

    @property
    def compiler_pass(self) -> str:
        """Tier 5's pass name, ``"none"``, or ``""`` (undecided or not run)."""
        return self.blame.compiler_pass if self.blame is not None else ""

    @property
    def operation(self) -> str:
        """The failing operation: tier 4's HLO opcode, else tier 2's primitive, else ""."""
        return self.op.opcode or self.equation.primitive

    def tiers(self) -> list[str]:
        """One line per tier that found something (and tier 4 or 5's reason where it named
        nothing), then the notes: what ``xlaprobe localize`` prints."""
        lines = []
        names = self.outputs.names
        listed = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
        lines.append(f"tier 1 outputs:  {len(names)} failing ({listed}); cone of "
                     f"{len(self.outputs.cone)} equations")
        eq, kernels, op = self.equation, self.kernels, self.op
        if eq.index >= 0:
            lines.append(f"tier 2 equation: {eq.index} {eq.primitive}"
                         + (f" at {eq.source}" if eq.source else "") + f" ({eq.evidence})")
            if eq.segment:
                lines.append(f"       segment:  equations {list(eq.segment)[:12]}"
                             f"{' ...' if len(eq.segment) > 12 else ''} fail compiled alone")
            if kernels.fusions:
                lines.append(f"tier 3 kernels:  {', '.join(kernels.fusions[:6])}"
                             f"{' ...' if len(kernels.fusions) > 6 else ''}"
                             + (f" (alone: {', '.join(kernels.segment_fusions[:3])})"
                                if kernels.segment_fusions else ""))
            if kernels.collectives or kernels.missing:
                lines.append(_collectives_line(kernels))
        if op.instruction:
            lines.append(f"tier 4 op:       {op.instruction} ({op.opcode}) in {op.kernel}: "
                         f"equation {op.equation} {op.primitive}"
                         + (f", with {', '.join(op.with_instructions)}"
                            if op.with_instructions else "") + f" ({op.cycles} compiles)")
            if eq.index >= 0 and op.equation >= 0 and op.equation != eq.index:
                # Tier 2 names the first equation whose value is wrong; inside the fused kernel
                # the wrong instruction can be one another equation contributed.
                lines.append(f"       (equation {op.equation}'s instruction, fused into the kernel "
                             f"of equation {eq.index}, computes the first wrong value)")
        elif op.evidence.startswith("skipped"):
            lines.append(f"tier 4 op:       {op.evidence}")
        elif op.evidence:
            lines.append(f"tier 4 op:       none named ({op.evidence})")
        if self.blame is not None:
            lines.append(f"tier 5 pass:     {self.blame.compiler_pass or '(undecided)'} "
                         f"({self.blame.evidence}; {self.blame.cycles} compiles)")
        return lines + [f"note: {note}" for note in self.notes]

    def __str__(self) -> str:
        return "\n".join([f"{self.config} on {self.program}:", *self.tiers(),
                          f"{self.cycles} compile+run cycles, {self.seconds:.1f} s"
                          + (", FLAKY" if self.flaky else "")])

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict: one object per tier (``pass`` null when not run), and
        ``format`` 2 (format 1 was one flat object)."""
        return {"format": 2, "program": self.program, "fingerprint": self.fingerprint,
                "config": self.config, "kind": self.kind, "equations": self.equations,
                "outputs": self.outputs.to_json(), "equation": self.equation.to_json(),
                "kernels": self.kernels.to_json(),
                "op": self.op.to_json(),
                "pass": self.blame.to_json() if self.blame is not None else None,
                "cycles": self.cycles, "seconds": round(self.seconds, 3), "flaky": self.flaky,
                "steps": [s.to_json() for s in self.steps], "notes": list(self.notes),
                "kernel_hlo": self.kernel_hlo}

    def bug_key(self, program: Program, alike: Sequence[str] = ()) -> str | None:
        """The triage key of the localized failure (`xlaprobe.triage.localized_key`): the failing
        operation (the HLO opcode tier 4 named inside the kernel, else the failing equation's
        primitive: one wrong subtract inside the kernels of erfc and of atanh is one bug), the
        equation's floating result dtypes (else its result dtypes), the guilty pass and a
        planted fault's name; None when nothing was localized or the result is flaky. A mutant
        configuration's finding that a configuration without a planted fault shares (`alike`)
        is a real fault: neither the planted name nor the planted pass (named by fiat, not
        bisected) enters its key.

        Args:
            program: the program this localization is of.
            alike: the configurations of its check that failed the same way.
        """
        if not self.located:
            return None
        dtypes = result_dtypes(program.jaxpr.jaxpr.eqns[self.equation.index])
        planted = planted_fault(self.config, alike)
        guilty = self.compiler_pass if self.compiler_pass not in ("", "none") else ""
        if planted_name(self.config) and not planted:
            guilty = ""
        return localized_key(self.operation, dtypes, guilty, planted)


def _collectives_line(kernels: Placement) -> str:
    """Tier 3's per-device collectives of a partitioned compile, as ``localize`` prints them."""
    if kernels.changed:
        return (f"       per device: collective {', '.join(kernels.changed[:3])} differs from "
                f"the trusted compile's (first to blame; all: {', '.join(kernels.collectives[:6])})")
    if kernels.missing:
        return (f"       per device: collective {', '.join(kernels.missing[:3])} of the trusted "
                "compile is missing (dropped)")
    return (f"       per device: collectives {', '.join(kernels.collectives[:6])} "
            "(the partitioner's, first to blame)")


def _initial_check(program: Program, spec: str, pool: Any, check: CheckResult | None,
                   timeout_s: float | None) -> tuple[CheckResult, int, int]:
    """(the check, cycles spent, reruns needed): reruns a check without finding up to `RERUNS`
    times; a given check is used as is."""
    if check is not None:
        if spec not in check.configs:
            raise InvalidArgument(f"the given check did not run configuration '{spec}'; run "
                                  f"xlaprobe check with --configs {spec},reference")
        return check, 0, 0
    cycles = reruns = 0
    while True:
        result = check_program(program, [spec, "reference"], pool, timeout_s=timeout_s)
        cycles += 1
        verdicts = result.verdicts[result.configs.index(spec)]
        # An accepted freedom (ok with a label) is deterministic: rerunning cannot make it fail.
        if any(v.kind.is_finding for v in verdicts) or reruns == RERUNS or \
                any(v.freedom for v in verdicts):
            return result, cycles, reruns
        reruns += 1


def localize(program: Program, config: Configuration | str, pool: Any, *,
             check: CheckResult | None = None, method: str = "auto", direction: str = "suffix",
             timeout_s: float | None = None,
             on_step: Callable[[Step], None] | None = None,
             passes: bool = True, inside: bool = True) -> Localization:
    """Localize the failure of `config` on `program` (tiers 1-3 and 5, see the module docstring).

    Args:
        program: the failing program.
        config: the faulty configuration (``xla...``, ``mutant:<name>``, ``eager``, ...; fused
            kernels are named for ``xla`` and ``mutant`` kinds only).
        pool: a `xlaprobe.workers.WorkerPool` (`fusion.make_pool`).
        check: a `CheckResult` of `program` that ran `config` and ``reference``, to skip the first
            run; None runs it.
        method: ``"cuts"``, ``"segments"``, or ``"auto"`` (cuts for numeric findings, segments
            for crashes, timeouts and compile errors).
        direction: for segments, ``"suffix"`` or ``"prefix"``: which end of the window the binary
            search fixes first (see `bisect.bisect_segments`).
        timeout_s: per-run limit (s); None: the pool's default.
        on_step: called after each cycle (progress display).
        passes: run tier 5, the compiler pass (`xlaprobe.localization.passes.blame_pass`).
        inside: run tier 4, the op inside the failing fused kernel
            (`xlaprobe.localization.inside.locate_op`; numeric findings of ``xla`` and ``mutant``
            configurations, with the pool's ``call``).

    Returns:
        The `Localization`.

    Raises:
        InvalidArgument: a malformed configuration, a `check` without it, an unknown `method` or
            `direction`, or cuts asked for a crash-like finding.
        NotReproducible: `config` has no finding on `program` (also after `RERUNS` reruns), or
            the reference cannot evaluate the program's intermediates.
    """
    started = time.perf_counter()
    if method not in METHODS:
        raise InvalidArgument(f"unknown localization method '{method}': use {', '.join(METHODS)}")
    if direction not in ("suffix", "prefix"):
        raise InvalidArgument(f"unknown search direction '{direction}': use 'suffix' or 'prefix'")
    config = Configuration.parse(config) if isinstance(config, str) else config
    spec = str(config)
    result, cycles, reruns = _initial_check(program, spec, pool, check, timeout_s)
    kind, method = _finding_kind(program, config, pool, result, reruns, method, timeout_s)
    search = Searcher(config, pool, kind, timeout_s, on_step)
    search.cycles = cycles
    search.baseline = baseline_spec(config) if method == "cuts" else None
    if reruns:
        search.flaky = True
        search.notes.append(f"flaky: the whole program passed {reruns} time(s) before failing")
    search.log("outputs", (), len(program.jaxpr.jaxpr.eqns), True, kind,
               time.perf_counter() - started)
    outputs = failing_outputs(program, result.verdicts[result.configs.index(spec)])
    labels = freedoms.finding_labels(result.verdicts[result.configs.index(spec)])
    if labels:
        search.notes.append(f"the finding is {freedoms.taken(labels)}, not a fault: the tiers "
                            "say where XLA takes it (--accept to call it ok in a check)")
    recording = _recording(pool, program, method, timeout_s)
    segmenter = Segmenter(program, outputs.cone, outputs.indices, recording.reference)
    found = find_equation(search, program, segmenter, recording, method, direction)
    equation, placement = Equation(method), Placement()
    op = Inside.nothing("skipped: no equation named (tier 2)")
    if found is None:
        search.notes.append("the failure did not reproduce on re-verification: nothing localized")
    else:
        equation, segmenter, window = found
        segment = segmenter.segment(*window) if window is not None else None
        placement = place(search, program, equation.index, segment)
        op, equation, placement = _tier4(search, program, equation, placement, recording,
                                         outputs.indices, inside, labels)
    blame = _blame(program, config, pool, result, timeout_s, search) if passes else None
    return Localization(
        program=program.provenance.name, fingerprint=program.fingerprint, config=spec,
        kind=kind.value, equations=len(program.jaxpr.jaxpr.eqns), outputs=outputs,
        equation=equation, kernels=placement, op=op, blame=blame, cycles=search.cycles,
        seconds=time.perf_counter() - started, flaky=search.flaky, steps=tuple(search.steps),
        notes=tuple(search.notes), kernel_hlo=_kernel_hlo(search, program, placement, op))


def _tier4(search: Searcher, program: Program, equation: Equation, placement: Placement,
           recording: Recording, failing: Sequence[int], inside: bool,
           labels: str) -> tuple[Inside, Equation, Placement]:
    """Tier 4 (`op.locate`) where it applies; else its record says why it was skipped
    (`Localization.tiers` prints it: a skipped tier is never silent)."""
    why = "skipped: not asked (inside=False)" if not inside else skipped(search, program, labels)
    if why:
        return Inside.nothing(why), equation, placement
    return locate(search, program, equation, placement, recording, failing)


def _kernel_hlo(search: Searcher, program: Program, placement: Placement, op: Inside) -> str:
    """The HLO text of the failing kernel in the whole program's compile (already cached by
    tier 3: no compile here), cut to `KERNEL_HLO_CHARS`; "" when there is none."""

    text = search.hlo_cache.get(program.fingerprint)
    if not text:
        return ""
    kernel = kernel_text(text, [op.kernel]) if op.kernel else ""
    kernel = kernel or kernel_text(text, list(placement.fusions))
    if len(kernel) > KERNEL_HLO_CHARS:
        kernel = kernel[:KERNEL_HLO_CHARS] + f"\n... (cut at {KERNEL_HLO_CHARS} characters)\n"
    return kernel


def _finding_kind(program: Program, config: Configuration, pool: Any, result: CheckResult,
                  reruns: int, method: str, timeout_s: float | None) -> tuple[VerdictKind, str]:
    """(the finding's summary verdict kind, the tier 2 method: `method`, or the one ``"auto"``
    picks for the kind).

    Raises:
        NotReproducible: `result` has no finding of `config`.
        InvalidArgument: a timeout that is no hang, or cuts asked for a crash-like finding.
    """
    spec = str(config)
    verdicts = result.verdicts[result.configs.index(spec)]
    accepted = freedoms.labels_of(v for v in verdicts if v.kind is VerdictKind.OK)
    if not any(v.kind.is_finding for v in verdicts) and accepted:
        raise NotReproducible(
            f"configuration '{spec}' gives no finding on {program.provenance.name}: it differs "
            f"from float64 only by {freedoms.taken(accepted)}, which localize accepts as ok "
            f"(the default, {','.join(sorted(freedoms.DEFAULT_ACCEPT))}); nothing to localize"
            + (" (XLA:CPU runs every kernel in the processor's flush-to-zero mode: no one kernel "
               "or pass takes it)" if "ftz" in accepted else ""))
    if not any(v.kind.is_finding for v in verdicts):
        raise NotReproducible(
            f"configuration '{spec}' gives no finding on {program.provenance.name} "
            f"(judged against {result.judged_against or 'nothing'}; {reruns + 1} run(s)); nothing "
            f"to localize. Check it first: xlaprobe check TARGET --configs {spec},reference")
    kind = summary_kind({v.kind for v in verdicts})
    if kind is VerdictKind.TIMEOUT:
        _check_timeout_is_a_hang(program, config, pool, timeout_s)
    if method == "auto":
        method = "cuts" if kind.is_numeric else "segments"
    elif method == "cuts" and not kind.is_numeric:
        raise InvalidArgument(f"the finding is a {kind.value}: the whole program shows it at every "
                              "cut, so only method='segments' can isolate it")
    return kind, method


def _recording(pool: Any, program: Program, method: str, timeout_s: float | None) -> Recording:
    """The reference values (with the honest runs of the error budget for cuts) of every
    top-level equation of `program`.

    Raises:
        NotReproducible: the reference cannot evaluate them.
    """
    recorder, variables = recording_program(program, range(len(program.jaxpr.jaxpr.eqns)))
    try:
        if method == "cuts":
            return record(pool, recorder, variables, timeout_s)
        return _reference_only(pool, recorder, variables, timeout_s)
    except RuntimeError as exc:
        raise NotReproducible(f"the reference cannot evaluate the intermediates of "
                              f"{program.provenance.name} ({exc}); localization needs them") from exc


def _blame(program: Program, config: Configuration, pool: Any, result: CheckResult,
           timeout_s: float | None, search: Searcher) -> PassBlame | None:
    """Tier 5 (`xlaprobe.localization.passes.blame_pass`), or None with a note where it failed (a
    failed dump or judgement: tiers 1-4 stand)."""
    try:
        return blame_pass(program, config, pool, result, timeout_s=timeout_s)
    except Exception as exc:
        search.notes.append(f"tier 5 (compiler pass) failed: {type(exc).__name__}: "
                            f"{str(exc)[:200]}")
        return None


def _check_timeout_is_a_hang(program: Program, config: Configuration, pool: Any,
                             timeout_s: float | None) -> None:
    """A timeout is a finding only where the configuration still does not finish when given
    longer (ten times the limit, at least 30 s so that a loaded machine's slow compile is no
    hang, at most a minute more): else the limit is too short for the program's compile and every
    cut would "fail".

    Raises:
        InvalidArgument: the configuration finishes with the longer limit.
    """
    limit = timeout_s if timeout_s is not None else getattr(pool, "timeout_s", None)
    if limit is None:
        return
    longer = min(max(10 * limit, 30.0), limit + 60.0)
    started = time.perf_counter()
    outcome = pool.run(program, config, timeout_s=longer)
    if outcome.kind.value != "timeout":
        raise InvalidArgument(f"'{config}' timed out after {limit:g} s on "
                              f"{program.provenance.name} but finishes within {longer:g} s "
                              f"({time.perf_counter() - started:.1f} s): no hang to localize; "
                              "raise --timeout")


def _reference_only(pool: Any, recorder: Program, variables: list[Any],
                    timeout_s: float | None) -> Recording:
    outcome = pool.run(recorder, "reference", timeout_s=timeout_s)
    if not outcome.ran:
        raise RuntimeError(f"{outcome.kind.value}: {outcome.error[-300:]}")
    return Recording(dict(zip(variables, outcome.outputs)), {}, {})


def cycle_bound(n: int) -> float:
    """The cycle budget the issue sets for a program of `n` equations: 2 log2(n) + 10.

    >>> cycle_bound(1024)
    30.0
    """
    return 2 * math.log2(max(n, 1)) + 10
