"""``xlaprobe capture -- SCRIPT [ARGS]``: run a Python script (or ``-m module``) in this process
and save every program it compiles with ``jax.jit`` as an artifact (`xlaprobe.captures`)."""

from __future__ import annotations

import importlib.util
import runpy
import sys
import traceback
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from xlaprobe.cli.app import app
from xlaprobe.cli.console import err, out
from xlaprobe.cli.paths import check_folder_of
from xlaprobe.errors import InvalidArgument


# Everything after the script is the script's (its own --out included), with or without "--".
@app.command("capture", context_settings={"ignore_unknown_options": True,
                                          "allow_interspersed_args": False})
def capture_cli(
    command: Annotated[list[str], typer.Argument(
        help="the script and its arguments after --: train.py --steps 5, or -m package.module")],
    out: Annotated[Path, typer.Option("--out", "-o", help="directory for the artifacts")] =
    Path("captured"),
    min_equations: Annotated[int, typer.Option(
        min=1, help="leave out programs with fewer equations (op-by-op dispatch)")] = 2,
) -> None:
    """Run a script and save every program it compiles with jax.jit, with the arrays of its
    first call, as artifacts to check later (deduplicated by structure)."""
    raise typer.Exit(capture_command(command, out_dir=out, min_equations=min_equations))


def _script_exit(exc: BaseException) -> int:
    """The exit code a script's SystemExit means (as the interpreter reads it)."""
    assert isinstance(exc, SystemExit)
    if exc.code is None:
        return 0
    return exc.code if isinstance(exc.code, int) else 1


def _module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a parent package missing, or an empty name
        return False


def capture_command(command: list[str], *, out_dir: Path, min_equations: int) -> int:
    """Run `command` (``script.py ARGS`` or ``-m module ARGS``, optionally preceded by
    ``python``) under `xlaprobe.captures.capture`, then list what was captured.

    Returns:
        The script's own exit status, passed through (1 when it raised, with its error line on
        stderr; 130 on Ctrl-C); what it compiled before is saved either way.

    Raises:
        InvalidArgument: no command, a script that does not exist, or a bad output directory.
    """
    from xlaprobe.captures import capture  # imports numpy: not for `xlaprobe --help`

    argv = list(command)
    if argv and Path(argv[0]).name.startswith("python"):
        argv = argv[1:]
    if not argv or argv == ["-m"]:
        raise InvalidArgument("give the script to run: xlaprobe capture -- train.py [ARGS] "
                              "(or -- -m package.module [ARGS])")
    module = argv[1] if argv[0] == "-m" else None
    if module is None and not Path(argv[0]).is_file():
        raise InvalidArgument(f"no script {argv[0]} to run")
    if module is not None and not _module_exists(module):
        raise InvalidArgument(f"no module named {module} to run")
    check_folder_of(out_dir, flag="--out")
    code = 0
    saved_argv, saved_path = sys.argv, list(sys.path)
    with capture(out_dir, min_equations=min_equations) as captured:
        try:
            if module is not None:
                sys.argv = [module, *argv[2:]]
                sys.path.insert(0, "")
                runpy.run_module(module, run_name="__main__", alter_sys=True)
            else:
                sys.argv = argv
                sys.path.insert(0, str(Path(argv[0]).resolve().parent))  # as `python script.py`
                runpy.run_path(argv[0], run_name="__main__")
        except SystemExit as exc:
            code = _script_exit(exc)
        except KeyboardInterrupt:
            code = 130
            err.print("interrupted: what was compiled so far is saved", highlight=False)
        except Exception as exc:  # the script's own error: say where, keep what was captured
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            err.print(escape(f"the script raised {type(exc).__name__} at {frame.filename}:"
                             f"{frame.lineno}: {exc}"), highlight=False, soft_wrap=True)
            code = 1
        finally:
            sys.argv, sys.path[:] = saved_argv, saved_path
    out.print(escape(captured.table()), highlight=False, soft_wrap=True)
    # The largest program first: a training step, not the RNG set-up around it.
    saved = [p.artifact for p in sorted(captured.programs.values(), key=lambda p: -p.equations)
             if p.artifact]
    if saved:
        out.print(escape(f"check the largest: xlaprobe check {saved[0]} --configs "
                         "xla,xla:O0,eager,reference"), highlight=False, soft_wrap=True)
    return code
