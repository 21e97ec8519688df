"""The verdict table of a check, as ``xlaprobe check``, `xlaprobe.Checked` and the pytest plugin
print it: one row per configuration, the output leaves not ok, each finding's id and replay.

Library code (`xlaprobe.api` prints it): it never imports `xlaprobe.cli`, which imports it."""

from __future__ import annotations

import math
import shlex
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from xlaprobe.allowance import wide_allowances
from xlaprobe.checking import BUDGET, CheckResult
from xlaprobe.freedoms import verdict_text
from xlaprobe.oracle import OUTCOME_VERDICT, VerdictKind, summary_kind
from xlaprobe.store import DEFAULT_DB

#: Output leaves listed under the verdict table (``--all-outputs`` lists every one).
MAX_DETAIL_ROWS = 20
#: Wide allowances explained under the verdict table (``--all-outputs``: every one).
MAX_WIDE_ROWS = 5
#: Exit code of a check with no finding that is incomplete (`CheckResult.incomplete`): the
#: reference or an interpreter of xlaprobe's could not run, so "no finding" proves less.
INCOMPLETE = 4


def fmt(value: float) -> str:
    """A short number for a table cell: ``-`` for NaN, ``0``, else 3 significant digits.

    >>> fmt(float("nan")), fmt(0.0), fmt(0.000123456), fmt(float("inf"))
    ('-', '0', '0.000123', 'inf')
    """
    if value != value:  # NaN
        return "-"
    if value == 0:
        return "0"
    return f"{value:.3g}"


def next_commands(finding_id: int, db: Path) -> str:
    """The commands that take a finding further, as one line; ``--db`` is spelled out when the
    store is not the default, so that they find it from wherever the user stands."""
    option = "" if db == DEFAULT_DB else f" --db {db.resolve()}"
    return "next: " + "; ".join(f"xlaprobe {verb} {finding_id}{option}"
                                for verb in ("localize", "reduce", "bisect"))


def replay_line(config: str, artifact: str) -> str:
    """The commands that replay a finding from its artifact directory, as one line; each exits 1
    while the fault shows. ``python repro.py`` runs under the installed jax, so a finding of
    another release (``jaxlib==...``) replays only through xlaprobe, which runs that release's
    environment.

    >>> replay_line("xla", "artifacts/ab-xla")
    "replay: python artifacts/ab-xla/repro.py   or   xlaprobe check artifacts/ab-xla --configs 'xla,reference'"
    """
    configs = config if config == "reference" else f"{config},reference"
    where = shlex.quote(artifact)
    repro = "" if config.startswith("jaxlib==") else (
        f"python {shlex.quote(str(Path(artifact) / 'repro.py'))}   or   ")
    return f"replay: {repro}xlaprobe check {where} --configs '{configs}'"


#: Verdict kinds of a configuration that produced no outputs: no element was compared.
NOT_COMPARED = frozenset(OUTCOME_VERDICT.values())


def _largest(values: Iterable[float]) -> float:
    """The largest of `values` that is not NaN; NaN when there is none (Python's max is
    order-dependent with NaN)."""
    present = [v for v in values if v == v]
    return max(present) if present else math.nan


def _config_table(result: CheckResult, against: bool) -> Table:
    """The verdict table: one row per configuration; an ``against`` column when `against`."""
    # A labelled freedom's row measures its error against the freedom's evidence run (what the
    # label says XLA computed), not float64: a column names it, only when some row has one.
    caption = ("allowed rel: allowed where max rel is (dtype bound + honest-run budget); "
               "error/allowed over 1 fails")
    if against:
        caption += ("; a freedom's row is measured against its evidence run (against), its "
                    "float64 figures are in its output leaf's detail")
    table = Table(show_lines=False, caption=caption, caption_justify="left")
    for column in ("configuration", "outcome", "time (s)", "verdict", "failing outputs",
                   *(["against"] if against else []),
                   "max abs", "max rel", "allowed rel", "max ULP", "error/allowed"):
        table.add_column(column, justify="left" if column in (
            "configuration", "outcome", "verdict", "failing outputs", "against") else "right",
            overflow="fold")
    colors = {VerdictKind.OK: "green", VerdictKind.FTZ: "yellow"}
    for config, outcome, verdicts in zip(result.configs, result.outcomes, result.verdicts):
        kind = summary_kind(v.kind for v in verdicts)
        failing = sum(v.kind.is_finding for v in verdicts)
        color = colors.get(kind, "red")
        worst_rel = max(verdicts, key=lambda v: v.max_rel if v.max_rel == v.max_rel else -1.0,
                        default=None)
        runs = sorted({v.against or result.judged_against for v in verdicts}) \
            if config != result.judged_against else ["-"]
        table.add_row(escape(config), outcome.kind.value, f"{outcome.seconds:.2f}",
                      f"[{color}]{escape(verdict_text(kind, verdicts))}[/]",
                      f"{failing}/{len(verdicts)}",
                      *([escape(", ".join(runs))] if against else []),
                      fmt(_largest(v.max_abs for v in verdicts)),
                      fmt(_largest(v.max_rel for v in verdicts)),
                      fmt(worst_rel.allowed_rel if worst_rel is not None else math.nan),
                      fmt(_largest(v.max_ulp for v in verdicts)),
                      fmt(_largest(v.margin for v in verdicts)))
    return table


