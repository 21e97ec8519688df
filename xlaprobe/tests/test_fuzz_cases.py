"""Real XLA:CPU miscompilations (jaxlib 0.10.2) that `xlaprobe fuzz` found unaided, kept as
regression cases: the reference gives the right value, the case is flagged under a release that
has the bug (FAILS_ON) and the installed release computes it right where it fixed it."""

import importlib
import pathlib

import numpy as np
import pytest

from xlaprobe.checking import check_program
from xlaprobe.configs import reference
from xlaprobe.oracle import VerdictKind
from xlaprobe.releases import envs
from xlaprobe.sources.user import load_case

ROOT = pathlib.Path(__file__).parent / "fuzz_cases"
CASES = sorted(p.name for p in ROOT.glob("[a-z]*.py"))


@pytest.mark.parametrize("name", CASES)
def test_fuzz_case_is_flagged_and_the_reference_is_right(name, pool):
    case = load_case(str(ROOT / name))
    outputs = reference.evaluate(case.program.jaxpr, case.program.inputs)
    for got, want in zip(outputs, case.program.expected, strict=True):
        np.testing.assert_array_equal(np.asarray(got).astype(np.asarray(want).dtype), want)
    faulty = case.config_with_bug(envs.installed_version())
    configs = list(dict.fromkeys([case.faulty_config, faulty, "reference"]))
    result = check_program(case.program, configs, pool)
    kinds = {f.config: f.kind for f in result.findings}
    # Flagged under a release that has the bug (a wrong value, or the VERDICT the module names:
    # a compiler abort, a valid program rejected); the installed release is right where it fixed it.
    verdict = VerdictKind(getattr(importlib.import_module(f"tests.fuzz_cases.{name[:-3]}"),
                                  "VERDICT", "mismatch"))
    assert kinds == {faulty: verdict}, result.to_json()
