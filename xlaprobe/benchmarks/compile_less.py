"""Can a fuzzing campaign compile less per program? Three ways, measured on the same generated
programs in one run (in this process, one at a time):

* **batching**: K independent programs traced into one module (outputs kept apart, so each
  program's verdict stays separable) and compiled once, against compiling each alone; ms per
  program, the ratio, and whether every output is bit-identical to the program's own compile;
* **where an xla run goes**: tracing and lowering (reusable by every configuration of one
  program that compiles the same module) against XLA's compile and the run;
* **per-primitive executables across programs**: how many top-level equations repeat a
  (primitive, parameters, operand types) key already seen in an earlier program: the most a
  cache of eager's per-primitive executables shared by programs could hit (each worker already
  caches within its own life).

    python benchmarks/compile_less.py                     # 64 programs, batches of 4, 8, 16
    python benchmarks/compile_less.py --programs 128 --batches 8,32 --json out.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np

from xlaprobe import jaxcompat
from xlaprobe.configs.registry import Configuration
from xlaprobe.configs.xla import compiler_options, scoped_function
from xlaprobe.program import Program, Provenance
from xlaprobe.sources.generator import generate


def _staged(program: Program, options: dict[str, Any]) -> tuple[list[np.ndarray], list[float]]:
    """Outputs of `program` under plain xla, and seconds of (trace+lower, compile, run)."""
    t0 = time.perf_counter()
    lowered = jax.jit(scoped_function(program.jaxpr)).lower(*program.inputs)
    t1 = time.perf_counter()
    compiled = lowered.compile(compiler_options=options)
    t2 = time.perf_counter()
    outputs = [np.asarray(x) for x in compiled(*program.inputs)]
    return outputs, [t1 - t0, t2 - t1, time.perf_counter() - t2]


def batched(programs: list[Program]) -> Program:
    """One program computing every program of `programs` on its own inputs: inputs and outputs
    concatenated in order, nothing shared (so each program's outputs can be judged alone)."""
    functions = [jaxcompat.jaxpr_as_fun(p.jaxpr) for p in programs]
    counts = [len(p.inputs) for p in programs]

    def everything(*args: Any) -> list[Any]:
        outputs, start = [], 0
        for function, count in zip(functions, counts):
            outputs += list(function(*args[start:start + count]))
            start += count
        return outputs

    inputs = tuple(x for p in programs for x in p.inputs)
    return Program.from_function(everything, inputs, Provenance("batch", f"batch:{len(programs)}"))


def _keys(program: Program) -> list[tuple]:
    """(primitive, parameters, operand avals) of each top-level equation."""
    return [(e.primitive.name, str(sorted((k, str(v)) for k, v in e.params.items())),
             tuple(str(v.aval) for v in e.invars)) for e in program.jaxpr.jaxpr.eqns]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=64, help="generated programs")
    parser.add_argument("--seed", type=int, default=100, help="first generator seed")
    parser.add_argument("--batches", default="4,8,16", help="batch sizes K to compare")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    programs = [generate(s) for s in range(args.seed, args.seed + args.programs)]
    options = compiler_options(Configuration.parse("xla"))
    _staged(programs[0], options)  # JAX's and XLA's own start-up, outside every figure
    stages = np.zeros(3)
    alone = []
    for program in programs:
        outputs, seconds = _staged(program, options)
        alone += outputs
        stages += seconds
    alone_s = stages.sum()
    equations = sum(p.num_equations for p in programs)
    figures: dict[str, Any] = {
        "programs": len(programs), "equations": equations,
        "alone_ms_per_program": round(alone_s / len(programs) * 1000, 1),
        "share": {"trace+lower": round(stages[0] / alone_s, 3),
                  "compile": round(stages[1] / alone_s, 3), "run": round(stages[2] / alone_s, 3)},
        "batches": []}
    print(f"{len(programs)} generated programs (seeds {args.seed}..), {equations} equations; "
          f"each alone under xla: {figures['alone_ms_per_program']:.0f} ms/program "
          f"(trace+lower {stages[0] / alone_s:.0%}, compile {stages[1] / alone_s:.0%}, "
          f"run {stages[2] / alone_s:.0%})")
    for k in [int(x) for x in args.batches.split(",") if x]:
        started = time.perf_counter()
        outputs = []
        for i in range(0, len(programs), k):
            outputs += _staged(batched(programs[i:i + k]), options)[0]
        seconds = time.perf_counter() - started
        same = len(outputs) == len(alone) and all(
            a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
            for a, b in zip(alone, outputs))
        row = {"k": k, "ms_per_program": round(seconds / len(programs) * 1000, 1),
               "speedup": round(alone_s / seconds, 2), "bit_identical": same}
        figures["batches"].append(row)
        print(f"batches of {k}: {row['ms_per_program']:.0f} ms/program (batching included), "
              f"{row['speedup']:.2f}x the programs alone; outputs bit-identical: "
              f"{'yes' if same else 'NO'}")
    seen: set[tuple] = set()
    repeats = total = 0
    for program in programs:
        keys = _keys(program)
        repeats += sum(key in seen for key in keys)
        total += len(keys)
        seen.update(keys)
    figures["cross_program_repeats"] = {"equations": total, "repeats": repeats}
    print(f"per-primitive executables: {repeats} of {total} top-level equations "
          f"({repeats / max(total, 1):.1%}) repeat a key of an earlier program")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
