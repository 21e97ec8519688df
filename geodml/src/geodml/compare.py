"""``geodml compare``: run several algorithms on the same federation and report, per algorithm,
the ledger (WAN bytes, rounds, simulated seconds, dollars), test accuracy and log loss, the
planner's prediction for the same round counts, and the crossover to centralizing."""

from __future__ import annotations

import math

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from sklearn.metrics import log_loss

from geodml.algorithms import ALGORITHMS, Settings, run
from geodml.data import load_dataset, raw_nbytes
from geodml.errors import GeodmlError, SovereigntyError
from geodml.network import Network, build_dcs, central_hub, model_hub
from geodml.objective import predict_proba
from geodml.partition import partition
from geodml.planner import DCSize, PlanCounts, crossover, predict, unconstrained_central_hub
from geodml.wan import load_wan

DEFAULT_DATA = "ctr:rows=200000,features=16384,fields=20"
DEFAULT_ALGOS = ("centralize", "lbfgs", "fedavg", "fedprox", "diloco", "oneshot", "fadl")


@dataclass(frozen=True)
class CompareConfig:
    """Inputs of one comparison: data spec, number of data centers k (None: every WAN region),
    partition spec, WAN file (None: the packaged default), sovereign region names, algorithms,
    algorithm settings, seed, hierarchical aggregation on/off, ray (run each DC as a Ray actor
    and add measured wall time and bytes), flower (run each DC as a Flower ClientApp on Flower's
    simulation engine, flower_bridge.py, and add measured wall time and Flower's message bytes),
    flower_timeout (seconds each DC's ClientApp has to answer one message; past it the run ends
    with GeodmlError instead of waiting for a hung DC)."""

    data: str = DEFAULT_DATA
    k: int | None = None
    partition: str = "iid"
    wan: str | None = None
    sovereign: tuple[str, ...] = ()
    algos: tuple[str, ...] = DEFAULT_ALGOS
    settings: Settings = field(default_factory=Settings)
    seed: int = 0
    hierarchical: bool = True
    ray: bool = False
    flower: bool = False
    flower_timeout: float = 300.0


def _counts(c: dict) -> PlanCounts:
    """The planner's iteration counts from what the runs so far reported (defaults otherwise)."""
    return PlanCounts(lbfgs_rounds=c.get("lbfgs_rounds", 100), oneshot_passes=c.get("oneshot_passes", 100),
                      central_iters=c.get("central_iters", 100), fadl_passes=c.get("fadl_passes", 10))


def _scaling(plain, sizes, d, wan, cfg: CompareConfig, hub_m: str, hub_c: str, pc: PlanCounts) -> dict:
    """Planner predictions with every DC's rows scaled by 1e-3..1e3 (rounds as in this run):
    {"rows": [...], metric: {algorithm: [...]}} for bytes, sim_seconds and dollars."""
    scales = np.logspace(-3, 3, 25)
    res: dict = {"rows": [float(a * sum(x.n for x in sizes)) for a in scales]}
    for metric in ("bytes", "sim_seconds", "dollars"):
        res[metric] = {}
    for a in cfg.algos:
        src = plain if a == "centralize" else sizes
        preds = [predict(a, [x.scaled(f) for x in src], d, wan, cfg.settings, hub_c if a == "centralize" else hub_m, pc,
                         cfg.hierarchical) for f in scales]
        for metric in ("bytes", "sim_seconds", "dollars"):
            res[metric][a] = [float(getattr(p, metric)) for p in preds]
    return res


def compare(cfg: CompareConfig, progress: Callable[[str], None] = lambda msg: None) -> dict:
    """Run the comparison with single-threaded BLAS (see _compare)."""
    # Model-sized vectors are too small for BLAS threads; on a busy machine their spin-waits cost
    # milliseconds per call (L-BFGS-B's dot products), so one thread is faster and reproducible.
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        return _compare(cfg, progress)


