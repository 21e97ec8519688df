"""Optimization coverage: XLA's pass log parsed, known answers from real compiles, the store's
round trip and the command's summary and one-line errors."""

import json
import sys

import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from xlaprobe import coverage
from xlaprobe.checking import judge
from xlaprobe.coverage import PassCoverage, parse_log
from xlaprobe.coverage_summary import store_coverage, summarize
from xlaprobe.errors import CorruptArtifact, InvalidArgument
from xlaprobe.merge import merge_stores
from xlaprobe.outcome import Outcome, OutcomeKind
from xlaprobe.program import Program, Provenance
from xlaprobe.store import Store

# Lines of a real jaxlib 0.12 log (hashes shortened): a sub-pipeline run as a pass
# ("simplification"), in which algsimp changed the module while visiting power.3, then an
# unchanged algsimp run where the same instruction kind fell through.
LOG = """\
I1203 07:33:23.105223   18288 pjrt_client.cc:587] PjRt-IFRT device count: total=1, addressable=1
I1203 07:33:23.292722   18288 hlo_pass_pipeline.cc:303] Running HLO pass pipeline on module jit_f: opt
I1203 07:33:23.292785   18288 hlo_pass_pipeline.cc:211]   HLO pass call-inliner
I1203 07:33:23.292802   18288 hlo_pass_pipeline.cc:215]   Module hash 111
I1203 07:33:23.292809   18288 hlo_pass_pipeline.cc:217]   Number of instructions: 20
I1203 07:33:23.292818   18288 hlo_pass_pipeline.cc:206] HLO pass: call-inliner time: 32 us (32 us) (cumulative: 32 us, max: 32 us, #called: 1)
I1203 07:33:23.292830   18288 hlo_pass_pipeline.cc:211]   HLO pass simplification
I1203 07:33:23.292834   18288 hlo_pass_pipeline.cc:215]   Module hash 111
I1203 07:33:23.292836   18288 hlo_pass_pipeline.cc:217]   Number of instructions: 20
I1203 07:33:23.292847   18288 hlo_pass_pipeline.cc:303] Running HLO pass pipeline on module jit_f: simplification
I1203 07:33:23.292852   18288 hlo_pass_pipeline.cc:211]   HLO pass algsimp
I1203 07:33:23.292857   18288 hlo_pass_pipeline.cc:215]   Module hash 111
I1203 07:33:23.292858   18288 hlo_pass_pipeline.cc:217]   Number of instructions: 20
I1203 07:33:23.292860   18288 algebraic_simplifier.cc:100] trying transform [A*1 => A]: %mul.1 = f32[8]{0} multiply(%x, %y)
I1203 07:33:23.292861   18288 algebraic_simplifier.cc:101] trying transform [(A * C1) * C2 => A * (C1 * C2)]
I1203 07:33:23.292862   18288 algebraic_simplifier.cc:200] trying transform [pow(A, 0) => 1]: %power.3 = f32[8]{0} power(%x, %two)
I1203 07:33:23.292863   18288 algebraic_simplifier.cc:201] trying transform [pow(A, 2) => A*A]: %power.3 = f32[8]{0} power(%x, %two)
I1203 07:33:23.292864   18288 hlo_pass_pipeline.cc:206] HLO pass: algsimp time: 10 us (10 us) (cumulative: 54 us, max: 32 us, #called: 3)
I1203 07:33:23.292868   18288 hlo_pass_pipeline.cc:211]   HLO pass dce
I1203 07:33:23.292872   18288 hlo_pass_pipeline.cc:215]   Module hash 222
I1203 07:33:23.292873   18288 hlo_pass_pipeline.cc:217]   Number of instructions: 19
I1203 07:33:23.292875   18288 hlo_pass_pipeline.cc:211]   HLO pass algsimp
I1203 07:33:23.292876   18288 hlo_pass_pipeline.cc:215]   Module hash 333
I1203 07:33:23.292877   18288 hlo_pass_pipeline.cc:217]   Number of instructions: 18
I1203 07:33:23.292878   18288 algebraic_simplifier.cc:100] trying transform [A*1 => A]: %mul.1 = f32[8]{0} multiply(%x, %y)
I1203 07:33:23.292879   18288 algebraic_simplifier.cc:101] trying transform [(A * C1) * C2 => A * (C1 * C2)]
I1203 07:33:23.292880   18288 hlo_pass_pipeline.cc:211]   HLO pass fusion
I1203 07:33:23.292881   18288 hlo_pass_pipeline.cc:215]   Module hash 333
I1203 07:33:23.292882   18288 hlo_pass_pipeline.cc:217]   Number of instructions: 18
I1203 07:33:23.292883   18288 hlo_pass_pipeline.cc:211]   HLO pass copy-insertion
I1203 07:33:23.292884   18288 hlo_pass_pipeline.cc:215]   Module hash 333
I1203 07:33:23.292885   18288 hlo_pass_pipeline.cc:217]   Number of instructions: 18
"""


