"""Isolated execution: every configuration compiles and runs in a worker process.

A compiler crash (abort, segfault) or a hang kills or stalls a worker, never the caller: it comes back
as an `Outcome` of kind CRASH (with the signal and the tail of the worker's stderr) or TIMEOUT.

Process model:

* Workers are long-lived processes started with the multiprocessing ``spawn`` context (jax is never
  forked), started lazily, reused between runs and restarted on the next use after one died or was
  killed. A script that creates a pool must guard its entry point with
  ``if __name__ == "__main__":`` (the usual rule of ``spawn``).
* Workers are grouped by `Configuration.isolation_group`: a worker only ever runs configurations of
  one group, so kinds that change process-global state (planted-fault compilers) run alone.
* Each worker is the leader of its own session and process group (so a terminal's Ctrl-C reaches only
  the parent, and killing the group also kills any children the worker started), ignores SIGINT,
  writes its fd 1 and fd 2 to a per-worker log file (the stderr tail of a CRASH outcome; the log is
  emptied at the start of every task) and kills itself when its parent disappears.
* A program travels to a worker once (serialized with `xlaprobe.jaxprs.dumps_jaxpr`); the worker keeps
  the last few programs by `Program.fingerprint`. Arrays travel as out-of-band pickle protocol 5
  buffers, without intermediate copies.
* The parent's ``jax_enable_x64`` and ``jax_default_matmul_precision`` are applied in the worker
  before every task, so a program runs there as it would in the caller.
* Runs of `BATCHED_KINDS` (the NumPy reference and its honest runs: a millisecond of work each)
  that `WorkerPool.run_many` is given one after another for the same program travel as one task,
  one round trip instead of one each (a round trip costs 7-20 ms on a loaded machine).
"""

from __future__ import annotations

import atexit
import collections
import dataclasses
import importlib
import multiprocessing
import os
import pickle
import queue
import re
import signal
import sys
import tempfile
import threading
import time
import traceback
import weakref
from collections.abc import Iterator, Sequence
from multiprocessing import connection as mp_connection
from typing import Any

import jax
import numpy as np

from xlaprobe import coverage
from xlaprobe.configs.registry import Configuration, get_kind
from xlaprobe.errors import InvalidArgument, Unsupported, UnsupportedPrimitive, WorkerCrashed
from xlaprobe.jaxprs import dumps_jaxpr
from xlaprobe.outcome import Outcome, OutcomeKind
from xlaprobe.program import Program

#: How long a fresh worker may take to import jax and report ready (s).
STARTUP_TIMEOUT_S = 300.0
#: Programs a worker keeps deserialized (least recently used are dropped).
PROGRAM_CACHE_SIZE = 4
#: Characters of a dead worker's stderr kept in a CRASH outcome.
STDERR_TAIL_CHARS = 2000
#: jax configuration values that change how a jaxpr compiles; mirrored from the caller into workers.
MIRRORED_JAX_FLAGS = ("jax_enable_x64", "jax_default_matmul_precision")
#: Seconds between a worker's checks that its parent is still alive.
_PARENT_POLL_S = 1.0
#: Configuration kinds whose consecutive runs of one program go to a worker as one task
#: (`WorkerPool.run_many`): cheap, and none compiles with XLA (no per-run coverage log).
BATCHED_KINDS = ("reference",)


# --------------------------------------------------------------------------------------------------
# Wire format: pickle protocol 5 with out-of-band buffers (arrays are not copied into the pickle).

def _send(conn: mp_connection.Connection, obj: Any) -> None:
    buffers: list[pickle.PickleBuffer] = []
    header = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    raws = [b.raw() for b in buffers]
    conn.send_bytes(pickle.dumps([r.nbytes for r in raws]))
    conn.send_bytes(header)
    for raw in raws:
        conn.send_bytes(raw)


def _recv(conn: mp_connection.Connection) -> Any:
    sizes = pickle.loads(conn.recv_bytes())
    header = conn.recv_bytes()
    buffers = []
    for size in sizes:
        buffer = np.empty(size, np.uint8)  # aligned, writable memory for the array to live in
        conn.recv_bytes_into(buffer)
        buffers.append(buffer)
    return pickle.loads(header, buffers=buffers)


def _one_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    return text[:1000]


#: Exception types raised by XLA itself (through jaxlib): a compile error of the compiler.
_XLA_ERRORS = ("XlaRuntimeError", "JaxRuntimeError")


