"""The cost model: each algorithm's WAN bytes, intra-DC bytes, rounds, simulated seconds and egress
dollars from data sizes, model size, the WAN and the iteration counts alone (no training).

The predictions use the same cost model as network.Network (message sizes 8(d+1) down and
8(d+2) up unless an encoding says otherwise, per-round time max_k of down + compute + up); given
the round and pass counts a run actually used they reproduce its ledger exactly, which the tests
check. Each algorithm's registry record (registry.Algorithm.predict) points at one function here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from geodml.compression import encoded_nbytes
from geodml.models import get as get_model
from geodml.network import DataCenter
from geodml.objective import pass_flops
from geodml.settings import FADL_STEPS, Settings
from geodml.wan import Wan


@dataclass(frozen=True)
class DCSize:
    """What the planner knows of one data center: region name, rows n, stored non-zeros nnz, raw
    bytes of its rows (data.raw_nbytes), sovereign flag."""

    name: str
    n: int
    nnz: int
    raw_nbytes: int
    sovereign: bool = False

    @classmethod
    def of(cls, dc: DataCenter) -> DCSize:
        """The sizes of a DataCenter."""
        return cls(dc.name, dc.n, dc.nnz, dc.raw_nbytes, dc.sovereign)

    def scaled(self, a: float) -> DCSize:
        """This DC with a times the rows (non-zeros and raw bytes scale linearly)."""
        return replace(self, n=max(1, round(self.n * a)), nnz=round(self.nnz * a), raw_nbytes=round(self.raw_nbytes * a))


def csr_sizes(names: list[str], rows: list[int], nnz_per_row: float, sovereign=(),
              encoding: tuple[float, float] | None = None) -> list[DCSize]:
    """DCSize list for CSR data. raw_nbytes: with ``encoding`` = (bytes per file, bytes per row)
    (a measured Parquet encoding, see ctr_encoding) per_file + per_row * n; else the in-memory
    layout of data.make_ctr (float32 values, int32 indices and row pointers, float64 labels):
    nnz*8 + (n+1)*4 + n*8 bytes."""
    out = []
    for name, n in zip(names, rows):
        z = round(n * nnz_per_row)
        raw = round(encoding[0] + encoding[1] * n) if encoding is not None else z * 8 + (n + 1) * 4 + n * 8
        out.append(DCSize(name, int(n), int(z), int(raw), name in sovereign))
    return out


def ctr_encoding(features: int, nnz_per_row: float, sample_rows: int = 20_000, seed: int = 0) -> tuple[float, float]:
    """(bytes per file, bytes per row) of the Parquet+zstd encoding (encoding.rows_nbytes) of
    make_ctr rows with ``features`` features and round(nnz_per_row) fields, fitted through the
    measured sizes of a sample of sample_rows rows and of its first quarter: what the planner
    charges centralizing when it has sizes but no data."""
    from geodml.data import make_ctr
    from geodml.encoding import rows_nbytes

    fields = max(1, min(features, round(nnz_per_row)))
    n = max(sample_rows, 8)
    X, y = make_ctr(n, features=features, fields=fields, seed=seed)
    big, small = rows_nbytes(X, y), rows_nbytes(X[: n // 4], y[: n // 4])
    per_row = (big - small) / (n - n // 4)
    return max(0.0, big - per_row * n), per_row


@dataclass(frozen=True)
class PlanCounts:
    """Iteration counts the planner cannot know before training: function evaluations (= rounds)
    of distributed L-BFGS, local passes of one-shot's local solves (per DC), and iterations of the
    centralized fit."""

    lbfgs_rounds: int = 100
    oneshot_passes: int | dict = 100
    central_iters: int = 100
    # FADL: passes of each local solve, one int for all, or per outer iteration a {dc: passes}.
    fadl_passes: int | list = 10


@dataclass(frozen=True)
class Prediction:
    """Predicted cost of one strategy: WAN bytes, intra-DC bytes, rounds, simulated seconds,
    dollars; refused is a reason string when sovereignty forbids the strategy."""

    bytes: int
    intra_bytes: int
    rounds: int
    sim_seconds: float
    dollars: float
    refused: str | None = None

    def as_dict(self) -> dict:
        """JSON-ready dict."""
        return {"bytes": self.bytes, "intra_bytes": self.intra_bytes, "rounds": self.rounds,
                "sim_seconds": self.sim_seconds, "dollars": self.dollars, "refused": self.refused}


def _workers(wan: Wan, dc: DCSize) -> int:
    return max(1, min(wan.region(dc.name).workers, dc.n))


def _rate(wan: Wan, dc: DCSize) -> float:
    return _workers(wan, dc) * wan.region(dc.name).compute_gflops * 1e9


def predict_centralize(sizes: list[DCSize], wan: Wan, hub: str | None, iters: int, flops=pass_flops) -> Prediction:
    """Cost of moving all raw rows to hub and fitting there for iters passes of flops(n, nnz)
    flops each (default: logistic regression's pass)."""
    if hub is None or any(d.sovereign and d.name != hub for d in sizes):
        sov = [d.name for d in sizes if d.sovereign]
        return Prediction(0, 0, 0, 0.0, 0.0, refused=f"sovereign data centers {', '.join(sov)} may not export raw rows")
    others = [d for d in sizes if d.name != hub]
    nbytes = sum(d.raw_nbytes for d in others)
    t = max((wan.transfer_seconds(d.name, hub, d.raw_nbytes) for d in others), default=0.0)
    n, z = sum(d.n for d in sizes), sum(d.nnz for d in sizes)
    hubdc = next(d for d in sizes if d.name == hub)
    t += iters * flops(n, z) / _rate(wan, hubdc)
    return Prediction(nbytes, 0, 1, t, sum(wan.egress_usd(d.name, hub, d.raw_nbytes) for d in others))


def _round(sizes, wan, hub, d, hierarchical, down: bool, flops: dict, allreduces: dict,
           up_b: int | None = None, down_b: int | None = None) -> tuple[int, int, float, float]:
    """(wan bytes, intra bytes, seconds, dollars) of one round, as Network.round accounts it:
    broadcast down_b bytes (default 8(d+1)) if down, replies of up_b bytes (default 8(d+2))."""
    down_b = (8 * (d + 1) if down_b is None else down_b) if down else 0
    up_b = 8 * (d + 2) if up_b is None else up_b
    wan_b = intra_b = 0
    dollars = 0.0
    worst = 0.0
    for dc in sizes:
        W = _workers(wan, dc)
        remote = dc.name != hub
        flows = 1 if hierarchical else W
        intra_msgs = W - 1 if (hierarchical or not remote) else 0
        t = 0.0
        if down_b:
            if remote:
                t += wan.transfer_seconds(hub, dc.name, down_b, flows)
                wan_b += flows * down_b
                dollars += flows * wan.egress_usd(hub, dc.name, down_b)
            if intra_msgs:
                t += wan.intra_seconds(dc.name, down_b)
                intra_b += intra_msgs * down_b
        t += flops[dc.name] / _rate(wan, dc)
        a = allreduces.get(dc.name, 0)
        if a and W > 1:
            ar_b = 8 * (d + 2)
            t += a * 2 * wan.intra_seconds(dc.name, ar_b)
            intra_b += 2 * (W - 1) * a * ar_b
        if intra_msgs:
            t += wan.intra_seconds(dc.name, up_b)
            intra_b += intra_msgs * up_b
        if remote:
            t += wan.transfer_seconds(dc.name, hub, up_b, flows)
            wan_b += flows * up_b
            dollars += flows * wan.egress_usd(dc.name, hub, up_b)
        worst = max(worst, t)
    return wan_b, intra_b, worst, dollars


def predict_centralize_run(sizes: list[DCSize], d: int, wan: Wan, s: Settings, hub: str | None,
                           counts: PlanCounts = PlanCounts(), hierarchical: bool = True) -> Prediction:
    """Centralizing as a registry predictor: predict_centralize with counts.central_iters passes
    of s.model (d and hierarchical do not change what moving the rows costs)."""
    return predict_centralize(sizes, wan, hub, counts.central_iters, get_model(s.model).pass_flops)


def _rounds_cost(sizes, d, wan, hub, hierarchical, rounds: int, down: bool, flops: dict, allreduces: dict,
                 up_b: int | None = None, down_b: int | None = None) -> Prediction:
    wb, ib, t, usd = _round(sizes, wan, hub, d, hierarchical, down, flops, allreduces, up_b, down_b)
    return Prediction(wb * rounds, ib * rounds, rounds, t * rounds, usd * rounds)


def predict_lbfgs(sizes: list[DCSize], d: int, wan: Wan, s: Settings, hub: str | None,
                  counts: PlanCounts = PlanCounts(), hierarchical: bool = True) -> Prediction:
    """Distributed L-BFGS: counts.lbfgs_rounds gradient rounds, one pass over each DC's rows each."""
    flops = {dc.name: pass_flops(dc.n, dc.nnz) for dc in sizes}
    return _rounds_cost(sizes, d, wan, hub, hierarchical, counts.lbfgs_rounds, True, flops, {})


def predict_oneshot(sizes: list[DCSize], d: int, wan: Wan, s: Settings, hub: str | None,
                    counts: PlanCounts = PlanCounts(), hierarchical: bool = True) -> Prediction:
    """One-shot averaging: one round with no broadcast; each DC's local solve takes
    counts.oneshot_passes passes (one int, or {dc: passes}), each an intra-DC allreduce."""
    p = counts.oneshot_passes
    passes = {dc.name: (p[dc.name] if isinstance(p, dict) else p) for dc in sizes}
    flops = {dc.name: passes[dc.name] * pass_flops(dc.n, dc.nnz) for dc in sizes}
    return _rounds_cost(sizes, d, wan, hub, hierarchical, 1, False, flops, passes)


def predict_local_rounds(sizes: list[DCSize], d: int, wan: Wan, s: Settings, hub: str | None,
                         counts: PlanCounts = PlanCounts(), hierarchical: bool = True) -> Prediction:
    """FedAvg, FedProx, DiLoCo: s.rounds rounds of s.local_steps local steps (mini-batches of
    s.batch_size rows, or full passes), each step an intra-DC allreduce; the up and down messages
    encoded by s.compress and s.compress_down. For an MLP pass d = n_params - 1 (message sizes)."""
    flops = {}
    pf = get_model(s.model).pass_flops
    for dc in sizes:
        if s.batch_size <= 0 or s.batch_size >= dc.n:
            flops[dc.name] = s.local_steps * pf(dc.n, dc.nnz)
        else:
            flops[dc.name] = s.local_steps * pf(s.batch_size, s.batch_size * dc.nnz / dc.n)
    allreduces = {dc.name: s.local_steps for dc in sizes}
    up_b = None if s.compress == "none" else encoded_nbytes(s.compress, d + 1)
    down_b = None if s.compress_down == "none" else encoded_nbytes(s.compress_down, d + 1)
    return _rounds_cost(sizes, d, wan, hub, hierarchical, s.rounds, True, flops, allreduces, up_b, down_b)


def predict_fadl(sizes: list[DCSize], d: int, wan: Wan, s: Settings, hub: str | None, counts: PlanCounts = PlanCounts(),
                 hierarchical: bool = True) -> Prediction:
    """FADL: per outer iteration a gradient round, a local-solve round and a line-search round
    (algorithms.run_fadl)."""
    tot = [0, 0, 0.0, 0.0]
    grad = {dc.name: pass_flops(dc.n, dc.nnz) for dc in sizes}
    for it in range(s.fadl_iters):
        p = counts.fadl_passes
        passes = p[it] if isinstance(p, list) else {dc.name: p for dc in sizes}
        for flops, ar, up_b, down_b in (
            (grad, {}, None, None),
            # the gradient travels with the proximal strength mu: d+2 float64
            ({k: passes[k] * grad[k] for k in grad}, passes, None, 8 * (d + 2)),
            ({k: len(FADL_STEPS) * grad[k] for k in grad}, {}, 8 * len(FADL_STEPS), None),
        ):
            r = _round(sizes, wan, hub, d, hierarchical, True, flops, ar, up_b, down_b)
            for i in range(4):
                tot[i] += r[i]
    return Prediction(tot[0], tot[1], 3 * s.fadl_iters, tot[2], tot[3])
