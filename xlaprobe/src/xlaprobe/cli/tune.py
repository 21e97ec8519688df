"""``xlaprobe tune``: run a tuning search with progress on stderr; store and print the result."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from xlaprobe.backends import check_backend, make_pool
from xlaprobe.cli.app import app, display
from xlaprobe.cli.console import Steps, say, tell
from xlaprobe.cli.options import (DEFAULT_DB, AddressOption, DbOption, JsonOption, QuietOption)
from xlaprobe.errors import InvalidArgument
from xlaprobe.items import split_items

if TYPE_CHECKING:
    from xlaprobe.tune.search import TuneResult


@app.command("tune")
def tune_cli(
    target: Annotated[str, typer.Argument(help="zoo MODEL, FILE.py:FN, module:fn, case module or "
                                               "artifact directory")],
    budget: Annotated[int, typer.Option(min=1, max=100000, help="measurements to spend")] = 20,
    strategy: Annotated[str, typer.Option(help="model (cost-model guided), kernel (screened by "
                                               "the kernel corpus's model), tpe (Optuna) or "
                                               "random")] = "model",
    seed: Annotated[int, typer.Option(min=0, max=2**31 - 1, help="seed of the search and of "
                                                                 "random weights/inputs")] = 0,
    db: DbOption = DEFAULT_DB,
    name: Annotated[str, typer.Option(help="name of the stored result (default: TARGET)")] = "",
    only: Annotated[str, typer.Option(help="comma-separated dimensions to search, e.g. "
                                           "pass:algsimp,knob:layout (default: all)")] = "",
    max_rounds: Annotated[int, typer.Option(min=2, max=1000, help="timing rounds per "
                                                                 "measurement at most")] = 25,
    timeout: Annotated[float, typer.Option(help="per-measurement limit (s)", min=0.1,
                                           max=7 * 24 * 3600.0)] = 600.0,
    plot: Annotated[Path | None, typer.Option(help="write the search plot (.svg, .png or "
                                                   ".pdf)")] = None,
    inputs: Annotated[str, typer.Option(help="input spec for FILE.py:FN, e.g. "
                                             "'f32[8,128],i32[8]'")] = "",
    as_json: JsonOption = False,
    quiet: QuietOption = False,
    backend: Annotated[str, typer.Option(
        "--backend", help="where measurements run: local (a worker process) or ray (a Ray "
        "actor hosting one; pip install 'xlaprobe\\[ray]')")] = "local",
    address: AddressOption = None,
) -> None:
    """Tune XLA compiler options, pass toggles and program knobs for speed, numerics guarded.

    Exit 0 when a result (accepted or not) is stored; rejected candidates are findings
    (xlaprobe findings)."""
    display(quiet)
    raise typer.Exit(tune_command(target, budget=budget, strategy=strategy, seed=seed, db=db,
                                  name=name, only=only, max_rounds=max_rounds, timeout_s=timeout,
                                  json_output=as_json, plot=plot, input_spec=inputs,
                                  backend=backend, address=address))


@app.command("tune-corpus")
def tune_corpus(
    programs: Annotated[str, typer.Argument(help="comma-separated: zoo or third-party zoo "
                                                 "MODEL, fuzz:SEED or fuzz:FIRST-LAST, captured "
                                                 "artifact directory")],
    configs: Annotated[int, typer.Option(min=1, max=1000, help="configurations per program "
                                                               "(the default first)")] = 6,
    seed: Annotated[int, typer.Option(min=0, max=2**31 - 1, help="seed of the configurations "
                                                                 "and inputs")] = 0,
    rounds: Annotated[int, typer.Option(min=1, max=100, help="interleaved timing rounds "
                                                             "(min of them is kept)")] = 5,
    timeout: Annotated[float, typer.Option(help="per-entry limit (s)", min=1.0,
                                           max=7 * 24 * 3600.0)] = 900.0,
    max_kernels: Annotated[int, typer.Option(min=1, max=100000, help="distinct kernels timed "
                                                                    "per entry at most")] = 400,
    kernel_limit: Annotated[float, typer.Option(min=0.1, max=3600.0, help="per-kernel limit "
                                                "on compile and timing (s)")] = 30.0,
    db: DbOption = DEFAULT_DB,
    quiet: QuietOption = False,
) -> None:
    """Grow the tuner's kernel corpus: each kernel of each program, under sampled
    configurations, timed alone with its features (the kernel strategy's training data)."""
    display(quiet)
    raise typer.Exit(corpus_command(programs, configs=configs, seed=seed, db=db, rounds=rounds,
                                    timeout_s=timeout, max_kernels=max_kernels,
                                    kernel_limit_s=kernel_limit))


def _fmt_interval(speedup: float, low: float, high: float) -> str:
    return f"{speedup:.3f}x [{low:.3f}, {high:.3f}]"


def tune_command(target: str, *, budget: int, strategy: str, seed: int, db: Path | str,
                 name: str, only: str, max_rounds: int, timeout_s: float, json_output: bool,
                 plot: Path | None, input_spec: str = "", backend: str = "local",
                 address: str | None = None) -> int:
    """``xlaprobe tune TARGET``: search, print progress on stderr, store and print the result.

    Args:
        target: zoo model, FILE.py:FN, module:fn, case module or artifact directory.
        budget: measurements to spend.
        strategy: ``model``, ``tpe`` or ``random``.
        seed: of the strategy and of the model's weights/inputs.
        db: SQLite store.
        name: name of the stored result (default: the target).
        only: comma-separated search dimensions to keep ("" keeps all).
        max_rounds: timing rounds per measurement at most.
        timeout_s: limit on one measurement or reference run (s).
        json_output: print the result as JSON on stdout.
        plot: write the search plot here (SVG, PNG or PDF), or None.
        input_spec: input spec for ``FILE.py:FN`` targets (``f32[8,128],i32[8]``).
        backend: where measurements run: ``local`` or ``ray`` (one Ray actor, on whichever
            node Ray places it; `xlaprobe.backends.make_pool`).
        address: the Ray cluster (None: a new local one); ``ray`` only.

    Returns:
        Exit code 0 (a result was stored, accepted or not).

    Raises:
        InvalidArgument: bad arguments, an unknown target or dimension, a baseline that does not
            run or fails the check.
    """
    # The tuner imports jax, optuna and lightgbm: loaded when it runs, not for `xlaprobe --help`.
    from xlaprobe.store import Store
    from xlaprobe.tune.api import check_plot_path, plot_search
    from xlaprobe.tune.measure import Protocol
    from xlaprobe.tune.search import STRATEGIES, tune, tune_target
    from xlaprobe.tune.space import SearchSpace

    check_backend(backend, address)
    if strategy not in STRATEGIES:
        raise InvalidArgument(f"unknown strategy '{strategy}': use {', '.join(STRATEGIES)}")
    if plot is not None:
        check_plot_path(plot)
    dims = None
    if only.strip():
        dims = [d.strip() for d in only.split(",") if d.strip()]
        if not dims:
            raise InvalidArgument(f"--only '{only}' names no dimension")
    tuned_target = tune_target(target, seed=seed, input_spec=input_spec)
    space = SearchSpace.for_program(tuned_target.knobs, only=dims)
    protocol = Protocol(max_rounds=max_rounds, min_rounds=min(Protocol.min_rounds, max_rounds))

    def plural(n: int, word: str) -> str:
        return f"{n:,} {word}{'' if n == 1 else 's'}"

    # The store opens first: a --db that is not a store is the only line printed.
    with Store(db) as store:
        say(f"tuning {target} ({strategy}, {plural(budget, 'measurement')}, "
            f"{plural(len(space.dimensions), 'dimension')}, {plural(space.size, 'candidate')}; "
            "pass:NAME=True means the pass is disabled; a candidate that passed the numerics "
            "guard is faster, slower or same (its speedup interval against 1))")
        with make_pool(backend, 1, timeout_s, address=address) as pool, \
                Steps("tune", total=budget) as steps:
            result = tune(tuned_target, pool, store, strategy=strategy, budget=budget,
                          seed=seed, protocol=protocol, space=space, name=name or target,
                          timeout_s=timeout_s, on_event=_progress(steps))
    if json_output:
        print(json.dumps(result.to_json(), indent=2))
    if plot is not None:
        plot_search(result, plot)
        tell(f"plot: {plot}")
    # The verdict goes to stderr, so it shows with --json too and the JSON on stdout stays clean.
    _print_outcome(result, db)
    return 0


def pace(low: float, high: float) -> str:
    """A timed candidate's speed against the baseline from its speedup interval: ``faster``
    (all of it above 1), ``slower`` (all below 1), else ``same`` (within the noise).

    >>> pace(1.02, 1.10), pace(0.80, 0.95), pace(0.98, 1.03)
    ('faster', 'slower', 'same')
    """
    return "faster" if low > 1 else "slower" if high < 1 else "same"


def _progress(steps: Steps) -> Any:
    """The ``on_event`` callback of `xlaprobe.tune.search.tune`: one step per measurement and
    a note per other event (`Steps`: kept on a terminal, plain lines in logs)."""

    def on_event(event: str, payload: Any) -> None:
        if event == "note":
            steps.note(f"note: {payload}")
        elif event == "control":
            steps.note(f"A/A control (default vs default): "
                       f"{_fmt_interval(payload.speedup, payload.low, payload.high)}"
                       f", {payload.baseline_s * 1e3:.2f} ms per run, {payload.threads} CPUs, "
                       f"load {payload.load[0]:.1f}")
        elif event == "trial":
            m = payload.measurement
            timing = _fmt_interval(m.speedup, m.low, m.high) if m else "-"
            # "ok" only says the numerics passed the guard; whether it is faster is the interval.
            status = pace(m.low, m.high) if payload.status == "ok" and m else payload.status
            steps.step(f"{status:13} {timing:28} "
                       f"{payload.key or '(defaults)'}"
                       + (f"  ({payload.detail})" if payload.detail else "")
                       + f"  | best so far {payload.best:.3f}x", keep=True)
        elif event == "replicated":
            steps.note(f"confirmed in a fresh process (paired, {payload.rounds} rounds): "
                       f"{_fmt_interval(payload.speedup, payload.low, payload.high)}, A/A "
                       f"{_fmt_interval(payload.control, payload.control_low, payload.control_high)}"
                       f", load {payload.load[1]:.1f}")

    return on_event


def _print_outcome(result: TuneResult, db: Path | str) -> None:
    """The closing lines: what was accepted and how to apply it, or why nothing was."""
    from xlaprobe.tune.search import acceptance_threshold  # imports jax: not for --help

    rejected = len(result.findings)
    speedup, low, high = result.speedup
    if result.accepted:
        tell(f"accepted: {_fmt_interval(speedup, low, high)} (replicated), "
            f"{rejected} candidate(s) rejected by the guard")
        tell(f"compiler_options = {json.dumps(result.compiler_options)}")
        if result.xla_flags:
            tell(f"XLA_FLAGS='{result.xla_flags}'")
        if result.knobs:
            tell(f"knobs = {json.dumps(result.knobs)}")
        tell(f"apply: xlaprobe.tuned(fn, {result.name!r}, db={str(db)!r})")
    else:
        best = result.best
        replicated = result.replicated
        threshold = acceptance_threshold(replicated or result.control)
        why = ("no candidate beat the baseline" if best is None else
               "the best failed the guard when replicated" if replicated is not None
               and replicated.low > threshold else
               f"the best measured ({best.measurement.speedup:.3f}x) was not faster beyond noise "
               f"when re-measured in a fresh process (interval must clear {threshold:.3f}x)")
        tell(f"no verified speedup: {why}; keep XLA's defaults ({rejected} candidate(s) "
            f"rejected by the guard); stored as '{result.name}' in {db}")


def corpus_command(programs: str, *, configs: int, seed: int, db: Path | str, rounds: int,
                   timeout_s: float, max_kernels: int = 400, kernel_limit_s: float = 30.0) -> int:
    """``xlaprobe tune-corpus PROGRAMS``: grow the kernel corpus, one progress line per entry,
    then its size and rate.

    Args:
        programs: comma-separated zoo / third-party zoo models, ``fuzz:SEED`` or
            ``fuzz:FIRST-LAST``, captured artifact directories.
        configs: configurations per program (the default first).
        seed: of the configurations' sample and the kernels' inputs.
        db: SQLite store.
        rounds: interleaved timing rounds per entry.
        timeout_s: limit on one entry (s).
        max_kernels: distinct kernels timed per entry at most.
        kernel_limit_s: limit on one kernel's compile and timing (s).

    Returns:
        Exit code 0.

    Raises:
        InvalidArgument: an unknown program or malformed name, or `kernel_limit_s` above
            `timeout_s`.
        CorruptArtifact: `db` is not an xlaprobe store (before anything is printed).
    """
    # The corpus, store and workers import jax: loaded when it runs, not for `xlaprobe --help`.
    from xlaprobe.store import Store
    from xlaprobe.tune.corpus import corpus_programs

    names = split_items(programs, "PROGRAMS")
    if not names:
        raise InvalidArgument("name at least one corpus program (zoo model, fuzz:SEED, ...)")
    if kernel_limit_s > timeout_s:
        raise InvalidArgument(f"--kernel-limit {kernel_limit_s:g} s is above --timeout "
                              f"{timeout_s:g} s, the limit on a whole entry (kernels stop being "
                              f"timed once half of it is spent): lower --kernel-limit or raise "
                              f"--timeout")
    items = corpus_programs(names, seed=seed)
    started, found, timed = time.perf_counter(), 0, 0
    load = os.getloadavg()[0]
    with Store(db) as store:  # first: a --db that is not a store is the only line printed
        say(f"kernel corpus: {len(items)} programs x {configs} configurations into {db} "
            f"(load {load:.1f})")
        found, timed = _grow_corpus(items, store, configs=configs, seed=seed, rounds=rounds,
                                    timeout_s=timeout_s, max_kernels=max_kernels,
                                    kernel_limit_s=kernel_limit_s)
        total = store.count("kernels")
    minutes = (time.perf_counter() - started) / 60
    tell(f"added {found} kernels ({timed} timed) in {minutes:.1f} min: "
         f"{found / max(minutes, 1e-9):.0f} kernels/min at load {os.getloadavg()[0]:.1f} "
         f"(started at {load:.1f}); the corpus holds {total} kernels")
    return 0


def _grow_corpus(items: list[Any], store: Any, *, configs: int, seed: int, rounds: int,
                 timeout_s: float, max_kernels: int, kernel_limit_s: float) -> tuple[int, int]:
    """Run `xlaprobe.tune.corpus.grow` into `store` with one progress line per entry: (kernels
    found, kernels timed)."""
    # the corpus imports jax and the models: not for --help
    from xlaprobe.tune.corpus import grow
    from xlaprobe.workers import WorkerPool

    found = timed = 0
    with WorkerPool(size=1, timeout_s=timeout_s) as pool, \
            Steps("tune-corpus", total=len(items) * configs) as steps:
        for event in grow(items, pool, store, configs=configs, seed=seed, rounds=rounds,
                          timeout_s=timeout_s, max_kernels=max_kernels,
                          kernel_limit_s=kernel_limit_s):
            found, timed = found + event.kernels, timed + event.timed
            untimed = "".join(f"; {n} untimed: {why}" for why, n in event.untimed.items())
            what = (f"{event.kernels} kernels ({event.timed} timed{untimed}), program "
                    f"{event.program_s * 1e3:.3f} ms" if event.program_s is not None
                    else f"failed: {event.error}")
            steps.step(f"{event.program} [{event.source}] {event.config or '(defaults)'}: "
                       f"{what}, {event.seconds:.0f} s, load {event.load:.1f}", keep=True)
    return found, timed
