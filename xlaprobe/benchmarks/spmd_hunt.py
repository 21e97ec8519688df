"""A bug hunt over partitioned programs: a fuzz campaign whose programs carry sharding constraints.

Runs an `xlaprobe.campaign.Campaign` whose source is
`xlaprobe.sources.sharding_gen.sharded_generate` (the generator's programs with random, possibly
uneven, sharding constraints over a 4x2 abstract mesh), checked under xla, both partitioners and
donated inputs on that mesh (other meshes would not divide the inputs' constraints) against the
float64 reference, then prints the campaign's figures, the sharding patterns the programs covered (`xlaprobe.sources.sharding_gen.coverage`) and the
distinct findings (``xlaprobe findings --db DB`` shows them with their artifacts and repros).

    python benchmarks/spmd_hunt.py --time 20m --db hunt.db [--seed 0] [--source shard_map]

``--source shard_map``: the generator's programs as ``shard_map`` bodies with collectives on
their outputs (`xlaprobe.sources.shardmap_gen`), checked under both partitioners and the
reference (the single-device ``xla`` cannot run a shard_map over 8 devices).
"""

from __future__ import annotations

import argparse
import collections
from pathlib import Path

from xlaprobe.campaign import Campaign, parse_duration
from xlaprobe.sources import shardmap_gen
from xlaprobe.sources.sharding_gen import coverage, sharded_generate

CONFIGS = ("xla", "spmd[mesh=4x2]", "spmd[mesh=4x2,partitioner=gspmd]",
           "spmd[donate=all,mesh=4x2]", "reference")
SHARD_MAP_CONFIGS = ("spmd[mesh=4x2]", "spmd[mesh=4x2,partitioner=gspmd]", "reference")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time", default="10m", help="wall-time budget: 90s, 10m, 1h")
    parser.add_argument("--db", default="spmd_hunt.db", help="the store (created if missing)")
    parser.add_argument("--seed", type=int, default=0, help="first generator seed")
    parser.add_argument("--source", choices=("constraints", "shard_map"), default="constraints",
                        help="sharding constraints planted, or shard_map bodies with collectives")
    args = parser.parse_args()
    mapped = args.source == "shard_map"
    count = shardmap_gen.coverage if mapped else coverage
    patterns: collections.Counter[str] = collections.Counter()
    kinds: collections.Counter[str] = collections.Counter()

    def on_program(seed, program, result) -> None:
        if program is None:
            return
        patterns.update(count(program.jaxpr))
        kinds.update(f"{f.config} {f.kind.value}" for f in result.findings)
        print(f"seed {seed}: {program.num_equations} equations, "
              f"{len(result.findings)} findings", flush=True)

    campaign = Campaign(Path(args.db), SHARD_MAP_CONFIGS if mapped else CONFIGS, seed=args.seed,
                        source=shardmap_gen.shard_map_generate if mapped else sharded_generate)
    try:
        summary = campaign.run(parse_duration(args.time), on_program=on_program)
    finally:
        campaign.close()
    print(f"\nprograms {summary.session_programs} in {summary.elapsed_s:.0f} s "
          f"({summary.programs_per_s:.2f}/s); findings {summary.findings}, distinct fingerprints "
          f"{summary.unique_findings}, failing programs {summary.failing_programs}")
    print("collectives (shard_map)" if mapped else "sharding patterns (constraints)",
          dict(sorted(patterns.items())))
    print("findings by configuration and kind:", dict(sorted(kinds.items())))


if __name__ == "__main__":
    main()
