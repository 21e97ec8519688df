"""Fuzzing campaigns: generate programs seed after seed, check each under the configurations in
the worker pool, store every check, save an artifact for each new finding, deduplicate findings on
their structural fingerprint, and resume after Ctrl-C or a kill.

Durability. Every check lands in the store (`xlaprobe.store.Store.record_check`, one SQLite
transaction) before the campaign counts it. The campaign's own state (seeds done, counters,
coverage) lives in a table of the same database file, ``fuzz_campaigns``, created with ``CREATE
TABLE IF NOT EXISTS`` through a second connection and rewritten after every check. A kill between
the two writes leaves a check the state does not know; `--resume` finds such checks in the store
(programs ``fuzz:<seed>`` checked under the same configurations since the campaign began), counts
them from the stored verdicts and findings and marks their seeds done, so no seed is checked twice
and nothing stored is lost.

Seeds. A campaign checks seeds ``seed, seed + 1, ...`` with up to ``jobs + 1`` programs in flight
(one is generated while the workers run the others), so they complete out of order: the state
keeps the lowest seed not yet done (``next_seed``) and the set of done seeds above it.

Deduplication. Two findings with the same `xlaprobe.checking.Finding.fingerprint` (the identity of
the failure, `xlaprobe.triage.finding_key`: failure class and the failing outputs' cone, or the
crash's check-failure line; which configurations failed alike is data, not key) count as one; a
localization later names the failing operation (`xlaprobe findings` counts distinct bugs by it);
the first `ARTIFACTS_PER_FINGERPRINT` of each get an artifact
directory (``<db dir>/artifacts/``, written by `xlaprobe.finding_artifacts.save_finding_artifacts`), later
ones are stored as findings without one and counted as duplicates.
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import dataclasses
import json
import math
import sqlite3
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from xlaprobe import jaxprs
from xlaprobe.backends import check_backend, make_pool
from xlaprobe.configs.registry import parse_configs
from xlaprobe.errors import InvalidArgument
from xlaprobe.finding_artifacts import save_finding_artifacts
from xlaprobe.localization.first_wrong import first_wrong_key
from xlaprobe.oracle import summary_kind
from xlaprobe.schedule import DEFAULT_SCHEDULE, check_schedule, check_scheduled, is_audit
from xlaprobe.sources.generator import generate
from xlaprobe.sources.ops import RULES
from xlaprobe.store import Store
from xlaprobe.triage import is_planted, planted_fault

#: Artifacts saved per finding fingerprint (later findings with it are counted, not saved).
ARTIFACTS_PER_FINGERPRINT = 1
#: Per-run limit of fuzzed programs (s): they are small; a run this long is itself a finding.
RUN_TIMEOUT_S = 120.0
#: Equations per generated program, at most.
MAX_EQUATIONS = 30
#: Longest accepted ``--time`` (s): 30 days.
MAX_DURATION_S = 30 * 24 * 3600.0
#: Configuration kinds that compile with XLA (their Outcome.seconds is XLA compile+run time).
XLA_KINDS = ("xla", "eager", "mutant")
#: The verdict count of a configuration a schedule skipped on a program (not an "ok").
SKIPPED = "skipped"

#: The fuzz_campaigns table (also made by `xlaprobe.merge` in a destination store).
CAMPAIGN_SCHEMA = """
CREATE TABLE IF NOT EXISTS fuzz_campaigns (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    configs TEXT NOT NULL,          -- comma-separated configuration specs, as checked
    start_seed INTEGER NOT NULL,
    next_seed INTEGER NOT NULL,     -- every seed in [start_seed, next_seed) is done
    state TEXT NOT NULL,            -- JSON: see CampaignState.to_json
    status TEXT NOT NULL,           -- running, done, interrupted
    created REAL NOT NULL, updated REAL NOT NULL)
