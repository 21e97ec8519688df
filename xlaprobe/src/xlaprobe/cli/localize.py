"""``xlaprobe localize TARGET [CONFIG]``: localize a finding, print each tier as it completes,
store the localization (and the finding's bug key) in the store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from xlaprobe.backends import check_backend, make_pool
from xlaprobe.cli.app import app, display
from xlaprobe.cli.console import Steps, seconds
from xlaprobe.cli.options import (DEFAULT_DB, AddressOption, DbOption, FaultyConfig,
                                  FindingTarget, InputsOption, JobsOption, JsonOption,
                                  QuietOption, RunTimeoutOption)
from xlaprobe.errors import InvalidArgument

if TYPE_CHECKING:
    from xlaprobe.localization.bisect import Step


@app.command("localize")
def localize_cli(
    target: FindingTarget,
    config: FaultyConfig = "",
    db: DbOption = DEFAULT_DB,
    jobs: JobsOption = 1,
    timeout: RunTimeoutOption = 600.0,
    as_json: JsonOption = False,
    inputs: InputsOption = "",
    quiet: QuietOption = False,
    backend: Annotated[str, typer.Option(
        "--backend", help="where compiles run: local (--jobs worker processes) or ray (--jobs "
        "Ray actors); the compiler-pass search tests --jobs candidates at once "
        "(pip install 'xlaprobe\\[ray]')")] = "local",
    address: AddressOption = None,
) -> None:
    """Localize a finding: failing outputs, smallest failing jaxpr segment, equation, fusion."""
    display(quiet)
    raise typer.Exit(localize_command(target, config, db=db, json_output=as_json, jobs=jobs,
                                      timeout_s=timeout, input_spec=inputs, backend=backend,
                                      address=address))


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
                     input_spec: str = "", backend: str = "local",
                     address: str | None = None) -> int:
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
        backend: ``local`` or ``ray`` (`xlaprobe.backends.make_pool`): where compiles run;
            the compiler-pass search (tier 5) tests `jobs` candidate sets at once.
        address: the Ray cluster (``ray`` only; None: a new local one).

    Returns:
        Exit code: 0 localized, 1 nothing localized (the failure vanished) or flaky.

    Raises:
        InvalidArgument: bad target, configuration, store or backend (Ray missing or
            unreachable).
        NotReproducible: the configuration gives no finding on the target.
    """
    # Localization imports jax: loaded when it runs, not for `xlaprobe --help`.
    from xlaprobe.api import store_localization, validated_store
    from xlaprobe.localization.api import METHODS, localize
    from xlaprobe.sources.targets import resolve_faulty

    db = Path(db)
    check_backend(backend, address)  # before building the target, which can take a while
    if method not in METHODS:
        raise InvalidArgument(f"unknown localization method '{method}': use {', '.join(METHODS)}")
    program, parsed, finding_id = resolve_faulty(target, config, db, input_spec, "localize")
    validated_store(db)  # a bad store fails now, not after the run
    config = str(parsed)
    say = (lambda text: None) if json_output else print
    say(f"localizing {config} on {program.provenance.name} ({len(program.jaxpr.jaxpr.eqns)} "
        "top-level equations)")
    # Each tier's step is progress (stderr): kept on a terminal, a plain line in logs.
    with make_pool(backend, jobs, timeout_s, address=address) as pool, \
            Steps("localize") as steps:
        loc = localize(program, parsed, pool, method=method,
                       on_step=lambda step: steps.step(_describe(step), keep=True))
    if json_output:
        print(json.dumps(loc.to_json(), indent=2))
    else:
        for line in loc.tiers():
            say(line)
        say(f"{loc.cycles} compile+run cycles, {seconds(loc.seconds)}"
            + (", FLAKY" if loc.flaky else ""))
    store_localization(db, program, loc, finding_id)
    return 0 if loc.located else 1


