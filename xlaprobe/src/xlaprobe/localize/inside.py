"""Tier 4: the HLO instruction inside a failing fused kernel, with its jaxpr equation.

Given the faulty configuration's optimized HLO module of the program (tier 3), the failing
kernel (a fusion) in it, and optionally a trusted compile of the same program:

1. **Operands.** The values the kernel reads: reference values where they are jaxpr values,
   else the trusted module's instructions of the same names (the faulty module may already
   compute them wrong), else the faulty module itself, recompiled with its entry ROOT replaced
   by a tuple of them. Recompiled modules are `portable`: fusions become calls, bitcasts the
   reshapes and transposes they stand for. A kernel in the body of a while loop of the entry
   (a ``scan``) reads the values of the loop's first trip (`first_trip_values_module`).
2. **Kernel alone.** The fused computation becomes the entry of a module of its own (with the
   computations it calls), compiled and run on those values. Every instruction that computes the
   final value of a top-level jaxpr equation (its ``op_name`` names ``eqnK``; same shape and
   element type as the equation's output; no instruction of the same equation in the kernel
   reads it) is an *anchor*: its right value is the equation's float64 reference value. The
   trusted compile's *twin* of the kernel (`xlaprobe.localize.twin`), run alone on its own
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
search is `xlaprobe.localize.bisect.bisect_segments` at instruction level.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np
from xlaprobe import jaxcompat, primitives

from xlaprobe.configs.registry import Configuration
from xlaprobe.hlo import HloText, Instruction, equation_of
from xlaprobe.localize.twin import agrees, find_twin
from xlaprobe.oracle import judge_leaf
from xlaprobe.search import last_true

#: Worker isolation group of HLO compiles (no mutant pass registered there).
GROUP = "hlo"
_HEADER = re.compile(r"^(?P<entry>ENTRY )?%(?P<name>[\w.\-]+) \((?P<params>.*)\) "
                     r"-> (?P<result>.*) \{$")
_CALLS = re.compile(r"(?:calls|to_apply|body|condition|true_computation|false_computation|"
                    r"branch_computations|called_computations|comparator)=(\{[^}]*\}|%[\w.\-]+)")
_HLO_TYPES = {"pred": "bool", "s8": "int8", "s16": "int16", "s32": "int32", "s64": "int64",
              "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
              "f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64",
              "c64": "complex64", "c128": "complex128"}


@dataclasses.dataclass(frozen=True, slots=True)
class Inside:
    """The op inside a fused kernel that computes wrongly (tier 4).

    Attributes:
        kernel: the fusion instruction examined.
        instruction: the HLO instruction named, or "" when none was.
        opcode: its opcode.
        equation: the top-level jaxpr equation it computes (from its ``eqnK`` scope), or -1.
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
    with_instructions: tuple[str, ...]
    anchors: tuple[str, ...]
    evidence: str
    cycles: int
    seconds: float

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
    import jax
    del closed_jaxpr, inputs
    executable = jaxcompat.compile_hlo_text(text, dict(options))
    outputs = executable.execute([jax.device_put(np.asarray(a)) for a in args])
    return [np.asarray(x) for x in outputs]


def _blocks(lines: Sequence[str]) -> dict[str, tuple[int, int]]:
    """Computation name -> (header line, closing line)."""
    blocks, start, name = {}, -1, ""
    for index, line in enumerate(lines):
        header = _HEADER.match(line)
        if header:
            start, name = index, header.group("name")
        elif line.strip() == "}" and start >= 0:
            blocks[name] = (start, index)
            start = -1
    return blocks


def _called(instructions: Sequence[Instruction], computation: str,
            blocks: dict[str, tuple[int, int]]) -> list[str]:
    """Computations `computation` calls, transitively."""
    found: list[str] = []
    stack = [computation]
    while stack:
        current = stack.pop()
        for instruction in instructions:
            if instruction.computation != current:
                continue
            for names in _CALLS.findall(instruction.attributes):
                for name in re.findall(r"%([\w.\-]+)", names):
                    if name in blocks and name not in found:
                        found.append(name)
                        stack.append(name)
    return found


