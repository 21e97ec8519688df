"""Sharded random programs: the generator's programs with sharding constraints planted in them.

`sharded_generate(seed)` takes `xlaprobe.sources.generator.generate`'s program for `seed` and
re-traces it with ``jax.lax.with_sharding_constraint`` over a `jax.sharding.AbstractMesh` of
``Auto`` axes (`MESH`: ``x`` of 4, ``y`` of 2), drawn from a generator seeded by `seed`:

* each input of rank >= 1 is constrained with probability `INPUT_RATE` to a spec whose axes
  divide its dimensions (inputs are placed whole shards at a time);
* each value a top-level equation makes, with probability `VALUE_RATE`, to a random spec, which
  may be **uneven** (an axis over a dimension it does not divide: the partitioner pads) unless the
  value is also an output;
* an axis lands on a random dimension or is left out; two axes may share one dimension.

An ``spmd[mesh=AxB]`` configuration (`xlaprobe.configs.spmd`) then partitions the program along
those constraints. `coverage` counts the sharding patterns a program holds, the way the op
catalogue's coverage counts primitives. Collectives written by hand (``shard_map`` bodies) are
not generated: xlaprobe's reference interpreter has no rule for ``shard_map`` yet.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import AbstractMesh, AxisType, NamedSharding, PartitionSpec

from xlaprobe import jaxprs
from xlaprobe.configs.spmd import spec_of
from xlaprobe.program import Program, Provenance
from xlaprobe.sources.generator import generate

#: The abstract mesh of generated constraints: (axis name, size).
MESH = (("x", 4), ("y", 2))
#: Probability that an input of rank >= 1 is constrained.
INPUT_RATE = 0.7
#: Probability that a value an equation makes is constrained.
VALUE_RATE = 0.3


def random_spec(rng: np.random.Generator, shape: Sequence[int],
                mesh: Sequence[tuple[str, int]], *, even: bool) -> tuple[tuple[str, ...], ...]:
    """A random partition spec for an array of `shape`: each mesh axis on a random dimension (or
    none); with `even`, only where the axes placed there divide the dimension.

    >>> random_spec(np.random.default_rng(0), (), MESH, even=True)
    ()
    """
    spec: list[tuple[str, ...]] = [() for _ in shape]
    for name, size in mesh:
        choices = [None] + [d for d in range(len(shape)) if not even or shape[d] % (
            size * int(np.prod([dict(mesh)[a] for a in spec[d]]))) == 0]
        pick = choices[int(rng.integers(len(choices)))]
        if pick is not None:
            spec[pick] += (name,)
    return tuple(spec)


def _sharding(spec: tuple[tuple[str, ...], ...]) -> Any:
    mesh = AbstractMesh(tuple(s for _, s in MESH), tuple(n for n, _ in MESH),
                        axis_types=(AxisType.Auto,) * len(MESH))
    return NamedSharding(mesh, PartitionSpec(*[(a[0] if len(a) == 1 else a) if a else None
                                               for a in spec]))


def constrain(program: Program, seed: int) -> Program:
    """`program` re-traced with sharding constraints drawn from `seed` (see the module docstring).

    Raises:
        InvalidArgument: the re-trace fails (as `xlaprobe.program.Program.from_function`).
    """
    rng = np.random.default_rng([seed, 0x5A4D])
    closed = program.jaxpr
    outvars = set(closed.jaxpr.outvars)

    def maybe(value: Any, rate: float, even: bool) -> Any:
        if not getattr(value, "ndim", 0) or rng.random() >= rate:
            return value
        spec = random_spec(rng, value.shape, MESH, even=even)
        return jax.lax.with_sharding_constraint(value, _sharding(spec)) if any(spec) else value

    def apply(eqn: Any, invals: list[Any]) -> Any:
        outs = eqn.primitive.bind(*invals, **eqn.params)
        many = eqn.primitive.multiple_results
        values = [maybe(v, VALUE_RATE, var in outvars)
                  for v, var in zip(outs if many else [outs], eqn.outvars)]
        return values if many else values[0]

    def run(*args: Any) -> list[Any]:
        placed = [maybe(a, INPUT_RATE, True) for a in args]
        return jaxprs.eval_jaxpr_with(closed.jaxpr, closed.consts, placed, apply)

    name = f"{program.provenance.name}+sharded"
    return Program.from_function(run, program.inputs, Provenance(
        "fuzz", name, program.provenance.seed), tolerance=program.tolerance)


def sharded_generate(seed: int, *, max_equations: int = 30) -> Program:
    """`xlaprobe.sources.generator.generate`'s program for `seed`, with constraints planted."""
    return constrain(generate(seed, max_equations=max_equations), seed)


def coverage(closed: Any) -> collections.Counter[str]:
    """Sharding patterns of a program's top-level constraints: where (``input``,
    ``intermediate``, ``output``), ``uneven`` (an axis product that does not divide its
    dimension), ``two-axes-one-dim``, and each axis used (``axis:x``)."""
    counts: collections.Counter[str] = collections.Counter()
    invars, outvars = set(closed.jaxpr.invars), set(closed.jaxpr.outvars)
    for eqn in closed.jaxpr.eqns:
        if eqn.primitive.name != "sharding_constraint":
            continue
        sharding, shape = eqn.params["sharding"], eqn.invars[0].aval.shape
        sizes = dict(zip(sharding.mesh.axis_names, sharding.mesh.axis_sizes))
        where = ("input" if eqn.invars[0] in invars else
                 "output" if eqn.outvars[0] in outvars else "intermediate")
        counts[where] += 1
        for dim, axes in zip(shape, spec_of(sharding)):
            counts.update(f"axis:{a}" for a in axes)
            counts["two-axes-one-dim"] += len(axes) > 1
            counts["uneven"] += bool(axes) and dim % int(np.prod([sizes[a] for a in axes])) != 0
    return counts
