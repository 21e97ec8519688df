"""The configuration registry: spec strings <-> `Configuration` records, and what runs each kind.

Grammar of a spec (round-trips through `str` and `Configuration.parse`)::

    spec     := kind [":" variant | "==" version] ["[" option ("," option)* "]"]
    option   := name "=" value          (an XLA compiler option, e.g. xla_cpu_enable_fast_math=true)
    value    := item ("+" item)*        (list options: xla_disable_hlo_passes=algsimp+fusion)

Examples: ``xla``, ``xla:O0``, ``xla:fastmath``, ``xla[xla_cpu_enable_fast_math=true]``, ``eager``,
``reference``, ``jaxlib==0.5.3`` (the kinds in `VERSIONED_KINDS` take ``==VERSION`` instead of
``:VARIANT``). Kinds register themselves in `_KINDS` (the one registry DESIGN.md allows); a kind's
module is imported lazily, so parsing a spec never imports XLA-heavy code it does not need.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from xlaprobe.errors import InvalidArgument

_SPEC = re.compile(r"^(?P<kind>[a-z][a-z0-9_]*)(?:(?P<sep>:|==)(?P<variant>[A-Za-z0-9_.\-]+))?"
                   r"(?:\[(?P<options>[^\[\]]*)\])?$")
_OPTION_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
#: Kinds whose variant is a release version, written ``kind==VERSION``.
VERSIONED_KINDS = frozenset({"jaxlib"})


@dataclasses.dataclass(frozen=True, slots=True)
class Configuration:
    """A parsed configuration spec.

    Attributes:
        kind: registry key, e.g. ``"xla"``, ``"eager"``, ``"reference"``.
        variant: named preset of the kind (``"O0"``, ``"fastmath"``) or ``None``.
        options: XLA compiler options as sorted ``(name, value)`` string pairs.
    """

    kind: str
    variant: str | None = None
    options: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        sep = "==" if self.kind in VERSIONED_KINDS else ":"
        text = self.kind if self.variant is None else f"{self.kind}{sep}{self.variant}"
        if self.options:
            text += "[" + ",".join(f"{k}={v}" for k, v in self.options) + "]"
        return text

    @classmethod
    def parse(cls, spec: str) -> Configuration:
        """Parse and validate a spec string.

        >>> str(Configuration.parse("xla[xla_cpu_enable_fast_math=true]"))
        'xla[xla_cpu_enable_fast_math=true]'

        Raises:
            InvalidArgument: malformed spec, unknown kind or variant, malformed or unknown option.
        """
        text = spec.strip()
        match = _SPEC.match(text)
        if match is None:
            raise InvalidArgument(
                f"malformed configuration '{spec}': expected KIND[:VARIANT][[option=value,...]], "
                f"e.g. xla, xla:O0, xla[xla_cpu_enable_fast_math=true]; known kinds: {', '.join(kinds())}")
        options: list[tuple[str, str]] = []
        if match.group("options") is not None:
            for item in filter(None, (p.strip() for p in match.group("options").split(","))):
                name, sep, value = item.partition("=")
                name, value = name.strip(), value.strip()
                if not sep or not _OPTION_NAME.match(name) or not value:
                    raise InvalidArgument(
                        f"malformed option '{item}' in configuration '{spec}': expected name=value")
                options.append((name, value))
            if not options:
                raise InvalidArgument(f"empty option list in configuration '{spec}'")
        names = [n for n, _ in options]
        if len(set(names)) != len(names):
            raise InvalidArgument(f"an option is given twice in configuration '{spec}'")
        config = cls(match.group("kind"), match.group("variant"), tuple(sorted(options)))
        if match.group("sep") and (match.group("sep") == "==") != (config.kind in VERSIONED_KINDS):
            if config.kind in VERSIONED_KINDS:
                hint = f"write {config.kind}=={config.variant}"
            else:
                hint = (f"kind '{config.kind}' takes :VARIANT; another XLA release is "
                        f"jaxlib=={config.variant}[option=value,...]")
            raise InvalidArgument(f"malformed configuration '{spec}': {hint}")
        get_kind(config.kind).validate(config)
        return config

    @classmethod
    def judged(cls, spec: str | Configuration, verb: str) -> Configuration:
        """`parse` for a command that works on a failing configuration (``localize``,
        ``reduce``), which must be judged against the reference, not be it.

        Raises:
            InvalidArgument: as `parse`, or the spec is the ``reference`` (the oracle itself).
        """
        config = cls.parse(spec) if isinstance(spec, str) else spec
        if config.kind == "reference":
            raise InvalidArgument(f"the reference is the oracle; {verb} a configuration that is "
                                  "judged against it, e.g. xla or xla:fastmath")
        return config

    @property
    def compiler_options(self) -> dict[str, Any]:
        """The XLA compiler options a standalone reproducer compiles this configuration with
        (``{}`` for kinds that are no jit compile with options, e.g. ``eager``, ``mutant``)."""
        rule = getattr(get_kind(self.kind), "compiler_options", None)
        return rule(self) if rule is not None else {}

    @property
    def isolation_group(self) -> str:
        """Worker group this configuration must run in (kinds that change process state get their own)."""
        return get_kind(self.kind).isolation_group(self)


class ConfigKind(Protocol):
    """What a configuration kind provides. One object per kind, registered by name.

    A kind may also set ``interpreter = True`` (eager, the reference): it is xlaprobe's own
    interpreter, so an exception it raises that does not come from XLA is a tool error
    (`xlaprobe.workers.tool_error`), never a finding.
    """

    name: str
    description: str

    def validate(self, config: Configuration) -> None:
        """Raise `InvalidArgument` (one line, naming the fix) if `config` is not runnable."""

    def isolation_group(self, config: Configuration) -> str:
        """Name of the worker group to run in; ``"default"`` for kinds without process-global state."""

    def run(self, config: Configuration, jaxpr: Any, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Compile and run a canonical closed jaxpr on `inputs`; returns the flat outputs.

        Runs inside a worker process. Compiler errors propagate as exceptions (the worker turns
        them into a compile-error Outcome); crashes kill the worker (a crash Outcome).
        """