"""



@dataclasses.dataclass
class CampaignState:
    """What a campaign has done so far (persisted as JSON in ``fuzz_campaigns.state``).

    Attributes:
        id: row id in ``fuzz_campaigns``.
        configs: the configuration specs.
        start_seed: first seed.
        next_seed: lowest seed not yet done.
        done_above: seeds >= next_seed already done.
        programs: programs checked.
        generation_errors: seeds the generator failed on (bugs in xlaprobe; skipped).
        verdicts: per configuration, count of each summary verdict kind over programs.
        findings: findings stored (one per failing configuration of a program).
        failing_programs: programs with at least one finding.
        fingerprints: finding fingerprint -> [count, first seed, configuration, verdict kind].
        coverage: catalogue primitive -> programs that use it.
        seconds: wall time spent running (s), over all sessions.
        xla_seconds: Outcome.seconds summed over XLA-compiling configurations (s).
        reference_seconds: Outcome.seconds summed over reference runs, budget included (s).
        sessions: runs of the campaign (1 + resumes).
        shard: (index, count): the campaign checks only seeds ``s`` with
            ``(s - start_seed) % count == index`` (`parse_shard`; (0, 1): every seed).
        schedule: which configurations each program runs (`xlaprobe.schedule`): ``adaptive`` or
            ``all`` (campaigns from before schedules ran all).
        backend: where its sessions ran (`xlaprobe.backends`): ``local``, ``ray``, or both
            comma-joined in order of first use (campaigns from before this was kept: ``local``).
        bugs: numeric finding fingerprint -> the key of its first wrong intermediate
            (`xlaprobe.localization.first_wrong`), computed once per fingerprint when it is new;
            ``""`` where none was named (campaigns from before this was kept: empty, so each
            fingerprint is its own bug).
    """

    id: int
    configs: tuple[str, ...]
    start_seed: int
    next_seed: int
    done_above: set[int] = dataclasses.field(default_factory=set)
    programs: int = 0
    generation_errors: int = 0
    verdicts: dict[str, collections.Counter] = dataclasses.field(default_factory=dict)
    findings: int = 0
    failing_programs: int = 0
    fingerprints: dict[str, list[Any]] = dataclasses.field(default_factory=dict)
    coverage: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    seconds: float = 0.0
    xla_seconds: float = 0.0
    reference_seconds: float = 0.0
    sessions: int = 1
    shard: tuple[int, int] = (0, 1)
    schedule: str = "all"
    backend: str = "local"
    bugs: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def unique_findings(self) -> int:
        """Distinct finding fingerprints."""
        return len(self.fingerprints)

    @property
    def distinct_bugs(self) -> int:
        """Distinct bugs: fingerprints grouped by their first wrong intermediate's key; a planted
        fault's (`xlaprobe.triage.is_planted`) is none."""
        return len({self.bugs.get(fp) or fp for fp, (_, _, config, _) in self.fingerprints.items()
                    if not is_planted(fp, config)})

    @property
    def duplicates(self) -> int:
        """Findings whose fingerprint an earlier finding of this campaign had."""
        return self.findings - len(self.fingerprints)

    def in_shard(self, seed: int) -> bool:
        """Whether `seed` is one of this campaign's (see `shard`)."""
        return (seed - self.start_seed) % self.shard[1] == self.shard[0]

    def is_done(self, seed: int) -> bool:
        """Done, or another shard's (so never to check here)."""
        return seed < self.next_seed or seed in self.done_above or not self.in_shard(seed)

    def mark_done(self, seed: int) -> None:
        self.done_above.add(seed)
        while self.next_seed in self.done_above or not self.in_shard(self.next_seed):
            self.done_above.discard(self.next_seed)
            self.next_seed += 1

    def to_json(self) -> dict[str, Any]:
        """The JSON state (without id, configs and seeds, which have columns)."""
        return {"done_above": sorted(self.done_above), "programs": self.programs,
                "generation_errors": self.generation_errors,
                "verdicts": {c: dict(v) for c, v in self.verdicts.items()},
                "findings": self.findings, "failing_programs": self.failing_programs,
                "fingerprints": self.fingerprints,
                "coverage": dict(self.coverage), "seconds": self.seconds,
                "xla_seconds": self.xla_seconds, "reference_seconds": self.reference_seconds,
                "sessions": self.sessions, "shard": list(self.shard), "schedule": self.schedule,
                "backend": self.backend, "bugs": self.bugs}

    @classmethod
    def from_row(cls, row: sqlite3.Row | tuple[Any, ...]) -> CampaignState:
        rid, configs, start, next_seed, state = row[:5]
        data = json.loads(state)
        return cls(rid, tuple(configs.split(",")), start, next_seed, set(data["done_above"]),
                   data["programs"], data["generation_errors"],
                   {c: collections.Counter(v) for c, v in data["verdicts"].items()},
                   data["findings"], data.get("failing_programs", 0), data["fingerprints"],
                   collections.Counter(data["coverage"]),
                   data["seconds"], data["xla_seconds"], data["reference_seconds"],
                   data["sessions"], tuple(data.get("shard", (0, 1))),
                   data.get("schedule", "all"), data.get("backend", "local"),
                   data.get("bugs", {}))


