"""Resolve a command-line target (zoo model, case module, FILE:FN, module:fn, artifact) to a Program."""

from __future__ import annotations

import dataclasses
import difflib
from pathlib import Path

from xlaprobe.configs.registry import Configuration
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
        # A bug the installed release fixed is shown under the newest release that has it.
        from xlaprobe.releases.envs import installed_version
        config = case.config_with_bug(installed_version())
        extra = (config,) if config else ()
        return Target(case.program, extra, case.kind)
    from xlaprobe.sources import models
    everything = models.zoo()
    if target in everything:
        if input_spec:
            raise InvalidArgument(f"--inputs does not apply to zoo model '{target}'")
        return Target(models.build_program(target, seed=seed))
    if target.strip().lstrip("-+").isdigit():  # "-3", "+2": meant as a finding id
        raise InvalidArgument(f"no finding {target.strip()}: finding ids are whole numbers from 1 "
                              "(xlaprobe findings lists them)")
    close = difflib.get_close_matches(target, list(everything), n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    raise InvalidArgument(
        f"unknown target '{target}'{hint}: give a zoo model (xlaprobe models lists them), "
        "a case module path/to/case.py, path/to/file.py:fn, package.module:fn, or an artifact directory")


def resolve_finding(target: str, config: str, db: Path | str,
                    input_spec: str = "") -> tuple[Program, str, int | None]:
    """A finding id (looked up in the store at `db`) or any target `resolve` accepts, with its
    configuration: `config` when given, else the finding's, the artifact's or the case's.

    Returns:
        (the Program, the configuration spec, the finding id or None).

    Raises:
        InvalidArgument: no store, no such finding, its artifact is gone, an unresolvable target,
            or no configuration given or implied.
    """
    from xlaprobe import artifact

    if target.strip().isdigit():
        target = str(int(target.strip()))
        from xlaprobe.store import Store
        if not Path(db).exists():
            raise InvalidArgument(f"no store at {db} to look finding {target} up in; run xlaprobe "
                                  "check first or pass --db")
        with Store(db) as store:
            found = store.finding(int(target))
        if found is None:
            raise InvalidArgument(f"no finding {target} in {db}; xlaprobe findings lists them")
        rerun = f"xlaprobe check {found.name} --configs {found.config},reference"
        if not found.artifact:
            raise InvalidArgument(f"finding {target} has no artifact directory to rerun; rerun "
                                  f"{rerun}")
        if not artifact.is_artifact(found.artifact):
            raise InvalidArgument(f"the artifact of finding {target} is gone "
                                  f"({found.artifact}); rerun {rerun}")
        return resolve(found.artifact).program, config or found.config, found.id
    resolved = resolve(target, input_spec=input_spec)
    if not config and artifact.is_artifact(target):
        config = artifact.artifact_config(target)
    if not config:
        if not resolved.extra_configs:
            raise InvalidArgument(f"which configuration fails on {target}? pass one, e.g. "
                                  "xlaprobe localize TARGET xla:fastmath")
        config = resolved.extra_configs[0]
    return resolved.program, config, None


def resolve_faulty(target: str, config: str, db: Path | str, input_spec: str, verb: str
                   ) -> tuple[Program, Configuration, int | None]:
    """`resolve_finding` for a command that works on a failing configuration (``localize``,
    ``reduce``): the configuration parsed, and the reference (the oracle itself) refused.

    Args:
        target, config, db, input_spec: as for `resolve_finding`.
        verb: what the command does (``"localize"``), for the message.

    Returns:
        (the Program, the parsed configuration, the finding id or None).

    Raises:
        InvalidArgument: as `resolve_finding`, a malformed configuration, or ``reference``.
    """
    program, spec, finding_id = resolve_finding(target, config, db, input_spec)
    return program, Configuration.judged(spec, verb), finding_id
