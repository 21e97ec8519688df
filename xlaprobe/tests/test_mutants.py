"""Mutant compilers: each fires on a program with its pattern and is detected there (the
below-tolerance one stays quiet, the crash one is a crash outcome), and on a program without the
pattern it does not fire and nothing is flagged."""

import pytest

from xlaprobe.checking import check_program, judge
from xlaprobe.configs import mutants
from xlaprobe.configs.registry import Configuration
from xlaprobe.errors import InvalidArgument
from xlaprobe.hlo import HloText
from xlaprobe.oracle import VerdictKind
from xlaprobe.outcome import OutcomeKind
from xlaprobe.sources.corpus import corpus_program

#: mutant -> (corpus program where it fires, opcode of the changed instruction, one without it)
CASES = {
    "swap-subtract-fused": ("fused_arithmetic", "subtract", "matmul"),
    "swap-divide-fused": ("fused_arithmetic", "divide", "matmul"),
    "select-swap-fused": ("threshold_select", "select", "matmul"),
    "dynamic-slice-off-by-one": ("dynamic_window", "dynamic-slice", "matmul"),
    "scatter-drop-last-update": ("scatter_add_rows", "scatter", "matmul"),
    "reduce-wrong-init": ("row_sums", "reduce", "matmul"),
    "compare-flip-select": ("prefix_mask", "compare", "matmul"),
    "fused-transcendental-neighbour": ("scaled_tanh", "tanh", "matmul"),
    "transpose-as-reshape": ("transpose_add", "transpose", "matmul"),
    "while-one-more-trip": ("counted_loop", "compare", "matmul"),
    "convert-saturates": ("narrowing_convert", "convert", "matmul"),
    "dot-bf16-accumulate": ("matmul", "dot", "fused_arithmetic"),
    "constant-few-ulps": ("scaled_tanh", "constant", "matmul"),
    "crash-on-sort": ("sort_values", "sort", "matmul"),
}


def test_catalogue_is_covered():
    assert set(CASES) == set(mutants.MUTANTS)
    assert len(mutants.MUTANTS) >= 12
    stages = {m.stage for m in mutants.MUTANTS.values()}
    assert stages == {mutants.PRE, mutants.POST}


_baselines = {}


def _baseline(name, pool):
    if name not in _baselines:
        program = corpus_program(name)
        _baselines[name] = (program, check_program(program, ["xla", "reference"], pool))
    return _baselines[name]


def _with_mutant(name, spec, pool):
    program, base = _baseline(name, pool)
    assert not base.findings  # the unmutated compiler is right on the corpus
    outcome = pool.run(program, spec)
    result = judge(program, list(base.configs) + [spec], list(base.outcomes) + [outcome],
                   base.budget, base.flushed)
    return outcome, next((f for f in result.findings if f.config == spec), None)


@pytest.mark.parametrize("mutant", sorted(CASES))
def test_fires_and_is_detected(mutant, pool):
    fires_on, opcode, _ = CASES[mutant]
    spec = f"mutant:{mutant}"
    outcome, finding = _with_mutant(fires_on, spec, pool)
    if mutants.MUTANTS[mutant].crashes:
        assert outcome.kind is OutcomeKind.CRASH and outcome.signal == 6
        assert finding is not None and finding.kind is VerdictKind.CRASH
        again = pool.run(corpus_program("matmul"), spec)  # the worker restarts: the run goes on
        assert again.kind is OutcomeKind.RAN
        return
    assert outcome.kind is OutcomeKind.RAN, outcome.error
    [site] = outcome.mutations
    assert site.mutant == mutant and site.opcode == opcode and site.stage == mutants.MUTANTS[mutant].stage
    if site.opcode != "constant":  # constants carry no op_name metadata
        assert site.equation >= 0 and f"eqn{site.equation}" in site.op_name
    if mutants.MUTANTS[mutant].below_tolerance:
        assert finding is None, "a 2-ULP constant change must stay below tolerance"
    else:
        assert finding is not None and finding.kind in (VerdictKind.MISMATCH, VerdictKind.NAN_MISMATCH)


@pytest.mark.parametrize("mutant", sorted(CASES))
def test_quiet_where_the_pattern_is_absent(mutant, pool):
    _, _, quiet_on = CASES[mutant]
    outcome, finding = _with_mutant(quiet_on, f"mutant:{mutant}", pool)
    assert outcome.kind is OutcomeKind.RAN and outcome.mutations == ()
    assert finding is None


