"""``xlaprobe check``: one differential check from the command line, stored, as a table or JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from xlaprobe.cli import console as consoles
from xlaprobe.cli.app import app, display
from xlaprobe.cli.console import Steps, seconds
from xlaprobe.cli.options import (DEFAULT_DB, DbOption, InputsOption, JobsOption, JsonOption,
                                  QuietOption, WideOption)


@app.command()
def check(
    target: Annotated[str, typer.Argument(help="zoo MODEL, path/to/case.py, FILE.py:FN, module:fn, "
                                               "or an artifact directory")],
    configs: Annotated[str, typer.Option("--configs", "-c", help="comma-separated configuration "
                                         "specs")] = "xla,xla:O0,eager,reference",
    inputs: InputsOption = "",
    seed: Annotated[int, typer.Option(help="seed of random weights and inputs", min=0,
                                      max=2 ** 63 - 1)] = 0,
    db: DbOption = DEFAULT_DB,
    jobs: JobsOption = 1,
    timeout: Annotated[float, typer.Option(help="per-run limit (s); the reference's error-budget "
                                           "runs get it too", min=0.1, max=7 * 24 * 3600.0)] = 600.0,
    as_json: JsonOption = False,
    all_outputs: Annotated[bool, typer.Option("--all-outputs", help="list every output leaf")] = False,
    accept: Annotated[str | None, typer.Option(
        "--accept", help="freedoms XLA may take, ok with their label: comma-separated "
        "excess-range, fma, ftz, or all, none [default: ftz]", show_default=False)] = None,
    quiet: QuietOption = False,
    wide: WideOption = False,
) -> None:
    """Check TARGET under several configurations against the float64 reference (always added);
    exit 0 all ok, 1 findings, 2 bad input, 4 no finding but incomplete."""
    from xlaprobe.freedoms import parse_accept  # imports jax: kept out of `xlaprobe --help`

    display(quiet, wide)
    accepted = parse_accept(accept)  # a bad name: one line, exit 2, before any run
    raise typer.Exit(check_command(target, configs, input_spec=inputs, seed=seed, db=db,
                                   jobs=jobs, timeout_s=timeout, json_output=as_json,
                                   all_outputs=all_outputs, accept=accepted))


def check_command(target: str, configs: str, *, input_spec: str, seed: int, db: Path,
                  jobs: int, timeout_s: float, json_output: bool, all_outputs: bool,
                  accept: frozenset[str] | None = None) -> int:
    """``xlaprobe check TARGET``: run the configurations (plus ``reference``, always) on TARGET,
    store the check and its findings' artifacts, print the table or JSON.

    `accept`: freedoms accepted as ok (`xlaprobe.freedoms.parse_accept`); None: the default.

    Returns:
        Exit code: 0 all ok, 1 findings, `INCOMPLETE` (4) no finding but something could not run.

    Raises:
        InvalidArgument: a bad target, configuration list or store.
    """
    # The checker imports jax: loaded when a check runs, not for `xlaprobe --help`.
    from xlaprobe.allowance import wide_allowances
    from xlaprobe.api import program_of, run_check, validated_store, with_oracle
    from xlaprobe.checking import run_plan, validate_for
    from xlaprobe.configs.registry import parse_configs
    from xlaprobe.verdicts import INCOMPLETE, print_result

    with_oracle(configs)  # a bad list fails before the build
    with Steps("check") as steps:
        steps.status(f"building {target} ...")
        program, named, _ = program_of(target, seed=seed, inputs=input_spec, db=db)
    parsed = with_oracle(configs, named)
    validate_for(program, parsed)
    # After the build and the configurations' checks (a target that cannot be built or a
    # configuration refused for it leaves no store behind), before any run.
    store = validated_store(db)
    plan = run_plan([str(c) for c in parse_configs(configs)], [str(c) for c in parsed])
    labels: dict[str, list[str]] = {}
    for spec, label in plan:
        labels.setdefault(spec, []).append(label)
    with Steps("check", total=len(plan)) as steps:
        steps.status(f"compiling and running {len(plan)} configurations "
                     f"({program.num_equations} equations)")

        def on_outcome(outcome: Any) -> None:
            # The plan is said with the first result, not before: a program the workers refuse
            # (bad input) stays one line on stderr.
            if not steps.done:
                steps.note(_plan_line(plan))
            ran = "done" if outcome.ran else outcome.kind.value
            if not labels.get(outcome.config):  # a freedom's evidence run, asked for later
                steps.note(f"freedom evidence {outcome.config} {ran} in "
                           f"{seconds(outcome.seconds)}")
                return
            # A spec asked for and added too (reference:native) runs twice, alike: either
            # outcome may take either label.
            label = labels[outcome.config].pop(0)
            steps.step(f"{label} {ran} in {seconds(outcome.seconds)}")

        checked = run_check(program, parsed, db=store, jobs=jobs, timeout_s=timeout_s,
                            on_outcome=on_outcome, accept=accept)
    result = checked.result
    if json_output:
        data = result.to_json()
        for item in data["findings"]:
            item["artifact"] = checked.artifacts.get(item["config"])
            item["id"] = checked.ids.get(item["config"])
        data["wide_allowances"] = [w.to_json() for w in wide_allowances(result)]
        print(json.dumps(data, indent=2))
    else:
        print_result(result, dict(checked.artifacts), all_outputs, dict(checked.ids), db,
                     console=consoles.out)
    return 1 if result.findings else INCOMPLETE if result.incomplete else 0


def _plan_line(plan: list[tuple[str, str]]) -> str:
    """What a check will run, said before it runs: ``8 runs: 4 asked (xla, ...), 4 added
    (reference:ftz, ...)``, so that the step count (5/8) is no surprise."""
    asked = [spec for spec, label in plan if label == spec]
    added = [spec for spec, label in plan if label != spec]
    return (f"{len(plan)} runs: {len(asked)} asked ({', '.join(asked)})"
            + (f", {len(added)} added by the check ({', '.join(added)})" if added else ""))
