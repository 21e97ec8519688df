"""Localization benchmark: every zoo model under every planted fault that fires there.

For each zoo model the unmutated compiler is checked once (``xla`` and ``reference``); then every
mutant (`xlaprobe mutants`) compiles the model in a worker of its own. Where its pass fires and the
oracle flags the result, the mutant's `MutationSite` is the ground truth, and
`xlaprobe.localization.localize` (tiers 1-4, given that check so it starts from the finding; tier 5
is the mutant's own pass, known) must name its equation (``exact``; where XLA merged the mutated instruction from several
equations, as two transposes into one, any equation its ``op_name`` names), a kernel list that holds its
fusion (``fusion``) and the mutated HLO instruction (``op``: ``yes`` named exactly, ``with``
among the instructions named with it). Prints one row per (model, mutant): top-level equations n, ground-truth and
localized equation, exact?, fusion right?, op right?, compile+run cycles against the
2 log2(n) + 10 budget (tier 4's kernel compiles apart), seconds; then the shares. The crash
mutant and the below-tolerance mutant are not applicable (nothing numeric to localize / nothing
flagged).

With ``--cases`` it instead runs the real XLA:CPU bug cases of tests/cases: localization (all
five tiers: the primitive against the case's KIND, the op inside the kernel, the compiler pass)
and reduction (equations before and after, input elements, tests, cycles, seconds, and whether
the written repro.py shows the fault in a fresh process).

    python benchmarks/localize.py                       # all zoo models (53 pairs: about 55-70 minutes on 2 cores)
    python benchmarks/localize.py --models mlp_mixer,vit --mutants swap-subtract-fused
    python benchmarks/localize.py --method segments     # compile segments alone (the comparison)
    python benchmarks/localize.py --cases               # the real bug cases (about 2 minutes)
    python benchmarks/localize.py --json rows.json
"""

from __future__ import annotations

import argparse
import glob
import json
import pathlib
import re
import tempfile
import time
from typing import Any

from xlaprobe.checking import check_program, judge
from xlaprobe.configs.mutants import MUTANTS
from xlaprobe.localization import cycle_bound, localize, make_pool
from xlaprobe.sources.models import MODELS, build_program


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated zoo models")
    parser.add_argument("--mutants", default=",".join(MUTANTS), help="comma-separated mutants")
    parser.add_argument("--method", default="auto", choices=("auto", "cuts", "segments"),
                        help="tier 2 search (see xlaprobe.localization.api)")
    parser.add_argument("--direction", default="suffix", choices=("suffix", "prefix"),
                        help="for --method segments: which end of the window is fixed first")
    parser.add_argument("--jobs", type=int, default=1, help="workers per isolation group")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--cases", action="store_true",
                        help="the real bug cases of tests/cases instead of the zoo")
    return parser.parse_args()


def main() -> None:
    args = _arguments()
    if args.cases:
        rows = real_cases(args.jobs)
        if args.json:
            with open(args.json, "w") as file:
                json.dump(rows, file, indent=2)
        return

    started = time.perf_counter()
    programs = {name: build_program(name) for name in args.models.split(",")}
    with make_pool(size=args.jobs, timeout_s=600) as pool:
        baselines = {name: check_program(p, ["xla", "reference"], pool) for name, p in programs.items()}
    for name, base in baselines.items():
        if base.findings:
            print(f"note: {name} has findings without any mutant: {[f.config for f in base.findings]}")

    rows, not_applicable = [], []
    header = (f"{'model':15s} {'mutant':31s} {'n':>5s} {'truth':>6s} {'found':>6s} {'exact':>5s} "
              f"{'fusion':>6s} {'op':>4s} {'alone':>5s} {'cycles':>6s} {'+op':>4s} {'bound':>5s} "
              f"{'s':>6s}  site fusion / named kernels")
    print(header)
    for mutant in args.mutants.split(","):
        info = MUTANTS[mutant]
        if info.crashes or info.below_tolerance:
            not_applicable.append(mutant)
            continue
        spec = f"mutant:{mutant}"
        with make_pool(size=args.jobs, timeout_s=600) as pool:  # one mutant's pass per process
            for name, program in programs.items():
                base = baselines[name]
                outcome = pool.run(program, spec)
                result = judge(program, list(base.configs) + [spec], list(base.outcomes) + [outcome],
                               base.budget, base.flushed)
                if not outcome.mutations or not any(f.config == spec for f in result.findings):
                    continue  # did not fire, or fired without a visible effect
                site = outcome.mutations[0]
                try:
                    loc = localize(program, spec, pool, check=result, method=args.method,
                                   direction=args.direction, passes=False)
                except Exception as exc:  # report and go on: one failure must not end the table
                    print(f"{name:15s} {mutant:31s} error: {type(exc).__name__}: {exc}")
                    rows.append({"model": name, "mutant": mutant, "error": str(exc)})
                    continue
                rows.append(_row(name, mutant, site, loc))

    _summary(rows, not_applicable, started)
    if args.json:
        with open(args.json, "w") as file:
            json.dump(rows, file, indent=2)


