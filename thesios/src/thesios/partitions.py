"""Work split by (disk class, day) and the backends that run it: in process (default) or on Ray.

A partition's result depends only on the fleet spec, the rate, the seed and the partition itself
(each partition draws from its own ``numpy.random.Generator`` seeded by ``[seed, 10, class, day]``),
so the same functions give the same bits in one process or spread over a Ray cluster, in any
order. The local backend needs no cluster; Ray is the optional extra ``thesios[ray]``
(``ray.init`` joins the cluster named by ``RAY_ADDRESS`` when it is set, else starts one here).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from thesios.errors import ThesiosInputError
from thesios.fleet import FleetGenerator, FleetSpec
from thesios.requests import Requests

BACKENDS = ("local", "ray")


def partitions(spec: FleetSpec) -> list[tuple[int, int]]:
    """The (class index, day) partitions of a fleet, day-major: [(0, 0), (1, 0), ..., (C-1, D-1)]."""
    return [(c, d) for d in range(spec.days) for c in range(len(spec.classes))]


def sample_partition(spec: FleetSpec, rate: float, seed: int, class_index: int, day: int) -> Requests:
    """Bernoulli samples at ``rate`` of every disk of class ``class_index`` on ``day``.

    Returns a :class:`Requests` batch (times absolute seconds, rows not sorted), drawn from the
    generator seeded by ``[seed, 10, class_index, day]`` alone.

    Raises:
        ThesiosInputError: p outside (0, 1], or a class or day outside the fleet.
    """
    if not 0 <= class_index < len(spec.classes):
        raise ThesiosInputError(f"class {class_index} outside the fleet's {len(spec.classes)} classes")
    ids = np.arange(class_index * spec.disks_per_class, (class_index + 1) * spec.disks_per_class)
    rng = np.random.default_rng([seed, 10, class_index, day])
    return FleetGenerator(spec).generate(ids, day, rate, rng)


class Backend(Protocol):
    """Runs one function over many argument tuples; results in the order of the tuples."""

    name: str

    def map(self, fn: Callable[..., Any], items: Sequence[tuple], shared: tuple = ()) -> list:
        """``[fn(*shared, *item) for item in items]``; ``shared`` is sent once, not per item."""
        ...

    def close(self) -> None:
        """Release what the backend started."""
        ...


_SHARED: tuple = ()  # a pool worker's copy of the shared arguments, sent once per worker


def _set_shared(fn: Callable[..., Any], shared: tuple) -> None:
    global _SHARED
    _SHARED = (fn, shared)


def _call_shared(item: tuple) -> Any:
    fn, shared = _SHARED
    return fn(*shared, *item)


class LocalBackend:
    """On this machine: in this process, one item after the other (``jobs=1``, the default; no
    cluster), or in a pool of ``jobs`` worker processes, ``shared`` sent once to each worker.

    Raises:
        ThesiosInputError: ``jobs < 1``.
    """

    name = "local"

    def __init__(self, jobs: int = 1) -> None:
        if jobs < 1:
            raise ThesiosInputError(f"--jobs must be >= 1, got {jobs}")
        self.jobs = jobs

    @property
    def in_process(self) -> bool:
        """Whether items run in this process (so a progress callback in an item is seen)."""
        return self.jobs == 1

    def map(self, fn: Callable[..., Any], items: Sequence[tuple], shared: tuple = ()) -> list:
        """``[fn(*shared, *item) for item in items]``, in item order."""
        if self.jobs == 1 or len(items) <= 1:
            return [fn(*shared, *item) for item in items]
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # forkserver: fork() of a process with threads (numpy's, pyarrow's) can deadlock.
        ctx = multiprocessing.get_context("forkserver")
        with ProcessPoolExecutor(min(self.jobs, len(items)), mp_context=ctx, initializer=_set_shared, initargs=(fn, shared)) as pool:
            return list(pool.map(_call_shared, items))

    def close(self) -> None:
        """Nothing to release (a pool lives for one map)."""


class RayBackend:
    """One Ray task per item; ``shared`` objects go to Ray's object store once (``ray.put``).

    Joins a running Ray instance (or ``RAY_ADDRESS``'s cluster) if there is one, else starts a local
    one with ``num_cpus`` CPUs (None: every core) and shuts it down on :meth:`close`.

    Raises:
        ThesiosInputError: Ray is not installed (``pip install 'thesios[ray]'``).
    """

    name = "ray"

    def __init__(self, num_cpus: int | None = None) -> None:
        try:
            import ray
        except ImportError:
            raise ThesiosInputError("--backend ray needs Ray: pip install 'thesios[ray]'") from None
        self._ray = ray
        self._started = False
        if not ray.is_initialized():
            ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False, configure_logging=False)
            self._started = True
        self._remote: dict[Callable, Any] = {}

    def map(self, fn: Callable[..., Any], items: Sequence[tuple], shared: tuple = ()) -> list:
        """Run ``fn(*shared, *item)`` as one Ray task per item; results in item order."""
        if fn not in self._remote:
            self._remote[fn] = self._ray.remote(fn)
        refs = [self._ray.put(s) for s in shared]
        return self._ray.get([self._remote[fn].remote(*refs, *item) for item in items])

    def close(self) -> None:
        """Shut down the Ray instance this backend started (not one it joined)."""
        if self._started:
            self._ray.shutdown()
            self._started = False


def make_backend(name: str, num_cpus: int | None = None, jobs: int = 1) -> Backend:
    """The backend called ``name`` (``local`` with ``jobs`` processes, or ``ray``).

    Raises:
        ThesiosInputError: an unknown name, ``jobs < 1``, or ``ray`` without Ray installed.
    """
    if name == "local":
        return LocalBackend(jobs)
    if name == "ray":
        return RayBackend(num_cpus=num_cpus or (jobs if jobs > 1 else None))
    raise ThesiosInputError(f"--backend must be one of {', '.join(BACKENDS)}, got {name!r}")


def sample_fleet(spec: FleetSpec, rate: float, seed: int, backend: Backend | None = None) -> Requests:
    """Bernoulli samples at ``rate`` of every disk-day of the fleet, one task per (class, day).

    Rows are the partitions' batches concatenated day-major (:func:`partitions`), whatever the
    backend; the result is the same bits on every backend.
    """
    backend = backend or LocalBackend()
    parts = backend.map(sample_partition, partitions(spec), shared=(spec, rate, seed))
    return Requests.concat(parts)
