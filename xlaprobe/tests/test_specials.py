"""Special-value re-runs of the steered generator: the values, how inputs are filled, and that a
program whose compile fired a rewrite is re-run at them and the oracle then catches a rewrite that
is wrong at a signed zero (log(rsqrt(x)) -> -0.5*log(x), the known fuzz case)."""

import math
import re
import types

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax

from xlaprobe.checking import check_program
from xlaprobe.coverage import PassCoverage
from xlaprobe.known_bugs import known_keys
from xlaprobe.outcome import Outcome, OutcomeKind
from xlaprobe.sources.specials import fill_specials, special_values, special_variants
from xlaprobe.sources.steered import SteeredSource, _Seed, rewrite_items


def _bits(values):
    return {v.tobytes() for v in values}


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
def test_special_values_hold_the_ieee_classes_and_boundaries(dtype):
    values = special_values(dtype)
    info = ml_dtypes.finfo(dtype)
    wide = values.astype(np.float64)
    assert values.dtype == np.dtype(dtype) and len(_bits(values)) == len(values)
    assert any(v == 0 and math.copysign(1, v) < 0 for v in wide)  # -0.0
    assert {math.inf, -math.inf, float(info.max), -float(info.max), 1.0, -1.0} <= set(wide)
    assert np.isnan(wide).sum() == 1
    assert float(info.tiny) in set(wide) and float(info.smallest_subnormal) not in set(wide)
    with_subnormals = special_values(dtype, subnormals=True).astype(np.float64)
    assert float(info.smallest_subnormal) in set(with_subnormals)
    assert 1.0 + float(info.eps) in set(wide) and 2.0 ** info.nmant in set(wide)
    with pytest.raises(ValueError, match="floating"):
        special_values(np.int32)


def test_fill_uses_each_special_once_before_repeating_and_keeps_shape_and_dtype():
    rng = np.random.default_rng(1)
    x = np.full((4, 5), 7.0, np.float32)
    filled = fill_specials(x, rng)
    assert filled.shape == x.shape and filled.dtype == x.dtype and (x == 7.0).all()
    assert len(_bits(filled.ravel())) == 20  # 20 of the 23 values, none twice
    assert _bits(special_values(np.float32)) >= _bits(filled.ravel())
    wide = fill_specials(np.full(40, 7.0, np.float32), rng)  # room for all: each once
    assert _bits(special_values(np.float32)) <= _bits(wide) and (wide == 7.0).sum() == 10


def test_variants_fill_all_floats_then_one_at_a_time_and_leave_integers():
    rng = np.random.default_rng(2)
    x, i, y = np.ones(8, np.float32), np.arange(8), np.ones(8, ml_dtypes.bfloat16)
    [both, first, second] = special_variants((x, i, y), rng, 3)
    assert all(v[1] is i for v in (both, first, second))
    assert not (both[0] == 1).all() and not (both[2] == 1).all()
    assert not (first[0] == 1).all() and (first[2] == 1).all()
    assert (second[0] == 1).all() and not (second[2] == 1).all()
    assert special_variants((i,), rng) == []


def _observed(rewrites):
    coverage = PassCoverage({"algsimp": 1}, {"algsimp": 1}, {r: 1 for r in rewrites})
    return types.SimpleNamespace(outcomes=[Outcome("xla", OutcomeKind.RAN, coverage=coverage)])


def test_a_program_that_fired_a_rewrite_is_queued_and_rerun_at_special_values_once():
    source = SteeredSource(max_equations=5, arms=("fresh",), special_share=1.0, fresh_share=1.0)
    program = source(0)
    assert rewrite_items(frozenset({"pass:algsimp", "algsimp:[X]"})) == {"algsimp:[X]"}
    source.observe(0, program, _observed([]))  # a pass changed, no rewrite: nothing queued
    assert source.stats()["special_queue"] == 0
    program = source(1)
    source.observe(1, program, _observed(["algsimp:[A*1 => A]"]))
    queued = source.stats()["special_queue"]
    assert 1 <= queued <= 2  # one variant per floating input, plus all of them
    special = source(2)
    assert special.provenance.name == "steer:2:special"
    assert [e.primitive for e in special.jaxpr.jaxpr.eqns] == [
        e.primitive for e in program.jaxpr.jaxpr.eqns]  # the same function, other inputs
    source.observe(2, special, _observed(["algsimp:[A*1 => A]"]))  # no specials of specials
    assert source.stats()["special_queue"] == queued - 1 and source.special_runs == 1


