"""Localization tier 2: the top-level jaxpr equation XLA gets wrong (see
`xlaprobe.localization.api` for the method: cuts for numeric findings, segments compiled alone for
crashes, timeouts and compile errors), and the smallest segment around it that fails compiled
alone."""

from __future__ import annotations

import dataclasses
from typing import Any

from xlaprobe import jaxcompat, primitives
from xlaprobe.localization import fusion as fusion_mod
from xlaprobe.localization.bisect import (Recording, Searcher, alone_window, bisect_cuts,
                                      bisect_segments, latest_failing_start)
from xlaprobe.localization.segments import Segmenter
from xlaprobe.program import Program

#: Primitives that only move or reinterpret data: XLA folds them into their producers' kernels.
DATA_MOVEMENT = primitives.names(lambda p: p.movement in (
    primitives.Movement.RESHAPE, primitives.Movement.BROADCAST, primitives.Movement.CONVERT,
    primitives.Movement.COPY))
#: The evidence of an equation named only as a necessary end of a failing segment.
FALLBACK = "a necessary end of the smallest failing segment (not pinned down further)"


@dataclasses.dataclass(frozen=True, slots=True)
class Equation:
    """Tier 2's result.

    Attributes:
        method: ``"cuts"`` or ``"segments"``.
        index: the top-level equation named as miscompiled, or -1 (nothing localized).
        primitive: its primitive name, or "".
        source: its source line (``file:line (function)``) where the jaxpr still carries it, else "".
        exact: True when the equation is pinned down by `evidence`; False when it is only a
            necessary end of the failing segment (or nothing was localized).
        evidence: why this equation: ``"first wrong value in the program's compile"``, ``"fused
            into the kernel of the first wrong value ... and fails compiled alone"``, ``"fails
            compiled alone"``, ``"first wrong value of the smallest segment that fails alone"``,
            tier 4's instruction, or `FALLBACK`.
        segment: top-level equation indices of the smallest segment found that fails compiled
            alone; empty when none does (the fault needs the whole program's compile).
    """

    method: str
    index: int = -1
    primitive: str = ""
    source: str = ""
    exact: bool = False
    evidence: str = ""
    segment: tuple[int, ...] = ()

    @classmethod
    def named(cls, program: Program, method: str, index: int, evidence: str,
              segment: tuple[int, ...] = ()) -> Equation:
        """The record naming equation `index` of `program` (primitive and source filled in)."""
        eqn = program.jaxpr.jaxpr.eqns[index]
        return cls(method, index, eqn.primitive.name, _source_line(eqn),
                   bool(evidence) and evidence != FALLBACK, evidence, tuple(segment))

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        data = dataclasses.asdict(self)
        data["segment"] = list(self.segment)
        return data


def find_equation(search: Searcher, program: Program, segmenter: Segmenter, recording: Recording,
                  method: str, direction: str
                  ) -> tuple[Equation, Segmenter, tuple[int, int] | None] | None:
    """Tier 2: (the equation, the segmenter its window indexes, the window of cone positions
    [start, stop) that fails compiled alone, or None), or None when the failure did not
    reproduce on re-verification.

    Args:
        search: the localization's state (its faulty configuration, pool, counters).
        program: the failing program.
        segmenter: segments of the failing outputs' cone (`outputs.Outputs.cone`).
        recording: reference values (and, for cuts, honest runs) of every top-level equation.
        method: ``"cuts"`` or ``"segments"``.
        direction: for segments, ``"suffix"`` or ``"prefix"`` (`bisect.bisect_segments`).
    """
    if method == "cuts":
        found = _by_cuts(search, program, segmenter, recording)
    else:
        found = _by_segments(search, program, segmenter, recording, direction)
    if found is None:
        return None
    segmenter, index, evidence, window = found
    segment = tuple(segmenter.cone[window[0]:window[1]]) if window else ()
    return Equation.named(program, method, index, evidence, segment), segmenter, window


def _source_line(eqn: Any) -> str:
    text = jaxcompat.source_summary(eqn)
    # A canonical jaxpr re-traced without the user's frames points into xlaprobe itself, which
    # tells the user nothing.
    return "" if "xlaprobe/" in text.replace("\\", "/") or "unknown" in text else text

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
    text = search.hlo(program)
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
    text = search.hlo(program)
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
