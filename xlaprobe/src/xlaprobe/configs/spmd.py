"""The ``spmd`` configuration kind: partition the program over a mesh of host devices and run it.

Specs::

    spmd[mesh=4x2]                        Shardy (jax's default partitioner), a 4x2 device mesh
    spmd[mesh=8,partitioner=gspmd]        the GSPMD partitioner (``jax_use_shardy_partitioner=False``)
    spmd[mesh=2x2x2,donate=all]           every input donated (``donate_argnums``); ``donate=0+2``
                                          donates inputs 0 and 2
    spmd[mesh=4x2,xla_cpu_enable_fast_math=true]
                                          any XLA compiler option, as for ``xla[...]``
    spmd[mesh=4x2,mutant=all-reduce-dropped]
                                          a planted partitioning fault (`xlaprobe.configs.spmd_mutants`)

XLA:CPU presents ``N`` devices when ``--xla_force_host_platform_device_count=N`` is in
``XLA_FLAGS`` before its backend starts, so the kind runs in workers of the isolation group
``xla-flags:--xla_force_host_platform_device_count=N`` (N = the mesh's device count).

**Shardings.** A program that carries shardings (``jax.lax.with_sharding_constraint`` over a
`jax.sharding.AbstractMesh` with ``Auto`` axes, traced on one device) keeps them: the mesh's axis
names are the program's, the spec gives their sizes (the same rank), every ``sharding_constraint``
is rebound on the concrete mesh, and a constraint applied to an input (or producing an output)
is also that input's ``in_shardings`` entry (that output's ``out_shardings`` entry). A program
without any sharding gets generated ones for its inputs and outputs (`generated_spec`: each mesh
axis shards the largest dimension it divides), over axes named ``x``, ``y``, ``z``, ...

Inputs are placed with `jax.device_put` on their shardings, the program is compiled with
``jax.jit(..., in_shardings, out_shardings, donate_argnums)`` and the outputs are gathered to
the host (`numpy.asarray`), so the oracle judges them like every other configuration's.

Bad input is refused in the parent process before any run (`validate`, `validate_program`):
a malformed mesh, a mesh of more devices than a worker presents (`MAX_DEVICES`), an unknown
partitioner, a mesh whose rank differs from the program's, an axis that does not divide a
dimension of an input or output the program shards over it (constraints on intermediate values
may be uneven: the partitioner pads), a donated input that does not exist.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import AbstractMesh, AxisType, NamedSharding, PartitionSpec

from xlaprobe import jaxcompat, jaxprs
from xlaprobe.configs import xla_options
from xlaprobe.configs.registry import Configuration
from xlaprobe.configs.spmd_mutants import get_spmd_mutant, install
from xlaprobe.configs.xla import EQUATION_SCOPE
from xlaprobe.errors import InvalidArgument

#: The most host devices a worker presents: every device is a client with its own thread pool,
#: and compiles of the partitioned program slow down with the device count.
MAX_DEVICES = 64
#: Partitioner name -> the value of ``jax_use_shardy_partitioner``.
PARTITIONERS = {"shardy": True, "gspmd": False}
#: The spec's own options (the rest are XLA compiler options).
SPMD_OPTIONS = ("donate", "mesh", "mutant", "partitioner")
#: Names of generated mesh axes, in order.
AXIS_NAMES = ("x", "y", "z", "w", "v", "u")
#: The XLA flag that makes XLA:CPU present N devices (read once, when the backend starts).
DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"
_MESH = re.compile(r"^[1-9][0-9]*(x[1-9][0-9]*)*$")

#: A partition spec as data: per dimension, the mesh axes sharding it (empty: not sharded).
Spec = tuple[tuple[str, ...], ...]


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    """An ``spmd`` configuration's options, parsed.

    Attributes:
        mesh: the device mesh's shape, e.g. ``(4, 2)``.
        partitioner: ``"shardy"`` or ``"gspmd"``.
        donate: ``"all"``, or the donated input indices; ``()``: none.
        mutant: a planted partitioning fault's name, or None.
        xla: the XLA compiler options as spec texts (name, value), sorted.
    """

    mesh: tuple[int, ...]
    partitioner: str = "shardy"
    donate: str | tuple[int, ...] = ()
    mutant: str | None = None
    xla: tuple[tuple[str, str], ...] = ()

    @property
    def devices(self) -> int:
        """The mesh's device count."""
        return math.prod(self.mesh)


