"""Resolve a command-line target (zoo model, case module, FILE:FN, module:fn, artifact, fuzz:SEED)
to a Program."""

from __future__ import annotations

import dataclasses
import difflib
import enum
import re
from pathlib import Path

from xlaprobe import artifact
from xlaprobe.checking import validate_for
from xlaprobe.configs.registry import Configuration
from xlaprobe.errors import InvalidArgument
from xlaprobe.program import Program
from xlaprobe.releases.envs import installed_version
from xlaprobe.sources import models, user
from xlaprobe.store import Store


class TargetKind(enum.Enum):
    """What a command-line target names."""

    FINDING = "finding"      # a stored finding's id (commands that work on findings)
    ARTIFACT = "artifact"    # a directory holding a saved Program (metadata.json)
    FUNCTION = "function"    # path/to/file.py:fn or package.module:fn
    CASE = "case"            # a case module path/to/case.py (fn, inputs(), FAULTY_CONFIG, KIND)
    MODEL = "model"          # a zoo model name (our zoo or the third-party one)
    FUZZ = "fuzz"            # fuzz:SEED, the generator's program of that seed


@dataclasses.dataclass(frozen=True)
class TargetSpec:
    """A command-line target parsed once into what it names; `resolve` builds its Program.

    Attributes:
        kind: what the text names.
        text: the target, normalized (a finding id without sign or leading zeros, the rest
            stripped).
    """

    kind: TargetKind
    text: str

    @property
    def finding_id(self) -> int | None:
        """The finding id of a FINDING target, else None."""
        return int(self.text) if self.kind is TargetKind.FINDING else None

    def __str__(self) -> str:
        return self.text


