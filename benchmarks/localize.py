"""Localization benchmark: every zoo model under every planted fault that fires there.

For each zoo model the unmutated compiler is checked once (``xla`` and ``reference``); then every
mutant (`xlaprobe mutants`) compiles the model in a worker of its own. Where its pass fires and the
oracle flags the result, the mutant's `MutationSite` is the ground truth, and
`xlaprobe.localize.localize` (tiers 1-3, given that check so it starts from the finding) must name
its equation (``exact``) and a kernel list that holds its fusion (``fusion``). Prints one row per
(model, mutant): top-level equations n, ground-truth and localized equation, exact?, fusion right?,
compile+run cycles against the 2 log2(n) + 10 budget, seconds; then the shares. The crash mutant
and the below-tolerance mutant are not applicable (nothing numeric to localize / nothing flagged).

    python benchmarks/localize.py                       # all zoo models (about 20 minutes on 2 cores)
    python benchmarks/localize.py --models mlp_mixer,vit --mutants swap-subtract-fused
    python benchmarks/localize.py --method segments     # compile segments alone (the comparison)
    python benchmarks/localize.py --json rows.json
"""

from __future__ import annotations

import argparse
import json
import time

from xlaprobe.check import check_program, judge
from xlaprobe.configs.mutants import MUTANTS
from xlaprobe.localize import cycle_bound, localize, make_pool
from xlaprobe.sources.models import MODELS, build_program


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated zoo models")
    parser.add_argument("--mutants", default=",".join(MUTANTS), help="comma-separated mutants")
    parser.add_argument("--method", default="auto", choices=("auto", "cuts", "segments"),
                        help="tier 2 search (see xlaprobe.localize.api)")
    parser.add_argument("--direction", default="suffix", choices=("suffix", "prefix"),
                        help="for --method segments: which end of the window is fixed first")
    parser.add_argument("--jobs", type=int, default=1, help="workers per isolation group")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()

    started = time.perf_counter()
    programs = {name: build_program(name) for name in args.models.split(",")}
    with make_pool(size=args.jobs, timeout_s=600) as pool:
        baselines = {name: check_program(p, ["xla", "reference"], pool) for name, p in programs.items()}
    for name, base in baselines.items():
        if base.findings:
            print(f"note: {name} has findings without any mutant: {[f.config for f in base.findings]}")

    rows, not_applicable = [], []
    header = (f"{'model':15s} {'mutant':31s} {'n':>5s} {'truth':>6s} {'found':>6s} {'exact':>5s} "
              f"{'fusion':>6s} {'alone':>5s} {'cycles':>6s} {'bound':>5s} {'s':>6s}  site fusion / named kernels")
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
                                   direction=args.direction)
                except Exception as exc:  # report and go on: one failure must not end the table
                    print(f"{name:15s} {mutant:31s} error: {type(exc).__name__}: {exc}")
                    rows.append({"model": name, "mutant": mutant, "error": str(exc)})
                    continue
                n = loc.equations
                row = {"model": name, "mutant": mutant, "n": n, "truth": site.equation,
                       "found": loc.equation, "exact": loc.equation == site.equation,
                       "fusion": not site.fusion or site.fusion in loc.fusions,
                       "site_fusion": site.fusion, "fusions": list(loc.fusions[:4]),
                       "segment": list(loc.segment), "named_exactly": loc.exact,
                       "method": loc.method,
                       "cycles": loc.cycles, "bound": round(cycle_bound(n), 1),
                       "seconds": round(loc.seconds, 1), "flaky": loc.flaky}
                rows.append(row)
                print(f"{name:15s} {mutant:31s} {n:5d} {site.equation:6d} {loc.equation:6d} "
                      f"{'yes' if row['exact'] else 'NO':>5s} {'yes' if row['fusion'] else 'NO':>6s} "
                      f"{len(loc.segment) if loc.segment else '-':>5} "
                      f"{loc.cycles:6d} {row['bound']:5.1f} {loc.seconds:6.1f}  "
                      f"{site.fusion or '-'} / {', '.join(loc.fusions[:3]) or '-'}"
                      + (" FLAKY" if loc.flaky else ""), flush=True)

    scored = [r for r in rows if "error" not in r]
    print()
    if scored:
        exact = sum(r["exact"] for r in scored)
        fusion = sum(r["fusion"] for r in scored)
        within = sum(r["cycles"] <= r["bound"] for r in scored)
        print(f"localized: {len(scored)} (model, mutant) pairs, {len(rows) - len(scored)} errors")
        print(f"equation exact: {exact}/{len(scored)} = {exact / len(scored):.0%}")
        print(f"right fusion:   {fusion}/{len(scored)} = {fusion / len(scored):.0%}")
        print(f"cycles within 2 log2(n) + 10: {within}/{len(scored)}; "
              f"mean {sum(r['cycles'] for r in scored) / len(scored):.1f} cycles, "
              f"{sum(r['seconds'] for r in scored) / len(scored):.1f} s per localization")
    print(f"not applicable: {', '.join(not_applicable)} (crash / below tolerance)")
    print(f"total {time.perf_counter() - started:.0f} s")
    if args.json:
        with open(args.json, "w") as file:
            json.dump(rows, file, indent=2)


if __name__ == "__main__":
    main()