@dataclasses.dataclass(frozen=True)
class CampaignSummary:
    """A snapshot of a campaign for progress displays and ``--json``.

    Attributes:
        campaign: row id in ``fuzz_campaigns``.
        configs: configuration specs.
        programs: programs checked (all sessions).
        session_programs: programs checked in this session.
        elapsed_s: wall time of this session so far (s).
        programs_per_s: this session's programs per second of wall time.
        verdicts: per configuration, summary verdict kind -> programs.
        findings: findings stored.
        failing_programs: programs with at least one finding.
        unique_findings: distinct fingerprints.
        duplicates: findings - unique_findings.
        covered: catalogue primitives exercised (all sessions).
        catalogue: catalogue size.
        uncovered: catalogue primitives not exercised yet.
        next_seed: lowest seed not done.
        generation_errors: seeds the generator failed on.
        xla_share: XLA compile+run seconds over (wall seconds x jobs) in this session.
        status: running, done or interrupted.
        last_finding: one line on the newest finding ("" if none).
        fingerprints: fingerprint -> (count, first seed, configuration, verdict kind).
        schedule: ``adaptive`` or ``all`` (`xlaprobe.schedule`); under ``adaptive``, `verdicts`
            counts the programs a configuration was skipped on as ``skipped``.
        distinct_bugs: fingerprints grouped by the key of their first wrong intermediate
            (`CampaignState.bugs`), a planted fault's left out (`CampaignState.distinct_bugs`).
    """

    campaign: int
    configs: tuple[str, ...]
    programs: int
    session_programs: int
    elapsed_s: float
    programs_per_s: float
    verdicts: dict[str, dict[str, int]]
    findings: int
    failing_programs: int
    unique_findings: int
    duplicates: int
    covered: int
    catalogue: int
    uncovered: tuple[str, ...]
    next_seed: int
    generation_errors: int
    xla_share: float
    status: str
    last_finding: str
    fingerprints: dict[str, tuple[int, int, str, str]]
    schedule: str = "all"
    distinct_bugs: int = 0

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        data = dataclasses.asdict(self)
        data["configs"] = list(self.configs)
        data["uncovered"] = list(self.uncovered)
        data["fingerprints"] = {k: {"count": v[0], "first_seed": v[1], "config": v[2],
                                    "kind": v[3]} for k, v in self.fingerprints.items()}
        return data


def parse_duration(text: str | float) -> float:
    """Seconds in a duration: ``300``, ``300s``, ``10m``, ``1.5h`` (``xlaprobe fuzz --time``).

    >>> parse_duration("10m"), parse_duration("90"), parse_duration("1.5h")
    (600.0, 90.0, 5400.0)

    Raises:
        InvalidArgument: not a positive number with an optional unit s, m or h, or more than
            `MAX_DURATION_S`.
    """
    value = str(text).strip().lower()
    scale = {"s": 1.0, "m": 60.0, "h": 3600.0}.get(value[-1:], None)
    number = value[:-1] if scale is not None else value
    try:
        seconds = float(number) * (scale or 1.0)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and 0 < seconds <= MAX_DURATION_S):
        raise InvalidArgument(f"--time must be a positive duration up to 30 days like 300, 300s, "
                              f"10m or 1h, got '{text}'")
    return seconds


def parse_shard(text: str) -> tuple[int, int]:
    """``I/N`` (``xlaprobe fuzz --shard``): the campaign checks every N-th seed from its first,
    offset I, so N campaigns with shards 0/N .. N-1/N and one first seed cover its seeds once, and
    each reruns alone with the same programs.

    >>> parse_shard("1/4")
    (1, 4)

    Raises:
        InvalidArgument: not two integers ``I/N`` with ``0 <= I < N``.
    """
    index, sep, count = str(text).strip().partition("/")
    if not (sep and index.isdigit() and count.isdigit() and 0 <= int(index) < int(count)):
        raise InvalidArgument(f"--shard must be I/N with 0 <= I < N (e.g. 0/2), got '{text}'")
    return int(index), int(count)


