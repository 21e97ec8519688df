"""Read what the report shows from the store: findings with their verdicts, error maps,
localization, reduction and release window; fuzzing campaigns with their rate over time; tuning
searches with their measurements. Pure reads: nothing is written, nothing is run.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from xlaprobe.errormap import FILE_NAME as ERRORS_FILE
from xlaprobe.errormap import ErrorMap, load_error_maps
from xlaprobe.errors import CorruptArtifact
from xlaprobe.oracle import Verdict
from xlaprobe.store import Store, StoredFinding

#: Longest text read from a reduction's files (characters): the page stays small.
MAX_TEXT = 20_000
#: Time bins of a campaign's rate plot, at most.
RATE_BINS = 24


@dataclasses.dataclass(frozen=True)
class FindingView:
    """One finding and everything the store knows about it.

    Attributes:
        stored: the finding as the store holds it (id, program, configuration, kind, keys,
            artifact, when).
        verdicts: the verdicts of every configuration of the check that stored it.
        error_maps: the per-element error maps of its failing leaves (`xlaprobe.errormap`).
        error_note: why there are no maps ("" when there are).
        localization: the newest stored localization's JSON, or None.
        reduction: the newest stored reduction's JSON, or None.
        repro: the reduced ``repro.py`` text ("" when absent).
        reduced_kernel: the reduced program's failing kernel (``fusion.hlo``; "" when absent).
        bisection: the newest stored release bisection's JSON, or None.
        check_id: the store's id of the check that stored it (findings of one check share
            their verdict table).
    """

    stored: StoredFinding
    verdicts: tuple[Verdict, ...]
    error_maps: tuple[ErrorMap, ...]
    error_note: str
    localization: dict[str, Any] | None
    reduction: dict[str, Any] | None
    repro: str
    reduced_kernel: str
    bisection: dict[str, Any] | None
    check_id: int


@dataclasses.dataclass(frozen=True)
class CampaignView:
    """One fuzzing campaign (table ``fuzz_campaigns``, `xlaprobe.campaign`).

    Attributes:
        id: its row id.
        configs: the configuration specs.
        status: running, done or interrupted.
        created, updated: Unix times (s).
        programs: programs checked; findings: findings stored; unique: distinct fingerprints.
        seconds: wall time spent (s, all sessions).
        coverage: catalogue primitive -> programs that used it (0 for uncovered ones).
        rate: (seconds since `created` at the bin's middle, programs/s in the bin) from the
            creation times of the campaign's stored checks.
    """

    id: int
    configs: tuple[str, ...]
    status: str
    created: float
    updated: float
    programs: int
    findings: int
    unique: int
    seconds: float
    coverage: dict[str, int]
    rate: tuple[tuple[float, float], ...]

    @property
    def programs_per_s(self) -> float:
        """Programs per second of wall time over all sessions (0 before any time passed)."""
        return self.programs / self.seconds if self.seconds > 0 else 0.0

    @property
    def covered(self) -> int:
        """Catalogue primitives exercised at least once."""
        return sum(1 for n in self.coverage.values() if n)


@dataclasses.dataclass(frozen=True)
class Measurement:
    """One tuning measurement: its position in the run (1-based), status (``ok``, ``rejected``,
    ``compile-error``, ``crash``, ``timeout``), speedup over the default with its interval
    (None where not timed) and whether it is the fresh-worker re-measurement of the best."""

    n: int
    status: str
    speedup: float | None
    low: float | None
    high: float | None
    replicate: bool
    candidate: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class TuningView:
    """One tuning search (tables ``tuning_runs`` and ``measurements``).

    Attributes:
        id, name, strategy, budget, created: the run (created: Unix time, s).
        result: its stored result JSON (None while unfinished).
        measurements: its measurements in order.
    """

    id: int
    name: str
    strategy: str
    budget: int
    created: float
    result: dict[str, Any] | None
    measurements: tuple[Measurement, ...]

    @property
    def best_so_far(self) -> list[float | None]:
        """Per measurement, the best speedup of the timed non-replicate ones so far (None
        before the first)."""
        best: float | None = None
        out = []
        for m in self.measurements:
            if not m.replicate and m.status == "ok" and m.speedup is not None:
                best = m.speedup if best is None else max(best, m.speedup)
            out.append(best)
        return out


@dataclasses.dataclass(frozen=True)
class ReportData:
    """Everything the page shows.

    Attributes:
        db: the store's path, as given.
        generated: when it was gathered (Unix time, s).
        counts: rows per table (programs, checks, findings, ...).
        distinct_bugs: distinct bugs among the findings.
        findings: newest first.
        campaigns: newest first.
        tunings: newest first.
    """

    db: str
    generated: float
    counts: dict[str, int]
    distinct_bugs: int
    findings: tuple[FindingView, ...]
    campaigns: tuple[CampaignView, ...]
    tunings: tuple[TuningView, ...]


def programs_per_second(times: Sequence[float], start: float, end: float,
                        bins: int = RATE_BINS) -> list[tuple[float, float]]:
    """Programs per second over time from the completion times of checks.

    Args:
        times: Unix times (s) of the checks.
        start, end: the span to cover (s); times outside are ignored.
        bins: number of equal bins, at most (fewer when the span is under `bins` seconds: bins
            are at least one second wide).

    Returns:
        (seconds from `start` to the bin's middle, checks in the bin / bin width) per bin; empty
        when the span is empty.

    >>> programs_per_second([0.5, 1.5, 2.5, 3.5], 0.0, 4.0, bins=2)
    [(1.0, 1.0), (3.0, 1.0)]
    """
    span = end - start
    if not span > 0:
        return []
    n = max(1, min(bins, int(span)))
    width = span / n
    counts = [0] * n
    for t in times:
        if start <= t <= end:
            counts[min(n - 1, int((t - start) / width))] += 1
    return [((i + 0.5) * width, c / width) for i, c in enumerate(counts)]


def gather(store: Store, *, db: str = "") -> ReportData:
    """Read the report's data from an open store.

    Args:
        store: the store (`xlaprobe.store.Store`).
        db: its path as the user gave it (shown on the page).

    Raises:
        CorruptArtifact: a table the store should have cannot be read.
    """
    try:
        counts = {t: store.count(t) for t in ("programs", "checks", "findings", "localizations",
                                               "reductions", "bisections", "tuning_runs",
                                               "measurements")}
        findings = tuple(_finding(store, stored) for stored in store.stored_findings())
        return ReportData(db=db or store.path, generated=time.time(), counts=counts,
                          distinct_bugs=store.distinct_bugs(), findings=findings,
                          campaigns=tuple(_campaigns(store)), tunings=tuple(_tunings(store)))
    except sqlite3.DatabaseError as exc:
        raise CorruptArtifact(f"cannot read the store {store.path}: {exc}") from exc


def _finding(store: Store, stored: StoredFinding) -> FindingView:
    [(check_id,)] = store.select("SELECT check_id FROM findings WHERE id = ?", (stored.id,))
    maps, note = _error_maps(stored.artifact, stored.freedom)
    localization = next(iter(store.localizations(stored.id)), None)
    reduction = next(iter(store.reductions(stored.id)), None)
    directory = Path(reduction["directory"]) if reduction and reduction.get("directory") else None
    bisection = next(iter(store.bisections(stored.id)), None)
    return FindingView(
        stored=stored, verdicts=tuple(store.verdicts(check_id)), error_maps=tuple(maps),
        error_note=note, localization=localization, reduction=reduction,
        repro=_read(directory / "repro.py") if directory else "",
        reduced_kernel=_read(directory / "fusion.hlo") if directory else "",
        bisection=bisection, check_id=check_id)


def _error_maps(artifact: str | None, freedom: str = "") -> tuple[list[ErrorMap], str]:
    """(the maps saved beside a finding's artifact, why there are none)."""
    if freedom:  # its answer differs from the honest run in the program's dtype, not float64's
        return [], (f"labelled freedoms (freedom:{freedom.replace('+', ', freedom:')}) differ "
                    "from the honest run in the program's own dtype, while error maps are "
                    "against the float64 reference (often matched: excess range gives its "
                    "answer); the verdict's detail gives both answers")
    if not artifact:
        return [], ("no artifact was saved (a campaign keeps one per fingerprint; or the "
                    "program is one the artifact format cannot hold)")
    path = Path(artifact) / ERRORS_FILE
    if not path.is_file():
        return [], (f"no {ERRORS_FILE} beside the artifact: no numeric mismatch (a crash, a "
                    "timeout, a compile error), or an artifact older than error maps (check it "
                    "again to write them)")
    try:
        return load_error_maps(path), ""
    except CorruptArtifact as exc:
        return [], str(exc)


def _read(path: Path) -> str:
    """A text file's first `MAX_TEXT` characters, or "" when it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read(MAX_TEXT + 1)
    except OSError:
        return ""
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "\n... (cut)\n"


def _campaigns(store: Store) -> list[CampaignView]:
    if not store.select("SELECT 1 FROM sqlite_master WHERE name = 'fuzz_campaigns'"):
        return []
    catalogue = _catalogue()
    # Checks name their campaign since store schema 3; a store opened read-only may be older.
    named = any(r[1] == "campaign" for r in store.select(
        "SELECT * FROM pragma_table_info('checks')"))
    views = []
    for rid, configs, status, state, created, updated in store.select(
            "SELECT id, configs, status, state, created, updated FROM fuzz_campaigns "
            "ORDER BY id DESC"):
        data = json.loads(state)
        # Checks stored before they named their campaign are matched by configurations and time.
        legacy = "p.source = 'fuzz' AND c.configs = ? AND c.created >= ? AND c.created <= ?"
        times = [r[0] for r in store.select(
            "SELECT c.created FROM checks c JOIN programs p ON p.id = c.program_id WHERE "
            + (f"c.campaign = ? OR (c.campaign IS NULL AND {legacy})" if named else legacy),
            ((rid,) if named else ()) + (configs, created, updated))]
        coverage = {p: 0 for p in catalogue} | {str(k): int(v) for k, v in
                                                data.get("coverage", {}).items()}
        views.append(CampaignView(
            id=rid, configs=tuple(configs.split(",")), status=status, created=created,
            updated=updated, programs=int(data.get("programs", 0)),
            findings=int(data.get("findings", 0)), unique=len(data.get("fingerprints", {})),
            seconds=float(data.get("seconds", 0.0)), coverage=coverage,
            rate=tuple(programs_per_second(times, created, updated))))
    return views


def _catalogue() -> tuple[str, ...]:
    """The fuzzer's op catalogue (primitive names), or () where it cannot load."""
    try:
        from xlaprobe.sources.ops import RULES  # in the try: the report survives its failure
    except Exception:  # the report still shows what the store has
        return ()
    return tuple(RULES)


def _tunings(store: Store) -> list[TuningView]:
    views = []
    for rid, name, strategy, budget, created, result in store.select(
            "SELECT id, name, strategy, budget, created, result FROM tuning_runs "
            "ORDER BY id DESC"):
        rows = store.select("SELECT status, speedup, low, high, replicate, candidate FROM "
                            "measurements WHERE run_id = ? ORDER BY id", (rid,))
        measurements = tuple(
            Measurement(i + 1, r[0], _finite(r[1]), _finite(r[2]), _finite(r[3]), bool(r[4]),
                        json.loads(r[5]))
            for i, r in enumerate(rows))
        views.append(TuningView(rid, name, strategy, budget, created,
                                json.loads(result) if result else None, measurements))
    return views


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None
