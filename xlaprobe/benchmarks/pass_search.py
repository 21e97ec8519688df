"""Compiler-pass search (localization tier 5) with one test at a time and with several at once.

For each real XLA:CPU bug case of ``tests/cases`` that the installed jaxlib still has, the case is
checked once (its faulty configuration and the reference), then
`xlaprobe.localization.passes.blame_pass` runs on pools of each ``--widths`` size (local worker
processes, or Ray actors with ``--backend ray``): ddmin's tests of one round run that many at a
time. Prints, per case and width, the pass named, the disabled set, compiles (cycles) and seconds,
and the speed-up of each width over width 1 with whether the answers are equal (they must be: the
parallel search takes the sequential one's first failing subset).

    python benchmarks/pass_search.py                    # widths 1,2, local
    python benchmarks/pass_search.py --widths 1,2,4 --backend ray
    python benchmarks/pass_search.py --cases while_loop_skipped --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from xlaprobe.backends import make_pool
from xlaprobe.checking import check_program
from xlaprobe.configs.registry import Configuration
from xlaprobe.localization.passes import blame_pass
from xlaprobe.releases import envs
from xlaprobe.sources.user import load_case

CASES = Path(__file__).resolve().parents[1] / "tests" / "cases"


def present_cases(names: list[str]) -> list:
    """The cases of `names` (all when empty) that the installed jaxlib still gets wrong."""
    installed = envs.installed_version()
    paths = [CASES / f"{n.removesuffix('.py')}.py" for n in names] if names else \
        sorted(p for p in CASES.glob("*.py") if not p.name.startswith("_"))
    cases = [load_case(str(p)) for p in paths]
    return [c for c in cases if not c.fails_on or installed in c.fails_on]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--widths", default="1,2", help="pool sizes to compare (1 first)")
    parser.add_argument("--backend", default="local", choices=("local", "ray"))
    parser.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    widths = [int(w) for w in args.widths.split(",")]
    rows = []
    for case in present_cases([n for n in args.cases.split(",") if n]):
        config = Configuration.parse(case.faulty_config)
        if config.kind != "xla":
            continue
        answers = {}
        for width in widths:
            with make_pool(args.backend, width, 300.0) as pool:
                check = check_program(case.program, [str(config), "reference"], pool)
                started = time.perf_counter()
                blame = blame_pass(case.program, config, pool, check)
                seconds = time.perf_counter() - started
            answers[width] = (blame.compiler_pass, blame.disabled)
            rows.append({"case": Path(case.program.provenance.name).stem, "width": width,
                         "pass": blame.compiler_pass, "disabled": list(blame.disabled),
                         "candidates": len(blame.candidates), "cycles": blame.cycles,
                         "seconds": round(seconds, 2)})
            print(f"{rows[-1]['case']} width {width}: {blame.compiler_pass or '-'} "
                  f"({', '.join(blame.disabled)}) of {len(blame.candidates)} candidates, "
                  f"{blame.cycles} compiles, {seconds:.1f} s", file=sys.stderr, flush=True)
        base = next(r for r in rows if r["case"] == rows[-1]["case"] and r["width"] == widths[0])
        for row in rows[-len(widths):]:
            row["speedup"] = round(base["seconds"] / max(row["seconds"], 1e-9), 2)
            row["same_answer"] = answers[row["width"]] == answers[widths[0]]
    print(f"{'case':<32} {'width':>5} {'pass':<22} {'cand':>4} {'compiles':>8} {'s':>7} "
          f"{'speed-up':>8}  same")
    for r in rows:
        print(f"{r['case']:<32} {r['width']:>5} {r['pass'] or '-':<22} {r['candidates']:>4} "
              f"{r['cycles']:>8} {r['seconds']:>7.1f} {r['speedup']:>8.2f}  "
              f"{'yes' if r['same_answer'] else 'NO'}")
    for width in widths[1:]:
        mine = [r for r in rows if r["width"] == width]
        base = sum(r["seconds"] for r in rows if r["width"] == widths[0])
        total = sum(r["seconds"] for r in mine)
        print(f"width {width} ({args.backend}): {base:.1f} s -> {total:.1f} s over "
              f"{len(mine)} cases ({base / max(total, 1e-9):.2f}x), answers equal in "
              f"{sum(r['same_answer'] for r in mine)}/{len(mine)}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
