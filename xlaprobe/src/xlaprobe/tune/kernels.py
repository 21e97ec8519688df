"""The kernels of an optimized HLO module: each top-level instruction that does work (a fusion, a
dot, a convolution, a custom call, a copy, a while loop, ...) cut out as an HLO module of its own,
and its features for the kernel-level cost model.

A fusion becomes its fused computation as the entry (`xlaprobe.hlo.kernel_module`); any other
instruction becomes an entry that reads one parameter per operand and applies it (with the
computations it calls). Both are `xlaprobe.hlo.portable`, so XLA's HLO -> StableHLO import and a
fresh compile take them (`xlaprobe.jaxcompat.compile_hlo_text`). Features come from the text
alone (no compile), so a candidate configuration can be ranked from its compiled program's text:
op counts, shapes, bytes moved, flops of dots and convolutions, the fusion kind, layouts.
Source of the approach: the learned TPU cost model of Kaufman et al., "A Learned Performance
Model for Tensor Processing Units" (MLSys 2021): per-kernel features, composed to the program.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import math
import re
from collections.abc import Sequence

import numpy as np

from xlaprobe.hlo import (CALLED, HloText, Instruction, _blocks, _called, _module_header,
                          entry_name, kernel_module, numpy_dtype, portable)
from xlaprobe.tune.features import OPCODES

#: Top-level instructions that are no kernel: they move no data or only name it.
NOT_KERNELS = frozenset({"parameter", "constant", "tuple", "get-tuple-element", "bitcast",
                         "after-all", "partition-id", "replica-id"})
#: Bytes per element of HLO element types (``pred`` is a byte).
_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4,
          "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16}
_ARRAY = re.compile(r"\b([a-z]+[0-9]*)\[([0-9,]*)\](\{[0-9,]*\})?")
_TRANSCENDENTAL = frozenset({"exponential", "log", "tanh", "logistic", "rsqrt", "sqrt", "power",
                             "sine", "cosine", "exponential-minus-one", "log-plus-one", "erf",
                             "atan2", "cbrt", "tan"})


@dataclasses.dataclass(frozen=True)
class Kernel:
    """One kernel of an optimized module.

    Attributes:
        name: the top-level instruction's name (``fusion.3``, ``dot.1``).
        opcode: its opcode.
        kind: the fusion kind (``kLoop``, ``kInput``, ``kOutput``, ``kCustom``) or the opcode.
        module: an HLO module computing it alone (parameters in the order of `params`); "" until
            `with_module` cuts it.
        params: the entry parameters' shapes (``f32[8,128]{1,0}``), in order.
        features: `kernel_features` of it.
    """

    name: str
    opcode: str
    kind: str
    module: str
    params: tuple[str, ...]
    features: dict[str, float]

    @property
    def key(self) -> str:
        """A content hash of the features (kernels of a program with equal features are timed
        once: the model cannot tell them apart anyway)."""
        return hashlib.sha256(repr(sorted(self.features.items())).encode()).hexdigest()[:20]


def _arrays(shape: str) -> list[tuple[str, tuple[int, ...], bool]]:
    """(element type, dims, row-major?) of each array in a shape text (tuples flattened)."""
    out = []
    for element, dims, layout in _ARRAY.findall(shape):
        if element not in _BYTES:
            continue
        d = tuple(int(x) for x in dims.split(",") if x)
        order = [int(x) for x in layout.strip("{}").split(",") if x] if layout else []
        out.append((element, d, order == sorted(order, reverse=True)))
    return out


def shape_bytes(shape: str) -> int:
    """Bytes of every array in a shape text (``(f32[2,3], s32[])`` -> 28)."""
    return sum(_BYTES[e] * math.prod(d) for e, d, _ in _arrays(shape))


def _flops(instruction: Instruction, shapes: dict[str, str]) -> float:
    """Multiply-adds x 2 of a dot or convolution from its operand and result shapes; the
    result's elements for elementwise work (a rough count; trees learn its scale)."""
    out = math.prod(instruction.dims) if instruction.dims else 1
    if instruction.opcode == "dot":
        lhs = _arrays(shapes.get(instruction.operands[0], "")) if instruction.operands else []
        dims = [int(x) for x in re.findall(r"\d+", instruction.attribute("lhs_contracting_dims"))]
        contracted = math.prod(lhs[0][1][i] for i in dims if lhs and i < len(lhs[0][1])) \
            if lhs else 1
        return 2.0 * out * contracted
    if instruction.opcode == "convolution" and len(instruction.operands) > 1:
        rhs = _arrays(shapes.get(instruction.operands[1], ""))
        features = instruction.dims[-1] if instruction.dims else 1
        return 2.0 * out * (math.prod(rhs[0][1]) / max(features, 1) if rhs else 1)
    return float(out)


