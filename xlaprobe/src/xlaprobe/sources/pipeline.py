"""A pipeline-parallel zoo model: an MLP's training step whose layers are stages on the devices of
a mesh axis, written with ``jax.shard_map`` and ``jax.lax.ppermute`` (GPipe's schedule).

``mlp_pipeline``: 4 stages (one ``tanh(h @ W_s + b_s)`` layer each, width 16) on the mesh axis
``"stage"`` of an abstract 4-device mesh, 6 microbatches of 4 rows. Each stage's weights live on
its device (in_specs ``P("stage")``); at step ``t`` of ``M + S - 1`` steps stage 0 takes microbatch
``t``, every stage applies its layer, the last stage keeps its result for microbatch
``t - (S - 1)``, and the activations move one stage on with a ``ppermute``. The outputs reach every
device by a ``psum`` of the last stage's (masked) buffer. The training step differentiates the
mean squared error through the pipeline (the backward pass is the reverse schedule: the transposed
``ppermute`` sends gradients back one stage per step) and applies SGD.

Check with ``spmd[mesh=4]`` (the mesh must be the program's: a shard_map body's shapes are per
device). Source: Y. Huang et al., "GPipe: Efficient Training of Giant Neural Networks using
Pipeline Parallelism" (NeurIPS 2019).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import AbstractMesh, AxisType
from jax.sharding import PartitionSpec as P

from xlaprobe.sources.zoospec import ModelSpec

STAGES, MICROBATCHES, ROWS, WIDTH = 4, 6, 4, 16
LEARNING_RATE = 0.05


def _forward(mesh: Any) -> Callable[..., Any]:
    def body(w: Any, b: Any, xs: Any) -> Any:
        stage = lax.axis_index("stage")
        last = STAGES - 1

        def step(carry: Any, t: Any) -> Any:
            state, outs = carry
            inject = lax.dynamic_index_in_dim(xs, jnp.minimum(t, MICROBATCHES - 1), 0, False)
            state = jnp.where(stage == 0, inject, state)
            h = jnp.tanh(state @ w[0] + b[0])
            slot = jnp.clip(t - last, 0, MICROBATCHES - 1)
            keep = (stage == last) & (t >= last)
            outs = outs.at[slot].set(jnp.where(keep, h, outs[slot]))
            state = lax.ppermute(h, "stage", [(s, s + 1) for s in range(last)])
            return (state, outs), None

        init = (jnp.zeros((ROWS, WIDTH), xs.dtype), jnp.zeros_like(xs))
        (_, outs), _ = lax.scan(step, init, jnp.arange(MICROBATCHES + last))
        return lax.psum(jnp.where(stage == last, outs, 0.0), "stage")

    return jax.shard_map(body, mesh=mesh, in_specs=(P("stage"), P("stage"), P()),
                         out_specs=P(), check_vma=False)


def _build(seed: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    mesh = AbstractMesh((STAGES,), ("stage",), axis_types=(AxisType.Auto,))
    forward = _forward(mesh)
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((STAGES, WIDTH, WIDTH)) / np.sqrt(WIDTH)).astype(np.float32)
    b = (0.1 * rng.standard_normal((STAGES, WIDTH))).astype(np.float32)
    xs = rng.standard_normal((MICROBATCHES, ROWS, WIDTH)).astype(np.float32)
    target = np.tanh(rng.standard_normal((MICROBATCHES, ROWS, WIDTH))).astype(np.float32)

    def train_step(w: Any, b: Any, xs: Any, target: Any) -> tuple[Any, Any, Any]:
        def loss_fn(w: Any, b: Any) -> Any:
            return jnp.mean((forward(w, b, xs) - target) ** 2)
        loss, (gw, gb) = jax.value_and_grad(loss_fn, argnums=(0, 1))(w, b)
        return loss, w - LEARNING_RATE * gw, b - LEARNING_RATE * gb

    return train_step, (w, b, xs, target)


PIPELINE_MODELS = {
    "mlp_pipeline": ModelSpec(
        "mlp_pipeline", "4-stage pipeline-parallel MLP training step (GPipe schedule with "
        "shard_map and ppermute over mesh axis 'stage'; check with spmd[mesh=4])", "train_step",
        _build),
}

__all__ = ["PIPELINE_MODELS"]
