"""``xlaprobe localize TARGET [CONFIG]``: localize a finding, print each tier as it completes,
store the localization (and the finding's bug key) in the store."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from xlaprobe.cli.console import Steps, seconds
from xlaprobe.errors import InvalidArgument, XlaprobeError
from xlaprobe.localization import fusion as fusion_mod
from xlaprobe.localization.api import METHODS, Localization, localize
from xlaprobe.localization.bisect import Step
from xlaprobe.program import Program
from xlaprobe.sources.targets import resolve_faulty
from xlaprobe.store import Store


def _describe(step: Step) -> str:
    if step.tier.startswith("cut"):
        where = f"whole program, values up to eqn {step.last}"
    elif step.first < 0:
        where = f"whole program ({step.size} equations)"
    else:
        where = f"eqn {step.first}" if step.first == step.last else \
            f"eqns {step.first}..{step.last} ({step.size})"
    verdict = ("compiled" if step.failed else "failed to compile") if step.tier == "hlo" else (
        f"fails ({step.kind})" if step.failed else "passes")
    return f"  {step.tier:10s} {where}: {verdict} [{seconds(step.seconds)}]"


def localize_command(target: str, config: str, *, db: Path | str, json_output: bool,
                     jobs: int = 1, timeout_s: float = 600.0, method: str = "auto",
                     input_spec: str = "") -> int:
    """``xlaprobe localize TARGET [CONFIG]``: localize, print each tier as it completes, store it.

    Args:
        target: a finding id from the store, an artifact directory, a case module, a zoo model,
            FILE.py:FN or module:fn (as for ``xlaprobe check``).
        config: the faulty configuration; "" takes the finding's (or the case's FAULTY_CONFIG).
        db: the SQLite store; the localization is written beside it as
            ``localizations/<fingerprint>-<config>.json``.
        json_output: print the `Localization` as JSON on stdout instead of the progress lines.
        jobs: worker processes per isolation group.
        timeout_s: per-run limit (s).
        method: ``auto``, ``cuts`` or ``segments`` (see `localize`).
        input_spec: inputs of a FILE.py:FN target (``--inputs``).

    Returns:
        Exit code: 0 localized, 1 nothing localized (the failure vanished) or flaky.

    Raises:
        InvalidArgument: bad target, configuration or store.
        NotReproducible: the configuration gives no finding on the target.
    """
    db = Path(db)
    program, parsed, finding_id = resolve_faulty(target, config, db, input_spec, "localize")
    config = str(parsed)
    if method not in METHODS:
        raise InvalidArgument(f"unknown localization method '{method}': use {', '.join(METHODS)}")
    say = (lambda text: None) if json_output else print
    say(f"localizing {config} on {program.provenance.name} ({len(program.jaxpr.jaxpr.eqns)} "
        "top-level equations)")
    # Each tier's step is progress (stderr): kept on a terminal, a plain line in logs.
    with fusion_mod.make_pool(size=jobs, timeout_s=timeout_s) as pool, \
            Steps("localize") as steps:
        loc = localize(program, parsed, pool, method=method,
                       on_step=lambda step: steps.step(_describe(step), keep=True))
    if json_output:
        print(json.dumps(loc.to_json(), indent=2))
    else:
        _print_tiers(say, loc)
        for note in loc.notes:
            say(f"note: {note}")
        say(f"{loc.cycles} compile+run cycles, {seconds(loc.seconds)}"
            + (", FLAKY" if loc.flaky else ""))
    _store_localization(db, program, loc, finding_id)
    return 0 if loc.located else 1


def _print_tiers(say: Callable[[str], None], loc: Localization) -> None:
    """One line per tier that found something (and tier 4 or 5's reason where it named nothing)."""
    names = loc.outputs.names
    listed = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
    say(f"tier 1 outputs:  {len(names)} failing ({listed}); cone of {len(loc.outputs.cone)} "
        "equations")
    eq, kernels = loc.equation, loc.kernels
    if eq.index >= 0:
        say(f"tier 2 equation: {eq.index} {eq.primitive}"
            + (f" at {eq.source}" if eq.source else "") + f" ({eq.evidence})")
        if eq.segment:
            say(f"       segment:  equations {list(eq.segment)[:12]}"
                f"{' ...' if len(eq.segment) > 12 else ''} fail compiled alone")
        if kernels.fusions:
            say(f"tier 3 kernels:  {', '.join(kernels.fusions[:6])}"
                f"{' ...' if len(kernels.fusions) > 6 else ''}"
                + (f" (alone: {', '.join(kernels.segment_fusions[:3])})"
                   if kernels.segment_fusions else ""))
    op = loc.op
    if op.instruction:
        say(f"tier 4 op:       {op.instruction} ({op.opcode}) in {op.kernel}: "
            f"equation {op.equation} {op.primitive}"
            + (f", with {', '.join(op.with_instructions)}" if op.with_instructions else "")
            + f" ({op.cycles} compiles)")
    elif op.evidence:
        say(f"tier 4 op:       none named ({op.evidence})")
    if loc.blame is not None:
        say(f"tier 5 pass:     {loc.blame.compiler_pass or '(undecided)'} "
            f"({loc.blame.evidence}; {loc.blame.cycles} compiles)")


def _store_localization(db: Path, program: Program, loc: Localization,
                        finding_id: int | None) -> None:
    """Record `loc` in the store; a localized finding's bug key becomes its failing operation
    (`xlaprobe.triage.localized_key`). A store that cannot be written is a warning on stderr
    (``--json`` output on stdout must stay parseable), never a lost localization's exit code."""
    try:
        with Store(db) as store:
            found = store.finding_of(program.fingerprint, loc.config, finding_id)
            finding_id = found.id if found is not None else None
            bug = loc.bug_key(program, found.alike if found is not None else ())
            store.record_localization(program.fingerprint, finding_id, loc.config, loc.to_json(),
                                      bug)
    except (OSError, XlaprobeError) as exc:
        print(f"warning: could not store the localization in {db}: {exc}", file=sys.stderr)
