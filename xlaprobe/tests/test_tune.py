"""The autotuner: search space, knobs, timing statistics, cost model, strategies, the guard, CLI."""

import json
import math
import pathlib
import re
import subprocess
import sys

import jax
import numpy as np
import pytest

import xlaprobe
from xlaprobe.errors import InvalidArgument
from xlaprobe.store import Store
from xlaprobe.tune import costmodel, space as space_mod
from xlaprobe.tune.costmodel import CostModel, kendall_tau, relevance, top_k_slowdown
from xlaprobe.knobs import declared_knobs, knob, resolve_knobs
from xlaprobe.tune.measure import Protocol, measure, speedup_interval
from xlaprobe.tune.search import ModelStrategy, RandomStrategy, TpeStrategy, tune, tune_target
from xlaprobe.tune.space import SearchSpace

TARGET = f"{pathlib.Path(__file__).parent / 'data' / 'tune_target.py'}:step"
QUICK = Protocol(min_rounds=3, max_rounds=4, sample_s=0.002)


# ------------------------------------------------------------------------------ space and knobs

def test_default_candidate_is_plain_xla():
    space = SearchSpace.for_program()
    default = space.default()
    assert space.key(default) == ""
    assert space_mod.option_pairs(default) == []
    assert str(space_mod.configuration(default)) == "xla"
    assert space.prior_score(default) == 0.0
    assert space.encode(default).sum() == 0


def test_candidate_becomes_options_flags_and_a_spec():
    space = SearchSpace.for_program()
    candidate = space.validate({"pass:algsimp": True, "pass:cse": True,
                                "xla_cpu_experimental_ynn_fusion_type":
                                    "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT"})
    assert space_mod.option_pairs(candidate) == [
        ("xla_cpu_experimental_ynn_fusion_type", "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT"),
        ("xla_disable_hlo_passes", "algsimp+cse")]
    assert space_mod.xla_flags(candidate) == (
        "--xla_cpu_experimental_ynn_fusion_type=LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT "
        "--xla_disable_hlo_passes=algsimp,cse")
    from xlaprobe.configs.registry import Configuration
    from xlaprobe.configs.xla import compiler_options
    config = space_mod.configuration(candidate)
    assert Configuration.parse(str(config)) == config
    assert compiler_options(config)["xla_disable_hlo_passes"] == "algsimp,cse"


def test_bad_candidates_and_dimensions_are_rejected():
    space = SearchSpace.for_program()
    with pytest.raises(InvalidArgument, match="unknown search dimension"):
        space.validate({"xla_nope": "1"})
    with pytest.raises(InvalidArgument, match="not one of"):
        space.validate({"pass:algsimp": "maybe"})
    with pytest.raises(InvalidArgument, match="unknown search dimension"):
        SearchSpace.for_program(only=["pass:nope"])
    assert [d.name for d in space.without("pass:algsimp", [True]).dimensions].count(
        "pass:algsimp") == 0


def test_priors_favour_the_measured_wins():
    # YNNPACK for dots alone and algsimp off are the wins measured on XLA:CPU; nothing else
    # scores above the cost of a change.
    space = SearchSpace.for_program()
    best = space.prior_best()
    assert space.key(best) == ("xla_cpu_experimental_ynn_fusion_type="
                               "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT,pass:algsimp=True")
    assert space.prior_score(best) == pytest.approx(math.log(4 / 2) + math.log(3 / 2))
    assert len(space.neighbours(space.default())) == sum(len(d.values) - 1
                                                          for d in space.dimensions)


def test_knob_on_a_positional_parameter_is_an_error():
    def f(x, block=knob(2, (2, 4))):
        return x

    with pytest.raises(InvalidArgument, match="must be keyword-only"):
        declared_knobs(f)


def test_knob_declaration_and_resolution():
    def f(x, *, block=knob(64, (32, 64)), mode=knob("a", ("a", "b"))):
        return x

    knobs = declared_knobs(f)
    assert set(knobs) == {"block", "mode"}
    assert resolve_knobs(knobs, {"block": 32}) == {"block": 32, "mode": "a"}
    with pytest.raises(InvalidArgument, match="unknown knob"):
        resolve_knobs(knobs, {"blok": 32})
    with pytest.raises(InvalidArgument, match="not one of"):
        resolve_knobs(knobs, {"block": 48})
    with pytest.raises(InvalidArgument, match=r"not among its choices .*\(at .*test_tune.py:\d+\)"):
        knob(5, (1, 2))


