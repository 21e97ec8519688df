"""Localization (tiers 1-3) against known answers: planted faults whose `MutationSite` names the
miscompiled equation and fusion, a real XLA:CPU bug case, and the O(log n) cycle budget."""

import json
import math
import sys

import jax.numpy as jnp
import numpy as np
import pytest

from tests.cases import ROOT as CASES_DIR, load_present
from xlaprobe.configs import reference
from xlaprobe.errors import InvalidArgument, NotReproducible
from xlaprobe.cli.localize import localize_command
from xlaprobe.localization import cycle_bound, localize, make_pool
from xlaprobe.localization.bisect import Trial, bisect_cuts, bisect_segments, latest_failing_start
from xlaprobe.localization.fusion import equation_kernels, hlo_config, optimized_hlo
from xlaprobe.localization.segments import Segmenter, cone_of_influence, recording_program
from xlaprobe.oracle import VerdictKind
from xlaprobe.store import Store
from xlaprobe.program import Program, Provenance
from xlaprobe.sources.corpus import corpus_program
from xlaprobe.sources.models import build_program
from xlaprobe.sources.user import load_case


@pytest.fixture(scope="module")
def lpool():
    with make_pool(size=1, timeout_s=300) as pool:
        yield pool


def _ground_truth(program, spec, pool):
    [site] = pool.run(program, spec).mutations
    return site


# ------------------------------------------------------------------------------ pure pieces


def test_cone_of_influence_keeps_only_what_the_outputs_read():
    program = Program.from_function(lambda x, y: (jnp.sin(x) * 2.0, jnp.cos(y) + 1.0),
                                    (np.float32(1), np.float32(2)), Provenance("user", "two"))
    assert cone_of_influence(program.jaxpr.jaxpr, [0]) == [0, 1]
    assert cone_of_influence(program.jaxpr.jaxpr, [1]) == [2, 3]


def test_segment_program_reads_reference_values_and_returns_live_values():
    program = corpus_program("fused_arithmetic")  # sub, abs, add, div, exp, mul
    jaxpr = program.jaxpr.jaxpr
    cone = list(range(len(jaxpr.eqns)))
    record, recorded = recording_program(program, cone)
    values = dict(zip(recorded, reference.evaluate(record.jaxpr, record.inputs)))
    segmenter = Segmenter(program, cone, [0], values)
    middle = segmenter.segment(1, 4)  # abs, add, div: reads x - y (eqn 0) and y
    assert middle.equations == (1, 2, 3)
    assert middle.outputs == (3,)  # only the div is read later (by the mul)
    x, y = program.inputs  # free variables in order of first use: y (by abs), then x - y (by div)
    np.testing.assert_array_equal(middle.program.inputs[0], y)  # a program input, exact
    np.testing.assert_allclose(middle.program.inputs[1], x - y, rtol=1e-6)  # eqn 0's value
    [out] = reference.evaluate(middle.program.jaxpr, middle.program.inputs)
    np.testing.assert_allclose(out, values[jaxpr.eqns[3].outvars[0]], rtol=1e-6)
    exposed = segmenter.segment(1, 4, expose_all=True)
    assert exposed.outputs == (1, 2, 3)
    with pytest.raises(InvalidArgument, match="outside the cone"):
        segmenter.segment(3, 3)


def test_hlo_config_accepts_xla_and_mutant_configs():
    assert str(hlo_config("xla:fastmath")) == "xla:fastmath"
    assert str(hlo_config("xla[xla_cpu_enable_fast_math=true]")) == \
        "xla[xla_cpu_enable_fast_math=true]"
    assert hlo_config("mutant:reduce-wrong-init").isolation_group == "mutant:reduce-wrong-init"
    with pytest.raises(InvalidArgument, match="xla, mutant and spmd"):
        hlo_config("eager")
    with pytest.raises(InvalidArgument, match="xla, mutant and spmd"):
        optimized_hlo(None, None, "eager")
    # Another release compiles elsewhere: said as such, not as "no XLA compile".
    with pytest.raises(InvalidArgument, match="another release's environment"):
        hlo_config("jaxlib==0.10.2")
    from xlaprobe.configs.registry import Configuration
    from xlaprobe.localization.passes import blame_pass
    blame = blame_pass(None, Configuration.parse("jaxlib==0.10.2"), None, None)
    assert blame.compiler_pass == "" and "another release's environment" in blame.evidence


