"""Fused kernels: the optimized HLO of a faulty compile, and which fusions hold a jaxpr equation.

Every ``xla`` compile traces top-level equation k inside ``jax.named_scope(f"eqn{k}")``
(`xlaprobe.configs.xla.scoped_function`), so each HLO instruction's ``op_name`` names its equation
exactly (`xlaprobe.hlo.equation_of`). The optimized HLO comes from a worker: `optimized_hlo` runs
the worker function `compile_to_hlo` (`WorkerPool.call`), which compiles the program as the
configuration does and returns the optimized HLO module text instead of running it. The
configuration is an ``xla`` one (``xla``, ``xla:fastmath[...]``) or a planted-fault compiler
(``mutant:<name>``): the call runs in the configuration's isolation group, so a mutant's pass is
registered only in that mutant's own workers and the text is what the faulty compiler produced.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
from xlaprobe import jaxcompat
from xlaprobe.configs import mutants, spmd
from xlaprobe.configs.xla import compile_program

from xlaprobe.configs.registry import Configuration
from xlaprobe.errors import InvalidArgument
from xlaprobe.workers import WorkerPool
from xlaprobe.hlo import (HloText, Instruction, callers_by_computation, entry_name, equation_of,
                          operand_closure)

#: Opcodes that only move or reinterpret data; an equation's kernel is named by its other ones.
_PLUMBING = frozenset({"parameter", "constant", "broadcast", "bitcast", "reshape", "copy", "tuple",
                       "get-tuple-element", "convert", "slice", "transpose", "iota",
                       "copy-start", "copy-done"})


def hlo_config(config: Configuration | str) -> Configuration:
    """`config`, checked to be a compile whose optimized HLO `optimized_hlo` can return.

    >>> str(hlo_config("xla:fastmath"))
    'xla:fastmath'
    >>> hlo_config("mutant:swap-subtract-fused").isolation_group
    'mutant:swap-subtract-fused'

    Raises:
        InvalidArgument: `config` is not an ``xla`` or ``mutant`` configuration (no HLO to show).
    """
    config = Configuration.parse(config) if isinstance(config, str) else config
    if config.kind == "jaxlib":
        raise InvalidArgument(f"configuration '{config}' compiles in another release's "
                              "environment; fused kernels are named only for this jaxlib's xla "
                              "and mutant configurations (localize on a machine with that release "
                              "installed)")
    if config.kind not in ("xla", "mutant", "spmd"):
        raise InvalidArgument(f"configuration '{config}' does not compile with XLA as one module; "
                              "fused kernels are named only for xla, mutant and spmd "
                              "configurations")
    return config


def compile_to_hlo(closed_jaxpr: Any, inputs: Sequence[np.ndarray], *, config: str) -> str:
    """Worker function (`WorkerPool.call`): the optimized HLO module text of the program compiled
    as configuration `config` (``xla...``, ``mutant:<name>`` or ``spmd[...]``: one device's
    partitioned module) compiles it.

    A mutant's pass is registered in this worker process (`mutants.MutantKind.compile`): call it
    only in the mutant's isolation group, whose workers run that mutant alone.

    Raises:
        Exception: whatever XLA raises (a COMPILE_ERROR outcome of the call).
    """
    parsed = Configuration.parse(config)
    if parsed.kind == "mutant":
        return mutants.KIND.compile(parsed, closed_jaxpr, inputs).as_text()
    if parsed.kind == "spmd":  # the per-device module, the planted fault's pass registered
        return spmd.planted_hlo(parsed, closed_jaxpr, inputs)
    return compile_program(parsed, closed_jaxpr, inputs).as_text()


def optimized_hlo(pool: Any, program: Any, config: Configuration | str, *,
                  timeout_s: float | None = None) -> Any:
    """Compile `program` as `config` does in a worker of its isolation group (one cycle) and
    return the optimized HLO module text.

    Args:
        pool: a `xlaprobe.workers.WorkerPool`.
        program: the `xlaprobe.program.Program`.
        config: an ``xla`` or ``mutant`` configuration.
        timeout_s: limit (s); None: the pool's.

    Returns:
        The call's `xlaprobe.outcome.Outcome`: RAN with ``value`` the text, else COMPILE_ERROR,
        CRASH or TIMEOUT (no text).

    Raises:
        InvalidArgument: `config` is not an ``xla`` or ``mutant`` configuration (`hlo_config`).
    """
    config = hlo_config(config)
    return pool.call(program, f"{__name__}:compile_to_hlo", {"config": str(config)},
                     group=config.isolation_group, timeout_s=timeout_s)


def make_pool(size: int = 1, timeout_s: float = 600.0) -> Any:
    """A `WorkerPool` for localization and reduction (its workers need no preloaded module)."""
    return WorkerPool(size=size, timeout_s=timeout_s)


@dataclasses.dataclass(frozen=True, slots=True)
class Kernels:
    """Where one jaxpr equation's HLO instructions ended up in an optimized module.

    Attributes:
        equation: the top-level equation index (in the compiled program's numbering).
        instructions: names of the instructions whose ``op_name`` names the equation.
        fusions: the kernels holding its computing instructions (those that do not only move
            data), in module order: the outermost fusion around each, or the instruction itself
            where it is not fused; only where the equation just moves data, the kernels of those.
    """

    equation: int
    instructions: tuple[str, ...]
    fusions: tuple[str, ...]


#: Collective opcodes (and their async starts) a partitioned module's devices meet at.
COLLECTIVES = frozenset({"all-reduce", "all-reduce-start", "all-gather", "all-gather-start",
                         "reduce-scatter", "all-to-all", "collective-permute",
                         "collective-permute-start", "collective-broadcast"})


_NOT_SIGNATURE = re.compile(r"(metadata=\{[^}]*\}|channel_id=\d+|backend_config=\S+)")


def equation_collectives(text: str, equation: int) -> tuple[str, ...]:
    """The collective instructions (`COLLECTIVES`) whose ``op_name`` names top-level equation
    `equation` in an optimized (partitioned, per-device) HLO module, in module order: what the
    partitioner inserted for that equation."""
    return tuple(i.name for i in _collectives(text, equation))


def _collectives(text: str, equation: int) -> list[Instruction]:
    return [i for i in HloText(text).instructions()
            if i.opcode in COLLECTIVES and equation_of(i.op_name) == equation]


def _signature(instruction: Instruction) -> tuple[str, str, str]:
    """What a collective does, without its name, channel and metadata: (opcode, result shape,
    attributes such as replica groups, source-target pairs and dimensions)."""
    attributes = _NOT_SIGNATURE.sub("", instruction.attributes)
    return instruction.opcode, instruction.shape, re.sub(r"[ ,]+", " ", attributes).strip()


def differing_collectives(faulty: str, trusted: str,
                          equation: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Equation `equation`'s collectives that differ between the per-device modules of a faulty
    and a trusted compile of the same program (e.g. a planted fault's and the unplanted one's).

    Collectives are matched by what they do (`_signature`: opcode, shape, replica groups or
    source-target pairs, dimensions), as multisets: a faulty collective with no trusted match
    is *extra* (changed, or applied once more: of equal ones the latest in module order, which
    reads the others, is extra), a trusted one with no faulty match, and no extra one of its
    opcode standing in for it, is *missing*.

    Returns:
        (the faulty module's extra collective names, the trusted module's missing ones), each in
        module order.
    """
    def unmatched(mine: list[Instruction], other: list[Instruction]) -> list[str]:
        left = [_signature(i) for i in other]
        extra = []
        for instruction in mine:  # equal ones: the earliest are matched, the latest left over
            sig = _signature(instruction)
            if sig in left:
                left.remove(sig)
            else:
                extra.append(instruction.name)
        return extra

    ours, theirs = _collectives(faulty, equation), _collectives(trusted, equation)
    extra, missing = unmatched(ours, theirs), unmatched(theirs, ours)
    # A collective changed in place (other pairs, other groups) is extra and missing at once:
    # only a trusted one no faulty one of its opcode replaces was dropped.
    opcodes = {i.name: i.opcode for i in ours + theirs}
    for name in extra:
        twin = next((m for m in missing if opcodes[m] == opcodes[name]), None)
        if twin is not None:
            missing.remove(twin)
    return tuple(extra), tuple(missing)


#: Callers whose called computations are separate kernels (loops, branches, calls).
_BOUNDARY = frozenset({"while", "conditional", "call", "async-start", "custom-call"})


def _kernel_of(instruction: Instruction, callers: dict[str, Instruction]) -> str:
    """The outermost fusion holding `instruction`, else the instruction (or the reduce, scatter
    or sort whose region it is) at the nearest loop, branch or module level."""
    current, fusion, seen = instruction, "", set()
    while current.computation in callers and current.computation not in seen:
        seen.add(current.computation)
        caller = callers[current.computation]
        if caller.opcode in _BOUNDARY:
            break
        if caller.opcode == "fusion":
            fusion = caller.name
        current = caller
    return fusion or current.name


def equation_kernels(text: str, equations: Sequence[int]) -> dict[int, Kernels]:
    """The kernels of each of `equations` in an optimized HLO module.

    Args:
        text: optimized HLO module text of a program compiled with per-equation named scopes.
        equations: top-level equation indices of that program.

    Returns:
        equation -> `Kernels` (equations with no instruction, e.g. folded away, have empty tuples).
    """
    instructions = list(HloText(text).instructions())
    callers = callers_by_computation(instructions)
    wanted = set(equations)
    found: dict[int, list[Instruction]] = {k: [] for k in equations}
    for instruction in instructions:
        if instruction.opcode in ("parameter", "fusion"):
            continue
        k = equation_of(instruction.op_name)
        if k in wanted:
            found[k].append(instruction)
    result = {}
    for k, members in found.items():
        main = [i for i in members if i.opcode not in _PLUMBING and i.opcode not in _BOUNDARY]
        kernels: list[str] = []
        for instruction in main or members:
            kernel = _kernel_of(instruction, callers)
            if kernel not in kernels:
                kernels.append(kernel)
        result[k] = Kernels(k, tuple(i.name for i in members), tuple(kernels))
    return result


#: How many consumer (or producer) hops to follow from an equation XLA folded away.
FOLD_DEPTH = 3


def _defined(eqn: Any) -> set[Any]:
    return {v for v in eqn.outvars if isinstance(v, jaxcompat.Var) and not isinstance(v, jaxcompat.DropVar)}


def _read(eqn: Any) -> set[Any]:
    return {a for a in eqn.invars if isinstance(a, jaxcompat.Var)}


def consumers(jaxpr: Any, equation: int) -> list[int]:
    """Top-level equations of `jaxpr` that read an output of `equation`."""
    outs = _defined(jaxpr.eqns[equation])
    return [k for k in range(equation + 1, len(jaxpr.eqns))
            if outs & _read(jaxpr.eqns[k])]


def producers(jaxpr: Any, equation: int) -> list[int]:
    """Top-level equations of `jaxpr` whose outputs `equation` reads, nearest first."""
    reads = _read(jaxpr.eqns[equation])
    return [k for k in range(equation - 1, -1, -1) if _defined(jaxpr.eqns[k]) & reads]


def kernels_in(text: str, jaxpr: Any, equation: int) -> tuple[Kernels, str]:
    """The kernels of `equation` in the optimized HLO `text` of a program whose jaxpr is `jaxpr`.

    An equation XLA folded away (a transpose into a dot, two transposes into one, a comparison
    into a constant) has no instruction of its own: then the kernels of its consumers stand in
    (breadth first, up to `FOLD_DEPTH` hops), else those of its producers (a comparison folded to
    a constant leaves its operand's kernel computing the output), with a note saying so.

    Returns:
        (the `Kernels`, a note or "").
    """
    own = equation_kernels(text, [equation])[equation]
    if own.instructions:
        return own, ""
    for neighbours, which in ((consumers, "consumers"), (producers, "producers")):
        frontier, seen = [equation], {equation}
        for _ in range(FOLD_DEPTH):
            frontier = [k for e in frontier for k in neighbours(jaxpr, e) if k not in seen]
            seen.update(frontier)
            if not frontier:
                break
            found = equation_kernels(text, frontier)
            merged: list[str] = []
            for k in frontier:
                merged += [f for f in found[k].fusions if f not in merged]
            if merged:
                return Kernels(equation, (), tuple(merged)), (
                    f"equation {equation} has no HLO instruction of its own (XLA folded it away): "
                    f"the kernels of its {which} {frontier[:5]} are listed")
    return own, f"equation {equation} and its neighbours have no HLO instruction"


def kernel_equations(text: str, kernels: Sequence[str]) -> set[int]:
    """The top-level equations with an instruction inside any of `kernels` (names as
    `equation_kernels` gives them) in the optimized HLO `text`."""
    instructions = list(HloText(text).instructions())
    callers = callers_by_computation(instructions)
    wanted = set(kernels)
    found = set()
    for instruction in instructions:
        k = equation_of(instruction.op_name)
        if k >= 0 and instruction.opcode not in ("parameter", "fusion") \
                and _kernel_of(instruction, callers) in wanted:
            found.add(k)
    return found


def feeding(text: str, outputs: Sequence[int]) -> set[str]:
    """The entry instructions of an optimized module that the flat program `outputs` (indices
    into the entry ROOT tuple, or the ROOT itself for a single output) depend on, and the
    instructions in the bodies of the while loops among them."""
    instructions = list(HloText(text).instructions())
    root = next((i for i in reversed(instructions) if i.root and i.computation == entry_name(text)),
                None)
    if root is None:
        return set()
    by_name = {i.name: i for i in instructions if i.computation == root.computation}
    if root.opcode == "tuple":
        stack = [root.operands[k] for k in outputs if 0 <= k < len(root.operands)]
    else:
        stack = [root.name]
    seen = operand_closure(by_name, stack)
    bodies = {by_name[n].attribute("body").lstrip("%") for n in seen if by_name[n].opcode == "while"}
    return seen | {i.name for i in instructions if i.computation in bodies}
