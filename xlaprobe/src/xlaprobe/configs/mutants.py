"""Mutant compilers: XLA with one planted, realistic miscompilation (``mutant:<name>``).

Each mutant is a Python HLO pass, registered with
`jax.extend.xla.register_hlo_module_transformation`, that rewrites the module text at one stage of
the pipeline so that one defect appears, and only where its pattern occurs (as real compiler bugs
fire only on some programs). Every change is recorded as a `MutationSite` (the HLO instruction, its
opcode, computation and fusion, and the jaxpr equation it came from): the ground truth against
which detection and localization are measured.

Registration is process-global and cannot be undone cleanly, so a mutant only ever runs in a worker
process of its own (its isolation group is ``mutant:<name>``); the parent never registers a pass.

The catalogue (`MUTANTS`) lists, per mutant, the class of real defect it models. Two are special:
``constant-few-ulps`` moves a constant by 2 ULPs, a change *below* tolerance that the checker must
not flag; ``crash-on-sort`` aborts the compiler, to exercise crash isolation.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Sequence
from typing import Any
import difflib

import numpy as np

from xlaprobe.configs.registry import Configuration
from xlaprobe.errors import InvalidArgument
from xlaprobe.hlo import HloText, Instruction, equation_of, int_range
from xlaprobe.outcome import MutationSite

PRE, POST = "PRE_SCHEDULER", "POST_SCHEDULER"

#: A pass body: edits the module in place and returns (changed instruction, change description),
#: or None when its pattern does not occur.
Rewrite = Callable[[HloText], tuple[Instruction, str] | None]


@dataclasses.dataclass(frozen=True, slots=True)
class Mutant:
    """One planted defect.

    Attributes:
        name: registry key (``mutant:<name>``).
        description: one line: what it does and the real defect class it models.
        stage: ``PRE_SCHEDULER`` or ``POST_SCHEDULER``.
        rewrite: the pass body (see `Rewrite`).
        below_tolerance: True for a fault the checker must NOT flag.
        crashes: True for the mutant that aborts the compiler.
    """

    name: str
    description: str
    stage: str
    rewrite: Rewrite
    below_tolerance: bool = False
    crashes: bool = False


def _first(hlo: HloText, predicate: Callable[[Instruction], bool]) -> Instruction | None:
    return next((i for i in hlo.instructions() if predicate(i)), None)


def _fused(hlo: HloText, instruction: Instruction) -> bool:
    return bool(hlo.fusion_of(instruction.computation))


def _swap_operands_in_fusion(opcode: str) -> Rewrite:
    def rewrite(hlo: HloText) -> tuple[Instruction, str] | None:
        target = _first(hlo, lambda i: i.opcode == opcode and len(i.operands) == 2
                        and i.operands[0] != i.operands[1] and _fused(hlo, i))
        if target is None:
            return None
        hlo.replace(target, operands=(target.operands[1], target.operands[0]))
        return target, f"swapped the operands of {opcode}"
    return rewrite


def _dynamic_slice_off_by_one(hlo: HloText) -> tuple[Instruction, str] | None:
    names = hlo.by_name()
    target = _first(hlo, lambda i: i.opcode == "dynamic-slice" and any(
        names[o].opcode != "constant" for o in i.operands[1:] if o in names))
    if target is None:
        return None
    k, start = next((k, o) for k, o in enumerate(target.operands[1:], 1)
                    if names[o].opcode != "constant")
    index_type = names[start].shape.split("[")[0]
    one, bumped = hlo.fresh_name("mutant_one"), hlo.fresh_name("mutant_start")
    hlo.insert_before(target, [f"%{one} = {index_type}[] constant(1)",
                               f"%{bumped} = {index_type}[] add(%{start}, %{one})"])
    target = hlo.by_name()[target.name]
    operands = list(target.operands)
    operands[k] = bumped
    hlo.replace(target, operands=tuple(operands))
    return target, f"start index {k - 1} read one past its value (clamping still applies)"


def _scatter_drop_last(hlo: HloText) -> tuple[Instruction, str] | None:
    names = hlo.by_name()

    def candidate(i: Instruction) -> bool:
        if i.opcode != "scatter" or len(i.operands) != 3:
            return False
        indices = names.get(i.operands[1])
        return indices is not None and len(indices.dims) >= 1 and indices.dims[0] > 1
    target = _first(hlo, candidate)
    if target is None:
        return None
    indices = names[target.operands[1]]
    element, dims = indices.element_type, indices.dims
    bounds = int_range(element)
    if bounds is None:
        return None
    big = bounds[1]
    row_shape = f"{element}[{','.join(['1'] + [str(d) for d in dims[1:]])}]"
    value, row, last, zero, new = (hlo.fresh_name(f"mutant_{n}") for n in
                                   ("oob", "row", "last", "zero", "indices"))
    # An out-of-bounds index makes XLA skip that update, exactly as a dropped update would.
    starts = ", ".join([f"%{last}"] + [f"%{zero}"] * (len(dims) - 1))
    lines = [f"%{value} = {element}[] constant({big})",
             f"%{row} = {row_shape} broadcast(%{value}), dimensions={{}}",
             f"%{last} = s32[] constant({dims[0] - 1})",
             f"%{zero} = s32[] constant(0)",
             f"%{new} = {indices.shape} dynamic-update-slice(%{indices.name}, %{row}, {starts})"]
    hlo.insert_before(target, lines)
    target = hlo.by_name()[target.name]
    hlo.replace(target, operands=(target.operands[0], new, target.operands[2]))
    return target, "the last scatter update is dropped"


def _reduce_wrong_init(hlo: HloText) -> tuple[Instruction, str] | None:
    names = hlo.by_name()

    def candidate(i: Instruction) -> bool:
        if i.opcode != "reduce" or len(i.operands) != 2:
            return False
        init = names.get(i.operands[1])
        region = i.attribute("to_apply").lstrip("%")
        roots = [r for r in hlo.instructions() if r.computation == region and r.root]
        # Edit the init constant in place, so only when this reduce is its one user.
        return (init is not None and init.opcode == "constant" and init.operand_text in ("0", "-0")
                and init.element_type.startswith("f") and bool(roots) and roots[0].opcode == "add"
                and len(hlo.users(init.name)) == 1)
    target = _first(hlo, candidate)
    if target is None:
        return None
    hlo.replace(names[target.operands[1]], operand_text="1")
    return target, "sum reduction started from 1 instead of 0"


_FLIP = {"LT": "LE", "LE": "LT", "GT": "GE", "GE": "GT"}


def _compare_flip_feeding_select(hlo: HloText) -> tuple[Instruction, str] | None:
    names = hlo.by_name()
    selects = [i for i in hlo.instructions() if i.opcode == "select"]
    feeding = {s.operands[0] for s in selects if s.operands}
    # Not in sort comparators: there LT vs LE only reorders equal keys, which no output can show
    # for a single-operand sort (an equivalent mutant).
    comparators = {i.attribute("to_apply").lstrip("%") for i in hlo.instructions()
                   if i.opcode == "sort"}
    feeding -= {i.name for i in hlo.instructions() if i.computation in comparators}
    # Integer comparisons (masks, bounds): where off-by-one simplifications bite, and where ties,
    # the only inputs LT and LE disagree on, actually occur.
    target = _first(hlo, lambda i: i.opcode == "compare" and i.name in feeding
                    and i.attribute("direction") in _FLIP and i.operands
                    and names.get(i.operands[0]) is not None
                    and names[i.operands[0]].element_type[:1] in ("s", "u"))
    if target is None:
        return None
    direction = target.attribute("direction")
    attributes = re.sub(r"direction=\w+", f"direction={_FLIP[direction]}", target.attributes)
    hlo.replace(target, attributes=attributes)
    return target, f"comparison {direction} became {_FLIP[direction]} (feeds a select)"


_NEIGHBOUR = {"exponential": "exponential-minus-one", "log": "log-plus-one", "tanh": "logistic"}


def _fused_transcendental_neighbour(hlo: HloText) -> tuple[Instruction, str] | None:
    target = _first(hlo, lambda i: i.opcode in _NEIGHBOUR and _fused(hlo, i))
    if target is None:
        return None
    hlo.replace(target, opcode=_NEIGHBOUR[target.opcode])
    return target, f"{target.opcode} replaced by {_NEIGHBOUR[target.opcode]} in fused code"


def _transpose_as_reshape(hlo: HloText) -> tuple[Instruction, str] | None:
    names = hlo.by_name()

    def candidate(i: Instruction) -> bool:
        operand = names.get(i.operands[0]) if i.operands else None
        return (i.opcode == "transpose" and operand is not None
                and sum(d > 1 for d in operand.dims) >= 2)
    target = _first(hlo, candidate)
    if target is None:
        return None
    hlo.replace(target, opcode="reshape", attributes=re.sub(r"dimensions=\{[^}]*\},?\s*", "",
                                                           target.attributes).strip(", "))
    return target, "transpose lowered as a reshape (element order kept: a layout bug)"


def _while_one_more_trip(hlo: HloText) -> tuple[Instruction, str] | None:
    for loop in (i for i in hlo.instructions() if i.opcode == "while"):
        root = _first(hlo, lambda i, c=loop.attribute("condition").lstrip("%"):
                      i.computation == c and i.root)
        while root is not None and root.opcode == "fusion":  # a wrapped compare
            root = _first(hlo, lambda i, c=root.attribute("calls").lstrip("%"):
                          i.computation == c and i.root)
        if root is None or root.opcode != "compare" or root.attribute("direction") != "LT":
            continue
        hlo.replace(root, attributes=root.attributes.replace("direction=LT", "direction=LE"))
        # XLA:CPU trusts the trip count it recorded; the defect is in the analysis, so move both.
        loop = hlo.by_name()[loop.name]
        trips = re.search(r'"known_trip_count":\{"n":"(\d+)"\}', loop.attributes)
        if trips:
            hlo.replace(loop, attributes=loop.attributes.replace(
                trips.group(0), f'"known_trip_count":{{"n":"{int(trips.group(1)) + 1}"}}'))
        return root, "loop condition i < n became i <= n (one more trip)"
    return None


#: The narrow integer types a convert saturates to (`int_range` gives their bounds).
_SATURATING = frozenset({"s8", "u8", "s16", "u16"})


def _convert_saturates(hlo: HloText) -> tuple[Instruction, str] | None:
    names = hlo.by_name()

    def candidate(i: Instruction) -> bool:
        source = names.get(i.operands[0]) if i.operands else None
        return (i.opcode == "convert" and i.element_type in _SATURATING and source is not None
                and source.element_type in ("s32", "s64", "u32"))
    target = _first(hlo, candidate)
    if target is None:
        return None
    source = names[target.operands[0]]
    low, high = int_range(target.element_type)
    scalar = source.element_type
    if scalar.startswith("u"):  # an unsigned source cannot hold a negative bound (u32 -> s8)
        low = max(low, 0)
    lo, hi, lo_b, hi_b, clamped = (hlo.fresh_name(f"mutant_{n}") for n in
                                   ("low", "high", "low_b", "high_b", "clamped"))
    dims = "dimensions={}"
    hlo.insert_before(target, [
        f"%{lo} = {scalar}[] constant({low})", f"%{hi} = {scalar}[] constant({high})",
        f"%{lo_b} = {source.shape} broadcast(%{lo}), {dims}",
        f"%{hi_b} = {source.shape} broadcast(%{hi}), {dims}",
        f"%{clamped} = {source.shape} clamp(%{lo_b}, %{source.name}, %{hi_b})"])
    target = hlo.by_name()[target.name]
    hlo.replace(target, operands=(clamped,))
    return target, f"convert to {target.element_type} saturates instead of wrapping"


def _dot_narrow_accumulation(hlo: HloText) -> tuple[Instruction, str] | None:
    names = hlo.by_name()
    dot = _first(hlo, lambda i: i.opcode == "dot" and i.element_type == "f32")
    if dot is None:
        return None
    # Round what feeds the dot to bfloat16; when the dot sits in a (library) fusion, round the
    # fusion's operands, so the fused computation stays one the emitter accepts.
    fusion = hlo.fusion_of(dot.computation)
    target = names[fusion] if fusion else dot
    operands = list(target.operands)
    changed = False
    for k, operand in enumerate(operands):
        source = names.get(operand)
        if source is None or source.element_type != "f32":
            continue
        rounded = hlo.fresh_name("mutant_bf16")
        hlo.insert_before(target, [f"%{rounded} = {source.shape} reduce-precision(%{operand}), "
                                   "exponent_bits=8, mantissa_bits=7"])
        target = hlo.by_name()[target.name]
        operands[k], changed = rounded, True
    if not changed:
        return None
    hlo.replace(target, operands=tuple(operands))
    return hlo.by_name()[dot.name], "dot operands rounded to bfloat16 (narrow accumulation type)"


def _constant_few_ulps(hlo: HloText) -> tuple[Instruction, str] | None:
    def candidate(i: Instruction) -> bool:
        if i.opcode != "constant" or i.shape.split("{")[0] != "f32[]":
            return False
        try:
            value = float(i.operand_text)
        except ValueError:
            return False
        return np.isfinite(value) and value != round(value)
    target = _first(hlo, candidate)
    if target is None:
        return None
    value = np.float32(target.operand_text)
    moved = np.nextafter(np.nextafter(value, np.float32(np.inf)), np.float32(np.inf))
    hlo.replace(target, operand_text=repr(float(moved)))
    return target, f"constant {value!r} moved by 2 ULPs to {moved!r} (below tolerance)"


def _crash_on_sort(hlo: HloText) -> tuple[Instruction, str] | None:
    target = _first(hlo, lambda i: i.opcode == "sort")
    if target is None:
        return None
    os.abort()  # a compiler that dies on this pattern: the worker dies, the check goes on


#: The catalogue, in the order `xlaprobe mutants` lists it.
MUTANTS: dict[str, Mutant] = {m.name: m for m in [
    Mutant("swap-subtract-fused", "operands of a subtract swapped inside a fusion "
           "(operand-order bug in fused code generation)", POST, _swap_operands_in_fusion("subtract")),
    Mutant("swap-divide-fused", "operands of a divide swapped inside a fusion "
           "(operand-order bug in fused code generation)", POST, _swap_operands_in_fusion("divide")),
    Mutant("select-swap-fused", "the two branches of a select swapped inside a fusion "
           "(inverted predicate in fused code)", POST, lambda hlo: _swap_select(hlo)),
    Mutant("dynamic-slice-off-by-one", "a dynamic-slice start index off by one "
           "(off-by-one in index clamping)", PRE, _dynamic_slice_off_by_one),
    Mutant("scatter-drop-last-update", "the last update of a scatter dropped "
           "(bounds check in the wrong index type)", PRE, _scatter_drop_last),
    Mutant("reduce-wrong-init", "a sum reduction started from 1 instead of 0 "
           "(wrong init value after a reduction rewrite)", PRE, _reduce_wrong_init),
    Mutant("compare-flip-select", "an integer comparison feeding a select flipped LT<->LE or "
           "GT<->GE (off-by-one in a comparison simplification)", PRE,
           _compare_flip_feeding_select),
    Mutant("fused-transcendental-neighbour", "exp, log or tanh replaced by expm1, log1p or "
           "logistic only in fused code (wrong intrinsic in the fused emitter)", POST,
           _fused_transcendental_neighbour),
    Mutant("transpose-as-reshape", "a transpose lowered as a reshape (layout bug: a transpose "
           "turned into a bitcast)", PRE, _transpose_as_reshape),
    Mutant("while-one-more-trip", "a while loop runs one trip too many (trip-count analysis "
           "off by one)", PRE, _while_one_more_trip),
    Mutant("convert-saturates", "an integer narrowing convert saturates instead of wrapping",
           PRE, _convert_saturates),
    Mutant("dot-bf16-accumulate", "a float32 dot computed on bfloat16-rounded operands "
           "(a dot lowered in a narrower type)", PRE, _dot_narrow_accumulation),
    Mutant("constant-few-ulps", "a float32 constant moved by 2 ULPs: below tolerance, the "
           "checker must stay quiet", PRE, _constant_few_ulps, below_tolerance=True),
    Mutant("crash-on-sort", "the compiler aborts on modules with a sort (crash isolation)", PRE,
           _crash_on_sort, crashes=True),
]}


def _swap_select(hlo: HloText) -> tuple[Instruction, str] | None:
    target = _first(hlo, lambda i: i.opcode == "select" and len(i.operands) == 3
                    and i.operands[1] != i.operands[2] and _fused(hlo, i))
    if target is None:
        return None
    p, a, b = target.operands
    hlo.replace(target, operands=(p, b, a))
    return target, "select branches swapped"


def apply_mutant(mutant: Mutant, module_text: str) -> tuple[str, MutationSite] | None:
    """Apply one mutant to HLO module text (pure: no XLA, no registration).

    Args:
        mutant: the mutant.
        module_text: an HLO module as ``HloModule.to_string()`` prints it.

    Returns:
        (new module text, the site) when the pattern occurs, else None.
    """
    hlo = HloText(module_text)
    fired = mutant.rewrite(hlo)
    if fired is None:
        return None
    instruction, change = fired
    site = MutationSite(mutant.name, mutant.stage, instruction.name, instruction.opcode,
                        instruction.computation, hlo.fusion_of(instruction.computation),
                        instruction.op_name, equation_of(instruction.op_name), change)
    return str(hlo), site


def get_mutant(name: str) -> Mutant:
    """The mutant called `name`.

    Raises:
        InvalidArgument: unknown name (the message lists the catalogue).
    """
    if name not in MUTANTS:
        close = difflib.get_close_matches(name, list(MUTANTS), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise InvalidArgument(f"unknown mutant '{name}'{hint}; known: {', '.join(MUTANTS)} "
                              "(xlaprobe mutants lists them)")
    return MUTANTS[name]


def install(name: str) -> Mutant:
    """Register mutant `name`'s HLO pass in this process for good: every later XLA:CPU compile in
    the process runs it. A mutant finding's ``repro.py`` calls this so that it shows the fault.

    Raises:
        InvalidArgument: unknown name.
        RuntimeError: another mutant is installed in this process already.
    """
    mutant = get_mutant(name)
    KIND._register(mutant)
    return mutant

class MutantKind:
    """`ConfigKind` ``mutant:<name>``: XLA (default options) with one mutant's pass registered.

    In its worker process the pass is registered on first use and stays for the process's life;
    `fired_sites` reports where it fired for the program of the last `run`.
    """

    name = "mutant"
    description = "XLA with one planted miscompilation (mutant:<name>; xlaprobe mutants lists them)"

    def __init__(self) -> None:
        self._registered: str | None = None
        self._sites: dict[int, tuple[MutationSite, ...]] = {}
        self._current = 0

    def validate(self, config: Configuration) -> None:
        """Raise `InvalidArgument` unless the variant names a mutant and there are no options."""
        if config.variant is None:
            raise InvalidArgument("configuration 'mutant' needs a mutant name: mutant:<name>; "
                                  f"known: {', '.join(MUTANTS)}")
        get_mutant(config.variant)
        if config.options:
            raise InvalidArgument(f"configuration '{config}' takes no options")

    def isolation_group(self, config: Configuration) -> str:
        """Each mutant runs alone in its own workers: its pass is process-global."""
        return f"mutant:{config.variant}"

    def _register(self, mutant: Mutant) -> None:
        if self._registered == mutant.name:
            return
        if self._registered is not None:  # a worker serves one isolation group only
            raise RuntimeError(f"this process already runs mutant '{self._registered}'")
        import jax.extend.xla as jex  # jax: `xlaprobe mutants` lists the mutants without it

        from xlaprobe import jaxcompat  # imports jax: as above

        # The default printer elides constants of more than a few elements as "{...}", and the
        # parser reads that back as other values: print them, or every round trip corrupts them.
        options = jaxcompat.hlo_print_options_with_constants()

        def transform(serialized: bytes) -> bytes | None:
            module = jaxcompat.hlo_module_from_proto(serialized)
            applied = apply_mutant(mutant, module.to_string(options))
            if applied is None:
                return None
            text, site = applied
            self._sites[self._current] = (site,)
            return jaxcompat.hlo_module_from_text(text).as_serialized_hlo_module_proto()

        jex.register_hlo_module_transformation(transform, name=f"xlaprobe-mutant-{mutant.name}",
                                               stage=getattr(jex.PipelineStage, mutant.stage),
                                               platforms="cpu")
        self._registered = mutant.name

    def begin(self, program_id: int) -> None:
        """Sites found from now on belong to the program `program_id` (`fired_sites`)."""
        self._current = program_id

    def compile(self, config: Configuration, jaxpr: Any, inputs: Sequence[np.ndarray]) -> Any:
        """Compile with the mutant's pass, registered in this process on first use; never call in
        a process that runs anything else (see `isolation_group`).

        Returns:
            The compiled executable (`xlaprobe.configs.xla.compile_program`): ``.as_text()`` is
            the optimized HLO the faulty compiler produced; call it on `inputs`.
        """
        from xlaprobe.configs.xla import compile_program  # imports jax: as above
        self._register(get_mutant(config.variant or ""))
        # jax caches executables per program: sites are kept per program, not per compile.
        self._current = id(jaxpr)
        return compile_program(Configuration("xla"), jaxpr, inputs)

    def run(self, config: Configuration, jaxpr: Any, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Compile with the mutant's pass and run; never call in a process that runs anything else."""
        compiled = self.compile(config, jaxpr, inputs)
        return [np.asarray(x) for x in compiled(*inputs)]

    def fired_sites(self) -> tuple[MutationSite, ...]:
        """Where the pass fired for the program of the last `run` (empty: pattern absent)."""
        return self._sites.get(self._current, ())


KIND = MutantKind()
