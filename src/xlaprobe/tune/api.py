"""``xlaprobe tune`` and `tuned`: run a tuning search from the command line, apply its stored
result to a function."""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from xlaprobe.errors import InvalidArgument
from xlaprobe.store import DEFAULT_DB, Store


def _fmt_interval(speedup: float, low: float, high: float) -> str:
    return f"{speedup:.3f}x [{low:.3f}, {high:.3f}]"


def plot_search(result: Any, path: Path) -> None:
    """Write the search's plot (best verified-so-far speedup and each measured speedup against
    measurements spent) as an SVG or PNG file (by suffix), with matplotlib.

    Raises:
        InvalidArgument: matplotlib is missing or the file cannot be written.
    """
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise InvalidArgument(f"--plot needs matplotlib ({exc}): pip install 'xlaprobe[plot]'") \
            from exc
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ok = [t for t in result.trials if t.measurement is not None]
    ax.scatter([t.index for t in ok], [t.measurement.speedup for t in ok], s=12,
               c=["tab:red" if t.status == "rejected" else "tab:gray" for t in ok],
               label="measured (red: rejected by the guard)")
    ax.step([0] + [t.index for t in result.trials], [1.0] + [t.best for t in result.trials],
            where="post", color="tab:blue", label="best so far")
    ax.axhline(1.0, color="black", lw=0.5)
    ax.set_xlabel("measurements")
    ax.set_ylabel("speedup over default XLA")
    ax.set_title(f"{result.name}: {result.strategy} search")
    ax.legend(fontsize=7)
    fig.tight_layout()
    try:
        fig.savefig(path)
    except (OSError, ValueError) as exc:
        raise InvalidArgument(f"cannot write the plot {path}: {exc}") from exc
    finally:
        plt.close(fig)


def tune_command(target: str, *, budget: int, strategy: str, seed: int, db: Path | str,
                 name: str, only: str, max_rounds: int, timeout_s: float, json_output: bool,
                 plot: Path | None) -> int:
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
        plot: write the search plot here (SVG or PNG), or None.

    Returns:
        Exit code 0 (a result was stored, accepted or not).

    Raises:
        InvalidArgument: bad arguments, an unknown target or dimension, a baseline that does not
            run or fails the check.
    """
    from xlaprobe.tune.measure import Protocol
    from xlaprobe.tune.search import STRATEGIES, acceptance_threshold, tune, tune_target
    from xlaprobe.tune.space import SearchSpace
    from xlaprobe.workers import WorkerPool

    if strategy not in STRATEGIES:
        raise InvalidArgument(f"unknown strategy '{strategy}': use {', '.join(STRATEGIES)}")
    err = Console(stderr=True, width=None if sys.stderr.isatty() else 160, highlight=False)

    def say(text: str) -> None:
        err.print(escape(text), soft_wrap=True)

    tuned_target = tune_target(target, seed=seed)
    dims = [d.strip() for d in only.split(",") if d.strip()] or None
    space = SearchSpace.for_program(tuned_target.knobs, only=dims)
    protocol = Protocol(max_rounds=max(max_rounds, Protocol.min_rounds),
                        min_rounds=min(Protocol.min_rounds, max_rounds))

    def on_event(event: str, payload: Any) -> None:
        if event == "note":
            say(f"note: {payload}")
        elif event == "control":
            say(f"A/A control (default vs default): {_fmt_interval(payload.speedup, payload.low, payload.high)}"
                f", {payload.baseline_s * 1e3:.2f} ms per run, {payload.threads} CPUs, load "
                f"{payload.load[0]:.1f}")
        elif event == "trial":
            m = payload.measurement
            timing = _fmt_interval(m.speedup, m.low, m.high) if m else "-"
            say(f"[{payload.index}/{budget}] {payload.status:13} {timing:28} best "
                f"{payload.best:.3f}x  {payload.key or '(defaults)'}"
                + (f"  ({payload.detail})" if payload.detail else ""))
        elif event == "replicated":
            say(f"replicated in a fresh process: "
                f"{_fmt_interval(payload.speedup, payload.low, payload.high)}")

    say(f"tuning {target} ({strategy}, {budget} measurements, {len(space.dimensions)} "
        f"dimensions, {space.size:,} candidates)")
    with WorkerPool(size=1, timeout_s=timeout_s) as pool, Store(db) as store:
        result = tune(tuned_target, pool, store, strategy=strategy, budget=budget, seed=seed,
                      protocol=protocol, space=space, name=name or target, timeout_s=timeout_s,
                      on_event=on_event)
    if plot is not None:
        plot_search(result, plot)
    if json_output:
        print(json.dumps(result.to_json(), indent=2))
        return 0
    rejected = len(result.findings)
    speedup, low, high = result.speedup
    if result.accepted:
        say(f"accepted: {_fmt_interval(speedup, low, high)} (replicated), "
            f"{rejected} candidate(s) rejected by the guard")
        say(f"compiler_options = {json.dumps(result.compiler_options)}")
        say(f"XLA_FLAGS='{result.xla_flags}'")
        if result.knobs:
            say(f"knobs = {json.dumps(result.knobs)}")
        say(f"apply: xlaprobe.tuned(fn, {result.name!r}, db={str(db)!r})")
    else:
        best = result.best
        why = ("no candidate beat the baseline" if best is None else
               f"the best ({best.measurement.speedup:.3f}x) did not replicate in a fresh process"
               if result.replicated is None
               or result.replicated.low <= acceptance_threshold(result.control) else
               "the best failed the guard when replicated")
        say(f"no verified speedup: {why}; keep XLA's defaults ({rejected} candidate(s) "
            "rejected by the guard)")
    return 0


def tuned(fn: Any, name: str, *, db: Path | str = DEFAULT_DB) -> Any:
    """Apply a stored tuning result to `fn`: its knobs, and its compiler options on every compile.

    Args:
        fn: the function that was tuned (e.g. the ``FILE.py:FN`` target's function, or a zoo
            model's step); knobs it does not declare as parameters are not passed.
        name: the tuning run's name (``xlaprobe tune --name``; default there: the target).
        db: the store the result is in.

    Returns:
        A callable with `fn`'s arguments that compiles once per input shapes/dtypes with the
        tuned ``compiler_options`` (attribute ``compiler_options``; ``knobs`` too) and runs.

    Raises:
        InvalidArgument: no finished tuning run of that name in `db`.
    """
    import inspect

    import jax

    if str(db) != ":memory:" and not Path(db).exists():
        raise InvalidArgument(f"no tuning database at {db}: run xlaprobe tune first")
    with Store(db) as store:
        result = store.tuning_result(name)
    if result is None:
        raise InvalidArgument(f"no tuning result named '{name}' in {db}: run xlaprobe tune "
                              f"--name {name} first")
    options = dict(result.get("compiler_options") or {})
    knobs = dict(result.get("knobs") or {})
    try:
        accepted = set(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        accepted = set()
    bound = functools.partial(fn, **{k: v for k, v in knobs.items() if k in accepted})
    jitted = jax.jit(bound)
    cache: dict[Any, Any] = {}

    @functools.wraps(fn)
    def run(*args: Any) -> Any:
        key = jax.tree_util.tree_structure(args), tuple(
            (getattr(x, "shape", ()), str(getattr(x, "dtype", type(x))))
            for x in jax.tree_util.tree_leaves(args))
        if key not in cache:
            cache[key] = jitted.lower(*args).compile(compiler_options=options)
        return cache[key](*args)

    run.compiler_options = options
    run.knobs = knobs
    return run
