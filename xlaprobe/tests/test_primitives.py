"""The primitive registry (primitives.py): known answers, then every name against jax's own
primitives and every user's rule table against the registry."""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from xlaprobe import jaxcompat, jaxprs, primitives
from xlaprobe.configs import eager, reference
from xlaprobe.lax_rules import opspec
from xlaprobe.localization import equation, inside, repro
from xlaprobe.primitives import Movement, PrimitiveFacts, facts
from xlaprobe.program import Program, Provenance
from xlaprobe.sources import ops

F32 = np.float32


# ---------------------------------------------------------------------------------------------
# known answers, checked by hand


def test_known_facts():
    assert facts("exp").rounding and facts("exp").approximate and facts("exp").elementwise
    assert facts("add").rounding and not facts("add").approximate
    assert facts("reshape").movement is Movement.RESHAPE and not facts("reshape").rounding
    assert facts("max") == PrimitiveFacts("max", elementwise=True, wrapper="max")  # exact
    pjit = facts("pjit")
    assert pjit.call_like and pjit.call_keys == ("jaxpr",) and pjit.inlined and pjit.retired
    assert facts("scatter-add").accumulates and facts("scatter-mul").rounding
    assert facts("dot_general").accumulates and not facts("reduce_max").rounding
    assert facts("composite").call_like and not facts("composite").inlined
    assert facts("custom_vmap_call").call_keys == ("call",)  # not "call_jaxpr"
    assert facts("and").wrapper == "bitwise_and"  # lax.and is a syntax error
    assert facts("random_bits").takes_keys and facts("cond").whole_keys
    assert not facts("custom_lin").call_like


def test_unknown_names_have_no_facts():
    for name in ("scatter_add", "scatter_mul", "expand_dims", "copy_p", "pallas_call"):
        assert name not in primitives.PRIMITIVES
        assert facts(name) == PrimitiveFacts(name)


def test_contradictory_facts_are_rejected():
    with pytest.raises(ValueError, match="call-like"):
        PrimitiveFacts("add", inlined=True)
    with pytest.raises(ValueError, match="round"):
        PrimitiveFacts("exp", approximate=True)


def test_data_movement_sets_of_localization():
    assert equation.DATA_MOVEMENT == {"reshape", "squeeze", "broadcast_in_dim", "convert_element_type",
                                 "copy"}
    assert inside._RESHAPES == {"reshape", "squeeze"}


# ---------------------------------------------------------------------------------------------
# names against the jax installed


@pytest.fixture(scope="module")
def jax_names() -> frozenset[str]:
    return jaxcompat.primitive_names()


def test_collects_jax_primitives(jax_names):
    assert {"add", "scatter-add", "jit", "composite", "random_bits", "custom_vmap_call",
            "pure_callback", "while"} <= jax_names
    assert "scatter_add" not in jax_names and "pjit" not in jax_names


def test_every_name_is_a_jax_primitive_or_marked_retired(jax_names):
    current = {name for name, p in primitives.PRIMITIVES.items() if not p.retired}
    retired = {name for name, p in primitives.PRIMITIVES.items() if p.retired}
    assert current - jax_names == set()
    assert retired & jax_names == set()  # a retired note is true of this jax


def test_rule_tables_name_known_primitives():
    known = set(primitives.PRIMITIVES)
    for table in (reference.RULES, ops.RULES, repro._SCATTERS):  # a new rule: add its record
        assert set(table) - known == set(), "add the primitive to xlaprobe/primitives.py"
    assert all(facts(n).accumulates for n in reference._ACCUMULATION_TERMS)


def test_every_call_like_primitive_has_the_reference_call_rule():
    for name in primitives.names(lambda p: p.call_like):
        assert reference.RULES[name] is reference._call, name


def test_catalogue_notes_agree_on_approximations():
    for name, rule in ops.RULES.items():
        assert (opspec.APPROX in rule.notes) == facts(name).approximate, name