def print_result(result: CheckResult, artifacts: dict[str, str], all_outputs: bool,
                 ids: dict[str, int] | None = None, db: Path = DEFAULT_DB,
                 console: Any = None) -> None:
    """The verdict table of a check, its output leaves not ok, and each finding's id (in the
    store: what ``localize``, ``reduce``, ``bisect`` and ``findings`` take) and replay, printed
    on `console` (a rich Console; None: a new one on stdout)."""
    out = console if console is not None else Console()
    ids = ids or {}
    p = result.program
    seed = f", seed {p.provenance.seed}" if p.provenance.seed is not None else ""
    out.print(f"[bold]{escape(p.provenance.name)}[/] ({p.provenance.source}{seed}): "
              f"{p.num_equations} equations, {len(p.output_names)} "
              f"output{'s' if len(p.output_names) != 1 else ''}; judged against "
              f"[bold]{escape(result.judged_against or 'nothing')}[/]"
              + (f" with budget {BUDGET} (+{len(result.budget) - 1} Monte Carlo samples)"
                 if result.budget and result.budget[0].ran else ""))
    against = any(v.against for verdicts in result.verdicts for v in verdicts)
    out.print(_config_table(result, against))
    wide = wide_allowances(result)  # a compiler engineer's first question on such a row
    for item in wide[:MAX_WIDE_ROWS if not all_outputs else None]:
        out.print(escape(f"wide allowance: {item.text()}"), soft_wrap=True)
    if len(wide) > MAX_WIDE_ROWS and not all_outputs:
        out.print(f"... {len(wide) - MAX_WIDE_ROWS} more leaves with an allowance over 1% "
                  "(--all-outputs or --json lists them)")
    rows = [v for verdicts in result.verdicts for v in verdicts
            if all_outputs or v.kind is not VerdictKind.OK or v.freedom]
    if rows:
        detail = Table(title="output leaves" if all_outputs else
                       "output leaves not ok (or ok with a freedom's label)")
        for column in ("configuration", "output", "verdict", *(["against"] if against else []),
                       "max abs / allowed", "max rel / allowed", "max ULP", "error/allowed",
                       "share over", "worst: expected / actual", "detail"):
            detail.add_column(column, overflow="fold")
        for v in rows[:MAX_DETAIL_ROWS if not all_outputs else None]:
            worst = f"{v.expected:.6g} / {v.actual:.6g}" if v.worst >= 0 else ""
            # Share over is of compared elements: where the configuration did not run (a crash,
            # a tool error) nothing was compared.
            share = "-" if v.kind in NOT_COMPARED else f"{v.frac_over:.1%}"
            detail.add_row(escape(v.config), escape(v.output),
                           escape(verdict_text(v.kind, [v])),
                           *([escape(v.against or result.judged_against)] if against else []),
                           f"{fmt(v.max_abs)} / {fmt(v.allowed_abs)}",
                           f"{fmt(v.max_rel)} / {fmt(v.allowed_rel)}", fmt(v.max_ulp),
                           fmt(v.margin), share, worst, escape(v.detail))
        out.print(detail)
        if len(rows) > MAX_DETAIL_ROWS and not all_outputs:
            out.print(f"... {len(rows) - MAX_DETAIL_ROWS} more (--all-outputs shows them)")
    for finding in result.findings:
        where = artifacts.get(finding.config)
        number = f" {ids[finding.config]}" if finding.config in ids else ""
        count = len(finding.outputs)
        kind = f"freedom:{finding.freedom}" if finding.freedom else finding.kind.value
        out.print(f"[red]finding{number}[/]: {escape(finding.config)} {kind} on "
                  f"{count} output{'s' if count != 1 else ''}, fingerprint {finding.fingerprint}")
        if where:
            out.print(escape(f"  {replay_line(finding.config, where)}"), soft_wrap=True)
        if finding.config in ids:
            out.print(escape(f"  {next_commands(ids[finding.config], db)}"), soft_wrap=True)
    for config, why in result.incomplete.items():
        out.print(f"[yellow]incomplete[/]: {escape(config)} could not run here ({escape(why)})"
                  + ("; the other configurations were judged against each other only"
                     if config == "reference" else ""), soft_wrap=True)
    if result.ok and not result.incomplete:
        out.print("[green]all ok[/]")
    elif result.ok:
        out.print(f"[yellow]no finding, but the check is incomplete[/] (exit {INCOMPLETE})")
