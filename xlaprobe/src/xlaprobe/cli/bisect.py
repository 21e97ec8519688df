"""``xlaprobe bisect`` and ``xlaprobe envs``: release bisection of a finding from the command line,
and the release environments it runs in."""

from __future__ import annotations

import calendar
import functools
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from xlaprobe.cli.app import app, display
from xlaprobe.cli.console import Steps, err, local_time, out, seconds
from xlaprobe.cli.options import (DEFAULT_DB, DbOption, FindingTarget, InputsOption, JsonOption,
                                  QuietOption, RunTimeoutOption)
from xlaprobe.releases import envs

if TYPE_CHECKING:
    from xlaprobe.releases.bisection import ReleaseRun


@app.command("bisect")
def bisect_cli(
    target: FindingTarget,
    config: Annotated[str, typer.Argument(help="the failing XLA configuration: xla, xla:fastmath, "
                                               "xla\\[option=value], jaxlib==V[...] or spmd\\[...] "
                                               "(default: the finding's or the case's)")] = "",
    releases: Annotated[str | None, typer.Option(help="comma-separated jaxlib releases "
                                                      "(default: the newest of each minor line "
                                                      "from 0.4.33 on the registry)")] = None,
    db: DbOption = DEFAULT_DB,
    timeout: RunTimeoutOption = 600.0,
    as_json: JsonOption = False,
    inputs: InputsOption = "",
    quiet: QuietOption = False,
) -> None:
    """Find the first bad (and first fixed) jaxlib release of a failure by bisection.

    Exit 0 when a boundary is found or no release in the range fails ("not found in this
    range"), 1 when every release tried fails or a failure was flaky."""
    display(quiet)
    raise typer.Exit(bisect_command(target, config, releases=releases, db=db,
                                    json_output=as_json, timeout_s=timeout, input_spec=inputs))


def bisect_command(target: str, config: str, *, releases: str | None, db: Path, json_output: bool,
                   timeout_s: float, input_spec: str = "") -> int:
    """``xlaprobe bisect TARGET [CONFIG]``: print each release run and the boundaries; store them.

    Returns:
        Exit code: 0 when a boundary was found (first bad or first fixed) or no release in the
        range fails ("not found in this range"), 1 when every release tried fails or a failure
        was flaky (no boundary).

    Raises:
        InvalidArgument: bad target, configuration, release list or store.
        EnvironmentUnavailable: a release environment cannot be made.
    """
    # Bisection imports jax: loaded when it runs, not for `xlaprobe --help`.
    from xlaprobe.checking import validate_for
    from xlaprobe.configs.registry import Configuration
    from xlaprobe.localization.spmd_repro import emit_spmd_repro
    from xlaprobe.releases.bisection import run_bound
    from xlaprobe.releases.kind import release_options
    from xlaprobe.releases.program import (bisect_program, bisect_spmd, releases_between,
                                           releases_to_bisect)
    from xlaprobe.sources.targets import resolve_finding
    from xlaprobe.store import Store
    from xlaprobe.workers import WorkerPool

    program, spec, finding_id = resolve_finding(target, config, db, input_spec)
    parsed = Configuration.parse(spec)
    if parsed.kind != "spmd":  # spmd: each release runs the finding's reproducer
        release_options(parsed)  # fail on a non-XLA configuration before any work
    validate_for(program, [parsed])  # a mesh that does not fit: before any line or store
    say = (lambda text: None) if json_output else (lambda text: print(text, flush=True))
    versions, known_bad = releases_to_bisect(parsed, releases, say)

    # Open the store first: a bad --db fails before minutes of release runs, not after.
    with Store(db) as store, WorkerPool(size=1, timeout_s=timeout_s) as pool:
        bound = run_bound(len(versions))
        say(f"bisecting {program.provenance.name} under {parsed} over {len(versions)} releases "
            f"({versions[0]} .. {versions[-1]}): at most {bound} runs")
        with Steps("bisect") as steps:  # reruns of a flaky release may exceed the bound
            def show(run: ReleaseRun) -> None:
                # Each release run is progress (stderr): kept on a terminal, a line in logs.
                note = " (rerun)" if run.rerun else ""
                steps.step(f"  jaxlib=={run.release:<10} {run.verdict:<13} "
                           f"{seconds(run.seconds):>9}  {run.detail}{note}", keep=True)

            # spmd: each release's own jax partitions the finding's reproducer
            run = (functools.partial(bisect_spmd, emit=emit_spmd_repro)
                   if parsed.kind == "spmd" else bisect_program)
            result = run(program, parsed, versions, pool, known_bad=known_bad,
                         target=target, on_run=show, log=steps.note,
                         between=lambda lo, hi: releases_between(lo, hi, say=steps.note))
        store.record_bisection(program.fingerprint, finding_id, str(parsed), result.to_json())
    if json_output:
        print(json.dumps(result.to_json(), indent=2))
    else:
        first_bad = result.first_bad or "-"
        if result.first_bad and not result.last_good:
            first_bad = f"{result.first_bad} or older (the oldest release tried fails)"
        say(f"last good: {result.last_good or '-'}   first bad: {first_bad}   "
            f"first fixed: {result.first_fixed or '-'}"
            + (f"   flaky: {', '.join(result.flaky)}" if result.flaky else "")
            + f"   ({result.release_runs} release runs)")
        if result.fails_nowhere:
            say(f"not found in this range: every release tried ({len(result.releases)}, "
                f"{result.releases[0]} .. {result.releases[-1]}) computes it right")
        elif not result.boundary:
            say("no boundary in this range: " + ("every release tried fails; add older releases "
                                                 "with --releases" if result.first_bad else
                                                 "no release tried runs it"))
    return 0 if result.boundary or result.fails_nowhere else 1


