"""The Python API: ``check``, ``localize``, ``reduce`` and ``bisect`` as functions.

Each mirrors its command (``xlaprobe check`` ...): it takes what the command takes (a zoo model,
``FILE.py:FN``, a case module, an artifact directory, a finding id) or a JAX function with its
arguments, runs the same code, stores its result in the same store (``db=None`` stores nothing),
and returns the typed record the command prints. Errors are the command's: `InvalidArgument` for
bad input, `NotReproducible` when the configuration does not fail.

    >>> import jax.numpy as jnp, numpy as np, xlaprobe
    >>> result = xlaprobe.check(jnp.tanh, np.linspace(-3, 3, 64, dtype=np.float32), db=None)
    >>> result.ok
    True
"""

from __future__ import annotations

import dataclasses
import io
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from xlaprobe import artifact
from xlaprobe.checking import (DEFAULT_CONFIGS, CheckResult, Finding, check_program,
                               validate_for)
from xlaprobe.configs.registry import Configuration, parse_configs
from xlaprobe.errors import InvalidArgument, XlaprobeError
from xlaprobe.finding_artifacts import save_finding_artifacts
from xlaprobe.freedoms import parse_accept
from xlaprobe.localization.api import METHODS
from xlaprobe.localization.api import localize as run_localize
from xlaprobe.localization.reduce import MAX_TESTS, write_outputs
from xlaprobe.localization.reduce import reduce as run_reduce
from xlaprobe.oracle import Verdict
from xlaprobe.program import Program, Provenance
from xlaprobe.releases.kind import release_options
from xlaprobe.releases.program import bisect_program, releases_to_bisect
from xlaprobe.sources.targets import resolve, resolve_finding
from xlaprobe.store import DEFAULT_DB, Store
from xlaprobe.verdicts import print_result
from xlaprobe.workers import WorkerPool

#: What the functions take as a program: a JAX function (with its arguments), a target string as
#: the command line takes it, a finding id in the store, a `Program`, or a `Checked` result.
Target = Callable[..., Any] | str | int | Program


@dataclasses.dataclass(frozen=True)
class Checked:
    """The result of `check`: the `CheckResult` and where its findings were stored.

    Printing it (``print``, rich, a pytest failure message) shows the verdict table the command
    prints, with each finding's id and replay command.

    Attributes:
        result: the check itself (outcomes, per-output verdicts, findings).
        artifacts: configuration spec -> artifact directory of its finding (empty without a store).
        ids: configuration spec -> the finding's id in the store (what ``localize``, ``reduce``,
            ``bisect`` and ``xlaprobe findings`` take).
        db: the store the check was recorded in, or None.
    """

    result: CheckResult
    artifacts: Mapping[str, str] = dataclasses.field(default_factory=dict)
    ids: Mapping[str, int] = dataclasses.field(default_factory=dict)
    db: Path | None = None

    @property
    def ok(self) -> bool:
        """True when no configuration has a finding (see `incomplete` for what could not run)."""
        return self.result.ok

    @property
    def findings(self) -> tuple[Finding, ...]:
        """The configurations with a finding, in configuration order."""
        return self.result.findings

    @property
    def verdicts(self) -> dict[str, tuple[Verdict, ...]]:
        """Configuration spec -> one `Verdict` per output leaf (max abs/rel error, ULPs, kind)."""
        return dict(zip(self.result.configs, self.result.verdicts))

    @property
    def incomplete(self) -> dict[str, str]:
        """Configurations xlaprobe could not run or judge, with why (empty: complete)."""
        return self.result.incomplete

    @property
    def program(self) -> Program:
        """The checked program."""
        return self.result.program

    def table(self, width: int = 1000) -> str:
        """The verdict table as plain text (no colour codes), at most `width` columns: names,
        paths and configurations whole (the default fits any table)."""
        buffer = io.StringIO()
        self._render(Console(file=buffer, width=width, color_system=None, force_terminal=False))
        return buffer.getvalue()

    def _render(self, console: Any) -> None:
        print_result(self.result, dict(self.artifacts), False, dict(self.ids),
                     self.db or DEFAULT_DB, console=console)

    def __str__(self) -> str:
        return self.table()

    def __rich_console__(self, console: Any, options: Any) -> Iterator[Any]:
        yield Text.from_ansi(self.table(width=options.max_width))


