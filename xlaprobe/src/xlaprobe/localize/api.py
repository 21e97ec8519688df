"""Localization, tiers 1-5: failing outputs -> the jaxpr equation XLA gets wrong -> the fused
kernels it sits in, with the smallest segment around it that fails compiled alone -> the HLO
instruction inside the kernel -> the HLO pass that introduces the fault.

1. **Outputs.** The finding's failing output leaves and their cone of influence (the top-level
   equations they depend on); the rest of the program is never blamed.
2. **Equation** (`xlaprobe.localize.bisect`). The reference interpreter and the honest runs of
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
3. **Kernel** (`xlaprobe.localize.fusion`). The faulty configuration's optimized HLO of the whole
   program (and of the segment alone) maps the equation to the fusions that hold its
   instructions, through the ``eqnN`` named scope every ``xla`` compile traces equation N in.
4. **Op** (`xlaprobe.localize.inside`). The failing fused kernel is compiled alone, fed the values
   it reads; a binary search over its instructions with a right value (an equation's reference
   value, or the twin's in the trusted compile), each earlier one replaced by it, names the
   latest whose suffix still fails: the HLO instruction, with its equation. Its compiles are
   counted apart (``op_cycles``, with the trusted compile).
5. **Compiler pass** (`xlaprobe.localize.passes`). ddmin over ``xla_disable_hlo_passes``, latest
   pass first, among the passes that changed this program's module: the pass whose disabling
   alone fixes the fault, or ``"none"``; a planted fault's own pass for ``mutant`` configurations.
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

from xlaprobe import jaxcompat, primitives

from xlaprobe.check import CheckResult, check_program
from xlaprobe.configs.registry import Configuration
from xlaprobe.errors import InvalidArgument, NotReproducible
from xlaprobe.hlo import HloText
from xlaprobe.localize import fusion as fusion_mod
from xlaprobe.localize.bisect import (RERUNS, Recording, Searcher, Step, alone_window,
                                      baseline_spec, bisect_cuts, bisect_segments,
                                      latest_failing_start, record, summary_kind)
from xlaprobe.localize.segments import Segmenter, cone_of_influence, recording_program
from xlaprobe.oracle import VerdictKind
from xlaprobe.program import Program
from xlaprobe.triage import localized_key, planted_fault

METHODS = ("auto", "cuts", "segments")
#: Primitives that only move or reinterpret data: XLA folds them into their producers' kernels.
DATA_MOVEMENT = primitives.names(lambda p: p.movement in (
    primitives.Movement.RESHAPE, primitives.Movement.BROADCAST, primitives.Movement.CONVERT,
    primitives.Movement.COPY))
#: The evidence of an equation named only as a necessary end of a failing segment.
FALLBACK = "a necessary end of the smallest failing segment (not pinned down further)"


@dataclasses.dataclass(frozen=True, slots=True)
class Localization:
    """Where a failing configuration goes wrong in a program.

    Attributes:
        program: the program's name (provenance).
        fingerprint: the program's fingerprint.
        config: the faulty configuration spec.
        kind: verdict kind of the finding (``mismatch``, ``crash``, ...).
        method: ``"cuts"`` or ``"segments"`` (see the module docstring).
        equations: number of top-level equations of the program.
        failing_outputs: names of the failing output leaves (tier 1).
        cone: number of top-level equations the failing outputs depend on.
        equation: the top-level equation named as miscompiled, or -1.
        primitive: its primitive name, or "".
        source: its source line (``file:line (function)``) where the jaxpr still carries it, else "".
        exact: True when the equation is pinned down by `evidence`; False when it is only a
            necessary end of the failing segment (or nothing was localized).
        evidence: why this equation: ``"first wrong value in the program's compile"``, ``"fused
            into the kernel of the first wrong value ... and needed for it to fail compiled
            alone"``, ``"fails compiled alone"``, ``"first wrong value of the smallest segment that
            fails alone"``, or `FALLBACK`.
        segment: top-level equation indices of the smallest segment found that fails compiled
            alone; empty when none does (the fault needs the whole program's compile).
        fusions: in the faulty configuration's optimized HLO of the whole program, the kernels
            (fusions, or unfused instructions) holding the equation's instructions (tier 3).
        instructions: those HLO instruction names.
        segment_fusions: the same kernels in the optimized HLO of the segment compiled alone.
        cycles: compile+run cycles of the faulty configuration spent.
        seconds: wall time of the whole localization (s).
        flaky: True when a failure vanished on a rerun.
        steps: every cycle, in order.
        notes: what the user should know (fallbacks taken, why a tier is missing).
        compiler_pass: tier 5 (`xlaprobe.localize.passes`): the HLO pass whose disabling fixes
            the fault; ``"none"`` when disabling no subset of the passes that changed the module
            fixes it; ``""`` when undecided or not run.
        pass_disabled: a 1-minimal set of passes whose disabling fixes the fault.
        pass_candidates: the passes that changed the module, in pipeline order.
        pass_evidence: why (one line).
        pass_cycles: compiles tier 5 spent (not counted in `cycles`).
        op_kernel: tier 4 (`xlaprobe.localize.inside`): the fused kernel split, or "".
        op_instruction: the HLO instruction inside it named as computing wrongly, or "".
        op_opcode: its opcode.
        op_equation: its top-level jaxpr equation (from its ``eqnK`` scope), or -1.
        op_primitive: that equation's primitive, or "".
        op_with: non-anchor instructions computing it (the fault may lie in them too).
        op_evidence: why, or why no instruction was named.
        op_cycles: kernel compiles tier 4 spent (not counted in `cycles`).
    """

    program: str
    fingerprint: str
    config: str
    kind: str
    method: str
    equations: int
    failing_outputs: tuple[str, ...]
    cone: int
    equation: int
    primitive: str
    source: str
    exact: bool
    evidence: str
    segment: tuple[int, ...]
    fusions: tuple[str, ...]
    instructions: tuple[str, ...]
    segment_fusions: tuple[str, ...]
    cycles: int
    seconds: float
    flaky: bool
    steps: tuple[Step, ...] = ()
    notes: tuple[str, ...] = ()
    compiler_pass: str = ""
    pass_disabled: tuple[str, ...] = ()
    pass_candidates: tuple[str, ...] = ()
    pass_evidence: str = ""
    pass_cycles: int = 0
    op_kernel: str = ""
    op_instruction: str = ""
    op_opcode: str = ""
    op_equation: int = -1
    op_primitive: str = ""
    op_with: tuple[str, ...] = ()
    op_evidence: str = ""
    op_cycles: int = 0

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (``steps`` as a list of dicts)."""
        data: dict[str, Any] = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            data[field.name] = list(value) if isinstance(value, tuple) else value
        data["steps"] = [s.to_json() for s in self.steps]
        data["seconds"] = round(self.seconds, 3)
        return data

    def bug_key(self, program: Program, alike: Sequence[str] = ()) -> str | None:
        """The triage key of the localized failure (`xlaprobe.triage.localized_key`): the failing
        operation (the HLO opcode tier 4 named inside the kernel, else the failing equation's
        primitive: one wrong subtract inside the kernels of erfc and of atanh is one bug), the
        equation's floating result dtypes (else its result dtypes), the guilty pass and a
        planted fault's name; None
        when nothing was localized or the result is flaky. A mutant configuration's finding that
        a configuration without a planted fault shares (`alike`) is a real fault: neither the
        planted name nor the planted pass (named by fiat, not bisected) enters its key.

        Args:
            program: the program this localization is of.
            alike: the configurations of its check that failed the same way.
        """
        if self.equation < 0 or self.flaky:
            return None
        eqn = program.jaxpr.jaxpr.eqns[self.equation]
        # The result dtypes name the arithmetic that went wrong; index and mask operands (an
        # int32 scatter index, a bool predicate) do not, and would split one bug in several.
        results = [str(v.aval.dtype) for v in eqn.outvars if hasattr(v, "aval")]
        dtypes = [d for d in results if d.startswith(("float", "bfloat", "complex"))] or results
        planted = planted_fault(self.config, alike)
        guilty = self.compiler_pass if self.compiler_pass not in ("", "none") else ""
        if self.config.startswith("mutant:") and not planted:
            guilty = ""
        return localized_key(self.op_opcode or self.primitive, dtypes, guilty, planted)


def _source_line(eqn: Any) -> str:
    text = jaxcompat.source_summary(eqn)
    # A canonical jaxpr re-traced without the user's frames points into xlaprobe itself, which
    # tells the user nothing.
    return "" if "xlaprobe/" in text.replace("\\", "/") or "unknown" in text else text


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
        if any(v.kind.is_finding for v in verdicts) or reruns == RERUNS:
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
        passes: run tier 5, the compiler pass (`xlaprobe.localize.passes.blame_pass`).
        inside: run tier 4, the op inside the failing fused kernel
            (`xlaprobe.localize.inside.locate_op`; numeric findings of ``xla`` and ``mutant``
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
    loc = _equation_to_op(search, program, method, direction, result, inside, started)
    if not passes:
        return loc
    return _with_pass(program, config, pool, result, loc, timeout_s, started)


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


def _equation_to_op(search: Searcher, program: Program, method: str, direction: str,
                    result: CheckResult, inside: bool, started: float) -> Localization:
    """Tiers 1-4: the failing outputs' cone, the equation, its kernels, the op inside one."""
    # Tier 1: the cone of the failing outputs.
    jaxpr = program.jaxpr.jaxpr
    verdicts = result.verdicts[result.configs.index(search.spec)]
    failing = [v.index for v in verdicts if v.kind.is_finding]
    cone = cone_of_influence(jaxpr, failing)
    if not cone:
        raise NotReproducible(f"the failing outputs of {program.provenance.name} are program "
                              "inputs or literals: no equation computes them")
    recording = _recording(search.pool, program, method, search.timeout_s)
    segmenter = Segmenter(program, cone, failing, recording.reference)

    # Tier 2.
    if method == "cuts":
        found = _by_cuts(search, program, segmenter, recording)
    else:
        found = _by_segments(search, program, segmenter, recording, direction)
    if found is None:
        search.notes.append("the failure did not reproduce on re-verification: nothing localized")
        return _result(search, program, method, result, segmenter, -1, "", (), None, started)
    segmenter, equation, evidence, window = found
    # Tier 3.
    segment = segmenter.segment(*window) if window is not None else None
    loc = _result(search, program, method, result, segmenter, equation, evidence,
                  segmenter.cone[window[0]:window[1]] if window else (), segment, started)
    if inside:
        loc = _inside(search, program, loc, recording, failing)
    return loc


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


def _with_pass(program: Program, config: Configuration, pool: Any, result: CheckResult,
               loc: Localization, timeout_s: float | None, started: float) -> Localization:
    """`loc` with tier 5, the compiler pass (`xlaprobe.localize.passes.blame_pass`)."""
    from xlaprobe.localize.passes import blame_pass
    try:
        blame = blame_pass(program, config, pool, result, timeout_s=timeout_s)
    except Exception as exc:  # a failed dump or judgement: tier 5 is missing, tiers 1-4 stand
        return dataclasses.replace(loc, notes=loc.notes + (
            f"tier 5 (compiler pass) failed: {type(exc).__name__}: {str(exc)[:200]}",))
    return dataclasses.replace(
        loc, compiler_pass=blame.compiler_pass, pass_disabled=blame.disabled,
        pass_candidates=blame.candidates, pass_evidence=blame.evidence, pass_cycles=blame.cycles,
        seconds=time.perf_counter() - started)


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


#: Kernels of the named equation tier 4 tries, in order, until one names an instruction.
INSIDE_KERNELS = 8


def _inside(search: Searcher, program: Program, loc: Localization, recording: Recording,
            failing: list[int]) -> Localization:
    """Tier 4 (`xlaprobe.localize.inside`) on the kernels of the named equation, then on those
    of the rest of the smallest failing segment, earliest first, then on the fusions they read;
    among them, those feeding the
    failing outputs first, and of those the ones whose values differ from the trusted
    compile's (`inside.screen_kernels`). An instruction named in a kernel of another equation
    of the segment names that equation and kernel instead (tiers 2-3 saw the first wrong value
    downstream of it): fed right values, it computes wrongly. Where none of them names one,
    the rest of the module's kernels that feed the failing outputs and disagree with the
    trusted compile are tried: a segment compiled alone can fail where the whole program's
    compile does not."""
    from xlaprobe.configs.xla import compiler_options
    from xlaprobe.localize.inside import screen_kernels
    text = search.hlo_cache.get(program.fingerprint)
    if not search.kind.is_numeric or text is None or search.config.kind not in ("xla", "mutant"):
        return loc
    trusted = _trusted(search, program)
    instructions = list(HloText(text).instructions())
    fused = {i.name for i in instructions if i.opcode == "fusion"}
    kernels, upstream = _candidate_kernels(text, loc, instructions, fused, failing)
    cycles, whole = (1 if trusted is not None else 0), False
    options = compiler_options(search.config) if search.config.kind == "xla" else {}
    if trusted is not None:
        diverging, runs = screen_kernels(program, search.pool, text, kernels, trusted,
                                         options=options, timeout_s=search.timeout_s)
        kernels = diverging + [k for k in kernels if k not in diverging]
        cycles += runs
    found, spent, failure = _first_located(search, program, text, kernels, recording, trusted)
    cycles += spent
    if failure:
        return dataclasses.replace(loc, notes=loc.notes + (failure,), op_cycles=cycles)
    if (found is None or not found.instruction) and trusted is not None:
        # Tier 2 cut the program, and a segment compiled alone can go wrong where the whole
        # program's compile does not (a defect that strikes the first kernel of its pattern
        # strikes another one in a smaller module). The whole module's kernels that feed the
        # failing outputs and disagree with their trusted twins are where its own fault is.
        rest = [i.name for i in instructions
                if i.name in fused and i.name in upstream and i.name not in kernels]
        diverging, runs = screen_kernels(program, search.pool, text, rest, trusted,
                                            options=options, timeout_s=search.timeout_s)
        cycles += runs
        elsewhere, spent, failure = _first_located(search, program, text, diverging, recording,
                                                   trusted)
        cycles += spent
        if failure:
            return dataclasses.replace(loc, notes=loc.notes + (failure,), op_cycles=cycles)
        if elsewhere is not None and elsewhere.instruction:
            found, whole = elsewhere, True
    if found is None:
        return dataclasses.replace(loc, op_evidence="no fused kernel holds the equation")
    return _with_op(program, loc, text, found, cycles, whole)


def _candidate_kernels(text: str, loc: Localization, instructions: Sequence[Any],
                       fused: set[str], failing: list[int]) -> tuple[list[str], set[str]]:
    """(tier 4's kernels in the order `_inside` tries them, the entry instructions the failing
    outputs depend on)."""
    kernels = list(loc.fusions)
    others = [k for k in sorted(loc.segment) if k != loc.equation]
    for found_kernels in fusion_mod.equation_kernels(text, others).values():
        kernels += [k for k in found_kernels.fusions if k not in kernels]
    # A value XLA folded into the kernel that feeds an unfused instruction (a transpose into
    # the copy before a dot) is computed there: the fusions read by the kernels come last.
    by_name = {i.name: i for i in instructions}
    for kernel in list(kernels):
        kernels += [o for o in (by_name[kernel].operands if kernel in by_name else ())
                    if o in fused and o not in kernels]
    # An equation XLA fused into many kernels (an optimizer's scalar into every parameter's
    # update) is wrong in the ones that feed the failing outputs: those first.
    upstream = fusion_mod.feeding(text, failing)
    return sorted((k for k in kernels if k in fused), key=lambda k: k not in upstream), upstream


def _with_op(program: Program, loc: Localization, text: str, found: Any, cycles: int,
             whole: bool) -> Localization:
    """`loc` with tier 4's `inside.Inside` `found`; an instruction in a kernel of another
    equation names that equation and its kernels instead (`whole`: found among the whole
    module's kernels)."""
    jaxpr = program.jaxpr.jaxpr
    primitive = jaxpr.eqns[found.equation].primitive.name if 0 <= found.equation < len(
        jaxpr.eqns) else ""
    loc = dataclasses.replace(
        loc, op_kernel=found.kernel, op_instruction=found.instruction, op_opcode=found.opcode,
        op_equation=found.equation, op_primitive=primitive, op_with=found.with_instructions,
        op_evidence=found.evidence, op_cycles=cycles)
    if not found.instruction or found.equation in (-1, loc.equation) or found.kernel in loc.fusions:
        return loc  # the instruction sits in a kernel of the named equation: tier 3 stands
    kernels_of, note = fusion_mod.kernels_in(text, jaxpr, found.equation)
    fusions = (found.kernel, *[k for k in kernels_of.fusions if k != found.kernel])
    return dataclasses.replace(
        loc, equation=found.equation, primitive=primitive, source=_source_line(
            jaxpr.eqns[found.equation]), exact=True,
        evidence=(f"its instruction {found.instruction} in kernel {found.kernel}, fed right "
                  f"values, computes wrongly (tier 4; " + (
                      f"the whole module's kernels screened: those of equation "
                      f"{loc.equation}'s segment compute right in the whole program's compile, "
                      f"which tier 2 cut)" if whole else
                      f"the first wrong value tier 2 saw was equation {loc.equation}'s)")),
        fusions=fusions, instructions=kernels_of.instructions,
        notes=loc.notes + ((note,) if note else ()))


def _first_located(search: Searcher, program: Program, text: str, kernels: Sequence[str],
                   recording: Recording, trusted: Any) -> tuple[Any, int, str]:
    """`inside.locate_op` on `kernels` in order (at most `INSIDE_KERNELS`) until one names an
    instruction: (the last `inside.Inside` or None, cycles spent, a note when XLA rejected an
    edited module in the parent, which ends tier 4)."""
    from xlaprobe.localize.inside import locate_op
    found, cycles = None, 0
    for kernel in kernels[:INSIDE_KERNELS]:
        try:
            found = locate_op(program, search.config, search.pool, text, kernel, recording,
                              trusted=trusted, timeout_s=search.timeout_s)
        except Exception as exc:  # an edited module XLA rejects in the parent: tier 4 missing
            return found, cycles, (f"tier 4 (op inside the kernel) failed: "
                                   f"{type(exc).__name__}: {str(exc)[:200]}")
        cycles += found.cycles
        if found.instruction:
            break
    return found, cycles, ""


def _trusted(search: Searcher, program: Program) -> Any:
    """The trusted configuration's compile of `program` for tier 4's twin kernels
    (`xlaprobe.localize.inside.Trusted`), or None where the trusted configuration is no ``xla``
    compile (plain ``xla`` is judged against ``eager``) or its HLO cannot be had."""
    from xlaprobe.configs.xla import compiler_options
    from xlaprobe.localize.inside import Trusted
    spec = Configuration.parse(baseline_spec(search.config))
    if spec.kind != "xla":
        return None
    outcome = fusion_mod.optimized_hlo(search.pool, program, spec, timeout_s=search.timeout_s)
    if not outcome.ran:
        search.notes.append(f"no optimized HLO from the trusted {spec} for tier 4: "
                            f"{outcome.kind.value}")
        return None
    return Trusted(str(spec), outcome.value, compiler_options(spec))


def _reference_only(pool: Any, recorder: Program, variables: list[Any],
                    timeout_s: float | None) -> Recording:
    outcome = pool.run(recorder, "reference", timeout_s=timeout_s)
    if not outcome.ran:
        raise RuntimeError(f"{outcome.kind.value}: {outcome.error[-300:]}")
    return Recording(dict(zip(variables, outcome.outputs)), {}, {})


def _ancestors(jaxpr: Any, equation: int) -> set[int]:
    """Top-level equations whose values `equation` depends on (not itself)."""
    producer = {v: k for k, eqn in enumerate(jaxpr.eqns) for v in eqn.outvars}
    seen: set[int] = set()
    stack = [a for a in jaxpr.eqns[equation].invars if isinstance(a, jaxcompat.Var) and a in producer]
    while stack:
        k = producer[stack.pop()]
        if k not in seen:
            seen.add(k)
            stack.extend(a for a in jaxpr.eqns[k].invars
                         if isinstance(a, jaxcompat.Var) and a in producer)
    return seen


def _lowest_fused(search: Searcher, program: Program, segmenter: Segmenter, equation: int,
                  position: int) -> int:
    """The earliest cone position of an equation that `equation` depends on and that XLA fused
    into a kernel of `equation` in the faulty compile of the program (`position` if none)."""
    text = _hlo(search, program, ())
    if text is None:
        return position
    own = fusion_mod.equation_kernels(text, [equation])[equation]
    if not own.instructions:  # an equation XLA folded away is its own answer
        return position
    jaxpr = program.jaxpr.jaxpr
    fused = fusion_mod.kernel_equations(text, own.fusions) & _ancestors(jaxpr, equation)
    where = {k: p for p, k in enumerate(segmenter.cone)}
    return min([where[k] for k in fused if k in where] + [position])


def _by_cuts(search: Searcher, program: Program, segmenter: Segmenter, recording: Recording
             ) -> tuple[Segmenter, int, str, tuple[int, int] | None] | None:
    """Cuts find the first wrong value; segments compiled alone then check it, or find the
    earlier equation fused into its kernel that XLA gets wrong (see the module docstring)."""
    cut, trial = bisect_cuts(search, segmenter, recording)
    if cut < segmenter.size:  # the cut at size is the failing program itself, already verified
        again = search.confirm(lambda: search.run_cut(segmenter, cut, recording, "cut-verify"),
                               f"the values before cone position {cut}")
        if again is None:
            return None
        trial = again
    position = cut - 1
    equation = segmenter.cone[position]
    exposed = segmenter.exposed_at(cut)
    wrong = {segmenter.producer(exposed[i]) for i in trial.failing}
    # At the last cut the exposed values are the failing outputs, and the cone's last equation
    # computes one of them (nothing later reads it).
    evidence = "first wrong value in the program's compile"
    if not (equation in wrong or cut == segmenter.size):
        evidence = FALLBACK
        search.notes.append(f"equation {equation} is where the values first go wrong, but its own "
                            f"outputs are right: the wrong ones come from equations "
                            f"{sorted(wrong)[:5]}")
    # Compiled alone, the equation itself may already fail. If not, XLA may have fused a copy of
    # an earlier equation into the kernel that computes the first wrong value while computing
    # that equation's own (exposed) value apart: the copy is what it gets wrong. Among the
    # equations fused into that kernel, the latest start whose segment up to here fails alone is
    # that equation when it fails alone too, else it only gives the context the fault needs.
    window = None
    if search.segment_trial(segmenter, position, position + 1, "alone").failed:
        window = (position, position + 1)
    else:
        lowest = _lowest_fused(search, program, segmenter, equation, position)
        start = latest_failing_start(search, segmenter, lowest, position + 1)
        if start is not None and search.segment_trial(segmenter, start, start + 1,
                                                      "alone").failed:
            window = (start, start + 1)
            equation = segmenter.cone[start]
            evidence = (f"fused into the kernel of the first wrong value (equation "
                        f"{segmenter.cone[position]}) and fails compiled alone")
        elif start is not None:
            window = (start, position + 1)
        else:  # context after it (a consumer that fuses it) or around it
            window = alone_window(search, segmenter, position)
    if window is None:
        search.notes.append(f"no segment around equation {equation} fails compiled alone: the "
                            "fault needs the whole program's compile")
    equation, evidence = _through_data_movement(search, program, equation, evidence)
    return segmenter, equation, evidence, window


def _through_data_movement(search: Searcher, program: Program, equation: int,
                           evidence: str) -> tuple[int, str]:
    """A reshape (or broadcast, convert, ...) that XLA folded into its producer's kernel computes
    nothing itself: the wrong value it shows first is the producer's kernel's. Returns the nearest
    producer that is no such equation instead, else the arguments unchanged."""
    jaxpr = program.jaxpr.jaxpr
    text = _hlo(search, program, ())
    if text is None or jaxpr.eqns[equation].primitive.name not in DATA_MOVEMENT:
        return equation, evidence
    if fusion_mod.equation_kernels(text, [equation])[equation].instructions:
        return equation, evidence
    current = equation
    for _ in range(fusion_mod.FOLD_DEPTH):
        producers = fusion_mod.producers(jaxpr, current)
        if not producers:
            break
        current = producers[0]
        if jaxpr.eqns[current].primitive.name not in DATA_MOVEMENT:
            return current, (f"computes the value that equation {equation} "
                             f"({jaxpr.eqns[equation].primitive.name}, folded into its kernel) "
                             "first shows wrong")
    return equation, evidence


def _by_segments(search: Searcher, program: Program, segmenter: Segmenter, recording: Recording,
                 direction: str) -> tuple[Segmenter, int, str, tuple[int, int] | None] | None:
    jaxpr = program.jaxpr.jaxpr
    if not search.run_segment(segmenter.segment(0, segmenter.size), "outputs").failed:
        # Dropping the passing outputs (or the equations only they need) changed the compile.
        search.notes.append("the failing outputs alone did not fail: searching the whole program")
        segmenter = Segmenter(program, range(len(jaxpr.eqns)), range(len(jaxpr.outvars)),
                              recording.reference)
        whole = segmenter.segment(0, segmenter.size)
        if search.confirm(lambda: search.run_segment(whole, "outputs"), "the whole program") is None:
            return None
    start, stop = bisect_segments(search, segmenter, direction)
    if (start, stop) != (0, segmenter.size):
        window = segmenter.segment(start, stop)
        if search.confirm(lambda: search.run_segment(window, "verify"),
                          f"equations {window.equations[0]}..{window.equations[-1]}") is None:
            search.notes.append("the smallest failing segment did not fail again: the result "
                                "is a best guess")
    if stop - start == 1:
        return segmenter, segmenter.cone[start], "fails compiled alone", (start, stop)
    exposed = segmenter.segment(start, stop, expose_all=True)
    trial = search.run_segment(exposed, "expose")
    if trial.failed:
        return (segmenter, min(exposed.outputs[i] for i in trial.failing),
                "first wrong value of the smallest segment that fails alone", (start, stop))
    # Exposing the intermediates changed the fused code: blame the window's necessary end.
    blamed = segmenter.cone[start] if direction == "suffix" else segmenter.cone[stop - 1]
    search.notes.append(f"with its intermediates exposed the segment passed; blaming its "
                        f"{'first' if direction == 'suffix' else 'last'} equation {blamed}")
    return segmenter, blamed, FALLBACK, (start, stop)


def _hlo(search: Searcher, target: Program, equations: tuple[int, ...]) -> str | None:
    """The faulty configuration's optimized HLO text of `target` (one compile cycle, cached), or
    None (with a note) where there is none."""
    cache = search.hlo_cache
    if target.fingerprint in cache:
        return cache[target.fingerprint]
    try:
        config = fusion_mod.hlo_config(search.config)
    except InvalidArgument as exc:
        cache[target.fingerprint] = None
        search.notes.append(str(exc))
        return None
    started = time.perf_counter()
    outcome = fusion_mod.optimized_hlo(search.pool, target, config, timeout_s=search.timeout_s)
    search.cycles += 1
    kind = VerdictKind.OK if outcome.ran else VerdictKind(outcome.kind.value)
    search.log("hlo", equations, len(target.jaxpr.jaxpr.eqns), outcome.ran, kind,
               time.perf_counter() - started)
    text = None
    if outcome.ran:
        text = outcome.value
    else:
        error = outcome.error.strip().splitlines()[-1][:200] if outcome.error.strip() else ""
        search.notes.append(f"no optimized HLO from {config}: {outcome.kind.value} {error}")
    cache[target.fingerprint] = text
    return text


def _kernels(search: Searcher, program: Program, equation: int, segment: Any
             ) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(kernels, instructions) of `equation` in the faulty configuration's optimized HLO of the
    whole program, and its kernels in the HLO of `segment` compiled alone."""
    fusions: tuple[str, ...] = ()
    instructions: tuple[str, ...] = ()
    alone: tuple[str, ...] = ()
    text = _hlo(search, program, ())
    if text is not None:
        kernels, note = fusion_mod.kernels_in(text, program.jaxpr.jaxpr, equation)
        fusions, instructions = kernels.fusions, kernels.instructions
        if note:
            search.notes.append(note)
    if segment is not None and equation in segment.equations:
        text = _hlo(search, segment.program, segment.equations)
        if text is not None:
            local = segment.equations.index(equation)
            alone = fusion_mod.kernels_in(text, segment.program.jaxpr.jaxpr, local)[0].fusions
    return fusions, instructions, alone


def _result(search: Searcher, program: Program, method: str, result: CheckResult,
            segmenter: Segmenter, equation: int, evidence: str, segment: tuple[int, ...],
            segment_program: Any, started: float) -> Localization:
    jaxpr = program.jaxpr.jaxpr
    verdicts = result.verdicts[result.configs.index(search.spec)]
    fusions: tuple[str, ...] = ()
    instructions: tuple[str, ...] = ()
    segment_fusions: tuple[str, ...] = ()
    if equation >= 0:
        fusions, instructions, segment_fusions = _kernels(search, program, equation,
                                                          segment_program)
    eqn = jaxpr.eqns[equation] if equation >= 0 else None
    return Localization(
        program=program.provenance.name, fingerprint=program.fingerprint, config=search.spec,
        kind=search.kind.value, method=method, equations=len(jaxpr.eqns),
        failing_outputs=tuple(v.output for v in verdicts if v.kind.is_finding),
        cone=len(segmenter.cone), equation=equation,
        primitive=eqn.primitive.name if eqn is not None else "",
        source=_source_line(eqn) if eqn is not None else "",
        exact=bool(evidence) and evidence != FALLBACK, evidence=evidence, segment=tuple(segment),
        fusions=fusions, instructions=instructions, segment_fusions=segment_fusions,
        cycles=search.cycles, seconds=time.perf_counter() - started, flaky=search.flaky,
        steps=tuple(search.steps), notes=tuple(search.notes))


def cycle_bound(n: int) -> float:
    """The cycle budget the issue sets for a program of `n` equations: 2 log2(n) + 10.

    >>> cycle_bound(1024)
    30.0
    """
    return 2 * math.log2(max(n, 1)) + 10