def tool_error(exc: BaseException, kind: Any) -> str:
    """Why `exc`, raised while `kind` ran a program, is xlaprobe's own failure rather than the
    compiler's ("" when it is the compiler's): an interpreter of xlaprobe's (``kind.interpreter``:
    eager, the reference) has no rule for a primitive, or raised a Python exception that XLA did
    not (`_XLA_ERRORS`); the answer names the innermost xlaprobe source line.

    Args:
        exc: the exception.
        kind: the configuration kind (`xlaprobe.configs.registry.ConfigKind`).
    """
    if isinstance(exc, UnsupportedPrimitive):
        return _one_line(exc)
    if not getattr(kind, "interpreter", False):
        return ""
    chain: BaseException | None = exc
    while chain is not None:
        if type(chain).__name__ in _XLA_ERRORS:
            return ""
        chain = chain.__cause__ or chain.__context__
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if "/xlaprobe/" in f.filename.replace("\\", "/")]
    where = f" (at {frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno})" if frames else ""
    return _one_line(exc)[:900] + where


def drained(threads: list[threading.Thread], results: queue.SimpleQueue[Any],
            count: int) -> Iterator[Any]:
    """Start `threads` and yield the `count` items they put on `results` as they arrive; an
    exception a thread put there is raised here, in the caller's thread. A pool's ``run_many``
    stops its threads in its own ``finally`` (how depends on what runs the work)."""
    for thread in threads:
        thread.start()
    for _ in range(count):
        item = results.get()
        if isinstance(item, BaseException):
            raise item
        yield item


def _jax_settings() -> tuple[tuple[str, Any], ...]:
    return tuple((name, getattr(jax.config, name)) for name in MIRRORED_JAX_FLAGS)


# --------------------------------------------------------------------------------------------------
# The worker process.

def _watch_parent(parent_pid: int, own_group: bool, log_path: str) -> None:
    while True:
        time.sleep(_PARENT_POLL_S)
        if os.getppid() != parent_pid:
            try:
                os.unlink(log_path)  # nobody is left to read it
            except OSError:
                pass
            if own_group:
                os.killpg(0, signal.SIGKILL)  # this worker and everything it started
            os._exit(1)


#: Prefix of an isolation group whose workers start XLA with extra ``XLA_FLAGS`` (the rest of the
#: group name, up to `GROUP_TAG`): options XLA:CPU reads once per process, not per compile
#: (`XlaKind`), and the device count of `xlaprobe.configs.spmd`.
XLA_FLAGS_GROUP = "xla-flags:"
#: What follows it in an ``xla-flags:`` group only names the group (a planted spmd mutant's).
GROUP_TAG = " #"


def _add_xla_flags(group: str) -> None:
    """Add an ``xla-flags:`` group's flags to ``XLA_FLAGS``, before the backend starts (it reads
    them once)."""
    if group.startswith(XLA_FLAGS_GROUP):
        os.environ["XLA_FLAGS"] = " ".join(filter(None, (
            os.environ.get("XLA_FLAGS", ""),
            group[len(XLA_FLAGS_GROUP):].partition(GROUP_TAG)[0])))


def _worker_main(conn: mp_connection.Connection, log_path: str, preload: tuple[str, ...],
                 group: str = "default") -> None:
    """Entry point of a worker process: serve tasks from `conn` until it closes."""
    _add_xla_flags(group)
    parent_pid = os.getppid()
    try:
        os.setsid()
        own_group = True
    except OSError:
        own_group = False
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    log_fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    for stream in (sys.stdout, sys.stderr):
        if stream is not None and hasattr(stream, "reconfigure"):
            stream.reconfigure(write_through=True)
    threading.Thread(target=_watch_parent, args=(parent_pid, own_group, log_path), daemon=True,
                     name="xlaprobe-parent-watch").start()
    try:
        # In the try: a jax that fails to load or start is reported to the parent.
        import jax
        from xlaprobe import jaxprs
        jax.devices()  # initialise the backend now, outside any task's time limit
        for module in preload:
            importlib.import_module(module)
    except Exception as exc:  # reported to the parent, which raises WorkerCrashed
        _send(conn, ("startup-error", _one_line(exc)))
        return
    _send(conn, ("ready", os.getpid()))

    cache: collections.OrderedDict[str, tuple[Any, tuple[np.ndarray, ...]]] = collections.OrderedDict()
    while True:
        try:
            _, fingerprint, payload, spec, settings = _recv(conn)
        except (EOFError, OSError):  # the parent closed the connection or died
            try:
                os.unlink(log_path)
            except OSError:
                pass
            return
        os.ftruncate(2, 0)  # the log holds this task's output only
        started = time.perf_counter()
        try:
            if payload is not None:
                blob, inputs = payload
                cache[fingerprint] = (jaxprs.loads_jaxpr(blob), tuple(inputs))
            elif fingerprint not in cache:
                _send(conn, ("missing",))
                continue
            cache.move_to_end(fingerprint)
            while len(cache) > PROGRAM_CACHE_SIZE:
                cache.popitem(last=False)
            closed_jaxpr, inputs = cache[fingerprint]
            for name, value in settings:
                if getattr(jax.config, name) != value:
                    jax.config.update(name, value)
            if isinstance(spec, tuple):  # ("call", "module:function", kwargs): see WorkerPool.call
                module, _, name = spec[1].partition(":")
                function = getattr(importlib.import_module(module), name)
                started = time.perf_counter()
                value = function(closed_jaxpr, inputs, **spec[2])
                _send(conn, ("value", value, time.perf_counter() - started))
                continue
            if isinstance(spec, list):  # a batch (`BATCHED_KINDS`): one reply for all
                _send(conn, ("batch", [_run_config(s, closed_jaxpr, inputs, log_path)
                                       for s in spec]))
                continue
            _send(conn, _run_config(spec, closed_jaxpr, inputs, log_path))
        except Exception as exc:  # xlaprobe's own, before any configuration ran
            _send(conn, ("error", _one_line(exc), time.perf_counter() - started))


