"""Case x release: which jaxlib releases compute each regression case wrongly.

Every case module (tests/cases: the shared XLA:CPU bugs; tests/fuzz_cases: what the fuzzer found;
tests/fixed_cases: bugs later releases fixed) runs under its FAULTY_CONFIG's options on each
release (``jaxlib==V[...]``), judged against the float64 reference as ``xlaprobe check`` would.
Prints one row per case: the verdict per release, the releases it fails on, and whether that
matches the module's FAILS_ON. Environments missing from the cache are made first.

    python benchmarks/release_matrix.py                          # 0.4.33 .. 0.12.0.1, 7 releases
    python benchmarks/release_matrix.py --releases 0.5.3,0.12.0.1 --cases dus_shifted_self_update
    python benchmarks/release_matrix.py --json matrix.json

About 3 s per (case, release) on 2 cores once the environments exist.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time

from xlaprobe.oracle import summary_kind
from xlaprobe.checking import REFERENCE, check_program, judge
from xlaprobe.configs.registry import Configuration
from xlaprobe.releases import envs
from xlaprobe.releases.kind import release_config, release_options
from xlaprobe.sources.user import load_case
from xlaprobe.workers import WorkerPool

ROOT = pathlib.Path(__file__).resolve().parent.parent / "tests"
FOLDERS = ("cases", "fuzz_cases", "fixed_cases")
DEFAULT = "0.4.33,0.5.3,0.6.2,0.7.2,0.10.2,0.11.2,0.12.0.1"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--releases", default=DEFAULT, help="comma-separated jaxlib versions")
    parser.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    releases = sorted({envs.check_version(v.strip()) for v in args.releases.split(",")},
                      key=envs.version_key)
    wanted = {c.strip() for c in args.cases.split(",") if c.strip()}
    paths = [p for folder in FOLDERS for p in sorted((ROOT / folder).glob("[a-z]*.py"))
             if not wanted or p.stem in wanted]
    started = time.perf_counter()
    for version in releases:
        if version != envs.installed_version():
            envs.ensure_env(version, log=print)
    rows = []
    with WorkerPool(size=1, timeout_s=300) as pool:
        for path in paths:
            case = load_case(str(path))
            options = release_options(Configuration.parse(case.faulty_config))
            base = check_program(case.program, [REFERENCE], pool)
            verdicts = {}
            for version in releases:
                spec = str(release_config(version, options))
                outcome = pool.run(case.program, spec)
                result = judge(case.program, [REFERENCE, spec], [base.outcomes[0], outcome],
                               base.budget, base.flushed)
                verdicts[version] = summary_kind(v.kind for v in result.verdicts[1]).value
            wrong = [v for v in releases if verdicts[v] not in ("ok", "ftz", "unsupported")]
            declared = [v for v in case.fails_on if v in releases]
            row = {"case": f"{path.parent.name}/{path.stem}", "config": case.faulty_config,
                   "verdicts": verdicts, "wrong_on": wrong, "declared": declared,
                   "matches": wrong == declared}
            rows.append(row)
            cells = " ".join(f"{verdicts[v][:8]:>8}" for v in releases)
            print(f"{row['case']:<45} {cells}  {'matches FAILS_ON' if row['matches'] else 'DIFFERS: declared ' + ','.join(declared)}",
                  flush=True)
    print(f"{'case':<45} " + " ".join(f"{v:>8}" for v in releases))
    print(f"{sum(r['matches'] for r in rows)}/{len(rows)} cases match their FAILS_ON; "
          f"{time.perf_counter() - started:.0f} s")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
