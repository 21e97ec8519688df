"""Release bisection of a Program: each release judged by the oracle against the float64
reference of the installed jax, the boundaries found by `xlaprobe.releases.bisection.bisect`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from xlaprobe.check import REFERENCE, check_program, judge
from xlaprobe.configs.registry import Configuration
from xlaprobe.configs.release import release_config, release_options
from xlaprobe.errors import InvalidArgument, NotReproducible
from xlaprobe.oracle import summary_kind
from xlaprobe.program import Program
from xlaprobe.releases import envs
from xlaprobe.releases.bisection import Bisection, ReleaseRun, bisect


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
        verdict = summary_kind(v.kind for v in verdicts).value
        if outcome.ran:
            failing = [v.output for v in verdicts if v.kind.is_finding]
            detail = f"{len(failing)}/{len(verdicts)} outputs fail" if failing else ""
        else:
            detail = outcome.error.strip().splitlines()[-1][:300] if outcome.error.strip() else ""
        return ReleaseRun(version, verdict, detail, outcome.seconds)

    return bisect(releases, judge_release, known_bad=known_bad, target=target,
                  config=str(config), on_run=on_run)


def known_bad_release(config: Configuration) -> str:
    """The release a configuration ran on when it failed: its own version, or the installed one."""
    return (config.variant or "") if config.kind == "jaxlib" else envs.installed_version()


