"""The seven real XLA:CPU miscompilations of jaxlib 0.10.2 (tests/cases): each is flagged with the
default configurations plus its FAULTY_CONFIG, and the reference gives the right value."""

import importlib
import pathlib

import numpy as np
import pytest

from xlaprobe.checking import DEFAULT_CONFIGS, check_program
from xlaprobe.configs import reference
from xlaprobe.oracle import VerdictKind
from xlaprobe.releases import envs
from xlaprobe.sources.user import load_case

CASES = sorted(p.stem for p in (pathlib.Path(__file__).parent / "cases").glob("[a-z]*.py"))


def _case(name):
    path = pathlib.Path(__file__).parent / "cases" / f"{name}.py"
    return load_case(str(path)), importlib.import_module(f"tests.cases.{name}")


def test_all_seven_cases_present():
    assert len(CASES) == 7


@pytest.mark.parametrize("name", CASES)
def test_reference_gives_the_right_value(name):
    case, module = _case(name)
    outputs = reference.evaluate(case.program.jaxpr, case.program.inputs)
    for got, want in zip(outputs, case.program.expected, strict=True):
        np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                                   rtol=1e-6, atol=0)


@pytest.mark.parametrize("name", CASES)
def test_case_is_flagged(name, pool):
    """Flagged under FAULTY_CONFIG where the installed release has the bug, else under the newest
    release that has it (jaxlib==V: the test makes that environment); where the installed release
    fixed it, its XLA must compute it right (the fix is a regression test too)."""
    case, module = _case(name)
    installed = envs.installed_version()
    faulty = case.config_with_bug(installed)
    configs = DEFAULT_CONFIGS.split(",")
    if faulty not in configs:
        configs.append(faulty)
    result = check_program(case.program, configs, pool)
    assert result.judged_against == "reference"
    by_config = {f.config: f for f in result.findings}
    assert faulty in by_config, result.to_json()
    # conv_negative_padding reads stale memory: its garbage is NaN in some processes.
    kinds = {VerdictKind.MISMATCH, VerdictKind.NAN_MISMATCH} \
        if name == "conv_negative_padding" else {VerdictKind.MISMATCH}
    assert by_config[faulty].kind in kinds
    # The reference is right (checked against expected()), so it is never a finding.
    assert "reference" not in by_config
    if installed not in case.fails_on:
        assert set(by_config) == {faulty}, f"{name} is fixed in {installed}: {result.to_json()}"
    elif module.ALSO_OP_BY_OP:
        # The fault is in XLA's code for the op itself: op-by-op execution shares it, so comparing
        # XLA configurations with each other cannot see it; only the NumPy reference does.
        assert "eager" in by_config
        if name != "conv_negative_padding":  # that one reads stale memory: its garbage varies
            xla_out = result.outcomes[result.configs.index("xla")].outputs
            eager_out = result.outcomes[result.configs.index("eager")].outputs
            for a, b in zip(xla_out, eager_out):
                np.testing.assert_array_equal(a, b)
    else:
        assert "eager" not in by_config


def test_windows_match_the_measured_releases():
    """FAILS_ON as measured (benchmarks/release_matrix.py) and as the public reports say."""
    windows = {name: _case(name)[0].fails_on for name in CASES}
    assert windows["dus_shifted_self_update"][0] == "0.5.3"
    assert windows["while_loop_skipped"][0] == "0.4.28"
    assert "0.4.33" not in windows["fastmath_masked_max"] and "0.7.2" in windows["fastmath_masked_max"]
    assert windows["int8_square_select_abs"][-1] == "0.10.2"  # fixed in 0.11
    for name in ("conv_negative_padding", "scatter_narrow_index_dtype", "while_loop_skipped"):
        assert windows[name][-1] == "0.11.2"  # fixed in 0.12
