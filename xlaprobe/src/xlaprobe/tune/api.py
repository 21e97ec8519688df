"""``xlaprobe tune`` and `tuned`: run a tuning search from the command line, apply its stored
result to a function."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

import jax

from xlaprobe.errors import CorruptArtifact, InvalidArgument
from xlaprobe.knobs import declared_knobs, resolve_knobs
from xlaprobe.store import DEFAULT_DB, Store


PLOT_SUFFIXES = (".svg", ".png", ".pdf")


def check_plot_path(path: Path) -> None:
    """Fail early (before a search) on a plot path that cannot be written.

    Raises:
        InvalidArgument: an unsupported suffix, a directory, or a missing or unwritable parent.
    """
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
        import matplotlib  # heavy (seconds to import): only a plot needs it
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # after use('Agg'): no display needed
        import matplotlib.ticker  # as above
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
