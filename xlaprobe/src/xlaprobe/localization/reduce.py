"""Reduction: delta debugging of a failing Program down to a few equations and small inputs, and a
standalone reproducer of what is left.

The failure to keep is the finding's: the faulty configuration's verdict kind on the program,
judged by the oracle against the float64 reference with the honest-run error budget, exactly as
``xlaprobe check`` judges (`Interesting`). Passes, in this order (each a list of candidate edits
the driver tries; passes never judge):

1. **equations** (`ddmin` over the top-level equations of the failing outputs' cone): a candidate
   keeps a subset of the equations; a removed equation's outputs that a kept one reads become new
   program inputs carrying their reference values (the jaxpr segment machinery of
   `xlaprobe.localization.segments`), and every value a kept equation computes that no kept equation
   reads is an output (a cut-off consumer's operands stay observable).
2. **shapes**: every input axis of one size ``s`` sliced to ``1``, then to ``s // 2``, the
   program re-traced on the smaller inputs (skipped where a shape parameter forbids it).
3. **values**: an input replaced by zeros, else chunks of it (halves, quarters, ... sixteenths)
   zeroed, while the failure stays.

An edit is kept only when the candidate also fails `CONFIRMATIONS` more fresh runs, on elements
whose bits every run agrees on (a miscompiled program computes the same wrong bits each time; a
fault that reads memory outside its inputs shows garbage, by chance, once its inputs are zeroed or
shrunk); the driver loops the shape and value passes to a fixpoint under a test budget. The result
is re-verified the same way in fresh runs; when its failure does not hold, the program an edit
earlier is taken (``flaky`` when none holds). What is written (`write_outputs`): ``repro.py`` (plain jax/lax
code, inputs inline, compiled with the faulty configuration's compiler options, checked against
the float64 reference: prints MISMATCH and exits 1 when the fault shows), ``fusion.hlo`` (the
optimized HLO of the failing kernel of the reduced program), ``module.hlo`` (its whole optimized
module), ``artifact/`` (the reduced program as an artifact) and ``reduction.json``.

Source: A. Zeller and R. Hildebrandt, "Simplifying and Isolating Failure-Inducing Input", IEEE
Transactions on Software Engineering 28(2), 2002 (ddmin); XLA's ``hlo_bisect`` (rerun a vanished
failure five times).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np
from xlaprobe import jaxcompat

from xlaprobe.artifact import save_artifact
from xlaprobe.checking import REFERENCE, CheckResult, check_program, judge
from xlaprobe.checker import Checker
from xlaprobe.configs.registry import Configuration
from xlaprobe.errors import InvalidArgument, NotReproducible
from xlaprobe.hlo import kernel_text
from xlaprobe.localization import fusion as fusion_mod
from xlaprobe.localization import repro as repro_mod
from xlaprobe.localization.api import localize
from xlaprobe.localization.bisect import RERUNS
from xlaprobe.localization.spmd_repro import emit_spmd_repro
from xlaprobe.localization.segments import Segmenter, cone_of_influence, recording_program
from xlaprobe.oracle import VerdictKind
from xlaprobe.program import Program, Provenance
from xlaprobe.search import ddmin
from xlaprobe.workers import crash_excerpt

#: Reference outputs and honest runs' outputs of a check.
Evidence = tuple[tuple[np.ndarray, ...], tuple[tuple[np.ndarray, ...], ...]]
#: Interestingness tests one reduction may spend (each is one check: the faulty configuration
#: plus the reference and its honest runs).
MAX_TESTS = 400
#: Fresh reruns a candidate must also fail before an edit is kept (`Interesting.stable`).
CONFIRMATIONS = 2
#: Value pass: chunk counts tried when zeroing parts of an input.
_CHUNKS = (2, 4, 8, 16)
#: Seconds the emitted repro.py may run when it is verified.
REPRO_TIMEOUT_S = 300.0
#: Earlier (less reduced) programs `write_outputs` may fall back on when a repro does not show
#: the fault in a fresh process.
MAX_FALLBACKS = 8
#: Fresh-process runs a repro.py must all show the fault in to be kept.
REPRO_RUNS = 3


@dataclasses.dataclass(frozen=True, slots=True)
class PassStats:
    """Counters of one reduction pass.

    Attributes:
        name: ``"equations"``, ``"shapes"`` or ``"values"``.
        tests: interestingness tests it asked for (cached repeats included).
        accepted: edits it kept.
        seconds: wall time spent in it (s).
    """

    name: str
    tests: int
    accepted: int
    seconds: float


class Interesting:
    """Does a candidate Program still fail like the finding? One object, handed to every pass.

    A candidate is interesting when the faulty configuration, judged against ``reference``
    (which must run), fails on it like the finding, as `checker` (`xlaprobe.checker.Checker`)
    decides: the same failure class and crash signature, and, once the program's outputs are
    fixed (after the equation pass), one of the same outputs failing. Results are cached by
    program fingerprint.

    Args:
        config: the faulty configuration.
        pool: a `xlaprobe.workers.WorkerPool`.
        checker: the finding's checker (None until the first check has shown the failure:
            nothing is interesting then).
        timeout_s: per-run limit (s), or None for the pool's.
        max_tests: budget of uncached tests; once spent every new candidate is rejected.
    """

    def __init__(self, config: Configuration, pool: Any, checker: Checker | None,
                 timeout_s: float | None, max_tests: int = MAX_TESTS):
        self.spec = str(config)
        self.pool = pool
        self.checker = checker
        self.timeout_s = timeout_s
        self.max_tests = max_tests
        self.tests = 0
        self.cycles = 0
        self.exhausted = False
        self._cache: dict[str, CheckResult | None] = {}
        self._stable: dict[str, bool] = {}

    def check(self, program: Program) -> CheckResult:
        """Run the faulty configuration and the reference on `program` (uncached; one cycle)."""
        self.cycles += 1
        return check_program(program, [self.spec, REFERENCE], self.pool, timeout_s=self.timeout_s)

    def fails(self, result: CheckResult) -> bool:
        """True when `result` shows the finding's failure (judged against the reference)."""
        return self.checker is not None and self.checker.same(result.failure(self.spec))

    def __call__(self, program: Program | None) -> bool:
        """True when `program` fails like the finding (one check, cached by fingerprint)."""
        if program is None or not program.output_names:
            return False
        key = program.fingerprint
        if key not in self._cache:
            if self.tests >= self.max_tests:
                self.exhausted = True
                return False
            self.tests += 1
            try:
                result = self.check(program)
            except InvalidArgument:  # refused before any run: e.g. an spmd mesh axis that no
                self._cache[key] = None  # longer divides a shrunk input's or output's dimension
                return False
            self._cache[key] = result if self.fails(result) else None
        return self._cache[key] is not None

    def stable(self, program: Program) -> bool:
        """`program` is interesting and fails `CONFIRMATIONS` more fresh runs with the same output
        bits (cached): a candidate whose failure comes and goes or changes (a fault reading memory
        outside its inputs, which zeroed or shrunk inputs expose) is not kept."""
        if not self(program):
            return False
        key = program.fingerprint
        if key not in self._stable:
            runs = [self._cache[key]]
            for _ in range(CONFIRMATIONS):
                self.tests += 1
                runs.append(self.check(program))
                if not self.fails(runs[-1]):
                    break
            self._stable[key] = all(self.fails(r) for r in runs) and self._fails_everywhere(runs)
        return self._stable[key]

    def _fails_everywhere(self, runs: Sequence[CheckResult | None]) -> bool:
        """The failure shows on the elements whose bits every run agrees on: a miscompiled
        program computes the same wrong bits each time, a read of memory outside its inputs
        does not (those elements count as right here)."""
        first = runs[0]
        assert first is not None
        index = first.configs.index(self.spec)
        outcomes = [r.outcomes[index] for r in runs if r is not None]
        if not all(o.ran for o in outcomes):
            return True  # crashes, timeouts, compile errors: nothing to compare
        reference = first.outcomes[first.configs.index(REFERENCE)]
        stable = []
        for leaf, ref in zip(zip(*(o.outputs for o in outcomes)), reference.outputs):
            base = np.asarray(leaf[0])
            if base.size == 0:
                stable.append(base)
                continue
            flat = [np.ascontiguousarray(x).reshape(-1).view(np.uint8).reshape(base.size, -1)
                    for x in leaf]
            same = np.ones(base.size, bool)
            for other in flat[1:]:
                same &= (other == flat[0]).all(axis=1)
            right = np.asarray(ref).astype(base.dtype)
            stable.append(np.where(same.reshape(base.shape), base, right))
        steady = dataclasses.replace(outcomes[0], outputs=tuple(stable))
        judged = judge(first.program, [self.spec, REFERENCE], [steady, reference], first.budget,
                       first.flushed)
        return self.fails(judged)

    def result(self, program: Program) -> CheckResult | None:
        """The cached failing check of `program`, or None."""
        return self._cache.get(program.fingerprint)


