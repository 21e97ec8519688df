"""Fuzzing campaigns: checks are stored, resume continues where a campaign stopped (also after a
kill between the store's write and the campaign's), mutants are found and findings deduplicated."""

import dataclasses
import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from xlaprobe.campaign import Campaign, CampaignState, list_campaigns
from xlaprobe.cli.fuzz import fuzz_command
from xlaprobe.checking import judge, check_program
from xlaprobe.oracle import VerdictKind
from xlaprobe.outcome import Outcome, OutcomeKind
from xlaprobe.errors import InvalidArgument
from xlaprobe.program import Program, Provenance
from xlaprobe.sources.generator import generate
from xlaprobe.store import Store
from xlaprobe.triage import finding_key

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
        store.record_check(dataclasses.replace(result, findings=()), campaign=first.state.id)
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


def _run(campaign: Campaign, programs: int):
    try:
        return campaign.run(120.0, max_programs=programs)
    finally:
        campaign.close()


def test_two_campaigns_on_one_store_resume_only_their_own_checks(tmp_path):
    from xlaprobe.campaign import list_campaigns
    from xlaprobe.workers import WorkerPool

    db = tmp_path / "fuzz.db"
    first = Campaign(db, FAST, seed=0, jobs=1)
    _run(first, 2)
    second = Campaign(db, FAST, seed=50, jobs=1)  # same configurations, later seeds
    _run(second, 2)
    # The second campaign is killed after the store committed seed 52's check.
    with WorkerPool(size=1) as pool, Store(db) as store:
        result = check_program(generate(52), FAST, pool)
        store.record_check(result, campaign=second.state.id)
    # Resuming the first by its id: its seeds go on from 2; the second's checks (seeds 50-52,
    # same configurations, later, above its next seed) are not adopted.
    again = _run(Campaign(db, ["xla"], campaign=first.state.id, jobs=1), 1)
    assert again.configs == tuple(FAST) and again.campaign == first.state.id
    assert again.programs == 3 and again.next_seed == 3
    # --resume takes the newest campaign of these configurations: the second, which counts its
    # killed check once and goes on from 53.
    latest = _run(Campaign(db, FAST, resume=True, jobs=1), 1)
    assert latest.campaign == second.state.id
    assert latest.programs == 4 and latest.next_seed == 54
    records = {r.id: r for r in list_campaigns(db)}
    assert [(r.programs, r.checks, r.sessions, r.start_seed) for r in records.values()] == [
        (3, 3, 2, 0), (4, 4, 2, 50)]
    with pytest.raises(InvalidArgument, match="no fuzz campaign 9"):
        Campaign(db, FAST, campaign=9)


def test_resume_on_a_missing_store_makes_no_store(tmp_path):
    from xlaprobe.cli.fuzz import fuzz_command
    with pytest.raises(InvalidArgument, match="nothing to resume: there is no store at"):
        fuzz_command(time_s=5.0, configs="xla,reference", jobs=1, seed=0,
                     db=tmp_path / "f7.db", resume=True, json_output=False)
    assert not (tmp_path / "f7.db").exists()


def test_campaigns_command_lists_them(tmp_path, capsys):
    from xlaprobe.cli.campaigns import campaigns_command

    db = tmp_path / "fuzz.db"
    _run(Campaign(db, FAST, seed=5, jobs=1), 2)
    campaigns_command(db=db, json_output=True)
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["id"], row["programs"], row["start_seed"], row["next_seed"]) == (1, 2, 5, 7)
    assert row["configs"] == FAST and row["programs_per_s"] > 0
    campaigns_command(db=db, json_output=False)
    text = capsys.readouterr().out
    assert "5..6" in text and f"xlaprobe fuzz --campaign ID --db {db}" in text
    with pytest.raises(InvalidArgument, match="no store"):
        campaigns_command(db=tmp_path / "none.db", json_output=False)


def _subtract_program(seed: int) -> Program:
    """Programs with one structure (so one fingerprint) and inputs that vary with the seed."""
    rng = np.random.default_rng(seed)
    x, y = (rng.standard_normal(16).astype(np.float32) for _ in range(2))
    return Program.from_function(lambda a, b: (a - b) * 2.0 + 1.0, (x, y),
                                 Provenance("fuzz", f"fuzz:{seed}", seed))


