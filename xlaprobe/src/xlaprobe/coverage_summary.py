"""Optimization coverage of a store: per fuzz campaign and per program source, the XLA passes that
changed a module and how often, the algebraic-simplifier rewrites that fired, and the passes that
ran but were never seen changing anything (what ``xlaprobe coverage`` prints).

Reads the ``run_passes`` table (`xlaprobe.store`), one `xlaprobe.coverage.PassCoverage` per run.
"""

from __future__ import annotations

import collections
import dataclasses
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from xlaprobe.coverage import PassCoverage, pass_name
from xlaprobe.errors import CorruptArtifact, InvalidArgument

#: Program sources (``programs.source``) as the report names them.
SOURCE_NAMES = {"fuzz": "fuzz", "capture": "captures", "corpus": "corpus", "python": "python",
                "user": "user", "case": "case", "artifact": "artifact"}


#: What a steered fuzz program's arm is called (``steer:<seed>:<arm>``, the names
#: `xlaprobe.sources.steered.SteeredSource` gives): the kind of run it is.
STEERED_KINDS = {"pattern": "pattern", "mutate": "mutation", "special": "special-value re-run"}


def steered_arm(name: str) -> tuple[str, str] | None:
    """(kind, detail) of a steered fuzz program's name, None for any other name (the plain
    generator's ``fuzz:<seed>``, which a steered campaign's ``fresh`` arm makes too).

    >>> steered_arm("steer:4:pattern:cse_dup"), steered_arm("steer:5:mutate:loop")
    (('pattern', 'cse_dup'), ('mutation', 'loop'))
    >>> steered_arm("steer:6:special"), steered_arm("fuzz:7")
    (('special-value re-run', ''), None)
    """
    head, _, rest = name.partition(":")
    if head != "steer":
        return None
    arm, _, detail = rest.partition(":")[2].partition(":")
    return STEERED_KINDS.get(arm, arm), detail


def source_label(source: str, name: str) -> str:
    """What the report calls a program's source: ``zoo`` for xlaprobe's own models, ``third-party
    zoo`` for the ecosystem's (`xlaprobe.sources.ecosystem.ECOSYSTEM`), a steered fuzz program's
    kind after ``fuzz`` (`steered_arm`), else the stored source.

    >>> source_label("model", "transformer_lm"), source_label("fuzz", "fuzz:3")
    ('zoo', 'fuzz')
    >>> source_label("fuzz", "steer:3:special")
    'fuzz (special-value re-run)'
    """
    if source == "model":
        from xlaprobe.sources.ecosystem import ECOSYSTEM  # zoo only: the CLI loads this module
        return "third-party zoo" if name.split("[", 1)[0] in ECOSYSTEM else "zoo"
    arm = steered_arm(name) if source == "fuzz" else None
    if arm is not None:
        return f"fuzz ({arm[0]})"
    return SOURCE_NAMES.get(source, source)


@dataclasses.dataclass
class Group:
    """The coverage of one (campaign, source) group, or of several merged.

    Attributes:
        campaign: the fuzz campaign's id, None for checks outside campaigns, -1 for the total.
        source: `source_label` of its programs ("all" for the total).
        runs: runs with coverage recorded.
        programs: distinct programs among them.
        ran: pass -> runs it ran in.
        changed: pass -> runs it changed the module in.
        rewrites: rewrite kind -> runs it fired in.
    """

    campaign: int | None
    source: str
    runs: int = 0
    programs: set[str] = dataclasses.field(default_factory=set)
    ran: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    changed: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    rewrites: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)

    def add(self, program: str, coverage: PassCoverage) -> None:
        """Count one run of `program`."""
        self.runs += 1
        self.programs.add(program)
        self.ran.update({pass_name(p) for p in coverage.ran})  # stores of before the renaming
        self.changed.update({pass_name(p) for p in coverage.changed})
        self.rewrites.update(coverage.rewrites.keys())

    @property
    def never_changed(self) -> list[str]:
        """Passes that ran and never changed a module, sorted."""
        return sorted(set(self.ran) - set(self.changed))

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (counts by descending frequency)."""
        return {"campaign": self.campaign, "source": self.source, "runs": self.runs,
                "programs": len(self.programs), "passes_ran": len(self.ran),
                "passes_changed": len(self.changed), "rewrite_kinds": len(self.rewrites),
                "changed": dict(self.changed.most_common()),
                "rewrites": dict(self.rewrites.most_common()),
                "never_changed": self.never_changed}


def summarize(rows: Iterable[tuple[int | None, str, str, str, str]]) -> tuple[list[Group], Group]:
    """Group runs' coverage by (campaign, source).

    Args:
        rows: ``(campaign or None, programs.source, programs.name, program id, coverage JSON)``.

    Returns:
        (the groups, ordered by campaign then source; the total over all of them).

    Raises:
        CorruptArtifact: a stored coverage is not valid JSON of a `PassCoverage`.
    """
    groups: dict[tuple[int, str], Group] = {}
    total = Group(-1, "all")
    for campaign, source, name, program, data in rows:
        try:
            coverage = PassCoverage.from_json(json.loads(data))
        except ValueError as exc:  # json.JSONDecodeError is a ValueError
            raise CorruptArtifact(f"stored pass coverage of program {program} is corrupt: {exc}") \
                from exc
        label = source_label(source, name)
        key = (-1 if campaign is None else int(campaign), label)
        group = groups.setdefault(key, Group(None if campaign is None else int(campaign), label))
        group.add(program, coverage)
        total.add(program, coverage)
    return [groups[k] for k in sorted(groups)], total


_QUERY = ("SELECT c.campaign, p.source, p.name, p.id, rp.data FROM run_passes rp "
          "JOIN runs r ON r.id = rp.run_id JOIN checks c ON c.id = r.check_id "
          "JOIN programs p ON p.id = c.program_id {where}ORDER BY rp.run_id")


def _has_campaign(store: Any, campaign: int) -> bool:
    if not store.select("SELECT 1 FROM sqlite_master WHERE name = 'fuzz_campaigns'"):
        return False
    return bool(store.select("SELECT 1 FROM fuzz_campaigns WHERE id = ?", (campaign,)))


def store_coverage(db: Path | str, *, campaign: int | None = None) -> tuple[list[Group], Group]:
    """`summarize` the runs of the store at `db` (opened read-only).

    Args:
        db: the store's path.
        campaign: only that campaign's checks, when given.

    Raises:
        InvalidArgument: no store at `db`, or no campaign `campaign` in it.
        CorruptArtifact: `db` is not an xlaprobe store, or holds corrupt coverage.
    """
    from xlaprobe.store import Store  # imports jax: the CLI loads this module for --help

    if not Path(db).is_file():
        raise InvalidArgument(f"no xlaprobe store at {db}; run xlaprobe check or fuzz first, or "
                              "pass --db")
    with Store(db, readonly=True) as store:
        if campaign is not None and not _has_campaign(store, campaign):
            raise InvalidArgument(f"no campaign {campaign} in {db}; xlaprobe campaigns lists them")
        if not store.select("SELECT 1 FROM sqlite_master WHERE name = 'run_passes'"):
            return summarize(())  # a store written before coverage was recorded
        if campaign is None:
            rows = store.select(_QUERY.format(where=""))
        else:
            rows = store.select(_QUERY.format(where="WHERE c.campaign = ? "), (campaign,))
    return summarize(rows)