def test_zoo_knobs_change_the_program_not_its_result():
    from xlaprobe.sources import models
    from jax.extend.core import jaxpr_as_fun

    nhwc = models.build_program("convnet")
    nchw = models.build_program("convnet", knobs={"layout": "NCHW"})
    assert nchw.provenance.name == "convnet[layout=NCHW]"
    assert nhwc.fingerprint != nchw.fingerprint
    a = jax.jit(jaxpr_as_fun(nhwc.jaxpr))(*nhwc.inputs)
    b = jax.jit(jaxpr_as_fun(nchw.jaxpr))(*nchw.inputs)
    np.testing.assert_allclose(a[0], b[0], rtol=1e-5)  # the loss
    with pytest.raises(InvalidArgument, match="not one of"):
        models.build_program("convnet", knobs={"layout": "NHCW"})
    assert set(models.MODELS["attention_lm"].knobs) == {"attention_block", "mlp_chunks", "remat"}


@pytest.mark.slow
def test_attention_lm_knobs_keep_the_loss():
    from xlaprobe.sources import models
    from jax.extend.core import jaxpr_as_fun

    losses = []
    for knobs in ({}, {"attention_block": 32, "mlp_chunks": 4, "remat": "dots_saveable"}):
        p = models.build_program("attention_lm", knobs=knobs)
        losses.append(float(jax.jit(jaxpr_as_fun(p.jaxpr))(*p.inputs)[0]))
    assert losses[0] == pytest.approx(losses[1], rel=1e-5)


# ------------------------------------------------------------------------------ statistics

def test_speedup_interval_of_exact_ratio():
    base = np.full(10, 2.0)
    speedup, low, high = speedup_interval(base, base / 2)
    assert (speedup, low, high) == (2.0, 2.0, 2.0)


def test_speedup_interval_covers_the_true_ratio_under_noise():
    rng = np.random.default_rng(1)
    covered = 0
    for trial in range(200):
        base = 1.0 * rng.lognormal(0, 0.1, 20)
        cand = 0.8 * rng.lognormal(0, 0.1, 20)
        _, low, high = speedup_interval(base, cand, seed=trial)
        covered += low <= 1.25 <= high
    assert covered >= 170  # nominal 95%; the percentile bootstrap of a median runs a bit low


def test_speedup_interval_rejects_bad_series():
    with pytest.raises(InvalidArgument):
        speedup_interval(np.ones(3), np.ones(4))
    with pytest.raises(InvalidArgument):
        speedup_interval(np.ones(3), np.zeros(3))


