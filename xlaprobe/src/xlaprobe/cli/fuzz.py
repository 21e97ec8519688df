"""``xlaprobe fuzz``: run or resume a fuzz campaign with a live summary on stderr."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Group
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from xlaprobe.cli.app import app, display
from xlaprobe.cli.console import Steps, err, is_quiet, out, seconds
from xlaprobe.cli.options import (DEFAULT_DB, AddressOption, DbOption, JobsOption, QuietOption)
from xlaprobe.coverage_summary import steered_arm
from xlaprobe.errors import InvalidArgument

if TYPE_CHECKING:
    from xlaprobe.campaign import CampaignSummary


@app.command()
def fuzz(
    time: Annotated[str, typer.Option("--time", help="wall-time budget: 90s, 10m, 1h")] = "5m",
    configs: Annotated[str | None, typer.Option(
        "--configs", "-c", help="comma-separated configuration specs; the float64 reference is "
        "always added [default: xla,xla:O0,eager,reference]", show_default=False)] = None,
    jobs: JobsOption = 1,
    seed: Annotated[int | None, typer.Option(help="first generator seed [default: 0]", min=0,
                                             max=2 ** 62, show_default=False)] = None,
    db: DbOption = DEFAULT_DB,
    resume: Annotated[bool, typer.Option("--resume", help="continue the newest campaign with "
                                         "these configurations")] = False,
    campaign: Annotated[int | None, typer.Option(
        "--campaign", min=1, help="continue campaign ID, with its configurations (xlaprobe "
        "campaigns lists them)")] = None,
    schedule: Annotated[str | None, typer.Option(
        "--schedule", help="adaptive: the reference and every compiler under test (xla, mutants, "
        "releases, xla variants) on every program, eager and xla:O0 where a finding, dead code or "
        "an audit asks for them; all: every "
        "configuration on every program [default: adaptive; a resumed campaign keeps its own]",
        show_default=False)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
    quiet: QuietOption = False,
    backend: Annotated[str, typer.Option(
        "--backend", help="where configurations run: local (worker processes) or ray (--jobs "
        "Ray actors, each hosting an isolated worker; pip install 'xlaprobe\\[ray]')")] = "local",
    address: AddressOption = None,
    shard: Annotated[str | None, typer.Option(
        "--shard", help="I/N: check only every N-th seed from --seed, offset I (reruns alone "
        "with the same programs)", show_default=False)] = None,
    steer: Annotated[str, typer.Option(
        "--steer", help="none: the plain generator; coverage: steer to XLA passes and rewrites "
        "that rarely fire (pass patterns, mutations of seeds that hit rare ones)")] = "none",
) -> None:
    """Fuzz: generate random valid programs and check each; findings are stored and deduplicated.

    Exit 0 no findings, 1 findings or no program checked within --time, 130 interrupted."""
    from xlaprobe.campaign import parse_duration, parse_shard  # imports jax: not for --help

    display(quiet)
    if campaign is not None and (configs is not None or seed is not None or resume
                                 or shard is not None):
        # The campaign's own configurations and seeds go on: another value would be ignored.
        raise InvalidArgument(f"--campaign {campaign} continues with its own configurations and "
                              "seeds: drop --configs, --seed, --shard and --resume")
    if resume and shard is not None:
        raise InvalidArgument("--resume continues a campaign with its own shard: drop --shard")
    raise typer.Exit(fuzz_command(time_s=parse_duration(time),
                                  configs=configs or "xla,xla:O0,eager,reference", jobs=jobs,
                                  seed=seed or 0, db=db, resume=resume, campaign=campaign,
                                  json_output=as_json, backend=backend, address=address,
                                  shard=parse_shard(shard) if shard is not None else (0, 1),
                                  schedule=schedule, steer=steer))


def _progress_view(summary: CampaignSummary) -> Any:
    from xlaprobe.campaign import SKIPPED  # the campaign and oracle import jax: not for --help
    from xlaprobe.oracle import SEVERITY  # imports numpy: not for --help

    head = Text.from_markup(
        f"[bold]fuzz[/] campaign {summary.campaign}: {summary.programs} programs "
        f"({summary.session_programs} now, {summary.programs_per_s:.2f}/s, "
        f"{seconds(summary.elapsed_s)}), next seed {summary.next_seed}; findings "
        f"[{'red' if summary.findings else 'green'}]{summary.findings}[/] in "
        f"{summary.failing_programs} programs ({summary.unique_findings} unique, "
        f"{summary.duplicates} duplicates, {summary.distinct_bugs} distinct bugs); coverage "
        f"{summary.covered}/{summary.catalogue} primitives; schedule {summary.schedule}")
    kinds = [k for k in [*(k.value for k in SEVERITY), SKIPPED]
             if any(k in v for v in summary.verdicts.values())]
    table = Table(box=None, pad_edge=False)
    table.add_column("configuration")
    for kind in kinds:
        table.add_column(kind, justify="right")
    for config, counts in summary.verdicts.items():
        table.add_row(escape(config), *(str(counts.get(k, 0)) for k in kinds))
    parts = [head, table]
    if summary.last_finding:
        parts.append(Text(f"last finding: {summary.last_finding}", style="red"))
    return Group(*parts)


def _made_by(program: Any) -> str:
    """What made a steered campaign's program, for its progress line: `steered_arm`'s kind and
    detail, ``fresh`` for the plain generator's."""
    arm = steered_arm(program.provenance.name)
    return "fresh" if arm is None else " ".join(part for part in arm if part)


