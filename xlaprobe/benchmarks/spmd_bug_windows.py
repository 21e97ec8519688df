"""Release windows of the partitioned-program bugs in ``tests/spmd_bugs/``: for each script and
partitioner, the first jax/jaxlib release that has the bug and the first that fixed it, found by
`xlaprobe.releases.bisection.bisect` over every release on the registry from ``--oldest`` on,
each run in its own release's environment (`xlaprobe.releases.scripts.run_script`).

Usage (from ``xlaprobe/``; makes each release environment the search reaches, ~0.5 GB each)::

    python benchmarks/spmd_bug_windows.py [--oldest 0.4.26] [--only NAME] [--json FILE]

Prints each release run and one line per case: last good, first bad, first fixed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from xlaprobe.releases import envs
from xlaprobe.releases.bisection import bisect
from xlaprobe.releases.scripts import run_script

BUGS = Path(__file__).resolve().parent.parent / "tests" / "spmd_bugs"

#: (script, arguments, the text its failure prints on 0.12.0.1; None: right on 0.12.0.1, and
#: only the oldest release that runs it is tried beside it unless --sweep).
CASES = [
    ("reduce_window_base_dilation_negative_padding.py", ("shardy",),
     "get_first_valid_element_offset_on_dilated_shard"),
    ("reduce_window_base_dilation_negative_padding.py", ("gspmd",), None),
    ("reduce_window_stride_shard_shape.py", ("4", "shardy"), "sharded_rw->shape()"),
    ("reduce_window_stride_shard_shape.py", ("4", "gspmd"), None),
    ("sharded_min_max_drops_nan.py", ("min", "shardy"), ""),
    ("sharded_min_max_drops_nan.py", ("min", "gspmd"), ""),
    ("scatter_index_sharded_invalid_hlo.py", ("shardy",), "hlo_verifier"),
    ("scatter_index_sharded_invalid_hlo.py", ("gspmd",), "hlo_verifier"),
    ("sharded_bitwise_reduction_unimplemented.py", ("xor", "shardy"),
     "Unsupported reduction computation"),
    ("sharded_bitwise_reduction_unimplemented.py", ("xor", "gspmd"),
     "Unsupported reduction computation"),
    ("dynamic_update_slice_clamp_dropped.py", ("shardy",), ""),
    ("dynamic_update_slice_clamp_dropped.py", ("gspmd",), ""),
    ("gather_int8_indices_abort.py", ("shardy",), "Unsupported indices type: S8"),
    ("gather_int8_indices_abort.py", ("gspmd",), "Unsupported indices type: S8"),
    ("reduce_window_shift_sharded_consumer.py", ("shardy",), ""),
    ("reduce_window_shift_sharded_consumer.py", ("gspmd",), ""),
    ("conv_sharded_contraction_all_reduce_whole_mesh.py", ("shardy",), ""),
    ("conv_sharded_contraction_all_reduce_whole_mesh.py", ("gspmd",), ""),
]


def main() -> int:
    """Bisect every case; print and optionally store the windows. Exit 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--oldest", default="0.4.26", help="oldest release searched")
    parser.add_argument("--only", default="", help="only scripts whose name contains this")
    parser.add_argument("--json", type=Path, help="write the windows here")
    parser.add_argument("--start", type=int, default=0, help="skip the first N cases")
    parser.add_argument("--sweep", action="store_true",
                        help="search every release for a case right on the installed one")
    opts = parser.parse_args()
    floor = envs.version_key(opts.oldest)
    releases = [v for v in envs.available_releases() if envs.version_key(v) >= floor]
    print(f"{len(releases)} releases {releases[0]} .. {releases[-1]}", flush=True)
    rows = []
    for script, args, signature in CASES[opts.start:]:
        if opts.only not in script:
            continue
        searched = releases
        if signature is None and not opts.sweep:  # both ends only: a sweep costs ~R runs
            searched = [releases[0], envs.installed_version()]
        name = f"{script[:-3]} {' '.join(args)}"
        start = time.perf_counter()

        def judge(version: str, script: str = script, args: tuple = args,
                  signature: str = signature):
            return run_script(version, BUGS / script, args, signature=signature or "",
                              timeout_s=300, log=lambda line: print("  " + line, flush=True))

        def show(run) -> None:
            print(f"  {name:<58} jaxlib=={run.release:<9} {run.verdict:<12}"
                  f"{' other' if run.other else ''} {run.seconds:5.1f} s  {run.detail[:90]}",
                  flush=True)

        result = bisect(searched, judge, known_bad=envs.installed_version(), target=name,
                        config=args[-1], on_run=show)
        row = {"case": name, "last_good": result.last_good, "first_bad": result.first_bad,
               "first_fixed": result.first_fixed, "bad_at_oldest": bool(
                   result.first_bad and not result.last_good),
               "fails_nowhere": result.fails_nowhere, "runs": result.release_runs,
               "seconds": round(time.perf_counter() - start, 1),
               "unsupported": sorted({r.release for r in result.runs
                                      if r.verdict == "unsupported"}, key=envs.version_key),
               "other": sorted({f"{r.release}: {r.verdict} {r.detail[:80]}" for r in result.runs
                                if r.other})}
        rows.append(row)
        print(f"{name}: last good {row['last_good'] or '-'}, first bad {row['first_bad'] or '-'}"
              f"{' (oldest tried)' if row['bad_at_oldest'] else ''}, first fixed "
              f"{row['first_fixed'] or '-'}{' (fails nowhere)' if row['fails_nowhere'] else ''};"
              f" {row['runs']} runs, {row['seconds']} s", flush=True)
    if opts.json:
        opts.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