def _run_config(spec: str, closed_jaxpr: Any, inputs: tuple[np.ndarray, ...],
                log_path: str) -> tuple[Any, ...]:
    """Run configuration `spec` on a program in the worker: the reply tuple (``ok``, outputs,
    seconds, planted sites, coverage), or (``unsupported`` / ``tool-error`` / ``error``,
    message, seconds)."""
    kind = None
    started = time.perf_counter()
    try:
        config = Configuration.parse(spec)
        kind = get_kind(config.kind)
        started = time.perf_counter()
        outputs = kind.run(config, closed_jaxpr, inputs)
        outputs = tuple(np.asarray(x) for x in outputs)
        # Planted-fault kinds report where their pass fired during this run.
        sites = tuple(getattr(kind, "fired_sites", tuple)())
        return ("ok", outputs, time.perf_counter() - started, sites,
                coverage.of_run(kind.name, log_path))
    except Unsupported as exc:  # the configuration cannot run this program: not a finding
        return ("unsupported", _one_line(exc), time.perf_counter() - started)
    except Exception as exc:  # compiler errors, or xlaprobe's own (a tool error)
        why = tool_error(exc, kind) if kind is not None else ""
        return (("tool-error", why, time.perf_counter() - started) if why
                else ("error", _one_line(exc), time.perf_counter() - started))


# --------------------------------------------------------------------------------------------------
# The parent side.

def _reply_outcome(spec: str, reply: tuple[Any, ...]) -> Outcome | None:
    """The `Outcome` of configuration `spec` from a worker's reply tuple (None: an unknown
    reply, a bug)."""
    if reply[0] == "ok":
        return Outcome(spec, OutcomeKind.RAN, outputs=reply[1], seconds=reply[2],
                       mutations=reply[3], coverage=reply[4] or None)
    if reply[0] == "value":
        return Outcome(spec, OutcomeKind.RAN, seconds=reply[2], value=reply[1])
    kinds = {"error": OutcomeKind.COMPILE_ERROR, "unsupported": OutcomeKind.UNSUPPORTED,
             "tool-error": OutcomeKind.TOOL_ERROR}
    if reply[0] in kinds:
        return Outcome(spec, kinds[reply[0]], error=reply[1], seconds=reply[2])
    return None


def _next_batch(pending: collections.deque[int], pairs: Sequence[tuple[Program, Configuration]],
                lock: threading.Lock) -> list[int]:
    """Take the next index from `pending` and, where it is a run of `BATCHED_KINDS`, the indices
    after it of runs of those kinds on the same program ([]: nothing pending); `lock` is held
    by the group's threads while they take."""
    with lock:
        if not pending:
            return []
        batch = [pending.popleft()]
        program, config = pairs[batch[0]]
        while config.kind in BATCHED_KINDS and pending and pairs[pending[0]][0] is program \
                and pairs[pending[0]][1].kind in BATCHED_KINDS:
            batch.append(pending.popleft())
    return batch


def _unbatched(outcome: Outcome, task: Any, size: int) -> list[Outcome]:
    """The outcome of each configuration of a task of `size` runs (`_next_batch`): a batch that
    ran gives its own; a crash or timeout of the batch is every configuration's."""
    if size == 1:
        return [outcome]
    if outcome.ran and isinstance(outcome.value, list) and len(outcome.value) == size:
        return [o if o is not None else Outcome(s, OutcomeKind.TOOL_ERROR,
                                                error="unexpected reply from worker")
                for s, o in zip(task, outcome.value)]
    return [dataclasses.replace(outcome, config=s) for s in task]

