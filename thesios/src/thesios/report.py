"""HTML report of a validation: accuracy beside the paper's bands, utilization over the day and
read-latency CDFs of each held-out disk, real against synthesized (matplotlib PNGs, embedded)."""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path

import matplotlib
import numpy as np

from thesios.validate import METRICS, PAPER_BANDS, ValidationResult
from thesios.writers import _atomic_bytes


def _png(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _figures(result: ValidationResult) -> list[tuple[str, str]]:
    matplotlib.use("Agg")  # no display: render to PNG bytes
    import matplotlib.pyplot as plt

    figs = []
    disks = list(result.series)
    if not disks:
        return figs
    fig, axes = plt.subplots(1, len(disks), figsize=(3.2 * len(disks), 2.6), sharey=True, squeeze=False)
    for ax, disk in zip(axes[0], disks):
        s = result.series[disk]
        hours = np.arange(len(s["real"]["utilization"]))
        ax.step(hours, 100 * s["real"]["utilization"], where="post", label="real")
        ax.step(hours, 100 * s["synth"]["utilization"], where="post", label="synthesized", linestyle="--")
        ax.set_title(f"disk {disk}")
        ax.set_xlabel("hour of day")
    axes[0][0].set_ylabel("utilization (%)")
    axes[0][0].legend(fontsize=7)
    figs.append(("Disk utilization over the day (one-hour windows)", _png(fig)))
    fig, axes = plt.subplots(1, len(disks), figsize=(3.2 * len(disks), 2.6), sharey=True, squeeze=False)
    q = np.linspace(0, 1, 201)
    for ax, disk in zip(axes[0], disks):
        s = result.series[disk]
        ax.plot(1e3 * s["real"]["latency_quantiles"], q, label="real")
        ax.plot(1e3 * s["synth"]["latency_quantiles"], q, label="synthesized", linestyle="--")
        ax.set_xscale("log")
        ax.set_title(f"disk {disk}")
        ax.set_xlabel("read latency (ms)")
    axes[0][0].set_ylabel("CDF")
    axes[0][0].legend(fontsize=7)
    figs.append(("Cache-miss read latency CDF over the day", _png(fig)))
    fig, ax = plt.subplots(figsize=(6, 2.6))
    x = np.arange(len(METRICS))
    lo = [PAPER_BANDS[m][0] * 100 for m in METRICS]
    hi = [PAPER_BANDS[m][1] * 100 for m in METRICS]
    ax.bar(x, np.array(hi) - np.array(lo), bottom=lo, color="0.85", label="paper band")
    ax.plot(x, [result.accuracy[m] * 100 for m in METRICS], "o", color="C3", label="ours")
    ax.set_xticks(x, METRICS, rotation=20, fontsize=7)
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(75, 100)
    ax.legend(fontsize=7)
    figs.append(("Accuracy beside the paper's bands", _png(fig)))
    return figs


def write_report(result: ValidationResult, path: str | Path) -> Path:
    """Write the validation report as one self-contained HTML file (atomically); return its path."""
    rows = "".join(
        f"<tr><td>{m}</td><td>{result.accuracy[m]:.1%}</td><td>{PAPER_BANDS[m][0]:.1%}-{PAPER_BANDS[m][1]:.1%}</td></tr>"
        for m in METRICS
    )
    figs = "".join(f"<h2>{html.escape(t)}</h2><img src='data:image/png;base64,{b}'>" for t, b in _figures(result))
    doc = (
        "<!doctype html><html><head><meta charset='utf-8'><title>thesios validate</title>"
        "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto}td,th{padding:2px 10px}</style></head><body>"
        f"<h1>thesios validate: p = {result.rate:g}</h1>"
        f"<p>{result.disks} sampled disks x {result.days} days; {result.sampled_requests} samples; "
        f"held-out disks {', '.join(map(str, result.held_out))}; groups {result.groups}, purity {result.purity:.1%}; "
        f"{result.seconds:.1f} s. Accuracy per one-hour window = max(0, 1 - |synth - real| / real), averaged over "
        "windows then held-out disks; latency of cache-miss reads.</p>"
        f"<table><tr><th>metric</th><th>ours</th><th>paper</th></tr>{rows}</table>{figs}</body></html>"
    )
    return _atomic_bytes(doc.encode(), Path(path))


def _bars(ax, groups: list[str], series: dict[str, list[float]], ylabel: str) -> None:
    """Grouped bars: one cluster per group, one bar per series."""
    x = np.arange(len(groups))
    width = 0.8 / max(1, len(series))
    for i, (label, values) in enumerate(series.items()):
        ax.bar(x + (i - (len(series) - 1) / 2) * width, values, width, label=label)
    ax.set_xticks(x, groups, fontsize=7)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.legend(fontsize=7, loc="lower left", bbox_to_anchor=(0.0, 1.0), frameon=False)  # above: bars stay visible


def _whatif_figure(spec: str, groups: list[dict]) -> str:
    """One PNG for one scenario across the groups: service metrics, energy and latency, or misses."""
    import matplotlib.pyplot as plt

    names = [f"group {g['group']}" if isinstance(g["group"], int) else "trace" for g in groups]
    first = groups[0]["scenarios"][spec]
    if "utilization" in first:
        fig, axes = plt.subplots(1, 3, figsize=(10, 2.8))
        for ax, key, label, scale in ((axes[0], "utilization", "utilization (%)", 100),
                                      (axes[1], "read_latency_p50_s", "read latency p50 (ms)", 1e3),
                                      (axes[2], "read_latency_p99_s", "read latency p99 (ms)", 1e3)):
            _bars(ax, names, {"baseline": [g["baseline"][key] * scale for g in groups],
                              spec: [g["scenarios"][spec][key] * scale for g in groups]}, label)
    elif "saving" in first:
        fig, axes = plt.subplots(1, 2, figsize=(10, 2.8))
        _bars(axes[0], names, {"always spinning": [g["scenarios"][spec]["always_on_idle_energy_j"] / 1e3 for g in groups],
                               "spin-down": [g["scenarios"][spec]["idle_energy_j"] / 1e3 for g in groups]}, "idle energy (kJ)")
        q = np.linspace(0, 1, 101)
        for i, (name, g) in enumerate(zip(names, groups)):
            m = g["scenarios"][spec]
            if m.get("read_latency_quantiles_s"):
                axes[1].plot(1e3 * np.array(m["baseline_read_latency_quantiles_s"]), q, color=f"C{i}", linestyle="--")
                axes[1].plot(1e3 * np.array(m["read_latency_quantiles_s"]), q, color=f"C{i}", label=name)
        axes[1].set_xscale("log")
        axes[1].set_xlabel("read latency (ms); dashed: always spinning", fontsize=8)
        axes[1].set_ylabel("CDF", fontsize=8)
        if axes[1].lines:
            axes[1].legend(fontsize=7)
    else:
        fig, ax = plt.subplots(figsize=(7, 2.8))
        series = {"LRU, baseline size": [100 * g["scenarios"][spec]["lru_miss_ratio"] for g in groups],
                  f"LRU, {spec}": [100 * g["scenarios"][spec]["lru_miss_ratio_scaled"] for g in groups],
                  f"Belady, {spec}": [100 * g["scenarios"][spec]["belady_miss_ratio_scaled"] for g in groups]}
        if "full_trace_lru_miss_ratio_scaled" in first:  # the synthetic fleet's ground truth
            series[f"LRU, {spec}, a member's full day"] = [
                100 * g["scenarios"][spec]["full_trace_lru_miss_ratio_scaled"] for g in groups]
        _bars(ax, names, series, "miss ratio (%)")
    return _png(fig)


def _whatif_rows(spec: str, groups: list[dict]) -> str:
    """The scenario's numbers per group as an HTML table (scalars only)."""
    keys = [k for k, v in groups[0]["scenarios"][spec].items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    head = "".join(f"<th>{html.escape(k)}</th>" for k in keys)

    def cell(v) -> str:
        return f"{v:.4g}" if isinstance(v, float) else str(v)

    body = "".join(f"<tr><td>{html.escape(str(g['group']))}</td>"
                   + "".join(f"<td>{cell(g['scenarios'][spec].get(k))}</td>" for k in keys) + "</tr>" for g in groups)
    return f"<table><tr><th>group</th>{head}</tr>{body}</table>"


def write_whatif_report(result: dict, path: str | Path, title: str = "thesios whatif") -> Path:
    """Write what-if results as one self-contained HTML file (atomically); return its path.

    ``result`` is :func:`thesios.scenarios.run_scenarios`'s document (``{"groups": [...]}``, each
    group with ``baseline`` and ``scenarios``); one section per scenario with its plot (baseline
    against scenario per group: utilization and read latency, idle energy and the latency CDF of
    spin-down, LRU and Belady miss ratios of a cache) and its numbers.
    """
    matplotlib.use("Agg")  # no display: render to PNG bytes
    groups = result["groups"]
    base_rows = "".join(
        f"<tr><td>{html.escape(str(g['group']))}</td><td>{g['disks']}</td><td>{g['baseline']['utilization']:.2%}</td>"
        f"<td>{'n/a' if g['baseline'].get('offered_load') is None else format(g['baseline']['offered_load'], '.2%')}</td>"
        f"<td>{g['baseline']['read_latency_p50_s'] * 1e3:.2f}</td><td>{g['baseline']['read_latency_p99_s'] * 1e3:.2f}</td></tr>"
        for g in groups
    )
    sections = []
    for spec in groups[0]["scenarios"] if groups else []:
        sections.append(f"<h2>{html.escape(spec)}</h2><img src='data:image/png;base64,{_whatif_figure(spec, groups)}'>"
                        f"{_whatif_rows(spec, groups)}")
    where = f"p = {result['rate']:g}, {result['disks']} disks" if "rate" in result else html.escape(str(result.get("trace", "")))
    doc = (
        "<!doctype html><html><head><meta charset='utf-8'><title>thesios whatif</title>"
        "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto}td,th{padding:2px 10px}</style></head><body>"
        f"<h1>{html.escape(title)}: {where}</h1>"
        "<h2>baseline</h2><table><tr><th>group</th><th>disks</th><th>utilization</th><th>offered load</th><th>read p50 ms</th>"
        f"<th>read p99 ms</th></tr>{base_rows}</table>{''.join(sections)}</body></html>"
    )
    return _atomic_bytes(doc.encode(), Path(path))