def _program_line(steps: Steps, steered: bool = False) -> Callable[[int, Any, Any], None]:
    """The campaign's ``on_program`` callback: one step per program (`Steps`), e.g.
    ``program 12 seed 612: 10 equations, ok, 0.41 programs/s``; with `steered`, what made the
    program after its seed (``seed 612 (mutation loop)``, ``(special-value re-run)``)."""
    start = time.monotonic()
    count = 0

    def on_program(seed: int, program: Any, result: Any) -> None:
        nonlocal count
        if program is None:
            steps.note(f"seed {seed}: the generator failed (skipped)")
            return
        count += 1
        verdict = ", ".join(f"{f.config} {f.kind.value}" for f in result.findings) or (
            "ok" if not result.incomplete else "incomplete")
        rate = count / max(time.monotonic() - start, 1e-9)
        eqs = program.num_equations
        made = f" ({_made_by(program)})" if steered else ""
        steps.step(f"program {count} seed {seed}{made}: {eqs} equation{'s' if eqs != 1 else ''}, "
                   f"{verdict}, {rate:.2f} programs/s")

    return on_program


#: Findings listed after a campaign (the rest: ``xlaprobe findings``).
MAX_LISTED = 20


def _artifacts(db: Path, fingerprints: dict[str, Any]) -> dict[str, str]:
    """fingerprint -> an artifact directory of a finding with it (from the store)."""
    from xlaprobe.store import Store  # imports the checker (jax): not for --help

    with Store(db) as store:
        return {row["fingerprint"]: row["artifact"] for row in reversed(store.findings())
                if row["artifact"] and row["fingerprint"] in fingerprints}