def test_equation_kernels_names_the_fusion_of_an_equation():
    from xlaprobe.configs.registry import Configuration
    from xlaprobe.configs.xla import compile_program
    program = corpus_program("fused_arithmetic")
    text = compile_program(Configuration("xla"), program.jaxpr, program.inputs).as_text()
    kernels = equation_kernels(text, [0, 5])
    assert kernels[0].instructions and kernels[0].fusions  # the subtract, fused
    assert kernels[0].fusions[0] in kernels[5].fusions  # one loop fusion computes it all


class _Window:
    """A stand-in for `Searcher` (and a `Segmenter` of 20 cone positions) whose fault needs
    positions 11..13: a segment fails when it holds [11, 14), a cut when it exposes position 11.
    It records every probe, in order: each is one compile+run cycle."""

    size = 20
    kind = VerdictKind.MISMATCH

    def __init__(self):
        self.calls = []

    def segment_trial(self, segmenter, start, stop, tier):
        self.calls.append((start, stop, tier))
        return Trial(start <= 11 and stop >= 14, VerdictKind.MISMATCH)

    def run_cut(self, segmenter, cut, recording, tier):
        self.calls.append((cut, tier))
        return Trial(cut >= 12, VerdictKind.MISMATCH)


def test_a_skipped_tier_4_says_why_in_one_line():
    """Tier 4 runs only on a numeric mismatch of an XLA compile whose optimized HLO tier 3 got;
    every other case names its reason, and `tiers` prints it (it used to print nothing)."""
    from xlaprobe.configs.registry import Configuration
    from xlaprobe.localization.api import Localization
    from xlaprobe.localization.bisect import Searcher
    from xlaprobe.localization.equation import Equation
    from xlaprobe.localization.inside import Inside
    from xlaprobe.localization.kernels import Placement
    from xlaprobe.localization.op import skipped
    from xlaprobe.localization.outputs import Outputs
    program = corpus_program("matmul")

    def why(spec, kind, hlo=None, labels=""):
        search = Searcher(Configuration.parse(spec), None, kind, None, None)
        if hlo is not None:
            search.hlo_cache[program.fingerprint] = hlo
        return skipped(search, program, labels)

    assert why("xla", VerdictKind.MISMATCH, "HloModule m") == ""  # tier 4 runs
    assert why("eager", VerdictKind.MISMATCH, "HloModule m") == (
        "skipped: 'eager' is not an XLA compile of the whole program (no fused kernels to split)")
    assert why("jaxlib==0.11.2", VerdictKind.MISMATCH) == (
        "skipped: 'jaxlib==0.11.2' runs in another release's environment: no optimized HLO of "
        "it to split (tiers 3-5 work on this jaxlib's xla and mutant configurations)")
    assert why("xla", VerdictKind.CRASH, "HloModule m").startswith(
        "skipped: a crash finding has no wrong value to trace to an instruction")
    assert why("xla", VerdictKind.MISMATCH).startswith("skipped: no optimized HLO of the whole "
                                                         "program")
    assert why("xla", VerdictKind.FREEDOM, "HloModule m", "fma") == (
        "skipped: the fused multiply-add (a legal liberty, freedom:fma) is no wrong value to "
        "trace to an instruction (tier 4 needs a numeric mismatch)")
    loc = Localization("p", "f", "eager", "mismatch", 3, Outputs(("out",), (0,), (0, 1, 2)),
                       Equation("cuts", 1, "mul"), Placement(),
                       Inside.nothing(why("eager", VerdictKind.MISMATCH)), None, 4, 1.0, False)
    assert "tier 4 op:       skipped: 'eager' is not an XLA compile of the whole program (no " \
           "fused kernels to split)" in loc.tiers()


