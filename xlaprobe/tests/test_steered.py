"""The coverage-steered fuzz source: patterns and mutations make valid programs; the bandit
credits novelty and keeps programs that hit rare passes as seeds."""

import types

import jax.numpy as jnp
import numpy as np
import pytest

from xlaprobe import jaxprs
from xlaprobe.cli.fuzz import steered_source
from xlaprobe.coverage import PassCoverage
from xlaprobe.errors import InvalidArgument
from xlaprobe.outcome import Outcome, OutcomeKind
from xlaprobe.program import Program, Provenance
from xlaprobe.sources import generator
from xlaprobe.sources.patterns import PATTERNS
from xlaprobe.sources.steered import (MUTATIONS, SteeredSource, _mutate_graph, _mutate_wrapped,
                                      _Seed, coverage_items)


def test_every_pattern_builds_a_program_for_several_draws():
    for pattern in PATTERNS.values():
        for draw in range(2):
            fn, inputs = pattern.build(np.random.default_rng(draw))
            program = Program.from_function(fn, inputs, Provenance("fuzz", pattern.name))
            assert program.num_equations >= 1, pattern.name
        assert pattern.targets


@pytest.mark.parametrize("name, draw", [("narrow-types", 0), ("rng-bits", 0), ("narrow-dot", 0),
                                        ("barrier", 0), ("triangular", 2), ("sort", 2),
                                        ("grouped-conv", 0), ("identities", 0)])
def test_patterns_for_passes_no_fuzz_run_changed_reach_them_and_judge_ok(pool, name, draw):
    # Before these patterns, no fuzz campaign (plain or steered) changed these passes; each
    # program agrees with the float64 reference and changes the passes it was written for (the
    # draw picks float16 for triangular, three narrow types for narrow-types, the dead sort
    # operand for sort, batch groups for grouped-conv).
    import xlaprobe
    fn, inputs = PATTERNS[name].build(np.random.default_rng(draw))
    checked = xlaprobe.check(fn, *inputs, configs="xla", db=None, pool=pool)
    assert checked.ok, checked
    changed = {item.removeprefix("pass:") for item in coverage_items(checked.result)}
    if name == "narrow-types":
        normalized = {t for t in changed if t.startswith("float-normalization-")}
        assert len(normalized) == 3, changed  # one pass per narrow type drawn
    else:
        assert set(PATTERNS[name].targets) & changed, changed


def _prims(program):
    return jaxprs.primitives_used(program.jaxpr)


def test_mutations_keep_the_program_and_change_its_form():
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    seed = _Seed(lambda x: [x * 2.0 + 1.0], (x,), frozenset())
    rng = np.random.default_rng(0)
    made = {kind: _mutate_wrapped(kind, seed, rng) for kind in ("dup", "cond", "vmap", "dtype")}
    dup = Program.from_function(*made["dup"], Provenance("fuzz", "dup"))
    assert len(dup.jaxpr.jaxpr.outvars) == 2
    assert "cond" in _prims(Program.from_function(*made["cond"], Provenance("fuzz", "c")))
    assert made["vmap"][1][0].shape[1:] == x.shape and made["vmap"][1][0].shape[0] in (2, 3)
    assert made["dtype"][1][0].dtype == jnp.bfloat16
    loop = Program.from_function(*_mutate_wrapped("loop", seed, rng), Provenance("fuzz", "l"))
    assert _prims(loop) & {"while", "scan"}
    graph, inputs = generator.generate_graph(5, max_equations=10)
    with pytest.raises(ValueError, match="needs a generated graph"):
        _mutate_graph("swap", seed, rng)
    applied = 0
    for number in range(40):
        graph, inputs = generator.generate_graph(number, max_equations=12)
        for kind in ("swap", "scale"):
            try:
                mutated, _ = _mutate_graph(kind, _Seed(graph, inputs, frozenset(), graph), rng)
            except ValueError:
                continue
            Program.from_function(mutated, inputs, Provenance("fuzz", kind))
            assert sum(a is not b for a, b in zip(mutated.nodes, graph.nodes)) == 1
            applied += 1
    assert applied >= 2
    assert set(MUTATIONS) == {"dup", "loop", "cond", "vmap", "dtype", "swap", "scale"}


def _result(changed, rewrites=()):
    coverage = PassCoverage({p: 1 for p in changed}, {p: 1 for p in changed},
                            {r: 1 for r in rewrites})
    return types.SimpleNamespace(outcomes=[Outcome("xla", OutcomeKind.RAN, coverage=coverage),
                                           Outcome("reference", OutcomeKind.RAN)])


def test_bandit_credits_novelty_and_keeps_rare_programs_as_seeds():
    assert coverage_items(_result(["fusion"], ["algsimp:[A*1 => A]"])) == {
        "pass:fusion", "algsimp:[A*1 => A]"}
    source = SteeredSource(max_equations=5, arms=("fresh", "pattern:pow", "mutate:dup"))
    first = source(0)
    assert first.provenance.source == "fuzz"
    arm = next(a for a in source.arms if source.pulls[a])
    assert arm != "mutate:dup"  # no seed yet: mutation arms wait for the corpus
    source.observe(0, first, _result(["fusion", "algsimp"]))
    assert len(source.corpus) == 1 and source.rewards[arm] == 1.0  # capped novelty
    for seed in range(1, 6):  # the same items again: no longer rare, no reward
        program = source(seed)
        source.observe(seed, program, _result(["fusion", "algsimp"]))
    assert source.hits["pass:fusion"] == 6
    assert len(source.corpus) == 3  # kept while an item had been hit fewer than RARE times
    assert sum(source.pulls.values()) == 6
    stats = source.stats()
    assert stats["corpus"] == 3 and stats["items"]["pass:algsimp"] == 6
    source.observe(99, None, None)  # an unknown seed or a generator failure is ignored


def test_steer_option_values():
    assert steered_source("none") is None
    assert isinstance(steered_source("coverage"), SteeredSource)
    with pytest.raises(InvalidArgument, match="unknown --steer"):
        steered_source("random")