def _sample_operands(wrapper: str) -> list[np.ndarray]:
    special = {
        "select_n": [np.array([True, False]), np.ones(2, F32), np.zeros(2, F32)],
        "real": [np.ones(2, np.complex64)], "imag": [np.ones(2, np.complex64)],
    }
    if wrapper in special:
        return special[wrapper]
    fn = getattr(lax, wrapper)
    arity = sum(1 for p in inspect.signature(fn).parameters.values()
                if p.default is p.empty and p.kind is p.POSITIONAL_OR_KEYWORD)
    ints = {"bitwise_and", "bitwise_or", "bitwise_not", "bitwise_xor", "shift_left", "clz",
            "shift_right_logical", "shift_right_arithmetic", "population_count", "rem"}
    dtype = np.int32 if wrapper in ints else F32
    return [np.full(2, 0.5 if dtype is F32 else 3, dtype) for _ in range(arity)]


@pytest.mark.parametrize("name", sorted(primitives.names(lambda p: bool(p.wrapper))))
def test_wrapper_binds_exactly_its_primitive(name):
    wrapper = facts(name).wrapper
    closed = jax.make_jaxpr(getattr(lax, wrapper))(*_sample_operands(wrapper))
    assert [e.primitive.name for e in closed.jaxpr.eqns] == [name]
    assert facts(name).elementwise


# ---------------------------------------------------------------------------------------------
# one call-like table for canonical form, eager and reference


@jax.custom_jvp
def _jvp_sin(x):
    return jnp.sin(x)


_jvp_sin.defjvp(lambda p, t: (_jvp_sin(p[0]), jnp.cos(p[0]) * t[0]))


@jax.custom_batching.custom_vmap
def _vmap_exp(x):
    return jnp.exp(x)


@_vmap_exp.def_vmap
def _vmap_exp_rule(axis_size, in_batched, x):
    return jnp.exp(x), in_batched[0]


def _calls(x):
    y = jax.jit(lambda a: a * 2.0)(x) + _jvp_sin(x) + jax.checkpoint(jnp.tanh)(x)
    return lax.composite(lambda a: a * 3.0 + 1.0, name="xlaprobe.test")(y) + _vmap_exp(x)


def test_call_jaxpr_follows_each_call_key():
    x = np.linspace(-1, 1, 3).astype(F32)
    closed = jax.make_jaxpr(_calls)(x)
    calls = [e for e in closed.jaxpr.eqns if primitives.is_call_like(e)]
    assert {e.primitive.name for e in calls} == {"jit", "custom_jvp_call", "remat2", "composite",
                                                 "custom_vmap_call"}
    for eqn in calls:
        inner = primitives.call_jaxpr(eqn)
        assert [v.aval for v in inner.jaxpr.invars] == [v.aval for v in eqn.invars]
    with pytest.raises(KeyError, match="add"):
        primitives.call_jaxpr(next(e for e in closed.jaxpr.eqns if e.primitive.name == "add"))


def test_interpreters_follow_the_call_table():
    x = np.linspace(-1, 1, 3).astype(F32)
    closed = jax.make_jaxpr(_calls)(x)
    want = np.asarray(jax.jit(_calls)(x))
    canonical = jaxprs.canonicalize(closed)
    assert {"composite", "custom_vmap_call"} <= jaxprs.primitives_used(canonical)  # kept
    assert not {"jit", "custom_jvp_call", "remat2"} & jaxprs.primitives_used(canonical)
    for jaxpr in (closed, canonical):
        np.testing.assert_allclose(reference.evaluate(jaxpr, [x])[0], want, rtol=1e-6)
        paths: list[str] = []
        (got,) = eager.evaluate(jaxpr, [x], record=lambda path, eqn, outs: paths.append(path))
        np.testing.assert_allclose(got, want, rtol=1e-6)
        for name in ("composite", "custom_vmap_call"):  # entered, not bound whole
            assert any(f"/{name}/" in p for p in paths), name


def test_repro_prints_bitwise_ops_through_their_lax_names():
    args = (np.array([1, 2, 3], np.int32), np.array([3, 3, 0], np.int32))
    program = Program.from_function(lambda a, b: (a & b) | ~a, args, Provenance("user", "bits"))
    text = repro.emit_repro(program, "xla", {}, reference.evaluate(program.jaxpr, program.inputs))
    assert "lax.bitwise_and(" in text and "lax.bitwise_not(" in text and "lax.and(" not in text
    compile(text, "repro.py", "exec")  # lax.and(...) was a syntax error