def fuzz_command(*, time_s: float, configs: str, jobs: int, seed: int, db: Path, resume: bool,
                 json_output: bool, campaign: int | None = None, backend: str = "local",
                 address: str | None = None, shard: tuple[int, int] = (0, 1),
                 schedule: str | None = None, steer: str = "none") -> int:
    """``xlaprobe fuzz``: run (or resume) a campaign; live progress on stderr.

    Args:
        time_s: wall-time budget (s), > 0.
        configs: comma-separated configuration specs (e.g. ``xla,xla:O0,eager,reference``);
            the float64 ``reference`` is added when missing (the oracle of every check).
        jobs: worker processes per isolation group, >= 1.
        seed: first seed of a new campaign (ignored with `resume`).
        db: the SQLite store file.
        resume: continue the newest campaign with the same configurations in `db`.
        campaign: continue this campaign (its configurations replace `configs`), or None.
        schedule: ``adaptive`` or ``all`` (`xlaprobe.schedule`); None: ``adaptive`` for a new
            campaign, the campaign's own when resuming.
        json_output: print the final summary as JSON on stdout (no live display).
        backend: ``local`` or ``ray`` (`jobs` Ray actors; `xlaprobe.backends.make_pool`).
        address: the Ray cluster (None: a new local one); ``ray`` only.
        shard: (index, count) of a new campaign's seeds (`xlaprobe.campaign.parse_shard`).
        steer: ``none`` (the plain generator) or ``coverage`` (`xlaprobe.sources.steered`).

    Returns:
        0 no findings in the campaign, 1 findings or a session that checked no program (the
        time ran out before the first one finished: one line on stderr says so), 130
        interrupted (everything recorded so far is stored; ``--resume`` continues).

    Raises:
        InvalidArgument: bad time, configurations, jobs, seed, shard, backend or db; nothing to
            resume; Ray missing or its address unreachable.
    """
    from xlaprobe.campaign import Campaign  # imports jax: loaded to run, not for --help

    parsed = _checked_request(time_s, configs, Path(db), resume, campaign)
    steered = steered_source(steer)
    # `campaign` names the one to continue, then becomes it.
    campaign = Campaign(Path(db), parsed, seed=seed, resume=resume, campaign=campaign, jobs=jobs,
                        backend=backend, address=address, shard=shard, schedule=schedule,
                        source=steered)
    observe = steered.observe if steered is not None else None
    summary: CampaignSummary | None = None
    interrupted = False
    try:
        if err.is_terminal and not json_output and not is_quiet():
            # A terminal gets the live campaign view, which stays as the summary.
            with Live(console=err, refresh_per_second=4, transient=False) as live:
                def show(s: CampaignSummary) -> None:
                    live.update(_progress_view(s))
                summary = campaign.run(time_s, on_progress=show, on_program=observe)
                live.update(_progress_view(summary))
            if not out.is_terminal:  # stdout redirected: the result goes there too
                out.print(_progress_view(summary))
        else:
            # CI logs and pipes: one line per program as it is recorded (stderr), then the
            # summary, the result, on stdout.
            with Steps("fuzz") as steps:
                lines = _program_line(steps, steered=steered is not None)
                summary = campaign.run(time_s, on_program=_both(lines, observe))
            if not json_output:
                out.print(_progress_view(summary))
    except KeyboardInterrupt:
        interrupted = True
        summary = campaign.last_summary or campaign.summary(
            session_programs=0, elapsed_s=0.0, session_xla_s=0.0, status="interrupted")
    finally:
        campaign.close()
    return _finish(summary, campaign.state.bugs, Path(db), interrupted, json_output, time_s)


def _finish(summary: CampaignSummary, bugs_by_fingerprint: Any, db: Path, interrupted: bool,
            json_output: bool, time_s: float) -> int:
    """Print a campaign's end (JSON or the summary, with its distinct bugs known and new) and
    return `fuzz_command`'s exit code."""
    # both import the oracle (numpy): not for --help
    from xlaprobe.known_bugs import split_bugs
    from xlaprobe.triage import is_planted

    planted = {f for f, (_, _, config, _) in summary.fingerprints.items() if is_planted(f, config)}
    bugs = split_bugs(summary.fingerprints, bugs_by_fingerprint, planted)
    if json_output:
        print(json.dumps(summary.to_json() | {"known_bugs": bugs["known"],
                                              "new_bugs": bugs["new"],
                                              "mutant_findings": bugs["mutant"]}, indent=2))
    else:
        _print_end(summary, db, interrupted, bugs)
    if interrupted:
        return 130
    if summary.session_programs == 0:
        # An empty session is no evidence of "no findings": exit 0 would read as a clean run.
        err.print(escape(f"no program finished within --time {seconds(time_s)} (starting the "
                         "workers and the first compiles take longer); nothing was checked: "
                         "give more --time"), highlight=False, soft_wrap=True)
        return 1
    return 1 if summary.findings else 0


