"""Which worker pool runs a campaign's configurations: the local one, or one over Ray."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xlaprobe.errors import InvalidArgument

#: Names `make_pool` takes (``xlaprobe fuzz --backend``).
BACKENDS = ("local", "ray")


def check_backend(backend: str, address: str | None = None) -> None:
    """Refuse a backend that cannot run here, cheaply and before any work starts.

    Raises:
        InvalidArgument: unknown `backend`; `address` without ``ray``; Ray not installed;
            `address` malformed or nobody listening there.
    """
    if backend not in BACKENDS:
        raise InvalidArgument(f"--backend must be one of {', '.join(BACKENDS)}, got '{backend}'")
    if backend == "local":
        if address is not None:
            raise InvalidArgument("--address names a Ray cluster: use it with --backend ray")
        return
    # Ray's pool imports jax and ray: the CLI loads this module for `--help` too.
    from xlaprobe.ray_pool import check_address, check_reachable, import_ray
    if address is not None:
        check_address(address)  # a malformed address is wrong whether or not Ray is here
    import_ray()
    if address is not None:
        check_reachable(address)


def make_pool(backend: str = "local", size: int = 1, timeout_s: float = 600.0, *,
              preload: Sequence[str] = (), address: str | None = None) -> Any:
    """A worker pool of `backend`: a `WorkerPool` (``local``, the default) or an
    `xlaprobe.ray_pool.RayPool` (``ray``: `size` Ray actors, each hosting an isolated worker).

    Args:
        backend: ``local`` or ``ray``.
        size: workers per isolation group (local) or actors (ray), >= 1.
        timeout_s: default per-run limit (s).
        preload: modules every worker imports at start-up.
        address: the Ray cluster (``HOST:PORT``, ``ray://HOST:PORT``, ``auto``); None: a local
            one. Only with ``ray``.

    Raises:
        InvalidArgument: unknown backend; `address` without ``ray``; Ray missing or unreachable;
            bad `size` or `timeout_s`.
    """
    check_backend(backend, address)
    if backend == "local":
        from xlaprobe.workers import WorkerPool  # imports jax: loaded to run, not for --help
        return WorkerPool(size=size, timeout_s=timeout_s, preload=preload)
    from xlaprobe.ray_pool import RayPool  # imports jax (and ray): loaded to run only
    return RayPool(size=size, timeout_s=timeout_s, preload=preload, address=address)