def _label(fn: Callable[..., Any]) -> str:
    module = getattr(fn, "__module__", None) or "python"
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__
    return f"{module}:{name}"


def program_of(target: Target | Checked, args: tuple[Any, ...] = (), *, name: str | None = None,
               seed: int = 0, inputs: str = "", db: str | Path | None = DEFAULT_DB
               ) -> tuple[Program, tuple[str, ...], int | None]:
    """Resolve what a user passed to the program it means.

    Args:
        target: a JAX function (called as ``target(*args)``), a target string (zoo model,
            ``FILE.py:FN``, ``package.module:fn``, case module, artifact directory), a finding id
            (looked up in `db`), a `Program`, or a `Checked` result.
        args: the function's arguments (pytrees of arrays or scalars); only with a function.
        name: the program's name for a function (default ``module:qualname``).
        seed: seed of random weights and inputs of a zoo model or an ``inputs`` spec.
        inputs: input spec of a ``FILE.py:FN`` target, e.g. ``"f32[8,128],i32[8]"``.
        db: the store a finding id is looked up in.

    Returns:
        (the program, the configurations the target itself names (a case's FAULTY_CONFIG, a
        finding's configuration), the finding id or None).

    Raises:
        InvalidArgument: an unknown target, arguments given with a target that holds its own,
            a function that does not trace, or no store for a finding id.
    """
    if isinstance(target, Checked):
        return target.program, tuple(f.config for f in target.findings), None
    if args and not callable(target):
        raise InvalidArgument(f"{target!r} holds its own inputs: pass arguments only with a "
                              "function")
    if isinstance(target, Program):
        return target, (), None
    if isinstance(target, bool) or (not isinstance(target, (int, str)) and not callable(target)):
        raise InvalidArgument(f"cannot check a {type(target).__name__}: pass a JAX function and "
                              "its arguments, a target string or a finding id")
    if isinstance(target, int) or (isinstance(target, str) and target.strip().isdigit()):
        if db is None:
            raise InvalidArgument(f"finding {target} is looked up in a store: pass db=")
        program, config, finding_id = resolve_finding(str(target), "", db)
        return program, (config,), finding_id
    if isinstance(target, str):
        resolved = resolve(target, seed=seed, input_spec=inputs)
        named = resolved.extra_configs
        if not named and artifact.is_artifact(target) and artifact.artifact_config(target):
            named = (artifact.artifact_config(target),)
        return resolved.program, named, None
    label = name or _label(target)
    return Program.from_function(target, args, Provenance("python", label)), (), None


def validated_store(db: Any) -> Path | None:
    """`db` as a path, the store opened once (created if missing) so that a bad one fails
    before minutes of runs, not after; None stays None.

    Raises:
        InvalidArgument: not a path, a directory, or not writable.
        CorruptArtifact: not an xlaprobe store.
    """
    if db is None:
        return None
    if not isinstance(db, (str, Path)) or not str(db).strip():
        raise InvalidArgument(f"db must be a file path or None, not {db!r}")
    Store(db).close()
    return Path(db)


def _checked_options(configs: Any, jobs: Any, timeout_s: Any) -> None:
    """Refuse option values of the wrong type before any work (one line, not a TypeError)."""
    if not isinstance(configs, str):
        raise InvalidArgument(f"configs must be a comma-separated string such as "
                              f"'xla,xla:O0', not {configs!r}")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise InvalidArgument(f"jobs must be a whole number of at least 1, not {jobs!r}")
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or \
            not timeout_s > 0:
        raise InvalidArgument(f"timeout_s must be a positive number of seconds, not "
                              f"{timeout_s!r}")