def test_bisections_keep_their_probe_sequence():
    # Each sequence is the one of the hand-typed loops before `xlaprobe.search` (commit 8e3115d):
    # the localization benchmark's cycle counts rest on it.
    search = _Window()
    assert bisect_segments(search, search, "suffix") == (11, 14)
    assert search.calls == [(10, 20, "suffix"), (15, 20, "suffix"), (12, 20, "suffix"),
                            (11, 20, "suffix"), (11, 12, "prefix"), (11, 13, "prefix"),
                            (11, 15, "prefix"), (11, 14, "prefix")]
    search = _Window()
    assert bisect_segments(search, search, "prefix") == (11, 14)
    assert search.calls == [(0, 10, "prefix"), (0, 15, "prefix"), (0, 12, "prefix"),
                            (0, 13, "prefix"), (0, 14, "prefix"), (13, 14, "suffix"),
                            (12, 14, "suffix"), (10, 14, "suffix"), (11, 14, "suffix")]
    search = _Window()
    cut, trial = bisect_cuts(search, search, None)
    assert (cut, trial.failed) == (12, True)
    assert search.calls == [(10, "cut"), (15, "cut"), (12, "cut"), (11, "cut")]
    search = _Window()
    assert latest_failing_start(search, search, 3, 14) == 11
    assert search.calls == [(3, 14, "alone"), (8, 14, "alone"), (10, 14, "alone"),
                            (11, 14, "alone"), (12, 14, "alone")]


# ------------------------------------------------------------------------------ planted faults

#: (corpus program, mutant): each mutant fires once there; the site is the known answer.
CORPUS_CASES = [
    ("fused_arithmetic", "swap-subtract-fused"),
    ("row_sums", "reduce-wrong-init"),       # needs context: the mul fused into the reduce
    ("dynamic_window", "dynamic-slice-off-by-one"),
    ("scaled_tanh", "fused-transcendental-neighbour"),
    ("transpose_add", "transpose-as-reshape"),
]


@pytest.mark.parametrize("name,mutant", CORPUS_CASES)
def test_corpus_mutant_is_localized_exactly(name, mutant, lpool):
    program = corpus_program(name)
    spec = f"mutant:{mutant}"
    site = _ground_truth(program, spec, lpool)
    loc = localize(program, spec, lpool)
    assert loc.equation.index == site.equation, loc
    assert loc.equation.exact and not loc.flaky, loc.notes
    assert loc.equation.index in loc.equation.segment
    assert loc.equation.primitive == program.jaxpr.jaxpr.eqns[site.equation].primitive.name
    if site.fusion:
        assert site.fusion in loc.kernels.fusions, (site, loc.kernels.fusions)
    assert loc.cycles <= cycle_bound(loc.equations)
    # Tier 4: the mutated HLO instruction inside the fusion, with its jaxpr equation. A transpose
    # lowered as a reshape feeds a copy (the equation's value, the anchor): the trusted twin's
    # value of the transpose itself tells the two apart.
    assert loc.op.kernel == site.fusion and loc.op.equation == site.equation, loc.op.evidence
    assert loc.op.instruction == site.instruction, loc.op.evidence
    # Tier 5 on a planted fault: its own hook pass (known; xla_disable_hlo_passes cannot reach it).
    assert loc.compiler_pass == f"xlaprobe-mutant-{mutant}" and loc.blame.cycles == 0


#: Zoo model cases whose fault fires deep in the model (the site is near its end), with the tier-2
#: method: cuts of the whole compile (the default), and segments compiled alone.
ZOO_CASES = [("mlp_mixer", "swap-subtract-fused", "auto"),
             ("mlp_mixer", "transpose-as-reshape", "segments")]


@pytest.mark.parametrize("model,mutant,method", ZOO_CASES)
def test_zoo_mutant_is_localized_exactly(model, mutant, method, lpool):
    program = build_program(model)
    spec = f"mutant:{mutant}"
    site = _ground_truth(program, spec, lpool)
    loc = localize(program, spec, lpool, method=method)
    assert loc.equation.method == ("cuts" if method == "auto" else method)
    assert loc.equation.index == site.equation and loc.equation.segment == (site.equation,), loc
    assert site.fusion in loc.kernels.fusions
    # Tier 4 names the mutated instruction exactly (the trusted twin gives the right values of
    # the instructions between anchors).
    assert loc.op.instruction == site.instruction, loc.op.evidence
    assert loc.cycles <= cycle_bound(loc.equations)
    data = json.loads(json.dumps(loc.to_json()))
    assert data["format"] == 2 and data["equation"]["index"] == site.equation
    assert data["op"]["instruction"] == site.instruction and data["steps"][0]["tier"] == "outputs"


