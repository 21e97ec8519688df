"""A small model of HLO module text: computations, instructions, users, fusions; line edits;
modules cut out of a module; and the one table of HLO element types.

Enough structure to find a pattern (an opcode, its operands, who uses it, which fusion it sits
in) and rewrite a few lines, as planted-fault passes and localization need; the text is parsed
back by XLA (`xla_client.hlo.hlo_module_from_text`), which validates the result. Localization's
tier 4 (`xlaprobe.localization.inside`) compiles pieces of an optimized module alone: a fused
computation as the entry of a module of its own (`kernel_module`), or the module returning
chosen values instead of its result (`entry_values_module`, `first_trip_values_module`), all
`portable` (fusions as calls, bitcasts as the reshapes and transposes they stand for).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Sequence
from typing import Any

import ml_dtypes
import numpy as np

_HEADER = re.compile(r"^(?P<entry>ENTRY )?%(?P<name>[\w.\-]+) \((?P<params>.*)\) "
                     r"-> (?P<result>.*) \{$")
_INSTRUCTION = re.compile(r"^(?P<indent>\s*)(?P<root>ROOT )?%(?P<name>[\w.\-]+) = (?P<rest>.*)$")
_OPERAND = re.compile(r"%([\w.\-]+)")
#: An attribute naming called computations (``calls=%f``, ``to_apply=%add``, ``body=%b``,
#: ``branch_computations={%t, %f}``): groups (attribute, ``%name`` or ``{%a, %b}``).
CALLED = re.compile(r"(calls|to_apply|body|condition|true_computation|false_computation|"
                    r"branch_computations|called_computations|comparator)=(\{[^}]*\}|%[\w.\-]+)")
#: The HLO element types that have a NumPy (or ml_dtypes) dtype: HLO name -> dtype name. The one
#: table of them; other element types (``s4``, ``f8e5m2``, ``token``) have no value here.
NUMPY_DTYPES = {"pred": "bool", "s8": "int8", "s16": "int16", "s32": "int32", "s64": "int64",
                "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
                "f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64",
                "c64": "complex64", "c128": "complex128"}


def numpy_dtype(element_type: str) -> np.dtype:
    """The NumPy dtype of an HLO element type (``bf16`` from ml_dtypes).

    >>> numpy_dtype("bf16").name, numpy_dtype("pred").name
    ('bfloat16', 'bool')

    Raises:
        KeyError: an element type not in `NUMPY_DTYPES`.
    """
    name = NUMPY_DTYPES[element_type]
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def as_element_type(value: Any, element_type: str) -> np.ndarray:
    """`value` as an array of HLO element type `element_type` (see `numpy_dtype`)."""
    return np.asarray(value).astype(numpy_dtype(element_type))


def int_range(element_type: str) -> tuple[int, int] | None:
    """(least, greatest) value of an HLO integer element type; None for any other type.

    >>> int_range("s8"), int_range("u16"), int_range("f32")
    ((-128, 127), (0, 65535), None)
    """
    if element_type not in NUMPY_DTYPES or numpy_dtype(element_type).kind not in "iu":
        return None
    info = np.iinfo(numpy_dtype(element_type))
    return int(info.min), int(info.max)


@dataclasses.dataclass(frozen=True, slots=True)
class Instruction:
    """One HLO instruction line.

    Attributes:
        name: without the ``%``, e.g. ``"subtract.3"``.
        shape: the result shape text, e.g. ``"f32[4,8]{1,0}"`` or a tuple ``"(s32[], f32[4])"``.
        opcode: e.g. ``"subtract"``, ``"fusion"``, ``"dynamic-slice"``.
        operands: operand names in order (without ``%``); for constants, empty.
        operand_text: the text inside the opcode's parentheses (constants keep their literal here).
        attributes: the text after the operand list (``dimensions={0}, metadata={...}``), or "".
        computation: the computation it belongs to.
        line: its index in `HloText.lines`.
        root: True for the computation's ROOT.
    """

    name: str
    shape: str
    opcode: str
    operands: tuple[str, ...]
    operand_text: str
    attributes: str
    computation: str
    line: int
    root: bool

    @property
    def element_type(self) -> str:
        """The element type of an array shape (``"f32"``), or "" for tuples."""
        match = re.match(r"^([a-z0-9]+)\[", self.shape)
        return match.group(1) if match else ""

    @property
    def dims(self) -> tuple[int, ...]:
        """Dimensions of an array shape (``f32[4,8]{1,0}`` -> (4, 8)); () for scalars and tuples."""
        match = re.match(r"^[a-z0-9]+\[([0-9,]*)\]", self.shape)
        if not match or not match.group(1):
            return ()
        return tuple(int(d) for d in match.group(1).split(","))

    def attribute(self, key: str) -> str:
        """The value text of ``key=value`` among the attributes, or "" (``direction``, ``calls``)."""
        match = re.search(rf"(?:^|, ){re.escape(key)}=(\{{[^}}]*\}}|[^,\s]+)", self.attributes)
        return match.group(1) if match else ""

    @property
    def op_name(self) -> str:
        """The ``op_name`` metadata (JAX's name stack), or ""."""
        match = re.search(r'op_name="([^"]*)"', self.attributes)
        return match.group(1) if match else ""


def _split_shape(rest: str) -> tuple[str, str]:
    """Split ``"<shape> <opcode>(...)..."`` into shape text and the remainder."""
    if rest.startswith("("):
        depth = 0
        for i, char in enumerate(rest):
            depth += {"(": 1, ")": -1}.get(char, 0)
            if depth == 0:
                return rest[:i + 1], rest[i + 2:]
    shape, _, remainder = rest.partition(" ")
    return shape, remainder


def _split_call(text: str) -> tuple[str, str, str]:
    """Split ``"opcode(operands), attrs"`` into opcode, operand text and attribute text."""
    opcode, _, rest = text.partition("(")
    depth = 1
    for i, char in enumerate(rest):
        depth += {"(": 1, ")": -1, "{": 0, "}": 0}.get(char, 0)
        if depth == 0:
            return opcode, rest[:i], rest[i + 1:].lstrip(", ")
    return opcode, rest, ""


class HloText:
    """HLO module text, parsed into instructions, editable line by line.

    Args:
        text: the module as ``HloModule.to_string()`` prints it.
    """

    def __init__(self, text: str):
        self.lines = text.splitlines()

    def __str__(self) -> str:
        return "\n".join(self.lines) + "\n"

    def instructions(self) -> Iterator[Instruction]:
        """Every instruction, in text order (computations in the order the module prints them)."""
        computation = ""
        for index, line in enumerate(self.lines):
            header = _HEADER.match(line)
            if header:
                computation = header.group("name")
                continue
            match = _INSTRUCTION.match(line)
            if not match or not computation:
                continue
            shape, call = _split_shape(match.group("rest"))
            opcode, operand_text, attributes = _split_call(call)
            operands = () if opcode == "constant" else tuple(_OPERAND.findall(operand_text))
            yield Instruction(match.group("name"), shape, opcode, operands, operand_text, attributes,
                              computation, index, bool(match.group("root")))

    def by_name(self) -> dict[str, Instruction]:
        """Instructions keyed by name."""
        return {i.name: i for i in self.instructions()}

    def users(self, name: str) -> list[Instruction]:
        """Instructions that take `name` as an operand."""
        return [i for i in self.instructions() if name in i.operands]

    def callers(self, computation: str) -> list[Instruction]:
        """Instructions that call `computation` (fusion ``calls=``, while ``condition=``/``body=``,
        reduce ``to_apply=``, ...)."""
        pattern = re.compile(rf"=%{re.escape(computation)}(?:[,\s}}]|$)")
        return [i for i in self.instructions() if pattern.search(i.attributes)]

    def fusion_of(self, computation: str) -> str:
        """Name of the fusion instruction that calls `computation`, or "" when it is not fused."""
        for caller in self.callers(computation):
            if caller.opcode == "fusion":
                return caller.name
        return ""

    def fresh_name(self, base: str) -> str:
        """An instruction name not yet used in the module, e.g. ``"mutant.1"``."""
        names = set(self.by_name())
        k = 1
        while f"{base}.{k}" in names:
            k += 1
        return f"{base}.{k}"

    def replace(self, instruction: Instruction, *, opcode: str | None = None,
                operands: tuple[str, ...] | None = None, shape: str | None = None,
                attributes: str | None = None, operand_text: str | None = None) -> None:
        """Rewrite one instruction line in place (same name), changing the given parts."""
        line = self.lines[instruction.line]
        indent = line[:len(line) - len(line.lstrip())]
        root = "ROOT " if instruction.root else ""
        if operand_text is None:
            operand_text = instruction.operand_text if operands is None else \
                ", ".join(f"%{o}" for o in operands)
        attrs = instruction.attributes if attributes is None else attributes
        text = (f"{indent}{root}%{instruction.name} = {shape or instruction.shape} "
                f"{opcode or instruction.opcode}({operand_text})")
        self.lines[instruction.line] = text + (f", {attrs}" if attrs else "")

    def insert_before(self, instruction: Instruction, lines: list[str]) -> None:
        """Insert instruction lines (``%x = f32[] constant(1)``) just before `instruction`.

        Indices of later instructions shift: re-read `instructions()` after inserting.
        """
        indent = self.lines[instruction.line][:len(self.lines[instruction.line])
                                              - len(self.lines[instruction.line].lstrip())]
        self.lines[instruction.line:instruction.line] = [indent + line for line in lines]


def equation_of(op_name: str, scope: str = "eqn") -> int:
    """The top-level jaxpr equation index in an ``op_name`` traced with per-equation named scopes.

    >>> equation_of("jit(program)/eqn12/while/body/add")
    12
    >>> equation_of("jit(f)/sub")
    -1
    """
    match = re.search(rf"(?:^|/){scope}(\d+)(?:/|$)", op_name)
    return int(match.group(1)) if match else -1


def callers_by_computation(instructions: Sequence[Instruction]) -> dict[str, Instruction]:
    """Called computation name -> the (first) instruction that calls it: the fusion, reduce,
    while, ... (the attributes `CALLED` reads)."""
    index = {}
    for instruction in instructions:
        for _, names in CALLED.findall(instruction.attributes):
            for name in _OPERAND.findall(names):
                index.setdefault(name, instruction)
    return index


def operand_closure(instructions: dict[str, Instruction], starts: Sequence[str]) -> set[str]:
    """The names of `starts` and of every instruction they read, transitively, among
    `instructions` (by name; operands outside it, e.g. another computation's, end the walk)."""
    seen: set[str] = set()
    stack = list(starts)
    while stack:
        name = stack.pop()
        if name in seen or name not in instructions:
            continue
        seen.add(name)
        stack.extend(instructions[name].operands)
    return seen


def entry_name(text: str) -> str:
    """The name of the module's ENTRY computation, or ""."""
    match = re.search(r"^ENTRY %([\w.\-]+) ", text, re.MULTILINE)
    return match.group(1) if match else ""


def _layout(instruction: Instruction) -> list[int]:
    """The minor-to-major layout of an array shape (``f32[4,8]{0,1}`` -> [0, 1]); [] without."""
    match = re.search(r"\]\{([0-9,]*)\}", instruction.shape)
    return [int(d) for d in match.group(1).split(",") if d] if match else []


def row_major(instruction: Instruction) -> bool:
    """True when the instruction's layout is the default one (minor-to-major n-1, ..., 0): a
    bitcast between two such shapes is a plain reshape."""
    order = _layout(instruction)
    return order == sorted(order, reverse=True)


# --------------------------------------------------------------------------------------------------
# Modules cut out of a module: a kernel alone, chosen values as the entry's outputs.


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
            for _, names in CALLED.findall(instruction.attributes):
                for name in _OPERAND.findall(names):
                    if name in blocks and name not in found:
                        found.append(name)
                        stack.append(name)
    return found


def kernel_text(text: str, kernels: Sequence[str]) -> str:
    """The HLO text of `kernels` (fusion or other instruction names) in an optimized module:
    every computation they call, transitively, in module order, then their own instruction
    lines.

    Args:
        text: optimized HLO module text.
        kernels: instruction names (without ``%``).

    Returns:
        HLO text ("" when none of the names is in the module).
    """
    hlo = HloText(text)
    instructions = list(hlo.instructions())
    by_name = {i.name: i for i in instructions}
    blocks = _blocks(hlo.lines)
    roots = [by_name[k] for k in kernels if k in by_name]
    called: list[str] = []
    for root in roots:
        for _, names in CALLED.findall(root.attributes):
            for name in _OPERAND.findall(names):
                if name in blocks and name not in called:
                    called += [name] + [c for c in _called(instructions, name, blocks)
                                        if c not in called and c != name]
    ordered = sorted(set(called), key=lambda c: blocks[c][0])
    parts = ["\n".join(hlo.lines[blocks[c][0]:blocks[c][1] + 1]) for c in ordered]
    parts += [hlo.lines[i.line].strip() for i in roots]
    return "\n\n".join(parts) + ("\n" if parts else "")


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
    order = _layout(instruction)
    return order if sorted(order) == list(range(len(instruction.dims))) else \
        list(range(len(instruction.dims)))[::-1]


def logical_bitcast(instruction: Instruction, operand: Instruction) -> list[str]:
    """HLO lines computing bitcast `instruction` of `operand` without layouts: the operand
    transposed into its physical (major-to-minor) order, reshaped to the result's physical
    shape, transposed back to the result's logical order. Identity transposes are left out;
    the last line keeps the instruction's name, shape and metadata.

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