def check_out_dir(out: Path) -> None:
    """Refuse an output directory for a reduction before it runs: a file, one that cannot be
    made, or a non-empty one that holds no earlier reduction (its ``repro.py`` would be
    replaced). Nothing is created here (the reduction's writer makes the directory), so a
    reduction refused later leaves no empty directory behind.

    Raises:
        InvalidArgument: as above.
    """
    if out.exists() and not out.is_dir():
        raise InvalidArgument(f"--out {out} is a file; give a directory")
    if out.is_dir() and any(out.iterdir()) and not (out / "reduction.json").exists():
        raise InvalidArgument(f"--out {out} is not empty and holds no earlier reduction: its "
                              "files (a repro.py) would be replaced; give a new directory")
    if not out.exists():
        ancestor = next(p for p in out.absolute().parents if p.exists())
        if not ancestor.is_dir() or not os.access(ancestor, os.W_OK | os.X_OK):
            raise InvalidArgument(f"cannot create --out {out}: {ancestor} is not a folder this "
                                  "user can write in")


@contextmanager
def _pool(pool: Any, jobs: int, timeout_s: float) -> Iterator[Any]:
    # A caller's pool (the pytest plugin's, shared by a session) outlives the call.
    if pool is not None:
        yield pool
        return
    with WorkerPool(size=jobs, timeout_s=timeout_s) as made:
        yield made


def check(target: Target, *args: Any, configs: str = DEFAULT_CONFIGS,
          db: str | Path | None = DEFAULT_DB, jobs: int = 1, timeout_s: float = 600.0,
          name: str | None = None, seed: int = 0, inputs: str = "", pool: Any = None,
          on_outcome: Callable[[Any], None] | None = None,
          accept: str | Sequence[str] | None = None) -> Checked:
    """Differential check of a program, as ``xlaprobe check``: run each configuration in an
    isolated worker and judge every output against the float64 reference (always added).

    Args:
        target: a JAX function (with `args`), a target string, or a finding id (see `program_of`).
        *args: the function's arguments: pytrees of arrays or Python scalars, any dtype.
        configs: comma-separated configuration specs (``xlaprobe configs`` lists the kinds).
        db: the SQLite store the check and its findings' artifacts are recorded in (artifacts
            go to ``<db dir>/artifacts``); None records nothing and writes no artifact.
        jobs: worker processes.
        timeout_s: per-configuration limit (s): past it a run is a ``timeout`` outcome.
        name: the program's name in tables and the store (default ``module:qualname``).
        seed: seed of random weights and inputs (zoo models, `inputs` specs).
        inputs: input spec of a ``FILE.py:FN`` target.
        pool: an open `xlaprobe.workers.WorkerPool` to run in (None: one for this call).
        on_outcome: called with each configuration's `Outcome` as it arrives.
        accept: freedoms XLA may take that count as ok, with their label (``"ftz,fma"``, a
            list, ``"all"`` or ``"none"``; `xlaprobe.freedoms`); None: ``ftz`` only.

    Returns:
        The `Checked` result (``.ok``, ``.findings``, ``.verdicts``; prints as the table).

    Raises:
        InvalidArgument: a bad target, configuration list or store; a function that does not
            trace with `args`.
    """
    _checked_options(configs, jobs, timeout_s)
    accepted = parse_accept(accept)
    db = validated_store(db)
    program, named, _ = program_of(target, args, name=name, seed=seed, inputs=inputs, db=db)
    return run_check(program, with_oracle(configs, named), db=db, jobs=jobs,
                     timeout_s=timeout_s, pool=pool, on_outcome=on_outcome, accept=accepted)


def with_oracle(configs: str, named: tuple[str, ...] = ()) -> list[Any]:
    """The configurations a check runs: `configs` parsed, then those the target names (a case's
    faulty configuration, a finding's) and the float64 ``reference`` added when missing.

    Returns:
        `xlaprobe.configs.registry.Configuration` objects in order.

    Raises:
        InvalidArgument: an unknown or malformed configuration spec.
    """
    parsed = parse_configs(configs)
    specs = [str(c) for c in parsed]
    # The float64 reference is the oracle: without it the first configuration would be the
    # baseline, and configurations wrong alike would pass.
    for extra in (*named, "reference"):
        if extra not in specs:
            parsed.extend(parse_configs(extra))
            specs.append(extra)
    return parsed


