"""Where the data centers compute during ``geodml compare``: ``local`` (every DC's DCWorker in
this process, the default), ``ray`` (one Ray actor per DC, ray_pool.RayPool) or ``flower`` (one
Flower ClientApp per DC on Flower's simulation engine, flower_bridge.FlowerPool) or
``flower-deployment`` (a SuperLink and one SuperNode process per DC, flower_deploy; compare runs it
itself, as the algorithms then run in the deployment's ServerApp process). Each gives the
algorithms a dcside.Pool; the results and the simulated ledger are the same on all four, while
the others add measured wall time and bytes.
"""

from __future__ import annotations

import importlib.util
import math
from typing import Callable

from geodml.errors import GeodmlError

BACKENDS = ("local", "ray", "flower", "flower-deployment")


def check(backend: str, jobs: int | None, call_timeout: float) -> None:
    """Validate a backend choice before any work: the name, --jobs, the Flower call timeout and
    that the backend's packages are installed.

    Args:
        backend: one of BACKENDS.
        jobs: CPUs the ray or flower backend may use (None: its default); the local backend runs
            in this process, so only None or 1.
        call_timeout: seconds a Flower ClientApp has to answer one message (> 0, finite).

    Raises:
        GeodmlError: an unknown backend, a bad --jobs or timeout, or a backend not installed.
    """
    if backend not in BACKENDS:
        raise GeodmlError(f"unknown backend {backend!r} (use {', '.join(BACKENDS)})")
    if jobs is not None and jobs < 1:
        raise GeodmlError(f"--jobs must be >= 1, got {jobs}")
    if backend == "local" and jobs not in (None, 1):
        raise GeodmlError("--jobs needs --backend ray or flower (the local backend runs in this process)")
    if backend == "flower-deployment" and jobs is not None:
        raise GeodmlError("--jobs does not apply to --backend flower-deployment (one process per data center)")
    # Values first: a wrong one is wrong whether or not Flower is installed.
    if not (math.isfinite(call_timeout) and call_timeout > 0):
        raise GeodmlError(f"--flower-timeout must be a positive number of seconds, got {call_timeout:g}")
    if backend == "ray" and importlib.util.find_spec("ray") is None:
        raise GeodmlError("--backend ray needs Ray: pip install 'geodml[ray]'")
    if backend == "flower-deployment" and importlib.util.find_spec("flwr") is None:
        raise GeodmlError("--backend flower-deployment needs Flower: pip install 'geodml[flower]'")
    if backend == "flower":
        if importlib.util.find_spec("flwr") is None:
            raise GeodmlError("--backend flower needs Flower: pip install 'geodml[flower]'")
        if importlib.util.find_spec("ray") is None:  # Flower's simulation engine runs on Ray
            raise GeodmlError("--backend flower needs Ray for Flower's simulation engine: pip install 'geodml[flower]'")


def run_on(backend: str, dcs: list, seed: int, work: Callable[[object], None], *, jobs: int | None = None,
           flower_spec=None, call_timeout: float = 300.0, progress: Callable[[str], None] = lambda m: None) -> None:
    """Call work(pool) with the DCs on ``backend``; pool is None for local (each algorithm then
    builds a fresh dcside.InProcessPool), a started RayPool (closed afterwards) or a FlowerPool
    inside a running Flower simulation (work runs in its ServerApp).

    Args:
        backend: one of BACKENDS (see check()).
        dcs: network.DataCenter list, in the order of the partitions.
        seed: the run's seed (mini-batch streams).
        work: what to run; its exceptions propagate.
        jobs: CPUs for Ray or Flower (None: Ray's default; Flower: 1).
        flower_spec: flower_bridge.FederationSpec (how each ClientApp loads its own rows).
        call_timeout: seconds each Flower ClientApp has to answer one message.
        progress: one-line progress messages.

    Raises:
        GeodmlError: the backend failed to start or a DC failed (Ray, Flower).
    """
    if backend == "flower-deployment":  # its algorithms run in another process: no work callback
        raise GeodmlError("the flower-deployment backend runs through flower_deploy.run_deployment, not run_on")
    if backend == "ray":
        from geodml.ray_pool import RayPool

        progress("starting Ray: one actor per data center")
        pool = RayPool(dcs, seed, num_cpus=jobs)
        try:
            work(pool)
        finally:
            pool.close()
    elif backend == "flower":
        from geodml.flower_bridge import run_federation

        progress("starting Flower's simulation engine: one ClientApp per data center")
        run_federation(flower_spec, [dc.name for dc in dcs], work, num_cpus=jobs, call_timeout=call_timeout)
    else:
        work(None)
