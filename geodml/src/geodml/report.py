"""HTML report of a comparison: accuracy vs WAN bytes, accuracy vs simulated time, and the
planner's bytes/time/dollars against total rows (the crossover to centralizing), as matplotlib
PNGs embedded in one self-contained HTML file written atomically."""

from __future__ import annotations

import base64
import contextlib
import html
import io
import os
import tempfile
from pathlib import Path

from geodml.errors import GeodmlError


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def render(res: dict) -> str:
    """HTML text for a compare() result (its JSON dict)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    algos = {a: r for a, r in res["algorithms"].items() if "refused" not in r}
    imgs = []
    for key, label in (("bytes", "WAN bytes (log)"), ("sim_seconds", "simulated seconds (log)")):
        fig, ax = plt.subplots(figsize=(6, 4))
        for a, r in algos.items():
            ax.scatter(max(r[key], 1e-12), r["test_accuracy"], s=60 if a == "centralize" else 30, marker="s" if a == "centralize" else "o")
            ax.annotate(a, (max(r[key], 1e-12), r["test_accuracy"]), textcoords="offset points", xytext=(4, 4), fontsize=8)
        ax.set_xscale("log")
        ax.set_xlabel(label)
        ax.set_ylabel("test accuracy")
        ax.set_title(f"accuracy vs {key}")
        imgs.append(_png(fig))
        plt.close(fig)
    sc = res.get("scaling")
    if sc:
        fig, axes = plt.subplots(1, 3, figsize=(15, 4))
        n_now = res["data"]["n_train"]
        for ax, metric in zip(axes, ("bytes", "sim_seconds", "dollars")):
            for a, ys in sc[metric].items():
                ax.plot(sc["rows"], [max(y, 1e-12) for y in ys], label=a, lw=2.5 if a == "centralize" else 1.2,
                        ls="--" if a == "centralize" else "-")
            ax.axvline(n_now, color="grey", lw=0.8)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("total training rows (this run: grey line)")
            ax.set_ylabel(metric)
            ax.set_title(f"planner: {metric} vs data size")
        axes[0].legend(fontsize=8)
        imgs.append(_png(fig))
        plt.close(fig)
    rows = "".join(
        f"<tr><td>{html.escape(a)}</td>" + (f"<td colspan=6>refused: {html.escape(r['refused'])}</td>" if "refused" in r else
        f"<td>{r['bytes']:,}</td><td>{r['rounds']}</td><td>{r['sim_seconds']:.4g}</td><td>{r['dollars']:.4g}</td>"
        f"<td>{r['test_accuracy']:.4f}</td><td>{r['test_logloss']:.4f}</td>") + "</tr>"
        + (f"<tr><td></td><td colspan=6>warning: {html.escape(r['warning'])}</td></tr>" if "warning" in r else "")
        for a, r in res["algorithms"].items())
    d = res["data"]
    head = (f"data {html.escape(d['spec'])}: {d['n_train']} training rows, {d['features']} features, raw {d['raw_bytes']:,} bytes, "
            f"model {d['model_bytes']:,} bytes; partition {html.escape(res['partition'])}; hubs {html.escape(str(res['hubs']))}")
    body = "".join(f'<img src="data:image/png;base64,{i}"/>' for i in imgs)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>geodml compare</title></head><body>"
            f"<h1>geodml compare</h1><p>{head}</p><table border=1 cellpadding=4><tr><th>algorithm</th><th>WAN bytes</th>"
            f"<th>rounds</th><th>sim s</th><th>dollars</th><th>accuracy</th><th>logloss</th></tr>{rows}</table>{body}</body></html>")


def check_target(path: str | Path) -> None:
    """Raise GeodmlError now, before any work, if a report could not be written to path."""
    p = Path(path)
    folder = p.parent if str(p.parent) else Path(".")
    if not folder.is_dir():
        raise GeodmlError(f"report folder does not exist: {str(folder)!r}")
    if p.is_dir():
        raise GeodmlError(f"report path is a folder: {str(p)!r}")
    # Probe with the same temp-file-then-rename path write() uses, so an unwritable folder fails
    # now rather than after minutes of training.
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".geodml-report-", suffix=".html")
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        raise GeodmlError(f"cannot write report {str(p)!r}: {e.strerror}") from None


def write(res: dict, path: str | Path) -> None:
    """Write the report to path atomically (temp file in the same folder, then rename).
    Raises GeodmlError if the folder does not exist or is not writable."""
    p = Path(path)
    folder = p.parent if str(p.parent) else Path(".")
    if not folder.is_dir():
        raise GeodmlError(f"report folder does not exist: {str(folder)!r}")
    text = render(res)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".geodml-report-", suffix=".html")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        # mkstemp makes the file 0600; a report is an ordinary file: the umask's mode, as open() gives
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, p)
        tmp = None
    except OSError as e:
        raise GeodmlError(f"cannot write report {str(p)!r}: {e.strerror}") from None
    finally:
        # a failed write or a Ctrl-C between mkstemp and rename must not leave a half report
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
