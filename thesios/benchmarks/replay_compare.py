"""Replay a real trace and the synthesized trace that stands for it on the same device; compare.

For each class of a recorded fleet (``record_fleet.py``): one disk is held out, the others are
Bernoulli-sampled at p = 1/(their number) and merged into one synthesized disk
(:func:`thesios.trace_validation.synthesize_from`), and the first ``--seconds`` of both are replayed
with fio on one target file (:mod:`thesios.replay`: direct I/O, ``--jobs`` psync jobs side by side).
Prints the read-latency percentiles each replay measured (and those recorded with the real trace),
the accuracy ``1 - |synth - real| / real`` of each percentile and the two-sample Kolmogorov-Smirnov
distance between the replayed read-latency distributions.

    python benchmarks/replay_compare.py --traces /var/tmp/thesios-fleet --target /var/tmp/thesios-replay.img [--json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from scipy.stats import ks_2samp

from thesios.replay import replay
from thesios.trace_validation import Disk, load_disks, synthesize_from


def _replay(d: Disk, seconds: float, target: Path, jobs: int) -> np.ndarray:
    keep = d.start_s < seconds
    res = replay(d.start_s[keep], d.is_read[keep], d.file_id[keep], d.offset[keep], d.size[keep], target,
                 target_bytes=2 << 30, jobs=jobs)
    return res.latency_s[res.is_read]


def compare_class(disks: list[Disk], seconds: float, target: Path, jobs: int, seed: int) -> dict:
    """Replay one held-out disk of a class and its synthesis; their read-latency statistics."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(disks))
    held, donors = disks[order[0]], [disks[i] for i in order[1:]]
    syn = synthesize_from(donors, 1 / len(donors), np.random.default_rng([seed, 1]), seconds)
    real_lat, syn_lat = _replay(held, seconds, target, jobs), _replay(syn, seconds, target, jobs)
    rec = held.latency_s[(held.start_s < seconds) & held.is_read]
    q = [50, 90, 99]
    out = {"held_out": held.name, "donors": len(donors), "p": 1 / len(donors),
           "requests_real": int((held.start_s < seconds).sum()), "requests_synth": int((syn.start_s < seconds).sum())}
    for name, lat in (("recorded", rec), ("replayed_real", real_lat), ("replayed_synth", syn_lat)):
        out[name] = {f"p{k}_ms": float(v) * 1e3 for k, v in zip(q, np.percentile(lat, q))} if len(lat) else {}
    out["accuracy"] = {k: max(0.0, 1 - abs(out["replayed_synth"][k] - out["replayed_real"][k]) / out["replayed_real"][k])
                       for k in out["replayed_real"]}
    out["ks_distance"] = float(ks_2samp(real_lat, syn_lat).statistic)
    return out


def main() -> None:
    """Compare per class; print a table or JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--traces", type=Path, required=True)
    ap.add_argument("--target", type=Path, required=True)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    disks = load_disks([args.traces], group_by="workload")
    classes = sorted({d.group for d in disks})
    rows = {c: compare_class([d for d in disks if d.group == c], args.seconds, args.target, args.jobs, args.seed) for c in classes}
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print("| class | requests real / synth | read p50 ms recorded / replayed real / replayed synth | read p99 ms (same) | accuracy p50 / p99 | KS |")
    print("|---|---|---|---|---|---|")
    for c, r in rows.items():
        rec, re_, sy = r["recorded"], r["replayed_real"], r["replayed_synth"]
        print(f"| {c} | {r['requests_real']} / {r['requests_synth']} | {rec['p50_ms']:.3f} / {re_['p50_ms']:.3f} / {sy['p50_ms']:.3f} | "
              f"{rec['p99_ms']:.2f} / {re_['p99_ms']:.2f} / {sy['p99_ms']:.2f} | {r['accuracy']['p50_ms']:.1%} / {r['accuracy']['p99_ms']:.1%} | {r['ks_distance']:.3f} |")


if __name__ == "__main__":
    main()
