"""Fuzzing campaigns: checks are stored, resume continues where a campaign stopped (also after a
kill between the store's write and the campaign's), mutants are found and findings deduplicated."""

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from xlaprobe.campaign import Campaign, CampaignState, fuzz_command, summary_kind
from xlaprobe.check import check_program
from xlaprobe.errors import InvalidArgument
from xlaprobe.program import Program, Provenance
from xlaprobe.sources.generator import generate
from xlaprobe.store import Store

FAST = ["xla", "reference"]


def _state(db: Path) -> tuple[int, dict]:
    with sqlite3.connect(db) as conn:
        next_seed, state = conn.execute(
            "SELECT next_seed, state FROM fuzz_campaigns ORDER BY id DESC LIMIT 1").fetchone()
    return next_seed, json.loads(state)


def test_state_tracks_out_of_order_seeds():
    state = CampaignState(1, ("xla",), 10, 10)
    for seed in (12, 11, 14):
        state.mark_done(seed)
    assert state.next_seed == 10 and state.done_above == {11, 12, 14}
    state.mark_done(10)
    assert state.next_seed == 13 and state.done_above == {14}
    assert state.is_done(12) and not state.is_done(13) and state.is_done(14)
    assert summary_kind(["ok", "ftz"]) == "ftz" and summary_kind(["mismatch", "crash"]) == "crash"


def test_short_campaign_stores_its_checks(tmp_path):
    db = tmp_path / "fuzz.db"
    campaign = Campaign(db, FAST, seed=100, jobs=1)
    try:
        summary = campaign.run(60.0, max_programs=4)
    finally:
        campaign.close()
    assert summary.status == "done" and summary.programs == summary.session_programs == 4
    assert summary.next_seed == 104 and summary.covered > 0
    assert sum(summary.verdicts["reference"].values()) == 4
    with Store(db) as store:
        assert store.count("checks") == 4 and store.count("programs") == 4
    with sqlite3.connect(db) as conn:
        names = {n for (n,) in conn.execute("SELECT name FROM programs")}
    assert names == {f"fuzz:{s}" for s in range(100, 104)}
    assert _state(db)[0] == 104


def test_resume_continues_from_the_last_seed(tmp_path):
    db = tmp_path / "fuzz.db"
    first = Campaign(db, FAST, seed=7, jobs=1)
    try:
        first.run(60.0, max_programs=2)
    finally:
        first.close()
    # A kill after the store committed seed 9's check but before the campaign counted it.
    program = generate(9)
    from xlaprobe.workers import WorkerPool
    with WorkerPool(size=1) as pool, Store(db) as store:
        result = check_program(program, FAST, pool)
        store.record_check(program, result.configs, result.judged_against, result.outcomes,
                           result.verdicts, [])
    assert _state(db)[0] == 9
    with pytest.raises(InvalidArgument, match="no fuzz campaign"):
        Campaign(db, ["xla", "eager"], resume=True)
    again = Campaign(db, FAST, seed=0, resume=True, jobs=1)  # the seed is ignored
    try:
        summary = again.run(60.0, max_programs=2)
    finally:
        again.close()
    assert summary.programs == 5 and summary.session_programs == 2
    assert summary.next_seed == 12
    with sqlite3.connect(db) as conn:
        seeds = [s for (s,) in conn.execute(
            "SELECT p.seed FROM checks c JOIN programs p ON p.id = c.program_id ORDER BY p.seed")]
    assert seeds == [7, 8, 9, 10, 11]  # seed 9 was not checked twice
    assert _state(db)[1]["sessions"] == 2


def _subtract_program(seed: int) -> Program:
    """Programs with one structure (so one fingerprint) and inputs that vary with the seed."""
    rng = np.random.default_rng(seed)
    x, y = (rng.standard_normal(16).astype(np.float32) for _ in range(2))
    return Program.from_function(lambda a, b: (a - b) * 2.0 + 1.0, (x, y),
                                 Provenance("fuzz", f"fuzz:{seed}", seed))


