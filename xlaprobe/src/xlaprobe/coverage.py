"""Optimization coverage: which XLA passes ran during one compile, which changed the module, and
which algebraic-simplifier rewrites fired, read from XLA's own verbose log.

With ``TF_CPP_MIN_LOG_LEVEL=0`` and ``TF_CPP_VMODULE=hlo_pass_pipeline=2`` (`log_env`), XLA logs,
before every pass of every pipeline, the pass name, the module's hash and its instruction count::

    I1203 07:33:23.292785 18288 hlo_pass_pipeline.cc:211]   HLO pass algsimp
    I1203 07:33:23.292802 18288 hlo_pass_pipeline.cc:215]   Module hash 1519346468424098451
    I1203 07:33:23.292809 18288 hlo_pass_pipeline.cc:217]   Number of instructions: 20

A pass changed the module when the hash logged before the next pass of the same module differs
(the last pass of a compile has no successor: its change is unknown and counted as none). A pass
that is itself a pipeline (``simplification``, run by its parent pipeline, then logging ``Running
HLO pass pipeline on module M: simplification``) is left out: its inner passes carry its changes.

Rewrite kinds: ``algebraic_simplifier=10`` makes the algebraic simplifier log ``trying transform
[RULE]`` before it checks each rule's conditions on an instruction, so a line says a rule was
tried, not that it fired. A handler returns at the first rule that fires, so the rule a visit of
one instruction stopped at either fired or ended the handler. A rule is counted as fired in a
compile when it ended a visit in an ``algsimp`` run that changed the module and never ended a visit
in an ``algsimp`` run of the same compile that changed nothing (where every visit fell through):
a conservative inference, not XLA's own record.

Worker processes (`xlaprobe.workers`) start with these settings (`worker_environment`) unless
``XLAPROBE_COVERAGE=0`` (``passes``: pass coverage without the simplifier's log); every task's log is its own (the worker empties it per task), so the
runs' coverages never mix.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import os
import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

#: Environment variable that turns coverage logging off in new worker processes when ``0``.
ENV_SWITCH = "XLAPROBE_COVERAGE"
#: The verbose-log modules and levels coverage reads (``XLAPROBE_COVERAGE=passes``: the first
#: only, no rewrite kinds; the simplifier's lines are most of the log).
VMODULE = "hlo_pass_pipeline=2,algebraic_simplifier=10"
PASSES_VMODULE = "hlo_pass_pipeline=2"
#: Configuration kinds whose runs compile one module with XLA in (or under) the worker.
COMPILING_KINDS = frozenset({"xla", "mutant", "jaxlib"})
#: The pass name the algebraic simplifier runs under.
ALGSIMP = "algsimp"
#: Bytes of a task's log parsed at most (a huge module's simplifier log is cut, not the passes').
MAX_LOG_BYTES = 64 << 20

_GLOG = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+ ([\w.]+):\d+\] ?(.*)$")
_RUNNING = re.compile(r"^Running HLO pass pipeline on module (\S+): (.*)$")
_PASS = re.compile(r"^\s*HLO pass (?!:)(.+?)\s*$")
_HASH = re.compile(r"^\s*Module hash (-?\d+)")
_COUNT = re.compile(r"^\s*Number of instructions: (\d+)")
_TRYING = re.compile(r"trying (?:to )?transform (?:\[(.*?)\]|(.*?)(?= %|$))")
_INSTRUCTION = re.compile(r"%([^\s=,()]+) = ")
#: Passes XLA numbers per instance across a process's compiles (one name for coverage).
_NUMBERED = re.compile(r"^(apply-xla-transforms)-\d+$")


def pass_name(name: str) -> str:
    """`name` without the per-process instance number some passes carry.

    >>> pass_name("apply-xla-transforms-104"), pass_name("float-normalization-bf16")
    ('apply-xla-transforms', 'float-normalization-bf16')
    """
    match = _NUMBERED.match(name)
    return match.group(1) if match else name


def enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether new workers log for coverage (``XLAPROBE_COVERAGE`` is not ``0``)."""
    return (os.environ if environ is None else environ).get(ENV_SWITCH, "1").strip() != "0"


