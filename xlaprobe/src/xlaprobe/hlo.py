"""A small model of HLO module text: computations, instructions, users, fusions; and line edits.

Enough structure to find a pattern (an opcode, its operands, who uses it, which fusion it sits
in) and rewrite a few lines, as planted-fault passes and localization need; the text is parsed
back by XLA (`xla_client.hlo.hlo_module_from_text`), which validates the result.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator

_HEADER = re.compile(r"^(?P<entry>ENTRY )?%(?P<name>[\w.\-]+) \(.*\) -> .* \{$")
_INSTRUCTION = re.compile(r"^(?P<indent>\s*)(?P<root>ROOT )?%(?P<name>[\w.\-]+) = (?P<rest>.*)$")
_OPERAND = re.compile(r"%([\w.\-]+)")
_ELEMENT_TYPES = ("pred", "s4", "s8", "s16", "s32", "s64", "u4", "u8", "u16", "u32", "u64", "f16",
                  "bf16", "f32", "f64", "c64", "c128", "f8e4m3fn", "f8e5m2", "token")


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
