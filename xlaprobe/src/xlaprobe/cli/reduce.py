"""``xlaprobe reduce TARGET [CONFIG]``: reduce a finding to a standalone reproducer, print a
summary, store the reduction in the store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from xlaprobe.cli.app import app, display
from xlaprobe.cli.console import Steps, seconds
from xlaprobe.cli.paths import check_folder_of
from xlaprobe.cli.options import (DEFAULT_DB, DbOption, FaultyConfig, FindingTarget,
                                  InputsOption, JobsOption, JsonOption, QuietOption,
                                  RunTimeoutOption)
from xlaprobe.errors import InvalidArgument

if TYPE_CHECKING:
    from xlaprobe.localization.reduce import PassStats
    from xlaprobe.program import Program

#: The default interestingness test budget (`xlaprobe.localization.reduce.MAX_TESTS`, which
#: imports jax; a test checks they agree).
MAX_TESTS = 400


@app.command("reduce")
def reduce_cli(
    target: FindingTarget,
    config: FaultyConfig = "",
    db: DbOption = DEFAULT_DB,
    out_dir: Annotated[Path | None, typer.Option("--out", help="output directory (default: "
                                                 "reductions/ beside the store)")] = None,
    jobs: JobsOption = 1,
    timeout: RunTimeoutOption = 600.0,
    max_tests: Annotated[int, typer.Option("--max-tests", min=1, max=100_000,
                                           help="interestingness test budget")] = MAX_TESTS,
    as_json: JsonOption = False,
    inputs: InputsOption = "",
    quiet: QuietOption = False,
) -> None:
    """Reduce a finding (ddmin over equations, then shapes and values) to a standalone repro.py."""
    display(quiet)
    raise typer.Exit(reduce_command(target, config, db=db, out=out_dir, json_output=as_json,
                                    jobs=jobs, timeout_s=timeout, max_tests=max_tests,
                                    input_spec=inputs))


def reduce_command(target: str, config: str, *, db: Path | str, out: Path | str | None = None,
                   json_output: bool = False, jobs: int = 1, timeout_s: float = 600.0,
                   max_tests: int = MAX_TESTS, input_spec: str = "") -> int:
    """``xlaprobe reduce TARGET [CONFIG]``: reduce, write the reproducer, print a summary.

    Args:
        target: a finding id from the store, an artifact directory, a case module, a zoo model,
            FILE.py:FN or module:fn (as for ``xlaprobe localize``).
        config: the faulty configuration; "" takes the finding's (or the case's FAULTY_CONFIG).
        db: the SQLite store (finding ids are looked up there); outputs go beside it in
            ``reductions/<fingerprint>-<config>/`` unless `out` is given.
        out: output directory, or None.
        json_output: print the reduction as JSON on stdout instead of progress lines.
        jobs: worker processes per isolation group.
        timeout_s: per-run limit (s).
        max_tests: interestingness test budget.
        input_spec: inputs of a FILE.py:FN target (``--inputs``).

    Returns:
        Exit code: 0 reduced and ``repro.py`` shows the fault; 1 flaky, or the repro does not
        show it.

    Raises:
        InvalidArgument: bad target, configuration, budget or output directory.
        NotReproducible: the configuration gives no finding on the target.
    """
    if out is not None:
        check_folder_of(Path(out), flag="--out")  # before seconds of imports
    # Reduction imports jax: loaded when it runs, not for `xlaprobe --help`.
    from xlaprobe.api import Reduced, check_out_dir, store_reduction, validated_store
    from xlaprobe.localization import fusion as fusion_mod
    from xlaprobe.localization.reduce import elements, reduce, write_outputs
    from xlaprobe.sources.targets import resolve_faulty

    db = Path(db)
    if max_tests < 1:
        raise InvalidArgument(f"--max-tests must be at least 1, not {max_tests}")
    if out is not None:
        check_out_dir(Path(out))
    program, parsed, finding_id = resolve_faulty(target, config, db, input_spec, "reduce")
    validated_store(db)  # a bad store fails now, not after the run
    config = str(parsed)
    say = (lambda text: None) if json_output else print
    say(f"reducing {config} on {program.provenance.name} ({len(program.jaxpr.jaxpr.eqns)} "
        "top-level equations)")

    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in str(parsed))
    with fusion_mod.make_pool(size=jobs, timeout_s=timeout_s) as pool:
        with Steps("reduce") as steps:
            def report(stats: PassStats, current: Program) -> None:
                # Each pass is progress (stderr): kept on a terminal, a plain line in logs.
                steps.step(f"  {stats.name:9s} {stats.tests:3d} tests, {stats.accepted:3d} kept: "
                           f"{len(current.jaxpr.jaxpr.eqns)} equations, {elements(current)} "
                           f"input elements [{seconds(stats.seconds)}]", keep=True)

            result = reduce(program, parsed, pool, max_tests=max_tests, on_pass=report)
        directory = Path(out) if out else db.parent / "reductions" / \
            f"{program.fingerprint}-{safe}"[:150]
        written = write_outputs(result, directory, pool)
    store_reduction(db, program, result, written, finding_id)
    if json_output:
        print(json.dumps(result.to_json() | {"written": written.to_json()}, indent=2,
                         default=str))
    else:
        for line in Reduced(result, written).lines(seconds):
            say(line)
    return 0 if written.repro_exit == 1 and not result.flaky else 1