@dataclasses.dataclass(frozen=True)
class Parsed:
    """An optimized module parsed once: its lines, instructions, computation blocks and each
    computation's shapes by instruction name."""

    lines: list[str]
    instructions: list[Instruction]
    blocks: dict[str, tuple[int, int]]
    shapes: dict[str, dict[str, str]]

    @classmethod
    def of(cls, text: str) -> Parsed:
        """Parse module `text`."""
        hlo = HloText(text)
        instructions = list(hlo.instructions())
        shapes: dict[str, dict[str, str]] = collections.defaultdict(dict)
        for i in instructions:
            shapes[i.computation][i.name] = i.shape
        return cls(hlo.lines, instructions, _blocks(hlo.lines), dict(shapes))


def kernel_features(module: Parsed, root: Instruction) -> dict[str, float]:
    """Features of kernel `root` (a top-level instruction of the optimized module).

    Args:
        module: the optimized module, parsed.
        root: the kernel's top-level instruction.

    Returns:
        ``name -> value``: ``op:<opcode>`` counts of the instructions it computes (log1p),
        ``kind:<fusion kind or opcode>`` 1, ``log_out_elements``, ``log_out_bytes``,
        ``log_in_bytes`` (its operands), ``operands``, ``max_rank``, ``log_flops`` (dots and
        convolutions: 2 x multiply-adds; else elements produced), ``log_dot_flops``,
        ``log_transcendentals``, ``log_intensity`` (flops per byte moved), ``non_row_major``
        (arrays in a layout other than the default among operands and result), ``dtype:<type>``
        1 of the result, ``call:<target>`` for custom calls, library mentions ``lib:<name>``
        and the backend's fusion kind ``backend:<kind>`` (``ynn_fusion``, ...).
    """
    inner_names: list[str] = []
    for _, names in CALLED.findall(root.attributes):
        for name in re.findall(r"%([\w.\-]+)", names):
            if name in module.blocks:
                inner_names += [name] + _called(module.instructions, name, module.blocks)
    wanted = set(inner_names)
    inner = [i for i in module.instructions if i.computation in wanted] or [root]
    ops: collections.Counter[str] = collections.Counter(
        i.opcode if i.opcode in OPCODES else "other" for i in inner)
    features = {f"op:{k}": math.log1p(v) for k, v in ops.items()}
    features[f"kind:{root.attribute('kind') or root.opcode}"] = 1.0
    operand_shapes = [module.shapes[root.computation].get(o, "") for o in root.operands]
    arrays = [a for s in [root.shape, *operand_shapes] for a in _arrays(s)]
    out_elements = sum(math.prod(d) for _, d, _ in _arrays(root.shape))
    flops = dot_flops = transcendentals = 0.0
    for i in inner:
        f = _flops(i, module.shapes.get(i.computation, {}))
        if i.opcode in ("dot", "convolution"):
            dot_flops += f
        elif i.opcode in _TRANSCENDENTAL:
            transcendentals += f
        if i.opcode not in NOT_KERNELS:
            flops += f
    moved = shape_bytes(root.shape) + sum(shape_bytes(s) for s in operand_shapes)
    features.update({
        "log_out_elements": math.log1p(out_elements), "log_out_bytes": math.log1p(
            shape_bytes(root.shape)),
        "log_in_bytes": math.log1p(sum(shape_bytes(s) for s in operand_shapes)),
        "operands": float(len(root.operands)),
        "max_rank": float(max((len(d) for _, d, _ in arrays), default=0)),
        "log_flops": math.log1p(flops), "log_dot_flops": math.log1p(dot_flops),
        "log_transcendentals": math.log1p(transcendentals),
        "log_intensity": math.log1p(flops / max(moved, 1)),
        "non_row_major": float(sum(not r for _, _, r in arrays)),
        "instructions": math.log1p(len(inner)),
        f"dtype:{root.element_type or 'tuple'}": 1.0})
    body = "\n".join(module.lines[i.line] for i in inner) + root.attributes
    for target in re.findall(r'custom_call_target="([^"]+)"', body):
        features[f"call:{target[:40]}"] = 1.0
    for name in set(m.lower() for m in re.findall(r"\b(ynn|xnn|onednn|eigen)", body, re.I)):
        features[f"lib:{name}"] = 1.0
    for name in re.findall(r'"fusion_config":\{"kind":"([^"]+)"', root.attributes):
        features[f"backend:{name.strip('_')}"] = 1.0
    return features


