"""The third-party zoo: workloads written with the JAX ecosystem's libraries, not by us.

xlaprobe's own zoo (`xlaprobe.sources.models`) is code we wrote; the programs users check are
written with Keras 3, keras-hub, Equinox, Haiku, Flax, optax, jraph and JAX's own library code
(``jax.scipy``, ``jax.random``, ``jnp.linalg``, ``jnp.fft``, ``jax.experimental.ode``). Each entry
here is a `ModelSpec` (``library`` names the library) built the way that library's users build it
(its layers, its losses, its optimizers, its training idiom), at small sizes, with random weights
and no download: Keras applications with ``weights=None``, keras-hub backbones constructed from
sizes, never from a preset.

Conventions are the zoo's (see `xlaprobe.sources.models`): ``build(seed) -> (fn, args)`` with
concrete NumPy arguments; a ``"train_step"`` returns ``(loss, *new_state)`` with gradients and an
optimizer update; a ``"forward"`` returns outputs. Weights are the library's own shapes filled
from NumPy generators seeded by the seed (`_fill`): initializers that call `jax.random` compile
one XLA program per shape, and NumPy draws are the same on every jaxlib release.

The libraries are the ``ecosystem`` extra; keras-hub is installed apart, without its
``tensorflow-text`` requirement (see the README). A library that is missing makes the build of its
workloads raise `InvalidArgument` with the install line; listing needs none of them. Keras runs on
the JAX backend: ``KERAS_BACKEND`` is set to ``jax`` before Keras is first imported, and a process
that already imported Keras with another backend gets `InvalidArgument`.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from xlaprobe.errors import InvalidArgument
from xlaprobe.sources.zoospec import BuildFn, ModelSpec

#: pip package of each importable module the workloads need (for the install hint).
_PACKAGES = {"keras": "keras", "keras_hub": "keras-hub", "equinox": "equinox", "haiku": "dm-haiku",
             "jraph": "jraph", "flax": "flax", "optax": "optax"}


def _require(module: str) -> Any:
    """Import `module` (Keras on the JAX backend).

    Raises:
        InvalidArgument: it is not installed (the message gives the install line), or Keras was
            already imported with a backend other than JAX.
    """
    if module in ("keras", "keras_hub"):
        os.environ.setdefault("KERAS_BACKEND", "jax")
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        hint = ("pip install --no-deps 'keras-hub>=0.32,<0.33' (after the ecosystem extra: "
                "see the README)" if module == "keras_hub" else "pip install 'xlaprobe[ecosystem]'")
        raise InvalidArgument(f"this workload needs {_PACKAGES.get(module, module)} ({exc}): "
                              f"{hint}") from exc
    if module in ("keras", "keras_hub"):
        backend = importlib.import_module("keras").backend.backend()
        if backend != "jax":
            raise InvalidArgument(f"Keras runs on the '{backend}' backend in this process; the "
                                  "ecosystem zoo needs KERAS_BACKEND=jax")
    return mod


def _rngs(seed: int) -> tuple[np.random.Generator, np.random.Generator]:
    """Independent NumPy generators for the weights and for the batch of one seed."""
    return np.random.default_rng([seed, 0]), np.random.default_rng([seed, 1])


def _fill_leaf(name: str, shape: tuple[int, ...], dtype: Any,
               rng: np.random.Generator) -> np.ndarray:
    """A random value for one parameter, by its name and shape.

    Matrices and kernels (2 or more axes) are normal with std ``1/sqrt(fan_in)`` (all axes but the
    last); norm scales, batch-norm variances and ``gamma`` uniform in [0.9, 1.1] (a variance must be
    positive); anything else (biases, shifts, means) normal with std 0.02: never the exact 0 and 1
    of a fresh initializer, so a fault in adding or scaling by them shows.
    """
    dtype = np.dtype(dtype)
    if not np.issubdtype(dtype, np.floating):
        return np.zeros(shape, dtype)
    lowered = name.lower()
    if any(word in lowered for word in ("scale", "gamma", "variance", "var")) and len(shape) <= 1:
        value = rng.uniform(0.9, 1.1, shape)
    elif len(shape) >= 2:
        value = rng.standard_normal(shape) / np.sqrt(max(1, int(np.prod(shape[:-1]))))
    else:
        value = 0.02 * rng.standard_normal(shape)
    return np.asarray(value, dtype)


def _fill(tree: Any, rng: np.random.Generator) -> Any:
    """`_fill_leaf` over every array leaf of a pytree (abstract ``ShapeDtypeStruct`` or concrete),
    named by its key path; non-array leaves (None, Python scalars, functions) are kept."""
    import jax  # on a build only: the registry loads without jax

    def leaf(path: Any, x: Any) -> Any:
        if not hasattr(x, "shape") or not hasattr(x, "dtype"):
            return x
        return _fill_leaf(jax.tree_util.keystr(path), tuple(x.shape), x.dtype, rng)

    return jax.tree_util.tree_map_with_path(leaf, tree)


def _ce(logits: Any, labels: Any) -> Any:
    """Mean softmax cross-entropy (optax) of float32 ``logits[..., C]`` against int32 labels."""
    optax = _require("optax")
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()


def _opt_state(tx: Any, params: Any) -> Any:
    """The optax state ``tx.init(params)`` as NumPy arrays (one small jit: some optimizers start
    away from zero, so the state is not its abstract value's zeros)."""
    import jax  # on a build only: the registry loads without jax
    return jax.tree_util.tree_map(np.asarray, jax.jit(tx.init)(params))


# ------------------------------------------------------------------------------------------ Keras

def _keras_values(variables: list[Any], rng: np.random.Generator) -> list[np.ndarray]:
    """NumPy values for a list of Keras variables: the variable's own value for integer and
    bookkeeping variables, else `_fill_leaf` by the variable's path."""
    values = []
    for v in variables:
        dtype = np.dtype(v.dtype)
        if np.issubdtype(dtype, np.floating) and "seed_generator" not in v.path:
            values.append(_fill_leaf(v.path, tuple(v.shape), dtype, rng))
        else:
            values.append(np.asarray(v.value))
    return values


def _keras_trainer(model: Any, optimizer: Any, loss: Callable[[Any, Any], Any],
                   make_batch: Callable[[np.random.Generator], tuple[Any, Any]]) -> BuildFn:
    """The build function of a Keras 3 model's training step in the JAX backend's stateless idiom
    (`Model.stateless_call` under `jax.value_and_grad`, then `Optimizer.stateless_apply`).

    The step takes ``(trainable, non_trainable, optimizer_variables, (x, y))`` (lists of arrays in
    the order of the model's and optimizer's variables) and returns ``(loss: f32[], trainable,
    non_trainable, optimizer_variables)`` after one update.
    """
    import jax  # on a build only: the registry loads without jax
    optimizer.build(model.trainable_variables)

    def loss_fn(trainable: Any, non_trainable: Any, x: Any, y: Any) -> Any:
        pred, non_trainable = model.stateless_call(trainable, non_trainable, x, training=True)
        return loss(y, pred), non_trainable

    def train_step(trainable: Any, non_trainable: Any, opt_vars: Any, batch: Any) -> Any:
        x, y = batch
        (value, non_trainable), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            trainable, non_trainable, x, y)
        trainable, opt_vars = optimizer.stateless_apply(opt_vars, grads, trainable)
        return value, trainable, non_trainable, opt_vars

    def build(seed: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        w_rng, b_rng = _rngs(seed)
        trainable = _keras_values(model.trainable_variables, w_rng)
        non_trainable = _keras_values(model.non_trainable_variables, w_rng)
        opt_vars = [np.asarray(v.value) for v in optimizer.variables]
        return train_step, (trainable, non_trainable, opt_vars, make_batch(b_rng))

    return build


def _keras_sparse_ce(y: Any, logits: Any) -> Any:
    """Keras' mean sparse categorical cross-entropy of float32 logits against int32 labels."""
    keras = _require("keras")
    return keras.ops.mean(keras.losses.sparse_categorical_crossentropy(y, logits,
                                                                       from_logits=True))


def _image_batch(batch: int, size: int, classes: int) -> Callable[[np.random.Generator], Any]:
    """A batch maker: ``(images f32[batch, size, size, 3], labels i32[batch] in [0, classes))``."""
    def make(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        return (rng.standard_normal((batch, size, size, 3), dtype=np.float32),
                rng.integers(0, classes, (batch,), dtype=np.int32))
    return make


@functools.cache
def _keras_mlp() -> BuildFn:
    """Keras 3 Sequential MLP 24->48->48->10 (gelu, layer norm, swish); batch f32[8, 24], AdamW."""
    keras = _require("keras")
    layers = keras.layers
    model = keras.Sequential([
        keras.Input((24,)), layers.Dense(48, activation="gelu"), layers.LayerNormalization(),
        layers.Dense(48, activation="swish"), layers.Dense(10)])
    return _keras_trainer(model, keras.optimizers.AdamW(1e-3, weight_decay=0.01), _keras_sparse_ce,
                          lambda rng: (rng.standard_normal((8, 24), dtype=np.float32),
                                       rng.integers(0, 10, (8,), dtype=np.int32)))


@functools.cache
def _keras_cnn() -> BuildFn:
    """Keras 3 CNN on f32[4, 16, 16, 3] (conv, batch norm, pools, depthwise); RMSprop-momentum."""
    keras = _require("keras")
    layers = keras.layers
    model = keras.Sequential([
        keras.Input((16, 16, 3)), layers.Conv2D(8, 3, padding="same"), layers.BatchNormalization(),
        layers.ReLU(), layers.MaxPooling2D(), layers.DepthwiseConv2D(3, padding="same"),
        layers.Conv2D(16, 1, activation="relu"), layers.GlobalAveragePooling2D(),
        layers.Dense(10)])
    return _keras_trainer(model, keras.optimizers.RMSprop(1e-3, momentum=0.9), _keras_sparse_ce,
                          _image_batch(4, 16, 10))


@functools.cache
def _keras_mobilenet() -> BuildFn:
    """keras.applications.MobileNetV3Small, weights=None, on f32[2, 32, 32, 3]; SGD-momentum."""
    keras = _require("keras")
    model = keras.applications.MobileNetV3Small(
        input_shape=(32, 32, 3), alpha=0.75, minimalistic=True, weights=None, classes=10,
        include_preprocessing=False, classifier_activation=None)
    return _keras_trainer(model, keras.optimizers.SGD(0.01, momentum=0.9), _keras_sparse_ce,
                          _image_batch(2, 32, 10))


@functools.cache
def _keras_hub_gpt2() -> BuildFn:
    """keras_hub GPT2CausalLM from sizes (vocab 64, 2 layers, width 32) on i32[2, 17]; AdamW."""
    keras, keras_hub = _require("keras"), _require("keras_hub")
    backbone = keras_hub.models.GPT2Backbone(vocabulary_size=64, num_layers=2, num_heads=2,
                                             hidden_dim=32, intermediate_dim=64, dropout=0.0,
                                             max_sequence_length=16)
    model = keras_hub.models.GPT2CausalLM(backbone=backbone, preprocessor=None)

    def loss(y: Any, logits: Any) -> Any:
        return _keras_sparse_ce(y, logits)

    def batch(rng: np.random.Generator) -> Any:
        tokens = rng.integers(0, 64, (2, 17), dtype=np.int32)
        return ({"token_ids": tokens[:, :-1], "padding_mask": np.ones((2, 16), np.int32)},
                tokens[:, 1:])

    return _keras_trainer(model, keras.optimizers.AdamW(3e-4), loss, batch)


@functools.cache
def _keras_hub_bert() -> BuildFn:
    """keras_hub BertTextClassifier from sizes (2 layers, 3 classes), padded i32[4, 16]; Adam."""
    keras, keras_hub = _require("keras"), _require("keras_hub")
    backbone = keras_hub.models.BertBackbone(vocabulary_size=64, num_layers=2, num_heads=2,
                                             hidden_dim=32, intermediate_dim=64, dropout=0.0,
                                             max_sequence_length=16)
    model = keras_hub.models.BertTextClassifier(backbone=backbone, num_classes=3,
                                                preprocessor=None, dropout=0.0)

    def batch(rng: np.random.Generator) -> Any:
        mask = np.ones((4, 16), np.int32)
        mask[:, 12:] = 0  # padded tails: the attention mask matters
        return ({"token_ids": rng.integers(0, 64, (4, 16), dtype=np.int32),
                 "segment_ids": np.zeros((4, 16), np.int32), "padding_mask": mask},
                rng.integers(0, 3, (4,), dtype=np.int32))

    return _keras_trainer(model, keras.optimizers.Adam(1e-3), _keras_sparse_ce, batch)


@functools.cache
def _keras_hub_llama() -> BuildFn:
    """keras_hub LlamaCausalLM from sizes (4 query, 2 key-value heads, width 32); Lion."""
    keras, keras_hub = _require("keras"), _require("keras_hub")
    backbone = keras_hub.models.LlamaBackbone(vocabulary_size=64, num_layers=2, num_query_heads=4,
                                              num_key_value_heads=2, hidden_dim=32,
                                              intermediate_dim=64)
    model = keras_hub.models.LlamaCausalLM(backbone=backbone, preprocessor=None)

    def batch(rng: np.random.Generator) -> Any:
        tokens = rng.integers(0, 64, (2, 17), dtype=np.int32)
        return ({"token_ids": tokens[:, :-1], "padding_mask": np.ones((2, 16), np.int32)},
                tokens[:, 1:])

    return _keras_trainer(model, keras.optimizers.Lion(1e-4), _keras_sparse_ce, batch)


# ---------------------------------------------------------------------------------------- Equinox

def _eqx_trainer(make: Callable[[Any], Any], loss: Callable[[Any, Any], Any], tx: Any,
                 make_batch: Callable[[np.random.Generator], Any]) -> BuildFn:
    """The build function of an Equinox model's training step: `eqx.partition` into arrays and
    static parts, `eqx.filter_value_and_grad`, an optax update, `eqx.combine`. The step takes
    ``(params, opt_state, batch)`` and returns ``(loss, params, opt_state)``; the model is made
    abstractly (`eqx.filter_eval_shape`) and filled by `_fill`."""
    import jax  # on a build only: the registry loads without jax
    eqx, optax = _require("equinox"), _require("optax")
    abstract = eqx.filter_eval_shape(make, jax.random.key(0))
    is_array = lambda x: isinstance(x, jax.ShapeDtypeStruct)  # noqa: E731
    abstract_params, static = eqx.partition(abstract, is_array)

    def train_step(params: Any, opt_state: Any, batch: Any) -> Any:
        def loss_fn(p: Any) -> Any:
            return loss(eqx.combine(p, static), batch)

        value, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return value, optax.apply_updates(params, updates), opt_state

    def build(seed: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        w_rng, b_rng = _rngs(seed)
        params = _fill(abstract_params, w_rng)
        return train_step, (params, _opt_state(tx, params), make_batch(b_rng))

    return build


@functools.cache
def _equinox_cnn() -> BuildFn:
    """Equinox CNN over vmap of CHW images f32[4, 3, 16, 16]; optax AdamW."""
    import jax  # on a build only: the registry loads without jax
    eqx, optax = _require("equinox"), _require("optax")
    nn = eqx.nn

    def make(key: Any) -> Any:
        k = jax.random.split(key, 3)
        return [nn.Conv2d(3, 8, 3, padding=1, key=k[0]), nn.GroupNorm(2, 8),
                nn.Conv2d(8, 16, 3, stride=2, padding=1, key=k[1]),
                nn.MLP(16, 10, 32, depth=2, activation=jax.nn.silu, key=k[2])]

    def forward(layers: Any, x: Any) -> Any:  # one image, CHW, as Equinox layers take it
        conv1, norm, conv2, mlp = layers
        x = jax.nn.relu(norm(conv1(x)))
        x = nn.MaxPool2d(2, 2)(x)
        x = jax.nn.relu(conv2(x))
        return mlp(x.mean(axis=(1, 2)))

    def loss(model: Any, batch: Any) -> Any:
        logits = jax.vmap(lambda x: forward(model, x))(batch["images"])
        return _ce(logits, batch["labels"])

    def batch(rng: np.random.Generator) -> Any:
        return {"images": rng.standard_normal((4, 3, 16, 16), dtype=np.float32),
                "labels": rng.integers(0, 10, (4,), dtype=np.int32)}

    return _eqx_trainer(make, loss, optax.adamw(1e-3), batch)


@functools.cache
def _equinox_gru() -> BuildFn:
    """Equinox GRU language model over lax.scan, tokens i32[2, 13]; optax Adam."""
    import jax  # on a build only: the registry loads without jax
    eqx, optax = _require("equinox"), _require("optax")
    nn = eqx.nn

    def make(key: Any) -> Any:
        k = jax.random.split(key, 3)
        return [nn.Embedding(32, 16, key=k[0]), nn.GRUCell(16, 24, key=k[1]),
                nn.Linear(24, 32, key=k[2]), nn.LayerNorm(24)]

    def loss(model: Any, batch: Any) -> Any:
        embed, cell, head, norm = model

        def sequence(tokens: Any) -> Any:
            def step(h: Any, token: Any) -> Any:
                h = cell(embed(token), h)
                return h, head(norm(h))
            _, logits = jax.lax.scan(step, np.zeros(24, np.float32), tokens[:-1])
            return logits

        logits = jax.vmap(sequence)(batch)
        return _ce(logits, batch[:, 1:])

    return _eqx_trainer(make, loss, optax.adam(3e-3),
                        lambda rng: rng.integers(0, 32, (2, 13), dtype=np.int32))


# ------------------------------------------------------------------------------------------ Haiku

@functools.cache
def _haiku_resnet() -> BuildFn:
    """A Haiku ResNet block stack with batch norm in train mode (`hk.transform_with_state`)."""
    import jax  # on a build only: the registry loads without jax
    hk, optax = _require("haiku"), _require("optax")

    def net(x: Any, is_training: bool) -> Any:
        x = hk.Conv2D(8, 3)(x)
        for channels, stride in ((8, 1), (16, 2)):
            y = hk.Conv2D(channels, 3, stride=stride)(x)
            y = hk.BatchNorm(True, True, 0.9)(y, is_training)
            y = hk.Conv2D(channels, 3)(jax.nn.relu(y))
            shortcut = x if stride == 1 else hk.Conv2D(channels, 1, stride=stride)(x)
            x = jax.nn.relu(shortcut + y)
        return hk.Linear(10)(hk.LayerNorm(-1, True, True)(x.mean(axis=(1, 2))))

    model = hk.transform_with_state(net)
    tx = optax.sgd(0.05, momentum=0.9, nesterov=True)
    images = jax.ShapeDtypeStruct((4, 16, 16, 3), np.float32)
    abstract_params, abstract_state = jax.eval_shape(
        lambda x: model.init(jax.random.key(0), x, True), images)

    def train_step(params: Any, state: Any, opt_state: Any, batch: Any) -> Any:
        def loss_fn(p: Any) -> Any:
            logits, new_state = model.apply(p, state, None, batch["images"], True)
            return _ce(logits, batch["labels"]), new_state

        (value, state), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return value, optax.apply_updates(params, updates), state, opt_state

    def build(seed: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        w_rng, b_rng = _rngs(seed)
        params, state = _fill(abstract_params, w_rng), _fill(abstract_state, w_rng)
        batch = {"images": b_rng.standard_normal((4, 16, 16, 3), dtype=np.float32),
                 "labels": b_rng.integers(0, 10, (4,), dtype=np.int32)}
        return train_step, (params, state, _opt_state(tx, params), batch)

    return build


@functools.cache
def _haiku_transformer() -> BuildFn:
    """A Haiku transformer encoder block (`hk.MultiHeadAttention`) classifying sequences."""
    import jax  # on a build only: the registry loads without jax
    hk, optax = _require("haiku"), _require("optax")

    def net(tokens: Any) -> Any:
        x = hk.Embed(32, 16)(tokens)
        x = x + hk.get_parameter("pos", (tokens.shape[1], 16), init=jax.numpy.zeros)
        for _ in range(2):
            h = hk.LayerNorm(-1, True, True)(x)
            attention = hk.MultiHeadAttention(4, 4, w_init=hk.initializers.VarianceScaling(1.0))
            x = x + attention(h, h, h)
            h = hk.LayerNorm(-1, True, True)(x)
            x = x + hk.nets.MLP([32, 16], activation=jax.nn.gelu)(h)
        return hk.Linear(5)(x.mean(axis=1))

    model = hk.without_apply_rng(hk.transform(net))
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(1e-3))
    abstract = jax.eval_shape(lambda t: model.init(jax.random.key(0), t),
                              jax.ShapeDtypeStruct((4, 12), np.int32))

    def train_step(params: Any, opt_state: Any, batch: Any) -> Any:
        def loss_fn(p: Any) -> Any:
            return _ce(model.apply(p, batch["tokens"]), batch["labels"])

        value, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return value, optax.apply_updates(params, updates), opt_state

    def build(seed: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        w_rng, b_rng = _rngs(seed)
        params = _fill(abstract, w_rng)
        batch = {"tokens": b_rng.integers(0, 32, (4, 12), dtype=np.int32),
                 "labels": b_rng.integers(0, 5, (4,), dtype=np.int32)}
        return train_step, (params, _opt_state(tx, params), batch)

    return build


# ------------------------------------------------------------------------------------------- Flax

@functools.cache
def _flax_linen_cnn() -> BuildFn:
    """A Flax linen CNN with batch norm (``mutable=["batch_stats"]``), dropout off, avg/max pool."""
    import jax  # on a build only: the registry loads without jax
    optax = _require("optax")
    nn = _require("flax.linen")

    class CNN(nn.Module):
        @nn.compact
        def __call__(self, x: Any, train: bool) -> Any:
            x = nn.Conv(8, (3, 3))(x)
            x = nn.relu(nn.BatchNorm(use_running_average=not train, momentum=0.9)(x))
            x = nn.max_pool(x, (2, 2), strides=(2, 2))
            x = nn.Conv(16, (3, 3), feature_group_count=2)(x)
            x = nn.avg_pool(nn.elu(x), (2, 2), strides=(2, 2))
            x = nn.Dense(32)(x.reshape(x.shape[0], -1))
            return nn.Dense(10)(nn.tanh(x))

    model, tx = CNN(), optax.adabelief(1e-3)
    abstract = jax.eval_shape(lambda x: model.init(jax.random.key(0), x, False),
                              jax.ShapeDtypeStruct((4, 16, 16, 3), np.float32))

    def train_step(params: Any, batch_stats: Any, opt_state: Any, batch: Any) -> Any:
        def loss_fn(p: Any) -> Any:
            logits, updates = model.apply({"params": p, "batch_stats": batch_stats},
                                          batch["images"], True, mutable=["batch_stats"])
            return _ce(logits, batch["labels"]), updates["batch_stats"]

        (value, batch_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return value, optax.apply_updates(params, updates), batch_stats, opt_state

    def build(seed: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        w_rng, b_rng = _rngs(seed)
        variables = _fill(abstract, w_rng)
        params = variables["params"]
        batch = {"images": b_rng.standard_normal((4, 16, 16, 3), dtype=np.float32),
                 "labels": b_rng.integers(0, 10, (4,), dtype=np.int32)}
        return train_step, (params, variables["batch_stats"], _opt_state(tx, params), batch)

    return build


@functools.cache
def _flax_nnx_rnn() -> BuildFn:
    """A Flax NNX sequence tagger: a 1-D `nnx.Conv` front end, `nnx.RNN` over an
    `nnx.OptimizedLSTMCell`, an RMS norm; optax LAMB with decoupled weight decay."""
    import jax  # on a build only: the registry loads without jax
    optax = _require("optax")
    nnx = _require("flax.nnx")

    class Tagger(nnx.Module):
        def __init__(self, rngs: Any):
            self.embed = nnx.Embed(32, 16, rngs=rngs)
            self.conv = nnx.Conv(16, 16, (3,), padding="SAME", rngs=rngs)
            self.rnn = nnx.RNN(nnx.OptimizedLSTMCell(16, 24, rngs=rngs), rngs=False)  # zero carry
            self.norm = nnx.RMSNorm(24, rngs=rngs)
            self.head = nnx.Linear(24, 6, rngs=rngs)

        def __call__(self, tokens: Any) -> Any:
            x = jax.nn.silu(self.conv(self.embed(tokens)))
            zeros = jax.numpy.zeros((tokens.shape[0], 24), x.dtype)
            return self.head(self.norm(self.rnn(x, initial_carry=(zeros, zeros))))

    graphdef, abstract = nnx.split(nnx.eval_shape(lambda: Tagger(nnx.Rngs(0))))
    abstract = nnx.to_pure_dict(abstract)
    tx = optax.chain(optax.add_decayed_weights(1e-4), optax.lamb(1e-3))

    def train_step(params: Any, opt_state: Any, batch: Any) -> Any:
        def loss_fn(p: Any) -> Any:
            return _ce(nnx.merge(graphdef, p)(batch["tokens"]), batch["tags"])

        value, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return value, optax.apply_updates(params, updates), opt_state

    def build(seed: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        w_rng, b_rng = _rngs(seed)
        params = _fill(abstract, w_rng)
        batch = {"tokens": b_rng.integers(0, 32, (2, 10), dtype=np.int32),
                 "tags": b_rng.integers(0, 6, (2, 10), dtype=np.int32)}
        return train_step, (params, _opt_state(tx, params), batch)

    return build


# ------------------------------------------------------------------------------------------ optax

def _optax_zoo(optimizers: dict[str, Any]) -> BuildFn:
    """One training step of a small MLP regression under each of `optimizers` (name -> optax
    transformation), from the same parameters: returns ``(loss, {name: (params, opt_state)})``,
    so every optimizer's update rule is in one program."""
    import jax  # on a build only: the registry loads without jax
    optax = _require("optax")
    shapes = {"w1": (12, 24), "b1": (24,), "w2": (24, 4), "b2": (4,)}

    def loss_fn(p: Any, batch: Any) -> Any:
        h = jax.nn.softplus(batch["x"] @ p["w1"] + p["b1"])
        return optax.huber_loss(h @ p["w2"] + p["b2"], batch["y"]).mean()

    def train_step(params: Any, opt_states: Any, batch: Any) -> Any:
        value, grads = jax.value_and_grad(loss_fn)(params, batch)
        out = {}
        for name, tx in optimizers.items():
            updates, state = tx.update(grads, opt_states[name], params)
            out[name] = (optax.apply_updates(params, updates), state)
        return value, out

    def build(seed: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        w_rng, b_rng = _rngs(seed)
        params = {k: _fill_leaf(k, s, np.float32, w_rng) for k, s in shapes.items()}
        # A state one step in (count 1, nonzero moments): the first step's special cases
        # (zero second moments, bias correction of step 0) would hide the general rule.
        states = {}
        for name, tx in optimizers.items():
            state = jax.tree_util.tree_map(np.asarray, jax.jit(tx.init)(params))
            states[name] = jax.tree_util.tree_map(
                lambda x: (x + 1 if np.issubdtype(x.dtype, np.integer)
                           else x + np.asarray(0.01 * np.abs(w_rng.standard_normal(x.shape)),
                                               x.dtype)), state)
        batch = {"x": b_rng.standard_normal((16, 12), dtype=np.float32),
                 "y": b_rng.standard_normal((16, 4), dtype=np.float32)}
        return train_step, (params, states, batch)

    return build


@functools.cache
def _optax_adaptive() -> BuildFn:
    """`_optax_zoo` of twelve adaptive optimizers (one with a warmup-cosine schedule)."""
    optax = _require("optax")
    schedule = optax.warmup_cosine_decay_schedule(0.0, 1e-2, 5, 50)
    return _optax_zoo({
        "adamw": optax.adamw(schedule), "nadam": optax.nadam(1e-3), "radam": optax.radam(1e-3),
        "adamax": optax.adamax(1e-3), "amsgrad": optax.amsgrad(1e-3),
        "adafactor": optax.adafactor(1e-2), "yogi": optax.yogi(1e-2),
        "adabelief": optax.adabelief(1e-3), "novograd": optax.novograd(1e-3),
        "rmsprop": optax.rmsprop(1e-3, centered=True, momentum=0.9),
        "adagrad": optax.adagrad(1e-2), "adadelta": optax.adadelta(1.0),
    })


@functools.cache
def _optax_other() -> BuildFn:
    """`_optax_zoo` of twelve more transformations (layer-wise, sign-based, clipping, chains)."""
    optax = _require("optax")
    return _optax_zoo({
        "sgd_nesterov": optax.sgd(optax.exponential_decay(0.1, 10, 0.5), 0.9, nesterov=True),
        "lamb": optax.lamb(1e-3), "lars": optax.lars(1e-2), "lion": optax.lion(1e-4),
        "fromage": optax.fromage(1e-2), "sm3": optax.sm3(1e-2), "adamaxw": optax.adamaxw(1e-3),
        "clipped_adam": optax.chain(optax.clip_by_global_norm(0.5), optax.scale_by_adam(),
                                    optax.scale_by_learning_rate(1e-3)),
        "adan": optax.adan(1e-3), "optimistic": optax.optimistic_gradient_descent(1e-2),
        "lookahead_free": optax.chain(optax.clip(1.0), optax.add_decayed_weights(1e-3),
                                      optax.scale_by_rss(), optax.scale(-1e-2)),
        "rprop": optax.rprop(1e-3),
    })


# ------------------------------------------------------------------------------------------ jraph

@functools.cache
def _jraph_gnn() -> BuildFn:
    """A jraph graph network (edge, node and global updates by MLPs, segment sums) over a batch of
    two random graphs, then a GAT layer; node classification and a global regression."""
    import jax  # on a build only: the registry loads without jax
    import jax.numpy as jnp  # on a build only: the registry loads without jax
    jraph, optax = _require("jraph"), _require("optax")
    tx = optax.adam(1e-3)
    nodes, edges, feat = 10, 24, 8
    shapes = {"edge": (3 * feat + 4, feat), "node": (2 * feat + 4, feat), "glob": (feat + 4, 4),
              "att_q": (feat, feat), "att_logit": (2 * feat, 1), "head": (feat, 3)}

    def loss_fn(p: Any, graph: Any, labels: Any, target: Any) -> Any:
        def edge_fn(e: Any, s: Any, r: Any, g: Any) -> Any:
            return jax.nn.relu(jnp.concatenate([e, s, r, g], -1) @ p["edge"])

        def node_fn(n: Any, sent: Any, received: Any, g: Any) -> Any:
            return jax.nn.relu(jnp.concatenate([n, received, g], -1) @ p["node"]) + 0 * sent

        def global_fn(n: Any, e: Any, g: Any) -> Any:
            return jnp.tanh(jnp.concatenate([n, g], -1) @ p["glob"]) + 0 * e.sum()

        net = jraph.GraphNetwork(edge_fn, node_fn, global_fn)
        out = net(graph)
        gat = jraph.GAT(lambda n: n @ p["att_q"],
                        lambda s, r, e: jax.nn.leaky_relu(jnp.concatenate([s, r], -1)
                                                          @ p["att_logit"]),
                        jax.nn.elu)
        out = gat(out._replace(edges=None))
        node_loss = _ce(out.nodes @ p["head"], labels)
        return node_loss + ((out.globals - target) ** 2).mean()

    def train_step(params: Any, opt_state: Any, graph: Any, labels: Any, target: Any) -> Any:
        value, grads = jax.value_and_grad(loss_fn)(params, graph, labels, target)
        updates, opt_state = tx.update(grads, opt_state, params)
        return value, optax.apply_updates(params, updates), opt_state

    def build(seed: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        w_rng, b_rng = _rngs(seed)
        params = {k: _fill_leaf(k, s, np.float32, w_rng) for k, s in shapes.items()}
        # Two graphs of 4 and 6 nodes; each edge stays inside its graph.
        n_node, n_edge = np.array([4, 6], np.int32), np.array([10, 14], np.int32)
        senders = np.concatenate([b_rng.integers(0, 4, 10), 4 + b_rng.integers(0, 6, 14)])
        receivers = np.concatenate([b_rng.integers(0, 4, 10), 4 + b_rng.integers(0, 6, 14)])
        graph = jraph.GraphsTuple(
            nodes=b_rng.standard_normal((nodes, feat), dtype=np.float32),
            edges=b_rng.standard_normal((edges, feat), dtype=np.float32),
            globals=b_rng.standard_normal((2, 4), dtype=np.float32),
            senders=senders.astype(np.int32), receivers=receivers.astype(np.int32),
            n_node=n_node, n_edge=n_edge)
        labels = b_rng.integers(0, 3, (nodes,), dtype=np.int32)
        target = b_rng.standard_normal((2, 4), dtype=np.float32)
        return train_step, (params, _opt_state(tx, params), graph, labels, target)

    return build


# ------------------------------------------------------------------------------- JAX library code

def _jax_train(loss_fn: Callable[[Any, Any], Any], shapes: dict[str, tuple[int, ...]],
               make_batch: Callable[[np.random.Generator], Any], lr: float = 1e-2) -> BuildFn:
    """The build function of a gradient step ``params - lr * grad`` of ``loss_fn(params, batch)``
    (plain JAX, no optimizer library): ``(params, batch) -> (loss, new_params)``."""
    import jax  # on a build only: the registry loads without jax

    def train_step(params: Any, batch: Any) -> Any:
        value, grads = jax.value_and_grad(loss_fn)(params, batch)
        return value, jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads)

    def build(seed: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        w_rng, b_rng = _rngs(seed)
        params = {k: _fill_leaf(k, s, np.float32, w_rng) for k, s in shapes.items()}
        return train_step, (params, make_batch(b_rng))

    return build


@functools.cache
def _jax_special() -> BuildFn:
    """Maximum likelihood over `jax.scipy.stats` densities and `jax.scipy.special` functions at
    ordinary arguments (away from poles and zeros): gradient step on the distributions' params."""
    import jax  # on a build only: the registry loads without jax
    import jax.numpy as jnp  # on a build only: the registry loads without jax
    from jax.scipy import special, stats  # on a build only: the registry loads without jax

    def loss_fn(p: Any, b: Any) -> Any:
        shape = 2.0 + jax.nn.softplus(p["gamma_a"])           # > 2: away from lgamma's poles
        alpha, beta = 1.5 + jax.nn.softplus(p["ab"][0]), 2.0 + jax.nn.softplus(p["ab"][1])
        nll = -stats.gamma.logpdf(b["pos"], shape).mean()
        nll -= stats.beta.logpdf(b["unit"], alpha, beta).mean()
        nll -= stats.norm.logpdf(b["real"], p["loc"], 1.0 + jax.nn.softplus(p["scale"])).mean()
        nll -= stats.t.logpdf(b["real"], 3.0 + jax.nn.softplus(p["dof"])).mean()
        nll -= stats.poisson.logpmf(b["counts"], 1.0 + jax.nn.softplus(p["rate"])).mean()
        extra = (special.digamma(shape) + special.betaln(alpha, beta)
                 + special.logsumexp(b["real"] * p["loc"]) + special.xlogy(shape, alpha)
                 + special.entr(b["unit"]).sum() + special.erfc(p["loc"]).sum()
                 + special.log_ndtr(b["real"]).mean() + special.ndtri(b["unit"]).mean()
                 + special.i0e(shape) + special.i1e(alpha) + special.expit(p["loc"]).sum())
        return nll + 0.01 * extra + 0.01 * jnp.sum(special.gammainc(shape, b["pos"]))

    shapes = {"gamma_a": (), "ab": (2,), "loc": (3,), "scale": (3,), "dof": (), "rate": ()}

    def batch(rng: np.random.Generator) -> Any:
        return {"pos": rng.gamma(3.0, 1.0, 16).astype(np.float32) + 0.5,
                "unit": rng.uniform(0.1, 0.9, 16).astype(np.float32),
                "real": rng.standard_normal((16, 3)).astype(np.float32),
                "counts": rng.poisson(3.0, 16).astype(np.float32)}

    return _jax_train(loss_fn, shapes, batch)


@functools.cache
def _jax_random() -> BuildFn:
    """`jax.random` samplers from a key argument (threefry): the program draws and summarizes."""
    import jax  # on a build only: the registry loads without jax
    import jax.numpy as jnp  # on a build only: the registry loads without jax

    def sample(key_data: Any, logits: Any) -> Any:
        key = jax.random.wrap_key_data(key_data, impl="threefry2x32")
        k = jax.random.split(key, 10)
        return {
            "normal": jax.random.normal(k[0], (64,)),
            "uniform": jax.random.uniform(k[1], (64,), minval=-2.0, maxval=3.0),
            "bernoulli": jax.random.bernoulli(k[2], 0.3, (64,)),
            "categorical": jax.random.categorical(k[3], logits, shape=(32,)),
            "permutation": jax.random.permutation(k[4], jnp.arange(20)),
            "truncated_normal": jax.random.truncated_normal(k[5], -1.0, 2.0, (64,)),
            "exponential": jax.random.exponential(k[6], (64,)),
            "laplace": jax.random.laplace(k[7], (64,)),
            "randint": jax.random.randint(k[8], (64,), -5, 17),
            "choice": jax.random.choice(k[9], 20, (8,), replace=False),
        }

    def build(seed: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        _, b_rng = _rngs(seed)
        key_data = b_rng.integers(0, 2**32, (2,), dtype=np.uint32)
        return sample, (key_data, b_rng.standard_normal(6).astype(np.float32))

    return build


@functools.cache
def _jax_linalg() -> BuildFn:
    """A Gaussian process's marginal likelihood (Cholesky, triangular solves, log-determinant)
    plus `jnp.linalg` decompositions (QR, SVD, eigh, slogdet, solve, inv) in the loss, with a
    gradient step on the kernel's hyperparameters."""
    import jax  # on a build only: the registry loads without jax
    import jax.numpy as jnp  # on a build only: the registry loads without jax
    from jax.scipy.linalg import cho_solve  # on a build only: the registry loads without jax

    def loss_fn(p: Any, b: Any) -> Any:
        x, y = b["x"], b["y"]
        length, amp = jax.nn.softplus(p["log_length"]) + 0.3, jax.nn.softplus(p["log_amp"]) + 0.5
        d2 = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)
        k = amp * jnp.exp(-0.5 * d2 / length ** 2) + 0.1 * jnp.eye(x.shape[0])
        chol = jnp.linalg.cholesky(k)
        alpha = cho_solve((chol, True), y)
        nll = 0.5 * y @ alpha + jnp.log(jnp.diag(chol)).sum()
        m = b["m"] + p["shift"]
        q, r = jnp.linalg.qr(m)
        s = jnp.linalg.svd(m, compute_uv=False)
        w = jnp.linalg.eigvalsh(m @ m.T + jnp.eye(m.shape[0]))
        _, logdet = jnp.linalg.slogdet(m @ m.T + jnp.eye(m.shape[0]))
        sol = jnp.linalg.solve(m @ m.T + jnp.eye(m.shape[0]), b["rhs"])
        inv = jnp.linalg.inv(k)
        return (nll + 0.01 * (jnp.abs(jnp.diag(r)).sum() + s.sum() + w.sum() + logdet
                              + sol.sum() + jnp.trace(inv)) + 0.0 * q.sum())

    shapes = {"log_length": (), "log_amp": (), "shift": (6, 4)}

    def batch(rng: np.random.Generator) -> Any:
        return {"x": rng.uniform(-2, 2, (12, 2)).astype(np.float32),
                "y": rng.standard_normal(12).astype(np.float32),
                "m": rng.standard_normal((6, 4)).astype(np.float32),
                "rhs": rng.standard_normal(6).astype(np.float32)}

    return _jax_train(loss_fn, shapes, batch)


@functools.cache
def _jax_fft() -> BuildFn:
    """A spectral (Fourier neural operator style) layer: `jnp.fft.rfft`, complex weights on the
    low modes, `irfft`; plus a 2-D `fft2`/`ifft2` filter; gradient step on the weights."""
    import jax  # on a build only: the registry loads without jax
    import jax.numpy as jnp  # on a build only: the registry loads without jax

    modes = 6

    def loss_fn(p: Any, b: Any) -> Any:
        x = b["signal"]                                       # [batch, channels, length]
        spec = jnp.fft.rfft(x, axis=-1)[..., :modes]          # [b, c, modes]
        weights = p["w_re"] + 1j * p["w_im"]                  # [c, c, modes]
        mixed = jnp.einsum("bcm,cdm->bdm", spec, weights)
        full = jnp.zeros((x.shape[0], x.shape[1], x.shape[-1] // 2 + 1), mixed.dtype)
        y = jnp.fft.irfft(full.at[..., :modes].set(mixed), n=x.shape[-1], axis=-1)
        y = jax.nn.gelu(y + jnp.einsum("bcl,cd->bdl", x, p["skip"]))
        image = jnp.fft.fftshift(jnp.fft.fft2(b["image"]))
        filtered = jnp.fft.ifft2(jnp.fft.ifftshift(image * jax.nn.sigmoid(p["mask"])))
        return ((y - b["target"]) ** 2).mean() + 0.01 * jnp.abs(filtered).mean()

    shapes = {"w_re": (4, 4, modes), "w_im": (4, 4, modes), "skip": (4, 4), "mask": (8, 8)}

    def batch(rng: np.random.Generator) -> Any:
        return {"signal": rng.standard_normal((2, 4, 32)).astype(np.float32),
                "target": rng.standard_normal((2, 4, 32)).astype(np.float32),
                "image": rng.standard_normal((8, 8)).astype(np.float32)}

    return _jax_train(loss_fn, shapes, batch)


@functools.cache
def _jax_ode() -> BuildFn:
    """A neural ODE: `jax.experimental.ode.odeint` (adaptive Dormand-Prince) of a small MLP
    vector field, trained through its adjoint (the custom VJP integrates backwards)."""
    import jax.numpy as jnp  # on a build only: the registry loads without jax
    from jax.experimental.ode import odeint  # on a build only: the registry loads without jax

    def field(y: Any, t: Any, p: Any) -> Any:
        return jnp.tanh(y @ p["w1"] + p["b1"]) @ p["w2"] - 0.1 * y * t

    def loss_fn(p: Any, b: Any) -> Any:
        ys = odeint(field, b["y0"], b["times"], p, rtol=1e-4, atol=1e-4)
        return ((ys[-1] - b["target"]) ** 2).mean()

    shapes = {"w1": (4, 16), "b1": (16,), "w2": (16, 4)}

    def batch(rng: np.random.Generator) -> Any:
        return {"y0": rng.standard_normal((3, 4)).astype(np.float32),
                "times": np.linspace(0.0, 1.0, 4, dtype=np.float32),
                "target": rng.standard_normal((3, 4)).astype(np.float32)}

    return _jax_train(loss_fn, shapes, batch)


@functools.cache
def _jax_optimize() -> BuildFn:
    """`jax.scipy.optimize.minimize` (BFGS with a zoom line search, a `while_loop`) fitting an
    L2-regularized logistic regression: the solution, its loss and the iteration count."""
    import jax  # on a build only: the registry loads without jax
    import jax.numpy as jnp  # on a build only: the registry loads without jax
    from jax.scipy.optimize import minimize  # on a build only: the registry loads without jax

    def fit(x: Any, y: Any, w0: Any) -> Any:
        def objective(w: Any) -> Any:
            logits = x @ w
            return (jnp.logaddexp(0.0, logits) - y * logits).mean() + 0.05 * (w @ w)

        res = minimize(objective, w0, method="BFGS", options={"maxiter": 20})
        return {"x": res.x, "fun": res.fun, "grad": jax.grad(objective)(res.x)}

    def build(seed: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        _, b_rng = _rngs(seed)
        x = b_rng.standard_normal((32, 5)).astype(np.float32)
        y = (x @ b_rng.standard_normal(5) + 0.3 * b_rng.standard_normal(32) > 0).astype(np.float32)
        return fit, (x, y, np.zeros(5, np.float32))

    return build


# ---------------------------------------------------------------------------------------- registry

def _spec(name: str, library: str, description: str, kind: str,
          maker: Callable[[], BuildFn], large: bool = False) -> ModelSpec:
    """A zoo entry whose build makes the model once per process (`maker` is cached)."""

    def build(seed: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return maker()(seed)

    build.__doc__ = maker.__doc__
    return ModelSpec(name, description, kind, build, large=large, library=library)


def _registry() -> dict[str, ModelSpec]:
    specs = [
        _spec("keras_mlp", "keras", "Keras 3 Sequential MLP (gelu, layer norm, swish), AdamW step "
              "by stateless_call/stateless_apply", "train_step", _keras_mlp),
        _spec("keras_cnn", "keras", "Keras 3 CNN (conv, batch norm, max pool, depthwise conv, "
              "global pool), RMSprop-momentum step", "train_step", _keras_cnn),
        _spec("keras_mobilenet_v3", "keras", "keras.applications.MobileNetV3Small (minimalistic, "
              "alpha 0.75, weights=None, 32x32), SGD-momentum step; large: minutes", "train_step",
              _keras_mobilenet, large=True),
        _spec("keras_hub_gpt2", "keras-hub", "keras_hub GPT2CausalLM from sizes (2 layers, width "
              "32), AdamW step", "train_step", _keras_hub_gpt2),
        _spec("keras_hub_bert", "keras-hub", "keras_hub BertTextClassifier from sizes (2 layers, "
              "padded batch), Adam step", "train_step", _keras_hub_bert),
        _spec("keras_hub_llama", "keras-hub", "keras_hub LlamaCausalLM from sizes (GQA, RoPE, RMS "
              "norm, SwiGLU), Lion step", "train_step", _keras_hub_llama),
        _spec("equinox_cnn", "equinox", "Equinox CNN (Conv2d, GroupNorm, MaxPool2d, MLP, vmap), "
              "optax AdamW step", "train_step", _equinox_cnn),
        _spec("equinox_gru", "equinox", "Equinox GRUCell over lax.scan (embedding, layer norm), "
              "optax Adam step", "train_step", _equinox_gru),
        _spec("haiku_resnet", "dm-haiku", "Haiku residual CNN with BatchNorm "
              "(transform_with_state), SGD-Nesterov step", "train_step", _haiku_resnet),
        _spec("haiku_transformer", "dm-haiku", "Haiku transformer encoder (MultiHeadAttention, "
              "nets.MLP), clipped Adam step", "train_step", _haiku_transformer),
        _spec("flax_linen_cnn", "flax.linen", "Flax linen CNN (BatchNorm mutable batch_stats, "
              "grouped conv, pools), AdaBelief step", "train_step", _flax_linen_cnn),
        _spec("flax_nnx_rnn", "flax.nnx", "Flax NNX tagger (1-D conv, nnx.RNN of an LSTM cell, "
              "RMSNorm), LAMB step", "train_step", _flax_nnx_rnn),
        _spec("optax_adaptive", "optax", "12 optax adaptive optimizers (adamw+schedule, nadam, "
              "radam, adafactor, yogi, ...) on one MLP step", "train_step", _optax_adaptive),
        _spec("optax_other", "optax", "12 more optax transformations (lamb, lars, lion, sm3, "
              "fromage, rprop, adan, optimistic GD, clipping, ...)", "train_step", _optax_other),
        _spec("jraph_gnn", "jraph", "jraph GraphNetwork + GAT over a batch of two graphs "
              "(segment sums, segment softmax), Adam step", "train_step", _jraph_gnn),
        _spec("jax_special_stats", "jax.scipy", "jax.scipy.stats likelihoods and "
              "jax.scipy.special functions, gradient step", "train_step", _jax_special),
        _spec("jax_random", "jax.random", "jax.random samplers (normal, categorical, permutation, "
              "truncated normal, choice, ...) from a threefry key", "forward", _jax_random),
        _spec("jax_linalg", "jax.numpy.linalg", "Gaussian-process likelihood (Cholesky) plus "
              "QR, SVD, eigh, slogdet, solve, inv; gradient step", "train_step", _jax_linalg),
        _spec("jax_fft", "jax.numpy.fft", "spectral layer (rfft/irfft on low modes) and a 2-D "
              "fft2/ifft2 filter, gradient step", "train_step", _jax_fft),
        _spec("jax_ode", "jax.experimental.ode", "neural ODE by odeint (adaptive Dormand-Prince, "
              "adjoint gradient), gradient step", "train_step", _jax_ode),
        _spec("jax_optimize", "jax.scipy.optimize", "BFGS (minimize) fitting a regularized "
              "logistic regression", "forward", _jax_optimize),
    ]
    return {spec.name: spec for spec in specs}


#: The third-party zoo by name (`ModelSpec` entries whose ``library`` is not xlaprobe).
ECOSYSTEM: dict[str, ModelSpec] = _registry()

#: The modules each library's workloads import (jax itself is always there).
REQUIRES: dict[str, tuple[str, ...]] = {
    "keras": ("keras",), "keras-hub": ("keras", "keras_hub"), "equinox": ("equinox", "optax"),
    "dm-haiku": ("haiku", "optax"), "flax.linen": ("flax", "optax"), "flax.nnx": ("flax", "optax"),
    "optax": ("optax",), "jraph": ("jraph", "optax"),
}


def missing(name: str) -> list[str]:
    """The modules workload `name` needs that are not installed (empty: it can be built).
    Looks for the modules without importing them.

    Raises:
        KeyError: `name` is not in `ECOSYSTEM`.
    """
    return [m for m in REQUIRES.get(ECOSYSTEM[name].library, ())
            if importlib.util.find_spec(m) is None]
