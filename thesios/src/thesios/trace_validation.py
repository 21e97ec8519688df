"""Validation on traces thesios did not make: hold disks out, synthesize them from samples of the rest.

Any full-rate traces the reader registry reads (:mod:`thesios.readers`) are split into disks (a
``disk_id`` column, else one disk per device of a block trace, else one per file) and grouped (by a
column the user names, or by entity identification on each disk's samples, :mod:`thesios.identify`).
In each group, ``held_out`` disks are held out; each of the others is Bernoulli-sampled at p
(:func:`thesios.samplers.bernoulli_sample`) and the samples of 1/p of them are merged into one
synthesized disk (Thesios, ASPLOS 2024, sec. 4: the union of samples at p of ~1/p similar disks is a
full-rate trace of one). With N similar disks that needs 1/p <= N - held_out: where a group has too
few, p is raised to the smallest rate the group supports and the result says so; nothing is
extrapolated. Each held-out disk is compared with the synthesis per window (an hour, or a tenth of
a shorter trace) over the time every disk of the group covers: read and write counts, utilization
(the share of the window with at least one request in flight, iostat's %util, from each request's
measured latency) and the p50/p99 of read latency. Every request keeps the latency measured on its
own disk: the synthesized disk's latency is that of its samples, not re-served on a model.
Accuracy per window is ``max(0, 1 - |synth - real| / real)`` (:func:`thesios.validate.accuracy`).
"""

from __future__ import annotations

import math
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from thesios.errors import ThesiosInputError
from thesios.readers import EXTRA_LATENCY, check_distinct, read_trace
from thesios.samplers import check_rate, rate_label
from thesios.validate import METRICS, PAPER_BANDS, accuracy, busy_time_until

#: Fewer synthesized requests than this per window and a group's result says so.
MIN_SAMPLES_PER_WINDOW = 20
#: Files in a folder of traces that are documentation, not traces.
_NOT_TRACES = (".md", ".txt.md", ".json", ".html")


@dataclass(frozen=True)
class Disk:
    """One disk's full-rate trace, in arrival order.

    Attributes:
        name: ``file`` or ``file#disk`` (the disk_id or device within the file).
        group: the value of the grouping column (None when grouping by identification).
        start_s: float64 arrival times, seconds from the disk's first request, shape (n,).
        is_read: bool, shape (n,).
        size: int64 bytes, shape (n,).
        latency_s: float64 measured latency of each request, seconds (NaN where unknown).
        file_id: int64 file of each request (codes unique within the disk; replay maps them to regions).
        offset: int64 byte offset of each request within its file.
    """

    name: str
    group: str | None
    start_s: np.ndarray
    is_read: np.ndarray
    size: np.ndarray
    latency_s: np.ndarray
    file_id: np.ndarray
    offset: np.ndarray

    @property
    def span_s(self) -> float:
        """Seconds from the first to the last arrival."""
        return float(self.start_s[-1]) if len(self.start_s) else 0.0


def trace_files(paths: list[Path]) -> list[Path]:
    """The trace files named by ``paths``: files as given, folders by their files (sorted, not
    hidden, not documentation).

    Raises:
        ThesiosInputError: a path that does not exist, a folder without trace files, or a file
            named twice (directly or by its folder).
    """
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            inside = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith(".")
                            and not p.name.lower().endswith(_NOT_TRACES))
            if not inside:
                raise ThesiosInputError(f"{path}: a folder without trace files")
            files.extend(inside)
        elif path.exists():
            files.append(path)
        else:
            raise ThesiosInputError(f"{path}: no such file or folder")
    check_distinct(files)
    return files


