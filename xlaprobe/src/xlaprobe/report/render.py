"""The report page: the template (``page.html.j2``, jinja2 with autoescape: every value from the
store is escaped) filled with `xlaprobe.report.gather.ReportData` and its figures, written
atomically.
"""

from __future__ import annotations

import time
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2

from xlaprobe import files
from xlaprobe.report import plots
from xlaprobe.report.gather import FindingView, ReportData

#: Findings whose verdict tables the page shows (the newest); the findings table lists them all.
DETAILED_FINDINGS = 50


def when(unix: float | None) -> str:
    """A Unix time (s) as ``2026-12-02 00:31:05 UTC`` ("-" for None).

    >>> when(0.0)
    '1970-01-01 00:00:00 UTC'
    """
    if unix is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(unix))


def num(value: Any) -> str:
    """A number for a table cell: "-" for None or NaN, else 3 significant digits.

    >>> num(None), num(float("nan")), num(0.000123456), num(4.0)
    ('-', '-', '0.000123', '4')
    """
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    if isinstance(value, str):
        return value  # an infinity stored as text
    return f"{value:.3g}"


def release_strip(bisection: dict[str, Any]) -> list[tuple[str, str]]:
    """(release, state) per release of a bisection's range, oldest first; state is the verdict
    of its (last, confirming rerun included) run, or ``not run``.

    >>> release_strip({"releases": ["0.4", "0.5"], "runs": [{"release": "0.5", "verdict": "ok"}]})
    [('0.4', 'not run'), ('0.5', 'ok')]
    """
    verdicts: dict[str, str] = {}
    for run in bisection.get("runs", []):
        verdicts[run["release"]] = "other" if run.get("other") else run["verdict"]
    return [(r, verdicts.get(r, "not run")) for r in bisection.get("releases", [])]


def same_table(findings: list[FindingView] | tuple[FindingView, ...]) -> dict[int, int]:
    """Finding id -> the id of an earlier finding in `findings` whose verdict table is the same
    (the findings of one check: xla, xla:O0 and eager failing on one program share one table), so
    the page prints each table once."""
    first: dict[int, int] = {}
    same: dict[int, int] = {}
    for finding in findings:
        if finding.check_id in first:
            same[finding.stored.id] = first[finding.check_id]
        else:
            first[finding.check_id] = finding.stored.id
    return same


def _figures(data: ReportData) -> dict[str, Any]:
    """Every figure of the page, keyed as the template reads them."""
    return {
        "heatmaps": {f.stored.id: [(m, plots.heatmap(m)) for m in f.error_maps] for f in data.findings},
        "rates": {c.id: plots.campaign_rate(c) for c in data.campaigns},
        "tunings": {t.id: plots.tuning_search(t) for t in data.tunings if t.measurements},
        "same_table": same_table(data.findings[:DETAILED_FINDINGS]),
    }


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(autoescape=True, undefined=jinja2.ChainableUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters.update(when=when, num=num)
    env.globals.update(release_strip=release_strip, failing=_failing)
    return env


def _failing(finding: FindingView) -> list[Any]:
    """The verdicts of the finding's own configuration that are findings."""
    return [v for v in finding.verdicts if v.config == finding.stored.config and v.kind.is_finding]


def render(data: ReportData) -> str:
    """The report page for `data`: one HTML document, no external resources.

    Raises:
        jinja2.TemplateError: the template is broken (a bug of xlaprobe).
    """
    template = resources.files("xlaprobe.report").joinpath("page.html.j2").read_text("utf-8")
    return _environment().from_string(template).render(
        data=data, figures=_figures(data), when=when, detailed=DETAILED_FINDINGS)


def write_atomic(path: str | Path, text: str) -> Path:
    """`xlaprobe.files.write_atomic` into `path`'s folder, made first if missing (the library
    call; the ``report`` command refuses a missing folder before it gets here).

    Raises:
        OSError: the directory cannot be written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return files.write_atomic(path, text)