def test_ranking_metrics_known_values():
    assert kendall_tau([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert kendall_tau([4, 3, 2, 1], [10, 20, 30, 40]) == pytest.approx(-1.0)
    speedups = [1.0, 2.0, 1.5]
    assert top_k_slowdown([0, 9, 1], speedups, 1) == 0.0
    assert top_k_slowdown([9, 0, 1], speedups, 1) == pytest.approx(1.0)  # picked 1.0x vs 2.0x
    assert top_k_slowdown([9, 0, 1], speedups, 3) == 0.0
    assert list(relevance([0.5, 3.0, 1.0, 2.0, 1.5])) == [0, 4, 1, 3, 2]


def test_roofline_ranks_less_work_first():
    scores = costmodel.roofline_scores([{"flops": 1e9, "bytes accessed": 1e6},
                                        {"flops": 1e6, "bytes accessed": 1e6}])
    assert scores[1] > scores[0]


def test_cost_model_learns_a_rule_across_programs():
    # Speedup is 2x when option A is set, 0.5x when B is set, on every program: a model trained
    # on some programs ranks held-out programs' candidates perfectly.
    rng = np.random.default_rng(0)

    def rows(program):
        out = []
        for _ in range(12):
            a, b = rng.random() < 0.5, rng.random() < 0.5
            features = {"prog:size": float(program), **({"set:A=1": 1.0} if a else {}),
                        **({"set:B=1": 1.0} if b else {})}
            out.append((f"p{program}", features, 2.0 ** (a - b) * rng.lognormal(0, 0.01)))
        return out

    train = [r for p in range(6) for r in rows(p)]
    model = CostModel(seed=0).fit(*zip(*train))
    assert model.ready
    held = rows(99)
    tau = kendall_tau(model.score([f for _, f, _ in held]), [s for _, _, s in held])
    assert tau > 0.7
    assert not CostModel().fit(["p"], [{}], [1.0]).ready


# ------------------------------------------------------------------------------ strategies

def test_random_strategy_never_repeats():
    space = SearchSpace.for_program(only=["pass:algsimp", "pass:cse", "xla_cpu_use_xnnpack"])
    chooser = RandomStrategy(space, 0)
    keys = {space.key(chooser.propose()) for _ in range(7)}  # 2*2*2 - the baseline
    assert len(keys) == 7 and "" not in keys
    with pytest.raises(InvalidArgument, match="exhausted"):
        chooser.propose()


def test_model_strategy_starts_from_the_priors_then_learns():
    space = SearchSpace.for_program()
    chooser = ModelStrategy(space, 0, {"size": 1.0}, [], "p")
    first = chooser.propose()
    assert first == space.prior_best()
    # Teach it that disabling fusion is what helps on this program: it proposes fusion off.
    for candidate in space.neighbours(space.default())[:12] + [space.prior_best()]:
        chooser.observe(candidate, 3.0 if candidate["pass:fusion"] else 1.0)
    chooser.observe({**space.default(), "pass:fusion": True, "pass:cse": True}, 3.0)
    chooser.observe({**space.default(), "pass:fusion": True, "xla_cpu_use_xnnpack": "false"}, 3.0)
    picks = [chooser.propose() for _ in range(5)]
    assert sum(c["pass:fusion"] for c in picks) >= 4


def test_tpe_strategy_proposes_valid_unique_candidates():
    space = SearchSpace.for_program(only=["pass:algsimp", "pass:cse", "xla_cpu_prefer_vector_width"])
    chooser = TpeStrategy(space, 0)
    seen = set()
    for i in range(6):
        candidate = chooser.propose()
        assert space.validate(candidate) == candidate
        seen.add(space.key(candidate))
        chooser.observe(candidate, None if i == 0 else 1.0 + 0.1 * i)
    assert len(seen) == 6 and "" not in seen


# ------------------------------------------------------------------------------ real runs

def test_worker_call_returns_values_errors_and_recycles(pool):
    target = tune_target(TARGET)
    program = target.build({})
    first = measure(pool, program, {}, {}, protocol=QUICK)[0]
    assert first is not None and first.rounds >= QUICK.min_rounds and first.threads >= 1
    assert first.features["op:dot"] > 0 and first.cost["flops"] > 0
    bad = pool.call(program, "xlaprobe.tune.search:compile_probe", {"option_sets": 3})
    assert bad.kind.value == "compile-error" and "TypeError" in bad.error
    pool.recycle("tune")
    again = measure(pool, program, {}, {}, protocol=QUICK)[0]
    assert again.pid != first.pid  # a fresh process


def test_guard_rejects_a_planted_miscompile_and_stores_it_as_a_finding(pool, tmp_path):
    target = tune_target(TARGET)
    space = SearchSpace.for_program(target.knobs, only=["mutant"], plant="swap-subtract-fused")
    with Store(tmp_path / "t.db") as store:
        result = tune(target, pool, store, strategy="random", budget=1, space=space,
                      protocol=QUICK, name="guarded")
        assert [t.status for t in result.trials] == ["rejected"]
        assert result.findings == (("mutant=swap-subtract-fused", "mismatch"),)
        assert not result.accepted and result.compiler_options == {}
        findings = store.findings()
        assert [(f["config"], f["kind"]) for f in findings] == [
            ("mutant:swap-subtract-fused", "mismatch")]
        assert store.tuning_result("guarded")["rejected"] == [
            {"candidate": "mutant=swap-subtract-fused", "kind": "mismatch"}]


def test_tune_measures_knobs_and_stores_every_measurement(pool, tmp_path):
    target = tune_target(TARGET)
    assert set(target.knobs) == {"chunks"}
    space = SearchSpace.for_program(target.knobs, only=["knob:chunks", "pass:algsimp"])
    with Store(tmp_path / "t.db") as store:
        result = tune(target, pool, store, strategy="model", budget=3, space=space,
                      protocol=QUICK, replicate=False)
        assert {t.key for t in result.trials} == {"pass:algsimp=True", "knob:chunks=4",
                                                  "pass:algsimp=True,knob:chunks=4"}
        # A re-associated contraction and a pass toggle: same math, the guard passes both.
        assert all(t.status == "ok" for t in result.trials), result.trials
        assert store.count("measurements") == 3 and store.count("findings") == 0
        assert [t.index for t in result.trials] == [1, 2, 3]
        best = [t.best for t in result.trials]
        assert best == sorted(best) and best[0] >= 1.0


@pytest.mark.parametrize("function, knob_key, reason", [
    ("precision_step", "knob:dtype=bfloat16", "mismatch in out against the default"),
    ("biased_step", "knob:bias=0.01", "mismatch in out against the default"),
])
def test_a_knob_that_changes_the_math_is_rejected_with_its_reason(pool, tmp_path, capsys,
                                                                   function, knob_key, reason):
    """XLA computes the bfloat16 contraction (or the added term) right against the candidate's
    own reference: only the default configuration's reference shows the result changed."""
    target = tune_target(TARGET.replace(":step", f":{function}"))
    (name,) = target.knobs
    space = SearchSpace.for_program(target.knobs, only=[f"knob:{name}"])
    with Store(tmp_path / "t.db") as store:
        result = tune(target, pool, store, strategy="random", budget=1, space=space,
                      protocol=QUICK, name="changed")
        (trial,) = result.trials
        assert (trial.key, trial.status) == (knob_key, "rejected")
        assert trial.detail.startswith("changes-result: " + reason), trial.detail
        assert result.findings == ((knob_key, "changes-result"),)
        assert not result.accepted and result.knobs == {}
        stored = store.tuning_result("changed")
        assert stored["rejected"] == [{"candidate": knob_key, "kind": "changes-result"}]
        assert stored["trials"][0]["detail"] == trial.detail
        assert store.count("findings") == 0  # XLA computed the new math right: no finding
        # Its own reference passes it: the old guard accepted it.
        program = target.build(space_mod.knob_values(trial.candidate))
        from xlaprobe.tune.search import Guard
        assert not Guard(pool).judge(program, "xla", trial.measurement.outputs).findings
    # `xlaprobe tune` prints the reason on the trial's progress line.
    from xlaprobe.cli.console import Steps
    from xlaprobe.cli.tune import _progress
    with Steps("tune", total=1, quiet=False) as steps:
        _progress(steps)("trial", trial)
    line = capsys.readouterr().err
    assert line.startswith("tune: rejected") and f"{knob_key}  (changes-result: {reason}" in line


def test_the_guard_refuses_another_output_dtype_or_shape_before_judging():
    from xlaprobe.program import Program, Provenance
    from xlaprobe.tune.search import Guard

    x = np.ones((4, 3), np.float32)
    default = Program.from_function(lambda a: (a * 2.0, a.sum()), (x,), Provenance("user", "d"))
    guard = Guard(pool=None)  # no run: both answers come before the reference is needed
    assert guard.changed(default, "xla", (x.astype(jax.numpy.bfloat16), np.float32(1))) == (
        "output [0] is bfloat16[4, 3], the default configuration's float32[4, 3]")
    assert guard.changed(default, "xla", (x[:2], np.float32(1))) == (
        "output [0] is float32[2, 3], the default configuration's float32[4, 3]")
    assert guard.changed(default, "xla", (x,)) == (
        "it returns 1 outputs, the default configuration 2")


def test_a_candidate_doing_less_work_is_confirmed_and_accepted(pool, tmp_path):
    target = tune_target(TARGET.replace(":step", ":padded_step"))
    space = SearchSpace.for_program(target.knobs, only=["knob:rounds"])
    events = []
    with Store(tmp_path / "t.db") as store:
        # longer samples than QUICK: the search's one measurement must see the win under load
        result = tune(target, pool, store, strategy="random", budget=1, space=space,
                      protocol=Protocol(min_rounds=5, max_rounds=8, sample_s=0.01),
                      on_event=lambda event, payload: events.append(event))
    confirmation = result.replicated
    assert confirmation is not None and result.accepted, confirmation
    # 48 small matmuls against one (24 measured 1.8-2.5x under load): past any threshold
    assert confirmation.low > 1.2 and confirmation.rounds == 30
    assert result.knobs == {"rounds": 0} and "replicated" in events
    assert result.to_json()["replicated"]["method"] == "paired-interleaved-sign-test"


def test_a_budget_beyond_the_space_stops_and_stores_the_result(pool, tmp_path):
    target = tune_target(TARGET)
    space = SearchSpace.for_program(target.knobs, only=["pass:algsimp"])
    with Store(tmp_path / "t.db") as store:
        result = tune(target, pool, store, strategy="random", budget=5, space=space,
                      protocol=QUICK, replicate=False, name="small")
        assert [t.key for t in result.trials] == ["pass:algsimp=True"]
        assert store.tuning_result("small")["budget"] == 5


def test_a_baseline_without_a_finite_output_is_reported(pool, tmp_path):
    target = tune_target(TARGET.replace(":step", ":nan_step"))
    space = SearchSpace.for_program(target.knobs, only=["pass:algsimp"])
    notes = []
    with Store(tmp_path / "t.db") as store:
        tune(target, pool, store, strategy="random", budget=1, space=space, protocol=QUICK,
             replicate=False, on_event=lambda event, payload: notes.append(payload)
             if event == "note" else None)
    assert any("NaN or infinite" in str(n) for n in notes), notes


def test_tuned_applies_a_stored_result(tmp_path):
    db = tmp_path / "t.db"
    with Store(db) as store:
        run = store.start_tuning_run("mine", "p", "model", 1, 0)
        store.finish_tuning_run(run, {"compiler_options": {"xla_cpu_enable_fast_math": False},
                                      "knobs": {"scale": 4.0}})

    def f(x, *, scale=knob(2.0, (2.0, 4.0))):
        return x * scale

    fast = xlaprobe.tuned(f, "mine", db=db)
    assert fast.compiler_options == {"xla_cpu_enable_fast_math": False}
    np.testing.assert_array_equal(fast(np.ones(3, np.float32)), np.full(3, 4.0, np.float32))
    with pytest.raises(InvalidArgument, match="no tuning result named 'other'.*known: 'mine'"):
        xlaprobe.tuned(f, "other", db=db)

    def g(x, *, block=knob(1, (1, 2))):  # not the function that was tuned
        return x

    with pytest.raises(InvalidArgument, match="sets knob.* scale .*does not declare.*block"):
        xlaprobe.tuned(g, "mine", db=db)
    with pytest.raises(InvalidArgument, match="needs the function"):
        xlaprobe.tuned(TARGET, "mine", db=db)


def test_tuned_prefers_the_accepted_result_and_fills_knob_defaults(tmp_path):
    db = tmp_path / "t.db"
    with Store(db) as store:
        for accepted, knobs in ((True, {"scale": 4.0}), (False, {})):
            run = store.start_tuning_run("mine", "p", "model", 1, 0)
            store.finish_tuning_run(run, {"accepted": accepted, "compiler_options": {},
                                          "knobs": knobs})
        run = store.start_tuning_run("plain", "p", "model", 1, 0)
        store.finish_tuning_run(run, {"accepted": False, "compiler_options": {}, "knobs": {}})

    def f(x, y=1.0, *, scale=knob(2.0, (2.0, 4.0))):
        return x * scale + y

    db.chmod(0o444)  # read-only is enough to apply a result
    np.testing.assert_array_equal(xlaprobe.tuned(f, "mine", db=db)(np.ones(2, np.float32)),
                                  np.full(2, 5.0, np.float32))
    plain = xlaprobe.tuned(f, "plain", db=db)
    assert plain.knobs == {"scale": 2.0}
    np.testing.assert_array_equal(plain(np.ones(2, np.float32), y=np.float32(0.5)),
                                  np.full(2, 2.5, np.float32))


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "xlaprobe.cli", *args], capture_output=True,
                          text=True, timeout=600, cwd=cwd)


