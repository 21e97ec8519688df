"""Standalone reproducers of ``spmd`` findings: a jax script that presents the mesh's host devices
itself and runs the program partitioned as the configuration did.

The program is printed as lax code by `xlaprobe.localization.repro.emit_repro` (its sharding
constraints removed: they have no printable form), and the script

* sets ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` before it imports jax;
* builds the mesh (the program's axis names, the configuration's sizes) and the input and output
  shardings of `xlaprobe.configs.spmd.plan` (the program's own, or the generated ones);
* selects the partitioner (``jax_use_shardy_partitioner``; exit 3 when Shardy is asked of a jax
  without it), donates what the configuration
  donates, compiles with its XLA options, gathers the outputs and compares them with the float64
  reference, exiting 1 when the fault shows;
* for a planted partitioning mutant, installs its HLO pass first (then it needs xlaprobe).

Constraints on intermediate values are not in the script (inputs' and outputs' are): the note at
its top says how many were left out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from xlaprobe import jaxprs
from xlaprobe.configs import spmd
from xlaprobe.configs.registry import Configuration
from xlaprobe.localization.repro import RUN_JIT, emit_repro
from xlaprobe.program import Program

_RUN_SPMD = """\
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    try:  # the option (and Shardy) is there from jax 0.4.31 on
        jax.config.update("jax_use_shardy_partitioner", SHARDY)
    except AttributeError:
        if SHARDY:
            print("this jax has no Shardy partitioner")
            return 3
    devices = jax.devices()[:int(np.prod(MESH_SHAPE))]
    mesh = Mesh(np.array(devices).reshape(MESH_SHAPE), MESH_AXES)  # axes Auto: every jax has it
    ins = tuple(NamedSharding(mesh, P(*(s or ()))) for s in IN_SPECS)  # None: replicated
    outs = tuple(None if s is None else NamedSharding(mesh, P(*s)) for s in OUT_SPECS)
    placed = [jax.device_put(x, s) for x, s in zip(INPUTS, ins)]
    jitted = jax.jit(lambda *a: tuple(program(*a)), in_shardings=ins, out_shardings=outs,
                     donate_argnums=DONATE)
    compiled = jitted.lower(*placed).compile(compiler_options=OPTIONS or None)
    outputs = [np.asarray(x) for x in compiled(*placed)]  # gathered to the host
"""


def unconstrained(program: Program) -> tuple[Program, int]:
    """`program` with its top-level sharding constraints removed (identities on one device),
    and how many of them constrained intermediate values (neither an input nor an output)."""
    closed = program.jaxpr
    invars, outvars = set(closed.jaxpr.invars), set(closed.jaxpr.outvars)
    inner = sum(1 for e in closed.jaxpr.eqns if e.primitive.name == "sharding_constraint"
                and e.invars[0] not in invars and e.outvars[0] not in outvars)

    def apply(eqn: Any, invals: list[Any]) -> Any:
        if eqn.primitive.name == "sharding_constraint":
            return invals[0]
        return jaxprs.bind_eqn(eqn, invals)

    def run(*args: Any) -> list[Any]:
        return jaxprs.eval_jaxpr_with(closed.jaxpr, closed.consts, args, apply)

    specs = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in closed.jaxpr.invars]
    return dataclasses.replace(program, jaxpr=jax.make_jaxpr(run)(*specs)), inner


def _spec_text(spec: spmd.Spec | None) -> str:
    if spec is None:
        return "None"
    return "(" + "".join(f"{(a[0] if len(a) == 1 else a)!r}, " if a else "None, "
                         for a in spec) + ")"


def emit_spmd_repro(program: Program, config: str, reference: Sequence[np.ndarray],
                    honest: Sequence[Sequence[np.ndarray]] = (), *, crash: bool = False,
                    allowance: bool = False) -> str:
    """The text of a standalone ``repro.py`` for an ``spmd`` configuration's finding.

    Args:
        program: the program (its shardings as `xlaprobe.configs.spmd.plan` reads them).
        config: the ``spmd[...]`` spec.
        reference: float64 reference outputs, one per output.
        honest: honest runs' outputs that widen the float tolerance (as in `emit_repro`).
        crash: the fault kills the process: run it in a child.
        allowance: judge float outputs by the ``allowance.npz`` beside the script where there is
            one (a finding's artifact), as the check did (`emit_repro`).

    Returns:
        Python source text.

    Raises:
        Unprintable: the program has an operation with no Python form here.
        InvalidArgument: `config` is not a valid ``spmd`` configuration for `program`.
    """

    parsed = Configuration.parse(config)
    options = spmd.settings(parsed)
    layout = spmd.plan(parsed, program.jaxpr)
    plain, inner = unconstrained(program)
    text = emit_repro(plain, config, parsed.compiler_options, reference, honest, crash=crash,
                      allowance=allowance)
    if RUN_JIT not in text or "\nimport jax\n" not in text:
        raise RuntimeError("localization.repro changed the script's shape; update spmd_repro")
    settings = [
        f"MESH_SHAPE = {tuple(options.mesh)!r}",
        f"MESH_AXES = {tuple(n for n, _ in layout.axes)!r}",
        f"IN_SPECS = [{', '.join(_spec_text(s) for s in layout.inputs)}]",
        f"OUT_SPECS = [{', '.join(_spec_text(s) for s in layout.outputs)}]",
        f"DONATE = {tuple(layout.donate)!r}",
        f"SHARDY = {spmd.PARTITIONERS[options.partitioner]!r}  # else GSPMD",
    ]
    if options.mutant:
        settings += ["# The planted fault: xlaprobe's partitioning mutant, an HLO pass.",
                     "from xlaprobe.configs.spmd_mutants import install  # noqa: E402",
                     f"install({options.mutant!r})"]
    flags = (f'os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + '
             f'" {spmd.DEVICE_COUNT_FLAG}={options.devices}").strip()')
    note = ([f"# {inner} sharding constraint(s) on intermediate values are not in this script "
             "(the partitioner chooses there)."] if inner else [])
    text = text.replace("\nimport jax\n", "\nimport os\n\n# The mesh's devices: XLA reads this "
                        "when its backend starts.\n" + flags + "\n\nimport jax\n", 1)
    text = text.replace("\nOPTIONS = ", "\n" + "\n".join(note + settings) + "\nOPTIONS = ", 1)
    if options.mutant:
        text = text.replace("Needs only jax (and numpy).", "Needs jax, numpy and xlaprobe (it "
                            f"installs the partitioning mutant '{options.mutant}').", 1)
    return text.replace(RUN_JIT, _RUN_SPMD, 1)
