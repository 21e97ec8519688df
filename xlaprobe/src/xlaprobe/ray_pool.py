"""The worker pool's interface over a Ray cluster (``xlaprobe fuzz --backend ray``).

Each slot of a `RayPool` is a Ray actor (one CPU) that hosts an ordinary `xlaprobe.workers.WorkerPool`
of size 1 on its node: runs still compile in the actor's subprocess worker, so a compiler abort or
hang kills that subprocess (a CRASH or TIMEOUT outcome, with the stderr tail, exactly as locally),
never the actor or the campaign. An actor that dies itself (its process killed, its node lost) is
replaced and the run is retried on a fresh one: that is the infrastructure failing, not the compiler.

Everything that judges runs in the caller: the driver generates programs, runs the oracle and writes
the store; only (program, configuration) runs travel, as `xlaprobe.workers.ShippedProgram` (the
serialized jaxpr and inputs, put once per program into Ray's object store) and `Outcome` back.
Workers on other nodes need this xlaprobe version importable (``pip install 'xlaprobe[ray]'`` on
every node); on a local cluster they import it as the driver does.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import queue
import socket
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

import jax

from xlaprobe.configs.registry import Configuration, get_kind
from xlaprobe.errors import InvalidArgument
from xlaprobe.outcome import Outcome, OutcomeKind
from xlaprobe.program import Program
from xlaprobe.workers import (STARTUP_TIMEOUT_S, PoolStats, ShippedProgram, WorkerPool,
                              _jax_settings, drained, ship)

#: Times a run is retried on a fresh actor after the actor hosting it died.
ACTOR_RETRIES = 2
#: Seconds allowed, beyond the run's own limit, for an actor to start and its worker to import jax;
#: an actor that has not answered by then is killed and the run retried.
ACTOR_SLACK_S = STARTUP_TIMEOUT_S + 60.0
#: Seconds to wait for a TCP connection to ``--address`` before calling it unreachable.
CONNECT_TIMEOUT_S = 5.0
#: Programs an actor is assumed to hold (mirror of the worker's cache, for affinity).
_KNOWN_PER_ACTOR = 4


def import_ray() -> Any:
    """The ``ray`` module.

    Raises:
        InvalidArgument: Ray is not installed (the message names the extra to install).
    """
    try:
        import ray  # optional: the ray extra
    except ImportError:
        raise InvalidArgument("--backend ray needs Ray, which is not installed here: "
                              "pip install 'xlaprobe[ray]'") from None
    return ray


def check_address(address: str) -> tuple[str, int]:
    """(host, port) of a ``HOST:PORT`` or ``ray://HOST:PORT`` address; ``auto`` and ``local``
    give ("", 0) (Ray resolves them).

    Raises:
        InvalidArgument: anything else.
    """
    if address in ("auto", "local"):
        return "", 0
    rest = address.split("://", 1)[-1]
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise InvalidArgument(f"--address must be HOST:PORT, ray://HOST:PORT or auto, got "
                              f"'{address}'")
    return host, int(port)


def check_reachable(address: str) -> None:
    """Raise `InvalidArgument` unless something listens at `address`.

    Fails fast on a ``host:port`` (or ``ray://host:port``) nobody listens on; Ray itself keeps
    retrying for about a minute before it gives up. ``auto`` and ``local`` pass (Ray resolves
    them)."""
    if address in ("auto", "local"):
        return
    host, port = check_address(address)
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise InvalidArgument(f"cannot reach a Ray cluster at {address} ({exc.strerror or exc}); "
                              "start one with `ray start --head` or drop --address to run a "
                              "local one") from None


def connect(address: str | None = None) -> bool:
    """Connect this process to Ray unless it is already: to the cluster at `address`, or to a new
    local one using this machine's CPUs when `address` is None.

    Args:
        address: ``HOST:PORT`` of a cluster's head (GCS), ``ray://HOST:PORT`` (Ray Client),
            ``auto`` (the cluster this machine belongs to), or None.

    Returns:
        True when this call connected (the caller should `ray.shutdown` when done), False when
        Ray was connected already.

    Raises:
        InvalidArgument: Ray is not installed, or `address` is malformed or unreachable.
    """
    ray = import_ray()
    if ray.is_initialized():
        return False
    if address is not None:
        check_reachable(address)
    try:
        ray.init(address=address, include_dashboard=False, logging_level="ERROR",
                 log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        first = next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
        raise InvalidArgument(f"cannot connect to Ray at {address or 'a new local cluster'}: "
                              f"{first.strip()[:300]}") from None
    return True


class NodeWorker:
    """What one Ray actor runs: a `WorkerPool` of size 1 on its node (one CPU).

    Methods mirror `WorkerPool`'s; an exception the local pool raises (a worker that cannot
    start, a bad spec) comes back as the value ``("raise", exception)``, so the driver re-raises
    xlaprobe's own error rather than Ray's wrapper.

    Args:
        timeout_s: default limit on one run (s).
        preload: modules the subprocess workers import at start-up.
    """

    def __init__(self, timeout_s: float, preload: Sequence[str] = ()):
        self.pool = WorkerPool(size=1, timeout_s=timeout_s, preload=preload)

    def where(self) -> tuple[str, int]:
        """(host name, process id) of the actor."""
        return socket.gethostname(), os.getpid()

    def run(self, shipped: ShippedProgram, spec: Any, timeout_s: float,
            settings: tuple[tuple[str, Any], ...]) -> Any:
        """`WorkerPool.run` (``spec`` a configuration string) or `WorkerPool.call` (``spec`` a
        ``(function, kwargs, group)`` tuple) under the driver's jax `settings`."""
        try:
            for name, value in settings:  # the local pool mirrors them into its worker
                if getattr(jax.config, name) != value:
                    jax.config.update(name, value)
            if isinstance(spec, str):
                return self.pool.run(shipped, spec, timeout_s)
            function, kwargs, group = spec
            return self.pool.call(shipped, function, kwargs, group=group, timeout_s=timeout_s)
        except Exception as exc:
            return ("raise", exc)

    def recycle(self, group: str) -> None:
        """`WorkerPool.recycle`."""
        self.pool.recycle(group)

    def worker_pids(self) -> dict[str, list[int]]:
        """`WorkerPool.worker_pids` (process ids on the actor's node)."""
        return self.pool.worker_pids()

    def close(self) -> None:
        """Kill the subprocess workers."""
        self.pool.close()


