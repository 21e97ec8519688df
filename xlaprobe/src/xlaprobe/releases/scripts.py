"""Run a standalone jax script (a finding's ``repro.py``, a case of ``tests/spmd_bugs/``) under
another jax/jaxlib release, and read its verdict from how it ended.

This is how partitioned (``spmd[...]``) programs are bisected over releases: partitioning is done
partly by jax (sharding propagation under Shardy, the lowering of shardings) and partly by XLA,
so the program must be traced, partitioned and compiled by the release's own jax, not handed over
as a module as ``jaxlib==V`` does. The script runs in a fresh process of the release's
interpreter (it sets its own ``XLA_FLAGS`` device count before importing jax).

The scripts' convention (that of `xlaprobe.localization.repro` and of ``tests/spmd_bugs``):
exit 0 when the program computes right; exit 1 when the fault shows (a wrong result, or a compile
error caught and printed); exit 3 when the release lacks what the script needs (e.g. Shardy); a
death by signal when XLA crashes (a CHECK failure aborts). An uncaught exception other than
XLA's runtime error (an ``ImportError``, an ``AttributeError`` of an older jax API, ...) means the
release cannot run the script: *unsupported*, never a boundary.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from xlaprobe.releases import envs
from xlaprobe.releases.bisection import UNSUPPORTED, ReleaseRun

#: The scripts' exit code for "this release lacks what I need" (Shardy, an API).
EXIT_UNSUPPORTED = 3
#: Exception names of XLA's compiler/runtime errors (the release's compiler failed, a finding).
_XLA_ERRORS = ("XlaRuntimeError", "JaxRuntimeError")
#: The lines of a crash's stderr worth showing (a CHECK or LOG(FATAL) message).
_CRASH_LINE = re.compile(r"(Check failed.*|\] .*(Unsupported|FATAL).*)")
#: An uncaught exception's last line: ``Name: message``.
_EXCEPTION = re.compile(r"^([A-Za-z_.]*(Error|Exception))\b:?\s*(.*)$")


def interpreter(version: str, log: Callable[[str], None] | None = None) -> str:
    """The Python interpreter of `version`: this one for the installed release, else the
    release's environment (made on first use).

    Raises:
        EnvironmentUnavailable: the environment cannot be made.
        InvalidArgument: `version` is not a release version.
    """
    if version == envs.installed_version():
        return sys.executable
    return str(envs.ensure_env(version, log=log).python)


def classify(code: int, stdout: str, stderr: str) -> tuple[str, str]:
    """The verdict of a script run from its exit code and output, and a one-line detail.

    Returns:
        (verdict, detail): verdict ``ok`` (exit 0), ``unsupported`` (exit 3, or an uncaught
        exception that is not XLA's), ``crash`` (a signal), ``error`` (XLA's compile or runtime
        error, caught or not) or ``mismatch`` (exit 1 otherwise: a wrong result).

    >>> classify(0, "one device: 1.0", "")[0]
    'ok'
    >>> classify(-6, "", "F0101 x.cc:12] Check failed: a == b (1 vs. 2)\\n*** Check failure")
    ('crash', 'SIGABRT: Check failed: a == b (1 vs. 2)')
    >>> classify(1, "JaxRuntimeError UNIMPLEMENTED: Unsupported reduction", "")
    ('error', 'JaxRuntimeError UNIMPLEMENTED: Unsupported reduction')
    >>> classify(1, "", "Traceback ...\\nAttributeError: module 'jax' has no attribute 'shard_map'")[0]
    'unsupported'
    """
    out_lines = [line for line in stdout.splitlines() if line.strip()]
    err_lines = [line for line in stderr.splitlines() if line.strip()]
    last_out = out_lines[-1].strip() if out_lines else ""
    if code == 0:
        return "ok", last_out[:300]
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else \
            f"signal {-code}"
        found = next((m.group(1) for line in err_lines if (m := _CRASH_LINE.search(line))), "")
        return "crash", f"{name}: {found}"[:300]
    if code == EXIT_UNSUPPORTED:
        return UNSUPPORTED, last_out[:300]
    uncaught = next((m for line in reversed(err_lines) if (m := _EXCEPTION.match(line))), None)
    if uncaught is not None and "Traceback" in stderr:
        kind = "error" if uncaught.group(1).split(".")[-1] in _XLA_ERRORS else UNSUPPORTED
        return kind, uncaught.group(0)[:300]
    if any(last_out.startswith(name) for name in _XLA_ERRORS):
        return "error", last_out[:300]
    return "mismatch", (next((line for line in out_lines if line.startswith("MISMATCH")),
                             last_out))[:300]


def run_script(version: str, script: Path, args: Sequence[str] = (), *, timeout_s: float = 600.0,
               signature: str = "", log: Callable[[str], None] | None = None) -> ReleaseRun:
    """Run `script` with `args` under release `version` and judge it (`classify`).

    Args:
        version: the jaxlib release, e.g. ``"0.6.2"``.
        script: a standalone jax script following the module's exit-code convention.
        args: its command-line arguments.
        timeout_s: wall-clock limit (s); a run past it is a ``timeout`` (bad).
        signature: text the failure must print (stdout or stderr) to be *this* failure; a
            failing run without it is marked ``other`` (no evidence). Empty: any failure.
        log: gets a line when the release's environment has to be made.

    Returns:
        The `ReleaseRun` (its ``seconds``: the script's wall time).

    Raises:
        EnvironmentUnavailable: the release's environment cannot be made.
    """
    python = interpreter(version, log)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "XLA_FLAGS")}
    env.setdefault("JAX_PLATFORMS", "cpu")
    start = time.perf_counter()
    try:
        done = subprocess.run([python, str(Path(script).resolve()), *args], capture_output=True,
                              text=True, env=env, timeout=timeout_s, cwd=Path(script).parent)
    except subprocess.TimeoutExpired:
        return ReleaseRun(version, "timeout", f"ran past {timeout_s:.0f} s",
                          time.perf_counter() - start)
    seconds = time.perf_counter() - start
    verdict, detail = classify(done.returncode, done.stdout, done.stderr)
    other = (verdict not in ("ok", UNSUPPORTED) and bool(signature)
             and signature not in done.stdout + done.stderr)
    return ReleaseRun(version, verdict, detail, seconds, other=other)


__all__ = ["EXIT_UNSUPPORTED", "classify", "interpreter", "run_script"]
