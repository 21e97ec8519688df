"""Tier 4: the HLO instruction inside a failing fused kernel, with its jaxpr equation.

Given the faulty configuration's optimized HLO module of the program (tier 3), the failing
kernel (a fusion) in it, and optionally a trusted compile of the same program:

1. **Operands.** The values the kernel reads: reference values where they are jaxpr values,
   else the trusted module's instructions of the same names (the faulty module may already
   compute them wrong), else the faulty module itself, recompiled with its entry ROOT replaced
   by a tuple of them. Recompiled modules are `xlaprobe.hlo.portable`: fusions become calls,
   bitcasts the reshapes and transposes they stand for. A kernel in the body of a while loop of
   the entry (a ``scan``) reads the values of the loop's first trip
   (`xlaprobe.hlo.first_trip_values_module`). The modules are cut out of the text by
   `xlaprobe.hlo` (`kernel_module`, `entry_values_module`, ...).
2. **Kernel alone.** The fused computation becomes the entry of a module of its own (with the
   computations it calls), compiled and run on those values. Every instruction that computes the
   final value of a top-level jaxpr equation (its ``op_name`` names ``eqnK``; same shape and
   element type as the equation's output; no instruction of the same equation in the kernel
   reads it) is an *anchor*: its right value is the equation's float64 reference value. The
   trusted compile's *twin* of the kernel (`xlaprobe.localization.twin`), run alone on its own
   operands, gives right values of the other instructions it shares, and unmasks would-be
   anchors that hold no equation's value (XLA rewrote ``m / c / d`` into ``m / (c * d)``).
   Inside loop bodies only the twin gives right values.
3. **Suffix search.** For position ``p`` among the instructions with a right value (in the
   computation's order), the kernel with every one before ``p`` replaced by a parameter holding
   its right value is compiled and its outputs judged: by the oracle against their references
   (with the recorded error budget), or against the twin (`twin.agrees`). The whole kernel must
   fail; a binary search finds the latest position whose suffix still fails: that instruction
   turns right operands into a wrong result and is named (instructions without a right value
   that compute it from earlier ones are listed with it).

`screen_kernels` picks out the candidate kernels whose values differ from the trusted
compile's, earliest first. Modules compile with the faulty configuration's XLA options for
``xla`` configurations (a fault in code generation, e.g. fast-math reassociation, needs them)
and with the defaults for planted faults (``mutant:<name>``: the HLO text already holds the
fault; compiling it with the mutant's pass again would plant it twice). Every compile runs in a
worker (`WorkerPool.call`, isolation group ``hlo``), since an edited module may crash XLA.

Source: XLA's ``hlo_bisect`` and HLO isolation (extract, compile alone, compare); the suffix
search is `xlaprobe.localization.bisect.bisect_segments` at instruction level.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from xlaprobe import jaxcompat, primitives

from xlaprobe.checker import Checker, Failure
from xlaprobe.configs.registry import Configuration
from xlaprobe.configs.xla import compiler_options
from xlaprobe.hlo import (NUMPY_DTYPES, HloText, Instruction, as_element_type, entry_values_module,
                          equation_of, first_trip_module, first_trip_values_module,
                          kernel_module, loop_of, operands_module, row_major)
from xlaprobe.localization.twin import agrees, find_twin
from xlaprobe.oracle import VerdictKind, judge_leaf
from xlaprobe.search import last_true

#: Worker isolation group of HLO compiles (no mutant pass registered there).
GROUP = "hlo"


@dataclasses.dataclass(frozen=True, slots=True)
class Inside:
    """The op inside a fused kernel that computes wrongly (tier 4).

    Attributes:
        kernel: the fusion instruction examined.
        instruction: the HLO instruction named, or "" when none was.
        opcode: its opcode.
        equation: the top-level jaxpr equation it computes (from its ``eqnK`` scope), or -1.
        primitive: that equation's primitive, or "".
        with_instructions: non-anchor instructions computing it from earlier anchors (the fault
            may lie in them too).
        anchors: anchor instructions of the kernel, in order.
        evidence: why (one line).
        cycles: kernel compiles spent.
        seconds: wall time (s).
    """

    kernel: str
    instruction: str
    opcode: str
    equation: int
    primitive: str
    with_instructions: tuple[str, ...]
    anchors: tuple[str, ...]
    evidence: str
    cycles: int
    seconds: float

    @classmethod
    def nothing(cls, evidence: str, cycles: int = 0, seconds: float = 0.0) -> Inside:
        """The record of a tier 4 that named no instruction, and why."""
        return cls("", "", "", -1, "", (), (), evidence, cycles, seconds)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        data = dataclasses.asdict(self)
        data.update(with_instructions=list(self.with_instructions), anchors=list(self.anchors),
                    seconds=round(self.seconds, 3))
        return data


def run_module(closed_jaxpr: Any, inputs: Sequence[np.ndarray], *, text: str,
               args: Sequence[np.ndarray], options: dict[str, Any]) -> list[np.ndarray]:
    """Worker function: compile HLO module `text` with XLA compiler `options` and run it.

    Args:
        closed_jaxpr, inputs: unused (`WorkerPool.call` passes the program's).
        text: HLO module text (entry parameters in order of `args`).
        args: one array per entry parameter.
        options: typed XLA compiler options (``xla.compiler_options``).

    Returns:
        The outputs, a tuple root flattened.

    Raises:
        Exception: whatever XLA raises on a module it rejects.
    """
    del closed_jaxpr, inputs
    executable = jaxcompat.compile_hlo_text(text, dict(options))
    outputs = executable.execute([jax.device_put(np.asarray(a)) for a in args])
    return [np.asarray(x) for x in outputs]


def _anchors(instructions: Sequence[Instruction], computation: str, jaxpr: Any
             ) -> list[tuple[Instruction, Any]]:
    """(instruction, jaxpr variable) per anchor of `computation`, in order (see module doc)."""
    members = [i for i in instructions if i.computation == computation]
    users: dict[str, list[Instruction]] = {}
    for instruction in members:
        for operand in instruction.operands:
            users.setdefault(operand, []).append(instruction)
    by_name = {i.name: i for i in members}
    anchors = []
    for instruction in members:
        if instruction.opcode in ("parameter", "constant", "tuple", "get-tuple-element"):
            continue
        if instruction.opcode in ("bitcast", "reshape", "copy") and all(
                by_name[o].opcode == "parameter" for o in instruction.operands if o in by_name):
            continue  # a parameter in another shape: it computes nothing
        k = equation_of(instruction.op_name)
        if not 0 <= k < len(jaxpr.eqns):
            continue
        if any(equation_of(u.op_name) == k and u.opcode != "bitcast"
               for u in users.get(instruction.name, [])):
            continue  # an inner step of the equation's lowering, not its value
        var = _value_of(jaxpr, k, instruction)
        if var is not None:
            anchors.append((instruction, var))
    return anchors


#: Primitives that keep a value's elements in order: XLA folds them into their producer, so an
#: instruction of the producer may hold the value in their shape.
_RESHAPES = primitives.names(lambda p: p.movement is primitives.Movement.RESHAPE)


def _value_of(jaxpr: Any, k: int, instruction: Instruction) -> Any:
    """The jaxpr variable whose value `instruction` computes: equation k's output when shape and
    dtype match, else the output of a reshape of it (folded in) that matches; or None."""
    dtype = NUMPY_DTYPES.get(instruction.element_type)
    for current in (k, *(c for c in range(k + 1, len(jaxpr.eqns))
                         if jaxpr.eqns[c].primitive.name in _RESHAPES
                         and jaxpr.eqns[c].invars[0] in jaxpr.eqns[k].outvars)):
        outvars = [v for v in jaxpr.eqns[current].outvars if not isinstance(v, jaxcompat.DropVar)]
        if len(outvars) != 1:
            return None
        aval = outvars[0].aval
        # Equal up to unit dimensions (which XLA drops and adds freely): the same elements in
        # the same order; any other shape may hold a transpose XLA folded in.
        if [d for d in instruction.dims if d != 1] == [d for d in aval.shape if d != 1] and \
                dtype == np.dtype(aval.dtype).name:
            return outvars[0]
    return None


def _operand_values(operands: Sequence[Instruction], instructions: Sequence[Instruction],
                    program: Any, recording: Any, computation: str = ""
                    ) -> list[np.ndarray | None]:
    """The values a kernel reads, where each operand is a program input or the value of a jaxpr
    equation (its reference value), possibly through a bitcast, reshape or copy, or reshaped by
    a row-major bitcast of the fused `computation` itself into the equation's shape (XLA
    computes a dot on flattened rows); None for an operand that is neither.
    """
    by_name = {i.name: i for i in instructions}
    jaxpr = program.jaxpr.jaxpr

    def value(instruction: Instruction, depth: int = 0) -> np.ndarray | None:
        dtype = NUMPY_DTYPES.get(instruction.element_type)
        if dtype is None:
            return None
        if instruction.opcode == "parameter":
            number = int(instruction.operand_text or 0)
            if number >= len(program.inputs):
                return None
            return np.asarray(program.inputs[number]).reshape(instruction.dims)
        k = equation_of(instruction.op_name)
        if 0 <= k < len(jaxpr.eqns):
            # Same shape only (or a reshape XLA folded in): a value of another shape may be a
            # transpose XLA folded in.
            var = _value_of(jaxpr, k, instruction)
            if var is not None and var in recording.reference:
                return as_element_type(recording.reference[var],
                                       instruction.element_type).reshape(instruction.dims)
        if instruction.opcode in ("bitcast", "reshape", "copy") and depth < 4 and \
                len(instruction.operands) == 1 and instruction.operands[0] in by_name and \
                row_major(instruction) and row_major(by_name[instruction.operands[0]]):
            inner = value(by_name[instruction.operands[0]], depth + 1)
            if inner is not None and inner.size == int(np.prod(instruction.dims)):
                return inner.reshape(instruction.dims)
        return None

    params = {int(i.operand_text or 0): i for i in instructions
              if i.computation == computation and i.opcode == "parameter"}

    def through_kernel(number: int, operand: Instruction) -> np.ndarray | None:
        """The operand's value where the kernel bitcasts its parameter to the equation's shape."""
        param = params.get(number)
        k = equation_of(operand.op_name)
        if param is None or not 0 <= k < len(jaxpr.eqns) or not row_major(operand):
            return None
        for user in instructions:
            if user.computation == computation and user.opcode == "bitcast" and \
                    user.operands == (param.name,) and equation_of(user.op_name) == k and \
                    row_major(user):
                var = _value_of(jaxpr, k, user)
                if var is not None and var in recording.reference:
                    return as_element_type(recording.reference[var],
                                           user.element_type).reshape(operand.dims)
        return None

    values = []
    for number, operand in enumerate(operands):
        found = value(operand)
        values.append(found if found is not None else through_kernel(number, operand))
    return values


@dataclasses.dataclass(frozen=True, slots=True)
class Trusted:
    """The trusted compile tier 4 takes right values of non-anchor instructions from.

    Attributes:
        config: its configuration spec (``xla``).
        text: its optimized HLO module text of the same program.
        options: its typed XLA compiler options.
    """

    config: str
    text: str
    options: dict[str, Any]


def screen_kernels(program: Any, pool: Any, text: str, kernels: Sequence[str], trusted: Trusted,
                   *, options: dict[str, Any], timeout_s: float | None = None
                   ) -> tuple[list[str], int]:
    """Those of `kernels` whose values disagree with the trusted compile's instructions of the
    same names, earliest in the module first (later ones may only inherit the fault).

    Kernels of the entry computation are compared on the program's inputs, kernels in the body
    of one of its while loops on the loop's first trip: one faulty and one trusted run per
    computation, so that tier 4 splits the kernel that goes wrong first instead of trying the
    equation's kernels one by one (a loop body can hold dozens).

    Args:
        program: the failing program (its inputs feed the modules).
        pool: a `xlaprobe.workers.WorkerPool`.
        text: the faulty configuration's optimized HLO module text.
        kernels: candidate kernel (fusion) names, in the order to keep among equals.
        trusted: the trusted compile.
        options: the faulty configuration's XLA options.
        timeout_s: per-run limit (s).

    Returns:
        (the disagreeing kernels, runs spent).
    """
    instructions = list(HloText(text).instructions())
    mine = {i.name: i for i in instructions}
    theirs = HloText(trusted.text).by_name()
    entry = next((i.computation for i in reversed(instructions) if i.root), "")
    groups: dict[str, list[str]] = {}
    for kernel in kernels:
        if kernel in mine and kernel in theirs and theirs[kernel].shape == mine[kernel].shape \
                and theirs[kernel].computation == mine[kernel].computation \
                and not mine[kernel].shape.startswith("("):
            groups.setdefault(mine[kernel].computation, []).append(kernel)
    run, diverging = _Runner(program, pool, timeout_s), []
    for computation, names in groups.items():
        build = (lambda t, c=computation, n=names: entry_values_module(t, n)) \
            if computation == entry else \
            (lambda t, c=computation, n=names: first_trip_values_module(t, c, n))
        values = []
        for module_text, opts in ((text, options), (trusted.text, trusted.options)):
            module = build(module_text)
            values.append(None if module is None else run(module, program.inputs, opts))
        if values[0] is None or values[1] is None:
            continue
        diverging += [n for n, a, b in zip(names, *values)
                      if not agrees(a, b, mine[n].element_type)]
    diverging.sort(key=lambda n: mine[n].line)
    return diverging, run.cycles


def locate_op(program: Any, config: Configuration, pool: Any, text: str, kernel: str,
              recording: Any, *, trusted: Trusted | None = None,
              checker: Checker | None = None,
              timeout_s: float | None = None) -> Inside:
    """Name the instruction of `kernel` that computes wrongly (see the module docstring).

    Args:
        program: the failing `xlaprobe.program.Program` (whose jaxpr the ``eqnK`` scopes index).
        config: the faulty configuration (``xla...`` or ``mutant:<name>``).
        pool: a `xlaprobe.workers.WorkerPool` (with ``call``).
        text: the faulty configuration's optimized HLO module text of `program`.
        kernel: a fusion instruction in its entry computation.
        recording: a `xlaprobe.localization.bisect.Recording` of `program` (reference values and
            honest runs of every intermediate).
        trusted: a trusted compile of the same program; its twin of the kernel
            (`xlaprobe.localization.twin`), when it computes the anchors right, gives right values
            of the other instructions too. None: anchors only.
        checker: the finding's checker (the localization's; `xlaprobe.checker`): a suffix
            fails when one of the kernel's outputs fails in its failure class. None: a numeric
            mismatch.
        timeout_s: per-compile limit (s).

    Returns:
        The `Inside` record (``instruction`` "" with the reason in ``evidence`` when none is
        named).
    """
    started = time.perf_counter()
    checker = checker or Checker(Failure(VerdictKind.MISMATCH, ()), outputs=False)
    options = _xla_options(config)
    notes: list[str] = []
    run = _Runner(program, pool, timeout_s)

    def result(instruction: Instruction | None, evidence: str, anchors: Sequence[Any] = (),
               extra: Sequence[str] = ()) -> Inside:
        if notes:
            evidence += " (" + "; ".join(notes) + ")"
        equation = equation_of(instruction.op_name) if instruction else -1
        eqns = program.jaxpr.jaxpr.eqns
        primitive = eqns[equation].primitive.name if 0 <= equation < len(eqns) else ""
        return Inside(kernel, instruction.name if instruction else "",
                      instruction.opcode if instruction else "", equation, primitive,
                      tuple(extra), tuple(a.name for a, _ in anchors), evidence, run.cycles,
                      time.perf_counter() - started)

    instructions = list(HloText(text).instructions())
    target, computation, why = _fused_computation(instructions, kernel)
    if why:
        return result(None, why)
    values = _kernel_inputs(text, kernel, instructions, computation, program, recording, run, {},
                            trusted)
    if values is None:
        return result(None, f"{kernel} is neither in the entry computation nor in the body of "
                      "one of its while loops, or its operands could not be computed (they are "
                      "no jaxpr values, and the module with them as outputs did not compile)")
    twin, demoted = ({}, set()) if trusted is None else _twin_values(
        program, instructions, computation, kernel, trusted, recording, run, notes)
    right = _right_values(program, instructions, computation, kernel, recording, twin, demoted)
    if right.judged is None:
        return result(None, "the kernel's outputs are not the values of jaxpr equations (nor "
                      "of a trusted twin's instructions): they cannot be judged", right.anchors)
    order = right.order

    def fails(position: int) -> bool:  # the suffix from `position`, earlier ones fed right
        return _suffix_fails(position, text, computation, len(target.operands), values, right,
                             run, options, recording, program, checker)

    if not fails(0):
        return result(None, f"{kernel} compiled alone, fed the values it reads, computes "
                      "right: the fault needs the whole module's compile", right.anchors)
    # The suffix from 0 fails; from one past the end it passes: every output is then fed its
    # right value.
    failing = last_true(0, len(order), fails)
    named = order[failing]
    source = "its equation's reference value" if named.name in right.from_reference else \
        "the trusted twin's value"
    return result(named, "the latest instruction whose suffix of the kernel, fed the right "
                  f"values of every earlier one, still fails alone; fed its right value ({source})"
                  " it passes", right.anchors, _computing(named, order[:failing], right.members))


def _xla_options(config: Configuration) -> dict[str, Any]:
    """The XLA options modules compile with: the configuration's for ``xla`` ones, else the
    defaults (a planted fault is in the HLO text already; see the module docstring)."""
    if config.kind != "xla":
        return {}
    return compiler_options(config)


def _fused_computation(instructions: Sequence[Instruction], kernel: str
                       ) -> tuple[Any, str, str]:
    """(fusion instruction `kernel`, its fused computation, "") or (None, "", why not)."""
    target = next((i for i in instructions if i.name == kernel), None)
    if target is None or target.opcode != "fusion":
        return None, "", f"{kernel} is not a fusion of the module"
    computation = re.findall(r"%([\w.\-]+)", target.attribute("calls"))
    if not computation:
        return None, "", f"fusion {kernel} names no fused computation"
    return target, computation[0], ""


class _Runner:
    """Compiles and runs HLO modules in the pool's `GROUP` workers (`run_module`), counting them.

    Attributes:
        cycles: modules compiled so far.
    """

    def __init__(self, program: Any, pool: Any, timeout_s: float | None):
        self.program, self.pool, self.timeout_s = program, pool, timeout_s
        self.cycles = 0

    def __call__(self, module: str, args: Sequence[np.ndarray],
                 opts: dict[str, Any]) -> list[np.ndarray] | None:
        """The outputs of `module` run on `args`, compiled with XLA options `opts`; None when
        it did not run."""
        self.cycles += 1
        outcome = self.pool.call(self.program, f"{__name__}:run_module",
                                 {"text": module, "args": [np.asarray(a) for a in args],
                                  "options": opts}, group=GROUP, timeout_s=self.timeout_s)
        return list(outcome.value) if outcome.ran else None


@dataclasses.dataclass(frozen=True, slots=True)
class _RightValues:
    """What tier 4's suffix search feeds and judges a kernel by.

    Attributes:
        members: the fused computation's instructions by name.
        anchors: (instruction, jaxpr variable) per anchor.
        known: instruction name -> its right value (an anchor's equation's reference value, else
            the trusted twin's).
        from_reference: the names whose right value is a reference value.
        outputs: the names of the kernel's outputs, in order.
        judged: output name -> the jaxpr variable it holds, or None where the twin's value
            judges it; None when some output cannot be judged.
        order: the instructions with a right value, in computation order.
    """

    members: dict[str, Instruction]
    anchors: list[tuple[Instruction, Any]]
    known: dict[str, np.ndarray]
    from_reference: set[str]
    outputs: list[str]
    judged: dict[str, Any] | None
    order: list[Instruction]


def _right_values(program: Any, instructions: Sequence[Instruction], computation: str,
                  kernel: str, recording: Any, twin: dict[str, np.ndarray],
                  demoted: set[str]) -> _RightValues:
    """The right values of fused `computation`'s instructions and how its outputs are judged."""
    jaxpr = program.jaxpr.jaxpr
    members = {i.name: i for i in instructions if i.computation == computation}
    # Inside a loop body an instruction computes a value per trip, no equation's value: there
    # the twin alone gives right values.
    in_loop = loop_of(instructions, kernel) is not None
    anchors = [] if in_loop else [(a, v) for a, v in _anchors(instructions, computation, jaxpr)
                                  if a.name not in demoted]
    # Right values: an anchor's is its equation's reference value; another instruction's is its
    # trusted twin's, where the twin computes its outputs right.
    known = {a.name: as_element_type(recording.reference[v], a.element_type).reshape(a.dims)
             for a, v in anchors if a.element_type in NUMPY_DTYPES}
    from_reference = set(known)
    for name, value in twin.items():
        known.setdefault(name, value)
    roots = [i for i in members.values() if i.root]
    root = roots[0]
    outputs = list(root.operands) if root.opcode == "tuple" else [root.name]
    by_anchor = {a.name: v for a, v in anchors}
    judged: dict[str, Any] = {}  # output -> the jaxpr variable it holds, or None: the twin's
    for name in outputs:
        if name in by_anchor:
            judged[name] = by_anchor[name]
        elif members[name].opcode == "bitcast" and row_major(members[name]) and \
                members[name].operands[0] in by_anchor:
            judged[name] = by_anchor[members[name].operands[0]]
        elif name in known:
            judged[name] = None
    order = [members[n] for n in members if n in known]
    return _RightValues(members, anchors, known, from_reference, outputs,
                        judged if len(judged) == len(outputs) else None, order)


def _suffix_fails(position: int, text: str, computation: str, number: int,
                  values: Sequence[np.ndarray], right: _RightValues, run: _Runner,
                  options: dict[str, Any], recording: Any, program: Any,
                  checker: Checker) -> bool:
    """Whether the kernel fails compiled alone with every instruction before `position` (in
    ``right.order``) replaced by a parameter holding its right value, an output failing like
    the finding (`checker`'s failure class); `number` is its own parameter count, `values` its
    operands' values."""
    replaced, args = {}, list(values)
    for instruction in right.order[:position]:
        replaced[instruction.name] = number
        args.append(right.known[instruction.name])
        number += 1
    got = run(kernel_module(text, computation, replaced), args, options)
    if got is None:
        return False
    for name, output in zip(right.outputs, got):
        var = right.judged[name]
        if var is None:
            if not agrees(output, right.known[name], right.members[name].element_type) \
                    and checker.matches_kind(VerdictKind.MISMATCH):
                return True
            continue
        if checker.matches_kind(_verdict(output, var, right.members[name], recording, program)):
            return True
    return False


def _computing(named: Instruction, previous: Sequence[Instruction],
               members: dict[str, Instruction]) -> list[str]:
    """The instructions without a right value computing `named` from `previous` ones, sorted."""
    earlier = {i.name for i in previous}
    inner, stack = [], list(named.operands)
    while stack:
        name = stack.pop()
        if name in earlier or name not in members or name in inner:
            continue
        if members[name].opcode in ("parameter", "constant"):
            continue
        inner.append(name)
        stack.extend(members[name].operands)
    return sorted(inner)


def _kernel_inputs(text: str, kernel: str, instructions: Sequence[Instruction], computation: str,
                   program: Any, recording: Any, run: Any, options: dict[str, Any],
                   trusted: Trusted | None = None) -> list[np.ndarray] | None:
    """The right values fusion `kernel` reads (None when they cannot be had, or the kernel is
    not in the entry computation).

    Reference values where they are jaxpr values (the most accurate, and what the error budget
    assumes). Where the `trusted` compile has entry instructions of the same names and shapes,
    their values check those and stand in for the others and for a reference value they
    disagree with (a square value may be the transpose of the equation's its scope names);
    the faulty module may compute them wrong already (a fault upstream that no exposed value
    shows). Else the faulty module, with its entry ROOT replaced by them and compiled with
    `options`, computes them.
    """
    if loop_of(instructions, kernel) is not None:
        return _first_trip_inputs(text, kernel, instructions, program, run, options, trusted)
    built = operands_module(text, kernel)
    if built is None:
        return None
    module, operands = built
    values = _operand_values(operands, instructions, program, recording, computation)
    if trusted is not None:
        theirs = HloText(trusted.text).by_name()
        names = [o.name for o in operands]
        if all(o.name in theirs and theirs[o.name].shape == o.shape for o in operands):
            exposing = entry_values_module(trusted.text, names)
            got = None if exposing is None else run(exposing, program.inputs, trusted.options)
            if got is not None and len(got) == len(operands):
                return [np.asarray(t) if v is None or not agrees(v, t, o.element_type) else v
                        for v, t, o in zip(values, got, operands)]
    if all(v is not None for v in values):
        return values  # type: ignore[return-value]
    got = run(module, program.inputs, options)
    return got if got is not None and len(got) == len(operands) else None


def _first_trip_inputs(text: str, kernel: str, instructions: Sequence[Instruction],
                       program: Any, run: Any, options: dict[str, Any],
                       trusted: Trusted | None) -> list[np.ndarray] | None:
    """The values fusion `kernel` in an entry while loop's body reads on the first trip: from
    the trusted compile where its loop body has instructions of the same names and shapes, else
    from the module itself (`first_trip_module`)."""
    target = next(i for i in instructions if i.name == kernel)
    if trusted is not None and trusted.text != text:
        theirs = HloText(trusted.text).by_name()
        mine = {i.name: i for i in instructions}
        same = theirs.get(kernel)
        if same is not None and same.operands == target.operands and all(
                theirs[o].shape == mine[o].shape for o in target.operands if o in theirs):
            module = first_trip_module(trusted.text, kernel)
            got = None if module is None else run(module, program.inputs, trusted.options)
            if got is not None and len(got) == len(target.operands):
                return got
    module = first_trip_module(text, kernel)
    got = None if module is None else run(module, program.inputs, options)
    return got if got is not None and len(got) == len(target.operands) else None


def _twin_values(program: Any, instructions: Sequence[Instruction], computation: str,
                 kernel: str, trusted: Trusted, recording: Any, run: Any,
                 notes: list[str]) -> tuple[dict[str, np.ndarray], set[str]]:
    """(failing-kernel instruction name -> its right value from the trusted twin, the
    failing kernel's would-be anchors that hold no equation's value); empty (with a note why)
    when there is no twin, it cannot run, or it gets none of its anchors right."""
    theirs = list(HloText(trusted.text).instructions())
    twin = find_twin(instructions, computation, kernel, theirs)
    if twin is None:
        notes.append(f"no kernel of {trusted.config} shares its instructions")
        return {}, set()
    inputs = _kernel_inputs(trusted.text, twin.fusion, theirs, twin.computation, program,
                            recording, run, trusted.options, trusted)
    if inputs is None:
        notes.append(f"the operands of {trusted.config}'s twin {twin.fusion} could not be "
                     "computed")
        return {}, set()
    exposed = list(dict.fromkeys(twin.names.values()))
    got = run(kernel_module(trusted.text, twin.computation, exposed=exposed), inputs,
              trusted.options)
    if got is None or len(got) != len(exposed):
        notes.append(f"{trusted.config}'s twin {twin.fusion} did not run alone")
        return {}, set()
    value = dict(zip(exposed, got))
    mine = {i.name: i for i in instructions if i.computation == computation}
    # An instruction with an equation's scope and shape need not hold its value (XLA rewrote
    # m / c / d into m / (c * d), leaving a broadcast of c in the divide's scope; a square
    # value may be the transpose): where the twin's value is not the equation's either, it is
    # no anchor. A twin that gets none of them right shares the fault and is not used.
    mine_of = {t: m for m, t in twin.names.items()}
    demoted, agreeing = set(), 0
    in_entry = loop_of(theirs, twin.fusion) is None
    for anchor, var in _anchors(theirs, twin.computation, program.jaxpr.jaxpr) if in_entry else ():
        if anchor.name not in value:
            continue
        if _holds(value[anchor.name], var, anchor, recording, program):
            agreeing += 1
        elif anchor.name in mine_of:
            demoted.add(mine_of[anchor.name])
    if demoted and not agreeing:
        notes.append(f"{trusted.config}'s twin {twin.fusion} computes none of its equations' "
                     "values right: anchors only")
        return {}, set()
    return ({name: np.asarray(value[theirs_name]).reshape(mine[name].dims)
             for name, theirs_name in twin.names.items()}, demoted)


def _holds(value: np.ndarray, var: Any, instruction: Instruction, recording: Any,
           program: Any) -> bool:
    """Whether `instruction`'s `value` is jaxpr variable `var`'s (`_verdict` is no finding)."""
    return not _verdict(value, var, instruction, recording, program).is_finding


def _verdict(value: np.ndarray, var: Any, instruction: Instruction, recording: Any,
             program: Any) -> VerdictKind:
    """The verdict on `instruction`'s `value` as jaxpr variable `var`'s: by the oracle with the
    error budget where one was recorded, else (the segments method records none) by the
    leaf-scale bound of `twin.agrees`, which lets honest rounding pass (a disagreement is a
    ``mismatch``)."""
    right = np.asarray(recording.reference[var])
    if var in recording.budget:
        return judge_leaf(np.asarray(value).reshape(var.aval.shape), right,
                          budget=recording.budget[var], flushed=recording.flushed.get(var),
                          tolerance=program.tolerance).kind
    agree = agrees(np.asarray(value).reshape(right.shape), right, instruction.element_type)
    return VerdictKind.OK if agree else VerdictKind.MISMATCH