def test_fusion_sites_name_their_fusion(pool):
    outcome, _ = _with_mutant("fused_arithmetic", "mutant:swap-subtract-fused", pool)
    [site] = outcome.mutations
    assert site.fusion and site.computation != site.fusion


def test_parent_never_registers_a_pass():
    assert mutants.KIND._registered is None


def test_specs_and_errors():
    assert str(Configuration.parse("mutant:swap-divide-fused")) == "mutant:swap-divide-fused"
    assert Configuration.parse("mutant:swap-divide-fused").isolation_group == "mutant:swap-divide-fused"
    with pytest.raises(InvalidArgument, match="did you mean 'swap-divide-fused'"):
        Configuration.parse("mutant:swap-divid-fused")
    with pytest.raises(InvalidArgument, match="needs a mutant name"):
        Configuration.parse("mutant")


def test_hlo_text_round_trips_and_finds_fusions():
    from xlaprobe.configs.xla import compile_program
    program = corpus_program("fused_arithmetic")
    text = compile_program(Configuration("xla"), program.jaxpr, program.inputs).as_text()
    hlo = HloText(text)
    assert str(hlo) == text if text.endswith("\n") else str(hlo) == text + "\n"
    subtract = next(i for i in hlo.instructions() if i.opcode == "subtract")
    assert hlo.fusion_of(subtract.computation)
    assert subtract.element_type == "f32" and subtract.dims == (16,)


def test_apply_mutant_is_pure_text_rewriting():
    from xlaprobe.configs.xla import compile_program
    program = corpus_program("fused_arithmetic")
    text = compile_program(Configuration("xla"), program.jaxpr, program.inputs).as_text()
    new_text, site = mutants.apply_mutant(mutants.MUTANTS["swap-subtract-fused"], text)
    before = next(i for i in HloText(text).instructions() if i.name == site.instruction)
    after = next(i for i in HloText(new_text).instructions() if i.name == site.instruction)
    assert after.operands == before.operands[::-1]
    assert mutants.apply_mutant(mutants.MUTANTS["crash-on-sort"], text) is None


def test_large_constants_survive_the_mutant_round_trip(pool):
    # XLA folds this reduce_window over an iota into an s32[8,6] constant before the pass runs;
    # printed with "{...}" it would parse back as 0, 1, 2, ... (a fuzz finding of seed 7100222).
    import jax.numpy as jnp
    import numpy as np
    from jax import lax

    from xlaprobe.program import Program, Provenance

    def program(x):
        rows = lax.broadcasted_iota(jnp.int32, (16, 6), 0)
        folded = lax.reduce_window(rows, 0, lax.bitwise_or, (1, 1), (2, 1), ((-1, 1), (1, -1)),
                                   window_dilation=(1, 2))
        return folded, x * np.float32(0.3)  # 0.3: the constant constant-few-ulps moves

    prog = Program.from_function(program, (np.ones(4, np.float32),), Provenance("user", "folded"))
    outcome = pool.run(prog, "mutant:constant-few-ulps")
    assert outcome.ran and outcome.mutations  # it fired, on the float constant
    # out[i, j] = iota row 2i + 1, column j - 1 (0 where the window sits on the low padding)
    want = np.where(np.arange(6)[None, :] == 0, 0, 2 * np.arange(8)[:, None] + 1)
    np.testing.assert_array_equal(outcome.outputs[0], want)


def test_convert_saturates_from_unsigned_to_signed(pool):
    # u32 -> s8 saturates to [0, 127]: a bound of -128 is no u32 literal (the pass used to emit
    # one, and the module failed to parse: a compile error, fuzz seed 7100041).
    import jax.numpy as jnp
    import numpy as np

    from xlaprobe.program import Program, Provenance

    x = np.array([0, 5, 127, 128, 200, 4294967295], np.uint32)
    prog = Program.from_function(lambda v: (v + np.uint32(0)).astype(jnp.int8), (x,),
                                 Provenance("user", "u32_to_s8"))
    outcome = pool.run(prog, "mutant:convert-saturates")
    assert outcome.ran and outcome.mutations, outcome.error
    assert outcome.outputs[0].tolist() == [0, 5, 127, 127, 127, 127]  # wrapping gives -128, -56, -1