def _compare(cfg: CompareConfig, progress: Callable[[str], None]) -> dict:
    """Run the comparison. Returns a JSON-ready dict:
    {"data": {...}, "dcs": [...], "hubs": {...}, "algorithms": {name: {"bytes", "rounds",
    "sim_seconds", "dollars", "test_accuracy", "test_logloss", "intra_bytes", "raw_bytes",
    "raw_bytes_by_source", "wall_seconds", "predicted"}} (or {"refused": reason}),
    "crossover": {name: planner.crossover}, "bytes_ratio_vs_centralize": {name: ratio}}.
    Raises GeodmlError on bad input (unknown algorithm or region, malformed spec or file,
    an empty data center)."""
    for a in cfg.algos:
        if a not in ALGORITHMS:
            raise GeodmlError(f"unknown algorithm {a!r} (known: {', '.join(ALGORITHMS)})")
    import importlib.util

    if cfg.ray and cfg.flower:  # a contradiction, whatever is installed
        raise GeodmlError("--ray and --flower are two ways to run the DCs: choose one")
    if cfg.ray and importlib.util.find_spec("ray") is None:
        raise GeodmlError("--ray needs Ray: pip install 'geodml[ray]'") from None
    # Values first: a wrong one is wrong whether or not Flower is installed.
    if not (math.isfinite(cfg.flower_timeout) and cfg.flower_timeout > 0):
        raise GeodmlError(f"--flower-timeout must be a positive number of seconds, got {cfg.flower_timeout:g}")
    if cfg.flower:
        if importlib.util.find_spec("flwr") is None:
            raise GeodmlError("--flower needs Flower: pip install 'geodml[flower]'") from None
        if importlib.util.find_spec("ray") is None:  # Flower's simulation engine runs on Ray
            raise GeodmlError("--flower needs Ray for Flower's simulation engine: pip install "
                              "'geodml[flower]'") from None
    wan = load_wan(cfg.wan)
    k = cfg.k if cfg.k is not None else len(wan.regions)
    if k < 1 or k > len(wan.regions):
        raise GeodmlError(f"--dcs must be between 1 and {len(wan.regions)} (the WAN's regions), got {k}")
    ds = load_dataset(cfg.data, seed=cfg.seed)
    parts = partition(cfg.partition, ds.X_train, ds.y_train, k, seed=cfg.seed)
    dcs = build_dcs(ds.X_train, ds.y_train, parts, wan, cfg.sovereign)
    names = [dc.name for dc in dcs]
    # Progress starts only once every input is validated, so bad input stays a single line.
    progress(f"loaded {cfg.data}: {len(ds.y_train)} training rows over {k} data centers ({cfg.partition})")
    hub_m, hub_c = model_hub(wan, names), central_hub(wan, dcs)
    sizes = [DCSize.of(dc) for dc in dcs]
    d = ds.n_features
    out: dict = {
        "data": {"spec": cfg.data, "n_train": int(len(ds.y_train)), "n_test": int(len(ds.y_test)), "features": d,
                 "raw_bytes": raw_nbytes(ds.X_train, ds.y_train), "model_bytes": 8 * (d + 1)},
        "partition": cfg.partition,
        "dcs": [{"name": dc.name, "rows": dc.n, "raw_bytes": dc.raw_nbytes, "sovereign": dc.sovereign,
                 "positive_rate": float(dc.y.mean())} for dc in dcs],
        "hubs": {"model": hub_m, "centralize": hub_c},
        "hierarchical": cfg.hierarchical,
        "algorithms": {},
        "crossover": {},
    }
    counts: dict = {}
    pool = None
    if cfg.ray:
        from geodml.ray_pool import RayPool

        progress("starting Ray: one actor per data center")
        pool = RayPool(dcs, cfg.seed)
    if cfg.flower:
        from geodml.flower_bridge import FederationSpec, run_federation

        progress("starting Flower's simulation engine: one ClientApp per data center")
        spec = FederationSpec(cfg.data, cfg.partition, k, cfg.seed, tuple(dc.workers for dc in dcs))
        # Algorithms that need no DC computation through the pool (centralize) run there too,
        # in the ServerApp, so the table keeps one order.
        run_federation(spec, names, lambda fpool: _run_all(cfg, ds, dcs, wan, sizes, d, hub_m, hub_c, counts, fpool, out, progress),
                       call_timeout=cfg.flower_timeout)
    else:
        try:
            _run_all(cfg, ds, dcs, wan, sizes, d, hub_m, hub_c, counts, pool, out, progress)
        finally:
            if pool is not None:
                pool.close()
    pc = _counts(counts)
    plain = [DCSize(x.name, x.n, x.nnz, x.raw_nbytes) for x in sizes]
    central = predict("centralize", plain, d, wan, cfg.settings, hub_c or unconstrained_central_hub(plain, wan), pc)
    out["centralize_bytes_if_allowed"] = central.bytes
    for a in cfg.algos:
        if a == "centralize":
            continue
        out["crossover"][a] = crossover(a, sizes, d, wan, cfg.settings, hub_m, hub_c, pc, cfg.hierarchical)
    out["scaling"] = _scaling(plain, sizes, d, wan, cfg, hub_m, hub_c or unconstrained_central_hub(plain, wan), pc)
    out["bytes_ratio_vs_centralize"] = {a: r["bytes"] / central.bytes for a, r in out["algorithms"].items()
                                        if "bytes" in r and central.bytes}
    return out