def run_check(program: Program, configs: list[Any], *, db: Path | None, jobs: int = 1,
              timeout_s: float = 600.0, pool: Any = None,
              on_outcome: Callable[[Any], None] | None = None,
              accept: frozenset[str] | None = None) -> Checked:
    """Run `configs` on `program` in isolated workers, judge, and record the check in `db` with
    its findings' artifacts (``<db dir>/artifacts``): what ``xlaprobe check`` and `check` share.

    Args:
        program: the program with its inputs.
        configs: parsed configurations (see `with_oracle`).
        db: a validated store path (see `validated_store`), or None to record nothing.
        jobs, timeout_s, pool, on_outcome: as in `check`.
        accept: the freedoms that count as ok (`xlaprobe.freedoms.parse_accept`; None: its
            default).

    Returns:
        The `Checked` result, with finding ids and artifacts when recorded.

    Raises:
        InvalidArgument: a configuration cannot run `program` (nothing is stored then).
        CorruptArtifact: `db` is not an xlaprobe store.
    """
    validate_for(program, configs)  # before the store: a refused configuration leaves no file
    store = Store(db) if db is not None else None  # a bad store fails before minutes of runs
    try:
        with _pool(pool, jobs, timeout_s) as running:
            result = check_program(program, configs, running, on_outcome=on_outcome,
                                   accept=accept)
        if store is None:
            return Checked(result)
        artifacts = save_finding_artifacts(result, Path(db).parent / "artifacts")
        store.record_check(result, artifacts)
        ids = {f.config: stored.id for f in result.findings
               if (stored := store.finding_of(program.fingerprint, f.config)) is not None}
        return Checked(result, artifacts, ids, Path(db))
    finally:
        if store is not None:
            store.close()


def _faulty(target: Target | Checked, args: tuple[Any, ...], config: str | None, verb: str,
            **where: Any) -> tuple[Program, Any, int | None, CheckResult | None]:
    """(program, parsed faulty configuration, finding id, a check to reuse) for localize/reduce."""
    program, named, finding_id = program_of(target, args, **where)
    spec = config or (named[0] if named else "")
    if not spec and isinstance(target, Checked):
        raise InvalidArgument(f"this check has no finding to {verb}; pass config= to "
                              f"{verb} a configuration anyway")
    if not spec:
        raise InvalidArgument(f"which configuration fails? pass config=, e.g. "
                              f"xlaprobe.{verb}(fn, x, config='xla:fastmath')")
    parsed = Configuration.judged(spec, verb)
    reused = None
    if isinstance(target, Checked) and str(parsed) in target.result.configs \
            and "reference" in target.result.configs:
        reused = target.result
    if isinstance(target, Checked) and finding_id is None:
        finding_id = target.ids.get(str(parsed))
    return program, parsed, finding_id, reused


def localize(target: Target | Checked, *args: Any, config: str | None = None,
             db: str | Path | None = DEFAULT_DB, jobs: int = 1, timeout_s: float = 600.0,
             method: str = "auto", name: str | None = None, seed: int = 0, inputs: str = "",
             pool: Any = None, on_step: Callable[[Any], None] | None = None) -> Any:
    """Localize a finding, as ``xlaprobe localize``: the failing outputs, the first failing jaxpr
    equation, its fused kernels, the HLO instruction inside the kernel and the compiler pass.

    Args:
        target: a JAX function (with `args`), a target string, a finding id, or the `Checked`
            result of `check` (its check is reused and its first finding's configuration taken).
        *args: the function's arguments.
        config: the faulty configuration (default: the finding's, the case's or the result's).
        db: the store the localization is recorded in (None: not recorded).
        jobs, timeout_s, name, seed, inputs, pool: as for `check`.
        method: ``auto``, ``cuts`` or ``segments`` (`xlaprobe.localization.api.localize`).
        on_step: called with each bisection step as it completes.

    Returns:
        The `xlaprobe.localization.api.Localization` (``.located``, ``.equation``, ``.op``,
        ``.blame``; ``to_json()``).

    Raises:
        InvalidArgument: a bad target, configuration, method or store.
        NotReproducible: the configuration gives no finding on the program.
    """
    if method not in METHODS:
        raise InvalidArgument(f"unknown localization method '{method}': use {', '.join(METHODS)}")
    _checked_options("", jobs, timeout_s)
    db = validated_store(db)
    program, parsed, finding_id, reused = _faulty(target, args, config, "localize", name=name,
                                                  seed=seed, inputs=inputs, db=db)
    with _pool(pool, jobs, timeout_s) as running:
        loc = run_localize(program, parsed, running, check=reused, method=method, on_step=on_step)
    if db is not None:
        store_localization(Path(db), program, loc, finding_id)
    return loc


