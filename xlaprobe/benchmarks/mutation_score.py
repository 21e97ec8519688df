"""Mutation score: how many planted miscompilations the default configuration set detects.

For every zoo model and every corpus program (`xlaprobe.sources.corpus`), the default
configurations (xla, xla:O0, eager, reference) run once; then every mutant (`xlaprobe mutants`)
compiles the program in a worker of its own and its outputs are judged against the same reference
and error budget, exactly as ``xlaprobe check --configs xla,xla:O0,eager,reference,mutant:<name>``
would. Prints a table (mutant x program: fired? detected? verdict; where it fired) and the
mutation score = detected / fired, per (mutant, program) pair and per mutant, with the
below-tolerance mutant reported apart (it must never be flagged), the crash mutant counted as
detected when it comes back as a crash outcome, and equivalent firings (outputs bit-identical to
the unmutated compiler's) listed but not scored.

    python benchmarks/mutation_score.py                 # zoo + corpus (about 10 minutes on 2 cores)
    python benchmarks/mutation_score.py --corpus-only   # about 2 minutes
    python benchmarks/mutation_score.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from xlaprobe.checking import DEFAULT_CONFIGS, CheckResult, check_program, judge
from xlaprobe.configs.mutants import MUTANTS
from xlaprobe.outcome import Outcome, OutcomeKind
from xlaprobe.program import Program
from xlaprobe.sources.corpus import CORPUS, corpus_program
from xlaprobe.sources.models import MODELS, build_program
from xlaprobe.workers import WorkerPool


def score_firing(program: Program, base: CheckResult, spec: str, outcome: Outcome, *,
                 unmutated: str) -> dict[str, Any]:
    """Judge the run `outcome` of mutant configuration `spec` against `program`'s check `base`
    without it, as ``xlaprobe check`` would (also for ``spmd_mutation_score.py``): ``detected``,
    ``equivalent`` (outputs bit-identical to those of `base`'s configuration `unmutated`),
    ``verdict`` (the finding's kind or ``ok``) and ``site`` (where it fired, JSON, or None)."""
    result = judge(program, list(base.configs) + [spec], list(base.outcomes) + [outcome],
                   base.budget, base.flushed)
    finding = next((f for f in result.findings if f.config == spec), None)
    # Fired, yet bit-identical to the unmutated compiler on this input: an equivalent
    # mutant (e.g. (a-b)**2 with a and b swapped), which no oracle can detect.
    same = base.outcomes[base.configs.index(unmutated)]
    equivalent = (outcome.ran and same.ran and len(outcome.outputs) == len(same.outputs)
                  and all(a.tobytes() == b.tobytes()
                          for a, b in zip(outcome.outputs, same.outputs)))
    site = outcome.mutations[0] if outcome.mutations else None
    return {"detected": finding is not None, "equivalent": equivalent,
            "verdict": finding.kind.value if finding else "ok",
            "site": site.to_json() if site else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus-only", action="store_true", help="skip the zoo models")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()

    started = time.perf_counter()
    programs = {f"corpus/{n}": corpus_program(n) for n in CORPUS}
    if not args.corpus_only:
        programs.update({f"zoo/{n}": build_program(n) for n in MODELS})
    configs = DEFAULT_CONFIGS.split(",")
    baselines = {}
    with WorkerPool(size=1, timeout_s=600) as pool:
        for name, program in programs.items():
            baselines[name] = check_program(program, configs, pool)
            if baselines[name].findings:
                print(f"note: {name} has findings without any mutant: "
                      f"{[f.config for f in baselines[name].findings]}")
    baseline_s = time.perf_counter() - started

    rows = []
    for mutant in MUTANTS.values():
        spec = f"mutant:{mutant.name}"
        with WorkerPool(size=1, timeout_s=600) as pool:  # one mutant's pass per process
            for name, program in programs.items():
                base = baselines[name]
                outcome = pool.run(program, spec)
                fired = bool(outcome.mutations) or outcome.kind is OutcomeKind.CRASH
                if not fired:
                    continue
                scored = score_firing(program, base, spec, outcome, unmutated="xla")
                rows.append({
                    "mutant": mutant.name, "program": name, "fired": True,
                    "detected": scored["detected"], "equivalent": scored["equivalent"],
                    "verdict": scored["verdict"],
                    "below_tolerance": mutant.below_tolerance, "crashes": mutant.crashes,
                    "site": scored["site"]})
    total_s = time.perf_counter() - started

    print(f"\n{'mutant':32} {'program':26} {'detected':9} {'verdict':14} where (HLO instruction / "
          "fusion / jaxpr equation)")
    for row in rows:
        site = row["site"]
        where = (f"{site['instruction']} / {site['fusion'] or '-'} / eqn{site['equation']}"
                 if site else "(compiler crashed)")
        detected = "yes" if row["detected"] else ("equiv." if row["equivalent"] else "no")
        print(f"{row['mutant']:32} {row['program']:26} {detected:9} "
              f"{row['verdict']:14} {where}")

    never = [m for m in MUTANTS if not any(r["mutant"] == m for r in rows)]
    equivalent = [(r["mutant"], r["program"]) for r in rows
                  if r["equivalent"] and not r["below_tolerance"]]
    scored = [r for r in rows if not r["below_tolerance"] and not r["equivalent"]]
    pairs_detected = sum(r["detected"] for r in scored)
    mutants_fired = sorted({r["mutant"] for r in scored})
    mutants_detected = sorted({r["mutant"] for r in scored if r["detected"]})
    quiet = [r for r in rows if r["below_tolerance"]]
    print(f"\nprograms: {len(programs)}; mutants: {len(MUTANTS)}; never fired: {never or 'none'}")
    print(f"fired with no effect on the outputs (equivalent, not scored): {equivalent or 'none'}")
    print(f"mutation score per (mutant, program) pair: {pairs_detected}/{len(scored)} = "
          f"{pairs_detected / max(len(scored), 1):.1%}")
    print(f"mutation score per mutant (detected on some program where it fires): "
          f"{len(mutants_detected)}/{len(mutants_fired)} = "
          f"{len(mutants_detected) / max(len(mutants_fired), 1):.1%}")
    missed = [(r["mutant"], r["program"]) for r in scored if not r["detected"]]
    print(f"missed pairs: {missed or 'none'}")
    print(f"below-tolerance mutant: fired on {len(quiet)} programs, flagged on "
          f"{sum(r['detected'] for r in quiet)} (must be 0)")
    print(f"seconds: baseline checks {baseline_s:.0f}, total {total_s:.0f}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=2)


if __name__ == "__main__":
    main()
