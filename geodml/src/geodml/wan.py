"""The WAN model: regions (data centers) with intra-DC links and workers, and inter-region links
with bandwidth, round-trip time and egress price, loaded from YAML (yaml.safe_load, validated).

Transfer time of one message of B bytes over a link: rtt/2 + 8*B/bandwidth seconds (one-way
latency plus serialization); messages on different links proceed in parallel, messages sharing a
link share its bandwidth. Egress dollars: B/1e9 * the sending region's (or the link's) $/GB.
"""

from __future__ import annotations

import itertools
import sys
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import yaml

from geodml.errors import GeodmlError
from geodml.paths import existing_file


@dataclass(frozen=True)
class Region:
    """One data center: name, workers (machines holding its rows), compute_gflops (per worker,
    effective GFLOP/s), intra-DC link (bandwidth in Gbit/s, RTT in ms), egress $/GB it charges."""

    name: str
    workers: int
    compute_gflops: float
    intra_bandwidth_gbps: float
    intra_rtt_ms: float
    egress_usd_per_gb: float


@dataclass(frozen=True)
class Link:
    """A symmetric inter-region link: bandwidth Gbit/s, RTT ms; egress_usd_per_gb overrides the
    sending region's price on this pair when set."""

    bandwidth_gbps: float
    rtt_ms: float
    egress_usd_per_gb: float | None = None


@dataclass(frozen=True)
class Wan:
    """Regions and the full mesh of links between them (every unordered pair present)."""

    regions: tuple[Region, ...]
    links: dict[frozenset, Link] = field(repr=False)

    @property
    def names(self) -> list[str]:
        """Region names in file order."""
        return [r.name for r in self.regions]

    def region(self, name: str) -> Region:
        """The region called name; raises GeodmlError if unknown."""
        for r in self.regions:
            if r.name == name:
                return r
        raise GeodmlError(f"unknown region {name!r} (known: {', '.join(self.names)})")

    def link(self, a: str, b: str) -> Link:
        """The link between regions a != b."""
        return self.links[frozenset((a, b))]

    def transfer_seconds(self, src: str, dst: str, nbytes: float, flows: int = 1) -> float:
        """Seconds to move nbytes from src to dst (0 for nbytes == 0 or src == dst); ``flows``
        messages of nbytes each share the link (hence flows * nbytes serialized)."""
        if nbytes <= 0 or src == dst:
            return 0.0
        ln = self.link(src, dst)
        return ln.rtt_ms / 2e3 + 8.0 * nbytes * flows / (ln.bandwidth_gbps * 1e9)

    def intra_seconds(self, region: str, nbytes: float) -> float:
        """Seconds for one message of nbytes over an intra-DC link of region (0 if nbytes == 0)."""
        if nbytes <= 0:
            return 0.0
        r = self.region(region)
        return r.intra_rtt_ms / 2e3 + 8.0 * nbytes / (r.intra_bandwidth_gbps * 1e9)

    def egress_usd(self, src: str, dst: str, nbytes: float) -> float:
        """Dollars charged for nbytes leaving src for dst (0 inside a region)."""
        if src == dst:
            return 0.0
        price = self.link(src, dst).egress_usd_per_gb
        if price is None:
            price = self.region(src).egress_usd_per_gb
        return nbytes / 1e9 * price


_REGION_KEYS = {"name": str, "workers": int, "compute_gflops": float, "intra_bandwidth_gbps": float, "intra_rtt_ms": float, "egress_usd_per_gb": float}
_LINK_KEYS = {"between", "bandwidth_gbps", "rtt_ms", "egress_usd_per_gb"}


def _num(v, what: str, cast=float, allow_zero: bool = False):
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise GeodmlError(f"malformed WAN file: {what} must be a number, got {v!r}")
    if cast is int and v != int(v):
        raise GeodmlError(f"malformed WAN file: {what} must be an integer, got {v!r}")
    x = cast(v)
    if not (x >= 0 if allow_zero else x > 0) or x != x or x == float("inf"):
        raise GeodmlError(f"malformed WAN file: {what} must be {'>= 0' if allow_zero else '> 0'} and finite, got {v!r}")
    return x