envs_app = typer.Typer(no_args_is_help=True, help="Environments of other jax/jaxlib releases "
                                                  "(configurations jaxlib==VERSION).")
app.add_typer(envs_app, name="envs")


@envs_app.command("list")
def envs_list(
    available: Annotated[bool, typer.Option("--available", help="list the registry's releases "
                                                                "(needs the network)")] = False,
    as_json: JsonOption = False,
) -> None:
    """List the release environments made (or, with --available, the releases there are)."""
    rows = envs_rows(available=available)
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    table = Table(caption=f"cache: {envs.cache_dir()}")
    keys = list(rows[0]) if rows else ["version", "path", "python_version", "size_bytes"]
    for key in keys:
        table.add_column({"size_bytes": "size", "python_version": "python version"}.get(key, key))
    for row in rows:
        table.add_row(*(escape(_env_cell(k, row[k])) for k in keys))
    out.print(table)


def _env_cell(key: str, value: Any) -> str:
    """A cell of ``envs list``'s table: sizes in GB, times local (the JSON keeps bytes and UTC)."""
    if key == "size_bytes" and isinstance(value, int):
        return f"{value / 1e9:.2f} GB"
    if key == "created" and isinstance(value, str) and value.endswith("Z"):
        try:
            return local_time(calendar.timegm(time.strptime(value, "%Y-%m-%dT%H:%M:%SZ")))
        except ValueError:
            return value
    return str(value)


@envs_app.command("add")
def envs_add(versions: Annotated[list[str], typer.Argument(help="jaxlib releases, e.g. 0.5.3")]) -> None:
    """Make the environments of some releases now (else they are made on first use)."""
    for version in versions:
        env = envs.ensure_env(version, log=lambda line: err.print(escape(line)))
        out.print(f"jaxlib=={env.version}: {env.path} (Python {env.python_version}, "
                  f"{env.size_bytes / 1e9:.2f} GB)")


@envs_app.command("remove")
def envs_remove(versions: Annotated[list[str], typer.Argument(help="jaxlib releases")]) -> None:
    """Delete the environments of some releases."""
    for version in versions:
        removed = envs.remove_env(version)
        out.print(f"jaxlib=={version}: {'removed' if removed else 'no environment'}")


def envs_rows(*, available: bool) -> list[dict[str, Any]]:
    """Rows for ``xlaprobe envs list``: the environments made (and, with `available`, the
    registry's releases with whether each is made)."""
    made = {e.version: e for e in envs.list_envs()}
    if not available:
        return [e.to_json() for e in made.values()]
    versions = envs.available_releases()
    defaults = set(envs.default_releases(versions))
    return [{"version": v, "made": v in made, "default": v in defaults,
             "installed": v == envs.installed_version()} for v in versions]