def parse_mesh(text: str) -> tuple[int, ...]:
    """A mesh shape from its spec text.

    >>> parse_mesh("4x2")
    (4, 2)

    Raises:
        InvalidArgument: not sizes joined by ``x``, or more devices than `MAX_DEVICES`.
    """
    if not _MESH.match(text):
        raise InvalidArgument(f"malformed mesh '{text}': expected sizes joined by 'x', "
                              "e.g. mesh=8, mesh=4x2, mesh=2x2x2")
    shape = tuple(int(s) for s in text.split("x"))
    if len(shape) > len(AXIS_NAMES):
        raise InvalidArgument(f"mesh '{text}' has {len(shape)} axes; at most {len(AXIS_NAMES)}")
    if math.prod(shape) > MAX_DEVICES:
        raise InvalidArgument(f"mesh '{text}' needs {math.prod(shape)} devices; a worker presents "
                              f"at most {MAX_DEVICES} host devices")
    return shape


def _donate(text: str) -> str | tuple[int, ...]:
    if text == "all":
        return "all"
    if text == "none":
        return ()
    items = text.split(xla_options.LIST_SEPARATOR)
    if not all(i.isdigit() for i in items):
        raise InvalidArgument(f"malformed donate '{text}': expected all, none, or input indices "
                              "joined by '+', e.g. donate=0+2")
    return tuple(sorted({int(i) for i in items}))


def settings(config: Configuration) -> Settings:
    """Parse and check an ``spmd`` configuration's options (no program needed, no XLA).

    >>> settings(Configuration("spmd", None, (("mesh", "4x2"), ("partitioner", "gspmd"))))
    Settings(mesh=(4, 2), partitioner='gspmd', donate=(), mutant=None, xla=())

    Raises:
        InvalidArgument: a variant, no mesh, a malformed or too large mesh, an unknown
            partitioner or mutant, a malformed donate list, or a bad XLA option.
    """
    if config.kind != "spmd":
        raise InvalidArgument(f"configuration '{config}' is not of kind 'spmd'")
    if config.variant is not None:
        raise InvalidArgument(f"configuration '{config}': spmd takes no variant; "
                              "e.g. spmd[mesh=4x2,partitioner=gspmd]")
    own = {n: v for n, v in config.options if n in SPMD_OPTIONS}
    xla = tuple((n, v) for n, v in config.options if n not in SPMD_OPTIONS)
    if "mesh" not in own:
        raise InvalidArgument(f"configuration '{config}' needs a mesh, e.g. spmd[mesh=4x2]")
    partitioner = own.get("partitioner", "shardy")
    if partitioner not in PARTITIONERS:
        raise InvalidArgument(f"unknown partitioner '{partitioner}' in '{config}'; known: "
                              f"{', '.join(PARTITIONERS)}")
    mutant = own.get("mutant")
    if mutant is not None:
        get_spmd_mutant(mutant)
    xla_options.compiler_options(list(xla))
    return Settings(parse_mesh(own["mesh"]), partitioner, _donate(own.get("donate", "none")),
                    mutant, xla)


# ------------------------------------------------------------------------------------ shardings