@pytest.mark.parametrize("args,words", [
    (["tune", "convnet", "--strategy", "annealing"], "unknown strategy"),
    (["tune", "convnet", "--only", "pass:nope"], "unknown search dimension"),
    (["tune", "no_such_model"], "unknown target"),
    (["tune", "convnet", "--only", " , "], "names no dimension"),
    (["tune", "convnet", "--plot", "search.txt"], "use a file ending in"),
    (["tune", "convnet", "--plot", "/no/such/dir/p.svg"], "does not exist"),
    (["tune-corpus", "no_such_model"], "unknown corpus program"),
    (["tune-corpus", "fuzz:1-x"], "malformed fuzz programs"),
    (["tune-corpus", "fuzz:5-2"], "FIRST <= LAST"),
    (["tune-corpus", "fuzz:1-100000000,convnet"], "at most 10,000 seeds"),
    (["tune-corpus", "fuzz:1", "--kernel-limit", "60", "--timeout", "50"],
     "--kernel-limit 60 s is above --timeout 50 s"),
    (["tune-corpus", "fuzz:1,,fuzz:2"], "an empty item in PROGRAMS 'fuzz:1,,fuzz:2'"),
    (["tune-corpus", "fuzz:1,fuzz:1"], "PROGRAMS lists 'fuzz:1' twice"),
])
def test_tune_bad_input_is_one_line(tmp_path, args, words):
    proc = _cli(*args, "--db", str(tmp_path / "t.db"))
    assert proc.returncode == 2, proc.stderr
    assert words in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args", [["tune", TARGET, "--budget", "1"],
                                  ["tune-corpus", "fuzz:1", "--configs", "1"]])
