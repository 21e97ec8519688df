"""The ``eager`` configuration kind: op-by-op interpretation (configs/eager.py)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from xlaprobe import jaxprs
from xlaprobe.configs import eager, xla
from xlaprobe.configs.registry import Configuration, get_kind
from xlaprobe.errors import InvalidArgument
from xlaprobe.program import Program, Provenance


def _program(fn, *args) -> Program:
    return Program.from_function(fn, args, Provenance("user", "test"))


@jax.custom_vjp
def _twice_sin(x):
    return jnp.sin(x) * 2.0


_twice_sin.defvjp(lambda x: (_twice_sin(x), x), lambda x, g: (g * jnp.cos(x) * 2.0,))


def _mixed(x, y):
    carry, ys = lax.scan(lambda c, v: (c * 0.5 + v, jnp.sin(c) * v), 0.0, x)
    w = lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 1.1 + y), (0, x))[1]
    r = lax.cond(y > 0, lambda a: jax.nn.relu(a - 0.2), jax.nn.gelu, w)
    back = lax.scan(lambda c, v: (c + v, c), 1.0, x, reverse=True)
    kept = jax.checkpoint(lambda a: _twice_sin(a) + jax.nn.softplus(a))(x)
    return jax.jit(lambda a, b: jax.nn.gelu(a) * b)(r, ys), carry, back, kept


MIXED_ARGS = (np.linspace(-1, 1, 5).astype(np.float32), np.float32(0.5))


def _assert_close_to_jit(outputs, fn, args):
    expected = jax.tree_util.tree_leaves(jax.jit(fn)(*args))
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected):
        assert isinstance(got, np.ndarray) and got.dtype == want.dtype and got.shape == want.shape
        # jit may contract a*b+c into an FMA where eager rounds twice: a few ULPs apart at most.
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_equals_jit_on_control_flow_custom_jvp_and_nested_jit():
    program = _program(_mixed, *MIXED_ARGS)
    _assert_close_to_jit(eager.evaluate(program.jaxpr, program.inputs), _mixed, MIXED_ARGS)
    _assert_close_to_jit(get_kind("eager").run(Configuration.parse("eager"), program.jaxpr,
                                               program.inputs), _mixed, MIXED_ARGS)


def test_raw_jaxpr_with_jit_and_custom_jvp_call():
    raw = jax.make_jaxpr(_mixed)(*MIXED_ARGS)
    calls = {"jit", "custom_jvp_call", "custom_vjp_call", "remat2"}
    assert calls <= jaxprs.primitives_used(raw)
    paths = []
    outputs = eager.evaluate(raw, MIXED_ARGS, record=lambda path, eqn, outs: paths.append(path))
    _assert_close_to_jit(outputs, _mixed, MIXED_ARGS)
    for call in calls:  # each wrapper was entered, not bound whole
        assert any(f"/{call}/" in p for p in paths), call


def test_composite_body_runs_op_by_op():
    # reference recurses into a composite's decomposition; eager must too (one call-like table)
    def fn(x):
        return lax.composite(lambda y: jnp.sin(y) * 2.0 + 1.0, name="xlaprobe.test")(x)

    x = np.linspace(-1, 1, 4).astype(np.float32)
    program = _program(fn, x)
    assert "composite" in jaxprs.primitives_used(program.jaxpr)  # canonical form keeps it
    seen = []
    (out,) = eager.evaluate(program.jaxpr, program.inputs,
                            record=lambda path, eqn, outs: seen.append((path, eqn.primitive.name)))
    assert seen == [("eqn0/composite/eqn0", "sin"), ("eqn0/composite/eqn1", "mul"),
                    ("eqn0/composite/eqn2", "add"), ("eqn0", "composite")]
    np.testing.assert_allclose(out, np.sin(x) * 2.0 + 1.0, rtol=1e-6)


def test_record_sees_every_equation_on_every_iteration():
    def fn(x):
        return lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 2.0), (0, x))[1] + 1.0

    program = _program(fn, np.float32(1.5))
    seen = []
    outputs = eager.evaluate(program.jaxpr, program.inputs,
                             record=lambda path, eqn, outs: seen.append((path, eqn.primitive.name, outs)))
    assert [(path, name) for path, name, _ in seen] == [
        ("eqn0/while[0]/cond/eqn0", "lt"),
        ("eqn0/while[0]/body/eqn0", "add"), ("eqn0/while[0]/body/eqn1", "mul"),
        ("eqn0/while[1]/cond/eqn0", "lt"),
        ("eqn0/while[1]/body/eqn0", "add"), ("eqn0/while[1]/body/eqn1", "mul"),
        ("eqn0/while[2]/cond/eqn0", "lt"),
        ("eqn0/while[2]/body/eqn0", "add"), ("eqn0/while[2]/body/eqn1", "mul"),
        ("eqn0/while[3]/cond/eqn0", "lt"),
        ("eqn0", "while"),
        ("eqn1", "add"),
    ]
    counters = [int(outs[0]) for path, name, outs in seen if name == "add" and "body" in path]
    assert counters == [1, 2, 3]
    doubled = [float(outs[0]) for path, name, outs in seen if name == "mul"]
    assert doubled == [3.0, 6.0, 12.0]
    assert all(isinstance(o, np.ndarray) for _, _, outs in seen for o in outs)
    assert float(outputs[0]) == 13.0


def test_scan_paths_count_iterations_in_execution_order():
    program = _program(lambda xs: lax.scan(lambda c, v: (c + v, c * v), 0.0, xs, reverse=True),
                       np.array([1.0, 2.0, 3.0], np.float32))
    seen = []
    carry, ys = eager.evaluate(program.jaxpr, program.inputs,
                               record=lambda path, eqn, outs: seen.append((path, outs)))
    adds = [(path, float(outs[0])) for path, outs in seen if path.endswith("eqn0") and "scan[" in path]
    assert adds == [("eqn0/scan[0]/eqn0", 3.0), ("eqn0/scan[1]/eqn0", 5.0), ("eqn0/scan[2]/eqn0", 6.0)]
    assert float(carry) == 6.0
    np.testing.assert_array_equal(ys, [5.0 * 1.0, 3.0 * 2.0, 0.0 * 3.0])


def test_empty_scan_and_out_of_range_switch():
    def fn(xs, i):
        carry, ys = lax.scan(lambda c, v: (c + v, v * 2), 1.0, xs)
        return carry, ys, lax.switch(i, [lambda: 10.0, lambda: 20.0])

    for i, chosen in ((-5, 10.0), (7, 20.0)):
        program = _program(fn, np.zeros((0,), np.float32), np.int32(i))
        carry, ys, picked = eager.evaluate(program.jaxpr, program.inputs)
        assert float(carry) == 1.0 and ys.shape == (0,) and ys.dtype == np.float32
        assert float(picked) == chosen


def test_every_op_rounds_on_its_own():
    # x*x - 1 with x = 1 + 2**-12: rounding x*x first gives 2**-11 exactly; an FMA gives 2**-11 + 2**-24.
    # jax.core.eval_jaxpr compiles the scan body whole and XLA contracts it; eager must not.
    def fn(xs, one):
        return lax.scan(lambda c, v: (c, v * v - one), 0.0, xs)[1]

    program = _program(fn, np.full(3, 1 + 2**-12, np.float32), np.float32(1.0))
    np.testing.assert_array_equal(eager.evaluate(program.jaxpr, program.inputs)[0], np.full(3, 2**-11))
    whole = jax.core.eval_jaxpr(program.jaxpr.jaxpr, program.jaxpr.consts, *program.inputs)[0]
    np.testing.assert_array_equal(np.asarray(whole), np.full(3, 2**-11 + 2**-24, np.float32))


def test_cbrt_of_subnormals_is_wrong_op_by_op_too():
    # shared/cases/xla_cpu_bugs/cbrt_subnormal.py. The right values are ~1.8e-13, 3.1e-14, 2.7e-15 (or
    # 0 if flushed); XLA:CPU (jaxlib 0.10.2) returns the constant garbage -5.5951735e-16 for every
    # subnormal, jitted and op by op alike. Only an XLA-independent reference sees this fault.
    tiny = np.finfo(np.float32).tiny
    x = np.array([tiny / 2, 3e-41, 2e-44, 8.0], np.float32)
    program = _program(jnp.cbrt, x)
    observed = np.array([-5.5951735e-16, -5.5951735e-16, -5.5951735e-16, 2.0], np.float32)
    np.testing.assert_array_equal(eager.evaluate(program.jaxpr, program.inputs)[0], observed)
    np.testing.assert_array_equal(
        xla.KIND.run(Configuration.parse("xla"), program.jaxpr, program.inputs)[0], observed)


@pytest.mark.parametrize("spec", ["eager:O0", "eager[xla_cpu_enable_fast_math=true]"])
def test_eager_takes_no_variant_or_options(spec):
    with pytest.raises(InvalidArgument, match="eager takes no variant or options"):
        Configuration.parse(spec)


def test_kind_record():
    kind = get_kind("eager")
    assert kind.name == "eager" and kind.isolation_group(Configuration("eager")) == "default"
    assert str(Configuration.parse("eager")) == "eager"


def test_vmapped_while_loop_advances_each_element_while_its_own_predicate_holds():
    # Batched predicate: element i stops when its own value passes 10, the loop when all have.
    def collatz_like(x, key):
        def body(c):
            return c[0] * 1.5 + 1.0, c[1] + 1, jax.random.split(c[2])[0]
        value, steps, key = lax.while_loop(lambda c: c[0] < 10.0, body, (x, 0, key))
        return value, steps, jax.random.key_data(key)

    fn = jax.vmap(collatz_like)
    args = (np.array([0.0, 5.0, 9.5, 20.0], np.float32), jax.random.split(jax.random.key(0), 4))
    raw = jax.make_jaxpr(fn)(*args)
    (while_eqn,) = [e for e in raw.jaxpr.eqns if e.primitive.name == "while"]
    assert while_eqn.params["cond_jaxpr"].out_avals[0].shape == (4,)
    values, steps, keys = eager.evaluate(raw, list(args))
    # By hand: 0 -> 1 -> 2.5 -> 4.75 -> 8.125 -> 13.1875 (5 steps); 5 -> 8.5 -> 13.75 (2);
    # 9.5 -> 15.25 (1); 20 stays (0).
    np.testing.assert_array_equal(steps, [5, 2, 1, 0])
    np.testing.assert_allclose(values, [13.1875, 13.75, 15.25, 20.0], rtol=0)
    want = jax.jit(fn)(*args)
    np.testing.assert_array_equal(values, want[0])
    np.testing.assert_array_equal(keys, want[2])
