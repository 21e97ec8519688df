"""The seven real XLA:CPU miscompilations of jaxlib 0.10.2 (tests/cases): each is flagged with the
default configurations plus its FAULTY_CONFIG, and the reference gives the right value."""

import importlib
import pathlib

import numpy as np
import pytest

from xlaprobe.check import DEFAULT_CONFIGS, check_program
from xlaprobe.configs import reference
from xlaprobe.oracle import VerdictKind
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
    case, module = _case(name)
    configs = DEFAULT_CONFIGS.split(",")
    if module.FAULTY_CONFIG not in configs:
        configs.append(module.FAULTY_CONFIG)
    result = check_program(case.program, configs, pool)
    assert result.judged_against == "reference"
    by_config = {f.config: f for f in result.findings}
    assert module.FAULTY_CONFIG in by_config, result.to_json()
    # conv_negative_padding reads stale memory: its garbage is NaN in some processes.
    kinds = {VerdictKind.MISMATCH, VerdictKind.NAN_MISMATCH} \
        if name == "conv_negative_padding" else {VerdictKind.MISMATCH}
    assert by_config[module.FAULTY_CONFIG].kind in kinds
    # The reference is right (checked against expected()), so it is never a finding.
    assert "reference" not in by_config
    if module.ALSO_OP_BY_OP:
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