@dataclasses.dataclass(frozen=True)
class Reduction:
    """A reduced failing program and what was written for it.

    Attributes:
        program: the original program's name.
        fingerprint: the original program's fingerprint.
        config: the faulty configuration spec.
        kind: the verdict kind kept.
        equations_before: top-level equations of the original program.
        cone: top-level equations the failing outputs depend on (where ddmin starts).
        equations_after: top-level equations left.
        kept: original top-level equation indices left, in order.
        primitives: their primitive names.
        input_elements_before: elements over all inputs of the first reduced program (after the
            equation pass), before shapes and values were shrunk.
        input_elements_after: elements over all inputs at the end.
        tests: interestingness tests run (uncached).
        cycles: runs of the faulty configuration (tests, re-verification).
        seconds: wall time of the reduction (s), writing and verifying outputs excluded.
        flaky: True when the whole program passed before failing, or when neither the reduced
            program nor those a few edits earlier failed steadily in fresh runs (then it is a
            best guess and a note says so).
        passes: per-pass counters, in schedule order.
        reduced: the reduced Program.
        reference: its float64 reference outputs.
        honest: its honest runs' outputs (error budget).
        earlier: the programs the shape and value passes replaced, most reduced first, each with
            its reference and honest outputs: `write_outputs` falls back on them when the
            reduced program's repro.py does not show the fault in a fresh process (a fault that
            reads uninitialized memory may show in a worker and not there once its inputs are
            zeros).
        notes: what the user should know.
    """

    program: str
    fingerprint: str
    config: str
    kind: str
    equations_before: int
    cone: int
    equations_after: int
    kept: tuple[int, ...]
    primitives: tuple[str, ...]
    input_elements_before: int
    input_elements_after: int
    tests: int
    cycles: int
    seconds: float
    flaky: bool
    passes: tuple[PassStats, ...]
    reduced: Program
    reference: tuple[np.ndarray, ...]
    honest: tuple[tuple[np.ndarray, ...], ...]
    earlier: tuple[tuple[Program, tuple[np.ndarray, ...], tuple[tuple[np.ndarray, ...], ...]],
                   ...] = ()
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (without the arrays and the Program)."""
        data: dict[str, Any] = {}
        for field in dataclasses.fields(self):
            if field.name in ("reduced", "reference", "honest", "earlier"):
                continue
            value = getattr(self, field.name)
            data[field.name] = list(value) if isinstance(value, tuple) else value
        data["passes"] = [dataclasses.asdict(p) | {"seconds": round(p.seconds, 3)}
                          for p in self.passes]
        data["seconds"] = round(self.seconds, 3)
        data["reduced_jaxpr"] = str(self.reduced.jaxpr)
        return data


def elements(program: Program) -> int:
    """Number of input elements of `program` (what the shape and value passes shrink)."""
    return int(sum(np.asarray(x).size for x in program.inputs))


def _provenance(program: Program) -> Provenance:
    base = program.provenance
    return Provenance("reduced", f"{base.name} (reduced)", base.seed, base.input_spec)


def _with_inputs(program: Program, inputs: Sequence[np.ndarray]) -> Program | None:
    """`program` re-traced on `inputs` (new shapes allowed), or None when it does not trace
    (a shape parameter ties it to the old shapes)."""
    closed = program.jaxpr
    same = all(np.shape(a) == np.shape(b) and np.asarray(a).dtype == np.asarray(b).dtype
               for a, b in zip(inputs, program.inputs))
    if same:
        return Program(closed, tuple(inputs), program.provenance, program.output_names,
                       program.tolerance)

    def fn(*args: Any) -> list[Any]:
        return jaxcompat.jaxpr_as_fun(closed)(*args)

    try:
        new = jax.make_jaxpr(fn)(*[jax.ShapeDtypeStruct(x.shape, x.dtype) for x in inputs])
    except Exception:  # a shape parameter (broadcast, reshape, slice, ...) forbids the new shapes
        return None
    if len(new.jaxpr.outvars) != len(closed.jaxpr.outvars):
        return None
    return Program(new, tuple(np.ascontiguousarray(x) for x in inputs), program.provenance,
                   program.output_names, program.tolerance)


def _shape_edits(program: Program) -> list[tuple[int, int]]:
    """(size s, new size t) candidates: every input axis of size s sliced to t."""
    sizes = sorted({d for x in program.inputs for d in np.shape(x) if d > 1}, reverse=True)
    edits = []
    for s in sizes:
        for t in (1, s // 2):
            if 1 <= t < s and (s, t) not in edits:
                edits.append((s, t))
    return edits


def _apply_shape(program: Program, edit: tuple[int, int]) -> Program | None:
    s, t = edit
    inputs = []
    for x in program.inputs:
        x = np.asarray(x)
        index = tuple(slice(0, t) if d == s else slice(None) for d in x.shape)
        inputs.append(np.ascontiguousarray(x[index]))
    return _with_inputs(program, inputs)


def _value_edits(program: Program) -> list[tuple[int, int, int]]:
    """(input, start, stop) candidates: that flat range of the input set to zero (whole input
    first, then halves, quarters, ...)."""
    edits = []
    for i, x in enumerate(program.inputs):
        n = np.asarray(x).size
        if n == 0:
            continue
        edits.append((i, 0, n))
        for pieces in _CHUNKS:
            if pieces > n:
                break
            bounds = np.linspace(0, n, pieces + 1).astype(int)
            edits += [(i, int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]
    return edits


def _apply_value(program: Program, edit: tuple[int, int, int]) -> Program | None:
    i, start, stop = edit
    x = np.array(program.inputs[i], copy=True)
    flat = x.reshape(-1)
    zero = np.zeros((), x.dtype)
    if (flat[start:stop] == zero).all() and not (
            np.issubdtype(x.dtype, np.floating) and np.signbit(flat[start:stop]).any()):
        return None  # already zero: nothing to gain
    flat[start:stop] = zero
    inputs = list(program.inputs)
    inputs[i] = flat.reshape(x.shape)
    return _with_inputs(program, inputs)


def _greedy(name: str, program: Program, edits: Callable[[Program], list[Any]],
            apply: Callable[[Program, Any], Program | None], interesting: Interesting,
            better: Callable[[Program, Program], bool],
            history: list[Program]) -> tuple[Program, PassStats]:
    """Try each edit of `program` in order, keep each that stays interesting and is `better`
    (appending the program it replaces to `history`); sweep again until a sweep keeps nothing."""
    started, tests, accepted = time.perf_counter(), 0, 0
    changed = True
    while changed and not interesting.exhausted:
        changed = False
        for edit in edits(program):
            candidate = apply(program, edit)
            if candidate is None or not better(candidate, program):
                continue
            tests += 1
            if interesting.stable(candidate):
                history.append(program)
                program, accepted, changed = candidate, accepted + 1, True
    return program, PassStats(name, tests, accepted, time.perf_counter() - started)


def _initial(program: Program, spec: str, interesting: Interesting,
             check: CheckResult | None) -> tuple[CheckResult, VerdictKind, int]:
    if check is not None and spec in check.configs:
        result, reruns = check, 0
    else:
        reruns = 0
        while True:
            result = interesting.check(program)
            verdicts = result.verdicts[result.configs.index(spec)]
            if any(v.kind.is_finding for v in verdicts) or reruns == RERUNS:
                break
            reruns += 1
    verdicts = result.verdicts[result.configs.index(spec)]
    if not any(v.kind.is_finding for v in verdicts) or result.judged_against != REFERENCE:
        raise NotReproducible(
            f"configuration '{spec}' gives no finding on {program.provenance.name} judged against "
            f"the reference ({reruns + 1} run(s)); nothing to reduce. Check it first: xlaprobe "
            f"check TARGET --configs {spec},reference")
    failure = result.failure(spec)
    assert failure is not None  # judged against the reference, with a finding
    return result, failure.kind, reruns


def _equation_pass(program: Program, pool: Any, interesting: Interesting, cone: Sequence[int],
                   failing: Sequence[int], timeout_s: float | None,
                   notes: list[str]) -> tuple[Program, tuple[int, ...], PassStats]:
    """Pass 1: ddmin over the top-level equations of the cone, each candidate fed the reference
    values of the removed equations it reads.

    Returns:
        (the program kept, its original top-level equation indices, the pass's counters).

    Raises:
        NotReproducible: the reference cannot evaluate the cone's intermediates.
    """
    pass_started = time.perf_counter()
    tests_before = interesting.tests
    jaxpr = program.jaxpr.jaxpr
    current, kept = program, tuple(range(len(jaxpr.eqns)))
    if cone:
        recorder, variables = recording_program(program, cone)
        outcome = pool.run(recorder, REFERENCE, timeout_s=timeout_s)
        if not outcome.ran:
            raise NotReproducible(f"the reference cannot evaluate the intermediates of "
                                  f"{program.provenance.name} ({outcome.kind.value}: "
                                  f"{outcome.error[-300:]}); reduction needs them")
        values = dict(zip(variables, outcome.outputs))
        built: dict[tuple[int, ...], Program | None] = {}

        def build(subset: Sequence[int]) -> Program | None:
            key = tuple(subset)
            if key not in built:
                try:
                    segment = Segmenter(program, key, failing, values).segment(
                        0, len(key), sinks=True)
                    built[key] = dataclasses.replace(segment.program,
                                                     provenance=_provenance(program))
                except InvalidArgument:  # a PRNG key would have to become an input
                    built[key] = None
            return built[key]

        whole = build(cone)
        if interesting(whole):
            kept = tuple(ddmin(cone, lambda subset: interesting.stable(build(subset))))
            current = build(kept) or current
        else:
            notes.append("the failing outputs' cone alone (fed nothing new) did not fail: "
                         "equations were not removed")
            kept = tuple(range(len(jaxpr.eqns)))
    stats = PassStats("equations", interesting.tests - tests_before,
                      max(len(cone) - len(kept), 0), time.perf_counter() - pass_started)
    return current, kept, stats


def _shrink_inputs(current: Program, interesting: Interesting, history: list[Program],
                   passes: list[PassStats], on_pass: Callable[[PassStats, Program], None] | None,
                   notes: list[str]) -> Program:
    """Passes 2 and 3: shapes, then values, looped to a fixpoint (at most three rounds); each
    pass's counters are appended to `passes`, each replaced program to `history`.

    Returns:
        The program kept.
    """
    if not interesting(current):  # the equation pass's result must hold as a start
        notes.append("the reduced program did not fail on its own again; inputs not shrunk")
        return current
    for _ in range(3):
        before = current.fingerprint
        current, stats = _greedy("shapes", current, _shape_edits, _apply_shape,
                                 interesting, lambda a, b: elements(a) < elements(b),
                                 history)
        passes.append(stats)
        if on_pass is not None:
            on_pass(stats, current)
        current, stats = _greedy("values", current, _value_edits, _apply_value,
                                 interesting, lambda a, b: True, history)
        passes.append(stats)
        if on_pass is not None:
            on_pass(stats, current)
        if current.fingerprint == before or interesting.exhausted:
            break
    return current


def _reverify(current: Program, history: list[Program], interesting: Interesting,
              notes: list[str]) -> tuple[Program, list[Program], CheckResult, bool]:
    """Re-verify the result with fresh runs; a result whose failure does not hold steady falls
    back on the program an edit earlier (the equation pass's result is the last resort).

    Returns:
        (the result, the programs it replaced, its failing check, flaky: no candidate held).
    """
    for back, candidate in enumerate([current, *reversed(history)][:MAX_FALLBACKS + 1]):
        runs = [interesting.check(candidate) for _ in range(1 + CONFIRMATIONS)]
        if all(interesting.fails(r) for r in runs) and interesting._fails_everywhere(runs):
            if back:
                notes.append(f"the reduced program did not fail steadily in fresh runs; the "
                             f"program {back} accepted edit(s) earlier did and is the result")
                history = history[:len(history) - back]
                current = candidate
            return current, history, runs[0], False
    final = interesting.check(current)
    for _ in range(RERUNS):
        if interesting.fails(final):
            break
        final = interesting.check(current)
    notes.append("flaky: the reduced program (and the programs a few edits earlier) did not "
                 f"fail steadily in {1 + CONFIRMATIONS} fresh runs; it is a best guess")
    return current, history, final, True


def reduce(program: Program, config: Configuration | str, pool: Any, *,
           check: CheckResult | None = None, timeout_s: float | None = None,
           max_tests: int = MAX_TESTS, shrink_inputs: bool = True,
           on_pass: Callable[[PassStats, Program], None] | None = None) -> Reduction:
    """Reduce `program` while `config` keeps failing on it the same way (see module docstring).

    Args:
        program: the failing program.
        config: the faulty configuration (any kind `check_program` runs).
        pool: a `xlaprobe.workers.WorkerPool` (`fusion.make_pool` for the HLO of `write_outputs`).
        check: a `CheckResult` of `program` that ran `config` and ``reference``; None runs it.
        timeout_s: per-run limit (s); None: the pool's default.
        max_tests: budget of interestingness tests (each one check); when spent the reduction
            stops where it is, with a note.
        shrink_inputs: run the shape and value passes after the equation pass.
        on_pass: called after each pass with its counters and the current program.

    Returns:
        The `Reduction`; its ``reduced`` program fails with the same verdict kind.

    Raises:
        InvalidArgument: a malformed configuration, or the reference is the configuration.
        NotReproducible: `config` gives no finding on `program` judged against the reference
            (also after `RERUNS` reruns), or the reference cannot evaluate its intermediates.
    """
    started = time.perf_counter()
    config = Configuration.judged(config, "reduce")
    spec = str(config)
    interesting = Interesting(config, pool, None, timeout_s, max_tests)
    result, kind, reruns = _initial(program, spec, interesting, check)
    # The equation pass's candidates have outputs of their own (the values their last kept
    # equations compute): judged by failure class and signature there, by outputs afterwards.
    interesting.checker = Checker(result.failure(spec), outputs=False)
    notes: list[str] = []
    if reruns:
        notes.append(f"flaky: the whole program passed {reruns} time(s) before failing")
    jaxpr = program.jaxpr.jaxpr
    verdicts = result.verdicts[result.configs.index(spec)]
    failing = [v.index for v in verdicts if v.kind.is_finding]
    cone = cone_of_influence(jaxpr, failing)
    current, kept, stats = _equation_pass(program, pool, interesting, cone, failing, timeout_s,
                                          notes)
    passes = [stats]
    if on_pass is not None:
        on_pass(stats, current)
    elements_before = elements(current)
    # Later passes keep the program's outputs: the failure must stay on the same ones.
    anchor = (interesting.result(current) or result).failure(spec)
    if anchor is not None:
        interesting.checker = interesting.checker.anchored(anchor)
    history: list[Program] = []
    if shrink_inputs and current.inputs:
        current = _shrink_inputs(current, interesting, history, passes, on_pass, notes)
    if interesting.exhausted:
        notes.append(f"the test budget ({max_tests}) was spent: the result is not minimal")
    current, history, final, lost = _reverify(current, history, interesting, notes)
    reference, honest = _evidence(final)
    earlier = tuple((p, *_evidence(interesting.result(p))) for p in reversed(history)
                    if interesting.result(p) is not None)
    reduced_jaxpr = current.jaxpr.jaxpr
    return Reduction(
        program=program.provenance.name, fingerprint=program.fingerprint, config=spec,
        kind=kind.value, equations_before=len(jaxpr.eqns), cone=len(cone),
        equations_after=len(reduced_jaxpr.eqns), kept=tuple(kept),
        primitives=tuple(e.primitive.name for e in reduced_jaxpr.eqns),
        input_elements_before=elements_before, input_elements_after=elements(current),
        tests=interesting.tests, cycles=interesting.cycles,
        seconds=time.perf_counter() - started, flaky=bool(reruns) or lost, passes=tuple(passes),
        reduced=current, reference=reference, honest=honest, earlier=earlier,
        notes=tuple(notes))


def _evidence(result: CheckResult) -> Evidence:
    """(reference outputs, honest runs' outputs) of a check."""
    reference = tuple(result.outcomes[result.configs.index(REFERENCE)].outputs)
    return reference, tuple(tuple(o.outputs) for o in result.budget if o.ran)


# ------------------------------------------------------------------------------------------------
# Outputs: repro.py, the failing kernel's HLO, the artifact


@dataclasses.dataclass(frozen=True, slots=True)
class Written:
    """What `write_outputs` wrote.

    Attributes:
        directory: where.
        repro: path of ``repro.py``.
        repro_form: ``"lax"`` (printed jax/lax code) or ``"export"`` (inline ``jax.export``).
        repro_exit: exit code of ``python repro.py`` run once to verify it (1: the fault shows),
            or None when it was not run.
        repro_lines: non-empty, non-comment lines of ``repro.py``.
        kernels: the failing kernels (fusions or unfused instructions) in the written program's
            optimized HLO; their text is in ``fusion.hlo``.
        steps_back: 0 when the reduced program was written; k when its repro did not show the
            fault in a fresh process and the program k accepted edits earlier was written.
        equations: top-level equations of the written program.
        input_elements: elements over its inputs.
        notes: what went wrong writing (a missing HLO, an unprintable primitive).
    """

    directory: str
    repro: str
    repro_form: str
    repro_exit: int | None
    repro_lines: int
    kernels: tuple[str, ...]
    steps_back: int
    equations: int
    input_elements: int
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {f.name: list(getattr(self, f.name)) if isinstance(getattr(self, f.name), tuple)
                else getattr(self, f.name) for f in dataclasses.fields(self)}


def _compiler_options(config: Configuration) -> tuple[dict[str, Any], str, str]:
    """(XLA compiler options, mutant name, note) for the repro of `config`."""
    if config.kind == "xla":
        return config.compiler_options, "", ""
    if config.kind == "mutant":
        return {}, config.variant or "", ""
    if config.kind in ("eager", "spmd"):  # spmd: `spmd_repro` partitions as the finding did
        return {}, "", ""
    return {}, "", (f"configuration '{config}' is not an XLA compile; repro.py compiles with "
                    "jit's defaults")


def run_repro(path: str | Path, timeout_s: float = REPRO_TIMEOUT_S) -> tuple[int, str]:
    """Run a ``repro.py`` in a fresh Python process (this interpreter), on the CPU.

    Returns:
        (exit code, its stdout and stderr tail led by an abort's fatal line:
        `xlaprobe.workers.crash_excerpt`); exit code 124 on timeout.
    """
    env = dict(os.environ, JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", "cpu"))
    path = Path(path).resolve()  # it runs in its own directory: a relative path would not resolve
    try:
        done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                              timeout=timeout_s, env=env, cwd=str(path.parent))
    except subprocess.TimeoutExpired:
        return 124, f"repro.py ran past {timeout_s} s"
    # An abort's check-failure line comes before a stack trace that fills the tail: keep it.
    return done.returncode, crash_excerpt(done.stdout + done.stderr, 2000)


def _run_stable(path: Path) -> tuple[int, str]:
    """`run_repro` up to `REPRO_RUNS` times: (1, output) only when every run exits 1 (a fault
    that reads uninitialized memory may show in one fresh process and not the next)."""
    for _ in range(REPRO_RUNS):
        code, tail = run_repro(path)
        if code != 1:
            return code, tail
    return code, tail


def _emit(args: tuple[Any, ...], mutant: str, style: dict[str, bool]) -> str:
    """`repro.emit_repro` of `args`; for an ``spmd`` configuration the script that presents the
    mesh's devices and partitions as the finding did (`spmd_repro.emit_spmd_repro`)."""
    program, config, _, reference, honest = args
    if str(config).startswith("spmd["):
        return emit_spmd_repro(program, str(config), reference, honest,
                               crash=style.get("crash", False))
    return repro_mod.emit_repro(*args, mutant=mutant, **style)


def _write_repro(path: Path, args: tuple[Any, ...], mutant: str, *, verify: bool,
                 try_export: bool, **style: bool) -> tuple[str, str, int | None, list[str]]:
    """Write one repro.py (lax code, else the inline jax.export form) and run it; `style` holds
    `repro.emit_repro`'s ``eager`` (op by op) and ``crash`` (in a child process) flags.

    Returns:
        (source, form, exit code or None, notes).
    """
    notes: list[str] = []
    form, exit_code = "lax", None
    try:
        source = _emit(args, mutant, style)
    except repro_mod.Unprintable as exc:
        notes.append(f"repro.py embeds the program as a jax.export module: {exc}")
        form, source = "export", repro_mod.emit_export_repro(*args, mutant=mutant, **style)
    path.write_text(source)
    if not verify:
        return source, form, exit_code, notes
    exit_code, tail = _run_stable(path)
    if exit_code != 1 and form == "lax" and try_export:
        spare = path.with_name("repro_export.py")
        try:
            fallback = repro_mod.emit_export_repro(*args, mutant=mutant, **style)
            spare.write_text(fallback)
            code, _ = _run_stable(spare)
            if code == 1:
                notes.append(f"the lax-code repro.py exited {exit_code} ({tail.strip()[-200:]}); "
                             "the jax.export form reproduces and is kept as repro.py")
                path.write_text(fallback)
                form, exit_code, source = "export", code, fallback
        except Exception as exc:  # jax.export cannot serialize every program
            notes.append(f"no jax.export form either: {type(exc).__name__}: {exc}")
        finally:
            spare.unlink(missing_ok=True)
    return source, form, exit_code, notes


def _failing_kernels(reduced: Program, pool: Any, config: Configuration,
                     text: str, timeout_s: float | None) -> tuple[tuple[str, ...], list[str]]:
    """The kernels of the equation `localize` names in the reduced program (all equations'
    kernels when it names none)."""
    jaxpr = reduced.jaxpr.jaxpr
    notes: list[str] = []
    equations: list[int] = []
    try:
        loc = localize(reduced, config, pool, timeout_s=timeout_s, passes=False)
        if loc.equation.index >= 0:
            equations = [loc.equation.index]
    except Exception as exc:  # localization is a bonus here: fall back to every kernel
        notes.append(f"localizing the reduced program failed ({type(exc).__name__}: {exc}); "
                     "fusion.hlo holds the kernels of every equation")
    if not equations:
        equations = list(range(len(jaxpr.eqns)))
    kernels: list[str] = []
    for k in equations:
        found, _ = fusion_mod.kernels_in(text, jaxpr, k)
        kernels += [f for f in found.fusions if f not in kernels]
    return tuple(kernels), notes


@dataclasses.dataclass(frozen=True, slots=True)
class _Repro:
    """The ``repro.py`` `_write_reproducing` wrote: of which program (`back` accepted edits
    before the reduced one, with its reference outputs), its text, form and exit code."""

    program: Program
    reference: tuple[np.ndarray, ...]
    source: str
    form: str
    exit_code: int | None
    back: int
    notes: tuple[str, ...]


def _write_reproducing(repro_path: Path, reduction: Reduction, options: dict[str, Any],
                       mutant: str, verify: bool, **style: bool) -> _Repro:
    """Write ``repro.py`` of the reduced program, else of the first earlier program whose repro
    shows the fault in a fresh process, else of the reduced program in the ``jax.export`` form
    where that one shows it (with `verify` false: of the reduced program, not run)."""
    notes: list[str] = []
    candidates = [(reduction.reduced, reduction.reference, reduction.honest),
                  *reduction.earlier[:MAX_FALLBACKS]]
    first: tuple[str, str, int | None] | None = None
    for back, (program, reference, honest) in enumerate(candidates):
        source, form, exit_code, more = _write_repro(
            repro_path, (program, reduction.config, options, reference, honest), mutant,
            verify=verify, try_export=False, **style)
        if back == 0:
            notes += more
            first = (source, form, exit_code)
        if not verify or exit_code == 1:
            if back:
                notes.append(f"repro.py of the reduced program does not show the fault in a fresh "
                             f"process (exit {first[2]}); written from the program {back} "
                             f"accepted edit(s) earlier ({len(program.jaxpr.jaxpr.eqns)} "
                             f"equations, {elements(program)} input elements)")
            return _Repro(program, reference, source, form, exit_code, back, tuple(notes))
    program, reference, honest = candidates[0]
    source, form, exit_code, more = _write_repro(
        repro_path, (program, reduction.config, options, reference, honest), mutant,
        verify=verify, try_export=True, **style)
    notes += more
    if exit_code != 1:
        notes.append(f"repro.py exited {exit_code}, not 1: it does not show the fault "
                     f"standalone (nor did {len(candidates) - 1} less reduced program(s))")
    return _Repro(program, reference, source, form, exit_code, 0, tuple(notes))


def _write_hlo(root: Path, program: Program, pool: Any, config: Configuration,
               timeout_s: float | None) -> tuple[tuple[str, ...], list[str]]:
    """Write ``module.hlo`` (the optimized module of `program` under `config`) and
    ``fusion.hlo`` (its failing kernels).

    Returns:
        (the failing kernels, notes on what could not be written).
    """
    notes: list[str] = []
    kernels: tuple[str, ...] = ()
    try:
        outcome = fusion_mod.optimized_hlo(pool, program, config, timeout_s=timeout_s)
    except InvalidArgument as exc:
        notes.append(str(exc))
        return kernels, notes
    if outcome.ran:
        text = outcome.value
        (root / "module.hlo").write_text(text)
        kernels, more = _failing_kernels(program, pool, config, text, timeout_s)
        notes += more
        (root / "fusion.hlo").write_text(kernel_text(text, kernels))
    else:
        notes.append(f"no optimized HLO: {outcome.kind.value} {outcome.last_line[:200]}")
    return kernels, notes


def write_outputs(reduction: Reduction, directory: str | Path, pool: Any, *,
                  timeout_s: float | None = None, verify: bool = True) -> Written:
    """Write ``repro.py``, ``module.hlo``, ``fusion.hlo``, ``artifact/`` and ``reduction.json``
    for a reduction, and run ``repro.py`` once to verify it shows the fault.

    ``repro.py`` is printed as jax/lax code (`repro.emit_repro`); when that fails, or does not
    reproduce while the inline ``jax.export`` form does, the latter is kept.

    Args:
        reduction: from `reduce`.
        directory: created if missing; files in it are replaced.
        pool: a pool from `fusion.make_pool` (for the optimized HLO of the faulty configuration).
        timeout_s: per-run limit of the HLO compile (s).
        verify: run ``python repro.py`` (up to `REPRO_TIMEOUT_S`).

    Returns:
        The `Written` record (also stored in ``reduction.json`` beside the reduction).

    Raises:
        InvalidArgument: `directory` cannot be created.
    """
    root = Path(directory)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidArgument(f"cannot create output directory {root}: {exc}") from exc
    config = Configuration.parse(reduction.config)
    options, mutant, note = _compiler_options(config)
    notes = [note] if note else []
    repro_path = root / "repro.py"
    repro = _write_reproducing(repro_path, reduction, options, mutant, verify,
                               eager=config.kind == "eager", crash=reduction.kind == "crash")
    program = repro.program
    notes += repro.notes
    kernels, more = _write_hlo(root, program, pool, config, timeout_s)
    notes += more
    try:
        # An eager finding's artifact runs the op-by-op repro.py: its module.jax_export script
        # would compile the program whole.
        save_artifact(program, root / "artifact", reference=repro.reference,
                      repro_config=reduction.config, compiler_options=options,
                      note=f"reduced: {reduction.kind}",
                      repro_source=repro.source if config.kind == "eager" else "")
    except Exception as exc:  # the repro is what matters; an artifact is a convenience
        notes.append(f"no artifact: {type(exc).__name__}: {exc}")
    written = Written(str(root), str(repro_path), repro.form, repro.exit_code,
                      repro_mod.count_lines(repro.source), kernels, repro.back,
                      len(program.jaxpr.jaxpr.eqns), elements(program), tuple(notes))
    (root / "reduction.json").write_text(json.dumps(
        reduction.to_json() | {"written": written.to_json()}, indent=2, default=str) + "\n")
    return written
