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
