"""Tests of the model zoo (`xlaprobe.sources.models`): every model traces, runs, trains and is
reproducible from its seed."""

from __future__ import annotations

import functools
import sys

import jax
import numpy as np
import pytest

pytest.importorskip("flax")
pytest.importorskip("optax")

from xlaprobe.errors import InvalidArgument  # noqa: E402
from xlaprobe.program import Program, Provenance  # noqa: E402
from xlaprobe.sources import models  # noqa: E402

# Large models (a check takes minutes) run with -m slow.
NAMES = [pytest.param(name, marks=[pytest.mark.slow] if models.MODELS[name].large else [])
         for name in sorted(models.MODELS)]
TRAIN_STEPS = [p for p in NAMES if models.MODELS[p.values[0]].kind == "train_step"]


@functools.cache
def _program(name: str) -> Program:
    return models.build_program(name, seed=0)


@functools.cache
def _jitted(name: str):
    fn, args = models.get_model(name).build(0)
    return jax.jit(fn), args


@functools.cache
def _train(name: str, steps: int = 4) -> tuple[list[float], list]:
    """Losses and outputs of `steps` chained training steps from seed 0."""
    step, args = _jitted(name)
    losses, outs = [], []
    for _ in range(steps):
        out = jax.device_get(step(*args))
        losses.append(float(out[0]))
        outs.append(out)
        args = (*out[1:], args[-1])
    return losses, outs


def _leaves(tree) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]


def test_registry_has_the_required_models():
    assert {"transformer_lm", "resnet", "mlp_mixer", "lstm"} <= set(models.MODELS)
    for name, spec in models.MODELS.items():
        assert spec.name == name
        assert spec.kind in ("train_step", "forward")
        assert spec.description and "\n" not in spec.description
        assert models.get_model(name) is spec
    assert {"transformer_lm", "resnet", "lstm"} <= {p.values[0] for p in TRAIN_STEPS}
    assert "resnet18" not in models.SMALL and "resnet" in models.SMALL


def test_unknown_name_lists_known_names_and_a_close_match():
    with pytest.raises(InvalidArgument) as info:
        models.get_model("resnt")
    message = str(info.value)
    assert "\n" not in message
    assert "did you mean 'resnet'" in message
    for name in models.MODELS:
        assert name in message
    with pytest.raises(InvalidArgument, match="known models"):
        models.build_program("no_such_model")


def test_missing_flax_is_an_invalid_argument_that_says_what_to_install(monkeypatch):
    models._deps.cache_clear()
    monkeypatch.setitem(sys.modules, "optax", None)  # makes `import optax` raise ImportError
    try:
        with pytest.raises(InvalidArgument, match=r"xlaprobe\[models\]"):
            models._deps()
    finally:
        models._deps.cache_clear()


@pytest.mark.parametrize("seed", [-1, 1.5, "0", True])
def test_bad_seed_is_rejected(seed):
    with pytest.raises(InvalidArgument, match="seed"):
        models.build_program("lstm", seed=seed)


@pytest.mark.parametrize("name", NAMES)
def test_program_is_a_closed_function_of_its_inputs(name):
    program = _program(name)
    fn, args = models.get_model(name).build(0)
    assert program.provenance == Provenance("model", name, 0)
    assert program.num_equations > 50
    # Every weight is an input, none is baked into the jaxpr as a constant.
    assert len(program.jaxpr.consts) == 0
    leaves = _leaves(args)
    assert len(program.inputs) == len(leaves)
    for x, leaf in zip(program.inputs, leaves):
        assert x.dtype in (np.float32, np.int32)
        np.testing.assert_array_equal(x, leaf)
    assert len(program.output_names) == len(program.jaxpr.out_avals)


@pytest.mark.parametrize("name", NAMES)
def test_jit_gives_finite_deterministic_outputs(name):
    fn, args = _jitted(name)
    first, second = jax.device_get(fn(*args)), jax.device_get(fn(*args))
    for a, b in zip(_leaves(first), _leaves(second)):
        assert np.all(np.isfinite(a)) if a.dtype.kind == "f" else True
        assert a.tobytes() == b.tobytes()
    program = _program(name)
    assert [a.shape for a in _leaves(first)] == [v.shape for v in program.jaxpr.out_avals]


@pytest.mark.parametrize("name", TRAIN_STEPS)
def test_training_step_returns_its_state_and_lowers_the_loss(name):
    _, args = _jitted(name)
    losses, outs = _train(name)
    loss, *new_state = outs[0]
    assert np.shape(loss) == () and np.asarray(loss).dtype == np.float32
    # (loss, *new_state) mirrors (*state, batch): same structure, shapes and dtypes.
    state = args[:-1]
    assert jax.tree_util.tree_structure(tuple(new_state)) == jax.tree_util.tree_structure(state)
    for new, old in zip(_leaves(new_state), _leaves(state)):
        assert (new.shape, new.dtype) == (old.shape, old.dtype)
    # The parameters move, and three updates lower the loss, each one a little.
    assert any(not np.array_equal(n, o) for n, o in zip(_leaves(new_state[0]), _leaves(state[0])))
    assert all(np.isfinite(losses))
    assert all(later < earlier for earlier, later in zip(losses, losses[1:])), losses


def test_resnet_updates_batch_statistics():
    _, args = _jitted("resnet")
    _, outs = _train("resnet")
    old_stats, new_stats = args[1], outs[0][2]
    flat = jax.tree_util.tree_flatten_with_path(old_stats)[0]
    paths = [jax.tree_util.keystr(path) for path, _ in flat]
    assert any("mean" in path for path in paths) and any("var" in path for path in paths)
    assert all(not np.array_equal(n, o) for n, o in zip(_leaves(new_stats), _leaves(old_stats)))


@pytest.mark.parametrize("name", ["mlp_mixer", "vit"])
def test_forward_models_classify(name):
    if name not in models.MODELS:
        pytest.skip(f"{name} not in the zoo")
    fn, args = _jitted(name)
    out = jax.device_get(fn(*args))
    logits = out["logits"] if isinstance(out, dict) else out
    assert logits.shape == (args[1].shape[0], 10) and logits.dtype == np.float32
    if isinstance(out, dict) and "probs" in out:
        np.testing.assert_allclose(out["probs"].sum(axis=-1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("name", NAMES)
def test_seed_fixes_the_inputs(name):
    build = models.get_model(name).build
    fn0, args0 = build(0)
    fn0b, args0b = build(0)
    _, args1 = build(1)
    a, b = _leaves(args0), _leaves(args0b)
    assert [x.tobytes() for x in a] == [x.tobytes() for x in b]
    assert [x.dtype for x in a] == [x.dtype for x in b]
    # Another seed changes every weight and the batch (optimizer state starts at zero either way).
    for x, y in zip(_leaves(args0[0]) + _leaves(args0[-1]), _leaves(args1[0]) + _leaves(args1[-1])):
        assert not np.array_equal(x, y)
    assert _program(name).fingerprint == Program.from_function(
        fn0b, args0b, Provenance("model", name, 0)).fingerprint
