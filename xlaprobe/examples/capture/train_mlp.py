"""A small training script (an MLP classifier, optax Adam, a jitted step and a jitted evaluation)
to show `xlaprobe capture`:

    xlaprobe capture --out captured -- examples/capture/train_mlp.py --steps 5

captures two programs, the train step and the evaluation, each saved once with the arrays of its
first call (the train step compiles twice, the second time for the jax arrays the first step
returned instead of NumPy ones: the same structure, one program); `xlaprobe check
captured/<dir>` then checks one.
"""

import argparse

import jax
import numpy as np
import optax


def init(rng: np.random.Generator, sizes=(32, 64, 10)):
    return [{"w": (rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32),
             "b": np.zeros(b, np.float32)} for a, b in zip(sizes, sizes[1:])]


def forward(params, x):
    for layer in params[:-1]:
        x = jax.nn.gelu(x @ layer["w"] + layer["b"])
    return x @ params[-1]["w"] + params[-1]["b"]


def loss_fn(params, x, y):
    return optax.softmax_cross_entropy_with_integer_labels(forward(params, x), y).mean()


optimizer = optax.adam(1e-2)


@jax.jit
def train_step(params, opt_state, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


@jax.jit
def accuracy(params, x, y):
    return (forward(params, x).argmax(-1) == y).mean()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 32)).astype(np.float32)
    y = (x[:, :10].argmax(-1)).astype(np.int32)
    params = init(rng)
    opt_state = optimizer.init(params)
    for step in range(args.steps):
        batch = slice(32 * step % 256, 32 * step % 256 + 32)
        params, opt_state, loss = train_step(params, opt_state, x[batch], y[batch])
        print(f"step {step}: loss {float(loss):.4f}")
    print(f"accuracy {float(accuracy(params, x, y)):.3f}")


if __name__ == "__main__":
    main()