def _module_header(lines: Sequence[str], params: Sequence[str], result: str) -> str:
    """The ``HloModule`` line with the new entry's layout (shapes with layouts: without one XLA
    CHECK-fails on multi-dimensional parameters) and without ``is_scheduled`` (an edited module
    has no valid schedule)."""
    first = next((line for line in lines if line.startswith("HloModule")), "HloModule m")
    name = first.split(",")[0]
    return f"{name}, entry_computation_layout={{({', '.join(params)})->{result}}}"


def portable(text: str) -> str:
    """The module with every fusion turned into a call of its computation and every bitcast
    into the reshape and transposes it stands for: what XLA's HLO -> StableHLO import and a
    fresh compile accept and compute the same values from. A fusion recompiled needs a
    backend config the import drops; a bitcast means what it does only in the layouts of its
    operand and result, which the import and a fresh layout assignment do not keep.
    """
    hlo = HloText(text)
    instructions = list(hlo.instructions())
    by_name = {(i.computation, i.name): i for i in instructions}
    # Bottom up, so that the line numbers of instructions still to edit stay valid.
    for instruction in reversed(instructions):
        if instruction.opcode == "fusion":
            called = instruction.attribute("calls")
            metadata = re.search(r"metadata=\{[^}]*\}", instruction.attributes)
            hlo.replace(instruction, opcode="call", attributes=f"to_apply={called}"
                        + (f", {metadata.group(0)}" if metadata else ""))
        elif instruction.opcode == "bitcast" and len(instruction.operands) == 1 and \
                (instruction.computation, instruction.operands[0]) in by_name:
            operand = by_name[(instruction.computation, instruction.operands[0])]
            lines = logical_bitcast(instruction, operand)
            indent = hlo.lines[instruction.line][:len(hlo.lines[instruction.line])
                                                 - len(hlo.lines[instruction.line].lstrip())]
            hlo.lines[instruction.line:instruction.line + 1] = [indent + line for line in lines]
    return str(hlo)


def _minor_to_major(instruction: Instruction) -> list[int]:
    match = re.search(r"\]\{([0-9,]*)\}", instruction.shape)
    order = [int(d) for d in match.group(1).split(",") if d] if match else []
    return order if sorted(order) == list(range(len(instruction.dims))) else \
        list(range(len(instruction.dims)))[::-1]


def logical_bitcast(instruction: Instruction, operand: Instruction) -> list[str]:
    """HLO lines computing bitcast `instruction` of `operand` without layouts: the operand
    transposed into its physical (major-to-minor) order, reshaped to the result's physical
    shape, transposed back to the result's logical order. Identity transposes are left out;
    the last line keeps the instruction's name, shape and metadata.

    >>> from xlaprobe.hlo import HloText
    >>> x, b = HloText("%c (p: f32[2,3]) -> f32[3,2] {\\n  %p = f32[2,3]{0,1} parameter(0)\\n"
    ...                "  ROOT %b = f32[3,2]{1,0} bitcast(%p)\\n}").instructions()
    >>> logical_bitcast(b, x)
    ['%b.physical = f32[3,2]{1,0} transpose(%p), dimensions={1,0}', '%b = f32[3,2]{1,0} reshape(%b.physical)']
    """
    element = instruction.element_type
    source, target = operand.dims, instruction.dims
    source_order = _minor_to_major(operand)[::-1]  # major to minor
    target_order = _minor_to_major(instruction)[::-1]
    metadata = re.search(r"metadata=\{[^}]*\}", instruction.attributes)
    tail = f", {metadata.group(0)}" if metadata else ""

    def shape(dims: Sequence[int]) -> str:
        layout = ",".join(str(d) for d in range(len(dims) - 1, -1, -1))
        return f"{element}[{','.join(str(d) for d in dims)}]{{{layout}}}"

    lines, current = [], operand.name
    if source_order != sorted(source_order):
        physical = [source[d] for d in source_order]
        lines.append(f"%{instruction.name}.physical = {shape(physical)} transpose(%{current}), "
                     f"dimensions={{{','.join(map(str, source_order))}}}")
        current = f"{instruction.name}.physical"
    if target_order == sorted(target_order):
        lines.append(f"%{instruction.name} = {instruction.shape} reshape(%{current}){tail}")
        return lines
    physical = [target[d] for d in target_order]
    lines.append(f"%{instruction.name}.reshaped = {shape(physical)} reshape(%{current})")
    back = [target_order.index(i) for i in range(len(target))]
    lines.append(f"%{instruction.name} = {instruction.shape} transpose(%{instruction.name}"
                 f".reshaped), dimensions={{{','.join(map(str, back))}}}{tail}")
    return lines


