"""Test-only helpers for tests/test_workers.py, importable in spawned workers.

Importing it registers the configuration kind ``wtest`` in this process's registry (workers get it
with ``WorkerPool(preload=("worker_kinds",))``; the test module unregisters it in the parent outside
its own tests, so other modules' tests never see it):

* ``wtest``: jit the jaxpr with default options (as the ``xla`` kind will);
* ``wtest:raise``: raise a ValueError with a two-line message;
* ``wtest:pid``: return the worker's process id as the only output;
* ``wtest:exit``: leave the process with exit code 3 (no signal);
* option ``group=NAME`` puts the configuration in isolation group NAME (default ``"default"``).

It also defines module-level host callbacks (importable in workers, so jaxprs that call them pickle by
reference) that abort (plainly, or after a glog fatal line and a long stack trace), segfault or hang the
process that runs them.
"""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Sequence
from typing import Any

import jax
import jax.extend
import numpy as np

from xlaprobe.configs import registry
from xlaprobe.errors import InvalidArgument

STDERR_MARKER = "worker_kinds: about to abort"


class _TestKind:
    name = "wtest"
    description = "test-only kind: jit, or a scripted failure"
    variants = (None, "raise", "pid", "exit")

    def validate(self, config: registry.Configuration) -> None:
        if config.variant not in self.variants:
            raise InvalidArgument(f"unknown wtest variant '{config.variant}'")
        if any(name != "group" for name, _ in config.options):
            raise InvalidArgument("wtest takes only the option group=NAME")

    def isolation_group(self, config: registry.Configuration) -> str:
        return dict(config.options).get("group", "default")

    def run(self, config: registry.Configuration, jaxpr: Any,
            inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        if config.variant == "raise":
            raise ValueError("boom\nsecond line of the message")
        if config.variant == "pid":
            return [np.array(os.getpid())]
        if config.variant == "exit":
            os._exit(3)
        return run_jit(jaxpr, inputs)


def run_jit(jaxpr: Any, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The closed jaxpr under jax.jit (the reference for bit-identity checks)."""
    outs = jax.jit(jax.extend.core.jaxpr_as_fun(jaxpr))(*inputs)
    return [np.asarray(x) for x in outs]


KIND = _TestKind()


def register() -> None:
    """Add ``wtest`` to the configuration registry of this process."""
    registry._KIND_MODULES["wtest"] = __name__
    registry._KINDS["wtest"] = KIND


def unregister() -> None:
    """Remove ``wtest`` from the configuration registry of this process."""
    registry._KIND_MODULES.pop("wtest", None)
    registry._KINDS.pop("wtest", None)


register()


def abort_cb(x: np.ndarray) -> np.ndarray:
    """Host callback: write a marker to fd 2, then SIGABRT."""
    os.write(2, (STDERR_MARKER + "\n").encode())
    os.abort()


#: The fatal line `glog_abort_cb` writes, as XLA's absl logging does on a failed CHECK.
GLOG_FATAL_LINE = ("F0000 00:00:1764400000.123456 4242 shape_inference.cc:1234] Check failed: "
                   "operand_shape.rank() == 2 (3 vs. 2) planted by worker_kinds")


def glog_abort_cb(x: np.ndarray) -> np.ndarray:
    """Host callback: write a glog fatal line and a stack trace longer than a CRASH tail, abort."""
    trace = "".join(f"    @     0x7f00000{k:05x}  xla::HloPassPipeline::Run()\n" for k in range(200))
    os.write(2, f"W0000 00:00:1.0 4242 warn.cc:1] a harmless warning\n{GLOG_FATAL_LINE}\n"
                f"*** Check failure stack trace: ***\n{trace}".encode())
    os.abort()


def segv_cb(x: np.ndarray) -> np.ndarray:
    """Host callback: read address 0 (SIGSEGV)."""
    ctypes.string_at(0)
    return x


def hang_cb(x: np.ndarray) -> np.ndarray:
    """Host callback: sleep for a minute (first touching the file $XLAPROBE_TEST_HANGING names,
    if set, so that a test knows the worker is inside the hang)."""
    marker = os.environ.get("XLAPROBE_TEST_HANGING")
    if marker:
        open(marker, "w").close()
    time.sleep(60)
    return x


def run_release_module(closed_jaxpr: Any, inputs: Sequence[np.ndarray], *, python: str,
                       kept_running: bool = False) -> Any:
    """Worker function: run the program's StableHLO under the interpreter `python` (a stand-in
    for a release environment), as the ``jaxlib==`` kind does: in a fresh process, or in a
    long-lived `RunnerProcess` (`kept_running`)."""
    from xlaprobe.releases import kind as release
    text, kept = release.stablehlo_text(closed_jaxpr, inputs)
    runner = release.RunnerProcess(python) if kept_running else None
    return release.run_module(python, text, [inputs[i] for i in kept], {}, runner=runner)