def test_mutant_findings_are_stored_and_deduplicated(tmp_path, capsys):
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
    # `fuzz --json` and its text end count the planted fault's finding apart, never as a new bug.
    from xlaprobe.cli.fuzz import _finish
    assert _finish(summary, campaign.state.bugs, db, False, True, 120.0) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["known_bugs"] == [] and data["new_bugs"] == []
    assert [r["fingerprints"] for r in data["mutant_findings"]] == [[fingerprint]]
    assert set(data["mutant_findings"][0]) == {"key", "cases", "fingerprints"}
    assert data["distinct_bugs"] == 0  # as the text end counts them
    _finish(summary, campaign.state.bugs, db, False, False, 120.0)
    assert "distinct bugs: 0 (0 known, 0 new: xlaprobe.known_bugs; 1 planted by a mutant, " \
        "not bugs)" in capsys.readouterr().out
    # A fingerprint first counted under the mutant but keyed as a real fault (xla failed alike,
    # `triage.planted_fault`) is a bug of XLA's the mutant compiler shares: a new bug.
    real = finding_key(_subtract_program(0), "mutant:swap-subtract-fused", VerdictKind.MISMATCH,
                       (0,), alike=("mutant:swap-subtract-fused", "xla"))
    state = CampaignState(1, (), 0, 0, fingerprints={
        real: [1, 0, "mutant:swap-subtract-fused", "mismatch"],
        fingerprint: [3, 0, "mutant:swap-subtract-fused", "mismatch"]})
    assert state.distinct_bugs == 1
    shared = dataclasses.replace(summary, distinct_bugs=state.distinct_bugs, fingerprints={
        k: tuple(v) for k, v in state.fingerprints.items()})
    _finish(shared, {}, db, False, True, 120.0)
    data = json.loads(capsys.readouterr().out)
    assert [r["key"] for r in data["new_bugs"]] == [real] and data["distinct_bugs"] == 1
    assert [r["fingerprints"] for r in data["mutant_findings"]] == [[fingerprint]]


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
                            ({"seed": -1}, "--seed"), ({"resume": True}, "nothing to resume")]:
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


def _two_outputs(first):
    """Program (first(x), cos(y) * 2) on float32 x and y."""
    import jax.numpy as jnp

    def program(x, y):
        return first(x), jnp.cos(y) * 2.0
    x, y = np.linspace(0.1, 1.0, 4, dtype=np.float32), np.linspace(1, 2, 4, dtype=np.float32)
    return Program.from_function(program, (x, y), Provenance("user", "two"))


def _findings_when_output_wrong(program, wrong, eager_wrong=None):
    """Judge fabricated xla and eager outcomes whose outputs `wrong` (xla) and `eager_wrong`
    (eager; None: all right) are off by 1, against the reference."""
    from xlaprobe.configs.reference import evaluate

    right = [np.asarray(o) for o in evaluate(program.jaxpr, program.inputs)]

    def run(config, index):
        return Outcome(config, OutcomeKind.RAN, tuple(
            np.asarray(o + (1.0 if k == index else 0.0), np.float32) for k, o in enumerate(right)))
    outcomes = [run("xla", wrong), run("eager", eager_wrong),
                Outcome("reference", OutcomeKind.RAN, tuple(right))]
    return judge(program, ["xla", "eager", "reference"], outcomes).findings


