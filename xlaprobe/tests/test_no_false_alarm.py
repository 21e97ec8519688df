"""No false alarms: xla, xla:O0, eager and reference agree (within the oracle's budget) on the zoo
with random weights and inputs, and on ill-conditioned programs with random shapes and values."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from xlaprobe.check import DEFAULT_CONFIGS, check_program
from xlaprobe.program import Program, Provenance

CONFIGS = DEFAULT_CONFIGS.split(",")
SETTINGS = settings(max_examples=6, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


def _assert_no_finding(result):
    assert result.judged_against == "reference"
    assert not result.findings, [(f.config, f.kind.value, f.outputs[:3]) for f in result.findings]


def _check(fn, args, pool, name):
    program = Program.from_function(fn, args, Provenance("user", name))
    _assert_no_finding(check_program(program, CONFIGS, pool))


def cancellation(x, big):
    return (x + big) - big, (x * big + 1.0) - x * big


def variance_one_pass(x):
    return jnp.mean(x * x) - jnp.mean(x) ** 2


def large_sum(x):
    return jnp.sum(x), jnp.sum(x, axis=-1), jnp.cumsum(x)[-1]


def long_dot(a, b):
    return a @ b, jax.nn.relu(a @ b - 0.25)


def near_overflow(x):
    return jnp.exp(x), jnp.log(jnp.exp(x - 80.0)), jax.nn.logsumexp(x), jax.nn.softmax(x * 4.0)


def saturating(x):
    return jnp.tanh(x * 30.0), jax.nn.sigmoid(x * 50.0), jnp.log1p(x * 1e-6), jnp.expm1(x * 1e-5)


@SETTINGS
@given(n=st.integers(1, 64), big=st.sampled_from([1e3, 1e5, 1e7]), seed=st.integers(0, 2 ** 16))
def test_catastrophic_cancellation(pool, n, big, seed):
    x = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
    _check(cancellation, (x, np.float32(big)), pool, "cancellation")


@SETTINGS
@given(n=st.integers(2, 4096), offset=st.sampled_from([0.0, 1e2, 1e4]), seed=st.integers(0, 2 ** 16))
def test_one_pass_variance(pool, n, offset, seed):
    x = (np.random.default_rng(seed).standard_normal(n) + offset).astype(np.float32)
    _check(variance_one_pass, (x,), pool, "variance")


@SETTINGS
@given(rows=st.integers(1, 8), cols=st.sampled_from([1000, 20000, 100000]),
       seed=st.integers(0, 2 ** 16))
def test_large_reductions(pool, rows, cols, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, cols)) * np.exp(rng.uniform(-5, 5, (rows, cols)))).astype(np.float32)
    _check(large_sum, (x,), pool, "large_sum")


@SETTINGS
@given(m=st.integers(1, 16), k=st.sampled_from([64, 1024, 8192]), n=st.integers(1, 16),
       seed=st.integers(0, 2 ** 16))
def test_long_dots_and_relu_threshold(pool, m, k, n, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
    _check(long_dot, (a, b), pool, "long_dot")


@SETTINGS
@given(n=st.integers(1, 32), low=st.sampled_from([70.0, 80.0, 86.0]), seed=st.integers(0, 2 ** 16))
def test_exp_log_near_overflow(pool, n, low, seed):
    x = np.random.default_rng(seed).uniform(low, 89.0, n).astype(np.float32)  # exp overflows at 88.72
    _check(near_overflow, (x,), pool, "near_overflow")


@SETTINGS
@given(n=st.integers(1, 64), seed=st.integers(0, 2 ** 16))
def test_saturating_functions(pool, n, seed):
    x = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
    _check(saturating, (x,), pool, "saturating")


def _zoo_names():
    from xlaprobe.sources.models import MODELS
    return [pytest.param(name, marks=[pytest.mark.slow] if MODELS[name].large else [])
            for name in sorted(MODELS)]


@pytest.mark.parametrize("name", _zoo_names())
@settings(max_examples=1, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seed=st.integers(1, 2 ** 16))
def test_zoo_random_weights_and_inputs(pool, name, seed):
    from xlaprobe.sources.models import build_program
    _assert_no_finding(check_program(build_program(name, seed=seed), CONFIGS, pool))


@pytest.mark.slow
@pytest.mark.parametrize("name", _zoo_names())
@settings(max_examples=5, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seed=st.integers(1, 2 ** 30))
def test_zoo_many_seeds(pool, name, seed):
    from xlaprobe.sources.models import build_program
    _assert_no_finding(check_program(build_program(name, seed=seed), CONFIGS, pool))