def parse_target(target: str, *, findings: bool = False) -> TargetSpec:
    """Tell what `target` names, tried in this order: a finding id (only where `findings`), an
    artifact directory, ``fuzz:SEED``, ``X:FN`` (file or module), a case module path (``.py``), a
    zoo model.

    >>> parse_target(" 007 ", findings=True)
    TargetSpec(kind=<TargetKind.FINDING: 'finding'>, text='7')
    >>> parse_target("pkg.mod:step").kind
    <TargetKind.FUNCTION: 'function'>
    >>> parse_target("fuzz:0042")
    TargetSpec(kind=<TargetKind.FUZZ: 'fuzz'>, text='fuzz:42')

    Args:
        target: what the user typed.
        findings: whether a whole number means a stored finding (localize, reduce, bisect).

    Raises:
        InvalidArgument: empty, a directory that is not an artifact, a number where no finding
            is meant, or nothing matches (the message lists the accepted forms and a close zoo
            name).
    """
    text = target.strip()
    if not text:
        raise InvalidArgument("empty target: give a zoo model, path/to/case.py, FILE.py:FN, "
                              "module:fn or an artifact directory")
    if findings and text.isdigit():
        return TargetSpec(TargetKind.FINDING, str(int(text)))
    if artifact.is_artifact(target):
        return TargetSpec(TargetKind.ARTIFACT, target)
    if text.startswith(("fuzz:", "steer:")) and not Path(target).exists():
        return _fuzz_target(text)
    if ":" in target and not Path(target).exists():
        return TargetSpec(TargetKind.FUNCTION, text)
    if target.endswith(".py") or Path(target).exists():
        if Path(target).is_dir():
            raise InvalidArgument(f"{target} is a directory but not an artifact (no metadata.json)")
        return TargetSpec(TargetKind.CASE, target)
    everything = models.zoo()
    if text in everything:
        return TargetSpec(TargetKind.MODEL, text)
    if text.lstrip("-+").isdigit():  # "-3", "+2": meant as a finding id
        raise InvalidArgument(f"no finding {text}: finding ids are whole numbers from 1 "
                              "(xlaprobe findings lists them)")
    close = difflib.get_close_matches(target, list(everything), n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    raise InvalidArgument(
        f"unknown target '{target}'{hint}: give a zoo model (xlaprobe models lists them), "
        "a case module path/to/case.py, path/to/file.py:fn, package.module:fn, fuzz:SEED, or an "
        "artifact directory")


#: The largest generator seed (`xlaprobe fuzz --seed`'s bound; the store keeps seeds as SQLite
#: integers).
MAX_FUZZ_SEED = 2 ** 62


def _fuzz_target(text: str) -> TargetSpec:
    """``fuzz:SEED`` as a target; a steered program's name (``steer:N:...``) or a malformed
    seed is refused in one line (InvalidArgument)."""
    if text.startswith("steer:"):
        raise InvalidArgument(f"'{text}' names a steered program (a pattern, mutation or "
                              "special-value re-run), which no seed regenerates: check its "
                              "finding's artifact (xlaprobe findings ID) instead")
    fuzz = FUZZ_NAME.fullmatch(text)
    if fuzz is None or int(fuzz[1]) > MAX_FUZZ_SEED:
        raise InvalidArgument(f"bad fuzz target '{text}': give fuzz:SEED with a seed from 0 to "
                              f"{MAX_FUZZ_SEED}")
    return TargetSpec(TargetKind.FUZZ, f"fuzz:{int(fuzz[1])}")


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


def resolve(target: str | TargetSpec, *, seed: int = 0, input_spec: str = "") -> Target:
    """Build the Program `target` names (see `parse_target`; a finding id is not a target here:
    `resolve_finding` looks it up).

    Args:
        target: what the user typed, or its parse.
        seed: seed of random weights/inputs (models, input specs).
        input_spec: input spec for ``X:FN`` targets (see `xlaprobe.sources.user.parse_input_spec`).

    Raises:
        InvalidArgument: nothing matches (the message lists the zoo and the accepted forms), or
            `input_spec` given for a target that holds its own inputs.
    """
    spec = target if isinstance(target, TargetSpec) else parse_target(target)
    if input_spec and spec.kind is not TargetKind.FUNCTION:
        raise InvalidArgument(_NO_INPUTS[spec.kind].format(target=spec.text))
    match spec.kind:
        case TargetKind.ARTIFACT:
            return Target(artifact.load_artifact(spec.text))
        case TargetKind.FUNCTION:
            return Target(user.user_program(spec.text, input_spec=input_spec, seed=seed))
        case TargetKind.CASE:
            case = user.load_case(spec.text)
            # A bug the installed release fixed is shown under the newest release that has it.
            config = case.config_with_bug(installed_version())
            return Target(case.program, (config,) if config else (), case.kind)
        case TargetKind.MODEL:
            return Target(models.build_program(spec.text, seed=seed))
        case TargetKind.FUZZ:
            from xlaprobe.sources.generator import generate  # jax tracing only for this kind
            return Target(generate(int(spec.text.split(":")[1])))
    raise InvalidArgument(f"finding {spec.text} is not a program to check; give its artifact "
                          "directory (xlaprobe findings shows it)")


#: Why --inputs does not apply, per kind of target.
_NO_INPUTS = {
    TargetKind.ARTIFACT: "--inputs does not apply to artifact {target}: it holds its inputs",
    TargetKind.CASE: ("--inputs applies to FILE.py:FN targets; {target} is a case module with "
                      "its own inputs()"),
    TargetKind.MODEL: "--inputs does not apply to zoo model '{target}'",
    TargetKind.FINDING: "--inputs does not apply to finding {target}: its artifact holds its inputs",
    TargetKind.FUZZ: "--inputs does not apply to fuzz program {target}: its seed makes its inputs",
}

#: A fuzz program's name (``Provenance.name`` of `xlaprobe.sources.generator.generate`): its seed.
FUZZ_NAME = re.compile(r"fuzz:([0-9]+)")  # ASCII digits: \d also takes other scripts' digits


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
    spec = parse_target(target, findings=True)
    if spec.kind is TargetKind.FINDING:
        if not Path(db).exists():
            raise InvalidArgument(f"no store at {db} to look finding {spec} up in; run xlaprobe "
                                  "check first or pass --db")
        with Store(db) as store:
            found = store.finding(spec.finding_id)
        if found is None:
            raise InvalidArgument(f"no finding {spec} in {db}; xlaprobe findings lists them")
        rerun = _rerun_hint(found.name, found.config)
        if not found.artifact:
            raise InvalidArgument(f"finding {spec} has no artifact directory to rerun; {rerun}")
        if not artifact.is_artifact(found.artifact):
            raise InvalidArgument(f"the artifact of finding {spec} is gone "
                                  f"({found.artifact}); {rerun}")
        return resolve(found.artifact).program, config or found.config, found.id
    resolved = resolve(spec, input_spec=input_spec)
    if not config and spec.kind is TargetKind.ARTIFACT:
        config = artifact.artifact_config(spec.text)
    if not config:
        if not resolved.extra_configs:
            raise InvalidArgument(f"which configuration fails on {target}? pass one, e.g. "
                                  "xlaprobe localize TARGET xla:fastmath")
        config = resolved.extra_configs[0]
    return resolved.program, config, None


def _rerun_hint(name: str, config: str) -> str:
    """How to check the program named `name` again under `config`: ``rerun xlaprobe check ...``
    where the name is one (a fuzz program by its seed, a zoo model), else why there is no such
    command."""
    try:
        kind = parse_target(name).kind
    except InvalidArgument:
        kind = None
    if kind not in (TargetKind.FUZZ, TargetKind.MODEL):  # a steered mutation reads as FILE:FN
        return (f"{name} names no target to check again (check the case or function it came "
                "from; a steered mutation is made from its campaign's history)")
    return f"rerun xlaprobe check {name} --configs {config},reference"


def resolve_faulty(target: str, config: str, db: Path | str, input_spec: str, verb: str
                   ) -> tuple[Program, Configuration, int | None]:
    """`resolve_finding` for a command that works on a failing configuration (``localize``,
    ``reduce``): the configuration parsed and checked against the program (an ``spmd`` mesh
    that does not fit it is refused here, before the command prints or stores anything), and
    the reference (the oracle itself) refused.

    Args:
        target, config, db, input_spec: as for `resolve_finding`.
        verb: what the command does (``"localize"``), for the message.

    Returns:
        (the Program, the parsed configuration, the finding id or None).

    Raises:
        InvalidArgument: as `resolve_finding`, a malformed configuration, one that cannot run
            the program, or ``reference``.
    """
    program, spec, finding_id = resolve_finding(target, config, db, input_spec)
    parsed = Configuration.judged(spec, verb)
    validate_for(program, [parsed])
    return program, parsed, finding_id
