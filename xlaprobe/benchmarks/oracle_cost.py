"""The oracle's own cost on a large program: judging each configuration with the error budget
made once per check (`xlaprobe.check.judge`, shared `oracle.LeafBudget`s) against remaking it
for every configuration (what the oracle did before: one sort of every output's honest errors,
twice, per configuration), side by side on the same outcomes, with the verdicts compared.

The configurations run once (`check_program`), then the judgement is timed both ways ``--repeat``
times (the median is printed). The default program is the zoo's ResNet-18 training step (11.2 M
parameters, 2 x 62 output leaves of up to 2.4 M elements).

    python benchmarks/oracle_cost.py                     # resnet18, xla,xla:O0,eager,reference
    python benchmarks/oracle_cost.py --model resnet --configs xla,reference
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import time

import numpy as np

from xlaprobe.check import REFERENCE, check_program, judge
from xlaprobe.oracle import judge_outcome
from xlaprobe.sources.models import build_program
from xlaprobe.workers import WorkerPool


def _per_configuration(result) -> list[tuple]:
    """Every configuration's verdicts with its budget remade (the oracle before sharing)."""
    baseline = result.outcomes[result.configs.index(REFERENCE)].outputs
    honest = [list(leaves) for leaves in zip(*(o.outputs for o in result.budget if o.ran))] or None
    flushed = result.flushed.outputs if result.flushed is not None and result.flushed.ran else None
    return [tuple(judge_outcome(o, baseline, result.program.output_names, budget=honest,
                                flushed=flushed, tolerance=result.program.tolerance))
            for c, o in zip(result.configs, result.outcomes) if c != REFERENCE]


def _same(a, b) -> bool:
    """Equal verdicts (NaN fields, e.g. no worst element, compare equal)."""
    def key(v):
        return tuple("nan" if isinstance(x, float) and math.isnan(x) else x
                     for x in dataclasses.astuple(v))
    return len(a) == len(b) and all(key(u) == key(v) for u, v in zip(a, b))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--configs", default="xla,xla:O0,eager,reference")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    program = build_program(args.model)
    leaves = [np.asarray(x) for x in program.inputs]
    print(f"{args.model}: {program.num_equations} equations, {len(program.output_names)} output "
          f"leaves, {sum(x.size for x in leaves) / 1e6:.1f} M input elements")
    started = time.perf_counter()
    with WorkerPool(size=1, timeout_s=3600) as pool:
        result = check_program(program, args.configs.split(","), pool)
    check_s = time.perf_counter() - started
    runs = {c: o.seconds for c, o in zip(result.configs, result.outcomes)}
    print(f"check: {check_s:.1f} s in all; runs: "
          + ", ".join(f"{c} {s:.1f} s" for c, s in runs.items()))

    shared, remade = [], []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        again = judge(program, result.configs, result.outcomes, result.budget, result.flushed)
        shared.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        old = _per_configuration(result)
        remade.append(time.perf_counter() - t0)
    new = [v for c, v in zip(again.configs, again.verdicts) if c != REFERENCE]
    same = [_same(a, b) for a, b in zip(new, old)]
    configs = len(new)
    s_new, s_old = statistics.median(shared), statistics.median(remade)
    print(f"oracle, budget remade per configuration: {s_old:.2f} s ({configs} configurations)")
    print(f"oracle, budget made once per leaf:       {s_new:.2f} s (reference included)")
    print(f"ratio: {s_old / s_new:.2f}x; verdicts identical: {all(same)} ({sum(same)}/{configs}); "
          f"oracle share of the check: {s_old / (check_s + s_old - s_new):.0%} before, "
          f"{s_new / check_s:.0%} after")


if __name__ == "__main__":
    main()