def test_mutant_findings_are_stored_and_deduplicated(tmp_path):
    db = tmp_path / "fuzz.db"
    configs = ["xla", "reference", "mutant:swap-subtract-fused"]
    campaign = Campaign(db, configs, seed=0, jobs=1, source=_subtract_program)
    try:
        summary = campaign.run(120.0, max_programs=3)
    finally:
        campaign.close()
    assert summary.findings == 3 and summary.unique_findings == 1 and summary.duplicates == 2
    (fingerprint, (count, first, config, kind)), = summary.fingerprints.items()
    assert (count, config) == (3, "mutant:swap-subtract-fused")
    with Store(db) as store:
        rows = store.findings()
    assert len(rows) == 3 and {r["fingerprint"] for r in rows} == {fingerprint}
    saved = [r["artifact"] for r in rows if r["artifact"]]
    assert len(saved) == 1 and (Path(saved[0]) / "repro.py").is_file()
    assert summary.verdicts["xla"] == {"ok": 3}


def test_generated_programs_find_a_mutant(tmp_path):
    # Seeds 50..57 hold fused subtracts of distinct operands (53, 55 and 57 among them).
    campaign = Campaign(tmp_path / "fuzz.db", ["xla", "reference", "mutant:swap-subtract-fused"],
                        seed=50, jobs=1)
    try:
        summary = campaign.run(120.0, max_programs=8)
    finally:
        campaign.close()
    mutant = summary.verdicts["mutant:swap-subtract-fused"]
    assert summary.findings >= 1 and sum(v for k, v in mutant.items() if k not in ("ok", "ftz")) >= 1
    assert all(f[2] == "mutant:swap-subtract-fused" for f in summary.fingerprints.values())


def test_fuzz_command_rejects_bad_input(tmp_path):
    db = tmp_path / "fuzz.db"
    for kwargs, message in [({"time_s": 0}, "--time"), ({"jobs": 0}, "--jobs"),
                            ({"configs": "xla,nope"}, "unknown configuration kind"),
                            ({"seed": -1}, "--seed"), ({"resume": True}, "no fuzz campaign")]:
        args = dict(time_s=1.0, configs="xla,reference", jobs=1, seed=0, db=db, resume=False,
                    json_output=True)
        args.update(kwargs)
        with pytest.raises(InvalidArgument, match=message):
            fuzz_command(**args)
    with pytest.raises(InvalidArgument):
        fuzz_command(time_s=1.0, configs="xla", jobs=1, seed=0, db=tmp_path, resume=False,
                     json_output=True)


def test_fuzz_command_prints_json(tmp_path, capsys):
    code = fuzz_command(time_s=0.5, configs="xla,reference", jobs=1, seed=3,
                        db=tmp_path / "fuzz.db", resume=False, json_output=True)
    summary = json.loads(capsys.readouterr().out)
    assert code == (1 if summary["findings"] else 0)
    assert summary["status"] == "done" and summary["programs"] >= 1
    assert summary["catalogue"] >= 70 and summary["next_seed"] > 3


def test_ctrl_c_keeps_what_was_recorded(tmp_path):
    db = tmp_path / "fuzz.db"
    campaign = Campaign(db, FAST, seed=20, jobs=1)

    def interrupt(summary):
        if summary.session_programs >= 1:
            raise KeyboardInterrupt
    try:
        with pytest.raises(KeyboardInterrupt):
            campaign.run(60.0, on_progress=interrupt)
    finally:
        campaign.close()
    assert campaign.last_summary.status == "interrupted"
    with sqlite3.connect(db) as conn:
        status, = conn.execute("SELECT status FROM fuzz_campaigns").fetchone()
        checked = conn.execute("SELECT COUNT(*) FROM checks").fetchone()[0]
    next_seed, state = _state(db)
    assert status == "interrupted" and state["programs"] == checked >= 1
    assert next_seed + len(state["done_above"]) == 20 + checked