def _run_all(cfg, ds, dcs, wan, sizes, d, hub_m, hub_c, counts, pool, out, progress) -> None:
    """Run every algorithm, filling out["algorithms"] and counts."""
    for a in cfg.algos:
        progress(f"running {a}")
        hub = hub_c if a == "centralize" else hub_m
        if hub is None:
            out["algorithms"][a] = {"refused": "two or more sovereign data centers: no region may gather all raw rows"}
            continue
        net = Network(wan, dcs, hub, hierarchical=cfg.hierarchical,
                      on_round=lambda n, a=a: progress(f"{a} round {n.rounds}: WAN {n.wan_bytes} B, simulated {n.sim_seconds:.3f} s"))
        t0 = time.perf_counter()
        before = (pool.payload_bytes, pool.loopback_bytes, pool.serialized_bytes) if pool is not None else None
        try:
            theta = run(a, net, cfg.settings, pool if a != "centralize" else None)
        except SovereigntyError as e:
            out["algorithms"][a] = {"refused": str(e)}
            continue
        wall = time.perf_counter() - t0
        p = np.clip(predict_proba(ds.X_test, theta), 1e-15, 1 - 1e-15)
        summ = net.summary()
        if a == "lbfgs":
            counts["lbfgs_rounds"] = net.rounds
        counts.update(net.notes)
        pc = _counts(counts)
        pred = predict(a, sizes, d, wan, cfg.settings, hub, pc, cfg.hierarchical)
        out["algorithms"][a] = {
            "bytes": summ["bytes"], "rounds": summ["rounds"], "sim_seconds": summ["sim_seconds"], "dollars": summ["dollars"],
            "test_accuracy": float(np.mean((p > 0.5) == ds.y_test)),
            "test_logloss": float(log_loss(ds.y_test, p, labels=[0.0, 1.0])),
            "intra_bytes": summ["intra_bytes"], "raw_bytes": summ["raw_bytes"],
            "raw_bytes_by_source": summ["raw_bytes_by_source"], "wall_seconds": wall,
            "predicted": {"bytes": pred.bytes, "sim_seconds": pred.sim_seconds, "dollars": pred.dollars},
        }
        stalled = net.notes.get("fadl_stalled_iterations", 0)
        if stalled:
            out["algorithms"][a]["warning"] = (f"line search found no decrease in {stalled} of {cfg.settings.fadl_iters} iterations; "
                                               "the model did not move there (local solutions overshoot under strong skew) and the proximal "
                                               "term was raised, costing 3 rounds each")
        if before is not None and a != "centralize":
            lo = pool.loopback_bytes
            out["algorithms"][a]["measured"] = {
                "executor": pool.executor, "wall_seconds": wall, "payload_bytes": pool.payload_bytes - before[0],
                "serialized_bytes": pool.serialized_bytes - before[2],
                "loopback_bytes": None if lo is None or before[1] is None else lo - before[1]}