def generated_spec(shape: Sequence[int], mesh: Sequence[tuple[str, int]]) -> Spec:
    """A partition spec for an array that has none: each mesh axis in turn shards the
    dimension with the largest per-device extent that it divides (ties: the first); an axis that
    divides no dimension leaves the array replicated along it.

    Args:
        shape: the array's shape.
        mesh: (axis name, size) per mesh axis, in mesh order.

    >>> generated_spec((8, 6), [("x", 4), ("y", 2)])
    (('x',), ('y',))
    >>> generated_spec((16, 3), [("x", 4), ("y", 2)])
    (('x', 'y'), ())
    >>> generated_spec((), [("x", 4)])
    ()
    """
    spec: list[tuple[str, ...]] = [() for _ in shape]
    local = list(shape)
    for name, size in mesh:
        if size == 1:
            continue
        fits = [d for d in range(len(shape)) if local[d] % size == 0]
        if fits:
            best = max(fits, key=lambda d: (local[d], -d))
            spec[best] += (name,)
            local[best] //= size
    return tuple(spec)


def _abstract_meshes(closed: Any) -> list[Any]:
    """Every AbstractMesh a parameter of the program names (nested jaxprs included)."""
    found: list[Any] = []

    def visit(value: Any) -> None:
        if isinstance(value, NamedSharding) and isinstance(value.mesh, AbstractMesh):
            visit(value.mesh)
        elif isinstance(value, AbstractMesh) and value.axis_names:
            found.append(value)
        elif jaxcompat.is_jaxpr(value):
            for eqn in jaxcompat.as_closed(value).jaxpr.eqns:
                for param in eqn.params.values():
                    visit(param)
        elif isinstance(value, (tuple, list)):
            for item in value:
                visit(item)

    visit(closed)
    return found


def spec_of(sharding: Any) -> Spec:
    """A NamedSharding's PartitionSpec as data: per dimension, the mesh axes sharding it
    (``()``: none), e.g. ``P('x', None, ('x', 'y'))`` -> ``(('x',), (), ('x', 'y'))``."""
    return tuple(() if p is None else (p,) if isinstance(p, str) else tuple(p)
                 for p in sharding.spec)


@dataclasses.dataclass(frozen=True, slots=True)
class Plan:
    """How one program is partitioned under one ``spmd`` configuration.

    Attributes:
        axes: (axis name, size) per mesh axis.
        inputs: one spec per program input (``None``: replicated).
        outputs: one spec per program output (``None``: the partitioner chooses).
        source: ``"program"`` (its own shardings) or ``"generated"``.
        donate: the donated input indices.
    """

    axes: tuple[tuple[str, int], ...]
    inputs: tuple[Spec | None, ...]
    outputs: tuple[Spec | None, ...]
    source: str
    donate: tuple[int, ...]


def _edge_specs(closed: Any) -> tuple[dict[int, Spec], dict[int, Spec]]:
    """Specs of the constraints applied straight to an input, and of those producing an output."""
    jaxpr = closed.jaxpr
    invars = {v: k for k, v in enumerate(jaxpr.invars)}
    produced = {}
    inputs: dict[int, Spec] = {}
    for eqn in jaxpr.eqns:
        if eqn.primitive.name != "sharding_constraint":
            continue
        source = eqn.invars[0]
        if source in invars and invars[source] not in inputs:
            inputs[invars[source]] = spec_of(eqn.params["sharding"])
        produced[eqn.outvars[0]] = spec_of(eqn.params["sharding"])
    outputs = {k: produced[v] for k, v in enumerate(jaxpr.outvars) if v in produced}
    return inputs, outputs


def _check_divides(where: str, shape: Sequence[int], spec: Spec, sizes: dict[str, int],
                   config: Configuration) -> None:
    for dim, axes in enumerate(spec):
        ways = math.prod(sizes[a] for a in axes)
        if axes and shape[dim] % ways:
            raise InvalidArgument(
                f"{config}: mesh axes {'x'.join(axes)} ({ways} devices) do not divide dimension "
                f"{dim} (size {shape[dim]}) of {where}, shape {list(shape)}; pick a mesh whose "
                "axis sizes divide it")


