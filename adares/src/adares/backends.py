"""Where independent jobs run: here, in order ("local", the default, no cluster), or as Ray
tasks of one CPU each ("ray", ``pip install 'adares[ray]'``) on the running Ray instance or on
one started for the call with ``jobs`` CPUs. Used by ``replay --clusters`` (one job per
(cluster, policy) pair) and ``compare`` (one job per policy)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from adares.errors import InputError

BACKENDS = ("local", "ray")


@contextlib.contextmanager
def ray_session(workers: int | None) -> Iterator[Any]:
    """The ``ray`` module, initialized: the running instance, or one started here with
    ``workers`` CPUs (None: every core) and shut down on exit. Raises InputError when Ray is
    not installed."""
    try:
        import ray
    except ImportError:
        raise InputError("--backend ray: Ray is not installed (pip install 'adares[ray]')") from None
    started = False
    if not ray.is_initialized():
        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
        started = True
    try:
        yield ray
    finally:
        if started:
            ray.shutdown()


def ray_result(ray: Any, ref: Any) -> Any:
    """``ray.get(ref)``; bad input found in a task reads as it would locally (the InputError
    itself, one line)."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        if isinstance(exc.cause, InputError):
            raise exc.cause from None
        raise


def map_jobs(fn: Callable[..., Any], args: list[tuple], backend: str = "local",
             workers: int | None = None,
             on_result: Callable[[int, Any], None] | None = None) -> list[Any]:
    """``[fn(*a) for a in args]``, in this process ("local") or as Ray tasks ("ray"; ``fn``
    must be a module-level function). ``on_result(i, result)`` as each finishes (on Ray, in
    the order they finish). Results come back in ``args`` order either way. Raises
    InputError for an unknown backend or when Ray is missing."""
    if backend not in BACKENDS:
        raise InputError(f"unknown backend {backend!r} ({', '.join(BACKENDS)})")
    out: list[Any] = [None] * len(args)
    if backend == "local":
        for i, a in enumerate(args):
            out[i] = fn(*a)
            if on_result is not None:
                on_result(i, out[i])
        return out
    with ray_session(workers) as ray:
        task = ray.remote(num_cpus=1, max_retries=0)(fn)
        refs = {task.remote(*a): i for i, a in enumerate(args)}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                i = refs[ref]
                out[i] = ray_result(ray, ref)
                if on_result is not None:
                    on_result(i, out[i])
    return out
