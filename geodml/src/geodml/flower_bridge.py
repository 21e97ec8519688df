"""Each data center as a Flower ClientApp (``pip install 'geodml[flower]'``), so a federation
simulated here moves to a Flower deployment unchanged: the algorithms run in a ServerApp and call
the DCs through Flower messages, each ClientApp runs the same DCWorker code as the in-process
default and the Ray actors, so the model and the simulated ledger are identical (bit for bit:
arrays travel as Flower ``Array`` records, which hold numpy's own .npy bytes, and scalars as
protobuf doubles and sint64, all lossless).

Protocol (message type ``query.geodml``):
  - setup: the ServerApp sends the federation spec (data spec, partition spec, number of DCs,
    seed, workers per DC; a few hundred bytes, never rows); each ClientApp loads its own rows
    (``node_config["partition-id"]`` names its partition, as in every Flower app), keeps the spec
    and its DCWorker's state in ``context.state`` and answers with its partition id and process
    id (a simulation's watchdog stops a hung ClientApp's Ray worker by it);
  - call: {method, arguments}; the ClientApp restores its DCWorker's state from
    ``context.state`` (a ClientApp is stateless between messages; Flower keeps ``context.state``
    per node), runs the method, stores the new state and replies with the result.

Measured per pool: ``payload_bytes`` (numpy nbytes of every array argument and result, as in
ray_pool) and ``serialized_bytes``: the bytes of every message in Flower's wire form, i.e. the
deflated object tree Flower pushes and pulls (Message, RecordDict, records, arrays and array
chunks, each with its header; ``flwr.supercore.inflatable``), to and from every DC, the hub's own
included (unlike the WAN ledger).

Runs on Flower's simulation engine (``flwr.simulation.run_simulation``, which starts Ray) by
run_federation(), and on Flower's Deployment Runtime by flower_deploy (a SuperLink and SuperNode
processes; there each SuperNode's node config also names ``rows-file``, its own rows, so its
ClientApps read nothing else). Tested with flwr 1.42.0 and ray 2.60.0 on Python 3.12. run_simulation is deprecated in
flwr 1.42 in favour of the ``flwr run`` CLI but is still its in-process simulation API.
"""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Callable

import numpy as np

from geodml.dcside import DC_OPERATIONS, DCOperations, DCWorker
from geodml.errors import GeodmlError

MESSAGE_TYPE = "query.geodml"
#: Seconds a FlowerPool waits for every DC's reply to one message before it gives up.
CALL_TIMEOUT_S = 300.0
_STATE = "geodml_state"
_STATE_ARRAYS = "geodml_state_arrays"


def _flwr():
    try:
        import flwr.app as app
    except ImportError:
        raise GeodmlError("Flower is not installed: pip install 'geodml[flower]'") from None
    return app


@dataclass(frozen=True)
class FederationSpec:
    """What a ClientApp needs to load its own rows (geodml's loaders, no rows sent): data spec
    (data.load_dataset), partition spec (partition.partition), k data centers, seed (of the data,
    the split and the mini-batch streams) and workers per DC (index order)."""

    data: str
    partition: str
    k: int
    seed: int
    workers: tuple[int, ...]

    def to_json(self) -> str:
        """The spec as JSON (sent in the setup message)."""
        return json.dumps(asdict(self), sort_keys=True)

    @staticmethod
    def from_json(s: str) -> "FederationSpec":
        """Inverse of to_json. Raises GeodmlError on a malformed spec."""
        try:
            d = json.loads(s)
            return FederationSpec(str(d["data"]), str(d["partition"]), int(d["k"]), int(d["seed"]),
                                  tuple(int(w) for w in d["workers"]))
        except (ValueError, KeyError, TypeError) as e:
            raise GeodmlError(f"malformed federation spec: {e}") from None


@lru_cache(maxsize=8)
def _worker(spec_json: str, index: int) -> DCWorker:
    """The DCWorker over partition ``index`` of the spec's data, loaded once per process (a Flower
    simulation runs ClientApps in long-lived Ray actors; the rows are read-only and every call
    restores the worker's mutable state first, so sharing the object is safe for sequential calls)."""
    from geodml.data import load_dataset
    from geodml.partition import partition, take_rows

    spec = FederationSpec.from_json(spec_json)
    if not 0 <= index < spec.k:
        raise GeodmlError(f"partition-id {index} is outside 0..{spec.k - 1}")
    ds = load_dataset(spec.data, seed=spec.seed)
    parts = partition(spec.partition, ds.X_train, ds.y_train, spec.k, seed=spec.seed, groups=ds.place_train)
    p = parts[index]
    return DCWorker(take_rows(ds.X_train, p), ds.y_train[p], spec.workers[index], index, spec.seed)