def test_steered_progress_lines_say_what_made_each_program():
    # Pattern, mutation and special-value re-runs were printed like plain programs: the line
    # says which arm made the program, a plain one is "fresh"
    import io

    from rich.console import Console

    from xlaprobe.cli.console import Steps
    from xlaprobe.cli.fuzz import _program_line

    source = SteeredSource(max_equations=5, arms=("pattern:pow",), fresh_share=0.0,
                           special_share=1.0)
    pattern = source(0)
    source.observe(0, pattern, _observed(["algsimp:[pow(A, 2) => A*A]"]))
    special = source(1)  # the queued special-value re-run of the pattern's program
    mutant = SteeredSource(max_equations=5, arms=("mutate:dup",), fresh_share=0.0)
    mutant.corpus = list(source.corpus)  # the pattern's program, kept as a seed
    dup = mutant(2)
    plain = SteeredSource(max_equations=5, arms=("fresh",), fresh_share=1.0)(3)
    buffer = io.StringIO()
    ok = types.SimpleNamespace(findings=[], incomplete=False)
    with Steps("fuzz", console=Console(file=buffer, width=200), quiet=False) as steps:
        line = _program_line(steps, steered=True)
        for seed, program in enumerate((pattern, special, dup, plain)):
            line(seed, program, ok)
    made = [re.sub(r", [0-9.]+ programs/s$", "", text)
            for text in buffer.getvalue().splitlines()]
    eqs = [f"{p.num_equations} equation{'s' if p.num_equations != 1 else ''}"
           for p in (pattern, special, dup, plain)]
    assert made == [f"fuzz: program 1 seed 0 (pattern pow): {eqs[0]}, ok",
                    f"fuzz: program 2 seed 1 (special-value re-run): {eqs[1]}, ok",
                    f"fuzz: program 3 seed 2 (mutation dup): {eqs[2]}, ok",
                    f"fuzz: program 4 seed 3 (fresh): {eqs[3]}, ok"]

def test_a_rewrite_wrong_at_minus_zero_is_caught_by_the_special_rerun(pool):
    # log(rsqrt(x)) on positive inputs is right under XLA (the rewrite to -0.5*log(x) holds
    # there) and fires an algebraic-simplifier rewrite; its special-value re-run puts -0.0 in,
    # where XLA gives +inf and IEEE NaN: the known case's key.
    from xlaprobe.program import Program, Provenance
    from xlaprobe.localization.first_wrong import first_wrong_key

    fn = lambda x: [jnp.log(lax.rsqrt(x))]  # noqa: E731
    source = SteeredSource(arms=("fresh",), special_share=1.0, fresh_share=1.0)
    ordinary = Program.from_function(fn, (np.linspace(0.5, 4, 32, dtype=np.float32),),
                                     Provenance("fuzz", "steer:0:pattern:log-rsqrt", 0))
    result = check_program(ordinary, ["xla", "reference"], pool)
    assert not result.findings and rewrite_items(frozenset().union(
        *(o.coverage.rewrites for o in result.outcomes if o.coverage)))
    source._pending[0] = ("pattern:log-rsqrt", _Seed(fn, tuple(ordinary.inputs), frozenset()))
    source.observe(0, ordinary, result)
    special = source(1)
    assert special.provenance.name == "steer:1:special"
    checked = check_program(special, ["xla", "reference"], pool)
    [finding] = checked.findings
    assert finding.config == "xla"
    assert first_wrong_key(special, "xla", checked, pool) in known_keys()


def test_a_program_reading_nan_bits_gets_no_nan():
    # A bitcast of NaN reads its sign and payload, which are unspecified (a first run's false
    # alarm: 0xFFC00000 for 0x7FC00000); such a program's special values hold no NaN.
    from xlaprobe.program import Program, Provenance

    assert not np.isnan(special_values(np.float32, nan=False).astype(np.float64)).any()
    fn = lambda x: [lax.bitcast_convert_type(x * 2.0, np.uint32)]  # noqa: E731
    x = np.linspace(1, 2, 64, dtype=np.float32)
    program = Program.from_function(fn, (x,), Provenance("fuzz", "steer:0:pattern:x", 0))
    source = SteeredSource(arms=("fresh",), special_share=1.0)
    source._pending[0] = ("pattern:x", _Seed(fn, (x,), frozenset()))
    source.observe(0, program, _observed(["algsimp:[A*2 => A+A]"]))
    queued = [entry[3][0] for entry in source._specials]
    assert queued and not any(np.isnan(v).any() for v in queued)
    assert any(np.isinf(v).any() for v in queued)
