"""``xlaprobe bisect`` and ``xlaprobe envs``: release bisection of a program, and the release
environments it runs in."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from xlaprobe.campaign import summary_kind
from xlaprobe.check import REFERENCE, check_program, judge
from xlaprobe.configs.release import release_config, release_options
from xlaprobe.configs.registry import Configuration
from xlaprobe.errors import InvalidArgument, NotReproducible
from xlaprobe.program import Program
from xlaprobe.releases import envs
from xlaprobe.releases.bisection import Bisection, ReleaseRun, bisect, run_bound


def parse_releases(text: str) -> list[str]:
    """A comma-separated release list, checked (``0.4.33,0.5.3``).

    Raises:
        InvalidArgument: an empty list or a malformed version.
    """
    versions = [envs.check_version(v.strip()) for v in text.split(",") if v.strip()]
    if not versions:
        raise InvalidArgument("empty --releases list; e.g. --releases 0.4.33,0.5.3,0.12.0.1")
    return versions


def bisect_program(program: Program, config: Configuration, releases: Sequence[str], pool: Any, *,
                   known_bad: str | None = None, target: str = "",
                   on_run: Callable[[ReleaseRun], None] | None = None,
                   log: Callable[[str], None] | None = None) -> Bisection:
    """Bisect `releases` for the release where `config` starts (or stops) failing on `program`.

    The float64 reference and its error budget run once; each release's outcome is judged
    against them (`xlaprobe.check.judge`).

    Args:
        program: the program.
        config: the configuration template (``xla``, ``xla:fastmath``, ``jaxlib==V[...]``).
        releases: versions to search, any order.
        pool: a `WorkerPool`.
        known_bad: a release known to fail (searched from when both ends are good).
        target: what the user named (recorded).
        on_run: called with each release run as it completes (progress).
        log: gets a line when a release environment has to be made (made only when the search
            reaches that release).

    Returns:
        The `Bisection`.

    Raises:
        InvalidArgument: a non-XLA configuration, or an empty release list.
        NotReproducible: the float64 reference cannot run the program (nothing to judge against).
        EnvironmentUnavailable: a release environment cannot be made.
    """
    if not releases:
        raise InvalidArgument("no releases to bisect")
    options = release_options(config)
    base = check_program(program, [REFERENCE], pool)
    reference = base.outcomes[0]
    if not reference.ran:
        raise NotReproducible(f"the float64 reference cannot run {program.provenance.name} "
                              f"({reference.error.strip().splitlines()[-1] if reference.error else ''}): "
                              "bisection has nothing to judge releases against")

    def judge_release(version: str) -> ReleaseRun:
        spec = release_config(version, options)
        if version != envs.installed_version():
            envs.ensure_env(version, log=log)
        outcome = pool.run(program, spec)
        result = judge(program, [REFERENCE, str(spec)], [reference, outcome], base.budget,
                       base.flushed)
        verdicts = result.verdicts[1]
        kinds = [v.kind.value for v in verdicts]
        verdict = summary_kind(kinds)
        if outcome.ran:
            failing = [v.output for v in verdicts if v.kind.is_finding]
            detail = f"{len(failing)}/{len(verdicts)} outputs fail" if failing else ""
        else:
            detail = outcome.error.strip().splitlines()[-1][:300] if outcome.error.strip() else ""
        return ReleaseRun(version, verdict, detail, outcome.seconds)

    return bisect(releases, judge_release, known_bad=known_bad, target=target,
                  config=str(config), on_run=on_run)


def _known_bad(config: Configuration) -> str:
    """The release a configuration ran on when it failed: its own version, or the installed one."""
    return (config.variant or "") if config.kind == "jaxlib" else envs.installed_version()


def bisect_command(target: str, config: str, *, releases: str | None, db: Path, json_output: bool,
                   timeout_s: float, input_spec: str = "") -> int:
    """``xlaprobe bisect TARGET [CONFIG]``: print each release run and the boundaries; store them.

    Returns:
        Exit code: 0 when a boundary was found (first bad or first fixed), 1 when no release in
        the range fails.

    Raises:
        InvalidArgument: bad target, configuration, release list or store.
        EnvironmentUnavailable: a release environment cannot be made.
    """
    from xlaprobe.sources.targets import resolve_finding
    from xlaprobe.store import Store
    from xlaprobe.workers import WorkerPool

    program, spec, finding_id = resolve_finding(target, config, db, input_spec)
    parsed = Configuration.parse(spec)
    release_options(parsed)  # fail on a non-XLA configuration before any work
    if releases is not None:
        versions = parse_releases(releases)
    else:
        versions = envs.default_releases(envs.available_releases())
    say = (lambda text: None) if json_output else (lambda text: print(text, flush=True))
    known_bad = _known_bad(parsed)
    if known_bad not in versions:
        # The release the failure was seen on is evidence: a bug that came and went between
        # two good ends is found from it.
        versions = sorted({*versions, known_bad}, key=envs.version_key)
        why = "the release the configuration names" if parsed.kind == "jaxlib" else \
            "the installed release, which the check ran on"
        say(f"added jaxlib=={known_bad} ({why}) to the releases")

    def show(run: ReleaseRun) -> None:
        note = " (rerun)" if run.rerun else ""
        say(f"  jaxlib=={run.release:<10} {run.verdict:<13} {run.seconds:6.1f} s  "
            f"{run.detail}{note}")

    # Open the store first: a bad --db fails before minutes of release runs, not after.
    with Store(db) as store, WorkerPool(size=1, timeout_s=timeout_s) as pool:
        say(f"bisecting {program.provenance.name} under {parsed} over {len(versions)} releases "
            f"({versions[0]} .. {versions[-1]}): at most {run_bound(len(versions))} runs")
        result = bisect_program(program, parsed, versions, pool, known_bad=known_bad,
                                target=target, on_run=show, log=say)
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
        if not result.boundary:
            say("no boundary in this range: " + ("every release tried fails; add older releases "
                                                 "with --releases" if result.first_bad else
                                                 "no release tried fails"))
    return 0 if result.boundary else 1


def envs_list(*, available: bool) -> list[dict[str, Any]]:
    """Rows for ``xlaprobe envs list``: the environments made (and, with `available`, the
    registry's releases with whether each is made)."""
    made = {e.version: e for e in envs.list_envs()}
    if not available:
        return [e.to_json() for e in made.values()]
    versions = envs.available_releases()
    defaults = set(envs.default_releases(versions))
    return [{"version": v, "made": v in made, "default": v in defaults,
             "installed": v == envs.installed_version()} for v in versions]
