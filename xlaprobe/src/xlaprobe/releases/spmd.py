"""Release bisection of a partitioned (``spmd[...]``) finding.

A ``jaxlib==V`` run hands the release a single-device module; a partitioned program needs the
release's own jax too (Shardy's sharding propagation and the lowering of shardings happen there).
So each release runs the finding's standalone reproducer (`xlaprobe.localization.spmd_repro`: it
presents the mesh's host devices, builds the mesh and shardings, selects the partitioner and
compares the gathered outputs with the float64 reference) in a fresh process of the release's
interpreter (`xlaprobe.releases.scripts.run_script`). A release without Shardy, or whose jax lacks
an API the script uses, is *unsupported*; one failing otherwise than the installed release (a
crash where it gives a wrong result, say) is marked ``other``: no evidence about this bug.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from xlaprobe.releases.bisection import UNSUPPORTED, ReleaseRun
from xlaprobe.releases.scripts import run_script


def spmd_judge(script: Path, *, timeout_s: float = 600.0,
               log: Callable[[str], None] | None = None) -> Callable[[str], ReleaseRun]:
    """A bisection judge (`xlaprobe.releases.bisection.bisect`) running an ``spmd`` finding's
    reproducer (`xlaprobe.localization.spmd_repro.emit_spmd_repro`) under each release.

    Args:
        script: the reproducer (it exits 1 when the fault shows, 3 without Shardy).
        timeout_s: per-release wall-clock limit (s).
        log: gets a line when a release environment has to be made.

    Returns:
        ``judge(version) -> ReleaseRun``. The first failing verdict seen (the installed release's,
        with `ordered_judge`) is the failure's kind; a later release failing with another verdict
        is ``other``.
    """
    seen: dict[str, str] = {}

    def judge(version: str) -> ReleaseRun:
        run = run_script(version, script, timeout_s=timeout_s, log=log)
        if run.verdict in ("ok", UNSUPPORTED):
            return run
        kind = seen.setdefault("kind", run.verdict)
        return run if run.verdict == kind else dataclasses.replace(
            run, other=True, detail=f"fails otherwise ({run.verdict}, not {kind}): {run.detail}")

    return judge


def ordered_judge(judge: Callable[[str], ReleaseRun],
                  known_bad: str | None) -> Callable[[str], ReleaseRun]:
    """`judge` with the known-bad release run first (its verdict fixes the failure's kind) and
    remembered, so the bisection's own run of it costs nothing more."""
    first: dict[str, ReleaseRun] = {}
    if known_bad:
        first[known_bad] = judge(known_bad)

    def ordered(version: str) -> ReleaseRun:
        return first.pop(version) if version in first else judge(version)

    return ordered


__all__ = ["ordered_judge", "spmd_judge"]
