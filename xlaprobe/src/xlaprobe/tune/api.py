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

from xlaprobe.errors import CorruptArtifact, InvalidArgument
from xlaprobe.store import DEFAULT_DB, Store


def _fmt_interval(speedup: float, low: float, high: float) -> str:
    return f"{speedup:.3f}x [{low:.3f}, {high:.3f}]"


PLOT_SUFFIXES = (".svg", ".png", ".pdf")


def check_plot_path(path: Path) -> None:
    """Fail early (before a search) on a plot path that cannot be written.

    Raises:
        InvalidArgument: an unsupported suffix, a directory, or a missing or unwritable parent.
    """
    import os

    if path.suffix.lower() not in PLOT_SUFFIXES:
        raise InvalidArgument(f"--plot {path}: use a file ending in {', '.join(PLOT_SUFFIXES)}")
    if path.is_dir():
        raise InvalidArgument(f"--plot {path} is a directory; give a file path")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir() or not os.access(parent, os.W_OK):
        raise InvalidArgument(f"--plot {path}: the directory {parent} does not exist or is not "
                              "writable")


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
        import matplotlib.ticker
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
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
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
                 plot: Path | None, input_spec: str = "") -> int:
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
            status = {"ok": "passed guard"}.get(payload.status, payload.status)
            say(f"[{payload.index}/{budget}] {status:13} {timing:28} "
                f"{payload.key or '(defaults)'}"
                + (f"  ({payload.detail})" if payload.detail else "")
                + f"  | best so far {payload.best:.3f}x")
        elif event == "replicated":
            say(f"replicated in a fresh process: "
                f"{_fmt_interval(payload.speedup, payload.low, payload.high)}")

    def plural(n: int, word: str) -> str:
        return f"{n:,} {word}{'' if n == 1 else 's'}"

    say(f"tuning {target} ({strategy}, {plural(budget, 'measurement')}, "
        f"{plural(len(space.dimensions), 'dimension')}, {plural(space.size, 'candidate')}; "
        "pass:NAME=True means the pass is disabled)")
    with WorkerPool(size=1, timeout_s=timeout_s) as pool, Store(db) as store:
        result = tune(tuned_target, pool, store, strategy=strategy, budget=budget, seed=seed,
                      protocol=protocol, space=space, name=name or target, timeout_s=timeout_s,
                      on_event=on_event)
    if json_output:
        print(json.dumps(result.to_json(), indent=2))
    if plot is not None:
        plot_search(result, plot)
        say(f"plot: {plot}")
    if json_output:
        return 0
    rejected = len(result.findings)
    speedup, low, high = result.speedup
    if result.accepted:
        say(f"accepted: {_fmt_interval(speedup, low, high)} (replicated), "
            f"{rejected} candidate(s) rejected by the guard")
        say(f"compiler_options = {json.dumps(result.compiler_options)}")
        if result.xla_flags:
            say(f"XLA_FLAGS='{result.xla_flags}'")
        if result.knobs:
            say(f"knobs = {json.dumps(result.knobs)}")
        say(f"apply: xlaprobe.tuned(fn, {result.name!r}, db={str(db)!r})")
    else:
        best = result.best
        threshold = acceptance_threshold(result.control)
        replicated = result.replicated
        why = ("no candidate beat the baseline" if best is None else
               "the best failed the guard when replicated" if replicated is not None
               and replicated.low > threshold else
               f"the best measured ({best.measurement.speedup:.3f}x) was not faster beyond noise "
               f"when re-measured in a fresh process (interval must clear {threshold:.3f}x)")
        say(f"no verified speedup: {why}; keep XLA's defaults ({rejected} candidate(s) "
            f"rejected by the guard); stored as '{result.name}' in {db}")
    return 0


def tuned(fn: Any, name: str, *, db: Path | str = DEFAULT_DB) -> Any:
    """Apply a stored tuning result to `fn`: its knobs, and its compiler options on every compile.

    Args:
        fn: the function that was tuned (e.g. the ``FILE.py:FN`` target's function, or a zoo
            model's step). Its declared knobs (`xlaprobe.knob`) take the result's values, or
            their defaults where the result has none.
        name: the tuning run's name (``xlaprobe tune --name``; default there: the target as
            typed). The newest run of that name that accepted a speedup is used, else the newest.
        db: the store the result is in (opened read-only).

    Returns:
        A callable with `fn`'s arguments (positional and keyword) that compiles once per
        argument structure, shapes and dtypes with the tuned ``compiler_options`` (attribute
        ``compiler_options``; ``knobs`` too) and runs.

    Raises:
        InvalidArgument: no database at `db`, no finished tuning run of that name in it (the
            message lists the names there), or the result sets knobs `fn` does not declare.
        CorruptArtifact: `db` is not a readable xlaprobe database.
    """
    import jax

    from xlaprobe.tune.knobs import declared_knobs, resolve_knobs

    if not callable(fn):
        raise InvalidArgument(f"tuned() needs the function that was tuned, not {fn!r}: "
                              "xlaprobe.tuned(step, 'my_model.py:step')")
    with Store(db, readonly=True) as store:
        result = store.tuning_result(name)
        names = store.tuning_names() if result is None else []
    if result is None:
        known = f"; known: {', '.join(repr(n) for n in names[:10])}" if names else ""
        raise InvalidArgument(f"no tuning result named '{name}' in {db}{known}")
    if not isinstance(result, dict) or not isinstance(result.get("compiler_options") or {}, dict) \
            or not isinstance(result.get("knobs") or {}, dict):
        raise CorruptArtifact(f"tuning result '{name}' in {db} is malformed; rerun xlaprobe tune")
    options = dict(result.get("compiler_options") or {})
    stored = dict(result.get("knobs") or {})
    declared = declared_knobs(fn)
    missing = sorted(set(stored) - set(declared))
    if missing:
        fn_name = getattr(fn, "__qualname__", getattr(fn, "__name__", "the function"))
        raise InvalidArgument(f"tuning result '{name}' sets knob(s) {', '.join(missing)} that "
                              f"{fn_name} does not declare: pass the function that was tuned "
                              "(its knobs: " + (", ".join(sorted(declared)) or "none") + ")")
    knobs = resolve_knobs(declared, stored)  # a stored value outside the choices is an error
    bound = functools.partial(fn, **knobs) if knobs else fn
    jitted = jax.jit(bound)
    cache: dict[Any, Any] = {}

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        leaves, structure = jax.tree_util.tree_flatten((args, kwargs))
        key = structure, tuple((getattr(x, "shape", ()), str(getattr(x, "dtype", type(x))))
                               for x in leaves)
        if key not in cache:
            cache[key] = jitted.lower(*args, **kwargs).compile(compiler_options=options)
        return cache[key](*args, **kwargs)

    run.compiler_options = options
    run.knobs = knobs
    return run
