"""How the commands print their results: JSON documents for machines, rich tables for people.
Pure functions of the results (no replay, no validation)."""

from __future__ import annotations

import math

import json
import sys
from dataclasses import asdict

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from adares.policies import REPLAY_BASELINES, baseline_names
from adares.simulator import Result
from adares.trace import Trace


_SHORT = {"threshold": "thr.", "predictive": "pred."}  # column heads of the replay table


def as_json(doc: dict) -> str:
    """``doc`` as indented JSON with a final newline."""
    return json.dumps(doc, indent=2) + "\n"


def evaluate_table(log: str, res: dict) -> Table:
    """The off-policy evaluation table (``adares.ope.evaluate_log``'s result)."""
    table = Table(title=f"off-policy cost estimates from {log} (lower is better)")
    for col in ("resource", "policy", "IPS", "SNIPS", "DR [95% CI]", "ESS"):
        table.add_column(col, justify="right")
    for r, per in res.items():
        table.add_row(r, "logged", f"{per['logged']['mean']:.3f}", "", "", "")
        for name, v in per.items():
            if name != "logged":
                table.add_row(r, name, f"{v['ips']:.3f}", f"{v['snips']:.3f}",
                              f"{v['dr']:.3f} [{v['dr_low']:.3f}, {v['dr_high']:.3f}]",
                              f"{v['ess']:.0f}")
    return table


def _trace_doc(spec: str, tr: Trace) -> dict:
    return {"spec": spec, "vms": tr.n_vms, "steps": tr.n_steps, "step_s": tr.step_s}


def _print(table: Table) -> None:
    # Pipes get 80 columns from rich by default and a fixed wider width still cut compare's
    # cells ("-63/-1…"): a file gets each table at its natural width, without padding.
    if sys.stdout.isatty():
        Console().print(table)
        return
    wide = Console(width=10_000)
    Console(width=Measurement.get(wide, wide.options, table).maximum).print(table)


def replay_json(spec: str, tr: Trace, results: dict[str, Result], sav: dict) -> str:
    """The replay as a JSON document: the trace, each policy's ``Result.as_dict`` and the
    savings (``adares.replay.savings``)."""
    doc = {"trace": _trace_doc(spec, tr),
           "policies": {n: r.as_dict() for n, r in results.items()}, "savings": sav}
    return as_json(doc)


def _pct(s: dict, key: str) -> str:
    v = s.get(key)
    return "-" if v is None else f"{100 * v['vcpu_hours']:+.0f}/{100 * v['gb_hours']:+.0f}"


def replay_table(tr: Trace, results: dict[str, Result], sav: dict) -> Table:
    """The replay's table: hours, violations, resizes, reward and the savings columns."""
    caption = ("vs thr./pred.: vCPU-hours/GB-hours saved, % (1 - policy/baseline); "
               "reward: -cost per VM-hour")
    missing = [b for b in REPLAY_BASELINES if b not in results]
    if missing:
        # Without this the empty columns read as "no savings".
        caption += (f"; -: add {' and '.join(missing)} to --policies for savings against "
                    f"{'them' if len(missing) > 1 else 'it'}")
    table = Table(caption=caption, box=box.SIMPLE, pad_edge=False,
                  title=f"replay: {tr.n_vms} VMs x {tr.n_steps * tr.step_s / 86400:.1f} days")
    for col in ("policy", "vCPU-h", "GB-h", "thr.", "OOMs", "resizes", "reward",
                *(f"vs {_SHORT.get(b, b[:5])}" for b in REPLAY_BASELINES)):
        table.add_column(col, justify="right", no_wrap=True)
    for n, r in results.items():
        table.add_row(n, f"{r.vcpu_hours:.0f}", f"{r.gb_hours:.0f}",
                      f"{100 * r.cpu_throttled_share:.2f}%", f"{r.oom_events}", f"{r.resizes}",
                      f"{r.reward:.3f}", *(_pct(sav[n], f"vs_{b}") for b in REPLAY_BASELINES))
    return table


