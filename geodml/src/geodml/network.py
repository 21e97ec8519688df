"""Data centers holding their rows, and the simulated network that moves messages between them
while keeping an exact ledger of bytes, rounds, simulated seconds and dollars.

Hierarchical aggregation (Cano et al. 2016, sec. 3): inside a data center the workers reduce to
a leader over the intra-DC network, and only the leaders exchange one message each with the hub
per round across the WAN. With hierarchical=False every worker talks to the hub directly (its
flows share the DC's WAN link).

Time of one round (all DCs start when the hub broadcasts):
    max over DCs k of [ wan_down_k + intra_down_k + compute_k + intra_up_k + wan_up_k ]
where compute_k = flops_k / (workers_k * gflops_k * 1e9) + allreduces_k * 2 * intra_seconds(msg).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from geodml.data import raw_nbytes
from geodml.encoding import rows_nbytes
from geodml.errors import GeodmlError, SovereigntyError
from geodml.objective import nnz
from geodml.wan import Region, Wan


@dataclass
class DataCenter:
    """One data center: its region, its rows X (n, d) / y (n,), and whether it is sovereign (its
    raw rows may not leave the region; model statistics may)."""

    region: Region
    X: object
    y: np.ndarray
    sovereign: bool = False
    # The rows in their source form (a pyarrow Table, data.Dataset.source_train) and the place
    # values this DC holds (e.g. "EWR"); None for data without a place column.
    source: object = None
    place: str | None = None
    _encoded: int | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def name(self) -> str:
        """The region name."""
        return self.region.name

    @property
    def n(self) -> int:
        """Rows held."""
        return int(len(self.y))

    @property
    def nnz(self) -> int:
        """Stored non-zeros of X."""
        return nnz(self.X)

    @property
    def raw_nbytes(self) -> int:
        """Bytes of shipping the raw rows, measured: Parquet with zstd of the source rows, or of
        the matrix rows where there is no source (encoding.rows_nbytes); computed once."""
        if self._encoded is None:
            self._encoded = rows_nbytes(self.X, self.y, self.source)
        return self._encoded

    @property
    def memory_nbytes(self) -> int:
        """Bytes of the rows as held in memory (data.raw_nbytes: the arrays' nbytes)."""
        return raw_nbytes(self.X, self.y)

    @property
    def workers(self) -> int:
        """Workers that hold a share of the rows (never more than the rows)."""
        return max(1, min(self.region.workers, self.n))

    def shards(self) -> list[slice]:
        """Contiguous row ranges, one per worker."""
        cuts = np.linspace(0, self.n, self.workers + 1).round().astype(int)
        return [slice(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:])]


@dataclass(frozen=True)
class Transfer:
    """One message in the ledger: src -> dst (region names), kind 'raw' or 'model', bytes,
    whether it crossed the WAN (inter) or stayed inside a DC, dollars of egress, round number."""

    src: str
    dst: str
    kind: str
    nbytes: int
    inter: bool
    dollars: float
    round: int


