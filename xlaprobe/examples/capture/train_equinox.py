"""A training script written the Equinox way (not xlaprobe's code): a small CNN classifier,
`eqx.filter_jit` and `eqx.filter_value_and_grad`, an optax AdamW update, a few steps on random
images. To check what it really compiles:

    xlaprobe capture --out captured -- examples/capture/train_equinox.py --steps 3
    xlaprobe check captured/<make_step dir> --configs xla,xla:O0,eager,reference

needs ``pip install equinox`` (in xlaprobe's ``dev`` and ``ecosystem`` extras).
"""

import argparse

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax


class CNN(eqx.Module):
    """Conv (3x3, 8 channels) -> ReLU -> max pool -> MLP to 10 classes; input (1, 12, 12)."""

    conv: eqx.nn.Conv2d
    pool: eqx.nn.MaxPool2d
    mlp: eqx.nn.MLP

    def __init__(self, key):
        k1, k2 = jax.random.split(key)
        self.conv = eqx.nn.Conv2d(1, 8, kernel_size=3, key=k1)
        self.pool = eqx.nn.MaxPool2d(kernel_size=2, stride=2)
        self.mlp = eqx.nn.MLP(8 * 5 * 5, 10, width_size=32, depth=1, key=k2)

    def __call__(self, x):
        x = self.pool(jax.nn.relu(self.conv(x)))
        return self.mlp(jnp.ravel(x))


def loss_fn(model, x, y):
    logits = jax.vmap(model)(x)
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


optimizer = optax.adamw(1e-3)


@eqx.filter_jit
def make_step(model, opt_state, x, y):
    loss, grads = eqx.filter_value_and_grad(loss_fn)(model, x, y)
    updates, opt_state = optimizer.update(grads, opt_state, eqx.filter(model, eqx.is_array))
    return eqx.apply_updates(model, updates), opt_state, loss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    images = rng.standard_normal((64, 1, 12, 12)).astype(np.float32)
    labels = rng.integers(0, 10, 64).astype(np.int32)
    model = CNN(jax.random.key(0))
    opt_state = optimizer.init(eqx.filter(model, eqx.is_array))
    for step in range(args.steps):
        batch = slice((step * 16) % 64, (step * 16) % 64 + 16)
        model, opt_state, loss = make_step(model, opt_state, images[batch], labels[batch])
        print(f"step {step}: loss {float(loss):.4f}")


if __name__ == "__main__":
    main()