def test_fingerprint_covers_only_the_failing_outputs_cone():
    import hashlib
    import jax.numpy as jnp

    def key(*parts):
        return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]

    sin_program, exp_program = _two_outputs(jnp.sin), _two_outputs(lambda x: jnp.exp(x) + 1)
    # cos(y) * 2 fails in both: the unrelated first output does not split the bug in two.
    [a] = _findings_when_output_wrong(sin_program, 1)
    [b] = _findings_when_output_wrong(exp_program, 1)
    assert a.outputs == b.outputs == ("[1]",) and a.kind is VerdictKind.MISMATCH
    assert a.fingerprint == b.fingerprint
    # The known answer: failure class numeric, primitives cos and mul (the cone of output 1),
    # input dtype class float (float32 here; every width alike), no planted fault. No
    # configuration name enters the key.
    assert a.fingerprint == key("numeric", "cos,mul", "float", "")
    # Different failing cones, different keys.
    [c] = _findings_when_output_wrong(sin_program, 0)
    [d] = _findings_when_output_wrong(exp_program, 0)
    assert len({a.fingerprint, c.fingerprint, d.fingerprint}) == 3
    # A fault that xla and eager share is one key, with both configurations as data.
    shared = _findings_when_output_wrong(sin_program, 1, eager_wrong=1)
    assert [f.config for f in shared] == ["xla", "eager"]
    assert {f.fingerprint for f in shared} == {a.fingerprint}
    assert shared[0].alike == shared[1].alike == ("eager", "xla")
    # Which configurations failed is not the key: xla alone, or xla and eager, one bug.
    assert a.alike == ("xla",) and a.fingerprint == shared[0].fingerprint
    apart = _findings_when_output_wrong(sin_program, 1, eager_wrong=0)
    assert apart[0].fingerprint == a.fingerprint and apart[0].alike == ("xla",)
    assert apart[1].fingerprint == key("numeric", "sin", "float", "")


def test_nan_and_finite_garbage_of_one_fault_are_one_key():
    import jax.numpy as jnp

    program = _two_outputs(jnp.sin)
    from xlaprobe.configs.reference import evaluate
    right = [np.asarray(o) for o in evaluate(program.jaxpr, program.inputs)]
    nan = [right[0], np.full_like(right[1], np.nan)]
    garbage = [right[0], right[1] + 3.0]
    keys = set()
    for wrong in (nan, garbage):
        outcomes = [Outcome("xla", OutcomeKind.RAN, tuple(np.asarray(o, np.float32) for o in wrong)),
                    Outcome("reference", OutcomeKind.RAN, tuple(right))]
        [finding] = judge(program, ["xla", "reference"], outcomes).findings
        keys.add(finding.fingerprint)
    assert len(keys) == 1


def test_a_planted_fault_is_its_own_bug_unless_plain_xla_shares_it():
    import hashlib

    import jax.numpy as jnp

    program = _two_outputs(jnp.sin)
    from xlaprobe.configs.reference import evaluate
    right = [np.asarray(o) for o in evaluate(program.jaxpr, program.inputs)]
    wrong = tuple(np.asarray(o + 1.0, np.float32) for o in right)
    fine = tuple(np.asarray(o, np.float32) for o in right)
    configs = ["xla", "mutant:swap-subtract-fused", "reference"]

    def findings(xla_outputs):
        return judge(program, configs, [Outcome("xla", OutcomeKind.RAN, xla_outputs),
                                        Outcome(configs[1], OutcomeKind.RAN, wrong),
                                        Outcome("reference", OutcomeKind.RAN, tuple(right))]
                     ).findings
    [planted] = findings(fine)          # only the mutant compiler is wrong: the planted fault
    shared = findings(wrong)            # plain xla is wrong alike: a real fault both compile
    assert len({f.fingerprint for f in shared}) == 1
    assert planted.fingerprint != shared[0].fingerprint
    # A planted fault is one defect: its key is its name, whatever output it breaks.
    assert planted.fingerprint == hashlib.sha256(b"planted|swap-subtract-fused").hexdigest()[:16]


def test_two_partitioning_mutants_wrong_on_one_output_are_two_planted_faults():
    # spmd[...,mutant=NAME] findings were keyed by their failing outputs' cone like real ones:
    # all-reduce-dropped and all-reduce-twice breaking the same output shared one fingerprint
    import hashlib

    import jax.numpy as jnp

    program = _two_outputs(jnp.sin)
    from xlaprobe.configs.reference import evaluate
    right = [np.asarray(o) for o in evaluate(program.jaxpr, program.inputs)]
    wrong = tuple(np.asarray(o + 1.0, np.float32) for o in right)
    fine = tuple(np.asarray(o, np.float32) for o in right)
    dropped, twice = ("spmd[mesh=2,mutant=all-reduce-dropped]",
                      "spmd[mesh=2,mutant=all-reduce-twice]")

    def findings(plain_outputs):
        configs = ["spmd[mesh=2]", dropped, twice, "reference"]
        return judge(program, configs, [Outcome(configs[0], OutcomeKind.RAN, plain_outputs),
                                        Outcome(dropped, OutcomeKind.RAN, wrong),
                                        Outcome(twice, OutcomeKind.RAN, wrong),
                                        Outcome("reference", OutcomeKind.RAN, tuple(right))]
                     ).findings
    keys = {f.config: f.fingerprint for f in findings(fine)}
    assert keys == {c: hashlib.sha256(f"planted|{n}".encode()).hexdigest()[:16]
                    for c, n in ((dropped, "all-reduce-dropped"), (twice, "all-reduce-twice"))}
    # the unmutated partitioned compile wrong alike: a real fault all three share, one key
    assert len({f.fingerprint for f in findings(wrong)}) == 1
    from xlaprobe.configs.mutants import MUTANTS
    from xlaprobe.configs.spmd_mutants import SPMD_MUTANTS
    assert not set(MUTANTS) & set(SPMD_MUTANTS)  # a planted name says which mutant it is