def test_a_db_that_is_not_a_store_is_the_only_line(tmp_path, args):
    db = tmp_path / "notes.db"
    db.write_text("not a database\n" * 100)
    proc = _cli(*args, "--db", str(db))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"xlaprobe: error: {db} is not an xlaprobe database (file is not a database); move it "
        "away or pass another --db"]
    assert db.read_text() == "not a database\n" * 100  # untouched


def test_the_kernel_strategy_without_a_corpus_is_refused_before_any_measurement(tmp_path):
    import sqlite3

    db = tmp_path / "t.db"
    proc = _cli("tune", TARGET, "--strategy", "kernel", "--budget", "1", "--db", str(db))
    assert proc.returncode == 2 and "needs a kernel corpus" in proc.stderr, proc.stderr
    assert "A/A control" not in proc.stderr
    if db.exists():  # refused before the run was stored: no half-written tuning run
        with sqlite3.connect(db) as con:
            tables = {r[0] for r in con.execute("select name from sqlite_master")}
            assert "tuning_runs" not in tables or \
                con.execute("select count(*) from tuning_runs").fetchone()[0] == 0


def test_tune_cli_json_and_plot(tmp_path):
    plot = tmp_path / "search.svg"
    proc = _cli("tune", TARGET, "--budget", "2", "--strategy", "tpe", "--only",
                "pass:algsimp,knob:chunks", "--max-rounds", "4", "--db", str(tmp_path / "t.db"),
                "--json", "--plot", str(plot))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["strategy"] == "tpe" and len(data["trials"]) == 2
    assert "A/A control" in proc.stderr and "(2/2)" in proc.stderr
    # A timed candidate is faster, slower or same by its interval, never "passed guard".
    trials = [line for line in proc.stderr.splitlines() if line.startswith("tune: ") and
              re.search(r"\(\d/2\)$", line)]
    assert len(trials) == 2 and "passed guard" not in proc.stderr
    for line, trial in zip(trials, data["trials"]):
        word = line.split()[1]
        if trial["status"] == "ok":
            low, high = trial["interval"]
            assert word == ("faster" if low > 1 else "slower" if high < 1 else "same"), line
    # The verdict shows with --json too, on stderr: stdout stayed JSON (parsed above).
    assert re.search(r"^(accepted: |no verified speedup: )", proc.stderr, re.M), proc.stderr
    control = data["control"]
    assert control["speedup_of_medians"] == pytest.approx(control["baseline_s"] /
                                                          control["candidate_s"])
    assert plot.read_text().lstrip().startswith("<?xml")


