"""Localization tier 4's driver: which fused kernels `xlaprobe.localization.inside` splits, in what
order, and what its answer changes in tiers 2-3.

Tried in order until one names an instruction: the kernels of the named equation, then those of
the rest of the smallest failing segment, earliest first, then the fusions they read; among
them, those feeding the failing outputs first, and of those the ones whose values differ from
the trusted compile's (`inside.screen_kernels`). An instruction named in a kernel of another
equation of the segment names that equation and kernel instead (tiers 2-3 saw the first wrong
value downstream of it): fed right values, it computes wrongly. Where none of them names one,
the rest of the module's kernels that feed the failing outputs and disagree with the trusted
compile are tried: a segment compiled alone can fail where the whole program's compile does
not."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

from xlaprobe import freedoms
from xlaprobe.configs.registry import Configuration
from xlaprobe.configs.xla import compiler_options
from xlaprobe.hlo import HloText, Instruction
from xlaprobe.localization import fusion
from xlaprobe.localization.bisect import Recording, Searcher, baseline_spec
from xlaprobe.localization.equation import Equation
from xlaprobe.localization.inside import Inside, Trusted, locate_op, screen_kernels
from xlaprobe.localization.kernels import Placement
from xlaprobe.program import Program

#: Kernels tier 4 splits, in order, until one names an instruction.
INSIDE_KERNELS = 8


def applies(search: Searcher, program: Program) -> bool:
    """Does tier 4 run: a numeric finding of an ``xla`` or ``mutant`` configuration whose
    optimized HLO tiers 2-3 obtained?"""
    return not skipped(search, program)


def skipped(search: Searcher, program: Program, labels: str = "") -> str:
    """Why tier 4 does not run on this localization (one line, ``"skipped: ..."``), or ""
    when it runs (`applies`).

    Args:
        search: the localization's state after tiers 2-3.
        program: the failing program.
        labels: the finding's freedoms when it is a labelled freedom
            (`xlaprobe.freedoms.finding_labels`).
    """
    if labels:
        return (f"skipped: {freedoms.taken(labels)} is no wrong value to trace to an "
                "instruction (tier 4 needs a numeric mismatch)")
    if not search.kind.is_numeric:
        return (f"skipped: a {search.kind.value} finding has no wrong value to trace to an "
                "instruction (tier 4 needs a numeric mismatch)")
    if search.config.kind == "jaxlib":
        return (f"skipped: '{search.config}' runs in another release's environment: no "
                "optimized HLO of it to split (tiers 3-5 work on this jaxlib's xla and mutant "
                "configurations)")
    if search.config.kind == "spmd":
        return ("skipped: a partitioned module's per-device kernels are not compiled alone (a "
                "collective needs its peer devices); tier 3 names them")
    if search.config.kind not in ("xla", "mutant"):
        return (f"skipped: '{search.config}' is not an XLA compile of the whole program (no "
                "fused kernels to split)")
    if search.hlo_cache.get(program.fingerprint) is None:
        return ("skipped: no optimized HLO of the whole program (tier 3 could not get it; see "
                "the notes)")
    return ""


def locate(search: Searcher, program: Program, equation: Equation, placement: Placement,
           recording: Recording, failing: Sequence[int]
           ) -> tuple[Inside, Equation, Placement]:
    """Tier 4: (its record, with the kernel compiles of every kernel tried as ``cycles``; the
    equation and placement, revised when the instruction computes another equation of the
    segment or of the module).

    Args:
        search: the localization's state; `applies` must hold.
        program: the failing program.
        equation: tier 2's result.
        placement: tier 3's result.
        recording: reference values and honest runs of every top-level equation.
        failing: indices of the failing outputs.
    """
    started = time.perf_counter()
    text = search.hlo_cache[program.fingerprint]
    assert text is not None, "tier 4 runs only where tiers 2-3 had the optimized HLO"
    trusted = _trusted(search, program)
    instructions = list(HloText(text).instructions())
    fused = {i.name for i in instructions if i.opcode == "fusion"}
    kernels, upstream = _candidate_kernels(text, equation, placement, instructions, fused,
                                           failing)
    cycles, whole = (1 if trusted is not None else 0), False
    options = compiler_options(search.config) if search.config.kind == "xla" else {}
    if trusted is not None:
        diverging, runs = screen_kernels(program, search.pool, text, kernels, trusted,
                                         options=options, timeout_s=search.timeout_s)
        kernels = diverging + [k for k in kernels if k not in diverging]
        cycles += runs
    found, spent, failure = _first_located(search, program, text, kernels, recording, trusted)
    cycles += spent
    if not failure and (found is None or not found.instruction) and trusted is not None:
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
        if elsewhere is not None and elsewhere.instruction:
            found, whole = elsewhere, True
    seconds = time.perf_counter() - started
    if failure:
        search.notes.append(failure)
        return Inside.nothing(failure, cycles, seconds), equation, placement
    if found is None:
        return (Inside.nothing("no fused kernel holds the equation", cycles, seconds), equation,
                placement)
    found = dataclasses.replace(found, cycles=cycles, seconds=seconds)
    return (found, *_renamed(search, program, text, equation, placement, found, whole))


def _candidate_kernels(text: str, equation: Equation, placement: Placement,
                       instructions: Sequence[Instruction], fused: set[str],
                       failing: Sequence[int]) -> tuple[list[str], set[str]]:
    """(tier 4's kernels in the order `locate` tries them, the entry instructions the failing
    outputs depend on)."""
    kernels = list(placement.fusions)
    others = [k for k in sorted(equation.segment) if k != equation.index]
    for found_kernels in fusion.equation_kernels(text, others).values():
        kernels += [k for k in found_kernels.fusions if k not in kernels]
    # A value XLA folded into the kernel that feeds an unfused instruction (a transpose into
    # the copy before a dot) is computed there: the fusions read by the kernels come last.
    by_name = {i.name: i for i in instructions}
    for kernel in list(kernels):
        kernels += [o for o in (by_name[kernel].operands if kernel in by_name else ())
                    if o in fused and o not in kernels]
    # An equation XLA fused into many kernels (an optimizer's scalar into every parameter's
    # update) is wrong in the ones that feed the failing outputs: those first.
    upstream = fusion.feeding(text, list(failing))
    return sorted((k for k in kernels if k in fused), key=lambda k: k not in upstream), upstream


def _renamed(search: Searcher, program: Program, text: str, equation: Equation,
             placement: Placement, found: Inside, whole: bool) -> tuple[Equation, Placement]:
    """Tiers 2-3 as tier 4's instruction `found` leaves them: an instruction in a kernel of
    another equation names that equation and its kernels instead (`whole`: found among the
    whole module's kernels)."""
    if (not found.instruction or found.equation in (-1, equation.index)
            or found.kernel in placement.fusions):
        return equation, placement  # the instruction sits in a kernel of the named equation
    kernels_of, note = fusion.kernels_in(text, program.jaxpr.jaxpr, found.equation)
    if note:
        search.notes.append(note)
    because = (f"the whole module's kernels screened: those of equation {equation.index}'s "
               "segment compute right in the whole program's compile, which tier 2 cut)"
               if whole else f"the first wrong value tier 2 saw was equation {equation.index}'s)")
    evidence = (f"its instruction {found.instruction} in kernel {found.kernel}, fed right "
                f"values, computes wrongly (tier 4; {because}")
    renamed = dataclasses.replace(Equation.named(program, equation.method, found.equation,
                                                 evidence), segment=equation.segment)
    fusions = (found.kernel, *[k for k in kernels_of.fusions if k != found.kernel])
    return renamed, Placement(fusions, kernels_of.instructions, placement.segment_fusions)


def _first_located(search: Searcher, program: Program, text: str, kernels: Sequence[str],
                   recording: Recording, trusted: Trusted | None
                   ) -> tuple[Inside | None, int, str]:
    """`inside.locate_op` on `kernels` in order (at most `INSIDE_KERNELS`) until one names an
    instruction: (the last `inside.Inside` or None, cycles spent, a note when XLA rejected an
    edited module in the parent, which ends tier 4)."""
    found, cycles = None, 0
    for kernel in kernels[:INSIDE_KERNELS]:
        try:
            found = locate_op(program, search.config, search.pool, text, kernel, recording,
                              trusted=trusted, checker=search.checker,
                              timeout_s=search.timeout_s)
        except Exception as exc:  # an edited module XLA rejects in the parent: tier 4 missing
            return found, cycles, (f"tier 4 (op inside the kernel) failed: "
                                   f"{type(exc).__name__}: {str(exc)[:200]}")
        cycles += found.cycles
        if found.instruction:
            break
    return found, cycles, ""


def _trusted(search: Searcher, program: Program) -> Trusted | None:
    """The trusted configuration's compile of `program` for tier 4's twin kernels, or None
    where the trusted configuration is no ``xla`` compile (plain ``xla`` is judged against
    ``eager``) or its HLO cannot be had."""
    spec = Configuration.parse(baseline_spec(search.config))
    if spec.kind != "xla":
        return None
    outcome = fusion.optimized_hlo(search.pool, program, spec, timeout_s=search.timeout_s)
    if not outcome.ran:
        search.notes.append(f"no optimized HLO from the trusted {spec} for tier 4: "
                            f"{outcome.kind.value}")
        return None
    return Trusted(str(spec), outcome.value, compiler_options(spec))