@dataclasses.dataclass(frozen=True)
class Reduced:
    """The result of `reduce`.

    Attributes:
        reduction: the `xlaprobe.localization.reduce.Reduction` (equations and input elements before
            and after, tests, cycles, the reduced program).
        written: the `xlaprobe.localization.reduce.Written` record: the directory, ``repro.py`` and
            whether running it showed the fault (``repro_exit == 1``).
    """

    reduction: Any
    written: Any

    @property
    def repro(self) -> Path:
        """The standalone reproducer (``python repro.py`` exits 1 when it shows the fault)."""
        return Path(self.written.repro)

    @property
    def reproduces(self) -> bool:
        """Did ``repro.py`` show the fault when it was written (and the reduction not flaky)?"""
        return self.written.repro_exit == 1 and not self.reduction.flaky

    def lines(self, duration: Callable[[float], str] = lambda s: f"{s:.1f} s") -> list[str]:
        """What ``xlaprobe reduce`` prints: sizes before and after, notes, the failing kernel
        and the reproducer with whether it shows the fault; `duration` formats seconds."""
        r, w = self.reduction, self.written
        verdict = {1: "shows the fault", None: "not run"}.get(w.repro_exit, f"exit {w.repro_exit}")
        return [f"reduced {r.equations_before} -> {r.equations_after} equations "
                f"({', '.join(r.primitives)}); inputs {r.input_elements_before} -> "
                f"{r.input_elements_after} elements; {r.tests} tests, {r.cycles} cycles, "
                f"{duration(r.seconds)}" + (", FLAKY" if r.flaky else ""),
                *(f"note: {note}" for note in r.notes + w.notes),
                f"kernel:  {', '.join(w.kernels) or '(none named)'} -> "
                f"{Path(w.directory) / 'fusion.hlo'}",
                f"repro:   python {w.repro}  ({w.repro_lines} lines, {w.repro_form}; {verdict})"]

    def __str__(self) -> str:
        return "\n".join(self.lines())


def reduce(target: Target | Checked, *args: Any, config: str | None = None,
           out: str | Path | None = None, db: str | Path | None = DEFAULT_DB, jobs: int = 1,
           timeout_s: float = 600.0, max_tests: int | None = None, name: str | None = None,
           seed: int = 0, inputs: str = "", pool: Any = None,
           on_pass: Callable[[Any, Program], None] | None = None) -> Reduced:
    """Reduce a finding to a small standalone reproducer, as ``xlaprobe reduce`` (delta
    debugging of equations, then input shapes and values, while the failure stays the same).

    Args:
        target, *args, config, db, jobs, timeout_s, name, seed, inputs, pool: as for `localize`.
        out: the directory for ``repro.py``, ``fusion.hlo`` and the reduced artifact (default
            ``<db dir>/reductions/<fingerprint>-<config>``; with ``db=None`` it is required).
        max_tests: interestingness test budget (None: the command's default).
        on_pass: called after each reduction pass with its counters and the current program.

    Returns:
        The `Reduced` record.

    Raises:
        InvalidArgument: a bad target, configuration, budget or output directory.
        NotReproducible: the configuration gives no finding on the program.
    """

    budget = MAX_TESTS if max_tests is None else max_tests
    if budget < 1:
        raise InvalidArgument(f"max_tests must be at least 1, not {budget}")
    if out is None and db is None:
        raise InvalidArgument("give out= (a directory for repro.py) when db=None")
    _checked_options("", jobs, timeout_s)
    db = validated_store(db)
    if out is not None:
        check_out_dir(Path(out))
    program, parsed, finding_id, reused = _faulty(target, args, config, "reduce", name=name,
                                                  seed=seed, inputs=inputs, db=db)
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in str(parsed))
    directory = Path(out) if out is not None else \
        Path(db).parent / "reductions" / f"{program.fingerprint}-{safe}"[:150]
    with _pool(pool, jobs, timeout_s) as running:
        reduction = run_reduce(program, parsed, running, check=reused, max_tests=budget,
                               on_pass=on_pass)
        written = write_outputs(reduction, directory, running)
    if db is not None:
        store_reduction(Path(db), program, reduction, written, finding_id)
    return Reduced(reduction, written)


