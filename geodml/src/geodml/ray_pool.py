"""Each data center as a separate process: one Ray actor per DC running the same DCWorker code
as the in-process default, so results and the simulated ledger are identical while wall time and
the bytes that really crossed process boundaries are measured (``pip install 'geodml[ray]'``).

Measured per pool: ``payload_bytes`` - the nbytes of every numpy array sent to or returned by an
actor (the hub's own DC included, unlike the WAN ledger); ``serialized_bytes`` - the size of
every argument tuple and every result as Ray's own serializer writes them (pickle protocol 5
with numpy buffers out of band, plus Ray's framing): what really crosses between the driver and
the actors, through the task's gRPC message over loopback for small objects or Ray's
shared-memory object store for large ones; ``loopback_bytes`` - the growth of the
loopback interface's received-bytes counter (/proc/net/dev, Linux) while the pool worked: this
includes Ray's own control traffic and any other process on the machine using loopback, so it is
an upper bound, reported beside the simulated bytes rather than compared with them.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from geodml.dcside import DCOperations, DCWorker
from geodml.errors import GeodmlError


def loopback_rx_bytes() -> int | None:
    """Bytes received so far on the loopback interface (Linux /proc/net/dev), None elsewhere."""
    try:
        for line in Path("/proc/net/dev").read_text().splitlines():
            name, _, rest = line.partition(":")
            if name.strip() == "lo":
                return int(rest.split()[0])
    except OSError:
        return None
    return None


def _pickle5_nbytes(x) -> int:
    """Bytes of x pickled with protocol 5, numpy buffers out of band (Ray's format without its
    framing); used when Ray's serialization context is not reachable."""
    import pickle

    bufs: list = []
    head = pickle.dumps(x, protocol=5, buffer_callback=bufs.append)
    return len(head) + sum(b.raw().nbytes for b in bufs)


def _nbytes(x) -> int:
    if isinstance(x, np.ndarray):
        return int(x.nbytes)
    if isinstance(x, (tuple, list)):
        return sum(_nbytes(v) for v in x)
    return 0


class RayPool(DCOperations):
    """One Ray actor per DC (num_cpus=0 each, so K actors fit on a small machine). Starts a local
    Ray instance if none is running and shuts it down on close(). Raises GeodmlError if Ray is not
    installed. num_cpus: the CPUs a Ray started here may use (None: Ray's default, every core)."""

    executor = "ray"

    def __init__(self, dcs, seed: int = 0, num_cpus: int | None = None):
        try:
            import ray
        except ImportError:
            raise GeodmlError("Ray is not installed: pip install 'geodml[ray]'") from None
        self._ray = ray
        self._started = False
        if not ray.is_initialized():
            ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False, configure_logging=False)
            self._started = True
        actor = ray.remote(num_cpus=0)(DCWorker)
        self.names = [dc.name for dc in dcs]
        self.actors = {dc.name: actor.remote(dc.X, dc.y, dc.workers, i, seed) for i, dc in enumerate(dcs)}
        # wait until every actor holds its rows, so setup is not timed as training
        ray.get([a.__ray_ready__.remote() for a in self.actors.values()])
        self.payload_bytes = 0
        self.serialized_bytes = 0
        self._serialize = self._serializer()
        self.calls = 0
        self.wall_seconds = 0.0
        self._lo0 = loopback_rx_bytes()

    def _serializer(self):
        """The function giving an object's size as Ray serializes it (Ray's serialization context;
        its module path is private, so pickle protocol 5 stands in where it moved)."""
        try:
            ctx = self._ray._private.worker.global_worker.get_serialization_context()
            ctx.serialize(np.zeros(1)).total_bytes  # noqa: B018 - probe the API once
            return lambda x: int(ctx.serialize(x).total_bytes)
        except (AttributeError, TypeError):
            return _pickle5_nbytes

    @property
    def loopback_bytes(self) -> int | None:
        """Loopback bytes received since the pool started (see the module docstring)."""
        now = loopback_rx_bytes()
        return None if now is None or self._lo0 is None else now - self._lo0

    def call(self, op: str, args: dict | tuple = ()) -> dict:
        """Call DCWorker.<op> on every DC's actor in parallel; {name: result}."""
        t0 = time.perf_counter()
        refs = {}
        for n in self.names:
            a = args[n] if isinstance(args, dict) else args
            self.payload_bytes += _nbytes(a)
            self.serialized_bytes += self._serialize(tuple(a))
            refs[n] = getattr(self.actors[n], op).remote(*a)
        results = self._ray.get(list(refs.values()))
        self.payload_bytes += sum(_nbytes(r) for r in results)
        self.serialized_bytes += sum(self._serialize(r) for r in results)
        self.calls += 1
        self.wall_seconds += time.perf_counter() - t0
        return dict(zip(refs, results))

    def close(self) -> None:
        """Kill the actors; shut Ray down if this pool started it."""
        for a in self.actors.values():
            self._ray.kill(a)
        self.actors = {}
        if self._started:
            self._ray.shutdown()