def test_a_segment_that_fails_only_when_compiled_alone_is_overruled(lpool):
    # ConvNet's prefix ending at equation 158, compiled alone, goes wrong (the planted fault
    # strikes the first dot of that smaller module), but in the whole program's compile the
    # dot of equation 93 (ynn_fusion.9) is the one rounded to bfloat16. Tier 4 finds every
    # kernel of tier 2's segment right in the whole compile, screens the module's other kernels
    # against the trusted compile's and names the real one.
    program = build_program("convnet")
    spec = "mutant:dot-bf16-accumulate"
    site = _ground_truth(program, spec, lpool)
    loc = localize(program, spec, lpool, passes=False)
    assert site.equation not in loc.equation.segment  # the situation this test is about
    assert loc.equation.index == site.equation and site.fusion in loc.kernels.fusions, loc
    assert (loc.op.kernel, loc.op.instruction) == (site.fusion, site.instruction), loc.op.evidence
    assert "whole module" in loc.equation.evidence


def _scan_program():
    import jax

    def step(carry, x):
        carry = carry * 0.9 - jnp.tanh(x)
        return carry, jnp.exp(carry - x)

    def fn(c0, xs):
        return jax.lax.scan(step, c0, xs)

    rng = np.random.default_rng(3)
    args = (rng.standard_normal(8).astype(np.float32),
            rng.standard_normal((5, 8)).astype(np.float32))
    return Program.from_function(fn, args, Provenance("user", "scan"))


def test_fault_in_a_loop_body_is_named_on_the_first_trip(lpool):
    # The subtract sits in a fusion inside the scan's while body: no equation's value is there
    # to compare with, so tier 4 runs the body's kernel on the loop's first trip against its
    # twin in the trusted compile.
    program = _scan_program()
    spec = "mutant:swap-subtract-fused"
    site = _ground_truth(program, spec, lpool)
    assert "while/body" in site.op_name
    loc = localize(program, spec, lpool, passes=False)
    assert loc.equation.primitive == "scan" and site.fusion in loc.kernels.fusions
    assert loc.op.kernel == site.fusion and loc.op.instruction == site.instruction, loc.op.evidence
    assert "twin" in loc.op.evidence


def test_a_mutants_hlo_comes_from_its_own_workers(lpool):
    # The optimized HLO comes back through worker calls, not a configuration kind; a mutant's
    # is compiled in the mutant's isolation group, so its pass never reaches other workers.
    from xlaprobe.configs import registry
    program = _scan_program()
    spec = "mutant:swap-subtract-fused"
    site = _ground_truth(program, spec, lpool)
    faulty, plain = optimized_hlo(lpool, program, spec), optimized_hlo(lpool, program, "xla")
    assert faulty.ran and plain.ran and site.instruction in faulty.value
    assert faulty.value != plain.value
    assert lpool.worker_pids()[spec] and lpool.worker_pids()["default"]
    assert not {"hlo", "passes"} & (set(registry.kinds()) | set(registry._KINDS))


def test_segments_method_on_a_fault_that_needs_context(lpool):
    # The reduce alone compiles differently (its init is no fused constant): the segment is
    # {mul, reduce_sum}, and with both values exposed the first wrong one is the sum.
    program = corpus_program("row_sums")
    loc = localize(program, "mutant:reduce-wrong-init", lpool, method="segments")
    assert loc.equation.segment == (1, 2) and loc.equation.index == 2 and loc.equation.exact
    assert any(step.tier == "expose" for step in loc.steps)


# ------------------------------------------------------------------------------ a real bug


