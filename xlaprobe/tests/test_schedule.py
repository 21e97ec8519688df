"""The adaptive schedule: the first tier decides, the expensive configurations run only where
they can still change the outcome (a finding, dead code, no oracle, an audit), and every skip is
recorded with why (store, campaign counts, resume)."""

import dataclasses
import sqlite3

import jax.numpy as jnp
import numpy as np
import pytest

from xlaprobe.campaign import SKIPPED, Campaign, list_campaigns
from xlaprobe.checking import judge
from xlaprobe.configs.reference import evaluate
from xlaprobe.errors import InvalidArgument
from xlaprobe.outcome import Outcome, OutcomeKind
from xlaprobe.program import Program, Provenance
from xlaprobe.store import Store
from xlaprobe.schedule import (AUDIT_EVERY, SKIP_CLEAN, check_schedule, dead_equations, first_tier,
                               is_audit,
                               later_reasons)

LATER = ["xla:O0", "eager"]


def _clean(seed: int = 1) -> Program:
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    return Program.from_function(lambda a: jnp.sin(a) * 2.0, (x,),
                                 Provenance("fuzz", f"fuzz:{seed}", seed))


def _with_dead_code(seed: int = 3) -> Program:
    def fn(a):
        jnp.cos(a)  # traced, never used: the optimized compile deletes it
        return jnp.sin(a) * 2.0
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    return Program.from_function(fn, (x,), Provenance("fuzz", f"fuzz:{seed}", seed))


def _first(program: Program, xla_outputs=None, reference_ran: bool = True):
    right = tuple(np.asarray(o) for o in evaluate(program.jaxpr, program.inputs))
    xla = tuple(np.asarray(o, np.float32) for o in (xla_outputs or right))
    reference = Outcome("reference", OutcomeKind.RAN, right) if reference_ran else \
        Outcome("reference", OutcomeKind.TOOL_ERROR, error="no rule")
    return judge(program, ["xla", "reference"], [Outcome("xla", OutcomeKind.RAN, xla), reference])


def test_first_tier_and_schedule_names():
    assert first_tier(["xla", "xla:O0", "eager", "reference"]) == ("xla", "reference")
    assert first_tier(["eager", "xla:O0", "mutant:swap-subtract-fused", "reference"]) == \
        ("eager", "mutant:swap-subtract-fused", "reference")
    # Other releases and xla variants are compilers under test: their bugs show only when they
    # run. Only the explainers (eager, plain xla:O0) wait for a reason.
    assert first_tier(["xla", "xla:O0", "eager", "jaxlib==0.10.2", "xla:fastmath",
                       "xla:O0[xla_cpu_enable_fast_math=true]", "reference"]) == \
        ("xla", "jaxlib==0.10.2", "xla:fastmath", "xla:O0[xla_cpu_enable_fast_math=true]",
         "reference")
    assert check_schedule("all") == "all"
    with pytest.raises(InvalidArgument, match="--schedule must be one of adaptive, all"):
        check_schedule("fast")


def test_fuzz_refuses_an_unknown_schedule_before_touching_the_store(tmp_path):
    from xlaprobe.cli.fuzz import fuzz_command

    with pytest.raises(InvalidArgument, match="--schedule must be one of"):
        fuzz_command(time_s=1.0, configs="xla,eager,reference", jobs=1, seed=0,
                     db=tmp_path / "fuzz.db", resume=False, json_output=True, schedule="fast")
    assert not (tmp_path / "fuzz.db").exists()


def test_a_clean_program_skips_the_expensive_configurations():
    program = _clean()
    assert dead_equations(program) == 0
    assert later_reasons(program, _first(program), LATER) == {
        "xla:O0": f"skip: {SKIP_CLEAN}", "eager": f"skip: {SKIP_CLEAN}"}


def test_a_planted_disagreement_runs_everything():
    program = _clean()
    right = evaluate(program.jaxpr, program.inputs)
    first = _first(program, xla_outputs=[np.asarray(right[0]) + 1.0])
    assert [f.config for f in first.findings] == ["xla"]
    reasons = later_reasons(program, first, LATER)
    assert reasons == {c: "run: a finding to explain (xla mismatch)" for c in LATER}


def test_dead_code_runs_eager_only():
    program = _with_dead_code()
    assert dead_equations(program) == 1
    reasons = later_reasons(program, _first(program), LATER)
    assert reasons["eager"].startswith("run: 1 dead equation (")
    assert reasons["xla:O0"] == f"skip: {SKIP_CLEAN}"


