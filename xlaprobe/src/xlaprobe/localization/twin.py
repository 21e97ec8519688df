"""The twin of a failing fused kernel in a trusted compile, instruction by instruction.

Inside a fused kernel, only the instructions that compute a whole jaxpr equation's value have a
float64 reference value (tier 4's *anchors*, `xlaprobe.localization.inside`); the steps of an
equation's lowering between them (the subtract of a softmax's shift, the divide of a mean, a
select of a masked max) have none, so a fault in one of them can only be narrowed to the anchor
they compute. The trusted configuration (`xlaprobe.localization.bisect.baseline_spec`: plain ``xla``
for a planted-fault compiler or an ``xla`` configuration with options) compiles the same program;
its kernel that holds the same instructions is the *twin*. Fed the values it reads, the twin
computes a right value for every instruction it shares with the failing kernel, and those values
let tier 4's suffix search replace any instruction, not only anchors, by its right value: the
instruction named is the one that turns right operands into a wrong result.

Instructions are matched by name where the shape agrees (a pass late in the pipeline leaves the
rest of the module's names alone), else by (equation, opcode, shape) in order of occurrence.

Source: the differential idea of XLA's ``hlo_bisect`` (a test and a reference run of the same
module, compared), applied per instruction.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from xlaprobe.hlo import Instruction, equation_of

#: Opcodes that hold no computed value of their own (never matched, never replaced).
UNVALUED = frozenset({"parameter", "constant", "tuple", "get-tuple-element", "after-all"})
#: Relative agreement bound of two honest compiles of the same values, per element type, taken
#: against the leaf's largest magnitude: reassociation and contraction move a value by a few
#: ULPs of the leaf's scale, a miscompile by a sizable share of it.
AGREEMENT = {"f16": 1e-2, "bf16": 2e-2, "f32": 1e-4, "f64": 1e-9}


@dataclasses.dataclass(frozen=True, slots=True)
class TwinMatch:
    """The failing kernel's twin in the trusted compile.

    Attributes:
        fusion: the trusted module's fusion instruction.
        computation: its fused computation.
        names: failing-kernel instruction name -> trusted instruction name.
    """

    fusion: str
    computation: str
    names: dict[str, str]


def valued(instruction: Instruction) -> bool:
    """True for an array-shaped instruction that computes a value (not a parameter, constant
    or tuple)."""
    return instruction.opcode not in UNVALUED and not instruction.shape.startswith("(") \
        and bool(instruction.element_type)


def _key(instruction: Instruction) -> tuple[int, str, str, tuple[int, ...]]:
    return (equation_of(instruction.op_name), instruction.opcode, instruction.element_type,
            instruction.dims)


def match_computation(faulty: Sequence[Instruction], trusted: Sequence[Instruction]
                      ) -> dict[str, str]:
    """Pair the valued instructions of two computations.

    Args:
        faulty: the failing kernel's instructions, in computation order.
        trusted: one computation of the trusted module, in computation order.

    Returns:
        faulty name -> trusted name: first the same name with the same element type and dims
        (the opcode may differ: a planted or real fault can change it), then the same
        (equation, opcode, element type, dims) in order of occurrence among the rest.
    """
    candidates = [t for t in trusted if valued(t)]
    by_name = {t.name: t for t in candidates}
    pairs: dict[str, str] = {}
    used: set[str] = set()
    for instruction in faulty:
        twin = by_name.get(instruction.name)
        if valued(instruction) and twin is not None and \
                (twin.element_type, twin.dims) == (instruction.element_type, instruction.dims):
            pairs[instruction.name] = twin.name
            used.add(twin.name)
    queues: dict[tuple, list[str]] = {}
    for twin in candidates:
        if twin.name not in used and _key(twin)[0] >= 0:
            queues.setdefault(_key(twin), []).append(twin.name)
    for instruction in faulty:
        if valued(instruction) and instruction.name not in pairs and queues.get(_key(instruction)):
            pairs[instruction.name] = queues[_key(instruction)].pop(0)
    return pairs


def find_twin(faulty: Sequence[Instruction], computation: str, kernel: str,
              trusted: Sequence[Instruction]) -> TwinMatch | None:
    """The trusted module's fusion whose computation shares the most valued instructions with
    the failing kernel's fused `computation`: by name first, then by (equation, opcode,
    shape), then a fusion of the same name.

    Args:
        faulty: every instruction of the failing module.
        computation: the failing kernel's fused computation.
        kernel: the failing kernel's fusion instruction name.
        trusted: every instruction of the trusted module.

    Returns:
        The `TwinMatch`, or None when no trusted fusion shares an instruction.
    """
    members = [i for i in faulty if i.computation == computation]
    grouped: dict[str, list[Instruction]] = {}
    for instruction in trusted:
        grouped.setdefault(instruction.computation, []).append(instruction)
    fusions = {}
    for instruction in trusted:
        if instruction.opcode == "fusion":
            called = instruction.attribute("calls").lstrip("%")
            if called in grouped:
                fusions[called] = instruction.name
    wanted = {_key(i) for i in members if valued(i)} | {i.name for i in members}
    best, best_score = None, (0, 0, False)
    for called, fusion in fusions.items():
        body = grouped[called]
        if not any(_key(t) in wanted or t.name in wanted for t in body):
            continue
        names = match_computation(members, body)
        # Same names first: kernels of many parameters' updates share equations and shapes.
        score = (sum(m == t for m, t in names.items()), len(names), fusion == kernel)
        if names and score > best_score:
            best, best_score = TwinMatch(fusion, called, names), score
    return best


def agrees(actual: np.ndarray, trusted: np.ndarray, element_type: str) -> bool:
    """Whether a value of the failing kernel agrees with the trusted twin's.

    Floating point: every element within ``AGREEMENT[element_type]`` times the trusted leaf's
    largest finite magnitude (plus the smallest normal), with NaN and infinities in the same
    places; anything else: exactly equal.

    >>> agrees(np.float32([1, 2]), np.float32([1, 2.00001]), "f32")
    True
    >>> agrees(np.float32([1, -2]), np.float32([1, 2]), "f32")
    False
    >>> agrees(np.int32([3]), np.int32([4]), "s32")
    False
    """
    actual, trusted = np.asarray(actual), np.asarray(trusted)
    if actual.shape != trusted.shape:
        return False
    if element_type not in AGREEMENT:
        return bool(np.array_equal(actual, trusted))
    a, t = actual.astype(np.float64), trusted.astype(np.float64)
    if not np.array_equal(np.isnan(a), np.isnan(t)):
        return False
    finite = np.isfinite(t)
    if not np.array_equal(a[~finite & ~np.isnan(t)], t[~finite & ~np.isnan(t)]) or \
            not np.all(np.isfinite(a[finite])):
        return False
    if not finite.any():
        return True
    scale = float(np.max(np.abs(t[finite])))
    bound = AGREEMENT[element_type] * scale + float(np.finfo(np.float32).tiny)
    return bool(np.all(np.abs(a[finite] - t[finite]) <= bound))