def _latency(table: pa.Table, path: Path) -> np.ndarray:
    """Each request's measured latency (s): the ``latency`` column, else reads' ``disk_time``."""
    n = table.num_rows
    lat = np.full(n, np.nan)
    if EXTRA_LATENCY in table.column_names:
        lat = np.asarray(table.column(EXTRA_LATENCY).to_numpy(zero_copy_only=False), dtype=np.float64)
    reads = np.asarray(pc.equal(table.column("op_type"), "READ").to_numpy(zero_copy_only=False), dtype=bool)
    disk_time = np.asarray(table.column("disk_time").fill_null(0).to_numpy(), dtype=np.float64)
    lat = np.where(np.isnan(lat) & reads & (disk_time > 0), disk_time, lat)
    if not np.isfinite(lat[reads]).any():
        raise ThesiosInputError(f"{path}: no read has a latency (column latency or disk_time); validation compares read latency")
    return lat


def _split(table: pa.Table, path: Path, block: bool, group_by: str | None) -> list[Disk]:
    """One :class:`Disk` per disk of a table (``disk_id``, else a block trace's device, else the file)."""
    if group_by is not None and group_by not in table.column_names:
        raise ThesiosInputError(f"{path}: no column {group_by!r} to group by (columns: {', '.join(table.column_names[:20])})")
    key = "disk_id" if "disk_id" in table.column_names else ("filename" if block else None)
    lat = _latency(table, path)
    start = np.asarray(table.column("start_time").to_numpy(), dtype=np.float64)
    is_read = np.asarray(pc.equal(table.column("op_type"), "READ").to_numpy(zero_copy_only=False), dtype=bool)
    size = np.asarray(table.column("request_io_size_bytes").to_numpy(), dtype=np.int64)
    files = np.asarray(pc.dictionary_encode(table.column("filename").combine_chunks()).indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    offset = np.asarray(table.column("file_offset").to_numpy(), dtype=np.int64)
    ids = np.zeros(table.num_rows, dtype=np.int64) if key is None else \
        np.asarray(pc.dictionary_encode(table.column(key).combine_chunks()).indices.to_numpy(zero_copy_only=False))
    names = [""] if key is None else pc.unique(table.column(key).combine_chunks()).to_pylist()
    groups = None if group_by is None else table.column(group_by).combine_chunks()
    disks = []
    for i, name in enumerate(names):
        rows = np.flatnonzero(ids == i)
        if len(rows) == 0:
            continue
        values = {None} if groups is None else set(pc.unique(groups.take(pa.array(rows))).to_pylist())
        if len(values) > 1:
            raise ThesiosInputError(f"{path}: disk {name} has several values of {group_by!r} ({', '.join(map(str, sorted(values, key=str)[:3]))})")
        order = rows[np.argsort(start[rows], kind="stable")]
        t = start[order] - start[order[0]]
        disks.append(Disk(f"{path.name}#{name}" if key else path.name, None if group_by is None else str(values.pop()),
                          t, is_read[order], size[order], lat[order], files[order], offset[order]))
    return disks


def load_disks(paths: list[Path], fmt: str = "auto", group_by: str | None = None) -> list[Disk]:
    """Read every trace file of ``paths`` with the registry and split it into disks.

    Raises:
        ThesiosInputError: a missing path, a bad file (one line naming it), a file without read
            latencies, a missing ``group_by`` column or a disk with several values of it.
    """
    disks: list[Disk] = []
    for path in trace_files(paths):
        table, spec = read_trace(path, fmt)
        disks.extend(_split(table, path, spec.block, group_by))
    return disks


def busy_union(start_s: np.ndarray, finish_s: np.ndarray, edges_s: np.ndarray) -> np.ndarray:
    """Seconds within each window [edges[i], edges[i+1]) with at least one interval in flight.

    Intervals are ``[start_s, finish_s)`` (any order, overlapping); returns float64 (len(edges)-1,).
    The union is merged once (sort, running maximum of the ends) into disjoint intervals, whose
    busy time :func:`thesios.validate.busy_time_until` clips to each window.
    """
    if len(start_s) == 0:
        return np.zeros(len(edges_s) - 1)
    order = np.argsort(start_s, kind="stable")
    s, f = start_s[order], np.maximum(finish_s[order], start_s[order])
    reach = np.maximum.accumulate(f)
    new = np.concatenate(([True], s[1:] > reach[:-1]))  # a merged interval starts here
    first = np.flatnonzero(new)
    m_end = reach[np.concatenate((first[1:] - 1, [len(s) - 1]))]
    return np.diff(busy_time_until(s[first], m_end, np.asarray(edges_s, dtype=np.float64)))


def trace_window_metrics(start_s: np.ndarray, is_read: np.ndarray, latency_s: np.ndarray, edges_s: np.ndarray) -> dict[str, np.ndarray]:
    """Per-window metrics of one (real or synthesized) disk, float64 arrays of len(edges_s) - 1.

    Keys: :data:`thesios.validate.METRICS`; latency percentiles are NaN in windows without reads
    of known latency; utilization counts requests of unknown latency as not in flight.
    """
    n_win = len(edges_s) - 1
    win = np.searchsorted(edges_s, start_s, side="right") - 1
    inside = (win >= 0) & (win < n_win)
    out = {
        "read_count": np.bincount(win[inside & is_read], minlength=n_win).astype(np.float64),
        "write_count": np.bincount(win[inside & ~is_read], minlength=n_win).astype(np.float64),
    }
    known = np.isfinite(latency_s)
    out["utilization"] = busy_union(start_s[known], start_s[known] + latency_s[known], edges_s) / np.diff(edges_s)
    p50, p99 = np.full(n_win, np.nan), np.full(n_win, np.nan)
    r = inside & is_read & known
    for w in range(n_win):  # one vectorized percentile per window (10-24), not per request
        lat = latency_s[r & (win == w)]
        if len(lat):
            p50[w], p99[w] = np.percentile(lat, [50, 99])
    out["read_latency_p50"], out["read_latency_p99"] = p50, p99
    return out


def _features(disk: Disk, rate: float, rng: np.random.Generator) -> np.ndarray:
    """Identification features of a disk from its Bernoulli samples at ``rate`` alone: sampled
    requests per second (log), read fraction, mean log2 size, mean log latency of reads (ms)."""
    keep = rng.random(len(disk.start_s)) < rate
    n = max(int(keep.sum()), 1)
    reads = keep & disk.is_read & np.isfinite(disk.latency_s)
    return np.array([
        math.log1p(n / max(disk.span_s, 1e-9)),
        float(disk.is_read[keep].mean()) if keep.any() else 0.0,
        float(np.log2(np.maximum(disk.size[keep], 1)).mean()) if keep.any() else 0.0,
        float(np.log(np.maximum(disk.latency_s[reads], 1e-7) * 1e3).mean()) if reads.any() else 0.0,
    ])


def group_disks(disks: list[Disk], rate: float, seed: int, identify_groups: bool) -> tuple[dict[str, list[int]], dict]:
    """Disk indices per group, and how they were grouped (``{"by", "groups", "purity"}``).

    By the ``group`` of each disk, or, with ``identify_groups``, by k-means over each disk's
    sample features (:func:`thesios.identify.identify`), purity against ``group`` when known.
    """
    if not identify_groups:
        groups: dict[str, list[int]] = {}
        for i, d in enumerate(disks):
            groups.setdefault(str(d.group), []).append(i)
        return groups, {"by": "column", "groups": len(groups)}
    from thesios.identify import identify, purity

    rng = np.random.default_rng([seed, 30])
    features = np.stack([_features(d, rate, rng) for d in disks])
    grouping = identify(features, seed=seed)
    groups = {}
    for i, label in enumerate(grouping.labels):
        groups.setdefault(f"group {label}", []).append(i)
    info = {"by": "identification", "groups": grouping.k}
    if disks[0].group is not None:
        truth = np.unique([d.group for d in disks], return_inverse=True)[1]
        info["purity"] = purity(grouping.labels, truth)
    return groups, info


def synthesize_from(donors: list[Disk], rate: float, rng: np.random.Generator, horizon_s: float) -> Disk:
    """The union of Bernoulli samples at ``rate`` of ``donors`` within ``horizon_s``: one disk."""
    from thesios.samplers import check_rate

    check_rate(rate)
    parts = []
    for d in donors:
        keep = (rng.random(len(d.start_s)) < rate) & (d.start_s < horizon_s)
        parts.append(np.flatnonzero(keep))
    fields = ("start_s", "is_read", "size", "latency_s", "file_id", "offset")
    cat = {f: np.concatenate([getattr(d, f)[k] for d, k in zip(donors, parts)]) for f in fields}
    # Each donor's files stay its own: file codes are namespaced by the donor.
    cat["file_id"] = cat["file_id"] + np.repeat(np.arange(len(donors), dtype=np.int64) << 32, [len(k) for k in parts])
    order = np.argsort(cat["start_s"], kind="stable")
    return Disk("synthesized", donors[0].group, *(cat[f][order] for f in fields))


def _validate_group(name: str, disks: list[Disk], rate: float, held_out: int, seed: int, window_s: float | None,
                    rate_given: bool = True) -> dict:
    """Hold out ``held_out`` disks of one group, synthesize each from 1/p of the others, compare;
    ``rate_given``: p was asked for (else it is the default), for the note when p is raised."""
    n = len(disks)
    rng = np.random.default_rng([seed, 40, zlib.crc32(name.encode())])  # str hash() is salted per process
    order = rng.permutation(n)
    held, donors = [disks[i] for i in order[:held_out]], [disks[i] for i in order[held_out:]]
    want = round(1 / rate)
    note = None
    if want > len(donors):
        note = (f"the {'asked' if rate_given else 'default'} p {rate_label(rate)} is below what the group's "
                f"{len(donors)} donor disks support; used 1/{len(donors)}")
        rate, want = 1 / len(donors), len(donors)
    donors = donors[:want]
    horizon = min(d.span_s for d in held + donors)
    if horizon <= 0:
        raise ThesiosInputError(f"group {name}: a disk whose trace spans no time")
    win = window_s or (3600.0 if horizon >= 36_000 else horizon / 10)
    edges = np.arange(0.0, horizon + 1e-12, win)
    edges = edges if len(edges) > 1 else np.array([0.0, horizon])
    per_disk, sparse = {}, []
    for d in held:
        syn = synthesize_from(donors, rate, np.random.default_rng([seed, 50, len(per_disk)]), horizon)
        if len(syn.start_s) < MIN_SAMPLES_PER_WINDOW * (len(edges) - 1):
            sparse.append(len(syn.start_s))
        m_real = trace_window_metrics(d.start_s, d.is_read, d.latency_s, edges)
        m_syn = trace_window_metrics(syn.start_s, syn.is_read, syn.latency_s, edges)
        per_disk[d.name] = {m: accuracy(m_syn[m], m_real[m]) for m in METRICS}
    acc = {m: _nanmean([v[m] for v in per_disk.values()]) for m in METRICS}
    out = {"disks": n, "held_out": list(per_disk), "donors": len(donors), "p": rate, "window_s": win,
           "horizon_s": horizon, "accuracy": acc, "per_disk": per_disk, "heterogeneity": heterogeneity(disks, horizon)}
    if sparse:  # the metrics of a window of a few samples are noise, not the method
        counts = f"{min(sparse)}" if min(sparse) == max(sparse) else f"{min(sparse)}-{max(sparse)}"
        few = f"only {counts} samples in {len(edges) - 1} windows (< {MIN_SAMPLES_PER_WINDOW} a window): widen --window or raise --rate"
        note = f"{note}; {few}" if note else few
    return out | ({"note": note} if note else {})


def heterogeneity(disks: list[Disk], horizon_s: float) -> dict[str, float]:
    """How alike a group's disks are, in the generator's terms: ``rate_sigma`` (s.d. of the log
    request rate over ``[0, horizon_s)``) and ``read_jitter`` (s.d. of the read fraction)."""
    rates = np.array([max(int((d.start_s < horizon_s).sum()), 1) / horizon_s for d in disks])
    reads = np.array([float(d.is_read[d.start_s < horizon_s].mean()) if (d.start_s < horizon_s).any() else 0.0 for d in disks])
    return {"rate_sigma": float(np.std(np.log(rates))), "read_jitter": float(np.std(reads))}


def _nanmean(values: list[float]) -> float:
    vals = [v for v in values if v == v]
    return float(np.mean(vals)) if vals else float("nan")


def validate_traces(disks: list[Disk], rate: float, held_out: int = 2, seed: int = 0, window_s: float | None = None,
                    identify_groups: bool | None = None, progress: Callable[[str], None] | None = None,
                    rate_given: bool = True) -> dict:
    """Validate synthesis on real traces; see the module docstring.

    Args:
        disks: from :func:`load_disks`.
        rate: the asked sampling rate p in (0, 1]; a group with fewer than 1/p donors uses 1/donors.
        rate_given: whether the user asked for ``rate`` (False: it is the default), for the notes.
        held_out: disks held out per group (each synthesized from the group's other disks).
        seed: seed of the hold-out choice, the samplers and the identification.
        window_s: window of the metrics, s (None: an hour, or a tenth of a trace shorter than 10 h).
        identify_groups: group by identification (default: when the disks carry no group).

    Returns:
        ``{"accuracy": {metric: mean over groups' held-out disks}, "p_asked" (``rate``), "p_used"
        ({group: the p it used}), "groups": {name: {..., "p"}},
        "grouping", "paper", "disks", "seconds"}`` (plain JSON types; NaN where undefined).

    Raises:
        ThesiosInputError: p outside (0, 1], ``held_out < 1``, or no group with a disk to hold
            out and one to synthesize it from (e.g. a trace of one disk).
    """
    t0 = time.perf_counter()
    check_rate(rate)
    say = progress or (lambda _msg: None)
    if held_out < 1:
        raise ThesiosInputError("--held-out must be >= 1")
    if len(disks) < 2:
        raise ThesiosInputError(f"{len(disks)} disk in the traces: validation holds disks out and synthesizes them from others of their group")
    identify_groups = disks[0].group is None if identify_groups is None else identify_groups
    groups, grouping = group_disks(disks, rate, seed, identify_groups)
    say(f"{len(disks)} disks in {len(groups)} groups ({grouping['by']})")
    result: dict[str, dict] = {}
    for name, idx in sorted(groups.items()):
        if len(idx) <= held_out:
            result[name] = {"disks": len(idx), "note": f"too few disks to hold {held_out} out and merge the rest: skipped"}
            say(f"{name}: {len(idx)} disks, skipped (too few to hold {held_out} out)")
            continue
        result[name] = _validate_group(name, [disks[i] for i in idx], rate, held_out, seed, window_s, rate_given)
        say(f"{name}: {len(idx)} disks, p = {rate_label(result[name]['p'])}, {held_out} held out")
    done = [g for g in result.values() if "accuracy" in g]
    if not done:
        raise ThesiosInputError(f"no group has more than {held_out} disks: nothing to hold out and synthesize from")
    acc = {m: _nanmean([v for g in done for v in [g["per_disk"][d][m] for d in g["per_disk"]]]) for m in METRICS}
    return {"accuracy": acc, "p_asked": rate, "p_used": {name: g["p"] for name, g in result.items() if "p" in g}, "groups": result, "grouping": grouping, "disks": len(disks),
            "paper": {m: list(b) for m, b in PAPER_BANDS.items()}, "seconds": time.perf_counter() - t0,
            "accuracy_definition": "per window max(0, 1 - |synth - real| / real), averaged over windows, then over held-out disks of all groups"}
