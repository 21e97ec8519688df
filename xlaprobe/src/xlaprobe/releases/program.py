"""Release bisection of a Program: each release judged by the oracle against the float64
reference of the installed jax, the boundaries found by `xlaprobe.releases.bisection.bisect`.
A release is bad when it fails like the finding (`xlaprobe.checker.Checker`); one that fails
otherwise (another bug) is no evidence, like one that cannot run the program. A partitioned
(``spmd[...]``) finding runs its standalone reproducer in each release instead
(`xlaprobe.releases.spmd`)."""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from xlaprobe.checking import REFERENCE, check_program, judge
from xlaprobe.checker import Checker, Failure
from xlaprobe.configs.registry import Configuration
from xlaprobe.releases.kind import release_config, release_options
from xlaprobe.errors import InvalidArgument, NotReproducible
from xlaprobe.items import split_items
from xlaprobe.oracle import summary_kind
from xlaprobe.program import Program
from xlaprobe.releases import envs
from xlaprobe.releases.bisection import Bisection, ReleaseRun, bisect
from xlaprobe.releases.spmd import ordered_judge, spmd_judge


def parse_releases(text: str) -> list[str]:
    """A comma-separated release list, checked (``0.4.33,0.5.3``).

    Raises:
        InvalidArgument: an empty list, an empty or repeated item, or a malformed version.
    """
    versions = [envs.check_version(v) for v in split_items(text, "--releases")]
    if not versions:
        raise InvalidArgument("empty --releases list; e.g. --releases 0.4.33,0.5.3,0.12.0.1")
    return versions


