"""Sharded zoo models: the transformer LM's training step partitioned as real training runs are.

Each entry wraps the zoo's transformer LM training step (`xlaprobe.sources.models`, batch 8
instead of 2 so the batch splits over 8 devices) in ``jax.lax.with_sharding_constraint`` on every
input and output leaf, over a ``jax.sharding.AbstractMesh`` of shape 4x2 with the ``Auto`` axes
``("data", "model")``. Tracing needs one device; on one device the constraints change nothing,
and an ``spmd[mesh=AxB]`` configuration (`xlaprobe.configs.spmd`) rebinds them on a concrete mesh
of ``A*B`` host devices. The styles:

* ``transformer_lm_dp``: data parallel: the batch is split over both axes, parameters and
  optimizer state are replicated (the partitioner inserts the gradient all-reduce);
* ``transformer_lm_fsdp``: fully sharded data parallel (ZeRO-3 style): the batch as in ``dp``,
  and every parameter and optimizer moment is split along its largest dimension each axis
  divides (`xlaprobe.configs.spmd.generated_spec`), so the partitioner all-gathers weights
  before use and reduce-scatters gradients;
* ``transformer_lm_tp``: tensor parallel (Megatron-LM style, Shoeybi et al. 2019): attention
  heads and the MLP's hidden units are split over ``model`` (query/key/value and ``fc1``
  column-parallel, the attention output and ``fc2`` row-parallel), the batch over ``data``.

Source: M. Shoeybi et al., "Megatron-LM: Training Multi-Billion Parameter Language Models Using
Model Parallelism" (2019); S. Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training
Trillion Parameter Models" (2020).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AbstractMesh, AxisType, NamedSharding, PartitionSpec

from xlaprobe.configs.spmd import generated_spec
from xlaprobe.program import Program, Provenance
from xlaprobe.sources.zoospec import BuildFn, ModelSpec

#: The mesh the sharded models are written for (``spmd[mesh=4x2]`` runs them as written).
MESH_AXES = ("data", "model")
MESH_SHAPE = (4, 2)
#: Batch size of the sharded training steps (divisible by every axis product of the mesh).
BATCH = 8

#: A leaf's spec from its key path text and shape: per dimension a tuple of mesh axes.
SpecRule = Callable[[str, tuple[int, ...]], tuple[tuple[str, ...], ...]]


def _replicated(path: str, shape: tuple[int, ...]) -> tuple[tuple[str, ...], ...]:
    return tuple(() for _ in shape)


def _batch_over(*axes: str) -> SpecRule:
    def rule(path: str, shape: tuple[int, ...]) -> tuple[tuple[str, ...], ...]:
        return (tuple(axes),) + tuple(() for _ in shape[1:]) if shape else ()
    return rule


def _fsdp(path: str, shape: tuple[int, ...]) -> tuple[tuple[str, ...], ...]:
    return generated_spec(shape, list(zip(MESH_AXES, MESH_SHAPE)))


#: Megatron-LM's split, by the parameter's name in the nnx module tree (the optimizer's moments
#: carry the same names in their paths): the dimension split over ``model``.
_TP_SPLITS = (("['query']['kernel']", 1), ("['key']['kernel']", 1), ("['value']['kernel']", 1),
              ("['query']['bias']", 0), ("['key']['bias']", 0), ("['value']['bias']", 0),
              ("['out']['kernel']", 0), ("['fc1']['kernel']", 1), ("['fc1']['bias']", 0),
              ("['fc2']['kernel']", 0))


def _tensor_parallel(path: str, shape: tuple[int, ...]) -> tuple[tuple[str, ...], ...]:
    for suffix, dim in _TP_SPLITS:
        if path.endswith(suffix):
            return tuple(("model",) if d == dim else () for d in range(len(shape)))
    return _replicated(path, shape)


def _constrain(tree: Any, rule: SpecRule) -> Any:
    """`tree` with every array leaf constrained to ``rule(path, shape)`` on the abstract mesh."""
    mesh = AbstractMesh(MESH_SHAPE, MESH_AXES, axis_types=(AxisType.Auto,) * len(MESH_AXES))

    def leaf(path: Any, x: Any) -> Any:
        spec = rule(jax.tree_util.keystr(path), tuple(x.shape))
        sharding = NamedSharding(mesh, PartitionSpec(*[a if a else None for a in spec]))
        return jax.lax.with_sharding_constraint(x, sharding)

    return jax.tree_util.tree_map_with_path(leaf, tree)


def _sharded_step(lm_builder: Callable[[int], BuildFn], params_rule: SpecRule,
                  batch_rule: SpecRule) -> BuildFn:
    def build(seed: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        step, args = lm_builder(BATCH)(seed)

        def sharded_step(params: Any, opt_state: Any, batch: Any) -> tuple[Any, Any, Any]:
            params, opt_state = _constrain((params, opt_state), params_rule)
            loss, new_params, new_state = step(params, opt_state, _constrain(batch, batch_rule))
            return loss, *_constrain((new_params, new_state), params_rule)

        return sharded_step, args

    return build


#: The sharded zoo's model names.
SHARDED_NAMES = ("transformer_lm_dp", "transformer_lm_fsdp", "transformer_lm_tp")


@functools.cache
def sharded_models(lm_builder: Callable[[int], BuildFn]) -> dict[str, ModelSpec]:
    """The sharded zoo entries by name (see the module docstring).

    Args:
        lm_builder: ``batch_size -> build`` of the zoo's transformer LM training step
            (`xlaprobe.sources.models.transformer_lm_builder`; handed in, as the zoo imports
            this module).
    """
    both = _batch_over(*MESH_AXES)
    return {spec.name: spec for spec in [
        ModelSpec(SHARDED_NAMES[0], "transformer LM training step, data parallel over a 4x2 "
                  "mesh (batch 8 split 8 ways; check with spmd[mesh=4x2])", "train_step",
                  _sharded_step(lm_builder, _replicated, both)),
        ModelSpec(SHARDED_NAMES[1], "transformer LM training step, FSDP over a 4x2 mesh "
                  "(batch and every parameter and Adam moment split 8 ways)", "train_step",
                  _sharded_step(lm_builder, _fsdp, both)),
        ModelSpec(SHARDED_NAMES[2], "transformer LM training step, Megatron tensor parallel "
                  "over 'model' and data parallel over 'data' of a 4x2 mesh", "train_step",
                  _sharded_step(lm_builder, _tensor_parallel, _batch_over("data"))),
    ]}


# --------------------------------------------------------------------------------- small programs

def _matmul_tanh_sum(a: Any, b: Any) -> Any:
    return jnp.tanh(a @ b).sum(0), jnp.cumsum(a, axis=0)


def _conv_halo(x: Any, w: Any) -> Any:
    # A 1-D convolution along a sharded axis: each device needs its neighbours' edge rows.
    return jax.lax.conv_general_dilated(x, w, (1,), "SAME", dimension_numbers=("NWC", "WIO", "NWC"))


def _donated_update(a: Any, b: Any) -> Any:
    return a * 2.0 + jnp.tanh(b).sum(), b + 1.0


def _normal(shape: tuple[int, ...], seed: int) -> Any:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


#: Small programs without shardings of their own (an ``spmd`` configuration generates them),
#: whose partitioned modules hold the collectives the partitioning mutants rewrite: name ->
#: (function, inputs).
SPMD_CORPUS: dict[str, tuple[Callable[..., Any], Callable[[], tuple[Any, ...]]]] = {
    # all-reduce of the contraction, all-gather of the replicated operand, a prefix sum.
    "matmul_tanh_sum": (_matmul_tanh_sum, lambda: (_normal((8, 16), 0), _normal((16, 6), 1))),
    # collective-permutes: the halo exchange of a convolution over a sharded axis.
    "conv_halo": (_conv_halo, lambda: (_normal((2, 64, 4), 2), _normal((3, 4, 2), 3))),
    # outputs that alias their inputs under donate=all.
    "donated_update": (_donated_update, lambda: (_normal((8, 16), 4), _normal((16, 6), 5))),
}


def spmd_program(name: str) -> Any:
    """The `SPMD_CORPUS` program `name` as a `xlaprobe.program.Program` (source ``"corpus"``).

    Raises:
        KeyError: unknown name.
    """
    fn, inputs = SPMD_CORPUS[name]
    return Program.from_function(fn, inputs(), Provenance("corpus", f"spmd/{name}"))