def test_a_recorded_log_parses_into_passes_changes_and_rewrites():
    parsed = parse_log(LOG)
    assert parsed.ran == {"call-inliner": 1, "algsimp": 2, "dce": 1, "fusion": 1,
                          "copy-insertion": 1}  # the "simplification" pipeline is no pass
    assert parsed.changed == {"algsimp": 1, "dce": 1}
    # The changing run stopped at pow(A, 2) (and at the multiply's last rule, which the
    # unchanged run shows is where that handler falls through).
    assert parsed.rewrites == {"algsimp:[pow(A, 2) => A*A]": 1}
    assert PassCoverage.from_json(json.loads(parsed.dumps())) == parsed
    assert not parse_log("no glog lines\nat all") and not parse_log("")


def test_log_environment_and_switch():
    assert coverage.log_env({})["TF_CPP_MIN_LOG_LEVEL"] == "0"
    assert coverage.log_env({coverage.ENV_SWITCH: "passes"})["TF_CPP_VMODULE"] == \
        "hlo_pass_pipeline=2"
    assert coverage.enabled({}) and not coverage.enabled({coverage.ENV_SWITCH: "0"})
    # XLA numbers this pass per instance across a process's compiles: one name for coverage.
    assert coverage.pass_name("apply-xla-transforms-104") == "apply-xla-transforms"
    with pytest.raises(ValueError, match="ran"):
        PassCoverage.from_json({"ran": {"algsimp": -1}})


def _program(fn, *args):
    return Program.from_function(fn, args, Provenance("user", fn.__name__))


X = np.linspace(0.1, 1.0, 128, dtype=np.float32).reshape(8, 16)


def squared_plus_log_exp(x):
    return lax.pow(x, 2.0) + jnp.log(jnp.exp(x))


def plain_matmul(x, y):
    return x @ y


def test_known_answers_from_real_compiles(pool):
    simplified = pool.run(_program(squared_plus_log_exp, X), "xla")
    assert simplified.ran and simplified.coverage
    assert simplified.coverage.changed.get("algsimp", 0) >= 1  # pow(x, 2) becomes x * x
    assert "algsimp:[pow(A, 2) => A*A]" in simplified.coverage.rewrites
    assert simplified.coverage.ran["fusion"] >= 1
    matmul = pool.run(_program(plain_matmul, X, X.T.copy()), "xla")
    assert matmul.coverage.ran.get("fusion", 0) >= 1
    assert "fusion" not in matmul.coverage.changed  # one dot: nothing to fuse
    eager = pool.run(_program(plain_matmul, X, X.T.copy()), "eager")
    assert eager.coverage is None  # op by op: not a compile of the program


def _stored(tmp_path, name, campaign=None):
    program = Program.from_function(lambda x: x * 2, (np.arange(3, dtype=np.float32),),
                                    Provenance("fuzz", name, 1))
    outcomes = [Outcome("xla", OutcomeKind.RAN, (np.arange(3) * 2.0,), coverage=parse_log(LOG)),
                Outcome("reference", OutcomeKind.RAN, (np.arange(3) * 2.0,))]
    db = tmp_path / f"{name}.db"
    with Store(db) as store:
        store.record_check(judge(program, ["xla", "reference"], outcomes), campaign=campaign)
    return db