def nodes_table(results: dict[str, Result], n_nodes: int) -> Table:
    """The node-level table of a replay on nodes (``--cluster``)."""
    nodes = Table(title=f"nodes: {n_nodes} (means over nodes and steps)", box=box.SIMPLE,
                  pad_edge=False, caption="util: used / physical; alloc: allocated / physical")
    for col in ("policy", "refused resizes", "contention thr.", "CPU util", "mem util",
                "CPU alloc", "mem alloc"):
        nodes.add_column(col, justify="right", no_wrap=True)
    for n, r in results.items():
        e = r.extra
        nodes.add_row(n, f"{e['refused_resizes']}", f"{100 * e['cpu_contention_share']:.2f}%",
                      *(f"{e[k]:.2f}" for k in ("node_cpu_utilization", "node_mem_utilization",
                                                 "node_cpu_allocated", "node_mem_allocated")))
    return nodes


def print_replay(tr: Trace, results: dict[str, Result], sav: dict, n_nodes: int | None) -> None:
    """Print the replay's table(s) to stdout (at their natural width off a terminal)."""
    _print(replay_table(tr, results, sav))
    if n_nodes is not None:
        _print(nodes_table(results, n_nodes))


def _cap(cap: float | None) -> float | None:
    return None if cap is None or math.isinf(cap) else cap


def compare_json(spec: str, tr: Trace, res: dict, sav: dict, target_throttle: float,
                 target_oom: float, extra: dict, knobs: dict | None = None,
                 caps: dict | None = None) -> str:
    """The equal-violation comparison as JSON: per policy the point at the targets (margins,
    hours, violations, resizes, resize cost), its knobs (given or tuned; {}: defaults), the
    resize cap it ran with (``resize_cap``, resizes per VM-hour; null: none), whether each
    target was reached, every replay made (``points``), and the savings against each
    baseline."""
    knobs, caps = knobs or {}, caps or {}
    doc = {"trace": _trace_doc(spec, tr),
           "targets": {"cpu_throttled_share": target_throttle, "oom_per_vm_day": target_oom},
           "policies": {n: asdict(ev.at) | {"knobs": knobs.get(n, {}),
                                            "resize_cap": _cap(caps.get(n)),
                                            "reached_cpu": ev.reached_cpu,
                                            "reached_mem": ev.reached_mem,
                                            "points": [asdict(p) for p in
                                                       ev.points + extra.get(n, [])]}
                        for n, ev in res.items()},
           "savings": sav}
    return as_json(doc)


def compare_table(res: dict, sav: dict, target_throttle: float, target_oom: float) -> Table:
    """The equal-violation table: margins, hours, violations and savings per baseline."""
    base = [b for b in baseline_names() if b in res]
    # "vs adare" would not say which: the ablation's column is "vs nolea".
    short = {b: b.rpartition("-")[2] if "-" in b else b for b in base}
    table = Table(title=f"at equal violation: <= {100 * target_throttle:g}% CPU throttled, "
                        f"<= {target_oom:g} OOM kills / VM-day", box=box.SIMPLE, pad_edge=False,
                  caption="margins: CPU/mem fractions added; vs: vCPU-hours/GB-hours saved, % "
                          "(1 - policy/baseline); * target not reached in --range")
    for col in ("policy", "margins", "vCPU-h", "GB-h", "thr.", "OOM/VM-d", "resizes",
                "rsz cost", *(f"vs {short[b][:5]}" for b in base)):
        table.add_column(col, justify="right", no_wrap=True)
    for n, ev in res.items():
        a = ev.at
        star = "" if ev.reached_cpu and ev.reached_mem else "*"
        table.add_row(n + star, f"{a.cpu_margin:+.2f}/{a.mem_margin:+.2f}", f"{a.vcpu_hours:.0f}",
                      f"{a.gb_hours:.0f}", f"{100 * a.cpu_throttled_share:.2f}%",
                      f"{a.oom_per_vm_day:.4f}", f"{a.resizes}", f"{a.resize_cost:.0f}",
                      *(_pct(sav[n], f"vs_{b}") for b in base))
    return table


def print_compare(res: dict, sav: dict, target_throttle: float, target_oom: float) -> None:
    """Print the equal-violation table to stdout (at its natural width off a terminal)."""
    _print(compare_table(res, sav, target_throttle, target_oom))
