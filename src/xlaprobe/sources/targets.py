"""Resolve a command-line target (zoo model, case module, FILE:FN, module:fn, artifact) to a Program."""

from __future__ import annotations

import dataclasses
import difflib
from pathlib import Path

from xlaprobe.errors import InvalidArgument
from xlaprobe.program import Program


@dataclasses.dataclass(frozen=True)
class Target:
    """A resolved target.

    Attributes:
        program: the Program to check.
        extra_configs: configurations the target itself names (a case's ``FAULTY_CONFIG``).
        kind: the case's ``KIND`` (the op where its fault lies), or "".
    """

    program: Program
    extra_configs: tuple[str, ...] = ()
    kind: str = ""


def resolve(target: str, *, seed: int = 0, input_spec: str = "") -> Target:
    """Resolve `target`, tried in this order: artifact directory, ``X:FN`` (file or module), case
    module path (``.py``), zoo model name.

    Args:
        target: what the user typed.
        seed: seed of random weights/inputs (models, input specs).
        input_spec: input spec for ``X:FN`` targets (see `xlaprobe.sources.user.parse_input_spec`).

    Raises:
        InvalidArgument: nothing matches (the message lists the zoo and the accepted forms).
    """
    from xlaprobe import artifact
    from xlaprobe.sources import user

    if not target.strip():
        raise InvalidArgument("empty target: give a zoo model, path/to/case.py, FILE.py:FN, "
                              "module:fn or an artifact directory")
    if artifact.is_artifact(target):
        if input_spec:
            raise InvalidArgument(f"--inputs does not apply to artifact {target}: it holds its inputs")
        return Target(artifact.load_artifact(target))
    if ":" in target and not Path(target).exists():
        return Target(user.user_program(target, input_spec=input_spec, seed=seed))
    if target.endswith(".py") or Path(target).exists():
        if input_spec:
            raise InvalidArgument(f"--inputs applies to FILE.py:FN targets; {target} is a case "
                                  "module with its own inputs()")
        if Path(target).is_dir():
            raise InvalidArgument(f"{target} is a directory but not an artifact (no metadata.json)")
        case = user.load_case(target)
        extra = (case.faulty_config,) if case.faulty_config else ()
        return Target(case.program, extra, case.kind)
    from xlaprobe.sources import models
    if target in models.MODELS:
        if input_spec:
            raise InvalidArgument(f"--inputs does not apply to zoo model '{target}'")
        return Target(models.build_program(target, seed=seed))
    close = difflib.get_close_matches(target, list(models.MODELS), n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    raise InvalidArgument(
        f"unknown target '{target}'{hint}: give a zoo model ({', '.join(sorted(models.MODELS))}), "
        "a case module path/to/case.py, path/to/file.py:fn, package.module:fn, or an artifact directory")
