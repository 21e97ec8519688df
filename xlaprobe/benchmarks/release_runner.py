"""Runs under another release: a fresh process of its interpreter per run against one runner
process kept from run to run (`xlaprobe.releases.kind.RunnerProcess`), side by side on the same
generated programs, in this process (no worker pool).

Prints seconds per run of each, the ratio, and whether every output is bit-identical.

    python benchmarks/release_runner.py                         # jaxlib==0.10.2, 12 programs
    python benchmarks/release_runner.py --release 0.11.2 --programs 24
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from xlaprobe.releases import kind as release
from xlaprobe.releases import envs
from xlaprobe.sources.generator import generate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--release", default="0.10.2", help="jaxlib version (made if missing)")
    parser.add_argument("--programs", type=int, default=12, help="generated programs")
    parser.add_argument("--seed", type=int, default=200, help="first generator seed")
    args = parser.parse_args()
    python = envs.ensure_env(args.release).python
    modules = []
    for seed in range(args.seed, args.seed + args.programs):
        program = generate(seed)
        text, kept = release.stablehlo_text(program.jaxpr, program.inputs)
        modules.append((text, [program.inputs[i] for i in kept]))

    def run_all(runner):
        outputs, started = [], time.perf_counter()
        for text, inputs in modules:
            try:
                outputs.append(release.run_module(python, text, inputs, {}, runner=runner,
                                                  reraise_signal=False))
            except Exception as exc:  # the same failure is expected of both ways
                outputs.append(f"{type(exc).__name__}: {exc}")
        return outputs, (time.perf_counter() - started) / len(modules)

    runner = release.RunnerProcess(python)
    try:
        kept, kept_s = run_all(runner)  # the first run pays the runner's start
        fresh, fresh_s = run_all(None)
    finally:
        runner.close()
    same = all(
        (isinstance(a, str) and a == b) or (not isinstance(a, str) and not isinstance(b, str) and
                                            len(a) == len(b) and all(
            x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y, equal_nan=True)
            for x, y in zip(a, b)))
        for a, b in zip(kept, fresh))
    print(f"jaxlib=={args.release}, {len(modules)} generated programs (seeds {args.seed}..): "
          f"fresh process per run {fresh_s:.2f} s/run, kept runner {kept_s:.2f} s/run "
          f"(start included): {fresh_s / kept_s:.1f}x; outputs bit-identical: "
          f"{'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
