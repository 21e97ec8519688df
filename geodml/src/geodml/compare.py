"""``geodml compare``: run several algorithms on the same federation and report, per algorithm,
the ledger (WAN bytes, rounds, simulated seconds, dollars), test accuracy and log loss, the
planner's prediction for the same round counts, and the crossover to centralizing."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from sklearn.metrics import log_loss

from geodml import backends, registry
from geodml.algorithms import Settings, run
from geodml.data import Dataset, load_dataset, raw_nbytes
from geodml.encoding import ENCODING_NAME
from geodml.errors import GeodmlError, SovereigntyError
from geodml.network import Network, build_dcs, central_hub, model_hub
from geodml.models import get as get_model
from geodml.partition import partition
from geodml.planner import DCSize, PlanCounts, crossover, predict, unconstrained_central_hub
from geodml.wan import Wan, load_wan

DEFAULT_DATA = "ctr:rows=200000,features=16384,fields=20"


@dataclass(frozen=True)
class CompareConfig:
    """Inputs of one comparison: data spec, number of data centers k (None: every WAN region, or
    one per place group), partition spec (None: by the data's place column where it has one, else
    iid), WAN file (None: the data's packaged WAN or the default), sovereign region names, algorithms
    (None: every registered one), algorithm settings, seed, hierarchical aggregation on/off,
    backend (backends.BACKENDS: local, or ray / flower / flower-deployment, which add measured wall
    time and bytes; flower-deployment also the bytes on each DC's socket, flower_deploy.py),
    jobs (CPUs of the ray or flower backend, None: its default), flower_timeout (seconds each
    DC's ClientApp has to answer one message; past it the run ends with GeodmlError instead of
    waiting for a hung DC)."""

    data: str = DEFAULT_DATA
    k: int | None = None
    partition: str | None = None
    wan: str | None = None
    sovereign: tuple[str, ...] = ()
    algos: tuple[str, ...] | None = None
    settings: Settings = field(default_factory=Settings)
    seed: int = 0
    hierarchical: bool = True
    backend: str = "local"
    jobs: int | None = None
    flower_timeout: float = 300.0

    @property
    def algorithms(self) -> tuple[str, ...]:
        """The algorithms to run: algos, or every registered one that trains settings.model."""
        if self.algos is not None:
            return self.algos
        kind = get_model(self.settings.model).name
        return tuple(a for a in registry.names() if kind in registry.get(a).models)


@dataclass
class Federation:
    """One comparison's fixed inputs: the data set, its data centers, the WAN, the hubs and the
    planner's view of the DC sizes (d features, so models of d+1 parameters)."""

    ds: Dataset
    partition: str
    dcs: list
    wan: Wan
    sizes: list[DCSize]
    d: int
    hub_m: str
    hub_c: str | None
    #: How the data's places became data centers: "by name" (each in the WAN region it names or
    #: maps to), "in order" (on the WAN's regions in order: not all are its region names), or
    #: None (no place partition: the WAN's first k regions).
    placement: str | None = None

    def loaded_line(self, spec: str) -> str:
        """The progress line once the federation stands (compare and plan)."""
        return f"loaded {spec}: {len(self.ds.y_train)} training rows over {len(self.dcs)} data centers ({self.partition})"


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
    for a in cfg.algorithms:
        raw = registry.get(a).moves == "raw"
        src = plain if raw else sizes
        preds = [predict(a, [x.scaled(f) for x in src], d, wan, cfg.settings, hub_c if raw else hub_m, pc,
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


def _federation(cfg: CompareConfig) -> Federation:
    """Validate cfg and build the federation. Raises GeodmlError on bad input."""
    kind = get_model(cfg.settings.model).name
    for a in cfg.algorithms:
        if kind not in registry.get(a).models:
            raise GeodmlError(f"{a} trains {' or '.join(registry.get(a).models)} only, not {cfg.settings.model}")
    backends.check(cfg.backend, cfg.jobs, cfg.flower_timeout)
    ds = load_dataset(cfg.data, seed=cfg.seed)
    return build_federation(ds, cfg.partition, cfg.k, cfg.wan, cfg.sovereign, cfg.seed)


def default_partition(ds: Dataset) -> str:
    """``place`` for data with a place column (split by its own geography), else ``iid``."""
    return "place" if ds.place_train is not None else "iid"


def build_federation(ds: Dataset, partition_spec: str | None, k: int | None, wan_path: str | None,
                     sovereign: tuple[str, ...], seed: int) -> Federation:
    """The data centers of ds under a partition spec (None: default_partition) over a WAN (None:
    the data's packaged WAN, else the default). With ``place`` there is one DC per place group,
    in the region its places map to when the WAN has it (else the WAN's regions in order).
    Raises GeodmlError on bad input."""
    spec = partition_spec or default_partition(ds)
    wan = load_wan(wan_path, packaged=ds.wan or "wan_default.yaml")
    regions = None
    if spec == "place" and ds.place_train is not None:
        if k is not None and k != len(ds.places):
            raise GeodmlError(f"--dcs {k}: the data's place column makes {len(ds.places)} data centers")
        k = len(ds.places)
        empty = [v for j, v in enumerate(ds.place_values) if not np.any(ds.place_train == j)]
        if empty:  # a place of a row or two whose rows all fell in the test split
            named = ", ".join(repr(str(v)) for v in empty[:5]) + (f" and {len(empty) - 5} more" if len(empty) > 5 else "")
            raise GeodmlError(f"place {named} has no training rows (all fell in the test split): "
                              "give more of its rows, or leave it out of the table")
        if ds.regions is not None and all(r in wan.names for r in ds.regions):
            regions = ds.regions
    k = k if k is not None else len(wan.regions)
    if k < 1 or k > len(wan.regions):
        raise GeodmlError(f"--dcs must be between 1 and {len(wan.regions)} (the WAN's regions), got {k}")
    parts = partition(spec, ds.X_train, ds.y_train, k, seed=seed, groups=ds.place_train)
    places = ds.place_values if spec == "place" else ()
    dcs = build_dcs(ds.X_train, ds.y_train, parts, wan, sovereign, ds.source_train, regions, places)
    sizes = [DCSize.of(dc) for dc in dcs]
    placement = None if not places else "by name" if regions is not None else "in order"
    return Federation(ds, spec, dcs, wan, sizes, ds.n_features, model_hub(wan, [dc.name for dc in dcs]), central_hub(wan, dcs),
                      placement)


def _compare(cfg: CompareConfig, progress: Callable[[str], None]) -> dict:
    """Run the comparison. Returns a JSON-ready dict:
    {"data": {...}, "dcs": [...], "hubs": {...}, "algorithms": {name: {"bytes", "rounds",
    "sim_seconds", "dollars", "test_accuracy", "test_logloss", "intra_bytes", "raw_bytes",
    "raw_bytes_by_source", "wall_seconds", "predicted", "settings"}} (or {"refused": reason}),
    "crossover": {name: planner.crossover}, "bytes_ratio_vs_centralize": {name: ratio}}.
    Raises GeodmlError on bad input (unknown algorithm or region, malformed spec or file,
    an empty data center)."""
    fed = _federation(cfg)
    ds, dcs, d = fed.ds, fed.dcs, fed.d
    n_params = get_model(cfg.settings.model).n_params(d)
    # Progress starts only once every input is validated, so bad input stays a single line.
    progress(fed.loaded_line(cfg.data))
    out: dict = {
        "data": {"spec": cfg.data, "n_train": int(len(ds.y_train)), "n_test": int(len(ds.y_test)), "features": d,
                 "raw_bytes": sum(dc.raw_nbytes for dc in dcs), "raw_encoding": ENCODING_NAME,
                 "memory_bytes": raw_nbytes(ds.X_train, ds.y_train), "model": cfg.settings.model, "model_bytes": 8 * n_params},
        "partition": fed.partition,
        "placement": fed.placement,
        "dcs": [{"name": dc.name, "place": dc.place, "rows": dc.n, "raw_bytes": dc.raw_nbytes, "sovereign": dc.sovereign,
                 "positive_rate": float(dc.y.mean())} for dc in dcs],
        "hubs": {"model": fed.hub_m, "centralize": fed.hub_c},
        "hierarchical": cfg.hierarchical,
        "algorithms": {},
        "crossover": {},
    }
    counts: dict = {}
    spec = None
    if cfg.backend == "flower":
        from geodml.flower_bridge import FederationSpec

        spec = FederationSpec(cfg.data, fed.partition, len(dcs), cfg.seed, tuple(dc.workers for dc in dcs))
    if cfg.backend == "flower-deployment":
        # The algorithms run in the deployment's ServerApp process; its rows come back as JSON.
        from geodml.flower_deploy import run_deployment

        res = run_deployment(cfg, dcs, progress)
        out["algorithms"].update(res["algorithms"])
        counts.update(res["counts"])
        out["deployment"] = {"wire": res["wire"], "start_seconds": res["start_seconds"]}
        _planner_view(cfg, fed, _counts(counts), out)
        return out
    # Algorithms that need no DC computation through the pool (centralize) run on the backend
    # too (in Flower's ServerApp), so the table keeps one order.
    backends.run_on(cfg.backend, dcs, cfg.seed, lambda pool: _run_all(cfg, fed, counts, pool, out, progress),
                    jobs=cfg.jobs, flower_spec=spec, call_timeout=cfg.flower_timeout, progress=progress)
    _planner_view(cfg, fed, _counts(counts), out)
    return out


def _planner_d(cfg: CompareConfig, fed: Federation) -> int:
    """The d the cost model sees: a model of P parameters sends messages of a d = P - 1 model."""
    return get_model(cfg.settings.model).n_params(fed.d) - 1


def _planner_view(cfg: CompareConfig, fed: Federation, pc: PlanCounts, out: dict) -> None:
    """Add to out what the planner says with this run's iteration counts: centralizing's bytes
    (if sovereignty allowed it), each model-exchange algorithm's crossover, the scaling curves and
    every algorithm's bytes over centralizing's."""
    sizes, d, wan = fed.sizes, _planner_d(cfg, fed), fed.wan
    plain = [DCSize(x.name, x.n, x.nnz, x.raw_nbytes) for x in sizes]
    hub_c = fed.hub_c or unconstrained_central_hub(plain, wan)
    central = predict("centralize", plain, d, wan, cfg.settings, hub_c, pc)
    out["centralize_bytes_if_allowed"] = central.bytes
    for a in cfg.algorithms:
        if registry.get(a).moves == "model":
            out["crossover"][a] = crossover(a, sizes, d, wan, cfg.settings, fed.hub_m, fed.hub_c, pc, cfg.hierarchical)
    out["scaling"] = _scaling(plain, sizes, d, wan, cfg, fed.hub_m, hub_c, pc)
    out["bytes_ratio_vs_centralize"] = {a: r["bytes"] / central.bytes for a, r in out["algorithms"].items()
                                        if "bytes" in r and central.bytes}


def _run_all(cfg: CompareConfig, fed: Federation, counts: dict, pool, out: dict, progress) -> None:
    """Run every algorithm, filling out["algorithms"] and counts (the planner's iteration counts)."""
    for a in cfg.algorithms:
        progress(f"running {a}")
        out["algorithms"][a] = _run_one(registry.get(a), cfg, fed, counts, pool, progress)


def _run_one(algo: registry.Algorithm, cfg: CompareConfig, fed: Federation, counts: dict, pool, progress,
             thetas: dict | None = None) -> dict:
    """Run one algorithm and return its row of the result (or {"refused": reason}); thetas, if
    given, gets its final parameters under its name."""
    a = algo.name
    hub = fed.hub_c if algo.moves == "raw" else fed.hub_m
    if hub is None:
        return {"refused": "two or more sovereign data centers: no region may gather all raw rows"}
    net = Network(fed.wan, fed.dcs, hub, hierarchical=cfg.hierarchical,
                  on_round=lambda n: progress(f"{a} round {n.rounds}: WAN {n.wan_bytes} B, simulated {n.sim_seconds:.3f} s"))
    pool = pool if algo.moves == "model" else None
    t0 = time.perf_counter()
    before = (pool.payload_bytes, pool.loopback_bytes, pool.serialized_bytes) if pool is not None else None
    try:
        theta = run(a, net, cfg.settings, pool)
    except SovereigntyError as e:
        return {"refused": str(e)}
    wall = time.perf_counter() - t0
    if thetas is not None:
        thetas[a] = theta
    ds = fed.ds
    p = np.clip(get_model(cfg.settings.model).predict_proba(ds.X_test, theta), 1e-15, 1 - 1e-15)
    summ = net.summary()
    counts.update(net.notes)
    pred = predict(a, fed.sizes, _planner_d(cfg, fed), fed.wan, cfg.settings, hub, _counts(counts), cfg.hierarchical)
    row = {
        "bytes": summ["bytes"], "rounds": summ["rounds"], "sim_seconds": summ["sim_seconds"], "dollars": summ["dollars"],
        "test_accuracy": float(np.mean((p > 0.5) == ds.y_test)),
        "test_logloss": float(log_loss(ds.y_test, p, labels=[0.0, 1.0])),
        "intra_bytes": summ["intra_bytes"], "raw_bytes": summ["raw_bytes"],
        "raw_bytes_by_source": summ["raw_bytes_by_source"], "wan_bytes_by_dc": summ["wan_bytes_by_dc"], "wall_seconds": wall,
        "predicted": {"bytes": pred.bytes, "sim_seconds": pred.sim_seconds, "dollars": pred.dollars},
        "settings": algo.settings_of(cfg.settings),
    }
    warning = algo.warn(net, cfg.settings) if algo.warn is not None else None
    if warning:
        row["warning"] = warning
    if before is not None and pool.executor != "local":
        lo = pool.loopback_bytes
        row["measured"] = {
            "executor": pool.executor, "wall_seconds": wall, "payload_bytes": pool.payload_bytes - before[0],
            "serialized_bytes": pool.serialized_bytes - before[2],
            "loopback_bytes": None if lo is None or before[1] is None else lo - before[1]}
    return row