def plan(config: Configuration, closed: Any) -> Plan:
    """The partitioning of `closed` (a canonical closed jaxpr) under `config`.

    Raises:
        InvalidArgument: the configuration is invalid (`settings`), its mesh's rank differs from
            the program's mesh, a ``shard_map``'s mesh has other sizes, an axis does not divide
            a dimension sharded over it, or a donated input does not exist.
    """
    options = settings(config)
    meshes = _abstract_meshes(closed)
    n_in, n_out = len(closed.jaxpr.invars), len(closed.jaxpr.outvars)
    if meshes:
        names = tuple(meshes[0].axis_names)
        if len(names) != len(options.mesh):
            raise InvalidArgument(
                f"{config}: the program shards over a mesh with axes {', '.join(names)} "
                f"({len(names)} axes); give a mesh of that rank, e.g. mesh="
                + "x".join(str(s) for s in meshes[0].axis_sizes))
        axes = tuple(zip(names, options.mesh))
        for eqn in closed.jaxpr.eqns:
            own = tuple(eqn.params["mesh"].axis_sizes) if eqn.primitive.name == "shard_map" else ()
            if own and own != tuple(options.mesh):
                raise InvalidArgument(
                    f"{config}: the program's shard_map was traced for a mesh of "
                    f"{'x'.join(map(str, own))} devices (its body's shapes are per device); "
                    f"give mesh={'x'.join(map(str, own))}")
        ins, outs = _edge_specs(closed)
        sizes = dict(axes)
        # Inputs and outputs are placed and gathered whole shards at a time; constraints on
        # intermediate values may be uneven (the partitioner pads).
        for k, spec in ins.items():
            _check_divides(f"input {k}", closed.jaxpr.invars[k].aval.shape, spec, sizes, config)
        for k, spec in outs.items():
            _check_divides(f"output {k}", closed.jaxpr.outvars[k].aval.shape, spec, sizes, config)
        inputs = tuple(ins.get(k) for k in range(n_in))
        outputs = tuple(outs.get(k) for k in range(n_out))
        source = "program"
    else:
        axes = tuple(zip(AXIS_NAMES, options.mesh))
        inputs = tuple(generated_spec(v.aval.shape, axes) for v in closed.jaxpr.invars)
        outputs = tuple(generated_spec(v.aval.shape, axes) for v in closed.jaxpr.outvars)
        source = "generated"
    donate = tuple(range(n_in)) if options.donate == "all" else tuple(options.donate)
    if donate and donate[-1] >= n_in:
        raise InvalidArgument(f"{config}: donated input {donate[-1]} does not exist; the "
                              f"program has {n_in} inputs (0..{n_in - 1})")
    return Plan(axes, inputs, outputs, source, donate)


# ---------------------------------------------------------------------------------------- running

def _named(mesh: Any, spec: Spec | None) -> Any:
    if spec is None:
        return NamedSharding(mesh, PartitionSpec())
    return NamedSharding(mesh, PartitionSpec(*[a if a else None for a in spec]))


def make_mesh(axes: Sequence[tuple[str, int]]) -> Any:
    """A concrete mesh of this process's first ``prod(sizes)`` devices, axes ``Auto``.

    Raises:
        InvalidArgument: this process presents fewer devices (it was started without the
            device-count flag of `isolation_group`).
    """
    needed = math.prod(s for _, s in axes)
    if jax.device_count() < needed:
        raise InvalidArgument(f"this process has {jax.device_count()} devices; the mesh needs "
                              f"{needed}: start it with XLA_FLAGS={DEVICE_COUNT_FLAG}={needed}")
    return jax.make_mesh(tuple(s for _, s in axes), tuple(n for n, _ in axes),
                         axis_types=(AxisType.Auto,) * len(axes),
                         devices=jax.devices()[:needed])