def save_rows(path: str, X, y: np.ndarray) -> None:
    """Write one data center's rows (X (n, d) dense or CSR, y (n,)) as an uncompressed .npz that
    load_rows reads without pickle: a SuperNode of a Flower deployment is given only its own."""
    import scipy.sparse as sp

    if sp.issparse(X):
        X = sp.csr_matrix(X)
        np.savez(path, y=y, data=X.data, indices=X.indices, indptr=X.indptr, shape=np.asarray(X.shape))
    else:
        np.savez(path, y=y, X=np.asarray(X))


def load_rows(path: str) -> tuple:
    """(X, y) from a save_rows file (no pickle). Raises GeodmlError on a missing or corrupt file."""
    import scipy.sparse as sp

    try:
        with np.load(path, allow_pickle=False) as f:
            if "X" in f:
                return f["X"], f["y"]
            return sp.csr_matrix((f["data"], f["indices"], f["indptr"]), shape=tuple(int(v) for v in f["shape"])), f["y"]
    except (OSError, ValueError, KeyError) as e:
        raise GeodmlError(f"cannot read the data center's rows file {path}: {e}") from None


@lru_cache(maxsize=8)
def _worker_from_file(path: str, index: int, workers: int) -> DCWorker:
    """The DCWorker over the rows of one save_rows file (a deployment's SuperNode holds only its own)."""
    X, y = load_rows(path)
    return DCWorker(X, y, workers, index, 0)


def _dc_worker(node_config, spec_json: str, index: int) -> DCWorker:
    """The worker of partition index: from the node's own rows file when its node config names one
    (``rows-file``: a Flower deployment), else loaded from the federation spec (the simulation)."""
    if "rows-file" in node_config:
        spec = FederationSpec.from_json(spec_json)
        return _worker_from_file(str(node_config["rows-file"]), index, spec.workers[index])
    return _worker(spec_json, index)


# --- values <-> Flower records ---------------------------------------------------------------
def encode_values(values: tuple) -> tuple[dict, dict]:
    """A tuple of positional values as (ConfigRecord items, ArrayRecord items) for Flower:
    numpy arrays go to the arrays (key = position), floats, ints, strings and tuples of floats to
    the config items, with "kinds" listing each position's kind (a array, f float, i int, s str,
    t float tuple, n None). Lossless. Raises GeodmlError for another type."""
    config: dict = {}
    arrays: dict = {}
    kinds = []
    for i, v in enumerate(values):
        key = str(i)
        if isinstance(v, np.ndarray):
            arrays[key] = v
            kinds.append("a")
        elif v is None:
            kinds.append("n")
        elif isinstance(v, (bool, np.bool_)):
            raise GeodmlError(f"cannot send a bool at position {i}")
        elif isinstance(v, (int, np.integer)):
            config[key] = int(v)
            kinds.append("i")
        elif isinstance(v, (float, np.floating)):
            config[key] = float(v)
            kinds.append("f")
        elif isinstance(v, str):
            config[key] = v
            kinds.append("s")
        elif isinstance(v, tuple) and all(isinstance(x, (float, np.floating)) for x in v):
            config[key] = [float(x) for x in v]
            kinds.append("t")
        else:
            raise GeodmlError(f"cannot send a {type(v).__name__} at position {i}")
    config["kinds"] = "".join(kinds)
    return config, arrays


def decode_values(config, arrays) -> tuple:
    """Inverse of encode_values, from a ConfigRecord and an ArrayRecord (or plain dicts of
    values and numpy arrays)."""
    out = []
    for i, k in enumerate(str(config["kinds"])):
        key = str(i)
        if k == "a":
            a = arrays[key]
            out.append(a if isinstance(a, np.ndarray) else a.numpy())
        elif k == "n":
            out.append(None)
        elif k == "t":
            out.append(tuple(float(x) for x in config[key]))
        else:
            out.append({"i": int, "f": float, "s": str}[k](config[key]))
    return tuple(out)