def _row(name: str, mutant: str, site: Any, loc: Any) -> dict[str, Any]:
    """One localization's row of the JSON, its line of the table printed."""
    n = loc.equations
    # An instruction XLA merged from several equations (two transposes into one)
    # names each in its op_name: any of them is the mutated equation.
    truths = {int(k) for k in re.findall(r"eqn(\d+)", site.op_name)} or {site.equation}
    row = {"model": name, "mutant": mutant, "n": n, "truth": site.equation,
           "found": loc.equation.index, "exact": loc.equation.index in truths,
           "fusion": not site.fusion or site.fusion in loc.kernels.fusions,
           "site_fusion": site.fusion, "fusions": list(loc.kernels.fusions[:4]),
           "segment": list(loc.equation.segment), "named_exactly": loc.equation.exact,
           "method": loc.equation.method,
           "op": site.instruction in (loc.op.instruction, *loc.op.with_instructions),
           "op_exact": loc.op.instruction == site.instruction,
           "op_named": loc.op.instruction, "op_cycles": loc.op.cycles,
           "cycles": loc.cycles, "bound": round(cycle_bound(n), 1),
           "seconds": round(loc.seconds, 1), "flaky": loc.flaky}
    print(f"{name:15s} {mutant:31s} {n:5d} {site.equation:6d} {loc.equation.index:6d} "
          f"{'yes' if row['exact'] else 'NO':>5s} {'yes' if row['fusion'] else 'NO':>6s} "
          f"{'yes' if row['op_exact'] else 'with' if row['op'] else 'NO':>4s} "
          f"{len(loc.equation.segment) if loc.equation.segment else '-':>5} "
          f"{loc.cycles:6d} {loc.op.cycles:4d} {row['bound']:5.1f} {loc.seconds:6.1f}  "
          f"{site.fusion or '-'} / {', '.join(loc.kernels.fusions[:3]) or '-'}"
          + (" FLAKY" if loc.flaky else ""), flush=True)
    return row


def _summary(rows: list[dict[str, Any]], not_applicable: list[str], started: float) -> None:
    """The scores over every localized (model, mutant) pair."""
    scored = [r for r in rows if "error" not in r]
    print()
    if scored:
        exact = sum(r["exact"] for r in scored)
        fusion = sum(r["fusion"] for r in scored)
        within = sum(r["cycles"] <= r["bound"] for r in scored)
        print(f"localized: {len(scored)} (model, mutant) pairs, {len(rows) - len(scored)} errors")
        print(f"equation exact: {exact}/{len(scored)} = {exact / len(scored):.0%}")
        print(f"right fusion:   {fusion}/{len(scored)} = {fusion / len(scored):.0%}")
        op = sum(r["op"] for r in scored)
        op_exact = sum(r["op_exact"] for r in scored)
        print(f"instruction:    {op}/{len(scored)} = {op / len(scored):.0%} named or named with "
              f"it; {op_exact}/{len(scored)} = {op_exact / len(scored):.0%} exactly")
        print(f"cycles within 2 log2(n) + 10: {within}/{len(scored)}; "
              f"mean {sum(r['cycles'] for r in scored) / len(scored):.1f} cycles, "
              f"{sum(r['seconds'] for r in scored) / len(scored):.1f} s per localization")
    print(f"not applicable: {', '.join(not_applicable)} (crash / below tolerance)")
    print(f"total {time.perf_counter() - started:.0f} s")