def test_model_strategy_learns_this_program_differs_from_the_history():
    # Elsewhere disabling fusion was 3x faster; here it is 2x slower. The baseline row (speedup
    # 1 by definition) lets the model rank fusion-off candidates below the default here.
    space = SearchSpace.for_program(only=["pass:fusion", "pass:cse", "pass:algsimp",
                                          "xla_cpu_use_xnnpack", "xla_cpu_prefer_vector_width"])
    other = ModelStrategy(space, 1, {"size": 100.0}, [], "other")
    history = []
    for candidate in space.neighbours(space.default()) + [
            {**space.default(), "pass:fusion": True, "pass:cse": True}]:
        history.append(("other", other.row_features(candidate),
                        3.0 if candidate["pass:fusion"] else 1.0))
    chooser = ModelStrategy(space, 0, {"size": 1.0}, history, "here")
    for candidate in [{**space.default(), "pass:fusion": True},
                      {**space.default(), "pass:fusion": True, "pass:cse": True},
                      {**space.default(), "pass:fusion": True, "pass:algsimp": True},
                      {**space.default(), "pass:fusion": True, "xla_cpu_use_xnnpack": "false"}]:
        chooser.seen.add(space.key(candidate))
        chooser.observe(candidate, 0.5)
    default, fusion_off = space.default(), {**space.default(), "pass:fusion": True}
    here = chooser.model.score([chooser.row_features(default), chooser.row_features(fusion_off)])
    there = chooser.model.score([other.row_features(default), other.row_features(fusion_off)])
    assert here[0] > here[1] and there[1] > there[0]