def test_no_oracle_or_an_audit_runs_everything():
    program = _clean()
    assert all(r.startswith("run: no oracle") for r in
               later_reasons(program, _first(program, reference_ran=False), LATER).values())
    assert all(r.startswith("run: audit") for r in
               later_reasons(program, _first(program), LATER, audit=True).values())


def test_resume_counts_the_skips_a_killed_session_stored(tmp_path):
    # A session stored seed 2's check (xla:O0 and eager skipped) and was killed before the
    # campaign counted it: the resumed campaign counts it from the store, skips included.
    db = tmp_path / "fuzz.db"
    configs = ["xla", "xla:O0", "eager", "reference"]
    first = Campaign(db, configs, seed=2, jobs=1, source=_source)
    first.close()
    program = _clean(2)
    result = dataclasses.replace(_first(program), skipped=(("xla:O0", SKIP_CLEAN),
                                                          ("eager", SKIP_CLEAN)))
    with Store(db) as store:
        store.record_check(result, campaign=first.state.id)
    again = Campaign(db, configs, resume=True, jobs=1, source=_source)
    again.close()
    assert again.state.schedule == "adaptive" and again.state.next_seed == 3
    assert again.state.verdicts == {"xla": {"ok": 1}, "reference": {"ok": 1},
                                    "xla:O0": {SKIPPED: 1}, "eager": {SKIPPED: 1}}
    [record] = list_campaigns(db)
    assert (record.schedule, record.skipped, record.programs) == ("adaptive", 2, 1)


def _source(seed: int) -> Program:
    return _with_dead_code(seed) if seed % 2 else _clean(seed)


@pytest.mark.slow
def test_adaptive_campaign_records_its_skips_and_resumes(tmp_path):
    # Seeds 1 (dead code: eager runs, xla:O0 is skipped) and 2 (clean: both skipped); then a
    # resume under --schedule all runs everything on seed 3. Seed 15 (an audit) is not among them.
    db = tmp_path / "fuzz.db"
    configs = ["xla", "xla:O0", "eager", "reference"]
    campaign = Campaign(db, configs, seed=1, jobs=1, source=_source)
    try:
        summary = campaign.run(120.0, max_programs=2)
    finally:
        campaign.close()
    assert summary.schedule == "adaptive" and summary.findings == 0
    assert summary.verdicts["xla:O0"] == {SKIPPED: 2}
    assert summary.verdicts["eager"] == {"ok": 1, SKIPPED: 1}
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT p.seed, s.config, s.why, c.configs FROM skipped_runs s JOIN checks c ON "
            "c.id = s.check_id JOIN programs p ON p.id = c.program_id ORDER BY p.seed, s.config"
        ).fetchall()
        # A kill after the store committed a check, before the campaign counted it.
        conn.execute("UPDATE fuzz_campaigns SET state = json_set(state, '$.verdicts', "
                     "json('{}'), '$.programs', 1, '$.done_above', json('[]')), next_seed = 2")
    assert rows == [(1, "xla:O0", SKIP_CLEAN, "xla,eager,reference"),
                    (2, "eager", SKIP_CLEAN, "xla,reference"),
                    (2, "xla:O0", SKIP_CLEAN, "xla,reference")]
    again = Campaign(db, configs, resume=True, jobs=1, source=_source, schedule="all")
    try:
        summary = again.run(120.0, max_programs=1)
    finally:
        again.close()
    # Seed 2's check is reconciled from the store with its skips; seed 3 ran everything.
    assert summary.programs == 3 and summary.next_seed == 4 and summary.schedule == "all"
    assert summary.verdicts["xla:O0"] == {SKIPPED: 1, "ok": 1}
    assert summary.verdicts["eager"] == {SKIPPED: 1, "ok": 1}
    [record] = list_campaigns(db)
    assert (record.schedule, record.skipped, record.programs) == ("all", 2, 3)


@pytest.mark.parametrize("shards", [1, 2, 3, 4, 16])
def test_every_seed_shard_audits_its_share(shards):
    # Audits used to be seed % 16 == 15: odd seeds only, so shard 0/2 never audited. A hash of
    # the seed gives each of N shards about one audit in AUDIT_EVERY programs (32,000 seeds:
    # between 0.8 and 1.25 times the rate), and a shard's audits are the whole range's.
    for index in range(shards):
        seeds = range(index, 32_000, shards)
        rate = sum(map(is_audit, seeds)) / len(seeds)
        assert 0.8 / AUDIT_EVERY < rate < 1.25 / AUDIT_EVERY, (shards, index, rate)
