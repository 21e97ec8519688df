"""The report's figures (matplotlib, no pyplot state), each returned as an SVG ``data:`` URI that
an ``<img>`` embeds: the page needs no file and no network, and figures cannot clash on SVG ids.
"""

from __future__ import annotations

import base64
import io
import math

import matplotlib
import numpy as np
from matplotlib import colormaps
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from xlaprobe.errormap import ErrorMap
from xlaprobe.report.gather import CampaignView, TuningView

#: Colour of cells with a non-finite mismatch (NaN or infinity where the reference has none): no
#: colour of the scale (light yellow, small error, to dark red, large).
NON_FINITE = "#3b2a8c"


def data_uri(fig: Figure) -> str:
    """`fig` as an SVG ``data:image/svg+xml;base64,...`` URI (text kept as text)."""
    buffer = io.BytesIO()
    with _svg_text():
        fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    return "data:image/svg+xml;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


class _svg_text:
    """Context: SVG text as ``<text>`` elements (smaller, selectable) instead of paths."""

    def __enter__(self) -> None:
        self._saved = matplotlib.rcParams["svg.fonttype"]
        matplotlib.rcParams["svg.fonttype"] = "none"

    def __exit__(self, *exc: object) -> None:
        matplotlib.rcParams["svg.fonttype"] = self._saved


def heatmap(error: ErrorMap) -> str:
    """A heat map of one leaf's error map: log10 of the error in units of the dtype's bound
    (above 0 is over the bound), non-finite mismatches in `NON_FINITE`.

    Returns:
        An SVG data URI.
    """
    grid = np.asarray(error.grid, np.float64)
    finite = np.isfinite(grid)
    logs = np.full(grid.shape, np.nan)
    with np.errstate(divide="ignore"):
        logs[finite] = np.log10(np.maximum(grid[finite], 1e-3))
    top = max(1.0, float(np.nanmax(logs)) if finite.any() else 1.0)
    cmap = colormaps["YlOrRd"].with_extremes(over=NON_FINITE, bad=NON_FINITE)
    rows, cols = grid.shape
    fig = Figure(figsize=(min(9.0, 2.5 + cols * 0.08), min(4.5, 1.6 + rows * 0.1)))
    ax = fig.add_subplot()
    image = ax.imshow(np.where(finite, logs, top + 1), cmap=cmap, aspect="auto",
                      norm=Normalize(vmin=-3, vmax=top), interpolation="nearest")
    bar = fig.colorbar(image, ax=ax, extend="max")
    bar.set_label("log10(error / bound)")
    split, shape = error.split, error.shape
    ax.set_ylabel(f"dims {list(range(split))}" if split else "")
    ax.set_xlabel(f"dims {list(range(split, len(shape)))}" + (
        f" ({error.block[1]} per cell)" if error.block[1] > 1 else ""))
    ax.set_title(f"output {error.output} {error.dtype}{list(shape)}: "
                 f"{error.over:.0%} of cells over the bound", fontsize=9)
    return data_uri(fig)


def campaign_rate(campaign: CampaignView) -> str:
    """Programs checked per second over the campaign's time, from its stored checks.

    Returns:
        An SVG data URI.
    """
    fig = Figure(figsize=(6.5, 2.4))
    ax = fig.add_subplot()
    if campaign.rate:
        times, rates = zip(*campaign.rate)
        ax.step(times, rates, where="mid", color="#1f77b4")
        ax.fill_between(times, rates, step="mid", alpha=0.25, color="#1f77b4")
    ax.axhline(campaign.programs_per_s, color="#d62728", lw=1, ls="--",
               label=f"mean {campaign.programs_per_s:.2f}/s")
    ax.set_xlabel("seconds since the campaign began")
    ax.set_ylabel("programs/s")
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper right", fontsize=8)
    return data_uri(fig)


def tuning_search(tuning: TuningView) -> str:
    """Speedup over the default of each measurement of a tuning search, in order, with its
    interval, the best so far, and the break-even line.

    Returns:
        An SVG data URI.
    """
    fig = Figure(figsize=(6.5, 2.8))
    ax = fig.add_subplot()
    timed = [m for m in tuning.measurements if m.speedup is not None]
    for status, colour in (("ok", "#1f77b4"), ("rejected", "#d62728")):
        chosen = [m for m in timed if m.status == status and not m.replicate]
        if chosen:
            ax.errorbar([m.n for m in chosen], [m.speedup for m in chosen],
                        yerr=_interval(chosen), fmt="o", ms=4, color=colour, lw=0.8,
                        label="passed guard" if status == "ok" else "rejected by the oracle")
    replicas = [m for m in timed if m.replicate]
    if replicas:
        ax.errorbar([m.n for m in replicas], [m.speedup for m in replicas],
                    yerr=_interval(replicas), fmt="D", ms=6, color="#2ca02c", lw=0.8,
                    label="re-measured in a fresh worker")
    best = tuning.best_so_far
    if any(b is not None for b in best):
        ax.step([m.n for m in tuning.measurements], [math.nan if b is None else b for b in best],
                where="post", color="#ff7f0e", lw=1.2, label="best so far")
    ax.axhline(1.0, color="grey", lw=0.8, ls=":")
    untimed = len(tuning.measurements) - len(timed)
    ax.set_xlabel("measurement" + (f" ({untimed} untimed: compile error, crash, timeout)"
                                   if untimed else ""))
    ax.set_ylabel("speedup over default")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best", fontsize=8)
    return data_uri(fig)


def _interval(measurements: list) -> np.ndarray:
    """Error bars (2, n) from each measurement's interval (none where it has none)."""
    lows = [m.speedup - m.low if m.low is not None else 0.0 for m in measurements]
    highs = [m.high - m.speedup if m.high is not None else 0.0 for m in measurements]
    return np.maximum(np.array([lows, highs]), 0.0)
