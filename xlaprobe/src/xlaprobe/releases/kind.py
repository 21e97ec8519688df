"""The ``jaxlib==VERSION`` configuration kind: run the Program under another released XLA.

Specs::

    jaxlib==0.5.3                                      that release's XLA with default options
    jaxlib==0.10.2[xla_cpu_enable_fast_math=true]      with compiler options (any that release knows)

The program goes over as StableHLO text (its `jax.export` module with locations and Shardy
attributes stripped: the form every release since 0.4.33 parses; serialized exports of jax 0.12 are
rejected by older releases) plus its inputs, and runs in a process of the release's own
interpreter (`xlaprobe.releases.runner`, in an environment from `xlaprobe.releases.envs`), which
each worker keeps running from one run to the next (`RunnerProcess`: jax is imported once, not
per run). The installed release runs the same way with this interpreter. Outcomes: outputs; *unsupported* when
the release cannot load the module (a parse error, a custom call it lacks), which is not a
finding; a compile error; or a crash, whose signal and stderr come back as the worker's own.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from xlaprobe import jaxcompat
from xlaprobe.jaxpr_json import dtype_by_name
from xlaprobe.configs import xla
from xlaprobe.configs.registry import Configuration
from xlaprobe.errors import InvalidArgument, Unsupported
from xlaprobe.releases import envs
from xlaprobe.releases import runner as runner_module

RUNNER = Path(runner_module.__file__).resolve()


def release_options(config: Configuration) -> tuple[tuple[str, str], ...]:
    """The compiler options a configuration gives every release it is bisected over.

    >>> release_options(Configuration.parse("xla:fastmath"))
    (('xla_cpu_enable_fast_math', 'true'),)

    Raises:
        InvalidArgument: the configuration is not an XLA compile (``eager``, ``mutant:``, ...).
    """
    if config.kind == "jaxlib":
        return config.options
    if config.kind != "xla":
        raise InvalidArgument(f"bisect runs releases of XLA; '{config}' is not an XLA "
                              "configuration: give xla, xla:fastmath, xla[option=value] or "
                              "jaxlib==VERSION[...]")
    return xla.option_texts(config)


def release_config(version: str, options: Sequence[tuple[str, str]]) -> Configuration:
    """``jaxlib==version[options]``."""
    return Configuration("jaxlib", envs.check_version(version), tuple(options))




def option_values(config: Configuration) -> dict[str, Any]:
    """The configuration's compiler options, typed loosely (the release's own XLA checks them).

    >>> option_values(Configuration("jaxlib", "0.10.2", (("xla_cpu_enable_fast_math", "true"),
    ...                                                   ("xla_disable_hlo_passes", "a+b"))))
    {'xla_cpu_enable_fast_math': True, 'xla_disable_hlo_passes': 'a,b'}
    """
    typed: dict[str, Any] = {}
    for name, text in config.options:
        value: Any = text.replace("+", ",")
        if text.lower() in ("true", "false"):
            value = text.lower() == "true"
        else:
            for cast in (int, float):
                try:
                    value = cast(text)
                    break
                except ValueError:
                    pass
        typed[name] = value
    return typed


def stablehlo_text(closed_jaxpr: Any, inputs: Sequence[np.ndarray]) -> tuple[str, list[int]]:
    """The program's `jax.export` module as portable StableHLO text, and the kept inputs.

    Returns:
        (module text without locations or ``sdy.*`` attributes, indices of the inputs the module
        takes: jit drops unused ones).
    """
    specs = [jax.ShapeDtypeStruct(np.shape(x), np.asarray(x).dtype) for x in inputs]
    exported = jax.export.export(jax.jit(jaxcompat.jaxpr_as_fun(closed_jaxpr)),
                                 platforms=["cpu"])(*specs)
    return jaxcompat.portable_stablehlo(exported.mlir_module()), sorted(exported.module_kept_var_idx)


#: The smallest module: compiling it checks a release's compiler options, nothing else.
_PROBE = ("module @probe {\n  func.func public @main() -> tensor<f32> {\n"
          "    %0 = stablehlo.constant dense<1.0> : tensor<f32>\n    return %0 : tensor<f32>\n"
          "  }\n}\n")


class RunnerProcess:
    """A long-lived ``runner.py --serve`` process of one release's interpreter: it imports jax
    once and runs request after request (a fresh process per run costs the import, seconds).

    It lives in the worker process that started it (so a compiler crash or a timeout kills the
    worker's whole process group, this runner with it) and is replaced after it dies.

    Args:
        python: the release's interpreter.
    """

    def __init__(self, python: Path | str):
        self.python = str(python)
        # A copy in a folder of its own, run by path: it must not see xlaprobe's modules.
        self.folder = tempfile.mkdtemp(prefix="xlaprobe-release-runner-")
        runner = Path(self.folder) / "runner.py"
        runner.write_bytes(RUNNER.read_bytes())
        sys.stdout.flush()
        sys.stderr.flush()
        self.process = subprocess.Popen([self.python, str(runner), "--serve"], env=_runner_env(),
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def alive(self) -> bool:
        """Whether the process still runs."""
        return self.process.poll() is None

    def request(self, directory: str) -> int:
        """Run the request in `directory`: the runner's exit code for it, or the process's own
        return code (negative: the signal that killed it) when it died on it."""
        try:
            self.process.stdin.write(directory + "\n")
            self.process.stdin.flush()
            line = self.process.stdout.readline()
        except OSError:
            line = ""
        if line.strip():
            return int(line)
        code = self.process.wait()
        self.close()
        return code if code != 0 else runner_module.EXIT_ERROR

    def close(self) -> None:
        """End the process (end of its stdin, then a kill) and remove its folder."""
        if self.process.poll() is None:
            try:
                self.process.stdin.close()
                self.process.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


def _runner_env() -> dict[str, str]:
    """The release runner's environment: this one without xlaprobe's Python path, on the CPU."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.setdefault("JAX_PLATFORMS", "cpu")
    return env


def run_module(python: Path | str, text: str, inputs: Sequence[np.ndarray],
               options: dict[str, Any], *, reraise_signal: bool = True,
               runner: RunnerProcess | None = None) -> list[np.ndarray]:
    """Run StableHLO `text` on `inputs` under the release of `python` (its interpreter): in
    `runner` (a long-lived process of it) or, without one, in a fresh process.

    The child's stderr goes to this process's stderr (a worker's log: the crash excerpt).

    Returns:
        The flat outputs.

    Raises:
        Unsupported: the release cannot load the module.
        RuntimeError: the release's XLA failed to compile or run it (a compile error), or it
            died from a signal and `reraise_signal` is False.
        (never returns) when the child dies from a signal and `reraise_signal` is True (in a
            worker): this process kills itself with the same signal, so the worker pool reports
            the compiler's crash as a CRASH outcome.
    """
    with tempfile.TemporaryDirectory(prefix="xlaprobe-release-") as directory:
        root = Path(directory)
        (root / "module.mlir").write_text(text)
        specs = []
        for i, value in enumerate(inputs):
            array = np.asarray(value, order="C")  # ascontiguousarray would make a scalar 1-d
            (root / f"input_{i}.bin").write_bytes(array.tobytes())
            specs.append({"dtype": array.dtype.name, "shape": list(array.shape)})
        (root / "request.json").write_text(json.dumps({"inputs": specs, "options": options}))
        if runner is not None:
            code = runner.request(directory)
        else:
            sys.stdout.flush()
            sys.stderr.flush()
            # A copy beside the request: run by path from its own folder, the runner must not
            # see xlaprobe's modules (nor shadow the stdlib with them).
            (root / "runner.py").write_bytes(RUNNER.read_bytes())
            code = subprocess.run([str(python), str(root / "runner.py"), directory],
                                  env=_runner_env(), stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, check=False).returncode
        if code < 0 and not reraise_signal:
            raise RuntimeError(f"the release's runner died from signal {-code}")
        if code < 0:
            signal.signal(-code, signal.SIG_DFL)
            os.kill(os.getpid(), -code)
        try:
            reply = json.loads((root / "reply.json").read_text())
        except (OSError, ValueError):
            raise RuntimeError(f"the release's runner exited with code {code} and "
                               "no reply") from None
        if code == runner_module.EXIT_UNSUPPORTED:
            raise Unsupported(reply.get("error", "the release cannot load this module"))
        if code != 0:
            raise RuntimeError(reply.get("error") or f"exit code {code}")
        return [_read(root / f"output_{i}.bin", spec) for i, spec in enumerate(reply["outputs"])]


def _read(path: Path, spec: dict[str, Any]) -> np.ndarray:
    dtype = dtype_by_name(spec["dtype"])
    return np.frombuffer(path.read_bytes(), dtype=dtype).reshape(spec["shape"]).copy()


def _interpreter(version: str) -> Path | str:
    """The interpreter of release `version`: this one for the installed release, else its
    environment's (made now when missing)."""
    return sys.executable if version == envs.installed_version() else envs.ensure_env(version).python


class ReleaseKind:
    """`ConfigKind` for other XLA releases (see module docstring)."""

    name = "jaxlib"

    def __init__(self) -> None:
        # interpreter -> its long-lived runner, per process (a worker's own; never shipped).
        self._runners: dict[str, RunnerProcess] = {}
    description = ("run the program under another jax/jaxlib release in its own environment "
                   "(jaxlib==0.5.3, jaxlib==0.10.2[xla_cpu_enable_fast_math=true])")

    def validate(self, config: Configuration) -> None:
        """Check the version's form (not whether the registry has it: that needs the network).

        Raises:
            InvalidArgument: no version (``jaxlib`` alone) or a malformed one.
        """
        if config.variant is None:
            raise InvalidArgument(f"configuration '{config}' names no release; write "
                                  "jaxlib==VERSION, e.g. jaxlib==0.5.3")
        envs.check_version(config.variant)

    def compiler_options(self, config: Configuration) -> dict[str, Any]:
        """`option_values` of `config` (a reproducer compiles with them)."""
        return option_values(config)

    def isolation_group(self, config: Configuration) -> str:
        """Releases run in child processes: workers hold no state of theirs."""
        return "default"

    def prepare(self, config: Configuration) -> None:
        """Make the release's environment now (in the caller, outside any run's time limit).

        Raises:
            EnvironmentUnavailable: it cannot be made (see `envs.ensure_env`).
            InvalidArgument: the release's XLA rejects the configuration's options.
        """
        version = config.variant or ""
        python = _interpreter(version)
        if config.options:
            # Only the release's own XLA knows its option names: ask it once, on a trivial module,
            # so a misspelt option is bad input and not a compile-error finding on every program.
            try:
                run_module(python, _PROBE, [], option_values(config), reraise_signal=False)
            except (RuntimeError, Unsupported) as exc:
                raise InvalidArgument(f"jaxlib=={version} rejects the options of '{config}': "
                                      f"{str(exc).splitlines()[0][:300]}") from exc

    def run(self, config: Configuration, jaxpr: Any,
            inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Export, run under the release, return the flat outputs.

        Raises:
            Unsupported, RuntimeError: as `run_module`.
        """
        text, kept = stablehlo_text(jaxpr, inputs)
        python = str(_interpreter(config.variant or ""))
        return run_module(python, text, [inputs[i] for i in kept], option_values(config),
                          runner=self._runner(python))

    def _runner(self, python: str) -> RunnerProcess:
        """The live runner of `python`, started (or restarted after it died) now."""
        runner = self._runners.get(python)
        if runner is None or not runner.alive():
            if runner is not None:
                runner.close()
            runner = self._runners[python] = RunnerProcess(python)
        return runner


KIND = ReleaseKind()
