"""A small test suite that checks its JAX code with xlaprobe's pytest plugin.

Run it from this folder (the plugin is installed with xlaprobe):

    python -m pytest -q --xlaprobe-configs xla,xla:O0,reference

`test_planted_fault_is_reported` fails on purpose: it checks a subtraction under a planted
compiler fault (a mutant that swaps the operands of a fused subtract), to show what a failing
check looks like in a test report.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

RNG = np.random.default_rng(0)


def layer_norm(x, scale, bias):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * scale + bias


def cross_entropy(logits, labels):
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), labels[:, None], axis=1))


def test_layer_norm(xlaprobe_check):
    x = RNG.standard_normal((8, 64), dtype=np.float32)
    xlaprobe_check(layer_norm, x, np.ones(64, np.float32), np.zeros(64, np.float32))


def test_cross_entropy_gradient(xlaprobe_check):
    logits = RNG.standard_normal((16, 10), dtype=np.float32)
    labels = RNG.integers(0, 10, 16).astype(np.int32)
    result = xlaprobe_check(jax.value_and_grad(cross_entropy), logits, labels)
    assert set(result.verdicts) >= {"xla", "reference"}


@pytest.mark.parametrize("model", ["mlp_mixer", "vit"])
def test_zoo_model(xlaprobe_check, model):
    xlaprobe_check(model)


@pytest.mark.xlaprobe(configs="xla,mutant:swap-subtract-fused")
def test_planted_fault_is_reported(xlaprobe_check):
    x = np.linspace(-3, 3, 64, dtype=np.float32)
    xlaprobe_check(lambda v: jnp.sin(v) * 2 - v, x)
