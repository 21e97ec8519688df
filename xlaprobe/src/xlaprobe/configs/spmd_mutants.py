"""Planted partitioning faults: HLO rewrites of the SPMD-partitioned module (``spmd[...,mutant=NAME]``).

Each mutant is a `xlaprobe.configs.mutants.Mutant` whose pass runs at ``PRE_SCHEDULER``, where
XLA:CPU's module is already partitioned (one program per device, with the collectives the
partitioner inserted, each carrying the ``op_name`` of the jaxpr equation it came from). It is
registered the way `xlaprobe.configs.mutants` registers its own, in an ``spmd`` worker of its own
(`xlaprobe.configs.spmd.SpmdKind.isolation_group`), and records the same `MutationSite` ground truth.

The faults model the defect classes of collectives and buffer aliasing:

* ``all-reduce-dropped``: an all-reduce becomes a copy (each device keeps its partial sum);
* ``all-reduce-twice``: an all-reduce is applied to its own result again (sums counted N times);
* ``all-gather-shard-order``: an all-gather's shards come back in reversed order;
* ``halo-off-by-one``: a collective-permute (halo exchange, ppermute, resharding) sends every
  buffer to the next target of its pairs (one device off);
* ``donated-read-after-write``: a read of a donated input reads the output that overwrites its
  buffer instead (a buffer-aliasing schedule that writes before the last read).
"""

from __future__ import annotations

import re

from xlaprobe.configs.mutants import PRE, Mutant, MutantKind, Rewrite, apply_mutant
from xlaprobe.configs.mutants import KIND as MUTANT_KIND
from xlaprobe.errors import InvalidArgument
from xlaprobe.hlo import HloText, Instruction, entry_name, operand_closure
from xlaprobe.outcome import MutationSite

_METADATA = re.compile(r"metadata=\{[^}]*\}")
_CHANNEL = re.compile(r"channel_id=(\d+)")
_PAIRS = re.compile(r"source_target_pairs=(\{(?:\{\d+,\d+\},?)*\})")


def _metadata(instruction: Instruction) -> str:
    match = _METADATA.search(instruction.attributes)
    return match.group(0) if match else ""


def _first(hlo: HloText, opcode: str) -> Instruction | None:
    """The first array-shaped instruction of `opcode` (tuple-shaped collectives are skipped)."""
    return next((i for i in hlo.instructions() if i.opcode == opcode and i.element_type
                 and len(i.operands) >= 1), None)


def _rename(hlo: HloText, target: Instruction) -> tuple[str, Instruction]:
    """Copy `target` under a fresh name just before it; (the fresh name, `target` re-read). The
    caller rewrites `target`'s own line to read the fresh name, so every user reads the rewrite."""
    inner = hlo.fresh_name(f"{target.name}_mutant")
    attrs = f", {target.attributes}" if target.attributes else ""
    operands = ", ".join(f"%{o}" for o in target.operands)
    hlo.insert_before(target, [f"%{inner} = {target.shape} {target.opcode}({operands}){attrs}"])
    return inner, hlo.by_name()[target.name]


def _all_reduce_dropped(hlo: HloText) -> tuple[Instruction, str] | None:
    target = next((i for i in hlo.instructions() if i.opcode == "all-reduce" and i.operands), None)
    if target is None:
        return None
    if target.element_type:
        hlo.replace(target, opcode="copy", attributes=_metadata(target))
    else:  # a combined all-reduce of several values: their tuple, unreduced
        hlo.replace(target, opcode="tuple", attributes=_metadata(target))
    return target, "all-reduce replaced by a copy of the local value"


def _all_reduce_twice(hlo: HloText) -> tuple[Instruction, str] | None:
    target = _first(hlo, "all-reduce")
    if target is None or len(target.operands) != 1:
        return None
    channel = 1 + max((int(m) for m in _CHANNEL.findall(str(hlo))), default=0)
    inner, target = _rename(hlo, target)
    hlo.replace(target, operands=(inner,),
                attributes=_CHANNEL.sub(f"channel_id={channel}", target.attributes))
    return hlo.by_name()[target.name], "all-reduce applied twice"