def operands_module(text: str, kernel: str) -> tuple[str, list[Instruction]] | None:
    """The module (`portable`) with its entry ROOT replaced by a tuple of `kernel`'s operands.

    Returns:
        (module text, the operand instructions), or None when `kernel` is not in the entry or
        reads a tuple.
    """
    by_name = HloText(text).by_name()
    target = by_name.get(kernel)
    if target is None:
        return None
    module = entry_values_module(text, target.operands)
    return None if module is None else (module, [by_name[o] for o in target.operands])


def entry_values_module(text: str, names: Sequence[str]) -> str | None:
    """The module (`portable`) with its entry ROOT replaced by a tuple of the entry
    instructions `names`; None when one is not an array-shaped entry instruction."""
    hlo = HloText(portable(text))
    instructions = list(hlo.instructions())
    blocks = _blocks(hlo.lines)
    entry = next((n for n, (s, _) in blocks.items() if hlo.lines[s].startswith("ENTRY ")), "")
    by_name = {i.name: i for i in instructions if i.computation == entry}
    if not all(n in by_name and not by_name[n].shape.startswith("(") for n in names):
        return None
    start, stop = blocks[entry]
    lines = list(hlo.lines)
    for index in range(start + 1, stop):
        lines[index] = lines[index].replace("ROOT %", "%", 1)
    shape = "(" + ", ".join(by_name[n].shape for n in names) + ")"
    lines.insert(stop, f"  ROOT %xlaprobe.values = {shape} tuple("
                 + ", ".join(f"%{n}" for n in names) + ")")
    header = _HEADER.match(lines[start])
    lines[start] = f"ENTRY %{header.group('name')} ({header.group('params')}) -> {shape} {{"
    body = [line for line in lines if not line.startswith("HloModule")]
    params = [i.shape for i in sorted((i for i in by_name.values() if i.opcode == "parameter"),
                                      key=lambda i: int(i.operand_text or 0))]
    return _module_header(hlo.lines, params, shape) + "\n\n" + "\n".join(body) + "\n"


def loop_of(instructions: Sequence[Instruction], kernel: str, *,
            fused: bool = True) -> tuple[Instruction, str] | None:
    """Where instruction `kernel` (a fusion, unless `fused` is False) sits directly in the body
    of a while loop run by the entry computation: (the entry instruction that runs the loop,
    the entry value that is the loop's initial state), else None (it is in the entry, or
    deeper). The loop is a while of the entry, or the root of a computation the entry calls
    on the initial state (XLA:CPU wraps small loops in such a call)."""
    target = next((i for i in instructions if i.name == kernel), None)
    if target is None or (fused and target.opcode != "fusion"):
        return None
    entry = next((i.computation for i in reversed(instructions) if i.root), "")
    loop = next((i for i in instructions if i.opcode == "while"
                 and i.attribute("body").lstrip("%") == target.computation), None)
    if loop is None or len(loop.operands) != 1:
        return None
    if loop.computation == entry:
        return loop, loop.operands[0]
    start = next((i for i in instructions if i.computation == loop.computation
                  and i.name == loop.operands[0]), None)
    caller = next((i for i in instructions if i.computation == entry and i.opcode == "call"
                   and i.attribute("to_apply").lstrip("%") == loop.computation), None)
    if loop.root and start is not None and start.opcode == "parameter" and caller is not None \
            and len(caller.operands) == 1:
        return caller, caller.operands[0]
    return None