def _is_xla(config: str) -> bool:
    return config.split(":")[0].split("[")[0] in XLA_KINDS


class Campaign:
    """One fuzzing campaign over a store (see the module docstring).

    Args:
        db: the SQLite store file (created if missing).
        configs: configuration specs (validated).
        seed: first seed of a new campaign (ignored when resuming).
        resume: continue the newest campaign with the same configurations in `db` (or the one
            `campaign` names).
        campaign: the id of the campaign to resume (``xlaprobe campaigns`` lists them); its
            configurations replace `configs`.
        jobs: worker processes per isolation group.
        max_equations: most equations per generated program.
        timeout_s: per-run limit (s).
        source: ``seed -> Program`` (default: `xlaprobe.sources.generator.generate` with
            `max_equations`); it must be deterministic for `resume` to be exact.
        backend: where configurations run: ``local`` (a `xlaprobe.workers.WorkerPool`) or
            ``ray`` (`jobs` Ray actors, `xlaprobe.ray_pool`); checks are judged and stored here.
        address: the Ray cluster (``HOST:PORT``, ``auto``; None: a local one); ``ray`` only.
        shard: (index, count) of a new campaign (`parse_shard`); a resumed one keeps its own.
        schedule: which configurations each program runs (`xlaprobe.schedule.SCHEDULES`); None:
            `xlaprobe.schedule.DEFAULT_SCHEDULE` for a new campaign, the campaign's own when
            resuming (a name given on resume replaces it from then on).

    Raises:
        InvalidArgument: bad configurations, jobs, seed, shard or db path; nothing to resume;
            Ray missing or `address` unreachable (``ray`` backend).
    """

    def __init__(self, db: Path, configs: Sequence[str], *, seed: int = 0, resume: bool = False,
                 campaign: int | None = None, jobs: int = 1, max_equations: int = MAX_EQUATIONS,
                 timeout_s: float = RUN_TIMEOUT_S, source: Callable[[int], Any] | None = None,
                 backend: str = "local", address: str | None = None,
                 shard: tuple[int, int] = (0, 1), schedule: str | None = None):
        if schedule is not None:
            check_schedule(schedule)
        if jobs < 1:
            raise InvalidArgument(f"--jobs must be at least 1, got {jobs}")
        if seed < 0 or seed >= 2 ** 63:
            raise InvalidArgument(f"--seed must be in [0, 2**63), got {seed}")
        if str(db) == ":memory:":
            raise InvalidArgument("a campaign needs a database file (it resumes from it), "
                                  "not ':memory:'")
        if not (len(shard) == 2 and 0 <= shard[0] < shard[1]):
            raise InvalidArgument(f"--shard must be I/N with 0 <= I < N, got {shard}")
        check_backend(backend, address)  # before the campaign's row exists
        self.backend, self.address, self._shard = backend, address, tuple(shard)
        self.configs = tuple(str(c) for c in parse_configs(list(configs)))
        self.db = Path(db)
        self.jobs = jobs
        self.max_equations = max_equations
        self.timeout_s = timeout_s
        self.source = source or self._generate
        self.catalogue = tuple(RULES)
        self.store = Store(self.db)  # validates the path and the schema
        try:
            self._conn = sqlite3.connect(str(self.db), timeout=30.0, isolation_level=None)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(CAMPAIGN_SCHEMA)
            if campaign is not None:
                self.configs = self._configs_of(campaign)
            resuming = resume or campaign is not None
            self.state = self._resume(campaign, schedule) if resuming \
                else self._new(seed, schedule or DEFAULT_SCHEDULE)
        except BaseException:
            self.close()
            raise
        self._last_finding = ""
        #: The newest summary of `run` (also after Ctrl-C), or None before it ran.
        self.last_summary: CampaignSummary | None = None
        #: The worker pool's counters at the end of the newest `run` (`xlaprobe.workers.PoolStats`:
        #: workers or Ray actors started, tasks, crashes, timeouts), or None before it ran.
        self.pool_stats: Any = None

    def _generate(self, seed: int) -> Any:
        return generate(seed, max_equations=self.max_equations)

    # -- persistence --------------------------------------------------------------------------

    def _new(self, seed: int, schedule: str) -> CampaignState:
        now = time.time()
        state = CampaignState(0, self.configs, seed, seed, shard=self._shard, schedule=schedule,
                              backend=self.backend)
        while not state.in_shard(state.next_seed):
            state.next_seed += 1
        cursor = self._conn.execute(
            "INSERT INTO fuzz_campaigns (configs, start_seed, next_seed, state, status, created, "
            "updated) VALUES (?,?,?,?,?,?,?)",
            (",".join(self.configs), seed, state.next_seed, json.dumps(state.to_json()), "running",
             now, now))
        state.id = int(cursor.lastrowid)
        return state

    def _configs_of(self, campaign: int) -> tuple[str, ...]:
        row = self._conn.execute("SELECT configs FROM fuzz_campaigns WHERE id = ?",
                                 (campaign,)).fetchone()
        if row is None:
            raise InvalidArgument(f"no fuzz campaign {campaign} in {self.db}; xlaprobe campaigns "
                                  "lists them")
        return tuple(row[0].split(","))

    def _resume(self, campaign: int | None = None,
                schedule: str | None = None) -> CampaignState:
        columns = "SELECT id, configs, start_seed, next_seed, state, created FROM fuzz_campaigns "
        row = self._conn.execute(columns + "WHERE id = ?", (campaign,)).fetchone() \
            if campaign is not None else self._conn.execute(
                columns + "WHERE configs = ? ORDER BY id DESC LIMIT 1",
                (",".join(self.configs),)).fetchone()
        if row is None:
            raise InvalidArgument(
                f"no fuzz campaign with configurations '{','.join(self.configs)}' in {self.db} to "
                "resume; run without --resume to start one (or pass the same --configs and --db)")
        state = CampaignState.from_row(row)
        state.sessions += 1
        state.schedule = schedule or state.schedule
        if self.backend not in state.backend.split(","):
            state.backend += f",{self.backend}"
        self._reconcile(state, created=row[5])
        self._save(state, "running")
        return state

    def _reconcile(self, state: CampaignState, created: float) -> None:
        """Count checks the store holds but the state missed (a kill between the two writes)."""
        # Its own checks only: another campaign may share the store, configurations and seeds.
        # Checks stored before checks named their campaign (schema 2) are matched as then.
        rows = self._conn.execute(
            "SELECT c.id, p.seed FROM checks c JOIN programs p ON p.id = c.program_id "
            "WHERE p.source = 'fuzz' AND p.seed >= ? AND (c.campaign = ? OR (c.campaign IS NULL "
            "AND c.configs = ? AND c.created >= ?)) ORDER BY c.id",
            (state.next_seed, state.id, ",".join(self.configs), created)).fetchall()
        for check_id, seed in rows:
            if seed is None or state.is_done(seed):
                continue
            runs = self._conn.execute(
                "SELECT r.config, v.kind FROM runs r JOIN verdicts v ON v.run_id = r.id "
                "WHERE r.check_id = ?", (check_id,)).fetchall()
            by_config: dict[str, list[str]] = collections.defaultdict(list)
            for config, kind in runs:
                by_config[config].append(kind)
            for config, kinds in by_config.items():
                state.verdicts.setdefault(config, collections.Counter())[
                    summary_kind(kinds).value] += 1
            for (config,) in self._conn.execute(
                    "SELECT config FROM skipped_runs WHERE check_id = ?", (check_id,)):
                state.verdicts.setdefault(config, collections.Counter())[SKIPPED] += 1
            by_finding = self._conn.execute(
                "SELECT config, kind, fingerprint FROM findings WHERE check_id = ?",
                (check_id,)).fetchall()
            for config, kind, fingerprint in by_finding:
                self._count_finding(state, fingerprint, seed, config, kind)
            try:  # generation is deterministic: recover the coverage of the lost update
                program = self.source(seed)
                state.coverage.update(jaxprs.primitives_used(program.jaxpr) & set(self.catalogue))
            except Exception:
                pass
            state.failing_programs += bool(by_finding)
            state.programs += 1
            state.mark_done(seed)

    def _save(self, state: CampaignState, status: str) -> None:
        self._conn.execute(
            "UPDATE fuzz_campaigns SET next_seed = ?, state = ?, status = ?, updated = ? "
            "WHERE id = ?", (state.next_seed, json.dumps(state.to_json()), status, time.time(),
                             state.id))

    @staticmethod
    def _count_finding(state: CampaignState, fingerprint: str, seed: int, config: str,
                       kind: str) -> bool:
        """Count one finding; True when its fingerprint is new to the campaign."""
        state.findings += 1
        entry = state.fingerprints.get(fingerprint)
        if entry is None:
            state.fingerprints[fingerprint] = [1, seed, config, kind]
            return True
        entry[0] += 1
        return False

    def close(self) -> None:
        """Close both database connections (everything is committed already)."""
        for closer in (getattr(self, "_conn", None), getattr(self, "store", None)):
            if closer is not None:
                try:
                    closer.close()
                except Exception:
                    pass

    # -- running ------------------------------------------------------------------------------

    def _record(self, seed: int, program: Any, result: Any,
                keys: dict[str, str] | None = None) -> None:
        state = self.state
        state.bugs.update(keys or {})
        bugs = {f.config: state.bugs[f.fingerprint] for f in result.findings
                if state.bugs.get(f.fingerprint)}
        new = {}
        for finding in result.findings:
            entry = state.fingerprints.get(finding.fingerprint)
            seen = (entry[0] if entry else 0) + sum(
                1 for f in new.values() if f == finding.fingerprint)
            if seen < ARTIFACTS_PER_FINGERPRINT:
                new[finding.config] = finding.fingerprint
        artifacts = save_finding_artifacts(result, self.db.parent / "artifacts", list(new)) \
            if new else {}
        self.store.record_check(result, artifacts, campaign=state.id, bugs=bugs)
        for config, verdicts in zip(result.configs, result.verdicts):
            kind = summary_kind(v.kind for v in verdicts).value
            state.verdicts.setdefault(config, collections.Counter())[kind] += 1
        for config, _ in result.skipped:
            state.verdicts.setdefault(config, collections.Counter())[SKIPPED] += 1
        for finding in result.findings:
            self._count_finding(state, finding.fingerprint, seed, finding.config,
                                finding.kind.value)
            self._last_finding = (f"seed {seed}: {finding.config} {finding.kind.value} "
                                  f"(fingerprint {finding.fingerprint})"
                                  + (f" -> {artifacts[finding.config]}"
                                     if finding.config in artifacts else ""))
        for outcome in (*result.outcomes, *result.budget,
                        *((result.flushed,) if result.flushed is not None else ())):
            if _is_xla(outcome.config):
                state.xla_seconds += outcome.seconds
            elif outcome.config.startswith("reference"):
                state.reference_seconds += outcome.seconds
        state.coverage.update(jaxprs.primitives_used(program.jaxpr) & set(self.catalogue))
        state.failing_programs += bool(result.findings)
        state.programs += 1
        state.mark_done(seed)

    def summary(self, *, session_programs: int, elapsed_s: float, session_xla_s: float,
                status: str) -> CampaignSummary:
        """A snapshot of the campaign."""
        state = self.state
        uncovered = tuple(p for p in self.catalogue if not state.coverage.get(p))
        return CampaignSummary(
            campaign=state.id, configs=self.configs, programs=state.programs,
            session_programs=session_programs, elapsed_s=elapsed_s,
            programs_per_s=session_programs / elapsed_s if elapsed_s > 0 else 0.0,
            verdicts={c: dict(v) for c, v in state.verdicts.items()},
            findings=state.findings, failing_programs=state.failing_programs,
            unique_findings=state.unique_findings,
            duplicates=state.duplicates, covered=len(self.catalogue) - len(uncovered),
            catalogue=len(self.catalogue), uncovered=uncovered, next_seed=state.next_seed,
            generation_errors=state.generation_errors,
            xla_share=session_xla_s / (elapsed_s * self.jobs) if elapsed_s > 0 else 0.0,
            status=status, last_finding=self._last_finding,
            fingerprints={k: tuple(v) for k, v in state.fingerprints.items()},
            schedule=state.schedule, distinct_bugs=state.distinct_bugs)

    def run(self, time_s: float, *, max_programs: int | None = None,
            on_progress: Callable[[CampaignSummary], None] | None = None,
            stop: Callable[[], bool] | None = None,
            on_program: Callable[[int, Any, Any], None] | None = None) -> CampaignSummary:
        """Check programs until `time_s` seconds have passed (or `max_programs` were checked, or
        `stop` said so).

        Programs in flight at the deadline are finished and recorded. On Ctrl-C the workers are
        killed, the state is saved with status ``interrupted`` and KeyboardInterrupt propagates.

        Args:
            time_s: wall-time budget of this session (s).
            max_programs: stop after this many programs in this session (None: no limit).
            on_progress: called with a summary after each recorded program.
            stop: called after each recorded program; True ends the session early: programs
                still in flight are dropped, not recorded (their seeds stay to do).
            on_program: called with (seed, `Program`, `CheckResult`) of each recorded program
                (both None where the generator failed).

        Returns:
            The final summary (status ``done``).

        Raises:
            KeyboardInterrupt: Ctrl-C (everything recorded so far is stored).
            WorkerCrashed: a worker process could not start.
        """
        start = time.monotonic()
        deadline = start + time_s
        base_seconds, base_xla = self.state.seconds, self.state.xla_seconds
        session = 0
        status = "interrupted"
        pool = self._pool()
        executor = cf.ThreadPoolExecutor(max_workers=self.jobs + 1, thread_name_prefix="xlaprobe-fuzz")
        in_flight: dict[cf.Future, int] = {}
        next_seed = self.state.next_seed

        def snapshot(state_status: str) -> CampaignSummary:
            elapsed = time.monotonic() - start
            return self.summary(session_programs=session, elapsed_s=elapsed,
                                session_xla_s=self.state.xla_seconds - base_xla,
                                status=state_status)

        try:
            while True:
                if stop is not None and stop():
                    break
                stop_submitting = time.monotonic() >= deadline or (
                    max_programs is not None and session + len(in_flight) >= max_programs)
                while not stop_submitting and len(in_flight) < self.jobs + 1:
                    while self.state.is_done(next_seed):
                        next_seed += 1
                    in_flight[executor.submit(self._check_seed, next_seed, pool)] = next_seed
                    next_seed += 1
                    stop_submitting = max_programs is not None and \
                        session + len(in_flight) >= max_programs
                if not in_flight:
                    break
                done, _ = cf.wait(list(in_flight), timeout=0.5, return_when=cf.FIRST_COMPLETED)
                for future in done:
                    seed = in_flight.pop(future)
                    session += self._absorb(seed, *future.result(), on_program)
                    self.state.seconds = base_seconds + time.monotonic() - start
                    self._save(self.state, "running")
                    if on_progress is not None:
                        on_progress(snapshot("running"))
                if not done and on_progress is not None:
                    on_progress(snapshot("running"))
            status = "done"
        finally:
            for future in in_flight:
                future.cancel()
            self.pool_stats = pool.stats
            pool.close()  # kills busy workers: their checks raise and are dropped, not recorded
            executor.shutdown(wait=True, cancel_futures=True)
            self.state.seconds = base_seconds + time.monotonic() - start
            self._save(self.state, status)
            self.last_summary = snapshot(status)
        return self.last_summary

    def _pool(self) -> Any:
        """A new worker pool of the campaign's backend for one `run` (closed at its end)."""
        return make_pool(self.backend, self.jobs, self.timeout_s, address=self.address)

    def _absorb(self, seed: int, program: Any, result: Any, keys: dict[str, str] | None = None,
                on_program: Callable[[int, Any, Any], None] | None = None) -> int:
        """Record one finished check (1: a program of this session) with the first-wrong keys of
        its new fingerprints, or a seed the generator failed on (0: a bug of xlaprobe, skipped);
        then tell `on_program`."""
        if result is None:
            self.state.generation_errors += 1
            self.state.mark_done(seed)
        else:
            self._record(seed, program, result, keys)
        if on_program is not None:
            on_program(seed, program, result)
        return 0 if result is None else 1

    def _check_seed(self, seed: int, pool: Any) -> tuple[Any, Any, dict[str, str]]:
        try:
            program = self.source(seed)
        except Exception as exc:  # a generator bug: report and skip the seed
            print(f"warning: the generator failed on seed {seed} ({type(exc).__name__}: {exc}); "
                  "skipped (a bug in xlaprobe/sources/generator.py)", file=sys.stderr)
            return None, None, {}
        audit = is_audit(seed)
        result = check_scheduled(program, self.configs, pool, schedule=self.state.schedule,
                                 audit=audit, timeout_s=self.timeout_s)
        return program, result, self._first_wrong(program, result, pool)

    def _first_wrong(self, program: Any, result: Any, pool: Any) -> dict[str, str]:
        """fingerprint -> the key of its first wrong intermediate (``""``: none named), for the
        numeric findings of `result` whose fingerprint is new to the campaign; a planted fault's
        key is its name already (`xlaprobe.triage.planted_fault`)."""
        keys: dict[str, str] = {}
        for f in result.findings:
            if f.kind.is_numeric and f.fingerprint not in self.state.bugs \
                    and f.fingerprint not in keys and not planted_fault(f.config, f.alike):
                keys[f.fingerprint] = first_wrong_key(program, f.config, result, pool,
                                                      self.timeout_s) or ""
        return keys