def bisect(target: Target | Checked, *args: Any, config: str | None = None,
           releases: str | None = None, db: str | Path | None = DEFAULT_DB,
           timeout_s: float = 600.0, name: str | None = None, seed: int = 0, inputs: str = "",
           on_run: Callable[[Any], None] | None = None,
           log: Callable[[str], None] | None = None) -> Any:
    """Bisect jaxlib releases for where a finding starts (or stops) failing, as
    ``xlaprobe bisect``. Each release runs in its own environment (made on first use).

    Args:
        target, *args, config, db, timeout_s, name, seed, inputs: as for `localize`.
        releases: comma-separated versions or ranges (``"0.10.2,0.11.2"``); None: the made
            environments and the registry's defaults (`xlaprobe.releases.envs.default_releases`).
        on_run: called with each `ReleaseRun` as it completes.
        log: gets a line when a release environment has to be made.

    Returns:
        The `xlaprobe.releases.bisection.Bisection` (``last_good``, ``first_bad``,
        ``first_fixed``, every release run).

    Raises:
        InvalidArgument: a bad target, a non-XLA configuration, a bad release list or store.
        EnvironmentUnavailable: a release environment cannot be made.
    """

    _checked_options("", 1, timeout_s)
    db = validated_store(db)
    program, named, finding_id = program_of(target, args, name=name, seed=seed, inputs=inputs,
                                            db=db)
    spec = config or (named[0] if named else "")
    if not spec:
        raise InvalidArgument("which configuration fails? pass config=, e.g. "
                              "xlaprobe.bisect(fn, x, config='xla')")
    parsed = Configuration.parse(spec)
    release_options(parsed)  # a non-XLA configuration fails before any work
    versions, known_bad = releases_to_bisect(parsed, releases, log or (lambda text: None))
    if isinstance(target, Checked) and finding_id is None:
        finding_id = target.ids.get(str(parsed))
    store = Store(db) if db is not None else None
    try:
        with WorkerPool(size=1, timeout_s=timeout_s) as pool:
            result = bisect_program(program, parsed, versions, pool, known_bad=known_bad,
                                    target=program.provenance.name, on_run=on_run, log=log)
        if store is not None:
            store.record_bisection(program.fingerprint, finding_id, str(parsed), result.to_json())
        return result
    finally:
        if store is not None:
            store.close()


def store_localization(db: Path, program: Program, loc: Any, finding_id: int | None) -> None:
    """Record `loc` in the store; a localized finding's bug key becomes its failing operation
    (`xlaprobe.triage.localized_key`). A store that cannot be written is a warning on stderr
    (``--json`` output on stdout must stay parseable), never a lost localization."""
    try:
        with Store(db) as store:
            found = store.finding_of(program.fingerprint, loc.config, finding_id)
            finding_id = found.id if found is not None else None
            bug = loc.bug_key(program, found.alike if found is not None else ())
            store.record_localization(program.fingerprint, finding_id, loc.config, loc.to_json(),
                                      bug)
    except (OSError, XlaprobeError) as exc:
        print(f"warning: could not store the localization in {db}: {exc}", file=sys.stderr)


def store_reduction(db: Path, program: Program, reduction: Any, written: Any,
                    finding_id: int | None) -> None:
    """Record a reduction and where its reproducer is in the store (a store that cannot be
    written is a warning on stderr: the reproducer on disk is what counts)."""
    try:
        with Store(db) as store:
            found = store.finding_of(program.fingerprint, reduction.config, finding_id)
            finding_id = found.id if found is not None else None
            store.record_reduction(program.fingerprint, finding_id, reduction.config,
                                   reduction.to_json() | {"written": written.to_json()},
                                   written.directory)
    except (OSError, XlaprobeError) as exc:
        print(f"warning: could not store the reduction in {db}: {exc}", file=sys.stderr)