def first_trip_module(text: str, kernel: str) -> str | None:
    """The module (`portable`) that returns the operands of fusion `kernel`, which sits in the
    body of a while loop of the entry computation, on the loop's first trip (see
    `first_trip_values_module`). None when `kernel` is not in such a body.
    """
    by_name = HloText(text).by_name()
    target = by_name.get(kernel)
    if target is None:
        return None
    return first_trip_values_module(text, target.computation, target.operands)


def first_trip_values_module(text: str, body: str, names: Sequence[str]) -> str | None:
    """The module (`portable`) that returns the values of instructions `names` of loop body
    `body` (of a while loop of the entry computation) on the loop's first trip: the loop
    becomes a call of its body on its initial state, the body returns a tuple of those values,
    and the entry ends there. None when `body` is no such body or a name is not an
    array-shaped instruction of it.
    """
    hlo = HloText(portable(text))
    instructions = list(hlo.instructions())
    members = {i.name: i for i in instructions if i.computation == body}
    anyone = next(iter(members.values()), None)
    site = None if anyone is None else loop_of(instructions, anyone.name, fused=False)
    if site is None or not all(n in members and not members[n].shape.startswith("(")
                               for n in names):
        return None
    loop, start = site
    blocks = _blocks(hlo.lines)
    shape = "(" + ", ".join(members[n].shape for n in names) + ")"
    lines = list(hlo.lines)
    entry_start, entry_stop = blocks[loop.computation]
    body_start, body_stop = blocks[body]
    edits = []  # (start, stop, new lines) per block, applied bottom up
    entry_lines = [lines[k].replace("ROOT %", "%", 1) for k in range(entry_start + 1, loop.line)]
    indent = lines[loop.line][:len(lines[loop.line]) - len(lines[loop.line].lstrip())]
    entry_lines.append(f"{indent}ROOT %{loop.name} = {shape} call(%{start}), to_apply=%{body}")
    header = _HEADER.match(lines[entry_start])
    edits.append((entry_start, entry_stop, [
        f"ENTRY %{header.group('name')} ({header.group('params')}) -> {shape} {{",
        *entry_lines, "}"]))
    body_lines = [lines[k].replace("ROOT %", "%", 1) for k in range(body_start + 1, body_stop)]
    body_lines.append(f"  ROOT %xlaprobe.values = {shape} tuple("
                      + ", ".join(f"%{n}" for n in names) + ")")
    header = _HEADER.match(lines[body_start])
    edits.append((body_start, body_stop, [
        f"%{body} ({header.group('params')}) -> {shape} {{", *body_lines, "}"]))
    if loop.opcode == "call":  # the wrapper's while would read the edited body: drop it
        wrapper_start, wrapper_stop = blocks[loop.attribute("to_apply").lstrip("%")]
        edits.append((wrapper_start, wrapper_stop, []))
    for start_line, stop_line, new in sorted(edits, reverse=True):
        lines[start_line:stop_line + 1] = new
    params = [i.shape for i in sorted((i for i in instructions if i.computation == loop.computation
                                       and i.opcode == "parameter"),
                                      key=lambda i: int(i.operand_text or 0))]
    body_text = [line for line in lines if not line.startswith("HloModule")]
    return _module_header(lines, params, shape) + "\n\n" + "\n".join(body_text) + "\n"