@dataclass
class Network:
    """The simulated network of one training run. ``hub`` is the region that aggregates."""

    wan: Wan
    dcs: list[DataCenter]
    hub: str
    hierarchical: bool = True
    ledger: list[Transfer] = field(default_factory=list)
    sim_seconds: float = 0.0
    rounds: int = 0
    # Iteration counts an algorithm reports for the planner's check (e.g. one-shot's local passes).
    notes: dict = field(default_factory=dict)
    # Called with the network after every round (progress lines); None: silent.
    on_round: Callable[["Network"], None] | None = None
    _wan_total: int = field(default=0, init=False, repr=False)

    def __post_init__(self):
        if self.hub not in [d.name for d in self.dcs]:
            raise GeodmlError(f"hub {self.hub!r} is not one of the data centers")

    def dc(self, name: str) -> DataCenter:
        """The data center in region name."""
        for d in self.dcs:
            if d.name == name:
                return d
        raise GeodmlError(f"unknown data center {name!r}")

    def _log(self, src: str, dst: str, kind: str, nbytes: int, inter: bool, count: int = 1) -> None:
        dollars = self.wan.egress_usd(src, dst, nbytes) if inter else 0.0
        for _ in range(count):
            self.ledger.append(Transfer(src, dst, kind, int(nbytes), inter, dollars, self.rounds))
        if inter:
            self._wan_total += count * int(nbytes)

    def compute_time(self, dc: DataCenter, flops: float, allreduces: int = 0, allreduce_nbytes: int = 0) -> float:
        """Seconds for flops spread evenly over dc's workers, plus ``allreduces`` intra-DC
        allreduces (reduce to the leader + broadcast) of allreduce_nbytes each, which are logged."""
        rate = dc.workers * dc.region.compute_gflops * 1e9
        t = flops / rate
        if allreduces and dc.workers > 1:
            t += allreduces * 2 * self.wan.intra_seconds(dc.name, allreduce_nbytes)
            self._log(dc.name, dc.name, "model", allreduce_nbytes, False, count=2 * (dc.workers - 1) * allreduces)
        return t

    def round(self, down: np.ndarray | None, up: dict[str, np.ndarray], flops: dict[str, float],
              allreduces: dict[str, int] | None = None, allreduce_nbytes: int | None = None) -> None:
        """Account one round: the hub broadcasts ``down`` (None: nothing) to every DC and its
        workers, each DC computes (flops_k, allreduces_k local intra-DC allreduces of a message
        of allreduce_nbytes, default the size of its up message) and sends its reduced ``up[k]``
        back. Message sizes are the
        arrays' nbytes. Advances rounds and sim_seconds."""
        self.rounds += 1
        allreduces = allreduces or {}
        down_b = 0 if down is None else int(down.nbytes)
        worst = 0.0
        for dc in self.dcs:
            up_b = int(up[dc.name].nbytes) if dc.name in up else 0
            W = dc.workers
            remote = dc.name != self.hub
            # Hierarchical: one WAN flow per DC, fan-out inside; flat: one WAN flow per worker.
            wan_flows = 1 if self.hierarchical else W
            intra_msgs = W - 1 if (self.hierarchical or not remote) else 0
            t = 0.0
            if down_b:
                if remote:
                    t += self.wan.transfer_seconds(self.hub, dc.name, down_b, wan_flows)
                    self._log(self.hub, dc.name, "model", down_b, True, count=wan_flows)
                if intra_msgs:
                    t += self.wan.intra_seconds(dc.name, down_b)
                    self._log(dc.name, dc.name, "model", down_b, False, count=intra_msgs)
            c = self.compute_time(dc, flops.get(dc.name, 0.0), allreduces.get(dc.name, 0),
                                  up_b if allreduce_nbytes is None else allreduce_nbytes)
            t += c
            if up_b:
                if intra_msgs:
                    t += self.wan.intra_seconds(dc.name, up_b)
                    self._log(dc.name, dc.name, "model", up_b, False, count=intra_msgs)
                if remote:
                    t += self.wan.transfer_seconds(dc.name, self.hub, up_b, wan_flows)
                    self._log(dc.name, self.hub, "model", up_b, True, count=wan_flows)
            worst = max(worst, t)
        self.sim_seconds += worst
        if self.on_round is not None:
            self.on_round(self)

    def centralize(self) -> None:
        """Move every DC's raw rows to the hub in parallel (one round). Raises SovereigntyError
        if a sovereign DC other than the hub would have to export its rows."""
        for dc in self.dcs:
            if dc.sovereign and dc.name != self.hub:
                raise SovereigntyError(f"centralizing refused: {dc.name} is sovereign and its raw rows may not leave it (hub {self.hub})")
        self.rounds += 1
        worst = 0.0
        for dc in self.dcs:
            if dc.name != self.hub:
                b = dc.raw_nbytes
                worst = max(worst, self.wan.transfer_seconds(dc.name, self.hub, b))
                self._log(dc.name, self.hub, "raw", b, True)
        self.sim_seconds += worst
        if self.on_round is not None:
            self.on_round(self)

    def compute_at_hub(self, flops: float) -> None:
        """Account flops run on the hub's workers after centralizing (adds to sim_seconds)."""
        self.sim_seconds += self.compute_time(self.dc(self.hub), flops)

    # --- ledger summaries -------------------------------------------------------------------
    @property
    def wan_bytes(self) -> int:
        """Bytes that crossed the WAN (between regions)."""
        return self._wan_total

    @property
    def intra_bytes(self) -> int:
        """Bytes moved inside data centers (worker <-> leader)."""
        return sum(t.nbytes for t in self.ledger if not t.inter)

    @property
    def dollars(self) -> float:
        """Egress dollars of all WAN transfers."""
        return float(sum(t.dollars for t in self.ledger))

    def raw_bytes_from(self, name: str) -> int:
        """Raw-row bytes that left region name."""
        return sum(t.nbytes for t in self.ledger if t.kind == "raw" and t.src == name and t.dst != name)

    def wan_bytes_by_dc(self) -> dict[str, int]:
        """WAN bytes each DC's link to the hub carried, both directions (every DC; the hub's own
        is 0: its messages cross no WAN)."""
        out = {d.name: 0 for d in self.dcs}
        for t in self.ledger:
            if t.inter:
                out[t.dst if t.src == self.hub else t.src] += t.nbytes
        return out

    def summary(self) -> dict:
        """Totals: bytes (WAN), intra_bytes, raw_bytes, model_bytes, rounds, sim_seconds, dollars,
        raw_bytes_by_source (every DC, zero where nothing raw left), wan_bytes_by_dc."""
        return {
            "bytes": self.wan_bytes,
            "intra_bytes": self.intra_bytes,
            "raw_bytes": sum(t.nbytes for t in self.ledger if t.kind == "raw" and t.inter),
            "model_bytes": sum(t.nbytes for t in self.ledger if t.kind == "model" and t.inter),
            "rounds": self.rounds,
            "sim_seconds": self.sim_seconds,
            "dollars": self.dollars,
            "raw_bytes_by_source": {d.name: self.raw_bytes_from(d.name) for d in self.dcs},
            "wan_bytes_by_dc": self.wan_bytes_by_dc(),
        }