def log_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables to set in a process before XLA starts for its log to carry coverage:
    ``TF_CPP_MIN_LOG_LEVEL=0`` and `VMODULE` (`PASSES_VMODULE` under
    ``XLAPROBE_COVERAGE=passes``) added to any ``TF_CPP_VMODULE`` already set.

    >>> log_env({"TF_CPP_VMODULE": "cpu_compiler=1"})["TF_CPP_VMODULE"]
    'cpu_compiler=1,hlo_pass_pipeline=2,algebraic_simplifier=10'
    """
    own = environ.get("TF_CPP_VMODULE", "").strip(",")
    mine = PASSES_VMODULE if environ.get(ENV_SWITCH, "").strip() == "passes" else VMODULE
    return {"TF_CPP_MIN_LOG_LEVEL": "0",
            "TF_CPP_VMODULE": ",".join(filter(None, (own, mine)))}


_ENV_LOCK = threading.Lock()


@contextlib.contextmanager
def worker_environment() -> Iterator[None]:
    """Inside: this process's environment carries `log_env` (when `enabled`), so that a process
    started here (a spawned worker) inherits it; restored on exit.

    XLA reads its log settings once, when jaxlib loads, and a spawned worker imports jax while it
    unpickles its target, before any of its own code runs: so the parent sets them at the start.
    """
    if not enabled():
        yield
        return
    with _ENV_LOCK:
        saved = {name: os.environ.get(name) for name in ("TF_CPP_MIN_LOG_LEVEL", "TF_CPP_VMODULE")}
        os.environ.update(log_env(os.environ))
        try:
            yield
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


@dataclasses.dataclass(frozen=True, slots=True)
class PassCoverage:
    """What one compile (or one log) did: pass -> how often it ran and how often it changed the
    module; algebraic-simplifier rule -> how many compiles it fired in (0 or 1 per compile).

    Attributes:
        ran: pass name -> runs (a pass runs several times in fixed-point pipelines).
        changed: pass name -> runs that changed the module (only passes with at least one).
        rewrites: ``"algsimp:[RULE]"`` -> 1 for each rule inferred fired (see module docstring).
    """

    ran: Mapping[str, int] = dataclasses.field(default_factory=dict)
    changed: Mapping[str, int] = dataclasses.field(default_factory=dict)
    rewrites: Mapping[str, int] = dataclasses.field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.ran)

    def to_json(self) -> dict[str, dict[str, int]]:
        """A JSON-ready dict (keys sorted)."""
        return {"ran": dict(sorted(self.ran.items())), "changed": dict(sorted(self.changed.items())),
                "rewrites": dict(sorted(self.rewrites.items()))}

    @classmethod
    def from_json(cls, data: Any) -> PassCoverage:
        """Inverse of `to_json`.

        Raises:
            ValueError: `data` is not a dict of name -> non-negative int dicts.
        """
        if not isinstance(data, dict):
            raise ValueError("pass coverage must be a JSON object")
        parts = []
        for key in ("ran", "changed", "rewrites"):
            part = data.get(key, {})
            if not isinstance(part, dict) or not all(
                    isinstance(k, str) and isinstance(v, int) and v >= 0 for k, v in part.items()):
                raise ValueError(f"pass coverage '{key}' must map names to counts")
            parts.append(dict(part))
        return cls(*parts)

    def dumps(self) -> str:
        """`to_json` as compact JSON text (what the store keeps)."""
        return json.dumps(self.to_json(), separators=(",", ":"))


@dataclasses.dataclass
class _Event:
    module: str
    name: str
    hash: str = ""
    instructions: int = -1
    wrapper: bool = False
    stops: list[str] = dataclasses.field(default_factory=list)
    visit: str = ""  # the instruction the simplifier is visiting
    rule: str = ""   # the last rule tried in that visit


def _messages(text: str) -> Iterable[tuple[str, str]]:
    """(source file, message) of every glog line of `text`."""
    for line in text.splitlines():
        match = _GLOG.match(line)
        if match:
            yield match.group(1), match.group(2)


def _end_visit(event: _Event) -> None:
    if event.rule:
        event.stops.append(event.rule)
    event.visit = event.rule = ""


def _trying(event: _Event, message: str) -> None:
    """Follow the simplifier's visits: a line naming another instruction starts a new visit."""
    match = _TRYING.search(message)
    if match is None:
        return
    rule = (match.group(1) if match.group(1) is not None else match.group(2)).strip()
    named = _INSTRUCTION.search(message, match.end())
    if named is not None and named.group(1) != event.visit:
        _end_visit(event)
        event.visit = named.group(1)
    event.rule = rule