def real_cases(jobs: int) -> list[dict]:
    """Localize and reduce every real bug case of tests/cases; print a table; return its rows."""
    from xlaprobe.localization.reduce import reduce, write_outputs
    from xlaprobe.releases.envs import installed_version
    from xlaprobe.sources.user import load_case
    started = time.perf_counter()
    rows = []
    print(f"{'case':28s} {'KIND':21s} {'named':21s} {'op (tier 4)':24s} {'pass (tier 5)':21s} "
          f"{'cyc':>3s} {'s':>5s} | {'eqns':>6s} {'elems':>9s} {'tests':>5s} {'cyc':>3s} "
          f"{'s':>5s} repro")
    with make_pool(size=jobs, timeout_s=600) as pool:
        for path in sorted(glob.glob(str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "cases" / "*.py"))):
            if path.endswith("__init__.py"):
                continue
            case = load_case(path)
            if case.fails_on and installed_version() not in case.fails_on:
                # Tiers 3-5 compile the faulty XLA in this process: bisect it instead.
                print(f"{path.rsplit('/', 1)[-1][:-3]:28s} fixed in jaxlib {installed_version()} "
                      f"(wrong up to {case.fails_on[-1]}): skipped")
                continue
            loc = localize(case.program, case.faulty_config, pool)
            red = reduce(case.program, case.faulty_config, pool)
            with tempfile.TemporaryDirectory() as directory:
                written = write_outputs(red, directory, pool)
            name = path.rsplit("/", 1)[-1][:-3]
            op = f"{loc.op.instruction} (eqn {loc.op.equation})" if loc.op.instruction else "-"
            row = {"case": name, "kind": case.kind, "primitive": loc.equation.primitive,
                   "op": loc.op.instruction, "op_equation": loc.op.equation,
                   "op_primitive": loc.op.primitive, "pass": loc.compiler_pass,
                   "cycles": loc.cycles, "op_cycles": loc.op.cycles,
                   "pass_cycles": (loc.blame.cycles if loc.blame else 0), "seconds": round(loc.seconds, 1),
                   "equations_before": red.equations_before,
                   "equations_after": written.equations,
                   "elements_before": sum(x.size for x in case.program.inputs),
                   "elements_after": written.input_elements, "tests": red.tests,
                   "reduce_cycles": red.cycles, "reduce_seconds": round(red.seconds, 1),
                   "repro_exit": written.repro_exit, "repro_lines": written.repro_lines}
            rows.append(row)
            print(f"{name:28s} {case.kind:21s} {loc.equation.primitive:21s} {op:24s} "
                  f"{loc.compiler_pass or '?':21s} {loc.cycles:3d} {loc.seconds:5.1f} | "
                  f"{red.equations_before:2d} -> {written.equations:1d} "
                  f"{row['elements_before']:4d}->{written.input_elements:<4d} {red.tests:5d} "
                  f"{red.cycles:3d} {red.seconds:5.1f} "
                  f"{'shows the fault' if written.repro_exit == 1 else 'exit %s' % written.repro_exit}"
                  f" ({written.repro_lines} lines)", flush=True)
    kind = sum(r["primitive"].replace("-add", "") == r["kind"] or r["primitive"] == r["kind"]
               for r in rows)
    small = sum(r["equations_after"] <= 5 and r["repro_exit"] == 1 for r in rows)
    print(f"\nprimitive = KIND: {kind}/{len(rows)}; reduced to <= 5 equations with a repro.py "
          f"that shows the fault: {small}/{len(rows)}; total {time.perf_counter() - started:.0f} s")
    return rows


if __name__ == "__main__":
    main()
