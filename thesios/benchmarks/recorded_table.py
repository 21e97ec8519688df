"""The validation table on a recorded fleet of real software, per class, at the rates it supports.

For each p and seed: :func:`thesios.trace_validation.validate_traces` grouped by ``workload`` with
``--held-out`` disks per class; the accuracies are averaged over seeds. Beside it, a control: each
held-out disk synthesized from 1/p independent samples of *itself* (no other disk), which leaves
only the sampling noise and the metrics' own noise. The gap between the two rows is what the
disks' differences cost (their ``rate_sigma`` and ``read_jitter`` are printed, in the generator's
terms, to read against ``heterogeneity_curve.py``).

    python benchmarks/recorded_table.py --traces /var/tmp/thesios-fleet [--held-out 4] [--seeds 3]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from thesios.trace_validation import Disk, load_disks, validate_traces
from thesios.validate import METRICS


def self_control(disks: list[Disk], rate: float, held_out: int, seed: int) -> dict[str, float]:
    """Mean accuracy when each of ``held_out`` disks is synthesized from copies of itself."""
    rng = np.random.default_rng(seed)
    accs = []
    for i in rng.permutation(len(disks))[:held_out]:
        d = disks[i]
        copies = [Disk(f"copy{k}", "self", d.start_s, d.is_read, d.size, d.latency_s, d.file_id, d.offset)
                  for k in range(round(1 / rate) + 1)]
        accs.append(validate_traces(copies, rate, held_out=1, seed=seed)["accuracy"])
    return {m: float(np.nanmean([a[m] for a in accs])) for m in METRICS}


def main() -> None:
    """Print the table (markdown) or JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--traces", type=Path, required=True)
    ap.add_argument("--held-out", type=int, default=4)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--rates", default="5,10,20", help="1/p values")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    disks = load_disks([args.traces], group_by="workload")
    classes = sorted({d.group for d in disks})
    rows = []
    for inv in (int(x) for x in args.rates.split(",")):
        docs = [validate_traces(disks, 1 / inv, held_out=args.held_out, seed=s) for s in range(args.seeds)]
        for c in classes:
            acc = {m: float(np.nanmean([d["groups"][c]["accuracy"][m] for d in docs])) for m in METRICS}
            het = docs[0]["groups"][c]["heterogeneity"]
            rows.append({"class": c, "p": f"1/{inv}", "kind": "others of the class", "accuracy": acc} | het)
            members = [d for d in disks if d.group == c]
            rows.append({"class": c, "p": f"1/{inv}", "kind": "control: itself", "accuracy": self_control(members, 1 / inv, args.held_out, 0)})
        rows.append({"class": "all", "p": f"1/{inv}", "kind": "others of the class",
                     "accuracy": {m: float(np.nanmean([d["accuracy"][m] for d in docs])) for m in METRICS}})
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print("| class | p | synthesized from | " + " | ".join(METRICS) + " | rate_sigma | read_jitter |")
    print("|---" * (len(METRICS) + 5) + "|")
    for r in rows:
        cells = " | ".join("n/a" if r["accuracy"][m] != r["accuracy"][m] else f"{r['accuracy'][m]:.1%}" for m in METRICS)
        het = f"{r['rate_sigma']:.2f} | {r['read_jitter']:.2f}" if "rate_sigma" in r else " | "
        print(f"| {r['class']} | {r['p']} | {r['kind']} | {cells} | {het} |")


if __name__ == "__main__":
    main()