def to_recorddict(values: tuple, extra: dict | None = None):
    """A Flower RecordDict holding values (encode_values) under "values" and "arrays", plus the
    config items in extra (e.g. the method name) under "call"."""
    app = _flwr()
    config, arrays = encode_values(values)
    rd = app.RecordDict({"values": app.ConfigRecord(config),
                         "arrays": app.ArrayRecord({k: app.Array(v) for k, v in arrays.items()})})
    if extra:
        rd["call"] = app.ConfigRecord(extra)
    return rd


def from_recorddict(rd) -> tuple:
    """The values of a RecordDict made by to_recorddict."""
    return decode_values(rd["values"], rd["arrays"])


def _save_state(context, spec_json: str, worker: DCWorker) -> None:
    app = _flwr()
    scalars, arrays = worker.get_state()
    context.state[_STATE] = app.ConfigRecord({"spec": spec_json, "index": worker.index, **scalars})
    context.state[_STATE_ARRAYS] = app.ArrayRecord({k: app.Array(np.asarray(v)) for k, v in arrays.items()})


def handle(message, context):
    """The ClientApp's handler of ``query.geodml`` messages (see the module docstring): setup or
    a DCWorker method call. Returns the reply Message. Raises GeodmlError for a call before setup
    or an unknown method."""
    app = _flwr()
    call = message.content["call"]
    if call["method"] == "setup":
        spec_json = str(call["spec"])
        index = int(context.node_config["partition-id"])
        worker = _dc_worker(context.node_config, spec_json, index)
        worker.reset(FederationSpec.from_json(spec_json).seed)
        _save_state(context, spec_json, worker)
        # The pid lets a simulation's watchdog stop a ClientApp that hangs (FlowerPool.kill_stuck).
        return app.Message(to_recorddict((index, os.getpid())), reply_to=message)
    if _STATE not in context.state:
        raise GeodmlError("a geodml call reached a ClientApp before its setup message")
    st = context.state[_STATE]
    spec_json = str(st["spec"])
    worker = _dc_worker(context.node_config, spec_json, int(st["index"]))
    scalars = {k: st[k] for k in ("rng", "lr", "adam_t", "ef_spec") if k in st}
    worker.set_state(scalars, {k: a.numpy() for k, a in context.state[_STATE_ARRAYS].items()})
    method = str(call["method"])
    if method not in DC_OPERATIONS:  # only the declared operations (dcside.DCOperations)
        raise GeodmlError(f"unknown DC method {method!r}")
    result = getattr(worker, method)(*from_recorddict(message.content))
    _save_state(context, spec_json, worker)
    single = not isinstance(result, tuple)
    return app.Message(to_recorddict((result,) if single else result, {"single": single}), reply_to=message)


def make_client_app():
    """A Flower ClientApp whose ``query.geodml`` handler is handle(). Raises GeodmlError if Flower is
    not installed."""
    _flwr()
    from flwr.clientapp import ClientApp

    capp = ClientApp()
    capp.query("geodml")(handle)
    return capp


def message_nbytes(message) -> int:
    """Bytes of a Flower Message in Flower's wire form: the deflated size of every object of its
    tree (message, records, arrays, array chunks), each counted once as Flower sends it once."""
    try:
        from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects
    except ImportError:  # flwr before 1.42 (the gRPC deployment measurement ran on 1.25)
        from flwr.common.inflatable import get_all_nested_objects

    return sum(len(o.deflate()) for o in get_all_nested_objects(message).values())


def _nbytes(values: tuple) -> int:
    return sum(int(v.nbytes) for v in values if isinstance(v, np.ndarray))


def _reason(text: str) -> str:
    """One line from a ClientApp's error reason: Flower's simulation wraps the exception in Ray's
    multi-line traceback ending in "... Message: <the exception's text>'>"."""
    text = str(text)
    if "Message: " in text:
        text = text.rsplit("Message: ", 1)[1].strip().removesuffix("'>")
    lines = [x.strip() for x in text.strip().splitlines() if x.strip()]
    line = lines[-1] if lines else "no reason given"
    # Ray explains a dead worker in a paragraph (exit detail, OOM advice): its first sentence says it.
    if len(line) > 200 and ". " in line:
        line = line.split(". ", 1)[0] + "."
    return line


def _shutdown_ray() -> None:
    """Stop the Ray instance a failed simulation left running, so the process can exit."""
    try:
        import ray

        if ray.is_initialized():
            ray.shutdown()
    except Exception:  # noqa: BLE001 - best effort after a failure that is being reported
        pass