def test_real_case_int8_square_select_abs(lpool):
    # XLA assumes the int8 square b * b cannot wrap, folds p < 0 to false and drops the select:
    # the comparison is what it computes wrongly. The smallest failing segment is {mul, lt}
    # (the lt alone, fed the wrapped square, is right: it needs the mul to be folded with), and
    # with both values exposed the first wrong one is the lt (the square itself is right).
    case = load_present("int8_square_select_abs")
    assert case.kind == "select"
    loc = localize(case.program, case.faulty_config, lpool)
    jaxpr = case.program.jaxpr.jaxpr
    assert [jaxpr.eqns[k].primitive.name for k in loc.equation.segment] == ["mul", "lt"]
    assert loc.equation.primitive == "lt" and loc.equation.exact
    # lt has no kernel of its own in the faulty compile (folded away): the square's stands in.
    assert loc.kernels.fusions and not loc.kernels.instructions
    assert any("folded" in note for note in loc.notes)
    # Tier 5: the algebraic simplifier does the folding.
    assert loc.compiler_pass == "algsimp" and loc.blame.disabled == ("algsimp",)


#: Real XLA:CPU bug cases -> the primitive localization names (the case's KIND, as jax spells it),
#: and the HLO pass whose disabling alone fixes the fault (tier 5; "none": no pass does).
REAL_CASES = [
    ("cbrt_subnormal.py", "cbrt", "none"),  # wrong op by op too: the emitter, no pass
    ("conv_negative_padding.py", "conv_general_dilated", "none"),
    # its reshape shows it, folded in; the in-place fused update reads overwritten rows
    ("dus_shifted_self_update.py", "dynamic_update_slice", "fusion"),
    # the bounds check in the uint8 index dtype is written by the scatter expander
    ("scatter_narrow_index_dtype.py", "scatter-add", "scatter_expander"),
    ("while_loop_skipped.py", "while", "simplify-while-loops"),  # the loop simplifier, as filed
    # Tier 4 (test_fastmath_masked_max_inside_the_kernel) shows the max is computed right: the
    # fast-math rewrite of the mask arithmetic in the subtract's kernel is wrong, so KIND
    # reduce_max is not what XLA computes wrongly in jaxlib 0.10.2.
    pytest.param("fastmath_masked_max.py", "reduce_max", "fusion", marks=pytest.mark.xfail(
        strict=True, reason="names the subtract; its kernel, not the max's, computes wrongly")),
]


@pytest.mark.parametrize("name,primitive,compiler_pass", REAL_CASES)
def test_real_cases_name_the_op_of_their_kind(name, primitive, compiler_pass, lpool):
    case = load_present(name)
    loc = localize(case.program, case.faulty_config, lpool)
    assert loc.compiler_pass == compiler_pass, (loc.blame.disabled, loc.blame.evidence)
    assert set(loc.blame.disabled) <= set(loc.blame.candidates)
    assert loc.equation.primitive == primitive, loc
    assert loc.equation.index in loc.equation.segment
    if loc.op.instruction and loc.op.equation not in (-1, loc.equation.index):
        # Tier 4 blames another equation's instruction inside the kernel: the output says so.
        assert any(f"equation {loc.op.equation}'s instruction, fused into the kernel of equation "
                   f"{loc.equation.index}" in line for line in loc.tiers()), loc.tiers()


def test_fastmath_masked_max_inside_the_kernel(lpool):
    # The max has a kernel of its own (add_reduce_fusion) that is right; the subtract's kernel,
    # compiled alone under fast math and fed the right max, is wrong; fed the right 1 - mask
    # too, it is right: the fast-math rewrite starts at that subtract (eqn 0), with the mul and
    # add after it as context.
    case = load_case(str(CASES_DIR / "fastmath_masked_max.py"))
    loc = localize(case.program, case.faulty_config, lpool, passes=False)
    assert loc.op.kernel == "broadcast_subtract_fusion"
    assert loc.op.equation == 0 and loc.op.primitive == "sub" and loc.op.opcode == "subtract"
    # The trusted compile (1), the kernel screen (2), both kernels' operands (2), the twin (1)
    # and the suffix search.
    assert loc.op.cycles <= 10


# ------------------------------------------------------------------------------ cost


