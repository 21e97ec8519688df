"""HTML report of a replay: the results table, allocation against demand for sample VMs, the
regret curve (cumulative cost above the clairvoyant policy) and the savings-versus-violations
frontier. Matplotlib PNGs embedded as base64; written atomically."""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path

import numpy as np

from adares.files import write_atomic
from adares.policies import get
from adares.simulator import Result
from adares.trace import GIB, Trace


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def sample_vms(trace: Trace, k: int = 3) -> tuple[int, ...]:
    """``k`` VMs spread over the range of mean CPU demand (the lowest, middle, highest...)."""
    order = np.argsort(trace.cpu.mean(axis=0))
    idx = np.linspace(0, trace.n_vms - 1, min(k, trace.n_vms)).round().astype(int)
    return tuple(int(order[i]) for i in idx)


def build_html(trace: Trace, spec: str, results: dict[str, Result], vms: tuple[int, ...]) -> str:
    """The report as one HTML document. ``results`` must have been simulated with
    ``record_vms=vms``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hours = np.arange(trace.n_steps) * trace.step_h
    figs: list[tuple[str, str]] = []
    shown = [n for n in results if n != "static" and not get(n).bound]
    for j, vm in enumerate(vms):
        fig, axes = plt.subplots(1, 2, figsize=(12, 3))
        for ax, dem, key, unit, label in ((axes[0], trace.cpu[:, vm], "alloc_cpu", 1.0, "cores"),
                                          (axes[1], trace.mem[:, vm], "alloc_mem", GIB, "GiB")):
            ax.plot(hours, dem / unit, color="black", lw=0.8, label="demand")
            for n in shown:
                a = getattr(results[n], key)
                if a.shape[1] > j:
                    ax.step(hours, a[:, j] / unit, where="post", lw=1.0, label=n)
            ax.set_xlabel("hours")
            ax.set_ylabel(label)
        axes[0].legend(fontsize=7, ncol=3)
        fig.suptitle(f"{trace.vm_ids[vm]}: allocation against demand")
        figs.append((f"Allocation against demand: {html.escape(trace.vm_ids[vm])}", _png(fig)))
        plt.close(fig)
    if "clairvoyant" in results:
        base = results["clairvoyant"].step_cost
        fig, ax = plt.subplots(figsize=(7, 4))
        for n, r in results.items():
            if n not in ("clairvoyant", "static") and len(r.step_cost) == len(base):
                ax.plot(hours, np.cumsum(r.step_cost - base), label=n)
        ax.set_xlabel("hours")
        ax.set_ylabel("cumulative cost above clairvoyant")
        ax.legend(fontsize=8)
        figs.append(("Regret: cumulative cost above the clairvoyant policy", _png(fig)))
        plt.close(fig)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for n, r in results.items():
        axes[0].scatter(100 * r.cpu_throttled_share, r.vcpu_hours)
        axes[0].annotate(n, (100 * r.cpu_throttled_share, r.vcpu_hours), fontsize=8)
        axes[1].scatter(r.oom_events, r.gb_hours)
        axes[1].annotate(n, (r.oom_events, r.gb_hours), fontsize=8)
    axes[0].set_xlabel("CPU throttled (% of demand)")
    axes[0].set_ylabel("vCPU-hours allocated")
    axes[1].set_xlabel("OOM kills")
    axes[1].set_ylabel("GB-hours allocated")
    axes[1].set_xscale("symlog")
    figs.append(("Savings against violations", _png(fig)))
    plt.close(fig)

    nodes = all("refused_resizes" in r.extra for r in results.values())

    def node_cells(r: Result) -> str:
        if not nodes:
            return ""
        e = r.extra
        return (f"<td>{e['refused_resizes']}</td><td>{100 * e['cpu_contention_share']:.2f}%</td>"
                + "".join(f"<td>{e[k]:.2f}</td>" for k in (
                    "node_cpu_utilization", "node_mem_utilization", "node_cpu_allocated",
                    "node_mem_allocated")))

    rows = "".join(
        f"<tr><td>{html.escape(n)}</td><td>{r.vcpu_hours:,.0f}</td><td>{r.gb_hours:,.0f}</td>"
        f"<td>{100 * r.cpu_throttled_share:.2f}%</td><td>{r.oom_events}</td><td>{r.resizes}</td>"
        f"<td>{r.reward:.4f}</td>{node_cells(r)}</tr>" for n, r in results.items())
    node_head = ("<th>refused resizes</th><th>contention throttled</th><th>node CPU util</th>"
                 "<th>node mem util</th><th>node CPU alloc</th><th>node mem alloc</th>"
                 if nodes else "")
    imgs = "".join(f"<h2>{t}</h2><img src='data:image/png;base64,{b}'/>" for t, b in figs)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>adares replay</title>"
            f"<style>body{{font-family:sans-serif}}td,th{{padding:2px 8px;text-align:right}}</style>"
            f"</head><body><h1>adares replay: {html.escape(spec)}</h1>"
            f"<p>{trace.n_vms} VMs x {trace.n_steps} steps of {trace.step_s} s</p>"
            f"<table><tr><th>policy</th><th>vCPU-h</th><th>GB-h</th><th>throttled</th>"
            f"<th>OOM kills</th><th>resizes</th><th>reward / VM-h</th>{node_head}</tr>{rows}</table>"
            f"{imgs}</body></html>")


def write_report(path: Path, trace: Trace, spec: str, results: dict[str, Result],
                 vms: tuple[int, ...]) -> None:
    """Build the report and write it atomically to ``path``."""
    write_atomic(Path(path), build_html(trace, spec, results, vms))


def write_compare_report(path: Path, spec: str, trace: Trace, res: dict, sav: dict,
                         target_cpu: float, target_oom: float, extra: dict | None = None) -> None:
    """The equal-violation comparison as HTML: the table at the target rates (margins, hours,
    violations, savings) and the savings-versus-violations frontier
    (``adares.frontier.frontier_png``); written atomically. ``res``: EqualViolation by policy;
    ``sav``: ``savings_at_equal_violation(res)``; ``extra``: sweep points by policy."""
    from adares.frontier import frontier_png

    base = sorted({b for per in sav.values() for b in per})
    head = "".join(f"<th>{html.escape(b)}<br>vCPU/GB saved</th>" for b in base)
    rows = []
    for n, ev in res.items():
        a = ev.at
        cells = "".join(
            f"<td>{100 * sav[n][b]['vcpu_hours']:+.1f}% / {100 * sav[n][b]['gb_hours']:+.1f}%</td>"
            if b in sav[n] else "<td>-</td>" for b in base)
        miss = "" if ev.reached_cpu and ev.reached_mem else " (target not reached)"
        rows.append(f"<tr><td>{html.escape(n)}{miss}</td><td>{a.cpu_margin:+.3f}</td>"
                    f"<td>{a.mem_margin:+.3f}</td><td>{a.vcpu_hours:,.0f}</td>"
                    f"<td>{a.gb_hours:,.0f}</td><td>{100 * a.cpu_throttled_share:.2f}%</td>"
                    f"<td>{a.oom_per_vm_day:.4f}</td><td>{a.reward:.4f}</td>{cells}</tr>")
    png = base64.b64encode(frontier_png(res, target_cpu, target_oom, extra)).decode("ascii")
    doc = (f"<!doctype html><html><head><meta charset='utf-8'><title>adares compare</title>"
           f"<style>body{{font-family:sans-serif}}td,th{{padding:2px 8px;text-align:right}}</style>"
           f"</head><body><h1>adares compare: {html.escape(spec)}</h1>"
           f"<p>{trace.n_vms} VMs x {trace.n_steps} steps of {trace.step_s} s; targets: CPU "
           f"throttled share {100 * target_cpu:.2f}%, {target_oom:g} OOM kills per VM-day</p>"
           f"<table><tr><th>policy</th><th>CPU margin</th><th>mem margin</th><th>vCPU-h</th>"
           f"<th>GB-h</th><th>throttled</th><th>OOM / VM-day</th><th>reward / VM-h</th>{head}"
           f"</tr>{''.join(rows)}</table><h2>Savings against violations</h2>"
           f"<img src='data:image/png;base64,{png}'/></body></html>")
    write_atomic(Path(path), doc)
