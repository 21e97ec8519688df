"""``xlaprobe bisect`` and ``xlaprobe envs``: release bisection of a finding from the command line,
and the release environments it runs in."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from xlaprobe.cli.console import Steps, seconds
from xlaprobe.configs.registry import Configuration
from xlaprobe.localization.spmd_repro import emit_spmd_repro
from xlaprobe.releases import envs
from xlaprobe.releases.bisection import ReleaseRun, run_bound
from xlaprobe.releases.kind import release_options
from xlaprobe.releases.program import (bisect_program, bisect_spmd, releases_between,
                                       releases_to_bisect)
from xlaprobe.sources.targets import resolve_finding
from xlaprobe.store import Store
from xlaprobe.workers import WorkerPool


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
    program, spec, finding_id = resolve_finding(target, config, db, input_spec)
    parsed = Configuration.parse(spec)
    if parsed.kind != "spmd":  # spmd: each release runs the finding's reproducer
        release_options(parsed)  # fail on a non-XLA configuration before any work
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