class _Slot:
    """One actor of the pool (none yet, or replaced after it died) and the driver's view of it."""

    def __init__(self) -> None:
        self.actor: Any = None
        self.busy = False
        self.known: collections.OrderedDict[str, None] = collections.OrderedDict()


class RayPool:
    """`xlaprobe.workers.WorkerPool`'s interface (run, run_many, call, recycle, worker_pids, stats,
    close) with runs on Ray actors; see the module docstring. Thread-safe.

    Args:
        size: actors (each reserves one CPU of the cluster; runs of all isolation groups share
            them, each actor keeping one subprocess worker per group).
        timeout_s: default limit on one run (compile plus execute) in seconds.
        preload: modules every subprocess worker imports at start-up.
        address: the cluster (see `connect`); None: Ray as connected already, else a new local
            cluster, shut down again by `close`.

    Raises:
        InvalidArgument: `size` < 1, `timeout_s` <= 0, Ray missing, `address` unreachable, or
            more actors than the cluster has CPUs (each would wait for one forever).
    """

    def __init__(self, size: int = 1, timeout_s: float = 600.0, *, preload: Sequence[str] = (),
                 address: str | None = None):
        if size < 1:
            raise InvalidArgument(f"worker pool size must be at least 1, got {size}")
        if not timeout_s > 0:
            raise InvalidArgument(f"worker timeout must be positive (seconds), got {timeout_s}")
        self._ray = import_ray()
        self._owns_ray = connect(address)
        cpus = self._ray.cluster_resources().get("CPU", 0)
        if size > cpus:
            if self._owns_ray:
                self._ray.shutdown()
            raise InvalidArgument(f"--jobs {size} needs {size} CPUs of the Ray cluster, which has "
                                  f"{cpus:g}; pass --jobs {max(int(cpus), 1)} or fewer")
        self.size = size
        self.timeout_s = float(timeout_s)
        self._preload = tuple(preload)
        self._actor_class = self._ray.remote(num_cpus=1, max_restarts=0)(NodeWorker)
        self._slots = [_Slot() for _ in range(size)]
        self._cond = threading.Condition()
        self._closed = False
        self._counts: collections.Counter = collections.Counter()
        self._refs: weakref.WeakKeyDictionary[Program, tuple[str, Any]] = weakref.WeakKeyDictionary()
        self._refs_lock = threading.Lock()

    # -- public API --------------------------------------------------------------------------------

    def __enter__(self) -> RayPool:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def run(self, program: Program, config: Configuration | str,
            timeout_s: float | None = None) -> Outcome:
        """Run `config` on `program` on an actor; as `WorkerPool.run` (same outcomes, same errors).

        Raises:
            InvalidArgument: `config` is malformed or unknown.
            WorkerCrashed: an actor's worker could not start.
            RuntimeError: the pool is closed.
        """
        config = self._config(config)
        limit = self.timeout_s if timeout_s is None else float(timeout_s)
        return self._dispatch(program, str(config), str(config), limit, _jax_settings())

    def run_many(self, items: Sequence[tuple[Program, Configuration | str]],
                 timeout_s: float | None = None) -> Iterator[tuple[int, Outcome]]:
        """Run many (program, configuration) pairs, up to ``size`` at a time; as
        `WorkerPool.run_many`: ``(index into items, outcome)`` in order of completion.

        Raises:
            InvalidArgument: a configuration spec is malformed or unknown (raised at once).
            WorkerCrashed, RuntimeError: as `run` (raised by the iterator).
        """
        pairs = [(program, str(self._config(config))) for program, config in items]
        limit = self.timeout_s if timeout_s is None else float(timeout_s)
        return self._run_many(pairs, limit)

    def call(self, program: Program, function: str, kwargs: dict[str, Any] | None = None, *,
             group: str = "call", timeout_s: float | None = None) -> Outcome:
        """``function(closed_jaxpr, inputs, **kwargs)`` in an actor's worker of `group`; as
        `WorkerPool.call`.

        Raises:
            InvalidArgument: `function` is not of the form ``module:name``.
            WorkerCrashed, RuntimeError: as `run`.
        """
        module, _, name = function.partition(":")
        if not module or not name.isidentifier():
            raise InvalidArgument(f"worker call target must be 'module:function', got {function!r}")
        limit = self.timeout_s if timeout_s is None else float(timeout_s)
        return self._dispatch(program, (function, dict(kwargs or {}), group), f"call:{function}",
                              limit, _jax_settings())

    def recycle(self, group: str) -> None:
        """Stop the idle subprocess workers of `group` on every live actor."""
        with self._cond:
            actors = [s.actor for s in self._slots if s.actor is not None and not s.busy]
        self._ray.get([a.recycle.remote(group) for a in actors])

    def worker_pids(self) -> dict[str, list[int]]:
        """Process ids of the live subprocess workers, by isolation group (on their nodes)."""
        with self._cond:
            actors = [s.actor for s in self._slots if s.actor is not None]
        merged: dict[str, list[int]] = {}
        for pids in self._ray.get([a.worker_pids.remote() for a in actors]):
            for group, ids in pids.items():
                merged.setdefault(group, []).extend(ids)
        return merged

    def actor_pids(self) -> list[int]:
        """Process ids of the live actors (on their nodes); starts none."""
        with self._cond:
            actors = [s.actor for s in self._slots if s.actor is not None]
        return [pid for _, pid in self._ray.get([a.where.remote() for a in actors])]

    @property
    def stats(self) -> PoolStats:
        """Counters: ``workers_started`` counts actors started (first starts and replacements),
        ``programs_sent`` programs put into Ray's object store, the rest as `WorkerPool`'s."""
        with self._cond:
            return PoolStats(**{f.name: self._counts[f.name] for f in dataclasses.fields(PoolStats)})

    @property
    def actor_deaths(self) -> int:
        """Actors that died (or stopped answering) under a run and were replaced."""
        with self._cond:
            return self._counts["actor_deaths"]

    def close(self) -> None:
        """Stop every actor (their workers with them); shut Ray down when this pool started it.
        Later runs raise. Idempotent."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            actors = [s.actor for s in self._slots if s.actor is not None]
            for slot in self._slots:
                slot.actor = None
            self._cond.notify_all()
        if self._ray.is_initialized() and actors:
            try:
                self._ray.wait([a.close.remote() for a in actors], num_returns=len(actors),
                               timeout=5.0)
            except Exception:
                pass
            for actor in actors:
                self._ray.kill(actor)
        if self._ray.is_initialized():
            if self._owns_ray:
                self._ray.shutdown()

    # -- internals ---------------------------------------------------------------------------------

    def _config(self, config: Configuration | str) -> Configuration:
        config = Configuration.parse(config) if isinstance(config, str) else config
        get_kind(config.kind)  # unknown kinds fail here, at once; `prepare` runs on the node
        return config

    def _ref(self, program: Program) -> tuple[str, Any]:
        with self._refs_lock:
            cached = self._refs.get(program)
            if cached is None:
                shipped = program if isinstance(program, ShippedProgram) else ship(program)
                cached = self._refs[program] = (shipped.fingerprint, self._ray.put(shipped))
                with self._cond:
                    self._counts["programs_sent"] += 1
            return cached

    def _acquire(self, fingerprint: str) -> tuple[_Slot, Any]:
        with self._cond:
            while True:
                if self._closed:
                    raise RuntimeError("RayPool is closed")
                idle = [s for s in self._slots if not s.busy]
                if idle:
                    # An actor that holds the program, then a started one, then a fresh one.
                    idle.sort(key=lambda s: (fingerprint not in s.known, s.actor is None))
                    slot = idle[0]
                    slot.busy = True
                    if slot.actor is None:
                        slot.actor = self._actor_class.remote(self.timeout_s, self._preload)
                        slot.known.clear()
                        self._counts["workers_started"] += 1
                    return slot, slot.actor
                self._cond.wait()

    def _release(self, slot: _Slot, *, dead: bool = False) -> None:
        with self._cond:
            if dead and slot.actor is not None and not self._closed:
                try:
                    self._ray.kill(slot.actor)
                except Exception:
                    pass
                slot.actor = None
                slot.known.clear()
            slot.busy = False
            self._cond.notify_all()

    def _dispatch(self, program: Program, spec: Any, name: str, limit: float,
                  settings: tuple[tuple[str, Any], ...]) -> Outcome:
        ray = self._ray
        fingerprint, ref = self._ref(program)
        why = ""
        for _attempt in range(1 + ACTOR_RETRIES):
            slot, actor = self._acquire(fingerprint)
            dead = True
            try:
                reply = ray.get(actor.run.remote(ref, spec, limit, settings),
                                timeout=limit + ACTOR_SLACK_S)
                dead = False
            except ray.exceptions.GetTimeoutError:
                why = f"its actor gave no answer within {limit + ACTOR_SLACK_S:g} s"
            except ray.exceptions.RayTaskError:
                dead = False  # the actor's method itself failed: a bug here, not a lost actor
                raise
            except ray.exceptions.RayError as exc:  # the actor died, its node or object was lost
                first = next((ln for ln in str(exc).splitlines() if ln.strip()), "")
                why = f"its Ray actor died ({type(exc).__name__}: {first.strip()[:200]})"
            finally:
                self._release(slot, dead=dead)
            if self._closed:
                raise RuntimeError("RayPool was closed while a run was in flight")
            if not dead:
                break
            with self._cond:
                self._counts["actor_deaths"] += 1
        else:
            # The node side keeps failing (not a compiler failure of this run): xlaprobe's own.
            with self._cond:
                self._counts["tasks"] += 1
            return Outcome(name, OutcomeKind.TOOL_ERROR,
                           error=f"run lost {1 + ACTOR_RETRIES} times: {why}")
        if isinstance(reply, tuple) and reply and reply[0] == "raise":
            raise reply[1]
        with self._cond:
            slot.known[fingerprint] = None
            slot.known.move_to_end(fingerprint)
            while len(slot.known) > _KNOWN_PER_ACTOR:
                slot.known.popitem(last=False)
            self._counts["tasks"] += 1
            self._counts["crashes"] += reply.kind == OutcomeKind.CRASH
            self._counts["timeouts"] += reply.kind == OutcomeKind.TIMEOUT
        return reply

    def _run_many(self, pairs: list[tuple[Program, str]],
                  timeout_s: float) -> Iterator[tuple[int, Outcome]]:
        settings = _jax_settings()  # read in the caller's thread (jax config contexts are per thread)
        results: queue.SimpleQueue[Any] = queue.SimpleQueue()
        pending = collections.deque(range(len(pairs)))
        stop = threading.Event()

        def drain() -> None:
            while not stop.is_set():
                try:
                    index = pending.popleft()  # deque.popleft is atomic
                except IndexError:
                    return
                program, spec = pairs[index]
                try:
                    results.put((index, self._dispatch(program, spec, spec, timeout_s, settings)))
                except BaseException as exc:
                    results.put(exc)
                    return

        threads = [threading.Thread(target=drain, daemon=True, name="xlaprobe-raypool")
                   for _ in range(min(self.size, len(pairs)))]
        try:
            yield from drained(threads, results, len(pairs))
        finally:
            # Runs already on an actor finish there (bounded by their limit); no new ones start.
            stop.set()
            started = time.monotonic()
            for thread in threads:
                thread.join(max(0.0, 1.0 - (time.monotonic() - started)))