def bisect_program(program: Program, config: Configuration, releases: Sequence[str], pool: Any, *,
                   known_bad: str | None = None, failure: Failure | None = None,
                   target: str = "",
                   on_run: Callable[[ReleaseRun], None] | None = None,
                   log: Callable[[str], None] | None = None,
                   between: Callable[[str, str], Sequence[str]] | None = None) -> Bisection:
    """Bisect `releases` for the release where `config` starts (or stops) failing on `program`.

    The float64 reference and its error budget run once; each release's outcome is judged
    against them (`xlaprobe.checking.judge`).

    Args:
        program: the program.
        config: the configuration template (``xla``, ``xla:fastmath``, ``jaxlib==V[...]``).
        releases: versions to search, any order.
        pool: a `WorkerPool`.
        known_bad: a release known to fail (searched from when both ends are good).
        failure: the finding's failure (`xlaprobe.checker.Failure`); a release is bad when it
            fails like it, and one failing otherwise is no evidence. None: the failure
            `known_bad` shows (run first), else any failure.
        target: what the user named (recorded).
        on_run: called with each release run as it completes (progress).
        log: gets a line when a release environment has to be made (made only when the search
            reaches that release), and one when both ends are right.
        between: more releases to try between two right ends (`releases_between`); None: only
            the listed ones.

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
    base = _reference_check(program, pool)
    reference = base.outcomes[0]

    def run_release(version: str) -> tuple[ReleaseRun, Failure | None]:
        spec = str(release_config(version, options))
        if version != envs.installed_version():
            envs.ensure_env(version, log=log)
        outcome = pool.run(program, spec)
        result = judge(program, [REFERENCE, spec], [reference, outcome], base.budget,
                       base.flushed)
        verdicts = result.verdicts[1]
        if outcome.ran:
            failing = [v.output for v in verdicts if v.kind.is_finding]
            detail = f"{len(failing)}/{len(verdicts)} outputs fail" if failing else ""
        else:
            detail = outcome.last_line[:300]
        return (ReleaseRun(version, summary_kind(v.kind for v in verdicts).value, detail,
                           outcome.seconds), result.failure(spec))

    # The finding's failure: given, else the one the release it was seen on shows (that run is
    # then the search's own first run of that release, not repeated).
    first: dict[str, tuple[ReleaseRun, Failure | None]] = {}
    if failure is None and known_bad in releases:
        first[known_bad] = run_release(known_bad)
        failure = first[known_bad][1]
    checker = Checker(failure) if failure is not None else None

    def judge_release(version: str) -> ReleaseRun:
        run, shown = first.pop(version) if version in first else run_release(version)
        if shown is None or checker is None or checker.same(shown):
            return run
        return dataclasses.replace(run, other=True, detail=(
            f"fails otherwise than the finding ({failure.kind.value} of "
            f"{', '.join(failure.outputs[:3])}): {run.detail}"))

    return bisect(releases, judge_release, known_bad=known_bad, target=target,
                  config=str(config), on_run=on_run, between=between, note=log)


def releases_between(oldest: str, newest: str, *,
                     available: Callable[[], list[str]] | None = None,
                     say: Callable[[str], None] = lambda text: None) -> list[str]:
    """The default range's releases (newest of each minor line) strictly between two releases:
    what a bisection whose listed releases are few tries when both ends are right.

    Args:
        oldest, newest: the right ends.
        available: the registry's releases (default `envs.available_releases`).
        say: gets one line when the registry cannot be asked (then nothing is added).

    Returns:
        Versions, oldest first (may be empty).
    """
    try:
        versions = (available or envs.available_releases)()
    except envs.EnvironmentUnavailable as exc:
        say(f"cannot add releases between {oldest} and {newest}: {exc}")
        return []
    lo, hi = envs.version_key(oldest), envs.version_key(newest)
    return [v for v in envs.default_releases(versions) if lo < envs.version_key(v) < hi]


def _reference_check(program: Program, pool: Any) -> Any:
    """The float64 reference and its error budget on `program` (a `CheckResult`).

    Raises:
        NotReproducible: the reference cannot run the program.
    """
    base = check_program(program, [REFERENCE], pool)
    reference = base.outcomes[0]
    if not reference.ran:
        raise NotReproducible(f"the float64 reference cannot run {program.provenance.name} "
                              f"({reference.last_line}): "
                              "bisection has nothing to judge releases against")
    return base


def bisect_spmd(program: Program, config: Configuration, releases: Sequence[str], pool: Any,
                emit: Callable[..., str], *, known_bad: str | None = None, target: str = "",
                on_run: Callable[[ReleaseRun], None] | None = None,
                log: Callable[[str], None] | None = None,
                between: Callable[[str, str], Sequence[str]] | None = None) -> Bisection:
    """`bisect_program` for an ``spmd[...]`` configuration: each release runs the finding's
    standalone reproducer with its own jax, which partitions it (`xlaprobe.releases.spmd`).

    Args:
        emit: ``(program, config, reference, honest) -> reproducer text``
            (`xlaprobe.localization.spmd_repro.emit_spmd_repro`).
        (others): as `bisect_program`.

    Raises:
        InvalidArgument: an empty release list, or `config` invalid for the program.
        NotReproducible: the float64 reference cannot run the program.
        EnvironmentUnavailable: a release environment cannot be made.
    """
    if not releases:
        raise InvalidArgument("no releases to bisect")
    base = _reference_check(program, pool)
    script = emit(program, str(config), base.outcomes[0].outputs,
                  [o.outputs for o in base.budget if o.ran])
    with tempfile.TemporaryDirectory(prefix="xlaprobe-spmd-bisect-") as folder:
        path = Path(folder) / "repro.py"
        path.write_text(script)
        judge_script = ordered_judge(spmd_judge(path, log=log),
                                     known_bad if known_bad in releases else None)
        return bisect(releases, judge_script, known_bad=known_bad, target=target,
                      config=str(config), on_run=on_run, between=between, note=log)


def known_bad_release(config: Configuration) -> str:
    """The release a configuration ran on when it failed: its own version, or the installed one."""
    return (config.variant or "") if config.kind == "jaxlib" else envs.installed_version()


def releases_to_bisect(config: Configuration, releases: str | None,
                       say: Callable[[str], None] = lambda text: None) -> tuple[list[str], str]:
    """The releases a bisection of `config` searches, with the known-bad one among them.

    Args:
        config: the failing configuration (an XLA kind or ``jaxlib==V``).
        releases: a comma-separated list (`parse_releases`), or None for the made environments
            and the registry's defaults.
        say: gets one line when the known-bad release had to be added.

    Returns:
        (versions in release order, the known-bad release).

    Raises:
        InvalidArgument: a malformed release list.
    """
    versions = parse_releases(releases) if releases is not None else \
        envs.default_releases(envs.available_releases())
    known_bad = known_bad_release(config)
    if known_bad not in versions:
        # The release the failure was seen on is evidence: a bug that came and went between
        # two good ends is found from it.
        versions = sorted({*versions, known_bad}, key=envs.version_key)
        why = "the release the configuration names" if config.kind == "jaxlib" else \
            "the installed release, which the check ran on"
        say(f"added jaxlib=={known_bad} ({why}) to the releases")
    return versions, known_bad