def parse_wan(doc) -> Wan:
    """Validate a parsed YAML document into a Wan. Raises GeodmlError naming the first problem."""
    if not isinstance(doc, dict) or set(doc) != {"regions", "links"}:
        raise GeodmlError("malformed WAN file: need exactly the top-level keys 'regions' and 'links'")
    regs = doc["regions"]
    if not isinstance(regs, list) or not regs:
        raise GeodmlError("malformed WAN file: 'regions' must be a non-empty list")
    regions = []
    for i, r in enumerate(regs):
        if not isinstance(r, dict) or set(r) != set(_REGION_KEYS):
            raise GeodmlError(f"malformed WAN file: region {i} needs exactly the keys {', '.join(_REGION_KEYS)}")
        if not isinstance(r["name"], str) or not r["name"] or "," in r["name"]:
            raise GeodmlError(f"malformed WAN file: region {i} name must be a non-empty string without commas")
        regions.append(Region(
            name=r["name"],
            workers=_num(r["workers"], f"{r['name']}.workers", int),
            compute_gflops=_num(r["compute_gflops"], f"{r['name']}.compute_gflops"),
            intra_bandwidth_gbps=_num(r["intra_bandwidth_gbps"], f"{r['name']}.intra_bandwidth_gbps"),
            intra_rtt_ms=_num(r["intra_rtt_ms"], f"{r['name']}.intra_rtt_ms", allow_zero=True),
            egress_usd_per_gb=_num(r["egress_usd_per_gb"], f"{r['name']}.egress_usd_per_gb", allow_zero=True),
        ))
    names = [r.name for r in regions]
    if len(set(names)) != len(names):
        raise GeodmlError("malformed WAN file: region names must be unique")
    lks = doc["links"]
    if not isinstance(lks, list):
        raise GeodmlError("malformed WAN file: 'links' must be a list")
    links: dict[frozenset, Link] = {}
    for i, ln in enumerate(lks):
        if not isinstance(ln, dict) or not {"between", "bandwidth_gbps", "rtt_ms"} <= set(ln) or not set(ln) <= _LINK_KEYS:
            raise GeodmlError(f"malformed WAN file: link {i} needs between, bandwidth_gbps, rtt_ms (and optionally egress_usd_per_gb)")
        pair = ln["between"]
        if not isinstance(pair, list) or len(pair) != 2 or pair[0] == pair[1] or any(p not in names for p in pair):
            raise GeodmlError(f"malformed WAN file: link {i} 'between' must name two different known regions, got {pair!r}")
        key = frozenset(pair)
        if key in links:
            raise GeodmlError(f"malformed WAN file: link {pair[0]}-{pair[1]} given twice")
        price = ln.get("egress_usd_per_gb")
        links[key] = Link(
            bandwidth_gbps=_num(ln["bandwidth_gbps"], f"link {i} bandwidth_gbps"),
            rtt_ms=_num(ln["rtt_ms"], f"link {i} rtt_ms", allow_zero=True),
            egress_usd_per_gb=None if price is None else _num(price, f"link {i} egress_usd_per_gb", allow_zero=True),
        )
    for a, b in itertools.combinations(names, 2):
        if frozenset((a, b)) not in links:
            raise GeodmlError(f"malformed WAN file: no link between {a} and {b} (every pair needs one)")
    return Wan(tuple(regions), links)


PACKAGED_WANS = ("wan_default.yaml", "wan_us.yaml")


def load_wan(path: str | Path | None = None, packaged: str = "wan_default.yaml") -> Wan:
    """Load a WAN YAML file, or when path is None the packaged WAN ``packaged`` (one of
    PACKAGED_WANS: the 4-region default, or four US regions for data placed by US region).

    Uses yaml.safe_load (no code execution). Raises GeodmlError if the file is missing, is not
    YAML, or fails validation.
    """
    if path is None:
        if packaged not in PACKAGED_WANS:
            raise GeodmlError(f"no packaged WAN {packaged!r} (known: {', '.join(PACKAGED_WANS)})")
        text = resources.files("geodml").joinpath(packaged).read_text()
    else:
        p = existing_file(path, "WAN")
        try:
            text = p.read_text()
        except (OSError, UnicodeDecodeError) as e:
            raise GeodmlError(f"unreadable WAN file {str(path)!r}: {type(e).__name__}") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        # str(e)'s first line is only the context ("while parsing a flow sequence"); the problem
        # and its line are what the user needs to find the mistake.
        what = getattr(e, "problem", None) or str(e).splitlines()[0]
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise GeodmlError(f"malformed WAN file: not valid YAML ({what}{where})") from None
    except ValueError:  # CPython refuses to convert an integer literal of more digits than its limit
        raise GeodmlError(f"malformed WAN file: a number of more than {sys.get_int_max_str_digits()} digits") from None
    return parse_wan(doc)