def events(text: str) -> list[_Event]:
    """The pass events of a log, in order, with the simplifier's visit stops attached."""
    found: list[_Event] = []
    module = ""
    for source, message in _messages(text):
        if source.startswith("hlo_pass_pipeline"):
            if (match := _RUNNING.match(message)) is not None:
                module = match.group(1)
                if found and found[-1].name == match.group(2).strip() and not found[-1].hash == "":
                    found[-1].wrapper = True
            elif (match := _PASS.match(message)) is not None:
                if found:
                    _end_visit(found[-1])
                found.append(_Event(module, pass_name(match.group(1))))
            elif found and (match := _HASH.match(message)) is not None:
                found[-1].hash = match.group(1)
            elif found and (match := _COUNT.match(message)) is not None:
                found[-1].instructions = int(match.group(1))
        elif source.startswith("algebraic_simplifier") and found:
            _trying(found[-1], message)
    if found:
        _end_visit(found[-1])
    return found


def parse_log(text: str) -> PassCoverage:
    """The `PassCoverage` of one log (a worker task's stderr; see the module docstring).

    Args:
        text: the log text (glog lines; other lines are ignored).

    Returns:
        What ran and changed; empty when the log has no pass lines (coverage logging off, or a
        run that compiled nothing, e.g. a cached executable).
    """
    found = events(text)
    ran: collections.Counter[str] = collections.Counter()
    changed: collections.Counter[str] = collections.Counter()
    last: dict[str, _Event] = {}
    changed_events: set[int] = set()
    for event in found:
        previous = last.get(event.module)
        if previous is not None and previous.hash and event.hash and previous.hash != event.hash:
            changed_events.add(id(previous))
        last[event.module] = event
    for event in found:
        if event.wrapper:
            continue
        ran[event.name] += 1
        if id(event) in changed_events:
            changed[event.name] += 1
    return PassCoverage(dict(ran), dict(changed), _fired(found, changed_events))


def _fired(found: list[_Event], changed_events: set[int]) -> dict[str, int]:
    """Rules that ended a visit in a changing ``algsimp`` run and none in an unchanged one."""
    simplifier = [e for e in found if e.name == ALGSIMP and not e.wrapper]
    fell_through = {rule for e in simplifier if id(e) not in changed_events for rule in e.stops}
    stopped = {rule for e in simplifier if id(e) in changed_events for rule in e.stops}
    return {f"{ALGSIMP}:[{rule}]": 1 for rule in sorted(stopped - fell_through)}


def of_run(kind: str, log_path: str) -> PassCoverage | None:
    """The coverage of a worker's run of a configuration of `kind` whose log is at `log_path`:
    None for kinds that compile no module of the program with XLA (`COMPILING_KINDS`) and when
    coverage is off (`enabled`)."""
    return read_log(log_path) if kind in COMPILING_KINDS and enabled() else None


def read_log(path: str) -> PassCoverage:
    """`parse_log` of the first `MAX_LOG_BYTES` of the file at `path` (empty when unreadable)."""
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_LOG_BYTES)
    except OSError:
        return PassCoverage()
    return parse_log(data.decode("utf-8", "replace"))