def kernel_module(text: str, computation: str, replaced: dict[str, int] | None = None,
                  exposed: Sequence[str] = ()) -> str:
    """A module whose entry is fused `computation` (with the computations it calls); each
    instruction in `replaced` becomes entry parameter number ``replaced[name]`` instead.

    Args:
        text: the optimized module text holding `computation`.
        computation: the fused computation's name.
        replaced: instruction name -> new parameter number (after the computation's own).
        exposed: when given, the entry returns a tuple of these instructions' values instead
            of the computation's own result.

    Returns:
        HLO module text (`portable`).
    """
    hlo = HloText(portable(text))
    instructions = list(hlo.instructions())
    blocks = _blocks(hlo.lines)
    replaced = replaced or {}
    parts = []
    for name in sorted(_called(instructions, computation, blocks), key=lambda n: blocks[n][0]):
        start, stop = blocks[name]
        parts.append("\n".join(line for line in hlo.lines[start:stop + 1]))
    start, stop = blocks[computation]
    header = _HEADER.match(hlo.lines[start])
    params = header.group("params")
    body = []
    extra = []
    shapes: dict[int, str] = {}
    result = signature = header.group("result")
    members = {i.name: i for i in instructions if i.computation == computation}
    for instruction in members.values():
        if instruction.opcode == "parameter":
            shapes[int(instruction.operand_text or 0)] = instruction.shape
        if instruction.root and not exposed:
            result = instruction.shape
        line = hlo.lines[instruction.line]
        root = "ROOT " if instruction.root and not exposed else ""
        if exposed:
            line = line.replace("ROOT %", "%", 1)
        if instruction.name in replaced:
            number = replaced[instruction.name]
            indent = line[:len(line) - len(line.lstrip())]
            line = (f"{indent}{root}%{instruction.name} = {instruction.shape} "
                    f"parameter({number})")
            extra.append((number, f"{instruction.name}: {instruction.shape}"))
            shapes[number] = instruction.shape
        body.append(line)
    if exposed:
        result = signature = "(" + ", ".join(members[n].shape for n in exposed) + ")"
        body.append(f"  ROOT %xlaprobe.exposed = {result} tuple("
                    + ", ".join(f"%{n}" for n in exposed) + ")")
    params = ", ".join([params] * bool(params) + [p for _, p in sorted(extra)])
    entry = [f"ENTRY %{computation} ({params}) -> {signature} {{", *body, "}"]
    header_line = _module_header(hlo.lines, [shapes[k] for k in sorted(shapes)], result)
    module = header_line + "\n\n" + "\n\n".join(parts + ["\n".join(entry)]) + "\n"
    return re.sub(r" stack_frame_id=\d+", "", module)  # the module's frame tables stay behind


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
    dtype = _HLO_TYPES.get(instruction.element_type)
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


def _row_major(instruction: Instruction) -> bool:
    """True when the instruction's layout is the default one (minor-to-major n-1, ..., 0): a
    bitcast between two such shapes is a plain reshape."""
    match = re.search(r"\]\{([0-9,]*)\}", instruction.shape)
    order = [int(d) for d in match.group(1).split(",") if d] if match else []
    return order == sorted(order, reverse=True)


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
        dtype = _HLO_TYPES.get(instruction.element_type)
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
                return _as_dtype(recording.reference[var], dtype).reshape(instruction.dims)
        if instruction.opcode in ("bitcast", "reshape", "copy") and depth < 4 and \
                len(instruction.operands) == 1 and instruction.operands[0] in by_name and \
                _row_major(instruction) and _row_major(by_name[instruction.operands[0]]):
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
        if param is None or not 0 <= k < len(jaxpr.eqns) or not _row_major(operand):
            return None
        for user in instructions:
            if user.computation == computation and user.opcode == "bitcast" and \
                    user.operands == (param.name,) and equation_of(user.op_name) == k and \
                    _row_major(user):
                var = _value_of(jaxpr, k, user)
                if var is not None and var in recording.reference:
                    return _as_dtype(recording.reference[var],
                                     _HLO_TYPES[user.element_type]).reshape(operand.dims)
        return None

    values = []
    for number, operand in enumerate(operands):
        found = value(operand)
        values.append(found if found is not None else through_kernel(number, operand))
    return values


