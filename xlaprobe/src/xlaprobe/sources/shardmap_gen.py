"""Random ``shard_map`` programs: the generator's programs run as the body of a ``jax.shard_map``
over an abstract 4x2 mesh (``x`` of 4, ``y`` of 2), their outputs combined across devices by
collectives drawn from a seed.

`shard_map_generate(seed)` takes `xlaprobe.sources.generator.generate`'s program for `seed`; every
device gets the whole inputs (``in_specs`` replicated) and makes them its own by adding its
``axis_index`` over both axes to each numeric input, runs the program, and then each output goes
through one collective chosen among those it admits:

* ``psum``, ``pmax``, ``pmin`` over both axes (numbers; the result is the same on every device:
  ``out_specs P()``);
* ``all_gather`` over both axes, stacked (any dtype; ``P()``);
* ``ppermute`` along ``x`` (a cyclic shift), ``all_to_all`` along ``x`` (a leading dimension the
  group divides), ``psum_scatter`` along ``y`` (numbers, an even leading dimension), and a
  ``scan`` whose carry moves along ``y`` by ``ppermute`` each step and adds the device's
  ``axis_index`` (a sharded loop carry): these differ per device, so each device's result gets a
  leading axis of 1 and the output is their concatenation (``out_specs P(("x", "y"))``).

Check with ``spmd[mesh=4x2]`` (the shard_map's mesh) and the float64 reference, whose
``shard_map`` rule runs the body per device (`xlaprobe.configs.reference_spmd`). `coverage`
counts the collectives a program holds.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import AbstractMesh, AxisType
from jax.sharding import PartitionSpec as P

from xlaprobe import jaxprs
from xlaprobe.program import Program, Provenance
from xlaprobe.sources.generator import generate

#: The shard_map's mesh: (axis name, size).
MESH = (("x", 4), ("y", 2))
#: The collectives an output may go through (see the module docstring).
COLLECTIVES = ("psum", "pmax", "pmin", "all_gather", "ppermute", "all_to_all", "psum_scatter",
               "scan_ppermute")


def _numeric(x: Any) -> bool:
    return np.dtype(x.dtype).kind in "iuf"


def _admits(name: str, x: Any) -> bool:
    shape = getattr(x, "shape", ())
    if name in ("psum", "pmax", "pmin", "scan_ppermute"):
        return _numeric(x)
    if name == "all_to_all":
        return len(shape) >= 1 and shape[0] % dict(MESH)["x"] == 0
    if name == "psum_scatter":
        return _numeric(x) and np.dtype(x.dtype).kind == "f" and len(shape) >= 1 and \
            shape[0] % dict(MESH)["y"] == 0
    return True


def _collective(name: str) -> Callable[[Any], tuple[Any, bool]]:
    """``value -> (result, differs per device)`` for collective `name`."""
    both = tuple(n for n, _ in MESH)
    size_x = dict(MESH)["x"]

    def scan_ppermute(v: Any) -> tuple[Any, bool]:
        def step(c: Any, _: Any) -> tuple[Any, None]:
            shifted = lax.ppermute(c, "y", [(0, 1), (1, 0)])
            return shifted + lax.axis_index("y").astype(c.dtype), None
        return lax.scan(step, v, None, length=3)[0], True

    return {
        "psum": lambda v: (lax.psum(v, both), False),
        "pmax": lambda v: (lax.pmax(v, both), False),
        "pmin": lambda v: (lax.pmin(v, both), False),
        "all_gather": lambda v: (lax.all_gather(v, both), False),
        "ppermute": lambda v: (lax.ppermute(v, "x", [(i, (i + 1) % size_x)
                                                     for i in range(size_x)]), True),
        "all_to_all": lambda v: (lax.all_to_all(v, "x", 0, 0, tiled=True), True),
        "psum_scatter": lambda v: (lax.psum_scatter(v, "y", scatter_dimension=0, tiled=True),
                                   True),
        "scan_ppermute": scan_ppermute,
    }[name]


def shard_mapped(program: Program, seed: int) -> Program:
    """`program` as a shard_map body with collectives on its outputs drawn from `seed`.

    Raises:
        InvalidArgument: the re-trace fails (as `xlaprobe.program.Program.from_function`).
    """
    rng = np.random.default_rng([seed, 0x534D])
    closed = program.jaxpr
    avals = [v.aval for v in closed.jaxpr.outvars]
    chosen = []
    for aval in avals:
        options = [c for c in COLLECTIVES if _admits(c, aval)]
        chosen.append(options[int(rng.integers(len(options)))])
    both = tuple(n for n, _ in MESH)

    def body(*args: Any) -> list[Any]:
        me = lax.axis_index(both)
        own = [a + me.astype(a.dtype) if _numeric(a) else a for a in args]
        outs = jaxprs.eval_jaxpr_with(closed.jaxpr, closed.consts, own, jaxprs.bind_eqn)
        results = []
        for name, out in zip(chosen, outs):
            value, differs = _collective(name)(out)
            results.append(jnp.expand_dims(value, 0) if differs else value)
        return results

    differs = [c in ("ppermute", "all_to_all", "psum_scatter", "scan_ppermute") for c in chosen]
    mesh = AbstractMesh(tuple(s for _, s in MESH), both, axis_types=(AxisType.Auto,) * len(MESH))
    fn = jax.shard_map(body, mesh=mesh, in_specs=tuple(P() for _ in closed.jaxpr.invars),
                       out_specs=[P(both) if d else P() for d in differs], check_vma=False)
    name = f"{program.provenance.name}+shard_map"
    return Program.from_function(lambda *a: fn(*a), program.inputs, Provenance(
        "fuzz", name, program.provenance.seed), tolerance=program.tolerance)


def shard_map_generate(seed: int, *, max_equations: int = 20) -> Program:
    """`xlaprobe.sources.generator.generate`'s program for `seed` as a shard_map body."""
    return shard_mapped(generate(seed, max_equations=max_equations), seed)


def coverage(closed: Any) -> collections.Counter[str]:
    """The collectives (and ``scan`` loops) inside a program's top-level ``shard_map`` bodies."""
    counts: collections.Counter[str] = collections.Counter()

    def visit(jaxpr: Any) -> None:
        for eqn in jaxpr.eqns:
            if eqn.primitive.name in ("psum", "pmax", "pmin", "all_gather", "ppermute",
                                      "all_to_all", "reduce_scatter", "axis_index", "scan"):
                counts[eqn.primitive.name] += 1
            for param in eqn.params.values():
                inner = getattr(param, "jaxpr", None)
                if inner is not None and hasattr(inner, "eqns"):
                    visit(inner)
                elif hasattr(param, "eqns"):
                    visit(param)

    for eqn in closed.jaxpr.eqns:
        if eqn.primitive.name == "shard_map":
            visit(eqn.params["jaxpr"])
    return counts