#: How much of a dead worker's log is searched for its fatal line (bytes, from the end).
_FATAL_SEARCH_BYTES = 1 << 20
#: glog's fatal line: severity F, then MMDD (``F0000 00:00:...`` in XLA's absl logging), or a
#: ``Check failed`` anywhere in a line.
_FATAL_LINE = re.compile(r"^F\d{4} .*$|^.*Check failed.*$", re.MULTILINE)


def crash_excerpt(text: str, limit: int = STDERR_TAIL_CHARS) -> str:
    r"""What a CRASH outcome keeps of a dead worker's stderr: its tail, led by the fatal line.

    A compiler that aborts on a failed check logs one line saying why (``F0000 ... Check failed:
    ...``), then a stack trace that easily fills the tail; that line is the one that names the bug,
    so it is kept even when the tail no longer holds it.

    Args:
        text: the worker's stderr (possibly only its end).
        limit: most characters returned (>= 200).

    Returns:
        The stripped text when it fits in `limit`; else its last characters, preceded by the last
        glog fatal line (the last ``Check failed`` line when there is no ``F`` line), cut to a
        quarter of `limit`, and a ``...`` line, when the tail does not already hold it.

    >>> log = "W0000 a warning\nF0000 00:00:1.0 1 hlo.cc:9] Check failed: a == b (1 vs. 2)\n"
    >>> out = crash_excerpt(log + "*** Check failure stack trace: ***\n" + "    @ frame\n" * 100, 300)
    >>> out.splitlines()[0]
    'F0000 00:00:1.0 1 hlo.cc:9] Check failed: a == b (1 vs. 2)'
    >>> len(out) <= 300
    True
    """
    text = text.strip()
    if len(text) <= limit:
        return text
    tail = text[-limit:]
    fatal = [m.group(0).strip() for m in _FATAL_LINE.finditer(text)]
    fatal_f = [line for line in fatal if line[:1] == "F" and line[1:5].isdigit()]
    line = (fatal_f or fatal or [""])[-1]
    if not line or line in tail:
        return tail
    head = line[: limit // 4] + "\n...\n"
    return head + text[-(limit - len(head)):].lstrip()


def _tail(path: str | None, limit: int = STDERR_TAIL_CHARS) -> str:
    """`crash_excerpt` of the end of the log file at `path` ("" when there is none)."""
    if path is None:
        return ""
    try:
        with open(path, "rb") as file:
            file.seek(0, os.SEEK_END)
            file.seek(max(0, file.tell() - _FATAL_SEARCH_BYTES))
            data = file.read()
    except OSError:
        return ""
    return crash_excerpt(data.decode("utf-8", "replace"), limit)


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return "unknown signal"


class _Worker:
    """One worker slot of a group: a process (or none yet) and the parent's view of its state."""

    def __init__(self, group: str):
        self.group = group
        self.process: Any = None
        self.conn: mp_connection.Connection | None = None
        self.log_path: str | None = None
        self.pid: int | None = None
        self.known: collections.OrderedDict[str, None] = collections.OrderedDict()  # mirror of its cache
        self.busy = False
        self.lock = threading.Lock()  # orders kill() against reaping, so a reused pid is never signalled
        self.reap_lock = threading.Lock()  # one discard() at a time

    def alive(self) -> bool:
        return self.process is not None and self.process.exitcode is None

    def kill(self) -> None:
        """SIGKILL the worker's process group (the worker and its children); safe from any thread."""
        with self.lock:
            if self.process is None or self.process.exitcode is not None:
                return
            for send in (os.killpg, os.kill):
                try:
                    send(self.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError, OSError):
                    pass

    def discard(self) -> tuple[int | None, str]:
        """Reap the (dead or dying) process, drop its log; returns its exit code and stderr tail."""
        with self.reap_lock:
            return self._discard()

    def _discard(self) -> tuple[int | None, str]:
        if self.process is None:
            return None, ""
        self.process.join(5.0)
        if self.process.exitcode is None:
            self.kill()
            self.process.join()
        with self.lock:
            exitcode = self.process.exitcode
            tail = _tail(self.log_path)
            # Leftover children of a crashed worker share its process group; the group id cannot be
            # reused while any of them lives, so signalling it here is safe.
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except OSError:
                pass
            if self.conn is not None:
                self.conn.close()
            if self.log_path is not None:
                try:
                    os.unlink(self.log_path)
                except OSError:
                    pass
            self.process = self.conn = self.log_path = self.pid = None
            self.known.clear()
        return exitcode, tail


@dataclasses.dataclass(frozen=True, eq=False)
class ShippedProgram:
    """A program as it travels to a worker: serialized jaxpr and inputs, without jax objects.

    What a pool that forwards runs to another host (`xlaprobe.ray_pool`) sends; a `WorkerPool`
    accepts it wherever it accepts a `Program` and hands `blob` to its worker unchanged.

    Attributes:
        fingerprint: `Program.fingerprint` (hex string), the key of the workers' program caches.
        blob: `xlaprobe.jaxprs.dumps_jaxpr` of the canonical closed jaxpr (bytes).
        inputs: one NumPy array per jaxpr invar.
    """

    fingerprint: str
    blob: bytes
    inputs: tuple[np.ndarray, ...]


def ship(program: Program) -> ShippedProgram:
    """`program` serialized for a worker on another host (see `ShippedProgram`).

    Raises:
        pickle.PicklingError: the jaxpr holds an object that cannot be serialized.
    """
    return ShippedProgram(program.fingerprint, dumps_jaxpr(program.jaxpr), tuple(program.inputs))


@dataclasses.dataclass(frozen=True, slots=True)
class PoolStats:
    """Counters of a `WorkerPool` since it was created.

    Attributes:
        workers_started: worker processes started (first starts and restarts).
        programs_sent: programs serialized and sent to a worker (once per program per worker).
        tasks: runs completed, whatever their outcome.
        crashes: runs that ended in a CRASH outcome.
        timeouts: runs that ended in a TIMEOUT outcome.
    """

    workers_started: int = 0
    programs_sent: int = 0
    tasks: int = 0
    crashes: int = 0
    timeouts: int = 0


_LIVE_POOLS: weakref.WeakSet[WorkerPool] = weakref.WeakSet()


def _close_live_pools() -> None:
    for pool in list(_LIVE_POOLS):
        pool.close()


atexit.register(_close_live_pools)


class WorkerPool:
    """Long-lived worker processes that compile and run configurations in isolation.

    Use as a context manager; `close` also runs at interpreter exit (so a Ctrl-C that ends the
    caller leaves no worker behind). Thread-safe: `run` may be called from several threads.

    Args:
        size: at most this many worker processes per isolation group.
        timeout_s: default limit on one run (compile plus execute) in seconds; the worker is killed
            when it is exceeded.
        preload: modules every worker imports at start-up, e.g. ones that register extra
            configuration kinds (the registry of the caller is not copied into workers).

    Raises:
        InvalidArgument: `size` < 1 or `timeout_s` <= 0.
    """

    def __init__(self, size: int = 1, timeout_s: float = 600.0, *, preload: Sequence[str] = ()):
        if size < 1:
            raise InvalidArgument(f"worker pool size must be at least 1, got {size}")
        if not timeout_s > 0:
            raise InvalidArgument(f"worker timeout must be positive (seconds), got {timeout_s}")
        self.size = size
        self.timeout_s = float(timeout_s)
        self._preload = tuple(preload)
        self._context = multiprocessing.get_context("spawn")
        self._cond = threading.Condition()
        self._slots: dict[str, list[_Worker]] = {}
        self._closed = False
        self._prepared: set[str] = set()
        self._unprepared: dict[str, Exception] = {}
        self._prepare_lock = threading.Lock()
        self._counts = collections.Counter()
        self._payloads: weakref.WeakKeyDictionary[Program, tuple[str, bytes]] = weakref.WeakKeyDictionary()
        self._payload_lock = threading.Lock()
        _LIVE_POOLS.add(self)

    # -- public API --------------------------------------------------------------------------------

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def run(self, program: Program, config: Configuration | str,
            timeout_s: float | None = None) -> Outcome:
        """Compile and run `config` on `program` in a worker of the configuration's isolation group.

        Args:
            program: the program; sent to the worker only if that worker has not seen it recently.
            config: a `Configuration` or its spec string.
            timeout_s: limit on this run in seconds (default: the pool's ``timeout_s``).

        Returns:
            RAN with outputs and seconds; COMPILE_ERROR with a one-line error; CRASH with the signal
            number (``None`` for a plain non-zero exit) and the worker's stderr tail; TIMEOUT with
            ``seconds`` set to the limit.

        Raises:
            InvalidArgument: `config` is a malformed or unknown spec.
            EnvironmentUnavailable: a release's environment cannot be made (``jaxlib==`` kinds).
            WorkerCrashed: a worker could not start (its import of jax or a preload module failed).
            pickle.PicklingError: the program's jaxpr holds an object that cannot be serialized.
            RuntimeError: the pool is closed, or was closed while the run was in flight.
        """
        config = self._config(config)
        limit = self.timeout_s if timeout_s is None else float(timeout_s)
        fingerprint, _ = self._payload(program)
        worker = self._acquire(config.isolation_group, fingerprint)
        try:
            outcome = self._execute(worker, program, config, limit, _jax_settings())
        finally:
            self._release(worker)
        if self._closed:
            raise RuntimeError("WorkerPool was closed while a run was in flight")
        return outcome

    def run_many(self, items: Sequence[tuple[Program, Configuration | str]],
                 timeout_s: float | None = None) -> Iterator[tuple[int, Outcome]]:
        """Run many (program, configuration) pairs, up to ``size`` at a time per isolation group.

        Consecutive runs of `BATCHED_KINDS` on the same program go to a worker as one task (one
        round trip; their time limit is summed; a crash or timeout of the task is each run's
        outcome).

        Closing the iterator early (or an exception in the caller's loop) kills the workers still
        busy with its items.

        Args:
            items: the pairs; configurations as `Configuration` or spec strings.
            timeout_s: limit on each run in seconds (default: the pool's ``timeout_s``).

        Returns:
            An iterator of ``(index into items, outcome)`` in order of completion.

        Raises:
            InvalidArgument: a configuration spec is malformed or unknown (raised at once).
            WorkerCrashed: a worker could not start (raised by the iterator).
            RuntimeError: the pool is closed.
        """
        pairs = [(program, self._config(config)) for program, config in items]
        limit = self.timeout_s if timeout_s is None else float(timeout_s)
        return self._run_many(pairs, limit)

    def call(self, program: Program, function: str, kwargs: dict[str, Any] | None = None, *,
             group: str = "call", timeout_s: float | None = None) -> Outcome:
        """Run ``function(closed_jaxpr, inputs, **kwargs)`` in a worker of isolation `group`.

        For work that is not one configuration's run, e.g. timing several executables
        interleaved in one process (`xlaprobe.tune.measure`). Crashes and hangs are outcomes, as
        in `run`.

        Args:
            program: its canonical closed jaxpr and inputs (tuple of NumPy arrays) are the first
                two arguments.
            function: ``"module:name"`` of a module-level function importable in the worker.
            kwargs: picklable keyword arguments.
            group: isolation group (workers of other groups never run it).
            timeout_s: limit in seconds (default: the pool's ``timeout_s``).

        Returns:
            RAN with ``value`` the function's (picklable) return value and ``seconds`` its wall
            time; COMPILE_ERROR when it raised (one-line error); CRASH; TIMEOUT.

        Raises:
            InvalidArgument: `function` is not of the form ``module:name``.
            WorkerCrashed, RuntimeError: as `run`.
        """
        module, _, name = function.partition(":")
        if not module or not name.isidentifier():
            raise InvalidArgument(f"worker call target must be 'module:function', got {function!r}")
        limit = self.timeout_s if timeout_s is None else float(timeout_s)
        fingerprint, _ = self._payload(program)
        worker = self._acquire(group, fingerprint)
        try:
            outcome = self._execute(worker, program, ("call", function, dict(kwargs or {})),
                                    limit, _jax_settings())
        finally:
            self._release(worker)
        if self._closed:
            raise RuntimeError("WorkerPool was closed while a run was in flight")
        return outcome

    def recycle(self, group: str) -> None:
        """Stop the idle workers of `group`, so that its next run starts in a fresh process (e.g. to
        replicate a timing measurement outside the process that made it)."""
        with self._cond:
            workers = [w for w in self._slots.get(group, []) if not w.busy]
        for worker in workers:
            worker.kill()
            worker.discard()

    def worker_pids(self) -> dict[str, list[int]]:
        """Process ids of the live workers, by isolation group."""
        with self._cond:
            return {group: [w.pid for w in slots if w.alive()]
                    for group, slots in self._slots.items()}

    @property
    def stats(self) -> PoolStats:
        """A snapshot of the pool's counters."""
        with self._cond:
            return PoolStats(**{f.name: self._counts[f.name] for f in dataclasses.fields(PoolStats)})

    def close(self) -> None:
        """Kill all workers (and their children) and remove their logs; later runs raise. Idempotent."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            workers = [w for slots in self._slots.values() for w in slots]
            self._cond.notify_all()
        for worker in workers:
            worker.kill()
        for worker in workers:
            if not worker.busy:  # busy ones are reaped by the thread that runs them
                worker.discard()
        _LIVE_POOLS.discard(self)

    # -- internals ---------------------------------------------------------------------------------

    def _config(self, config: Configuration | str) -> Configuration:
        config = Configuration.parse(config) if isinstance(config, str) else config
        # Kinds that need a setup first (a release's environment) do it here, in the caller,
        # outside every run's time limit: once per spec and pool.
        # A setup that failed fails again at once (threads of one campaign ask in turn).
        prepare = getattr(get_kind(config.kind), "prepare", None)
        spec = str(config)
        if prepare is not None and spec not in self._prepared:
            with self._prepare_lock:
                if spec in self._unprepared:
                    raise self._unprepared[spec]
                if spec not in self._prepared:
                    try:
                        prepare(config)
                    except Exception as exc:
                        self._unprepared[spec] = exc
                        raise
                    self._prepared.add(spec)
        return config

    def _count(self, name: str) -> None:
        with self._cond:
            self._counts[name] += 1

    def _payload(self, program: Program | ShippedProgram) -> tuple[str, bytes]:
        if isinstance(program, ShippedProgram):
            return program.fingerprint, program.blob
        with self._payload_lock:
            cached = self._payloads.get(program)
            if cached is None:
                cached = self._payloads[program] = (program.fingerprint, dumps_jaxpr(program.jaxpr))
            return cached

    def _acquire(self, group: str, fingerprint: str) -> _Worker:
        with self._cond:
            while True:
                if self._closed:
                    raise RuntimeError("WorkerPool is closed")
                slots = self._slots.setdefault(group, [])
                idle = [w for w in slots if not w.busy]
                # Prefer a live worker that holds the program, then any live one, then a dead one.
                idle.sort(key=lambda w: (not w.alive(), fingerprint not in w.known))
                if idle:
                    chosen = idle[0]
                elif len(slots) < self.size:
                    chosen = _Worker(group)
                    slots.append(chosen)
                else:
                    self._cond.wait()
                    continue
                chosen.busy = True
                return chosen

    def _release(self, worker: _Worker) -> None:
        with self._cond:
            worker.busy = False
            self._cond.notify_all()
        if self._closed:
            worker.kill()
            worker.discard()

    def _start(self, worker: _Worker) -> None:
        fd, log_path = tempfile.mkstemp(prefix="xlaprobe-worker-", suffix=".log")
        os.close(fd)
        parent_conn, child_conn = self._context.Pipe(duplex=True)
        process = self._context.Process(target=_worker_main, args=(child_conn, log_path, self._preload,
                                                                  worker.group),
                                        name=f"xlaprobe-worker[{worker.group}]", daemon=True)
        try:
            with coverage.worker_environment():  # read by XLA when jaxlib loads, in the child
                process.start()
        except BaseException:
            os.unlink(log_path)
            raise
        finally:
            child_conn.close()
        with worker.lock:
            worker.process, worker.conn, worker.log_path, worker.pid = process, parent_conn, log_path, process.pid
            worker.known.clear()
        self._count("workers_started")
        ready = mp_connection.wait([parent_conn, process.sentinel], STARTUP_TIMEOUT_S)
        message: Any = None
        if parent_conn in ready:
            try:
                message = _recv(parent_conn)
            except (EOFError, OSError):
                pass
        if isinstance(message, tuple) and message[0] == "ready":
            return
        worker.kill()
        exitcode, tail = worker.discard()
        if message is not None:
            why = message[1]
        elif not ready:
            why = f"not ready after {STARTUP_TIMEOUT_S:g} s"
        else:
            why = f"exit code {exitcode}"
        raise WorkerCrashed(
            f"a worker process for group '{worker.group}' failed to start ({why}). If the calling script "
            "has no `if __name__ == '__main__':` guard, add one (spawned workers import the main "
            "module); else check that jax and the preload modules import in this environment. "
            f"Worker stderr (errors before start-up finished went to this process's stderr):\n{tail}")

    def _await(self, worker: _Worker, timeout_s: float) -> Any:
        """The worker's reply, ``"died"`` or ``"timeout"``."""
        conn, sentinel = worker.conn, worker.process.sentinel
        ready = mp_connection.wait([conn, sentinel], timeout_s)
        if not ready:
            return "timeout"
        if conn in ready or conn.poll(0):
            try:
                return _recv(conn)
            except (EOFError, OSError):
                return "died"
        return "died"

    def _execute(self, worker: _Worker, program: Program,
                 config: Configuration | tuple[Any, ...] | list[str], timeout_s: float,
                 settings: tuple[tuple[str, Any], ...]) -> Outcome:
        # A configuration's run, a ("call", function, kwargs) task (see `call`), or a batch of
        # configuration specs (their outcomes in the returned outcome's `value`).
        task_spec: Any = str(config) if isinstance(config, Configuration) else config
        spec = task_spec if isinstance(task_spec, str) else (
            "batch" if isinstance(task_spec, list) else f"call:{config[1]}")
        fingerprint, blob = self._payload(program)
        try:
            retried_send = resent = False
            sent_at = time.monotonic()
            while True:
                if not worker.alive():
                    worker.discard()  # died while idle (or never started): not this run's fault
                    self._start(worker)
                with_payload = fingerprint not in worker.known
                task = ("task", fingerprint, (blob, program.inputs) if with_payload else None,
                        task_spec, settings)
                try:
                    _send(worker.conn, task)
                except OSError:
                    if retried_send:
                        reply: Any = "died"
                    else:
                        retried_send = True
                        worker.kill()
                        worker.discard()
                        continue
                else:
                    if with_payload:
                        self._count("programs_sent")
                        worker.known[fingerprint] = None
                    worker.known.move_to_end(fingerprint)
                    while len(worker.known) > PROGRAM_CACHE_SIZE:
                        worker.known.popitem(last=False)
                    sent_at = time.monotonic()
                    reply = self._await(worker, timeout_s)
                if reply == ("missing",) and not resent:
                    resent = True
                    worker.known.pop(fingerprint, None)
                    continue
                break
        except BaseException:
            worker.kill()  # a half-finished exchange (Ctrl-C, an error here) leaves it unusable
            worker.discard()
            raise
        if reply in ("timeout", "died") and self._closed:
            worker.discard()
            raise RuntimeError("WorkerPool was closed while a run was in flight")
        self._count("tasks")
        if reply == "timeout":
            worker.kill()
            worker.discard()
            self._count("timeouts")
            return Outcome(spec, OutcomeKind.TIMEOUT, seconds=timeout_s,
                           error=f"no result within {timeout_s:g} s; the worker was killed")
        if reply == "died":
            pid = worker.pid
            exitcode, tail = worker.discard()
            self._count("crashes")
            signum = -exitcode if exitcode is not None and exitcode < 0 else None
            if not tail:
                how = (f"died from signal {signum} ({_signal_name(signum)})" if signum
                       else f"exited with code {exitcode}")
                tail = f"worker process {pid} {how} and wrote nothing to stderr"
            return Outcome(spec, OutcomeKind.CRASH, error=tail, signal=signum,
                           seconds=time.monotonic() - sent_at)
        if reply[0] == "batch":  # one outcome per configuration, in `value`
            return Outcome(spec, OutcomeKind.RAN, value=[
                _reply_outcome(s, r) for s, r in zip(task_spec, reply[1])])
        outcome = _reply_outcome(spec, reply)
        if outcome is not None:
            return outcome
        worker.kill()
        worker.discard()
        raise RuntimeError(f"unexpected reply from worker: {reply[0]!r}")  # a bug in this module

    def _run_many(self, pairs: list[tuple[Program, Configuration]],
                  timeout_s: float) -> Iterator[tuple[int, Outcome]]:
        settings = _jax_settings()  # read in the caller's thread (jax config contexts are per thread)
        results: queue.SimpleQueue[Any] = queue.SimpleQueue()
        stop = threading.Event()
        flight_lock, take_lock = threading.Lock(), threading.Lock()
        in_flight: dict[int, _Worker] = {}
        by_group: dict[str, collections.deque[int]] = {}
        for index, (_, config) in enumerate(pairs):
            by_group.setdefault(config.isolation_group, collections.deque()).append(index)

        def drain(group: str, pending: collections.deque[int]) -> None:
            me = threading.get_ident()
            while not stop.is_set():
                batch = _next_batch(pending, pairs, take_lock)
                if not batch:
                    return
                index = batch[0]
                program, config = pairs[index]
                try:
                    worker = self._acquire(group, self._payload(program)[0])
                except BaseException as exc:
                    results.put(exc)
                    return
                with flight_lock:
                    if stop.is_set():
                        self._release(worker)
                        return
                    in_flight[me] = worker
                task: Any = config if len(batch) == 1 else [str(pairs[i][1]) for i in batch]
                try:
                    outcome = self._execute(worker, program, task, timeout_s * len(batch),
                                            settings)
                except BaseException as exc:
                    results.put(exc)
                    return
                finally:
                    with flight_lock:
                        in_flight.pop(me, None)
                    self._release(worker)
                for i, each in zip(batch, _unbatched(outcome, task, len(batch))):
                    results.put((i, each))

        threads = [threading.Thread(target=drain, args=(group, pending), daemon=True,
                                    name=f"xlaprobe-pool[{group}]")
                   for group, pending in by_group.items()
                   for _ in range(min(self.size, len(pending)))]
        try:
            yield from drained(threads, results, len(pairs))
        finally:
            stop.set()
            with flight_lock:
                for worker in in_flight.values():
                    worker.kill()
            for thread in threads:
                thread.join()

