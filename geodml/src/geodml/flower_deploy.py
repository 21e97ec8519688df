"""geodml on Flower's Deployment Runtime (``geodml compare --backend flower-deployment``): a
SuperLink process (the aggregator), one SuperNode process per data center, the algorithms in a
ServerApp process the SuperLink starts and every DC computation in a ClientApp process its
SuperNode starts, all on this machine over loopback. Each SuperNode is given only its own DC's
rows (a file its node config names, flower_bridge.save_rows); the ClientApp code is
flower_bridge.handle, the same DCWorker code as every other backend, so the model is the
in-process one bit for bit.

Bytes on the wire: each SuperNode talks to the SuperLink through its own counting TCP relay
(wire.CountingRelay), which timestamps every chunk it forwards. The ServerApp records when each
round's messages left and their replies arrived (FlowerPool.trace), so the relay's bytes are
split per round and per data center and set beside the ledger's count (the arrays' bytes) of the
same round; bytes outside every round (node registration, the app's download, polls and
heartbeats between runs of the algorithms) are reported as control traffic.

In flwr 1.42 (the version the flower extra pins) the Fleet API (SuperNode <-> SuperLink) is
HTTP/1.1 served by uvicorn, not gRPC: ``--fleet-api-type grpc-rere`` is accepted only as a
deprecated no-op; messages travel as Flower's protobuf objects in HTTP request and response
bodies. With an older flwr (fleet_over_grpc; measured with 1.25.0) the SuperLink is started with
``--fleet-api-type grpc-rere`` and each SuperNode holds one HTTP/2 connection to it. WAN latency and bandwidth stay modelled
(this kernel has no netem): loopback wall time is not WAN time.

Flow: the compare process writes the job (the compare config as JSON, the result path) and each
DC's rows file, starts the processes, ``flwr run``s a generated Flower app whose ServerApp
(server_main) rebuilds the federation from the config, runs the algorithms through a FlowerPool
and writes its rows, the planner's iteration counts and the call trace as JSON; the compare
process then adds the wire counts (attribute_wire). Tested with flwr 1.42.0 (HTTP) and 1.25.0
(gRPC) on Python 3.12.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Callable

from geodml.errors import GeodmlError
from geodml.wire import DOWN, UP, CountingRelay, RelayCount

#: Seconds the SuperLink has to start listening and the run has to start.
START_TIMEOUT_S = 120.0
_APP_MODULE = "geodml_flower_app"
_PYPROJECT = f"""[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "geodml-flower-app"
version = "0.1.0"
description = "geodml's algorithms as a Flower app: the ServerApp runs them, each ClientApp is a data center"
license = "MIT"
dependencies = []

[tool.hatch.build.targets.wheel]
packages = ["."]

[tool.flwr.app]
publisher = "geodml"

[tool.flwr.app.components]
serverapp = "{_APP_MODULE}.server_app:app"
clientapp = "{_APP_MODULE}.client_app:app"

[tool.flwr.app.config]
job = ""
"""
_SERVER_APP = "from geodml.flower_deploy import make_server_app\n\napp = make_server_app()\n"
_CLIENT_APP = "from geodml.flower_bridge import make_client_app\n\napp = make_client_app()\n"


# --- the compare config as JSON (the job the ServerApp reads) -----------------------------------
def config_to_json(cfg) -> str:
    """A compare.CompareConfig as JSON (settings nested, tuples as lists)."""
    return json.dumps(asdict(cfg), sort_keys=True)


def config_from_json(s: str):
    """Inverse of config_to_json. Raises GeodmlError on a malformed config."""
    from geodml.compare import CompareConfig
    from geodml.settings import Settings

    try:
        d = json.loads(s)
        d["settings"] = Settings(**d["settings"])
        d["sovereign"] = tuple(d["sovereign"])
        d["algos"] = None if d["algos"] is None else tuple(d["algos"])
        return CompareConfig(**d)
    except (ValueError, KeyError, TypeError) as e:
        raise GeodmlError(f"malformed deployment job: {e}") from None


def _write_json(path: Path, obj) -> None:
    """Write JSON atomically (temporary file, then rename): a reader never sees half a file."""
    tmp = path.with_suffix(".part")
    tmp.write_text(json.dumps(obj))
    os.replace(tmp, path)


# --- the ServerApp side ----------------------------------------------------------------------------
def server_main(grid, context) -> None:
    """The ServerApp's main: read the job named by the run config's ``job``, run every algorithm of
    its compare config through a FlowerPool over the deployment's SuperNodes and write
    {"algorithms": rows, "counts": planner counts, "thetas": {name: final parameters},
    "traces": {name: FlowerPool.trace of its calls}} (or {"error": one line}) to the job's result
    path. Progress lines go to the job's progress file."""
    job = json.loads(Path(str(context.run_config["job"])).read_text())
    result_path, progress_path = Path(job["result"]), Path(job["progress"])
    try:
        result = _serve(grid, config_from_json(job["config"]), progress_path)
    except BaseException as e:  # handed to the compare process as one line
        result = {"error": str(e) or type(e).__name__}
    _write_json(result_path, result)


def _serve(grid, cfg, progress_path: Path) -> dict:
    """Run cfg's algorithms on the deployment (see server_main)."""
    from threadpoolctl import threadpool_limits

    from geodml import compare, registry
    from geodml.flower_bridge import FederationSpec, FlowerPool

    def progress(msg: str) -> None:
        with progress_path.open("a") as f:
            f.write(msg + "\n")

    with threadpool_limits(limits=1, user_api="blas"):
        fed = compare._federation(cfg)
        spec = FederationSpec(cfg.data, fed.partition, len(fed.dcs), cfg.seed, tuple(dc.workers for dc in fed.dcs))
        pool = FlowerPool(grid, spec, [dc.name for dc in fed.dcs], call_timeout=cfg.flower_timeout)
        rows, counts, thetas, traces = {}, {}, {}, {}
        for a in cfg.algorithms:
            progress(f"running {a}")
            first = len(pool.trace)
            rows[a] = compare._run_one(registry.get(a), cfg, fed, counts, pool, progress, thetas)
            traces[a] = pool.trace[first:]
    return {"algorithms": rows, "counts": counts, "thetas": {a: t.tolist() for a, t in thetas.items()}, "traces": traces}


def make_server_app():
    """The Flower ServerApp whose main is server_main. Raises GeodmlError without Flower."""
    from geodml.flower_bridge import _flwr

    _flwr()
    from flwr.serverapp import ServerApp

    sapp = ServerApp()
    sapp.main()(server_main)
    return sapp


# --- wire bytes per round and per data center ---------------------------------------------------
def attribute_wire(trace: list[dict], counts: dict[str, RelayCount]) -> list[dict]:
    """Per call of a trace (FlowerPool.trace), the bytes each DC's relay carried between the call's
    start and end: [{"method", "seconds", "wire": {dc: bytes}, "wire_down": {dc: bytes},
    "payload": {dc: arrays' bytes down + up}}]. counts: {dc name: its relay's RelayCount}."""
    out = []
    for c in trace:
        s, e = c["start"], c["end"]
        out.append({"method": c["method"], "seconds": e - s,
                    "wire": {n: rc.total(None, s, e) for n, rc in counts.items()},
                    "wire_down": {n: rc.total(DOWN, s, e) for n, rc in counts.items()},
                    "payload": {n: int(c["down"].get(n, 0)) + int(c["up"].get(n, 0)) for n in counts}})
    return out


def wire_summary(rounds: list[dict], ledger_by_dc: dict[str, int]) -> dict:
    """Totals of attribute_wire's rounds: {"wire_bytes", "payload_bytes", "by_dc": {dc: {"wire",
    "payload", "ledger", "wire_over_payload"}}, "seconds_per_round"}; ledger_by_dc: the simulated
    WAN bytes of each DC's link (0 for the hub's own DC, whose messages cross no WAN)."""
    by_dc = {}
    for n in (rounds[0]["wire"] if rounds else {}):
        w, p = sum(r["wire"][n] for r in rounds), sum(r["payload"][n] for r in rounds)
        by_dc[n] = {"wire": w, "payload": p, "ledger": int(ledger_by_dc.get(n, 0)),
                    "wire_over_payload": w / p if p else None}
    return {"wire_bytes": sum(v["wire"] for v in by_dc.values()), "payload_bytes": sum(v["payload"] for v in by_dc.values()),
            "by_dc": by_dc, "seconds_per_round": sum(r["seconds"] for r in rounds) / len(rounds) if rounds else 0.0}


# --- processes -------------------------------------------------------------------------------------
def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tool(name: str) -> str:
    """The path of a Flower command: beside this interpreter (a virtual environment), else on PATH."""
    p = Path(sys.executable).parent / name
    found = str(p) if p.exists() else shutil.which(name)
    if not found:
        raise GeodmlError(f"{name} not found: pip install 'geodml[flower]'")
    return found


def _wait_listening(port: int, proc: subprocess.Popen, log: Path, timeout: float) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if proc.poll() is not None:
            raise GeodmlError(f"the Flower SuperLink exited at start: {_last_line(log)}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise GeodmlError(f"the Flower SuperLink did not listen on port {port} within {timeout:g} s")


def _last_line(log: Path) -> str:
    try:
        lines = [x.strip() for x in log.read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return "no log"
    return lines[-1] if lines else "no log"


def fleet_over_grpc() -> bool:
    """Whether the installed Flower's Fleet API is gRPC (flwr before 1.42, ``grpc-rere``) rather
    than HTTP (1.42 on). Raises GeodmlError without Flower."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        major, minor = (int(x) for x in version("flwr").split(".")[:2])
    except (PackageNotFoundError, ValueError):
        raise GeodmlError("Flower is not installed: pip install 'geodml[flower]'") from None
    return (major, minor) < (1, 42)


class Deployment:
    """A SuperLink and one SuperNode per rows file on this machine, each SuperNode behind its own
    CountingRelay (see the module docstring). workdir: where logs, the Flower home and the app go.
    Use as a context manager: exiting stops every process it started (SIGTERM to each one's process
    group, then SIGKILL) and closes the relays. Raises GeodmlError if Flower is missing or the
    SuperLink does not start."""

    def __init__(self, workdir: Path, rows_files: list[Path], names: list[str]):
        self.workdir, self.names = workdir, list(names)
        self.home = workdir / "flwr_home"
        self.home.mkdir(parents=True, exist_ok=True)
        # HTTP (flwr >= 1.42): one port serves the Fleet, Control and runtime APIs; gRPC: three.
        self.grpc = fleet_over_grpc()
        self.port, self.control = free_port(), free_port()
        if not self.grpc:
            self.control = self.port
        (self.home / "config.toml").write_text(
            f'[superlink]\ndefault = "geodml"\n\n[superlink.geodml]\naddress = "127.0.0.1:{self.control}"\ninsecure = true\n')
        self.env = {**os.environ, "FLWR_HOME": str(self.home),
                    "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        self.procs: list[subprocess.Popen] = []
        self.relays: dict[str, CountingRelay] = {}
        try:
            log = workdir / "superlink.log"
            apis = (["--fleet-api-type", "grpc-rere", "--fleet-api-address", f"127.0.0.1:{self.port}",
                     "--control-api-address", f"127.0.0.1:{self.control}", "--serverappio-api-address", f"127.0.0.1:{free_port()}"]
                    if self.grpc else ["--port", str(self.port), "--disable-runtime-dependency-installation"])
            sl = self._start([_tool("flower-superlink"), "--insecure", *apis], log)
            _wait_listening(self.port, sl, log, START_TIMEOUT_S)
            for i, (name, rows) in enumerate(zip(self.names, rows_files)):
                relay = self.relays[name] = CountingRelay(("127.0.0.1", self.port))
                local = ["--clientappio-api-address", f"127.0.0.1:{free_port()}"] if self.grpc else ["--port", str(free_port())]
                self._start([_tool("flower-supernode"), "--insecure", "--superlink", f"127.0.0.1:{relay.port}",
                             *local, "--node-config", f'partition-id={i} rows-file="{rows}"'], workdir / f"supernode-{i}.log")
        except BaseException:
            self.close()
            raise

    def _start(self, cmd: list[str], log: Path) -> subprocess.Popen:
        with log.open("wb") as f:
            p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self.env,
                                 cwd=self.workdir, start_new_session=True)
        self.procs.append(p)
        return p

    def run(self, app_dir: Path, job: Path, result: Path, progress_file: Path,
            progress: Callable[[str], None]) -> dict:
        """``flwr run`` the app with the job and wait for its result (forwarding the ServerApp's
        progress lines). Raises GeodmlError if a process dies or the run ends without a result."""
        log = self.workdir / "flwr-run.log"
        if self.grpc:  # older flwr reads the SuperLink's Control API address from the app's pyproject
            with (app_dir / "pyproject.toml").open("a") as f:
                f.write(f'\n[tool.flwr.federations]\ndefault = "geodml"\n\n[tool.flwr.federations.geodml]\n'
                        f'address = "127.0.0.1:{self.control}"\ninsecure = true\n')
        runner = self._start([_tool("flwr"), "run", str(app_dir), "geodml", "--stream",
                              "--run-config", f'job="{job}"'], log)
        seen = 0
        while not result.exists():
            if progress_file.exists():
                lines = progress_file.read_text().splitlines()
                for line in lines[seen:]:
                    progress(line)
                seen = len(lines)
            dead = [p for p in self.procs if p is not runner and p.poll() is not None]
            if dead:
                raise GeodmlError(f"{Path(dead[0].args[0]).name} exited during the run (exit {dead[0].returncode}); "
                                  f"its log is in {self.workdir}")
            if runner.poll() is not None and not result.exists():
                time.sleep(1.0)  # the result may land just after the log stream ends
                if not result.exists():
                    raise GeodmlError(f"the Flower run ended without a result: {_last_line(log)}")
            time.sleep(0.2)
        res = json.loads(result.read_text())
        if "error" in res:
            raise GeodmlError(f"the Flower ServerApp failed: {res['error']}")
        return res

    def close(self) -> None:
        """Stop every process started here and close the relays."""
        for p in reversed(self.procs):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except OSError:
                    pass
        for p in reversed(self.procs):
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
                p.wait()
        for r in self.relays.values():
            r.close()

    def __enter__(self) -> "Deployment":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@contextmanager
def stop_on_sigterm():
    """While inside, SIGTERM raises KeyboardInterrupt in the main thread (elsewhere: nothing
    changes), so a terminated compare stops the deployment's processes as Ctrl-C does instead of
    leaving them running; the previous handler is restored on exit."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def run_deployment(cfg, dcs: list, progress: Callable[[str], None] = lambda m: None, keep: str | None = None) -> dict:
    """Run cfg's algorithms on a Flower deployment of the DCs (see the module docstring).

    Args:
        cfg: compare.CompareConfig (its backend is ignored here).
        dcs: the federation's network.DataCenter list (each one's rows go to its own SuperNode).
        progress: one-line progress messages.
        keep: a folder to keep the logs and files in (None: a temporary folder, removed).

    Returns:
        {"algorithms": rows as compare's, each with "measured": {"executor", "wall_seconds",
        "payload_bytes", "serialized_bytes", "wire": wire_summary, "rounds": attribute_wire}},
        "counts": planner counts, "thetas": {name: final parameters (list)}, "wire": {"total_bytes",
        "control_bytes", "by_dc": total per relay, "connections", "flwr": its version, "transport":
        the Fleet API's}, "start_seconds"}.

    Raises:
        GeodmlError: Flower is missing, a process fails, or the ServerApp fails.
    """
    from geodml.flower_bridge import save_rows

    workdir = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="geodml-flower-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        rows_files = []
        for i, dc in enumerate(dcs):
            rows_files.append(workdir / f"dc{i}-{dc.name}.npz")
            save_rows(str(rows_files[-1]), dc.X, dc.y)
        app = workdir / "app"
        (app / _APP_MODULE).mkdir(parents=True, exist_ok=True)
        (app / "pyproject.toml").write_text(_PYPROJECT)
        for fname, text in (("__init__.py", ""), ("server_app.py", _SERVER_APP), ("client_app.py", _CLIENT_APP)):
            (app / _APP_MODULE / fname).write_text(text)
        job, result, prog = workdir / "job.json", workdir / "result.json", workdir / "progress.log"
        _write_json(job, {"config": config_to_json(cfg), "result": str(result), "progress": str(prog)})
        launched = time.time()
        progress(f"starting a Flower deployment: a SuperLink and {len(dcs)} SuperNodes (flwr run)")
        with stop_on_sigterm(), Deployment(workdir, rows_files, [dc.name for dc in dcs]) as dep:
            res = dep.run(app, job, result, prog, progress)
            counts = {n: r.snapshot() for n, r in dep.relays.items()}
        # From launching the processes to the first algorithm's first message (start, app install, setup).
        first = min((tr[0]["start"] for tr in res["traces"].values() if tr), default=time.time())
        _add_wire(res, counts)
        res["start_seconds"] = first - launched
        from importlib.metadata import version

        res["wire"].update(flwr=version("flwr"), transport="gRPC (grpc-rere)" if fleet_over_grpc() else "HTTP/1.1")
        return res
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)


def _add_wire(res: dict, counts: dict[str, RelayCount]) -> None:
    """Put each algorithm's wire counts (per round, per DC) into its row and the totals in res."""
    in_rounds = 0
    for a, row in res["algorithms"].items():
        if "measured" not in row:  # centralize: no DC computation crosses the deployment
            continue
        rounds = attribute_wire(res["traces"][a], counts)
        summ = wire_summary(rounds, row.get("wan_bytes_by_dc", {}))
        row["measured"].update(executor="flower-deployment", wire=summ, rounds=rounds)
        in_rounds += summ["wire_bytes"]
    total = sum(rc.total() for rc in counts.values())
    res["wire"] = {"total_bytes": total, "control_bytes": total - in_rounds,
                   "by_dc": {n: {"up": rc.total(UP), "down": rc.total(DOWN)} for n, rc in counts.items()},
                   "connections": {n: rc.connections for n, rc in counts.items()}}
    res.pop("traces")