def test_store_round_trip_and_merge(tmp_path):
    db = _stored(tmp_path, "a", campaign=None)
    groups, total = store_coverage(db)
    assert [(g.campaign, g.source, g.runs) for g in groups] == [(None, "fuzz", 1)]
    assert dict(total.changed) == {"algsimp": 1, "dce": 1}
    assert total.never_changed == ["call-inliner", "copy-insertion", "fusion"]
    assert total.to_json()["rewrites"] == {"algsimp:[pow(A, 2) => A*A]": 1}
    merged = tmp_path / "merged.db"
    merge_stores([db], merged)
    assert store_coverage(merged)[1].to_json() == total.to_json()


def test_groups_by_campaign_and_source():
    data = parse_log(LOG).dumps()
    groups, total = summarize([(1, "fuzz", "fuzz:1", "p1", data), (None, "model", "resnet", "p2",
                                                                   data)])
    assert [(g.campaign, g.source) for g in groups] == [(None, "zoo"), (1, "fuzz")]
    assert total.runs == 2 and len(total.programs) == 2
    with pytest.raises(CorruptArtifact, match="corrupt"):
        summarize([(1, "fuzz", "fuzz:1", "p1", "{not json")])
    with pytest.raises(InvalidArgument, match="no xlaprobe store"):
        store_coverage("/nonexistent/x.db")


def test_steered_runs_are_grouped_by_what_made_them():
    # pattern, mutation and special-value re-runs of a steered campaign were all "fuzz"
    data = parse_log(LOG).dumps()
    names = ["fuzz:1", "steer:2:pattern:pow", "steer:3:mutate:dup", "steer:4:mutate:loop",
             "steer:5:special"]
    groups, total = summarize([(7, "fuzz", n, f"p{i}", data) for i, n in enumerate(names)])
    assert [(g.source, g.runs) for g in groups] == [
        ("fuzz", 1), ("fuzz (mutation)", 2), ("fuzz (pattern)", 1),
        ("fuzz (special-value re-run)", 1)]
    assert total.runs == 5

def _cli(monkeypatch, capsys, *args):
    from xlaprobe.cli.commands import main
    monkeypatch.setattr(sys, "argv", ["xlaprobe", *args])
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_labels_a_steered_campaigns_runs(tmp_path, monkeypatch, capsys):
    db = _stored(tmp_path, "steer:5:special", campaign=None)
    code, out, _ = _cli(monkeypatch, capsys, "coverage", "--db", str(db))
    assert code == 0
    row = next(line for line in out.splitlines() if "special" in line and "│" in line)
    assert [c.strip() for c in row.split("│")[1:3]] == ["-", "fuzz (special-value re-run)"]
    assert "no campaign, fuzz (special-value re-run)" in out  # the matrix's column

def test_cli_summary_and_one_line_errors(tmp_path, monkeypatch, capsys):
    db = _stored(tmp_path, "c")
    code, out, _ = _cli(monkeypatch, capsys, "coverage", "--db", str(db), "--json")
    assert code == 0 and json.loads(out)["total"]["changed"] == {"algsimp": 1, "dce": 1}
    code, out, _ = _cli(monkeypatch, capsys, "coverage", "--db", str(db))
    assert code == 0 and "algsimp" in out and "pow(A, 2) => A*A" in out
    bad = tmp_path / "bad.db"
    bad.write_text("not a database")
    for path in (bad, tmp_path / "missing.db", tmp_path):
        code, out, err = _cli(monkeypatch, capsys, "coverage", "--db", str(path))
        assert code == 2 and out == ""
        assert len(err.strip().splitlines()) == 1 and "error" in err
    # A campaign the store does not hold is an error, not "no XLA run recorded coverage".
    code, out, err = _cli(monkeypatch, capsys, "coverage", "--db", str(db), "--campaign", "99")
    assert code == 2 and out == "" and "no campaign 99" in err
