"""The model zoo: real workloads built offline with random weights, each a pure function of arrays.

Every entry is a `ModelSpec` whose ``build(seed)`` returns ``(fn, args)``: ``fn(*args)`` is a
deterministic, JAX-traceable function of pytrees of arrays, and ``args`` are concrete NumPy arrays
(random weights, optimizer state and a random batch, all fixed by the seed). `build_program` turns
an entry into a `Program`. Nothing is downloaded: weights are random, batches are random.

Conventions by ``kind``:

* ``"train_step"``: ``args == (*state, batch)`` and ``fn(*args)`` returns ``(loss, *new_state)``,
  where ``loss`` is a float32 scalar (the loss *before* the update) and ``new_state[i]`` has the
  pytree structure, shapes and dtypes of ``state[i]``. Feeding ``(*outputs[1:], batch)`` back into
  ``fn`` runs the next step.
* ``"forward"``: ``args == (params, inputs)`` and ``fn(*args)`` returns the model's outputs.

Models are flax nnx modules made abstractly once per process (`nnx.eval_shape`, nothing
compiled); ``fn`` rebuilds the module from the parameter dict with `nnx.merge`. Weights come from
NumPy generators seeded by the seed (see `_random_params`), not from `jax.random`, whose first call
per shape compiles for seconds on CPU; so a build takes well under a second and its inputs are the
same on every jaxlib release. Parameter pytrees are plain nested dicts (`nnx.to_pure_dict`), so
output names read like ``[1]['blocks'][0]['attn']['query']['kernel']``. Floating point is float32,
token ids and labels int32. Flax and optax (the ``models`` extra) are imported on the first build,
so listing the zoo needs neither.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import jax
import jax.numpy as jnp

from xlaprobe.errors import InvalidArgument
from xlaprobe.program import Program, Provenance
from xlaprobe.sources.zoospec import BuildFn, ModelSpec
from xlaprobe.knobs import Knob, resolve_knobs
from xlaprobe.sources.ecosystem import ECOSYSTEM
from xlaprobe.sources.pipeline import PIPELINE_MODELS
from xlaprobe.sources.sharded import sharded_models

__all__ = ["MODELS", "SMALL", "BuildFn", "ModelSpec", "build_program", "get_model", "zoo"]


# ----------------------------------------------------------------------------------------- helpers

@functools.cache
def _deps() -> tuple[Any, Any, Any, Any]:
    """``(jax, jnp, nnx, optax)``, imported on first use.

    Raises:
        InvalidArgument: flax or optax is not installed.
    """
    try:
        import optax  # optional: the models extra
        from flax import nnx  # optional: the models extra
    except ImportError as exc:
        raise InvalidArgument(f"the model zoo needs flax and optax ({exc}): "
                              f"pip install 'xlaprobe[models]'") from exc
    return jax, jnp, nnx, optax


def _random_params(abstract: Any, rng: np.random.Generator) -> Any:
    """Random float32 values for an abstract parameter pytree (nested dicts of shape structs).

    Weights are drawn with NumPy rather than `jax.random`: every new shape of a `jax.random` call
    compiles an XLA program on CPU (seconds per model), and NumPy draws are the same on every jaxlib
    release. The leaf's name picks the distribution: ``kernel`` normal with std ``1/sqrt(fan_in)``,
    ``embedding`` normal with std ``1/sqrt(width)``, ``scale`` and batch-norm ``var`` uniform in
    ``[0.9, 1.1]``, anything else (``bias``, batch-norm ``mean``, positions, class token) normal
    with std 0.02. Biases and norm parameters are deliberately not the usual exact 0 and 1, so a
    fault in adding or scaling by them changes the outputs.
    """
    jax = _deps()[0]

    def leaf(path: Any, aval: Any) -> np.ndarray:
        names = [str(getattr(key, "key", key)) for key in path]
        shape = tuple(aval.shape)
        if names[-1] == "kernel":
            if len(shape) == 3 and (len(names) < 2 or names[-2] != "out"):
                fan_in = shape[0]  # attention q/k/v kernels: [in, heads, head_dim]
            else:
                fan_in = int(np.prod(shape[:-1]))  # dense [in, out], conv [h, w, in, out], out proj
            value = rng.standard_normal(shape) / np.sqrt(fan_in)
        elif names[-1] == "embedding":
            value = rng.standard_normal(shape) / np.sqrt(shape[-1])
        elif names[-1] in ("scale", "var"):
            value = rng.uniform(0.9, 1.1, shape)
        else:
            value = 0.02 * rng.standard_normal(shape)
        return np.asarray(value, dtype=aval.dtype)

    return jax.tree_util.tree_map_with_path(leaf, abstract)


def _zeros_like(abstract: Any) -> Any:
    """NumPy zeros for an abstract pytree: the initial state of the optax optimizers used here
    (Adam: ``count``, ``mu``, ``nu``; SGD with momentum: ``trace``), without compiling
    ``tx.init``."""
    jax = _deps()[0]
    return jax.tree_util.tree_map(lambda aval: np.zeros(aval.shape, aval.dtype), abstract)


def _rngs(seed: int) -> tuple[np.random.Generator, np.random.Generator]:
    """Independent NumPy generators for the weights and for the batch of one seed."""
    return np.random.default_rng([seed, 0]), np.random.default_rng([seed, 1])


def _abstract_split(make: Callable[[Any], Any], *filters: Any) -> tuple[Any, ...]:
    """``(graphdef, *abstract_pure_dicts)`` of the nnx module ``make(rngs)``, built abstractly
    (shapes only, nothing computed or compiled)."""
    nnx = _deps()[2]
    graphdef, *states = nnx.split(nnx.eval_shape(lambda: make(nnx.Rngs(0))), *filters)
    return (graphdef, *(nnx.to_pure_dict(state) for state in states))


def _forward_builder(forward: Callable[..., Any], abstract: Any,
                     image_shape: tuple[int, ...]) -> BuildFn:
    """The build function of a forward model over ``(params, images)``: random weights, images
    standard normal float32 of `image_shape`."""

    def build(seed: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        w_rng, b_rng = _rngs(seed)
        images = b_rng.standard_normal(image_shape, dtype=np.float32)
        return forward, (_random_params(abstract, w_rng), images)

    return build


def _cross_entropy(logits: Any, labels: Any) -> Any:
    """Mean softmax cross-entropy of ``logits[..., C]`` (float32) against int32 ``labels[...]``."""
    optax = _deps()[3]
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()


def _next_token_trainer(model_cls: Any, tx: Any, *, vocab: int, batch_size: int,
                        seq: int) -> Callable[[int], tuple[Callable[..., Any], tuple[Any, ...]]]:
    """A `build(seed)` for a next-token language model's training step.

    The step takes ``(params, opt_state, {"tokens": i32[batch_size, seq + 1]})``, computes the
    cross-entropy of predicting tokens[:, 1:] from tokens[:, :-1], and returns
    ``(loss: f32[], new_params, new_opt_state)`` after one `tx` update.
    """
    jax, _, nnx, optax = _deps()
    graphdef, abstract = _abstract_split(model_cls)

    def train_step(params: Any, opt_state: Any, batch: Any) -> tuple[Any, Any, Any]:
        tokens = batch["tokens"]

        def loss_fn(p: Any) -> Any:
            logits = nnx.merge(graphdef, p)(tokens[:, :-1])
            return _cross_entropy(logits, tokens[:, 1:])

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, new_opt_state = tx.update(grads, opt_state, params)
        return loss, optax.apply_updates(params, updates), new_opt_state

    def build(seed: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        w_rng, b_rng = _rngs(seed)
        params = _random_params(abstract, w_rng)
        opt_state = _zeros_like(jax.eval_shape(tx.init, params))
        batch = {"tokens": b_rng.integers(0, vocab, (batch_size, seq + 1), dtype=np.int32)}
        return train_step, (params, opt_state, batch)

    return build


# ---------------------------------------------------------------------------------- transformer_lm

def build_transformer_lm(seed: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """A decoder-only transformer language model's training step (GPT-style, pre-norm).

    Architecture: token embedding (vocab 64, width 32) plus learned positions (16), 2 blocks of
    [layer norm, 4-head causal self-attention, residual, layer norm, MLP 32->128->32 with gelu,
    residual], final layer norm, linear head to 64 logits. Loss: mean cross-entropy of the logits
    at positions ``0..15`` against the tokens at ``1..16``. Gradients by `jax.value_and_grad`,
    update by optax Adam (learning rate 3e-3).

    Args:
        seed: fixes the weights and the batch.

    Returns:
        ``(train_step, (params, opt_state, batch))`` with ``params`` a dict of float32 arrays,
        ``opt_state`` optax Adam state (int32 ``count``, float32 ``mu``/``nu`` like ``params``),
        ``batch = {"tokens": int32[2, 17]}``. ``train_step`` returns
        ``(loss: float32[], new_params, new_opt_state)``.
    """
    return transformer_lm_builder()(seed)


def _prenorm_block(width: int, heads: int, hidden: int) -> type:
    """The pre-norm transformer block of the zoo's transformer LM and ViT: ``x + attn(ln1(x))``,
    then ``x + fc2(gelu(fc1(ln2(x))))`` with an MLP of `hidden` units; called as ``block(x)``
    or ``block(x, mask)`` (an attention mask, e.g. causal, of shape [batch, 1, seq, seq]).
    Every parameter float32; `x` is [batch, seq, width]."""
    jax, _, nnx, _ = _deps()

    class Block(nnx.Module):
        def __init__(self, rngs: Any):
            self.ln1 = nnx.LayerNorm(width, rngs=rngs)
            self.attn = nnx.MultiHeadAttention(num_heads=heads, in_features=width, decode=False,
                                               rngs=rngs)
            self.ln2 = nnx.LayerNorm(width, rngs=rngs)
            self.fc1 = nnx.Linear(width, hidden, rngs=rngs)
            self.fc2 = nnx.Linear(hidden, width, rngs=rngs)

        def __call__(self, x: Any, mask: Any = None) -> Any:
            x = x + self.attn(self.ln1(x), mask=mask)
            return x + self.fc2(jax.nn.gelu(self.fc1(self.ln2(x))))

    return Block


@functools.cache
def transformer_lm_builder(batch_size: int = 2) -> BuildFn:
    """The model, its pure function and the build closure of `build_transformer_lm` with a
    batch of `batch_size` sequences (the sharded zoo's is 8), made once per batch size."""
    jax, jnp, nnx, optax = _deps()
    vocab, seq, width, heads, depth = 64, 16, 32, 4, 2

    Block = _prenorm_block(width, heads, 4 * width)

    class LM(nnx.Module):
        def __init__(self, rngs: Any):
            self.embed = nnx.Embed(vocab, width, rngs=rngs)
            self.pos = nnx.Param(jnp.zeros((seq, width), jnp.float32))  # random at build
            self.blocks = nnx.List([Block(rngs) for _ in range(depth)])
            self.ln_f = nnx.LayerNorm(width, rngs=rngs)
            self.head = nnx.Linear(width, vocab, use_bias=False, rngs=rngs)

        def __call__(self, tokens: Any) -> Any:
            x = self.embed(tokens) + self.pos[...][: tokens.shape[1]]
            mask = nnx.make_causal_mask(tokens)  # [batch, 1, seq, seq]
            for block in self.blocks:
                x = block(x, mask)
            return self.head(self.ln_f(x))

    return _next_token_trainer(LM, optax.adam(3e-3), vocab=vocab, batch_size=batch_size, seq=seq)


# ------------------------------------------------------------------------------------------ resnet

def build_resnet(seed: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """A small ResNet's training step with batch norm in train mode.

    Architecture: 3x3 conv stem (3->16 channels) + batch norm + relu, then three basic residual
    blocks (16 ch; 32 ch stride 2; 64 ch stride 2; each two 3x3 convs with batch norm, the
    strided ones with a 1x1 strided projection + batch norm on the shortcut), global average pool,
    linear head to 10 classes. Batch norm normalizes with batch statistics and updates its running
    averages (momentum 0.9), which the step returns. Loss: mean softmax cross-entropy; update:
    optax SGD with momentum 0.9 (learning rate 0.05). Downsampling is by strided convolution (no
    max pool).

    Args:
        seed: fixes the weights and the batch.

    Returns:
        ``(train_step, (params, batch_stats, opt_state, batch))`` with ``batch = {"images":
        float32[4, 16, 16, 3] (NHWC), "labels": int32[4] in [0, 10)}``; ``train_step`` returns
        ``(loss: float32[], new_params, new_batch_stats, new_opt_state)``.
    """
    return _resnet(16, ((16, 1), (32, 2), (64, 2)), batch_size=4, size=16)(seed)


def build_resnet18(seed: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """ResNet-18's training step (He et al., 2016, with the 3x3 stem of its CIFAR variant).

    Architecture: 3x3 conv stem (3->64 channels) + batch norm + relu, then four stages of two
    basic blocks (64, 128, 256, 512 channels; the first block of each later stage strided 2 with
    a 1x1 projection shortcut), global average pool, linear head to 10 classes: 11.2 M
    parameters. Batch norm, loss and update as in `build_resnet`. A large program for the
    oracle's and the compiler's costs (`benchmarks/oracle_cost.py`): a check takes minutes.

    Args:
        seed: fixes the weights and the batch.

    Returns:
        As `build_resnet`, with ``batch = {"images": float32[2, 32, 32, 3], "labels": int32[2]}``.
    """
    stages = ((64, 1), (64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1))
    return _resnet(64, stages, batch_size=2, size=32)(seed)


@functools.cache
def _resnet(stem: int, blocks: tuple[tuple[int, int], ...], *, batch_size: int,
            size: int) -> BuildFn:
    """The model, its pure function and the build closure of a ResNet, made once per shape.

    Args:
        stem: channels of the stem conv.
        blocks: (channels, stride) of each basic block, in order.
        batch_size, size: the batch: ``batch_size`` images of ``size x size x 3``.
    """
    jax, jnp, nnx, optax = _deps()
    num_classes = 10

    def conv(cin: int, cout: int, kernel: int, stride: int, rngs: Any) -> Any:
        return nnx.Conv(cin, cout, (kernel, kernel), strides=stride, padding="SAME",
                        use_bias=False, rngs=rngs)

    def norm(ch: int, rngs: Any) -> Any:
        return nnx.BatchNorm(ch, use_running_average=False, momentum=0.9, rngs=rngs)

    class ResBlock(nnx.Module):
        def __init__(self, cin: int, cout: int, stride: int, rngs: Any):
            self.conv1, self.bn1 = conv(cin, cout, 3, stride, rngs), norm(cout, rngs)
            self.conv2, self.bn2 = conv(cout, cout, 3, 1, rngs), norm(cout, rngs)
            self.has_proj = stride != 1 or cin != cout
            if self.has_proj:
                self.proj, self.proj_bn = conv(cin, cout, 1, stride, rngs), norm(cout, rngs)

        def __call__(self, x: Any) -> Any:
            y = jax.nn.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            shortcut = self.proj_bn(self.proj(x)) if self.has_proj else x
            return jax.nn.relu(y + shortcut)

    class ResNet(nnx.Module):
        def __init__(self, rngs: Any):
            self.stem, self.stem_bn = conv(3, stem, 3, 1, rngs), norm(stem, rngs)
            widths = [stem] + [cout for cout, _ in blocks]
            self.blocks = nnx.List([ResBlock(cin, cout, stride, rngs) for cin, (cout, stride)
                                    in zip(widths, blocks)])
            self.head = nnx.Linear(widths[-1], num_classes, rngs=rngs)

        def __call__(self, x: Any) -> Any:
            x = jax.nn.relu(self.stem_bn(self.stem(x)))
            for block in self.blocks:
                x = block(x)
            return self.head(x.mean(axis=(1, 2)))

    graphdef, abstract_params, abstract_stats = _abstract_split(ResNet, nnx.Param, nnx.BatchStat)
    tx = optax.sgd(0.05, momentum=0.9)

    def train_step(params: Any, batch_stats: Any, opt_state: Any,
                   batch: Any) -> tuple[Any, Any, Any, Any]:
        def loss_fn(p: Any) -> tuple[Any, Any]:
            model = nnx.merge(graphdef, p, batch_stats)
            logits = model(batch["images"])
            new_stats = nnx.to_pure_dict(nnx.state(model, nnx.BatchStat))
            return _cross_entropy(logits, batch["labels"]), new_stats

        (loss, new_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        updates, new_opt_state = tx.update(grads, opt_state, params)
        return loss, optax.apply_updates(params, updates), new_stats, new_opt_state

    def build(seed: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        w_rng, b_rng = _rngs(seed)
        params = _random_params(abstract_params, w_rng)
        batch_stats = _random_params(abstract_stats, w_rng)
        opt_state = _zeros_like(jax.eval_shape(tx.init, params))
        batch = {"images": b_rng.standard_normal((batch_size, size, size, 3), dtype=np.float32),
                 "labels": b_rng.integers(0, num_classes, (batch_size,), dtype=np.int32)}
        return train_step, (params, batch_stats, opt_state, batch)

    return build


# -------------------------------------------------------------------------------------- mlp_mixer

def build_mlp_mixer(seed: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """An MLP-Mixer's forward pass (image classifier).

    Architecture: 4x4 patch embedding by a stride-4 conv (16x16x3 image -> 16 tokens of width
    32), 2 mixer blocks of [layer norm, token-mixing MLP 16->32->16 with gelu across tokens,
    residual, layer norm, channel-mixing MLP 32->64->32 with gelu, residual], final layer norm,
    mean over tokens, linear head to 10 classes.

    Args:
        seed: fixes the weights and the images.

    Returns:
        ``(forward, (params, images))`` with ``images`` float32[2, 16, 16, 3] (NHWC); ``forward``
        returns the logits, float32[2, 10].
    """
    return _mlp_mixer()(seed)


@functools.cache
def _mlp_mixer() -> BuildFn:
    """The model, its pure function and the build closure of `build_mlp_mixer`, made once."""
    jax, jnp, nnx, optax = _deps()
    batch_size, size, patch, width, num_classes, depth = 2, 16, 4, 32, 10, 2
    tokens = (size // patch) ** 2

    class MlpBlock(nnx.Module):
        def __init__(self, dim: int, hidden: int, rngs: Any):
            self.fc1 = nnx.Linear(dim, hidden, rngs=rngs)
            self.fc2 = nnx.Linear(hidden, dim, rngs=rngs)

        def __call__(self, x: Any) -> Any:
            return self.fc2(jax.nn.gelu(self.fc1(x)))

    class MixerBlock(nnx.Module):
        def __init__(self, rngs: Any):
            self.ln1 = nnx.LayerNorm(width, rngs=rngs)
            self.token_mlp = MlpBlock(tokens, 2 * tokens, rngs)
            self.ln2 = nnx.LayerNorm(width, rngs=rngs)
            self.channel_mlp = MlpBlock(width, 2 * width, rngs)

        def __call__(self, x: Any) -> Any:  # x: [batch, tokens, width]
            y = self.token_mlp(jnp.swapaxes(self.ln1(x), 1, 2))
            x = x + jnp.swapaxes(y, 1, 2)
            return x + self.channel_mlp(self.ln2(x))

    class Mixer(nnx.Module):
        def __init__(self, rngs: Any):
            self.stem = nnx.Conv(3, width, (patch, patch), strides=patch, padding="VALID",
                                 rngs=rngs)
            self.blocks = nnx.List([MixerBlock(rngs) for _ in range(depth)])
            self.ln_f = nnx.LayerNorm(width, rngs=rngs)
            self.head = nnx.Linear(width, num_classes, rngs=rngs)

        def __call__(self, images: Any) -> Any:
            x = self.stem(images)
            x = x.reshape(x.shape[0], -1, width)
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln_f(x).mean(axis=1))

    graphdef, abstract = _abstract_split(Mixer)

    def forward(params: Any, images: Any) -> Any:
        return nnx.merge(graphdef, params)(images)

    return _forward_builder(forward, abstract, (batch_size, size, size, 3))


# ------------------------------------------------------------------------------------------- lstm

def build_lstm(seed: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """An LSTM language model's training step, the recurrence a `jax.lax.scan` over 16 steps.

    Architecture: token embedding (vocab 32, width 32), one LSTM layer (hidden 32; gates
    ``i, f, g, o`` from ``x W_x + h W_h + b``; ``c' = sigmoid(f) c + sigmoid(i) tanh(g)``,
    ``h' = sigmoid(o) tanh(c')``; zero initial state), linear head to 32 logits per step. Loss:
    mean cross-entropy of the logits at steps ``0..15`` against the tokens at ``1..16``; update:
    optax Adam (learning rate 1e-2).

    Args:
        seed: fixes the weights and the batch.

    Returns:
        ``(train_step, (params, opt_state, batch))`` with ``batch = {"tokens": int32[4, 17]}``;
        ``train_step`` returns ``(loss: float32[], new_params, new_opt_state)``.
    """
    return _lstm()(seed)


@functools.cache
def _lstm() -> BuildFn:
    """The model, its pure function and the build closure of `build_lstm`, made once."""
    jax, jnp, nnx, optax = _deps()
    vocab, seq, batch_size, width, hidden = 32, 16, 4, 32, 32

    class LstmLM(nnx.Module):
        def __init__(self, rngs: Any):
            self.embed = nnx.Embed(vocab, width, rngs=rngs)
            self.wx = nnx.Linear(width, 4 * hidden, rngs=rngs)
            self.wh = nnx.Linear(hidden, 4 * hidden, use_bias=False, rngs=rngs)
            self.head = nnx.Linear(hidden, vocab, rngs=rngs)

        def __call__(self, tokens: Any) -> Any:  # tokens: [batch, seq] -> logits [batch, seq, V]
            xw = jnp.swapaxes(self.wx(self.embed(tokens)), 0, 1)  # [seq, batch, 4H], time-major
            w_h = self.wh.kernel[...]

            def step(carry: tuple[Any, Any], xw_t: Any) -> tuple[tuple[Any, Any], Any]:
                h, c = carry
                i, f, g, o = jnp.split(xw_t + h @ w_h, 4, axis=-1)
                c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
                h = jax.nn.sigmoid(o) * jnp.tanh(c)
                return (h, c), h

            zeros = jnp.zeros((tokens.shape[0], hidden), jnp.float32)
            _, hs = jax.lax.scan(step, (zeros, zeros), xw)
            return self.head(jnp.swapaxes(hs, 0, 1))

    return _next_token_trainer(LstmLM, optax.adam(1e-2), vocab=vocab, batch_size=batch_size, seq=seq)


# -------------------------------------------------------------------------------------------- vit

def build_vit(seed: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """A vision transformer's forward pass (image classifier).

    Architecture: 4x4 patches of a 16x16x3 image flattened by reshape and projected to width 32
    (16 tokens), a learned class token and learned positions (17), 2 pre-norm blocks of [layer
    norm, 4-head bidirectional self-attention, residual, layer norm, MLP 32->64->32 with gelu,
    residual], final layer norm of the class token, linear head to 10 classes, softmax.

    Args:
        seed: fixes the weights and the images.

    Returns:
        ``(forward, (params, images))`` with ``images`` float32[2, 16, 16, 3] (NHWC); ``forward``
        returns ``{"logits": float32[2, 10], "probs": float32[2, 10]}``.
    """
    return _vit()(seed)


@functools.cache
def _vit() -> BuildFn:
    """The model, its pure function and the build closure of `build_vit`, made once."""
    jax, jnp, nnx, optax = _deps()
    batch_size, size, patch, width, heads, num_classes, depth = 2, 16, 4, 32, 4, 10, 2
    grid = size // patch

    Block = _prenorm_block(width, heads, 2 * width)

    class ViT(nnx.Module):
        def __init__(self, rngs: Any):
            self.patch_proj = nnx.Linear(patch * patch * 3, width, rngs=rngs)
            self.cls = nnx.Param(jnp.zeros((1, 1, width), jnp.float32))
            self.pos = nnx.Param(jnp.zeros((grid * grid + 1, width), jnp.float32))
            self.blocks = nnx.List([Block(rngs) for _ in range(depth)])
            self.ln_f = nnx.LayerNorm(width, rngs=rngs)
            self.head = nnx.Linear(width, num_classes, rngs=rngs)

        def __call__(self, images: Any) -> dict[str, Any]:
            b = images.shape[0]
            x = images.reshape(b, grid, patch, grid, patch, 3).transpose(0, 1, 3, 2, 4, 5)
            x = self.patch_proj(x.reshape(b, grid * grid, patch * patch * 3))
            cls = jnp.broadcast_to(self.cls[...], (b, 1, width))
            x = jnp.concatenate([cls, x], axis=1) + self.pos[...]
            for block in self.blocks:
                x = block(x)
            logits = self.head(self.ln_f(x[:, 0]))
            return {"logits": logits, "probs": jax.nn.softmax(logits, axis=-1)}

    graphdef, abstract = _abstract_split(ViT)

    def forward(params: Any, images: Any) -> dict[str, Any]:
        return nnx.merge(graphdef, params)(images)

    return _forward_builder(forward, abstract, (batch_size, size, size, 3))


# ------------------------------------------------------------------------ tunable: attention_lm

#: Knobs of `build_attention_lm` (the tuner's subgraph-level search space for it).
ATTENTION_LM_KNOBS = {
    "attention_block": Knob(128, (32, 64, 128), "query rows per attention block (128: unblocked)"),
    "mlp_chunks": Knob(1, (1, 2, 4), "the MLP's hidden layer computed in this many chunks"),
    "remat": Knob("none", ("none", "dots_saveable", "nothing_saveable"),
                  "jax.checkpoint policy of each block in the backward pass"),
}


def _layer_norm(x: Any, p: Any) -> Any:
    """Layer norm over the last axis of `x` with ``p["scale"]`` and ``p["bias"]`` (eps 1e-5)."""
    jax = _deps()[0]
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * p["scale"] + p["bias"]


def _attention_lm_shapes(jax: Any, vocab: int, seq: int, width: int, heads: int, depth: int,
                         hidden: int) -> dict[str, Any]:
    """The parameter tree of `build_attention_lm` as ``jax.ShapeDtypeStruct`` leaves (float32)."""
    head_dim = width // heads

    def dense(i: int, o: int) -> dict[str, Any]:
        return {"kernel": jax.ShapeDtypeStruct((i, o), np.float32),
                "bias": jax.ShapeDtypeStruct((o,), np.float32)}

    def norm() -> dict[str, Any]:
        return {"scale": jax.ShapeDtypeStruct((width,), np.float32),
                "bias": jax.ShapeDtypeStruct((width,), np.float32)}

    qkv = {"kernel": jax.ShapeDtypeStruct((width, heads, head_dim), np.float32)}
    return {
        "embed": {"embedding": jax.ShapeDtypeStruct((vocab, width), np.float32)},
        "pos": jax.ShapeDtypeStruct((seq, width), np.float32),
        "blocks": [{"ln1": norm(), "ln2": norm(), "fc1": dense(width, hidden),
                    "fc2": dense(hidden, width),
                    "attn": {"query": qkv, "key": qkv, "value": qkv, "out": {
                        "kernel": jax.ShapeDtypeStruct((heads, head_dim, width), np.float32)}}}
                   for _ in range(depth)],
        "ln_f": norm(),
        "head": {"kernel": jax.ShapeDtypeStruct((width, vocab), np.float32)},
    }


def build_attention_lm(seed: int, *, attention_block: int = 128, mlp_chunks: int = 1,
                       remat: str = "none") -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """A transformer language model's training step with tunable knobs (see `ATTENTION_LM_KNOBS`).

    Architecture (plain jax.numpy, no flax modules): embedding (vocab 256, width 128) plus learned
    positions (128), 2 pre-norm blocks of [layer norm, 4-head causal self-attention computed in
    query blocks of ``attention_block`` rows, residual, layer norm, MLP 128->512->128 with gelu
    computed in ``mlp_chunks`` column chunks, residual], each block under `jax.checkpoint` with
    the ``remat`` policy (``"none"``: no checkpoint), final layer norm, linear head. Loss: mean
    next-token cross-entropy; update: optax Adam (learning rate 1e-3). The knobs change the
    traced program, never its mathematical result.

    Args:
        seed: fixes the weights and the batch.
        attention_block, mlp_chunks, remat: the knobs.

    Returns:
        ``(train_step, (params, opt_state, batch))``, ``batch = {"tokens": int32[4, 129]}``;
        ``train_step`` returns ``(loss: float32[], new_params, new_opt_state)``.

    Raises:
        InvalidArgument: a knob value outside its choices.
    """
    jax, jnp, _, optax = _deps()
    resolve_knobs(ATTENTION_LM_KNOBS, {"attention_block": attention_block,
                                       "mlp_chunks": mlp_chunks, "remat": remat})
    vocab, seq, batch_size, width, heads, depth, hidden = 256, 128, 4, 128, 4, 2, 512
    head_dim = width // heads
    tx = optax.adam(1e-3)

    def attention(x: Any, p: Any) -> Any:
        q, k, v = (jnp.einsum("bsw,whd->bhsd", x, p[n]["kernel"]) for n in ("query", "key", "value"))
        outs = []
        for start in range(0, seq, attention_block):  # causal: a block sees keys up to its end
            stop = start + attention_block
            scores = jnp.einsum("bhqd,bhkd->bhqk", q[:, :, start:stop], k[:, :, :stop])
            scores = scores / np.sqrt(head_dim)
            # Traced (iota), not a NumPy constant: every input of a zoo program is an argument.
            rows = (jax.lax.broadcasted_iota(np.int32, (attention_block, stop), 0) + start
                    >= jax.lax.broadcasted_iota(np.int32, (attention_block, stop), 1))
            scores = jnp.where(rows, scores, -1e30)
            outs.append(jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(scores, -1),
                                   v[:, :, :stop]))
        return jnp.einsum("bhsd,hdw->bsw", jnp.concatenate(outs, axis=2), p["out"]["kernel"])

    def mlp(x: Any, p: Any) -> Any:
        step = hidden // mlp_chunks
        total = 0.0
        for c in range(mlp_chunks):
            cols = slice(c * step, (c + 1) * step)
            h = jax.nn.gelu(x @ p["fc1"]["kernel"][:, cols] + p["fc1"]["bias"][cols])
            total = total + h @ p["fc2"]["kernel"][cols]
        return total + p["fc2"]["bias"]

    def block(x: Any, p: Any) -> Any:
        x = x + attention(_layer_norm(x, p["ln1"]), p["attn"])
        return x + mlp(_layer_norm(x, p["ln2"]), p)

    if remat != "none":
        block = jax.checkpoint(block, policy=getattr(jax.checkpoint_policies, remat))

    def loss_fn(params: Any, tokens: Any) -> Any:
        x = params["embed"]["embedding"][tokens[:, :-1]] + params["pos"]
        for p in params["blocks"]:
            x = block(x, p)
        logits = _layer_norm(x, params["ln_f"]) @ params["head"]["kernel"]
        return _cross_entropy(logits, tokens[:, 1:])

    def train_step(params: Any, opt_state: Any, batch: Any) -> tuple[Any, Any, Any]:
        loss, grads = jax.value_and_grad(loss_fn)(params, batch["tokens"])
        updates, new_opt_state = tx.update(grads, opt_state, params)
        return loss, optax.apply_updates(params, updates), new_opt_state

    w_rng, b_rng = _rngs(seed)
    params = _random_params(_attention_lm_shapes(jax, vocab, seq, width, heads, depth, hidden),
                            w_rng)
    opt_state = _zeros_like(jax.eval_shape(tx.init, params))
    batch = {"tokens": b_rng.integers(0, vocab, (batch_size, seq + 1), dtype=np.int32)}
    return train_step, (params, opt_state, batch)


# ----------------------------------------------------------------------------- tunable: convnet

#: Knobs of `build_convnet`.
CONVNET_KNOBS = {"layout": Knob("NHWC", ("NHWC", "NCHW"), "activation and kernel layout")}


def build_convnet(seed: int, *, layout: str = "NHWC") -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """A plain ConvNet's training step with a layout knob (see `CONVNET_KNOBS`).

    Architecture (plain jax.lax): four 3x3 convolutions (3->32, 32->64 stride 2, 64->64,
    64->128 stride 2) each with bias and relu, global average pool, dense head to 10 classes.
    ``layout`` picks the dimension numbers the convolutions run in (``NHWC``/``HWIO`` or
    ``NCHW``/``OIHW``; the inputs are always stored NHWC/HWIO and transposed inside). Loss: mean
    softmax cross-entropy; update: optax SGD with momentum 0.9 (learning rate 0.05).

    Args:
        seed: fixes the weights and the batch.
        layout: the knob.

    Returns:
        ``(train_step, (params, opt_state, batch))`` with ``batch = {"images": float32[8, 32, 32,
        3], "labels": int32[8] in [0, 10)}``; ``train_step`` returns ``(loss, new_params,
        new_opt_state)``.

    Raises:
        InvalidArgument: a knob value outside its choices.
    """
    jax, jnp, _, optax = _deps()
    resolve_knobs(CONVNET_KNOBS, {"layout": layout})
    channels, strides = (3, 32, 64, 64, 128), (1, 2, 1, 2)
    tx = optax.sgd(0.05, momentum=0.9)

    def forward(params: Any, images: Any) -> Any:
        x = images if layout == "NHWC" else images.transpose(0, 3, 1, 2)
        numbers = ("NHWC", "HWIO", "NHWC") if layout == "NHWC" else ("NCHW", "OIHW", "NCHW")
        for p, stride in zip(params["convs"], strides):
            kernel = p["kernel"] if layout == "NHWC" else p["kernel"].transpose(3, 2, 0, 1)
            x = jax.lax.conv_general_dilated(x, kernel, (stride, stride), "SAME",
                                             dimension_numbers=numbers)
            bias = p["bias"] if layout == "NHWC" else p["bias"][:, None, None]
            x = jax.nn.relu(x + bias)
        pooled = x.mean(axis=(1, 2) if layout == "NHWC" else (2, 3))
        return pooled @ params["head"]["kernel"] + params["head"]["bias"]

    def train_step(params: Any, opt_state: Any, batch: Any) -> tuple[Any, Any, Any]:
        def loss_fn(p: Any) -> Any:
            return _cross_entropy(forward(p, batch["images"]), batch["labels"])

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, new_opt_state = tx.update(grads, opt_state, params)
        return loss, optax.apply_updates(params, updates), new_opt_state

    abstract = {
        "convs": [{"kernel": jax.ShapeDtypeStruct((3, 3, cin, cout), np.float32),
                   "bias": jax.ShapeDtypeStruct((cout,), np.float32)}
                  for cin, cout in zip(channels, channels[1:])],
        "head": {"kernel": jax.ShapeDtypeStruct((channels[-1], 10), np.float32),
                 "bias": jax.ShapeDtypeStruct((10,), np.float32)},
    }
    w_rng, b_rng = _rngs(seed)
    params = _random_params(abstract, w_rng)
    opt_state = _zeros_like(jax.eval_shape(tx.init, params))
    batch = {"images": b_rng.standard_normal((8, 32, 32, 3), dtype=np.float32),
             "labels": b_rng.integers(0, 10, (8,), dtype=np.int32)}
    return train_step, (params, opt_state, batch)


# ---------------------------------------------------------------------------------------- registry

MODELS: dict[str, ModelSpec] = {spec.name: spec for spec in [
    ModelSpec("transformer_lm", "decoder-only transformer LM (2 blocks, causal attention), "
              "Adam training step", "train_step", build_transformer_lm),
    ModelSpec("resnet", "ResNet CNN (3 residual blocks, batch norm in train mode), "
              "SGD-momentum training step", "train_step", build_resnet),
    ModelSpec("mlp_mixer", "MLP-Mixer image classifier (conv patches, 2 mixer blocks), "
              "forward pass", "forward", build_mlp_mixer),
    ModelSpec("lstm", "LSTM language model (lax.scan over 16 steps), Adam training step",
              "train_step", build_lstm),
    ModelSpec("vit", "vision transformer (reshape patches, class token, 2 blocks), "
              "forward pass with softmax", "forward", build_vit),
    ModelSpec("attention_lm", "transformer LM (seq 128, width 128) with knobs: attention block, "
              "MLP chunks, remat policy; Adam training step", "train_step", build_attention_lm,
              ATTENTION_LM_KNOBS),
    ModelSpec("convnet", "plain ConvNet (4 convs on 32x32 images) with a layout knob "
              "(NHWC/NCHW); SGD-momentum training step", "train_step", build_convnet,
              CONVNET_KNOBS),
    ModelSpec("resnet18", "ResNet-18 (4 stages of basic blocks, 11.2 M parameters, 32x32 images), "
              "SGD-momentum training step; large: a check takes minutes", "train_step",
              build_resnet18, large=True),
]}
#: The zoo's models that check in seconds (the quick test run's and the campaigns').
SMALL: tuple[str, ...] = tuple(name for name, spec in MODELS.items() if not spec.large)


def zoo() -> dict[str, ModelSpec]:
    """Every zoo entry by name: our own (`MODELS`) then the third-party zoo
    (`xlaprobe.sources.ecosystem.ECOSYSTEM`, whose libraries are imported only on a build)."""
    return {**MODELS, **sharded_models(transformer_lm_builder), **PIPELINE_MODELS, **ECOSYSTEM}


def get_model(name: str) -> ModelSpec:
    """The zoo entry called `name` (our own zoo or the third-party one, see `zoo`).

    Raises:
        InvalidArgument: no such model (the message lists the known names and a close match).
    """
    everything = zoo()
    try:
        return everything[name]
    except KeyError:
        close = difflib.get_close_matches(str(name), list(everything), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise InvalidArgument(f"unknown model '{name}'{hint}; known models: "
                              f"{', '.join(sorted(everything))}") from None


def build_program(name: str, seed: int = 0, knobs: dict[str, Any] | None = None) -> Program:
    """Build zoo model `name` with random weights and batch from `seed` and trace it to a Program.

    Args:
        name: a key of `MODELS`.
        seed: non-negative integer; equal seeds give bit-identical inputs.
        knobs: values of the model's knobs (`ModelSpec.knobs`); the rest keep their defaults.
            Non-default values are recorded in the provenance name (``attention_lm[remat=...]``).

    Raises:
        InvalidArgument: unknown name, bad seed, unknown knob or value, or flax/optax missing.
    """
    spec = get_model(name)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InvalidArgument(f"model seed must be a non-negative integer, got {seed!r}")
    values = resolve_knobs(spec.knobs, knobs)
    fn, args = spec.build(int(seed), **values)
    changed = {k: v for k, v in values.items() if v != spec.knobs[k].default}
    label = name + ("[" + ",".join(f"{k}={v}" for k, v in sorted(changed.items())) + "]"
                    if changed else "")
    return Program.from_function(fn, args, Provenance("model", label, int(seed)))