#: ``--steer`` values: the plain generator, or one steered by optimization coverage.
STEERING = ("none", "coverage")


def steered_source(steer: str) -> Any:
    """The campaign source of ``--steer`` (None: the plain generator).

    Raises:
        InvalidArgument: an unknown value.
    """
    if steer not in STEERING:
        raise InvalidArgument(f"unknown --steer '{steer}'; choose one of {', '.join(STEERING)}")
    if steer == "none":
        return None
    # The campaign and the steered source import jax: loaded for --steer coverage only.
    from xlaprobe.campaign import MAX_EQUATIONS
    from xlaprobe.sources.steered import SteeredSource
    return SteeredSource(max_equations=MAX_EQUATIONS)


def _both(first: Callable[..., None], second: Callable[..., None] | None) -> Callable[..., None]:
    if second is None:
        return first

    def call(*args: Any) -> None:
        second(*args)
        first(*args)
    return call


def _checked_request(time_s: float, configs: str, db: Path, resume: bool,
                     campaign: int | None) -> list[str]:
    """The configuration specs of a fuzz request, the float64 reference added; refuses what
    cannot run before a store is opened (opening one creates it).

    Raises:
        InvalidArgument: a bad time or configuration; a campaign or resume without a store.
    """
    from xlaprobe.checking import REFERENCE  # imports jax: not for --help
    from xlaprobe.configs.registry import parse_configs  # imports numpy: not for --help

    if not (isinstance(time_s, (int, float)) and math.isfinite(time_s) and time_s > 0):
        raise InvalidArgument(f"--time must be a positive number of seconds, got {time_s}")
    parsed = [str(c) for c in parse_configs(configs)]
    if REFERENCE not in parsed:
        # As in `check`: without the float64 reference, configurations are only judged against
        # each other at the bare dtype bound, and rounding differences become findings.
        parsed.append(REFERENCE)
    if campaign is not None and not db.exists():
        raise InvalidArgument(f"no fuzz campaign {campaign}: there is no store at {db}")
    if resume and not db.exists():
        raise InvalidArgument(f"nothing to resume: there is no store at {db}; run without "
                              "--resume to start a campaign (or pass the --db it used)")
    return parsed


def _print_end(summary: CampaignSummary, db: Path, interrupted: bool,
               bugs: dict[str, Any]) -> None:
    """What a campaign prints when it ends: primitives not yet exercised, each distinct
    finding with its replay command and the distinct bugs known and new (`split_bugs`) (stdout,
    results), how to continue after an interruption (stderr)."""
    if summary.uncovered:
        out.print(escape(f"not yet exercised: {', '.join(summary.uncovered)}"),
                  highlight=False, soft_wrap=True)
    artifacts = _artifacts(Path(db), summary.fingerprints)
    for shown, (fingerprint, (count, first, config, kind)) in enumerate(
            summary.fingerprints.items()):
        if shown == MAX_LISTED:
            out.print(f"... {len(summary.fingerprints) - MAX_LISTED} more: xlaprobe findings "
                      f"--db {escape(str(db))}", highlight=False)
            break
        where = artifacts.get(fingerprint)
        replay = (f"xlaprobe check {where} --configs "
                  f"'{config if config == 'reference' else config + ',reference'}'"
                  if where else f"xlaprobe findings --db {db}")
        out.print(escape(f"finding {fingerprint}: {config} {kind} x{count} (first seed "
                         f"{first}); replay: {replay}"), highlight=False, soft_wrap=True)
    if summary.fingerprints:
        planted = (f"; {len(bugs['mutant'])} planted by a mutant, not bugs"
                   if bugs["mutant"] else "")
        out.print(f"distinct bugs: {bugs['distinct']} ({len(bugs['known'])} known, "
                  f"{len(bugs['new'])} new: xlaprobe.known_bugs{planted})", highlight=False)
    if interrupted:
        err.print(escape(f"interrupted: {summary.programs} programs stored; continue with "
                         f"xlaprobe fuzz --campaign {summary.campaign} --db {db}"),
                  highlight=False, soft_wrap=True)
