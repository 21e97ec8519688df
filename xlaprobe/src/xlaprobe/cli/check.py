"""``xlaprobe check``: one differential check from the command line, stored, as a table or JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from xlaprobe.api import program_of, run_check, validated_store, with_oracle
from xlaprobe.checking import HONEST, REFERENCE
from xlaprobe.cli import console as consoles
from xlaprobe.cli.console import Steps, seconds
from xlaprobe.verdicts import INCOMPLETE, print_result


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
    with_oracle(configs)  # a bad list fails before the build
    with Steps("check") as steps:
        steps.status(f"building {target} ...")
        program, named, _ = program_of(target, seed=seed, inputs=input_spec, db=db)
    # After the build (a target that cannot be built leaves no store behind), before any run.
    store = validated_store(db)
    parsed = with_oracle(configs, named)
    specs = {str(c) for c in parsed}
    runs = len(parsed) + (len(HONEST) if REFERENCE in specs else 0)
    planned = {*specs, *HONEST}
    with Steps("check", total=runs) as steps:
        steps.status(f"compiling and running {runs} configurations "
                     f"({program.num_equations} equations)")

        def on_outcome(outcome: Any) -> None:
            ran = "done" if outcome.ran else outcome.kind.value
            if outcome.config not in planned:  # a freedom's evidence run, asked for later
                steps.note(f"freedom evidence {outcome.config} {ran} in "
                           f"{seconds(outcome.seconds)}")
                return
            steps.step(f"{outcome.config} {ran} in {seconds(outcome.seconds)}")

        checked = run_check(program, parsed, db=store, jobs=jobs, timeout_s=timeout_s,
                            on_outcome=on_outcome, accept=accept)
    result = checked.result
    if json_output:
        data = result.to_json()
        for item in data["findings"]:
            item["artifact"] = checked.artifacts.get(item["config"])
            item["id"] = checked.ids.get(item["config"])
        from xlaprobe.allowance import wide_allowances
        data["wide_allowances"] = [w.to_json() for w in wide_allowances(result)]
        print(json.dumps(data, indent=2))
    else:
        print_result(result, dict(checked.artifacts), all_outputs, dict(checked.ids), db,
                     console=consoles.out)
    return 1 if result.findings else INCOMPLETE if result.incomplete else 0