def _is_ray_worker(pid: int) -> bool:
    """Whether ``pid`` is a live Ray worker process of this machine (Linux /proc; False elsewhere)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read()
    except OSError:
        return False
    # A Ray worker starts as default_worker.py and renames itself "ray::<Actor>.<method>".
    return cmd.startswith(b"ray::") or b"ray/_private/workers/default_worker.py" in cmd


class FlowerPool(DCOperations):
    """The DCs as Flower ClientApps, called from a ServerApp through its Grid (same interface as
    dcside.InProcessPool and ray_pool.RayPool). names: DC names in index order; the node whose
    ClientApp holds partition i plays DC names[i]. call_timeout: seconds to wait for every DC's
    reply to one message (setup included). kill_stuck: on a timeout, SIGKILL the Ray worker
    processes that ran the setups (only for Flower's simulation engine on this machine, where a
    hung ClientApp would otherwise keep the engine from ever stopping; never in a deployment).
    Raises GeodmlError if fewer nodes than DCs connect within wait_seconds, a ClientApp replies
    with an error, or a DC does not reply within call_timeout."""

    executor = "flower"

    def __init__(self, grid, spec: FederationSpec, names: list[str], wait_seconds: float = 120.0,
                 call_timeout: float = CALL_TIMEOUT_S, kill_stuck: bool = False):
        self.grid, self.names = grid, list(names)
        self.call_timeout, self.kill_stuck = float(call_timeout), kill_stuck
        self.worker_pids: set[int] = set()
        self.name_of: dict[int, str] = {}
        self.payload_bytes = 0
        self.serialized_bytes = 0
        self.calls = 0
        self.wall_seconds = 0.0
        # One entry per call: method, start and end (unix seconds), the arrays' bytes sent to
        # ("down") and received from ("up") each DC; a deployment sets the wire counts beside it.
        self.trace: list[dict] = []
        self.loopback_bytes = None  # Flower's simulation runs over Ray; its own bytes are counted instead
        t0 = time.perf_counter()
        nodes: list[int] = []
        while len(nodes) < len(names):
            nodes = sorted(grid.get_node_ids())
            if time.perf_counter() - t0 > wait_seconds:
                raise GeodmlError(f"only {len(nodes)} Flower nodes connected within {wait_seconds:g} s, {len(names)} needed")
            if len(nodes) < len(names):
                time.sleep(0.05)
        # The setup starts the Ray workers and loads each DC's rows: it gets wait_seconds too.
        replies = self._exchange({n: to_recorddict((), {"method": "setup", "spec": spec.to_json()}) for n in nodes},
                                 count=False, timeout=max(self.call_timeout, wait_seconds))
        setups = {n: from_recorddict(r.content) for n, r in replies.items()}
        self.worker_pids = {int(v[1]) for v in setups.values() if len(v) > 1}
        by_index = {int(v[0]): n for n, v in setups.items()}
        missing = [i for i in range(len(names)) if i not in by_index]
        if missing:
            raise GeodmlError(f"no Flower node holds partition(s) {missing}")
        self.node_of = {name: by_index[i] for i, name in enumerate(self.names)}
        self.name_of = {n: name for name, n in self.node_of.items()}

    def _exchange(self, contents: dict, count: bool = True, timeout: float | None = None) -> dict:
        """Send contents[node] to each node and wait for every reply (at most timeout seconds,
        None: call_timeout): {node: reply}."""
        timeout = self.call_timeout if timeout is None else timeout
        app = _flwr()
        msgs = [app.Message(c, dst_node_id=n, message_type=MESSAGE_TYPE) for n, c in contents.items()]
        if count:
            self.serialized_bytes += sum(message_nbytes(m) for m in msgs)
        replies = {}
        # Without a timeout the Grid waits for a hung ClientApp forever (its messages live 12 h).
        for r in self.grid.send_and_receive(msgs, timeout=timeout):
            if r.has_error():
                raise GeodmlError(f"a Flower ClientApp failed: {_reason(r.error.reason)}")
            replies[r.metadata.src_node_id] = r
        if len(replies) < len(msgs):
            silent = [n for n in contents if n not in replies]
            self._kill_stuck()
            if not self.name_of:  # still in the setup: nodes have no DC names yet
                raise GeodmlError(f"{len(silent)} of {len(contents)} Flower ClientApps did not answer "
                                  f"the setup within {timeout:g} s")
            raise GeodmlError(f"no reply from the Flower ClientApp(s) of {', '.join(self.name_of[n] for n in silent)} "
                              f"within {timeout:g} s (a hung ClientApp, or ones queued behind it)")
        if count:
            self.serialized_bytes += sum(message_nbytes(r) for r in replies.values())
        return replies

    def call(self, method: str, args: dict | tuple = ()) -> dict:
        """Call method on every DC's ClientApp (args: one tuple for all, or {name: tuple});
        {name: result}."""
        t0, start = time.perf_counter(), time.time()
        contents, down, up = {}, {}, {}
        for name in self.names:
            a = tuple(args[name] if isinstance(args, dict) else args)
            down[name] = _nbytes(a)
            contents[self.node_of[name]] = to_recorddict(a, {"method": method})
        replies = self._exchange(contents)
        out = {}
        for name in self.names:
            r = replies[self.node_of[name]]
            vals = from_recorddict(r.content)
            up[name] = _nbytes(vals)
            out[name] = vals[0] if bool(r.content["call"]["single"]) else vals
        self.payload_bytes += sum(down.values()) + sum(up.values())
        self.calls += 1
        self.wall_seconds += time.perf_counter() - t0
        self.trace.append({"method": method, "start": start, "end": time.time(), "down": down, "up": up})
        return out

    def _kill_stuck(self) -> None:
        """Stop the simulation's Ray workers that ran ClientApps, so that the engine, which waits
        for every running ClientApp before it stops, can end (see kill_stuck)."""
        if not self.kill_stuck:
            return
        for pid in self.worker_pids:
            if pid != os.getpid() and _is_ray_worker(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass

    def close(self) -> None:
        """Nothing to release: the simulation ends when the ServerApp's main returns."""