@dataclasses.dataclass(frozen=True)
class CampaignRecord:
    """One campaign of a store, as ``xlaprobe campaigns`` lists it.

    Attributes:
        id: row id in ``fuzz_campaigns`` (what ``xlaprobe fuzz --campaign`` takes).
        configs: the configuration specs.
        status: running, done or interrupted (running also when a session was killed).
        start_seed, next_seed: seeds ``[start_seed, next_seed)`` are done.
        programs: programs checked, all sessions.
        checks: checks the store holds for it (equals `programs` unless sessions were killed
            between the two writes; ``--resume`` reconciles them).
        findings, unique_findings: findings stored, and distinct fingerprints among them.
        covered: catalogue primitives exercised.
        seconds: wall time spent running, all sessions (s).
        sessions: 1 + resumes.
        created, updated: Unix times (s).
        schedule: ``adaptive`` or ``all`` (`xlaprobe.schedule`).
        skipped: runs its schedule skipped (configuration x program), all sessions.
        backend: where its sessions ran (`CampaignState.backend`).
        shard: (index, count) of its seeds (`parse_shard`; (0, 1): every seed).
    """

    id: int
    configs: tuple[str, ...]
    status: str
    start_seed: int
    next_seed: int
    programs: int
    checks: int
    findings: int
    unique_findings: int
    covered: int
    seconds: float
    sessions: int
    created: float
    updated: float
    schedule: str = "all"
    skipped: int = 0
    backend: str = "local"
    shard: tuple[int, int] = (0, 1)

    @property
    def programs_per_s(self) -> float:
        """Programs per second of running wall time (0 before any ran)."""
        return self.programs / self.seconds if self.seconds > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (with ``programs_per_s``)."""
        return dataclasses.asdict(self) | {"configs": list(self.configs), "shard": list(self.shard),
                                           "programs_per_s": round(self.programs_per_s, 4)}


def list_campaigns(db: Path | str) -> list[CampaignRecord]:
    """Every campaign in the store at `db`, oldest first (none when no campaign ever ran).

    Raises:
        InvalidArgument: no store at `db`.
        CorruptArtifact: `db` is not an xlaprobe store.
    """
    if not Path(db).exists():
        raise InvalidArgument(f"no store at {db}; run xlaprobe fuzz first or pass --db")
    with Store(db) as store:  # opened for writing: an older schema gains checks.campaign
        rows = store.select("SELECT id, configs, start_seed, next_seed, state, created, "
                            "updated, status FROM fuzz_campaigns ORDER BY id") \
            if store.select("SELECT 1 FROM sqlite_master WHERE name = 'fuzz_campaigns'") else []
        counts = dict(store.select("SELECT campaign, COUNT(*) FROM checks WHERE campaign IS NOT "
                                   "NULL GROUP BY campaign"))
    records = []
    for row in rows:
        state = CampaignState.from_row(row)
        records.append(CampaignRecord(
            state.id, state.configs, row[7], state.start_seed, state.next_seed, state.programs,
            int(counts.get(state.id, 0)), state.findings, state.unique_findings,
            len(state.coverage), state.seconds, state.sessions, float(row[5]), float(row[6]),
            state.schedule, sum(v.get(SKIPPED, 0) for v in state.verdicts.values()),
            state.backend, state.shard))
    return records
