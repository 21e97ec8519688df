"""Tier 4: the HLO instruction inside a failing fused kernel, with its jaxpr equation.

Given the faulty configuration's optimized HLO module of the program (tier 3) and the failing
kernel (a fusion) in it:

1. **Operands.** The module is recompiled with its entry ROOT replaced by a tuple of the kernel's
   operands, under XLA's default options (tiers 2-3 put the first wrong value in this kernel, so
   what feeds it is right), giving the values the kernel reads.
2. **Kernel alone.** The fused computation becomes the entry of a module of its own (with the
   computations it calls), compiled and run on those values. Every instruction that computes the
   final value of a top-level jaxpr equation (its ``op_name`` names ``eqnK``; same shape and
   element type as the equation's output; no instruction of the same equation in the kernel
   reads it) is an *anchor*: its right value is the equation's float64 reference value.
3. **Suffix search.** For anchor ``a``, the kernel with every anchor before ``a`` (in the
   computation's order) replaced by a parameter holding its reference value is compiled and its
   outputs judged by the oracle against their references (with the recorded error budget). The
   whole kernel must fail; a binary search finds the latest anchor whose suffix still fails: that
   instruction is named (the fault lies in it or in the non-anchor instructions computing it
   from earlier anchors; those are listed with it). Its jaxpr equation is the anchor's.

Modules compile with the faulty configuration's XLA options for ``xla`` configurations (a fault
in code generation, e.g. fast-math reassociation, needs them) and with the defaults for planted
faults (``mutant:<name>``: the HLO text already holds the fault; compiling it with the mutant's
pass again would plant it twice). Every compile runs in a worker (`WorkerPool.call`,
isolation group ``hlo``), since an edited module may crash XLA.

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
from jax._src import core as jcore

from xlaprobe.configs.registry import Configuration
from xlaprobe.hlo import HloText, Instruction, equation_of
from xlaprobe.oracle import judge_leaf

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
    from jax._src import compiler
    from jax._src.lib import xla_client
    from jax.extend.mlir import hlo_to_stablehlo
    del closed_jaxpr, inputs
    module = xla_client.hlo.hlo_module_from_text(text)
    mlir = hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
    backend = jax.extend.backend.get_backend("cpu")
    devices = xla_client.DeviceList(tuple(backend.devices()[:1]))
    compile_options = compiler.get_compile_options(1, 1, env_options_overrides=dict(options))
    executable = backend.compile_and_load(mlir, devices, compile_options)
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


def operands_module(text: str, kernel: str) -> tuple[str, list[Instruction]] | None:
    """The module with its entry ROOT replaced by a tuple of `kernel`'s operands.

    Returns:
        (module text, the operand instructions), or None when `kernel` is not in the entry.
    """
    hlo = HloText(text)
    instructions = list(hlo.instructions())
    by_name = {i.name: i for i in instructions}
    target = by_name.get(kernel)
    blocks = _blocks(hlo.lines)
    entry = next((n for n, (s, _) in blocks.items() if hlo.lines[s].startswith("ENTRY ")), "")
    if target is None or target.computation != entry:
        return None
    operands = [by_name[o] for o in target.operands]
    if any(o.shape.startswith("(") for o in operands):
        return None
    start, stop = blocks[entry]
    lines = list(hlo.lines)
    for index in range(start + 1, stop):
        lines[index] = lines[index].replace("ROOT %", "%", 1)
    shape = "(" + ", ".join(o.shape for o in operands) + ")"
    lines.insert(stop, f"  ROOT %xlaprobe.operands = {shape} tuple("
                 + ", ".join(f"%{o.name}" for o in operands) + ")")
    header = _HEADER.match(lines[start])
    lines[start] = f"ENTRY %{header.group('name')} ({header.group('params')}) -> {shape} {{"
    body = [line for line in lines if not line.startswith("HloModule")]
    params = [i.shape for i in sorted((i for i in instructions if i.computation == entry
                                       and i.opcode == "parameter"),
                                      key=lambda i: int(i.operand_text or 0))]
    return _module_header(hlo.lines, params, shape) + "\n\n" + "\n".join(body) + "\n", operands


def kernel_module(text: str, computation: str, replaced: dict[str, int] | None = None) -> str:
    """A module whose entry is fused `computation` (with the computations it calls); each
    instruction in `replaced` becomes entry parameter number ``replaced[name]`` instead.

    Args:
        text: the optimized module text holding `computation`.
        computation: the fused computation's name.
        replaced: instruction name -> new parameter number (after the computation's own).

    Returns:
        HLO module text.
    """
    hlo = HloText(text)
    instructions = list(hlo.instructions())
    by_name = {i.name: i for i in instructions if i.computation == computation}
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
    result = ""
    for instruction in instructions:
        if instruction.computation != computation:
            continue
        if instruction.opcode == "parameter":
            shapes[int(instruction.operand_text or 0)] = instruction.shape
        if instruction.root:
            result = instruction.shape
        line = hlo.lines[instruction.line]
        if instruction.opcode == "bitcast" and _row_major(instruction) and all(
                _row_major(by_name[o]) for o in instruction.operands if o in by_name):
            # A row-major bitcast is a reshape; XLA's HLO -> StableHLO conversion mishandles
            # bitcasts between ranks (a layout of the wrong rank).
            line = line.replace(" bitcast(", " reshape(", 1)
        if instruction.name in replaced:
            number = replaced[instruction.name]
            indent = line[:len(line) - len(line.lstrip())]
            root = "ROOT " if instruction.root else ""
            line = (f"{indent}{root}%{instruction.name} = {instruction.shape} "
                     f"parameter({number})")
            extra.append((number, f"{instruction.name}: {instruction.shape}"))
            shapes[number] = instruction.shape
        body.append(line)
    params = ", ".join([params] * bool(params) + [p for _, p in sorted(extra)])
    entry = [f"ENTRY %{computation} ({params}) -> {header.group('result')} {{", *body, "}"]
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
_RESHAPES = frozenset({"reshape", "squeeze", "expand_dims"})


def _value_of(jaxpr: Any, k: int, instruction: Instruction) -> Any:
    """The jaxpr variable whose value `instruction` computes: equation k's output when shape and
    dtype match, else the output of a reshape of it (folded in) that matches; or None."""
    dtype = _HLO_TYPES.get(instruction.element_type)
    for current in (k, *(c for c in range(k + 1, len(jaxpr.eqns))
                         if jaxpr.eqns[c].primitive.name in _RESHAPES
                         and jaxpr.eqns[c].invars[0] in jaxpr.eqns[k].outvars)):
        outvars = [v for v in jaxpr.eqns[current].outvars if not isinstance(v, jcore.DropVar)]
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
                    program: Any, recording: Any, computation: str = "") -> list[np.ndarray] | None:
    """The values a kernel reads, where each operand is a program input or the value of a jaxpr
    equation (its reference value; tiers 2-3 put the first wrong value in this kernel), possibly
    through a bitcast, reshape or copy, or reshaped by a row-major bitcast of the fused
    `computation` itself into the equation's shape (XLA computes a dot on flattened rows); None
    when one is neither (then the module computes them).
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
    return None if any(v is None for v in values) else values  # type: ignore[return-value]


def _as_dtype(value: Any, dtype_name: str) -> np.ndarray:
    dtype = np.dtype(ml_dtypes.bfloat16) if dtype_name == "bfloat16" else np.dtype(dtype_name)
    return np.asarray(value).astype(dtype)


def locate_op(program: Any, config: Configuration, pool: Any, text: str, kernel: str,
              recording: Any, *, timeout_s: float | None = None) -> Inside:
    """Name the instruction of `kernel` that computes wrongly (see the module docstring).

    Args:
        program: the failing `xlaprobe.program.Program` (whose jaxpr the ``eqnK`` scopes index).
        config: the faulty configuration (``xla...`` or ``mutant:<name>``).
        pool: a `xlaprobe.workers.WorkerPool` (with ``call``).
        text: the faulty configuration's optimized HLO module text of `program`.
        kernel: a fusion instruction in its entry computation.
        recording: a `xlaprobe.localize.bisect.Recording` of `program` (reference values and
            honest runs of every intermediate).
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

    def result(instruction: Instruction | None, evidence: str, anchors: Sequence[Any] = (),
               extra: Sequence[str] = ()) -> Inside:
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

    hlo = HloText(text)
    instructions = list(hlo.instructions())
    target = next((i for i in instructions if i.name == kernel), None)
    if target is None or target.opcode != "fusion":
        return result(None, f"{kernel} is not a fusion of the module")
    computation = re.findall(r"%([\w.\-]+)", target.attribute("calls"))
    if not computation:
        return result(None, f"fusion {kernel} names no fused computation")
    computation = computation[0]
    jaxpr = program.jaxpr.jaxpr
    built = operands_module(text, kernel)
    if built is None:
        return result(None, f"{kernel} is not in the entry computation (inside a loop or branch)")
    module, operands = built
    values = _operand_values(operands, instructions, program, recording, computation)
    if values is None:
        values = run(module, program.inputs, {})
    if values is None or len(values) != len(operands):
        return result(None, "the kernel's operands could not be computed (they are no jaxpr "
                      "values, and the module with its operands as outputs did not compile)")
    anchors = _anchors(instructions, computation, jaxpr)
    roots = [i for i in instructions if i.computation == computation and i.root]
    root_names = set(roots[0].operands) if roots and roots[0].opcode == "tuple" else \
        {r.name for r in roots}
    # Each kernel output, judged as the equation value it holds: an anchor, or a row-major
    # bitcast of one (XLA reshapes a value for its consumer in the kernel).
    by_anchor = {a.name: v for a, v in anchors}
    members = {i.name: i for i in instructions if i.computation == computation}
    judged = []
    for name in root_names:
        if name in by_anchor:
            judged.append((members[name], by_anchor[name]))
        elif members[name].opcode == "bitcast" and _row_major(members[name]) and \
                members[name].operands[0] in by_anchor:
            judged.append((members[name], by_anchor[members[name].operands[0]]))
    if not judged or len(judged) != len(root_names):
        return result(None, "the kernel's outputs are not the values of jaxpr equations: they "
                      "cannot be judged", anchors)
    order = [a for a, _ in anchors]

    def fails(position: int) -> bool:
        """The suffix from anchor `position`: earlier anchors fed their reference values."""
        replaced, args = {}, list(values)
        number = len(operands)
        for anchor, var in anchors[:position]:
            if anchor.name in root_names:
                continue
            replaced[anchor.name] = number
            args.append(_as_dtype(recording.reference[var],
                                  _HLO_TYPES[anchor.element_type]).reshape(anchor.dims))
            number += 1
        outputs = run(kernel_module(text, computation, replaced), args, options)
        if outputs is None:
            return False
        by_root = dict(zip(roots[0].operands if roots[0].opcode == "tuple" else
                           [roots[0].name], outputs))
        for anchor, var in judged:
            output = np.asarray(by_root[anchor.name]).reshape(var.aval.shape)
            verdict = judge_leaf(output, recording.reference[var],
                                 budget=recording.budget.get(var),
                                 flushed=recording.flushed.get(var),
                                 tolerance=program.tolerance)
            if verdict.kind.is_finding:
                return True
        return False

    if not fails(0):
        return result(None, f"{kernel} compiled alone, fed the values it reads, computes "
                      "right: the fault needs the whole module's compile", anchors)
    # The suffix from `failing` fails; from `passing` (one past the end at first) it passes.
    failing, passing = 0, len(order)
    while passing - failing > 1:
        middle = (failing + passing) // 2
        if fails(middle):
            failing = middle
        else:
            passing = middle
    named = order[failing]
    previous = {a.name for a in order[:failing]}
    inner, stack = [], list(named.operands)
    while stack:  # the non-anchor instructions computing `named` from earlier anchors
        name = stack.pop()
        if name in previous or name not in members or name in inner:
            continue
        if members[name].opcode in ("parameter", "constant"):
            continue
        inner.append(name)
        stack.extend(members[name].operands)
    return result(named, "the latest anchor whose suffix of the kernel, fed the reference values "
                  "of every earlier anchor, still fails alone", anchors, sorted(inner))