def run_federation(spec: FederationSpec, names: list[str], work: Callable[[FlowerPool], None],
                   num_cpus: int | None = None, call_timeout: float = CALL_TIMEOUT_S) -> None:
    """Start Flower's simulation engine with one SuperNode per DC running make_client_app(),
    and a ServerApp whose main builds a FlowerPool and calls work(pool) (the algorithms run
    there). Returns when work returns; re-raises what work raised. num_cpus: CPUs of the Ray
    instance Flower starts (None: Ray's default); every ClientApp may use them all, so Ray runs
    one ClientApp at a time (DCs' computations are short; messages dominate). call_timeout:
    seconds every DC has to answer one message; a DC that does not (a hung ClientApp, a stuck
    worker) ends the run with GeodmlError after its Ray worker is stopped. A ClientApp that raises
    or whose worker process dies ends it with GeodmlError at once. Raises GeodmlError if Flower is
    not installed, a DC failed or did not answer, or the run ended without work finishing."""
    _flwr()
    import logging

    from flwr.serverapp import ServerApp
    from flwr.simulation import run_simulation

    result: dict = {}

    def main(grid, context) -> None:
        try:
            pool = FlowerPool(grid, spec, names, call_timeout=call_timeout, kill_stuck=True)
            work(pool)
            result["done"] = True
        except BaseException as e:  # handed to the caller: Flower would only log it
            result["error"] = e

    sapp = ServerApp()
    sapp.main()(main)
    cpus = num_cpus or 1
    backend = {"client_resources": {"num_cpus": cpus, "num_gpus": 0.0},
               "init_args": {"num_cpus": cpus, "log_to_driver": False, "configure_logging": False}}
    flwr_log = logging.getLogger("flwr")
    level = flwr_log.level
    # Flower logs every round at INFO and a failing ClientApp's traceback at ERROR; geodml prints
    # its own progress and turns every failure into one line (GeodmlError).
    flwr_log.setLevel(logging.CRITICAL)
    try:
        # run_simulation also logs a deprecation notice pointing to Flower's CLI (`flwr run`); it is
        # still Flower's in-process simulation API in 1.42.
        run_simulation(sapp, make_client_app(), num_supernodes=spec.k, backend_config=backend)
    except RuntimeError as e:
        if "error" in result:
            raise result["error"] from None
        # Flower wraps the engine's failure (e.g. Ray's node not starting on an overloaded
        # machine) in generic RuntimeErrors: name the innermost cause on one line.
        root: BaseException = e
        while root.__cause__ is not None:
            root = root.__cause__
        _shutdown_ray()
        reason = (str(root).strip().splitlines() or [type(root).__name__])[0]
        raise GeodmlError(f"Flower's simulation engine failed: {reason}") from None
    finally:
        flwr_log.setLevel(level)
    if "error" in result:
        raise result["error"]
    if not result.get("done"):
        raise GeodmlError("the Flower simulation ended before the algorithms finished (see Flower's log)")