def test_stop_ends_a_session_early(tmp_path):
    campaign = Campaign(tmp_path / "fuzz.db", FAST, seed=30, jobs=1)
    try:
        summary = campaign.run(120.0, stop=lambda: campaign.state.programs >= 2)
    finally:
        campaign.close()
    assert summary.status == "done" and 2 <= summary.programs <= 3
    assert summary.next_seed <= 30 + summary.programs


def test_crash_fingerprint_is_the_failed_check_not_the_program():
    # Two fuzz programs (seeds 7100050 and 7100155) abort in the same check of XLA's algebraic
    # simplifier, with different shapes in the message: one key. Another check: another key.
    import jax.numpy as jnp

    def crash(config, shapes, where="algebraic_simplifier.cc:586"):
        return Outcome(config, OutcomeKind.CRASH, signal=6, error=(
            f"F1129 19:31:07.923233    7861 {where}] Check failed: computation->Accept(this) is "
            f"OK (INTERNAL: RET_CHECK failure {shapes})\n*** Check failure stack trace: ***"))

    def keys(program, shapes, where="algebraic_simplifier.cc:586"):
        outcomes = [crash("xla", shapes, where), crash("eager", shapes, where),
                    Outcome("reference", OutcomeKind.RAN, tuple(
                        np.zeros(np.shape(o)) for o in program.inputs[:len(program.output_names)]))]
        return {f.fingerprint for f in judge(program, ["xla", "eager", "reference"],
                                             outcomes).findings}
    first, second = _two_outputs(jnp.sin), _two_outputs(lambda x: jnp.exp(x) + 1)
    assert len(keys(first, "f16[15,1] vs f16[16,1]")) == 1
    assert keys(first, "f16[15,1] vs f16[16,1]") == keys(second, "f32[2,1] vs f32[3,1]")
    assert keys(first, "x") != keys(first, "x", where="hlo_verifier.cc:12")


def test_glibc_heap_aborts_of_one_write_are_one_key():
    # One out-of-bounds write aborts in whichever allocator check the heap's state trips first.
    import jax.numpy as jnp

    program = _two_outputs(jnp.sin)
    keys = set()
    for message in ("munmap_chunk(): invalid pointer", "free(): invalid next size (fast)",
                    "double free or corruption (out)", "malloc(): corrupted top size"):
        outcomes = [Outcome("xla", OutcomeKind.CRASH, signal=6, error=message),
                    Outcome("reference", OutcomeKind.RAN, tuple(
                        np.zeros(np.shape(o)) for o in program.inputs))]
        keys |= {f.fingerprint for f in judge(program, ["xla", "reference"], outcomes).findings}
    assert len(keys) == 1


def test_fuzz_adds_the_reference_it_judges_with(tmp_path):
    # Without the float64 reference a campaign's configurations were judged only against each
    # other at the bare dtype bound (a trial's jaxlib==0.10.2 "finding" that replays as ok).
    from xlaprobe.cli.fuzz import fuzz_command
    code = fuzz_command(time_s=1e-9, configs="xla,xla:O0", jobs=1, seed=0, db=tmp_path / "f.db",
                        resume=False, json_output=False)
    assert code == 1  # nothing checked in no time
    [record] = list_campaigns(tmp_path / "f.db")
    assert record.configs == ("xla", "xla:O0", "reference")