def _all_gather_shard_order(hlo: HloText) -> tuple[Instruction, str] | None:
    names = hlo.by_name()
    for target in (i for i in hlo.instructions() if i.opcode == "all-gather" and i.element_type):
        dim = int(target.attribute("dimensions").strip("{}") or -1)
        source = names.get(target.operands[0])
        if source is None or dim < 0 or not source.dims:
            continue
        block, total = source.dims[dim], target.dims[dim]
        if total // max(block, 1) < 2:
            continue
        inner, target = _rename(hlo, target)
        slices = []
        for k in reversed(range(total // block)):
            name = hlo.fresh_name(f"{target.name}_shard")
            bounds = ", ".join(f"[{k * block}:{(k + 1) * block}]" if d == dim else f"[0:{n}]"
                               for d, n in enumerate(target.dims))
            dims = ",".join(str(block if d == dim else n) for d, n in enumerate(target.dims))
            hlo.insert_before(target, [f"%{name} = {target.element_type}[{dims}] slice(%{inner}), "
                                       f"slice={{{bounds}}}"])
            target = hlo.by_name()[target.name]
            slices.append(name)
        hlo.replace(target, opcode="concatenate", operands=tuple(slices),
                    attributes=f"dimensions={{{dim}}}, {_metadata(target)}".rstrip(", "))
        return hlo.by_name()[target.name], "all-gather shards concatenated in reverse order"
    return None


def _halo_off_by_one(hlo: HloText) -> tuple[Instruction, str] | None:
    for target in (i for i in hlo.instructions() if i.opcode == "collective-permute"):
        found = _PAIRS.search(target.attributes)
        pairs = re.findall(r"\{(\d+),(\d+)\}", found.group(1)) if found else []
        if len(pairs) < 2:
            continue
        targets = [t for _, t in pairs]
        shifted = [(s, targets[(k + 1) % len(targets)]) for k, (s, _) in enumerate(pairs)]
        text = "{" + ",".join(f"{{{s},{t}}}" for s, t in shifted) + "}"
        hlo.replace(target, attributes=_PAIRS.sub(f"source_target_pairs={text}",
                                                  target.attributes))
        return target, "collective-permute sends to the next target of its pairs"
    return None


def _aliases(hlo: HloText) -> list[tuple[int, int]]:
    """(output index, parameter number) of the module's input/output aliases."""
    header = hlo.lines[0] if hlo.lines else ""
    return [(int(o), int(p)) for o, p in re.findall(r"\{(\d+)\}: \((\d+), \{\}", header)]


def _reorder(hlo: HloText, computation: str) -> None:
    """Put `computation`'s instruction lines in an order where every operand is defined before
    its use (HLO text needs it), keeping the original order where it already holds."""
    mine = [i for i in hlo.instructions() if i.computation == computation]
    by_name = {i.name: i for i in mine}
    placed: list[int] = []
    done: set[str] = set()

    def place(name: str) -> None:
        stack = [(name, False)]
        while stack:
            current, expanded = stack.pop()
            if current in done or current not in by_name:
                continue
            if expanded:
                done.add(current)
                placed.append(by_name[current].line)
                continue
            stack.append((current, True))
            stack.extend((o, False) for o in reversed(by_name[current].operands) if o not in done)

    for instruction in mine:
        place(instruction.name)
    slots = sorted(i.line for i in mine)
    texts = [hlo.lines[k] for k in placed]
    for slot, text in zip(slots, texts):
        hlo.lines[slot] = text


def _donated_read_after_write(hlo: HloText) -> tuple[Instruction, str] | None:
    entry = entry_name(str(hlo))
    names = {i.name: i for i in hlo.instructions() if i.computation == entry}
    root = next((i for i in names.values() if i.root), None)
    params = {int(i.operand_text): i.name for i in names.values() if i.opcode == "parameter"}
    if root is None or root.opcode != "tuple":
        return None
    for output, number in _aliases(hlo):
        written = root.operands[output] if output < len(root.operands) else None
        param = params.get(number)
        if written is None or param is None or names[written].shape != names[param].shape:
            continue
        before = operand_closure(names, [written])
        # XLA copies a donated parameter that is read after its buffer is written (copy
        # insertion): a read of that copy is a read of the parameter.
        reads = {param} | {i.name for i in names.values()
                           if i.opcode == "copy" and i.operands == (param,)}
        for user in (u for u in names.values() if reads & set(u.operands)
                     and u.name not in before and u.opcode != "copy"):
            hlo.replace(user, operands=tuple(written if o in reads else o
                                             for o in user.operands))
            _reorder(hlo, entry)
            return hlo.by_name()[user.name], (f"reads output {output} (which overwrites donated "
                                              f"parameter {number}) instead of the parameter")
    return None


_DASHED = re.compile(r"%[A-Za-z0-9_.]*-[A-Za-z0-9_.\-]*")


def _parsable(rewrite: Rewrite) -> Rewrite:
    """`rewrite`, then names with ``-`` renamed (``%wrapped_reduce-window``: XLA prints such
    names in partitioned modules but its parser rejects them, so the module would not load)."""
    def run(hlo: HloText) -> tuple[Instruction, str] | None:
        fired = rewrite(hlo)
        if fired is not None:
            hlo.lines = [_DASHED.sub(lambda m: m.group(0).replace("-", "_"), line)
                         for line in hlo.lines]
        return fired
    return run


#: The partitioning mutants, in the order they are listed.
SPMD_MUTANTS: dict[str, Mutant] = {m.name: m for m in [
    Mutant("all-reduce-dropped", "an all-reduce replaced by a copy: each device keeps its partial "
           "result (a collective dropped by a partitioning rewrite)", PRE, _parsable(_all_reduce_dropped)),
    Mutant("all-reduce-twice", "an all-reduce applied twice (a collective duplicated when two "
           "rewrites both insert it)", PRE, _parsable(_all_reduce_twice)),
    Mutant("all-gather-shard-order", "an all-gather's shards concatenated in reverse order "
           "(device order and shard order confused)", PRE, _parsable(_all_gather_shard_order)),
    Mutant("halo-off-by-one", "a collective-permute (halo exchange) sends to the next target "
           "(an off-by-one in the source-target pairs)", PRE, _parsable(_halo_off_by_one)),
    Mutant("donated-read-after-write", "a read of a donated input reads the output that "
           "overwrites its buffer (aliasing scheduled a write before the last read; fires with "
           "donate=all)", PRE, _parsable(_donated_read_after_write)),
]}


def get_spmd_mutant(name: str) -> Mutant:
    """The partitioning mutant called `name`.

    Raises:
        InvalidArgument: unknown name (the message lists them).
    """
    if name not in SPMD_MUTANTS:
        raise InvalidArgument(f"unknown partitioning mutant '{name}'; known: "
                              f"{', '.join(SPMD_MUTANTS)}")
    return SPMD_MUTANTS[name]


def apply_spmd_mutant(name: str, module_text: str) -> tuple[str, MutationSite] | None:
    """Apply partitioning mutant `name` to HLO module text (pure: no XLA, no registration).

    Returns:
        (new module text, the site) when its pattern occurs, else None.

    Raises:
        InvalidArgument: unknown name.
    """
    return apply_mutant(get_spmd_mutant(name), module_text)


def install(name: str) -> MutantKind:
    """Register partitioning mutant `name`'s pass in this process for good (an spmd worker of its
    own); returns the registry whose `MutantKind.fired_sites` reports where it fired.

    Raises:
        InvalidArgument: unknown name.
        RuntimeError: another mutant is installed in this process already.
    """
    MUTANT_KIND._register(get_spmd_mutant(name))
    return MUTANT_KIND