def _as_dtype(value: Any, dtype_name: str) -> np.ndarray:
    dtype = np.dtype(ml_dtypes.bfloat16) if dtype_name == "bfloat16" else np.dtype(dtype_name)
    return np.asarray(value).astype(dtype)


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
    runs, diverging = 0, []
    for computation, names in groups.items():
        build = (lambda t, c=computation, n=names: entry_values_module(t, n)) \
            if computation == entry else \
            (lambda t, c=computation, n=names: first_trip_values_module(t, c, n))
        values = []
        for module_text, opts in ((text, options), (trusted.text, trusted.options)):
            module = build(module_text)
            runs += module is not None
            outcome = None if module is None else pool.call(
                program, f"{__name__}:run_module",
                {"text": module, "args": [np.asarray(a) for a in program.inputs],
                 "options": opts}, group=GROUP, timeout_s=timeout_s)
            values.append(list(outcome.value) if outcome is not None and outcome.ran else None)
        if values[0] is None or values[1] is None:
            continue
        diverging += [n for n, a, b in zip(names, *values)
                      if not agrees(a, b, mine[n].element_type)]
    diverging.sort(key=lambda n: mine[n].line)
    return diverging, runs


def locate_op(program: Any, config: Configuration, pool: Any, text: str, kernel: str,
              recording: Any, *, trusted: Trusted | None = None,
              timeout_s: float | None = None) -> Inside:
    """Name the instruction of `kernel` that computes wrongly (see the module docstring).

    Args:
        program: the failing `xlaprobe.program.Program` (whose jaxpr the ``eqnK`` scopes index).
        config: the faulty configuration (``xla...`` or ``mutant:<name>``).
        pool: a `xlaprobe.workers.WorkerPool` (with ``call``).
        text: the faulty configuration's optimized HLO module text of `program`.
        kernel: a fusion instruction in its entry computation.
        recording: a `xlaprobe.localize.bisect.Recording` of `program` (reference values and
            honest runs of every intermediate).
        trusted: a trusted compile of the same program; its twin of the kernel
            (`xlaprobe.localize.twin`), when it computes the anchors right, gives right values
            of the other instructions too. None: anchors only.
        timeout_s: per-compile limit (s).

    Returns:
        The `Inside` record (``instruction`` "" with the reason in ``evidence`` when none is
        named).
    """
    started = time.perf_counter()
    cycles = 0
    options: dict[str, Any] = {}
    if config.kind == "xla":
        from xlaprobe.configs.xla import compiler_options
        options = compiler_options(config)
    notes: list[str] = []

    def result(instruction: Instruction | None, evidence: str, anchors: Sequence[Any] = (),
               extra: Sequence[str] = ()) -> Inside:
        if notes:
            evidence += " (" + "; ".join(notes) + ")"
        return Inside(kernel, instruction.name if instruction else "",
                      instruction.opcode if instruction else "",
                      equation_of(instruction.op_name) if instruction else -1, tuple(extra),
                      tuple(a.name for a, _ in anchors), evidence, cycles,
                      time.perf_counter() - started)

    def run(module: str, args: Sequence[np.ndarray],
            opts: dict[str, Any]) -> list[np.ndarray] | None:
        nonlocal cycles
        cycles += 1
        outcome = pool.call(program, f"{__name__}:run_module",
                            {"text": module, "args": [np.asarray(a) for a in args],
                             "options": opts}, group=GROUP, timeout_s=timeout_s)
        return list(outcome.value) if outcome.ran else None

    instructions = list(HloText(text).instructions())
    target = next((i for i in instructions if i.name == kernel), None)
    if target is None or target.opcode != "fusion":
        return result(None, f"{kernel} is not a fusion of the module")
    computation = re.findall(r"%([\w.\-]+)", target.attribute("calls"))
    if not computation:
        return result(None, f"fusion {kernel} names no fused computation")
    computation = computation[0]
    jaxpr = program.jaxpr.jaxpr
    values = _kernel_inputs(text, kernel, instructions, computation, program, recording, run, {},
                            trusted)
    if values is None:
        return result(None, f"{kernel} is neither in the entry computation nor in the body of "
                      "one of its while loops, or its operands could not be computed (they are "
                      "no jaxpr values, and the module with them as outputs did not compile)")
    members = {i.name: i for i in instructions if i.computation == computation}
    twin: dict[str, np.ndarray] = {}
    demoted: set[str] = set()
    if trusted is not None:
        twin, demoted = _twin_values(program, instructions, computation, kernel, trusted,
                                     recording, run, notes)
    # Inside a loop body an instruction computes a value per trip, no equation's value: there
    # the twin alone gives right values.
    in_loop = loop_of(instructions, kernel) is not None
    anchors = [] if in_loop else [(a, v) for a, v in _anchors(instructions, computation, jaxpr)
                                  if a.name not in demoted]
    # Right values: an anchor's is its equation's reference value; another instruction's is its
    # trusted twin's, where the twin computes its outputs right.
    known = {a.name: _as_dtype(recording.reference[v], _HLO_TYPES[a.element_type]).reshape(a.dims)
             for a, v in anchors if a.element_type in _HLO_TYPES}
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
        elif members[name].opcode == "bitcast" and _row_major(members[name]) and \
                members[name].operands[0] in by_anchor:
            judged[name] = by_anchor[members[name].operands[0]]
        elif name in known:
            judged[name] = None
    if len(judged) != len(outputs):
        return result(None, "the kernel's outputs are not the values of jaxpr equations (nor "
                      "of a trusted twin's instructions): they cannot be judged", anchors)
    order = [members[n] for n in members if n in known]

    def fails(position: int) -> bool:
        """The suffix from `position`: every earlier instruction fed its right value."""
        replaced, args = {}, list(values)
        number = len(target.operands)
        for instruction in order[:position]:
            replaced[instruction.name] = number
            args.append(known[instruction.name])
            number += 1
        got = run(kernel_module(text, computation, replaced), args, options)
        if got is None:
            return False
        for name, output in zip(outputs, got):
            var = judged[name]
            if var is None:
                if not agrees(output, known[name], members[name].element_type):
                    return True
                continue
            if not _holds(output, var, members[name], recording, program):
                return True
        return False

    if not fails(0):
        return result(None, f"{kernel} compiled alone, fed the values it reads, computes "
                      "right: the fault needs the whole module's compile", anchors)
    # The suffix from 0 fails; from one past the end it passes: every output is then fed its
    # right value.
    failing = last_true(0, len(order), fails)
    named = order[failing]
    previous = {i.name for i in order[:failing]}
    inner, stack = [], list(named.operands)
    while stack:  # the instructions without a right value computing `named` from earlier ones
        name = stack.pop()
        if name in previous or name not in members or name in inner:
            continue
        if members[name].opcode in ("parameter", "constant"):
            continue
        inner.append(name)
        stack.extend(members[name].operands)
    source = "its equation's reference value" if named.name in from_reference else \
        "the trusted twin's value"
    return result(named, "the latest instruction whose suffix of the kernel, fed the right "
                  f"values of every earlier one, still fails alone; fed its right value ({source})"
                  " it passes", anchors, sorted(inner))


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
    """Whether `instruction`'s `value` is jaxpr variable `var`'s: by the oracle with the error
    budget where one was recorded, else (the segments method records none) by the leaf-scale
    bound of `twin.agrees`, which lets honest rounding pass."""
    right = np.asarray(recording.reference[var])
    if var in recording.budget:
        return not judge_leaf(np.asarray(value).reshape(var.aval.shape), right,
                              budget=recording.budget[var], flushed=recording.flushed.get(var),
                              tolerance=program.tolerance).kind.is_finding
    return agrees(np.asarray(value).reshape(right.shape), right, instruction.element_type)