def instruction_module(text: str, root: Instruction) -> tuple[str, tuple[str, ...]]:
    """A module whose entry applies top-level instruction `root` to fresh parameters, one per
    operand (with the computations it calls).

    Returns:
        (HLO module text (`portable`), the parameters' shapes).
    """
    shapes = {i.name: i.shape for i in HloText(text).instructions()
              if i.computation == root.computation}
    hlo = HloText(portable(text))
    instructions = list(hlo.instructions())
    blocks = _blocks(hlo.lines)
    called: list[str] = []
    for _, names in CALLED.findall(root.attributes):
        for name in re.findall(r"%([\w.\-]+)", names):
            if name in blocks and name not in called:
                called += [name] + [c for c in _called(instructions, name, blocks)
                                    if c not in called]
    parts = ["\n".join(hlo.lines[blocks[c][0]:blocks[c][1] + 1])
             for c in sorted(set(called), key=lambda c: blocks[c][0])]
    params = tuple(shapes[o] for o in root.operands)
    lines = [f"  %p{k} = {s} parameter({k})" for k, s in enumerate(params)]
    operands = ", ".join(f"%p{k}" for k in range(len(params)))
    attributes = re.sub(r" stack_frame_id=\d+", "", root.attributes)
    lines.append(f"  ROOT %{root.name} = {root.shape} {root.opcode}({operands})"
                 + (f", {attributes}" if attributes else ""))
    entry = [f"ENTRY %kernel ({', '.join(f'p{k}: {s}' for k, s in enumerate(params))}) -> "
             f"{root.shape} {{", *lines, "}"]
    module = _module_header(hlo.lines, list(params), root.shape) + "\n\n" + \
        "\n\n".join(parts + ["\n".join(entry)]) + "\n"
    return re.sub(r" stack_frame_id=\d+", "", module), params


def kernels(text: str) -> list[Kernel]:
    """Every kernel of optimized module `text`: the entry's instructions not in `NOT_KERNELS`,
    in program order (kernels inside a while loop are the loop's: it is one kernel here)."""
    parsed = Parsed.of(text)
    entry = entry_name(text)
    out = []
    for root in parsed.instructions:
        if root.computation != entry or root.opcode in NOT_KERNELS:
            continue
        out.append(Kernel(root.name, root.opcode, root.attribute("kind") or root.opcode, "", (),
                          kernel_features(parsed, root)))
    return out


def with_module(text: str, kernel: Kernel) -> Kernel:
    """`kernel` of optimized module `text` with its stand-alone module and parameter shapes
    filled in (the cut is costly: only kernels that will be compiled need it).

    Raises:
        KeyError: `kernel` is not a top-level instruction of `text`.
    """
    root = {i.name: i for i in HloText(text).instructions()
            if i.computation == entry_name(text)}[kernel.name]
    if root.opcode == "fusion":
        called = re.findall(r"%([\w.\-]+)", root.attribute("calls"))[0]
        module = kernel_module(text, called)
        params = tuple(i.shape for i in sorted(
            (i for i in HloText(text).instructions()
             if i.computation == called and i.opcode == "parameter"),
            key=lambda i: int(i.operand_text or 0)))
    else:
        module, params = instruction_module(text, root)
    return dataclasses.replace(kernel, module=module, params=params)


def random_args(params: Sequence[str], rng: np.random.Generator) -> list[np.ndarray]:
    """One array per parameter shape: floats standard normal, integers and booleans zero (an
    index or loop bound of zero stays in range).

    Raises:
        KeyError: an element type with no NumPy dtype (``token``, ``s4``).
    """
    out = []
    for shape in params:
        element, dims = re.match(r"^([a-z0-9]+)\[([0-9,]*)\]", shape).groups()
        d = tuple(int(x) for x in dims.split(",") if x)
        dtype = numpy_dtype(element)
        if dtype.kind in "fc":
            out.append(rng.standard_normal(d).astype(dtype))
        else:
            out.append(np.zeros(d, dtype))
    return out