def _rebound_shard_map(eqn: Any, invals: list[Any], mesh: Any) -> list[Any]:
    """A top-level ``shard_map`` equation run on the concrete `mesh`: its body re-traced there
    (values the body made over the abstract mesh would not match the concrete one's)."""
    params = eqn.params
    body = params["jaxpr"]
    manual = params.get("newly_manual_axes") or frozenset(mesh.axis_names)

    def retraced(closed: Any) -> Any:
        specs = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in closed.jaxpr.invars]
        return jax.make_jaxpr(lambda *a: jaxprs.eval_jaxpr_with(
            closed.jaxpr, closed.consts, a, plain))(*specs)

    def plain(e: Any, values: list[Any]) -> Any:
        # Literals and inner jaxprs were typed over the abstract mesh: plain values (same
        # dtype) and jaxprs traced again here instead.
        inner = {k: retraced(v) for k, v in e.params.items() if isinstance(v, jaxcompat.ClosedJaxpr)}
        return jaxprs.bind_eqn(e, [np.asarray(v, dtype=a.aval.dtype)
                                   if isinstance(a, jaxcompat.Literal) else v
                                   for v, a in zip(values, e.invars)], {**e.params, **inner})

    fn = jax.shard_map(lambda *a: tuple(jaxprs.eval_jaxpr_with(body, (), a, plain)),
                       mesh=mesh, in_specs=tuple(params["in_specs"]),
                       out_specs=tuple(params["out_specs"]),
                       check_vma=params["check_vma"], axis_names=set(manual))
    return fn(*invals)


def partitioned_function(closed: Any, mesh: Any) -> Any:
    """`xlaprobe.configs.xla.scoped_function` of `closed` with every top-level sharding
    constraint and ``shard_map`` rebound on `mesh` (the program traced them over an abstract
    mesh)."""
    jaxpr, consts = closed.jaxpr, closed.consts
    index = {id(eqn): k for k, eqn in enumerate(jaxpr.eqns)}

    def apply(eqn: Any, invals: list[Any]) -> Any:
        params = dict(eqn.params)
        if eqn.primitive.name == "sharding_constraint":
            params["sharding"] = _named(mesh, spec_of(params["sharding"]))
        elif eqn.primitive.name == "shard_map":
            with jax.named_scope(f"{EQUATION_SCOPE}{index[id(eqn)]}"):
                return _rebound_shard_map(eqn, invals, mesh)
        with jax.named_scope(f"{EQUATION_SCOPE}{index[id(eqn)]}"):
            return jaxprs.bind_eqn(eqn, invals, params)

    def program(*args: Any) -> tuple[Any, ...]:
        return tuple(jaxprs.eval_jaxpr_with(jaxpr, consts, args, apply))

    return program


def compile_partitioned(config: Configuration, closed: Any, inputs: Sequence[np.ndarray],
                        extra: dict[str, Any] | None = None) -> tuple[Any, list[Any]]:
    """Compile `closed` partitioned under `config`; (the executable, the inputs placed on their
    shardings: fresh device arrays, as donation deletes them). `extra`: more XLA compiler
    options (e.g. HLO dumps), not checked against the option table.

    Raises:
        InvalidArgument: as `plan` and `make_mesh`.
        jax.errors.JaxRuntimeError: XLA failed to partition or compile.
    """
    options = settings(config)
    layout = plan(config, closed)
    mesh = make_mesh(layout.axes)
    in_shardings = tuple(_named(mesh, s) for s in layout.inputs)
    out_shardings = tuple(None if s is None else _named(mesh, s) for s in layout.outputs)
    placed = [jax.device_put(np.asarray(x), s) for x, s in zip(inputs, in_shardings)]
    previous = jax.config.jax_use_shardy_partitioner
    jax.config.update("jax_use_shardy_partitioner", PARTITIONERS[options.partitioner])
    try:
        with jax.set_mesh(mesh):
            jitted = jax.jit(partitioned_function(closed, mesh), in_shardings=in_shardings,
                             out_shardings=out_shardings, donate_argnums=layout.donate)
            compiled = jitted.lower(*placed).compile(compiler_options={
                **xla_options.compiler_options(list(options.xla)), **(extra or {})})
    finally:
        jax.config.update("jax_use_shardy_partitioner", previous)
    return compiled, placed