#: kind name -> module that defines ``KIND`` (imported on first use).
_KIND_MODULES: dict[str, str] = {
    "xla": "xlaprobe.configs.xla",
    "eager": "xlaprobe.configs.eager",
    "reference": "xlaprobe.configs.reference",
    "mutant": "xlaprobe.configs.mutants",
    "jaxlib": "xlaprobe.releases.kind",
    "spmd": "xlaprobe.configs.spmd",
}
_KINDS: dict[str, ConfigKind] = {}


def kinds() -> list[str]:
    """Names of all registered configuration kinds."""
    return sorted(_KIND_MODULES)


def get_kind(name: str) -> ConfigKind:
    """The `ConfigKind` registered as `name`.

    Raises:
        InvalidArgument: no such kind.
    """
    if name not in _KINDS:
        if name not in _KIND_MODULES:
            raise InvalidArgument(f"unknown configuration kind '{name}'; known kinds: {', '.join(kinds())}")
        _KINDS[name] = importlib.import_module(_KIND_MODULES[name]).KIND
    return _KINDS[name]


def parse_configs(text: str | Sequence[str]) -> list[Configuration]:
    """Parse a comma-separated list of specs (commas inside ``[...]`` belong to the options).

    >>> [str(c) for c in parse_configs("xla,xla[xla_cpu_enable_fast_math=true,xla_cpu_use_thunk_runtime=true],eager")]
    ['xla', 'xla[xla_cpu_enable_fast_math=true,xla_cpu_use_thunk_runtime=true]', 'eager']

    Raises:
        InvalidArgument: an empty list, unbalanced brackets, a bad spec, or a duplicate.
    """
    if not isinstance(text, str):
        text = ",".join(text)
    specs: list[str] = []
    depth, current = 0, ""
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise InvalidArgument(f"unbalanced ']' in configuration list '{text}'")
        if char == "," and depth == 0:
            specs.append(current)
            current = ""
        else:
            current += char
    if depth != 0:
        raise InvalidArgument(f"unbalanced '[' in configuration list '{text}'")
    specs.append(current)
    specs = [s.strip() for s in specs]
    if not any(specs):
        raise InvalidArgument("empty configuration list; e.g. --configs xla,xla:O0,eager,reference")
    if not all(specs):
        # 'xla,,eager' is a typo more often than a wish for two configurations
        raise InvalidArgument(f"an empty item in configuration list '{text}'")
    configs = [Configuration.parse(s) for s in specs]
    if len({str(c) for c in configs}) != len(configs):
        raise InvalidArgument(f"a configuration is listed twice in '{text}'")
    return configs