def _chain(n: int, subtract_at: int):
    def fn(x, y):
        for k in range(n // 2):
            x = x - y if k == subtract_at else (x + y) * 0.999
        return x
    return fn


def test_cycles_grow_like_log_n(lpool):
    n = 600
    rng = np.random.default_rng(0)
    args = (rng.standard_normal(64).astype(np.float32), rng.standard_normal(64).astype(np.float32))
    program = Program.from_function(_chain(n, 111), args, Provenance("user", "chain"))
    spec = "mutant:swap-subtract-fused"
    site = _ground_truth(program, spec, lpool)
    loc = localize(program, spec, lpool)
    assert loc.equations == n - 1  # the subtract replaces an add and a mul
    assert loc.equation.index == site.equation == 222
    assert loc.cycles <= 2 * math.log2(loc.equations) + 10, loc.steps


def test_nothing_to_localize_is_not_reproducible(lpool):
    with pytest.raises(NotReproducible, match="no finding"):
        localize(corpus_program("matmul"), "xla", lpool)


# ------------------------------------------------------------------------------ command


def test_pass_bisection_disables_only_known_passes():
    from xlaprobe.configs.registry import Configuration
    from xlaprobe.localization.passes import dump_compile, with_disabled
    spec = with_disabled(Configuration.parse("xla[xla_disable_hlo_passes=cse]"), ["fusion"])
    assert str(spec) == "xla[xla_disable_hlo_passes=cse+fusion]"
    with pytest.raises(InvalidArgument, match="not an xla"):
        dump_compile(None, None, "mutant:reduce-wrong-init")


def test_pass_search_on_two_workers_gives_the_answer_of_one():
    # ddmin's tests of a round run two at a time; the first failing subset in order is taken,
    # so the pass, the disabled set and the candidates equal the sequential search's.
    from xlaprobe.checking import check_program
    from xlaprobe.configs.registry import Configuration
    from xlaprobe.localization.passes import blame_pass
    case = load_present("dus_shifted_self_update")
    config = Configuration.parse(case.faulty_config)
    tests = {}
    blames = {}
    for width in (1, 2):
        with make_pool(size=width, timeout_s=300) as pool:
            check = check_program(case.program, [str(config), "reference"], pool)
            tests[width] = []
            blames[width] = blame_pass(case.program, config, pool, check,
                                       on_test=lambda *t, w=width: tests[w].append(t[0]))
    assert blames[2].compiler_pass == blames[1].compiler_pass == "fusion"
    assert blames[2].disabled == blames[1].disabled and \
        blames[2].candidates == blames[1].candidates
    assert set(tests[1]) <= set(tests[2])  # every sequential test ran, plus window partners
    assert blames[2].cycles == len(tests[2]) + 1  # each test once, and the dump compile


def test_localize_command_json(tmp_path, capsys):
    code = localize_command(str(CASES_DIR / "dus_shifted_self_update.py"), "", db=tmp_path / "x.db",
                            json_output=True)
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["config"] == "xla"
    assert data["equation"]["primitive"] == "dynamic_update_slice"
    with Store(tmp_path / "x.db") as store:  # stored in the database, not in files beside it
        assert store.count("localizations") == 1
    assert not (tmp_path / "localizations").exists()


def test_localize_command_bad_input(tmp_path, monkeypatch):
    with pytest.raises(InvalidArgument, match="unknown"):
        localize_command(str(CASES_DIR / "int8_square_select_abs.py"), "xla:nope", db=tmp_path / "x.db",
                         json_output=True)
    with pytest.raises(InvalidArgument, match="oracle"):
        localize_command(str(CASES_DIR / "int8_square_select_abs.py"), "reference",
                         db=tmp_path / "x.db", json_output=True)
    with pytest.raises(InvalidArgument, match="no store"):
        localize_command("7", "xla", db=tmp_path / "missing.db", json_output=True)
    with pytest.raises(InvalidArgument, match="--backend must be one of"):
        localize_command("7", "xla", db=tmp_path / "x.db", json_output=True, backend="slurm")
    with pytest.raises(InvalidArgument, match="--address names a Ray cluster"):
        localize_command("7", "xla", db=tmp_path / "x.db", json_output=True,
                         address="127.0.0.1:6379")
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    with pytest.raises(InvalidArgument, match="needs Ray, which is not installed"):
        localize_command("7", "xla", db=tmp_path / "x.db", json_output=True, backend="ray")
    assert not (tmp_path / "x.db").exists()
