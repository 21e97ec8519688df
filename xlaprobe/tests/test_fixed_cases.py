"""Bugs that later releases fixed (tests/fixed_cases, from public reports): the reference gives the
right value, the installed release computes it right, and where today's StableHLO of the program
still carries the bug into the old XLA, the release that has it flags it (slow: it makes that
release's environment).

A ``jaxlib==V`` configuration runs *today's* lowering of the program under release V's XLA, so a
bug of an old JAX frontend (lowering, dtype rules) or one that needs the old way of embedding a
closed-over constant is not reproduced that way: those cases say why below.
"""

import pathlib

import jax
import numpy as np
import pytest

from xlaprobe.checking import REFERENCE, check_program
from xlaprobe.configs.registry import Configuration
from xlaprobe.configs import reference
from xlaprobe.oracle import VerdictKind
from xlaprobe.releases import envs
from xlaprobe.releases.kind import release_config, release_options
from xlaprobe.sources.user import load_case

ROOT = pathlib.Path(__file__).parent / "fixed_cases"
CASES = sorted(p.stem for p in ROOT.glob("[a-z]*.py"))
#: Cases today's lowering does not carry into the old XLA (measured with
#: benchmarks/release_matrix.py on 0.4.28-0.12.0.1), and why.
NOT_VIA_EXPORT = {
    "bf16_compensated_sum": "right under 0.4.28's XLA with today's lowering: the bug was 0.4.28's",
    "cumsum_bool_dtype": "a JAX dtype rule (jax-ml/jax#28646), not XLA",
    "gather_constant_fold": "jax 0.12 passes the closed-over table as an argument, so XLA has "
                            "no constant to fold",
    "int4_to_int8_convert": "fails on 0.4.13 only, which has no Python 3.12 wheels",
    "exp_nan_propagation": "a float64 case (X64): needs JAX_ENABLE_X64=1",
    "sum_cancellation_order": "under 0.4.28's XLA wrong once (release_matrix), right on reruns: "
                              "not a dependable regression test",
}


#: Cases whose right answer is defined by rounding every step to the program's dtypes.
ROUNDING_SEMANTICS = {"bf16_compensated_sum"}


def _case(name):
    if name == "exp_nan_propagation" and not jax.config.jax_enable_x64:
        pytest.skip(NOT_VIA_EXPORT[name])
    return load_case(str(ROOT / f"{name}.py"))


def test_eight_cases_present():
    assert len(CASES) == 8


#: Cases the installed release got wrong now and then: onednn_dot_add_fusion gave a NaN under
#: `xla` in 1 of 7 clean runs (session 18, a clean-clone CI run; right in the 6 others), so its
#: fix may be incomplete. Still run and judged; a failure is reported as xfail, not hidden.
INTERMITTENT = {"onednn_dot_add_fusion": "intermittent NaN under xla on the installed release "
                                         "(1 of 7 runs): the fix may be incomplete"}


@pytest.mark.parametrize("name", [pytest.param(c, marks=pytest.mark.xfail(
    strict=False, reason=INTERMITTENT[c])) if c in INTERMITTENT else c for c in CASES])
def test_reference_right_and_installed_release_right(name, pool):
    case = _case(name)
    # bf16_compensated_sum is right only when every step rounds to bfloat16 (its expected() does):
    # the native-dtype run gives that, while float64 gives the exact sum's error, 0.
    native = name in ROUNDING_SEMANTICS
    outputs = reference.evaluate(case.program.jaxpr, case.program.inputs, round_each_op=native)
    for got, want in zip(outputs, case.program.expected, strict=True):
        np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                                   rtol=1e-6, atol=1e-30)
    assert envs.installed_version() not in case.fails_on
    if native:  # the float64 oracle disagrees with expected() by design: compare with it
        outcome = pool.run(case.program, case.faulty_config)
        for got, want in zip(outcome.outputs, case.program.expected, strict=True):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
        return
    result = check_program(case.program, [case.faulty_config, REFERENCE], pool)
    assert result.ok, result.to_json()


#: The release (in FAILS_ON) under which today's lowering shows each other case wrong.
VIA_EXPORT = {"bool_nonstandard_convert": "0.7.2", "onednn_dot_add_fusion": "0.4.28"}


def test_every_case_is_accounted_for():
    assert set(VIA_EXPORT) | set(NOT_VIA_EXPORT) == set(CASES)
    assert not set(VIA_EXPORT) & set(NOT_VIA_EXPORT)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(VIA_EXPORT))
def test_flagged_under_a_release_that_has_the_bug(name, pool):
    case = _case(name)
    assert VIA_EXPORT[name] in case.fails_on
    options = release_options(Configuration.parse(case.faulty_config))
    faulty = str(release_config(VIA_EXPORT[name], options))
    result = check_program(case.program, [faulty, REFERENCE], pool)
    assert {f.config: f.kind for f in result.findings} == {faulty: VerdictKind.MISMATCH}