def build_dcs(X, y: np.ndarray, parts: list[np.ndarray], wan: Wan, sovereign: list[str] | tuple[str, ...] = (),
              source=None, regions: tuple[str, ...] | None = None, places: tuple[str, ...] = ()) -> list[DataCenter]:
    """One DataCenter per partition, placed in the WAN's regions in file order, or in ``regions``.

    X: (n, d) dense or CSR; y: (n,); parts: index arrays (partition.partition). sovereign: region
    names whose raw rows may not leave. source: the rows in source form (a pyarrow Table aligned
    with X) or None; places: the place values of each partition (labels only). Raises GeodmlError
    if there are more partitions than regions, a named region is not in the WAN, or a sovereign
    name is not one of the chosen data centers."""
    from geodml.partition import take_rows

    if regions is not None:
        known = set(wan.names)
        missing = [r for r in regions if r not in known]
        if missing:
            raise GeodmlError(f"the data's places live in regions {', '.join(missing)}, which the WAN lacks "
                              f"(its regions: {', '.join(wan.names)}); give a WAN with them or partition otherwise")
        chosen = [wan.region(r) for r in regions]
    else:
        if len(parts) > len(wan.regions):
            raise GeodmlError(f"{len(parts)} data centers but the WAN has only {len(wan.regions)} regions")
        chosen = list(wan.regions[: len(parts)])
    names = [r.name for r in chosen]
    for s in sovereign:
        if s not in names:
            raise GeodmlError(f"sovereign data center {s!r} is not one of {', '.join(names)}")
    return [DataCenter(r, take_rows(X, p), y[p], r.name in sovereign, None if source is None else source.take(p),
                       places[i] if i < len(places) else None)
            for i, (r, p) in enumerate(zip(chosen, parts))]


def model_hub(wan: Wan, names: list[str], probe_nbytes: float = 1e6) -> str:
    """The aggregation hub for model exchange: the region minimizing the slowest round trip of a
    probe_nbytes message to and from every other region (ties: first in order)."""
    def cost(h: str) -> float:
        return max((wan.transfer_seconds(h, k, probe_nbytes) + wan.transfer_seconds(k, h, probe_nbytes) for k in names if k != h), default=0.0)
    return min(names, key=cost)


def central_hub(wan: Wan, dcs: list) -> str | None:
    """Where centralizing should gather the rows: among regions allowed to receive everything
    (every other DC non-sovereign), the one with the least egress dollars, then the least transfer
    time. dcs: DataCenter or planner.DCSize objects (name, sovereign, raw_nbytes). None when two
    or more DCs are sovereign (no allowed hub)."""
    sov = [d.name for d in dcs if d.sovereign]
    if len(sov) > 1:
        return None
    allowed = sov or [d.name for d in dcs]

    def cost(h: str) -> tuple[float, float]:
        others = [d for d in dcs if d.name != h]
        return (sum(wan.egress_usd(d.name, h, d.raw_nbytes) for d in others),
                max((wan.transfer_seconds(d.name, h, d.raw_nbytes) for d in others), default=0.0))
    return min(allowed, key=cost)
