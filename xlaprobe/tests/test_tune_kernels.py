"""The kernel corpus and the kernel-level cost model: extraction of a program's kernels (their
features, and that each runs alone and computes what it computed inside the program), the
corpus store, the composition to programs and the screening search, on known answers."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from xlaprobe import jaxcompat
from xlaprobe.errors import InvalidArgument
from xlaprobe.program import Program, Provenance
from xlaprobe.store import Store
from xlaprobe.tune import corpus as corpus_mod
from xlaprobe.tune.kernelmodel import (Composition, KernelModel, ProgramModel, RankModel,
                                       config_features, evaluate, held_out, mean_defined,
                                       program_row)
from xlaprobe.tune.kernels import kernels, random_args, with_module
from xlaprobe.tune.screen import ScreenStrategy, fit_residuals
from xlaprobe.tune.space import SearchSpace

X = np.linspace(-1, 1, 128, dtype=np.float32).reshape(8, 16)
W = np.linspace(0.5, -0.5, 64, dtype=np.float32).reshape(16, 4)


def _step(x, w):
    return jnp.tanh(x @ w) * 2.0


def _text(fn=_step, args=(X, W), options=None):
    return jax.jit(fn).lower(*args).compile(compiler_options=options or {}).as_text()


# ---------------------------------------------------------------------------------- extraction

def test_kernels_of_a_dot_then_tanh_have_their_flops_and_kinds():
    found = {k.opcode if k.opcode != "fusion" else k.kind: k for k in kernels(_text())}
    dot = next(k for k in found.values() if k.features.get("op:dot"))
    # 8x4 outputs, each a 16-term dot product: 2 * 8 * 4 * 16 flops.
    assert dot.features["log_dot_flops"] == pytest.approx(math.log1p(2 * 8 * 4 * 16))
    assert dot.features["log_in_bytes"] == pytest.approx(math.log1p(4 * (8 * 16 + 16 * 4)))
    assert dot.features["log_out_bytes"] == pytest.approx(math.log1p(4 * 8 * 4))
    eltwise = next(k for k in found.values() if k.features.get("op:tanh"))
    assert eltwise.features["kind:kLoop"] == 1.0
    assert eltwise.features["log_transcendentals"] == pytest.approx(math.log1p(32))
    assert eltwise.features["log_dot_flops"] == 0.0


def test_each_kernel_runs_alone_and_computes_what_it_did_in_the_program():
    text = _text()
    dot, eltwise = kernels(text)
    cut = with_module(text, dot)
    assert [s.split("{")[0] for s in cut.params] == ["f32[8,16]", "f32[16,4]"]
    out = jaxcompat.compile_hlo_text(cut.module, {}).execute([jax.device_put(X),
                                                              jax.device_put(W)])
    np.testing.assert_allclose(np.asarray(out[0]), X @ W, rtol=1e-5, atol=1e-6)
    cut = with_module(text, eltwise)
    (arg,) = random_args(cut.params, np.random.default_rng(0))
    out = jaxcompat.compile_hlo_text(cut.module, {}).execute([jax.device_put(arg)])
    np.testing.assert_allclose(np.asarray(out[0]), np.tanh(arg) * 2.0, rtol=1e-5, atol=1e-6)


def test_a_non_fusion_kernel_is_cut_with_a_parameter_per_operand():
    # Without the fusion pass the dot stays a top-level instruction of its own.
    text = _text(options={"xla_disable_hlo_passes": "fusion",
                          "xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_INVALID"})
    plain = [k for k in kernels(text) if k.opcode == "dot"]
    assert plain, "no top-level dot with fusion off"
    cut = with_module(text, plain[0])
    out = jaxcompat.compile_hlo_text(cut.module, {}).execute([jax.device_put(X),
                                                              jax.device_put(W)])
    np.testing.assert_allclose(np.asarray(out[0]), X @ W, rtol=1e-5, atol=1e-6)


def test_profile_times_every_kernel_and_the_store_keeps_the_entry(pool, tmp_path):
    program = Program.from_function(_step, (X, W), Provenance("user", "kernel-corpus"))
    outcome = pool.call(program, "xlaprobe.tune.corpus:profile_in_worker",
                        {"options": {}, "rounds": 2, "sample_s": 0.0005},
                        group=corpus_mod.GROUP)
    assert outcome.ran, outcome.error
    profile = outcome.value
    assert len(profile["kernels"]) == 2
    assert all(k["time_s"] > 0 and not k["error"] for k in profile["kernels"])
    assert profile["floor_s"] > 0 and profile["program_s"] > 0 and len(profile["load"]) == 2
    with Store(tmp_path / "x.db") as store:
        store.record_corpus_entry(program.fingerprint, "k", "zoo", "", {"pass:cse": False},
                                  profile)
        store.record_corpus_entry(program.fingerprint, "k", "zoo", "", {"pass:cse": False},
                                  profile)  # the same entry again replaces it
        (entry,) = store.corpus()
        assert store.corpus_configs(program.fingerprint) == {""}
        assert store.count("kernels") == 2
    assert [k["features"] for k in entry["kernels"]] == [k["features"] for k in
                                                         profile["kernels"]]
    assert entry["data"]["floor_s"] == profile["floor_s"] and "text" not in entry["data"]


def test_per_kernel_limit_and_entry_budget_leave_kernels_untimed(pool):
    program = Program.from_function(_step, (X, W), Provenance("user", "kernel-corpus"))
    for limits, why in (({"kernel_limit_s": 1e-9}, "per-kernel limit"),
                        ({"budget_s": 0.0}, "kernel budget")):
        outcome = pool.call(program, "xlaprobe.tune.corpus:profile_in_worker",
                            {"options": {}, "rounds": 2, "sample_s": 0.0005, **limits},
                            group=corpus_mod.GROUP)
        assert outcome.ran, outcome.error
        kernels_ = outcome.value["kernels"]
        assert len(kernels_) == 2 and all(k["time_s"] is None and why in k["error"]
                                          for k in kernels_)
        # The entry says why (stored in its data, printed by tune-corpus's progress line).
        ((reason, count),) = corpus_mod.untimed_reasons(kernels_).items()
        assert why in reason and count == 2
        assert outcome.value["program_s"] > 0  # the entry itself still has its time


def test_corpus_programs_resolve_sources_and_reject_bad_names():
    programs = corpus_mod.corpus_programs(["fuzz:2-3", "mlp_mixer"])
    assert [(p.name, p.source) for p in programs] == [("fuzz:2", "fuzz"), ("fuzz:3", "fuzz"),
                                                      ("mlp_mixer", "zoo")]
    with pytest.raises(InvalidArgument, match="unknown corpus program"):
        corpus_mod.corpus_programs(["no_such_model"])
    with pytest.raises(InvalidArgument, match="malformed fuzz"):
        corpus_mod.corpus_programs(["fuzz:x"])
    space = SearchSpace.for_program()
    configs = corpus_mod.configurations(space, 5, np.random.default_rng(0))
    assert configs[0] == space.default() and len({space.key(c) for c in configs}) == 5


# ------------------------------------------------------------------------------- the model

def test_composition_recovers_known_overheads():
    rng = np.random.default_rng(0)
    floor, a, b, c = 5e-6, 2e-5, 0.8, 3e-6
    kernel_s = [list(floor + rng.uniform(1e-6, 1e-3, rng.integers(1, 30))) for _ in range(40)]
    program_s = [a + b * sum(t - floor for t in k) + c * len(k) for k in kernel_s]
    fitted = Composition.fit(kernel_s, [floor] * 40, program_s)
    assert (fitted.a, fitted.b, fitted.c) == pytest.approx((a, b, c), rel=1e-6)
    assert fitted.program_s(kernel_s[0]) == pytest.approx(program_s[0], rel=1e-9)


def _synthetic_corpus(programs=6, configs=5, seed=0):
    """Entries whose kernel time is exactly 1e-6 * 2**size, slowed 2x by 'pass:cse', and whose
    program time is the sum: a model that learns the rule ranks held-out programs right."""
    rng = np.random.default_rng(seed)
    entries = []
    for p in range(programs):
        for c in range(configs):
            cse = bool(c % 2)
            sizes = rng.integers(0, 8, rng.integers(3, 12))
            times = [1e-6 * 2.0 ** s * (2.0 if cse else 1.0) for s in sizes]
            kernels_ = [{"name": f"k{i}", "opcode": "fusion", "kind": "kLoop", "key": str(i),
                         "time_s": t, "features": {"size": float(s), "kind:kLoop": 1.0}}
                        for i, (s, t) in enumerate(zip(sizes, times))]
            entries.append({"program_id": f"p{p}", "name": f"p{p}",
                            "source": "zoo" if p % 2 else "fuzz", "config": str(c),
                            "candidate": {"pass:cse": cse}, "program_s": sum(times),
                            "data": {"floor_s": 0.0, "cost": {"flops": float(len(sizes))}},
                            "kernels": kernels_})
    return entries


def test_program_model_ranks_held_out_programs_by_the_learned_rule():
    entries = _synthetic_corpus()
    assert config_features({"pass:cse": True, "knob:x": 3, "pass:fusion": False}) == \
        {"set:pass:cse=True": 1.0}
    rows = held_out(entries, "program", make=lambda seed: ProgramModel(seed, config=True))
    assert len(rows) == 6
    assert min(r["model_tau"] for r in rows) > 0.6
    assert max(r["program_error"] for r in rows) < 0.35
    by_source = held_out(entries, "source", make=lambda seed: ProgramModel(seed, config=True))
    assert {r["group"] for r in by_source} == {"zoo", "fuzz"}
    model = ProgramModel().fit(entries[:20])
    assert evaluate(model, entries[20:])["programs"] == 2
    assert model.predict_text(_text(), {"pass:cse": True}) > 0  # what the kernel strategy calls
    with pytest.raises(InvalidArgument, match="at least"):
        KernelModel().fit([{"size": 1.0}], [1e-6])
    with pytest.raises(InvalidArgument, match="'program' or 'source'"):
        held_out(entries, "config")


def _same_kernels(entries):
    """The corpus with every configuration of a program given its first one's kernel sizes:
    then only the configuration (cse doubles every kernel) tells its configurations apart."""
    first = {}
    out = []
    for e in entries:
        sizes = first.setdefault(e["program_id"], [k["features"]["size"] for k in e["kernels"]])
        factor = 2.0 if e["candidate"]["pass:cse"] else 1.0
        kernels_ = [{**e["kernels"][0], "key": str(i), "time_s": 1e-6 * 2.0 ** s * factor,
                     "features": {"size": s, "kind:kLoop": 1.0}} for i, s in enumerate(sizes)]
        out.append({**e, "kernels": kernels_, "program_s": sum(k["time_s"] for k in kernels_)})
    return out


def test_ablations_and_the_rank_model_on_the_known_rule():
    entries = _same_kernels(_synthetic_corpus())
    # without the configuration's indicators the kernel model sees identical kernels in every
    # configuration of a program and cannot rank them; with them, or measured, it can
    blind = held_out(entries, "program")  # the default: HLO features only
    measured = held_out(entries, "program", make=lambda seed: ProgramModel(seed, measured=True))
    plain = held_out(entries, "program",
                     make=lambda seed: ProgramModel(seed, overheads=False, config=True))
    assert all(math.isnan(r["model_tau"]) or abs(r["model_tau"]) < 0.01 for r in blind)
    assert min(r["model_tau"] for r in measured) > 0.6  # program time is the sum: exact order
    assert min(r["model_tau"] for r in plain) > 0.6
    assert min(r["model_tau"] for r in held_out(
        entries, "program", make=lambda seed: ProgramModel(seed, config=True))) > 0.6
    fitted = Composition.fit([[1e-6, 2e-6]] * 3, [5e-7] * 3, [3e-6] * 3, overheads=False)
    assert fitted.c == 0 and fitted.floor == 0
    ranked = held_out(entries, "program", make=RankModel)
    assert len(ranked) == 6 and min(r["model_tau"] for r in ranked) > 0.3
    assert all(math.isnan(r["kernel_error"]) and math.isnan(r["program_error"])
               for r in ranked)  # it predicts an order, not seconds
    row = program_row([{"features": {"a": 1.0}}, {"features": {"a": 2.0, "b": 1.0}}],
                      {"pass:cse": True})
    assert row == {"kernels": 2.0, "sum:a": 3.0, "sum:b": 1.0, "set:pass:cse=True": 1.0}
    with pytest.raises(InvalidArgument, match="two or more"):
        RankModel().fit(entries[:1])



class _Fixed:
    """A model that predicts `predict(entry)`: a known answer for `evaluate`."""

    def __init__(self, seconds):
        self.seconds = seconds

    def predict(self, kernels_, candidate):
        return self.seconds(kernels_, candidate)


def test_a_group_with_nothing_to_rank_is_nan_without_a_warning():
    # CI saw "RuntimeWarning: Mean of empty slice" from the ablations above: a group whose
    # every tau is undefined (tied predictions, or no program with two configurations)
    import warnings

    entries = _same_kernels(_synthetic_corpus())
    one_each = list({e["program_id"]: e for e in entries}.values())  # one configuration each
    exact = _Fixed(lambda ks, c: sum(k["time_s"] for k in ks))  # the measured program time
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        alone = evaluate(exact, one_each)
        tied = evaluate(_Fixed(lambda ks, c: 1e-3), entries)
        right = evaluate(exact, entries)
        assert math.isnan(mean_defined([])) and math.isnan(mean_defined([math.nan]))
    assert alone["programs"] == 0 and math.isnan(alone["model_tau"])  # nothing to rank
    assert alone["program_error"] == 0.0
    # six programs with configurations of different times; a constant model ties them all
    assert tied["programs"] == 6 and math.isnan(tied["model_tau"])
    assert right["programs"] == 6 and right["model_tau"] == 1.0
    assert mean_defined([0.5, math.nan, 1.0]) == 0.75


# ------------------------------------------------------------------------------ screening

def _space():
    return SearchSpace.for_program(only=["pass:algsimp", "pass:cse", "pass:fusion",
                                         "xla_cpu_use_xnnpack"])


def test_screening_measures_the_predicted_fastest_first():
    space = _space()
    calls = []

    def predict(candidates):  # pass:cse off predicted 4x faster, fusion off 2x slower
        calls.append(len(candidates))
        return np.asarray([1.0 / (4.0 if c["pass:cse"] else 1.0) * (2.0 if c["pass:fusion"]
                                                                     else 1.0)
                           for c in candidates])

    strategy = ScreenStrategy(space, 0, predict, batch=6)
    first = strategy.propose()
    assert first["pass:cse"] and not first["pass:fusion"]
    assert max(calls[1:]) <= 6  # a batch screened, not the space


def test_screening_refits_when_the_model_is_wrong_here():
    space = _space()
    predict = lambda cs: np.asarray([0.25 if c["pass:cse"] else 1.0 for c in cs])  # noqa: E731
    strategy = ScreenStrategy(space, 0, predict, batch=8)
    for _ in range(3):  # the model says cse off is 4x faster; measured, it is 2x slower
        candidate = strategy.propose()
        strategy.observe(candidate, 0.5 if candidate["pass:cse"] else 1.0)
    assert strategy.weights["pass:cse=True"] < -1.0
    # Every unmeasured candidate with cse off now ranks above every one with it on.
    scores = {key: strategy.score(*item) for key, item in strategy.screened.items()}
    on = [v for k, v in scores.items() if "pass:cse=True" in k]
    off = [v for k, v in scores.items() if "pass:cse=True" not in k]
    assert on and off and max(on) < min(off)
    assert not strategy.propose()["pass:cse"]


def test_residual_ridge_known_answer():
    space = _space()
    on = space.validate({"pass:cse": True})
    weights = fit_residuals(space, [(on, 1.0)] * 3, ridge=1.0)
    assert weights == {"pass:cse=True": pytest.approx(3.0 / 4.0)}  # 3 * 1 / (3 + 1)
    assert fit_residuals(space, []) == {}


def test_untimed_reasons_count_each_reason_most_frequent_first():
    kernels_ = [{"time_s": None, "error": "over the per-kernel limit (1 s)"},
                {"time_s": 0.5, "error": ""}, {"time_s": None, "error": ""},
                {"time_s": None, "error": "over the per-kernel limit (1 s)"}]
    assert list(corpus_mod.untimed_reasons(kernels_).items()) == [
        ("over the per-kernel limit (1 s)", 2), ("past --max-kernels", 1)]
