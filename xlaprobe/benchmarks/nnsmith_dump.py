"""Runs in NNSmith's own environment (Python 3.11, TensorFlow): each NNSmith report's arrays as .npz.

For every ``bug-*`` directory under ROOT, writes ``arrays.npz`` beside it with, per output name
``K``: ``eager/K`` (NNSmith's oracle: TensorFlow eager, from its ``oracle.pkl``), ``xla/K`` (the
saved model's serving signature compiled with ``jit_compile=True``, XLA:CPU, on the oracle's
inputs) and ``graph/K`` (the same signature in graph mode without XLA: a second honest run in the
model's own dtypes), ``honest1/K`` and ``honest2/K`` (graph mode again on the inputs moved one
ULP down and one up: how far honest rounding of the inputs alone moves the output, in the spirit
of Monte Carlo arithmetic, since NNSmith's models have no float64 twin); and ``input/K`` per
input. A report that cannot be replayed gets an
``error.txt`` instead. ``vs_nnsmith.py`` reads the arrays with xlaprobe's oracle; this script only
exists because NNSmith's reports are pickles and TensorFlow saved models, which xlaprobe's own
environment neither has nor may load.

    ~/.cache/xlaprobe/nnsmith-0.1.0/bin/python benchmarks/nnsmith_dump.py ROOT
"""

import pickle
import sys
from pathlib import Path

import numpy as np
import tensorflow as tf


def nudged(x: np.ndarray, direction: float) -> np.ndarray:
    """`x` moved one ULP towards `direction` where it is floating, else `x`."""
    x = np.asarray(x)
    return np.nextafter(x, np.array(direction, x.dtype)) if x.dtype.kind == "f" else x


def dump(report: Path) -> None:
    """Write ``report/arrays.npz`` (or ``report/error.txt``)."""
    with open(report / "oracle.pkl", "rb") as f:  # NNSmith's own format, in its own environment
        oracle = pickle.load(f)
    net = tf.saved_model.load(str(report / "model" / "tfnet"))
    signature = net.signatures["serving_default"]
    inputs = {k: tf.constant(v) for k, v in oracle["input"].items()}
    graph = {k: v.numpy() for k, v in signature(**inputs).items()}
    xla = {k: v.numpy() for k, v in tf.function(jit_compile=True)(signature)(**inputs).items()}
    honest = [{k: v.numpy() for k, v in signature(**{
        name: tf.constant(nudged(x, direction)) for name, x in oracle["input"].items()}).items()}
        for direction in (-np.inf, np.inf)]
    arrays = {f"input/{k}": v for k, v in oracle["input"].items()}
    for k, v in oracle["output"].items():
        if k in xla:
            arrays.update({f"eager/{k}": np.asarray(v), f"xla/{k}": xla[k], f"graph/{k}": graph[k],
                           f"honest1/{k}": honest[0][k], f"honest2/{k}": honest[1][k]})
    np.savez(report / "arrays.npz", **arrays)


def main() -> None:
    """Dump every report under the root given as the first argument."""
    for report in sorted(Path(sys.argv[1]).glob("bug-*")):
        try:
            dump(report)
        except Exception as exc:  # noqa: BLE001 - one report's failure is that report's row
            (report / "error.txt").write_text(f"{type(exc).__name__}: {exc}\n")


if __name__ == "__main__":
    main()
