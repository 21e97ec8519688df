"""Real XLA:CPU miscompilations (jaxlib 0.10.2) that `xlaprobe fuzz` found unaided, kept as
regression cases: the reference gives the right value and the faulty configuration is flagged."""

import pathlib

import numpy as np
import pytest

from xlaprobe.check import check_program
from xlaprobe.configs import reference
from xlaprobe.oracle import VerdictKind
from xlaprobe.sources.user import load_case

ROOT = pathlib.Path(__file__).parent / "fuzz_cases"
CASES = sorted(p.name for p in ROOT.glob("[a-z]*.py"))


@pytest.mark.parametrize("name", CASES)
def test_fuzz_case_is_flagged_and_the_reference_is_right(name, pool):
    case = load_case(str(ROOT / name))
    outputs = reference.evaluate(case.program.jaxpr, case.program.inputs)
    for got, want in zip(outputs, case.program.expected, strict=True):
        np.testing.assert_array_equal(np.asarray(got).astype(np.asarray(want).dtype), want)
    result = check_program(case.program, [case.faulty_config, "reference"], pool)
    kinds = {f.config: f.kind for f in result.findings}
    assert kinds == {case.faulty_config: VerdictKind.MISMATCH}, result.to_json()