def partitioned_hlo(closed: Any, inputs: Sequence[np.ndarray], spec: str) -> str:
    """The optimized per-device HLO of `closed` partitioned under configuration `spec` (its
    collectives name their jaxpr equations in ``op_name``); for `xlaprobe.workers.WorkerPool.call`
    in a worker of the configuration's isolation group.

    Raises:
        InvalidArgument, jax.errors.JaxRuntimeError: as `compile_partitioned`.
    """
    return compile_partitioned(Configuration.parse(spec), closed, inputs)[0].as_text()


def _with_mutant(config: Configuration, closed: Any) -> Any:
    """Register `config`'s planted partitioning fault in this process (a worker of its own
    isolation group) and attribute its sites to `closed`; the registry, or None without one."""
    options = settings(config)
    if options.mutant is None:
        return None
    registry = install(options.mutant)
    registry.begin(id(closed))
    return registry


def planted_hlo(config: Configuration, closed: Any, inputs: Sequence[np.ndarray],
                extra: dict[str, Any] | None = None) -> str:
    """The optimized per-device HLO of `closed` partitioned under `config`, a planted fault's pass
    registered first (so the text is what the faulty compiler made); only in a worker of the
    configuration's isolation group. `extra`: as `compile_partitioned`.

    Raises:
        InvalidArgument, jax.errors.JaxRuntimeError: as `compile_partitioned`.
    """
    _with_mutant(config, closed)
    return compile_partitioned(config, closed, inputs, extra)[0].as_text()


class SpmdKind:
    """`ConfigKind` for partitioned programs on a mesh of host devices (see module docstring)."""

    name = "spmd"
    description = ("partition over a mesh of host devices: spmd[mesh=4x2,partitioner=shardy|gspmd,"
                   "donate=all|0+2,option=value]")

    def __init__(self) -> None:
        self._mutant: Any = None

    def validate(self, config: Configuration) -> None:
        """Check the options without a program (safe in the parent process).

        Raises:
            InvalidArgument: see `settings`.
        """
        settings(config)

    def validate_program(self, config: Configuration, program: Any) -> None:
        """Check that `program` can be partitioned under `config`, before any run.

        Raises:
            InvalidArgument: see `plan`.
        """
        plan(config, program.jaxpr)

    def compiler_options(self, config: Configuration) -> dict[str, Any]:
        """The XLA compiler options of `config` (its mesh and partitioner are not options)."""
        return xla_options.compiler_options(list(settings(config).xla))

    def isolation_group(self, config: Configuration) -> str:
        """Workers that present the mesh's device count (``XLA_FLAGS``, read at backend start);
        a planted mutant's pass is process-global, so each mutant gets workers of its own."""
        options = settings(config)
        group = f"xla-flags:{DEVICE_COUNT_FLAG}={options.devices}"
        return group + (f" #mutant={options.mutant}" if options.mutant else "")

    def run(self, config: Configuration, jaxpr: Any,
            inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Partition, compile and run once; the outputs gathered to the host.

        Raises:
            InvalidArgument, jax.errors.JaxRuntimeError: as `compile_partitioned`.
        """
        self._mutant = _with_mutant(config, jaxpr) or self._mutant
        compiled, placed = compile_partitioned(config, jaxpr, inputs)
        return [np.asarray(out) for out in compiled(*placed)]

    def fired_sites(self) -> tuple[Any, ...]:
        """Where a planted mutant fired for the last run's program (empty: none or no mutant)."""
        return self._mutant.fired_sites() if self._mutant is not None else ()


KIND = SpmdKind()
