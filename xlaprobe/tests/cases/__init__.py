"""Regression cases: real XLA:CPU miscompilations present in jaxlib 0.10.2, in case-module format
(``program``, ``inputs``, ``expected``, ``KIND``, ``FAULTY_CONFIG``, ``ALSO_OP_BY_OP``)."""
"""Real XLA:CPU miscompilations as case modules (see each module's FAILS_ON)."""

import pathlib

import pytest

from xlaprobe.releases import envs
from xlaprobe.sources.user import Case, load_case

ROOT = pathlib.Path(__file__).parent


def load_present(name: str) -> Case:
    """The case `name` (``cbrt_subnormal`` or ``cbrt_subnormal.py``), or skip the test when the
    installed jaxlib fixed it: localization and reduction compile the faulty XLA in this process
    (a ``jaxlib==`` configuration of a release that still has it is flagged in test_cases)."""
    case = load_case(str(ROOT / (name if name.endswith(".py") else f"{name}.py")))
    installed = envs.installed_version()
    if case.fails_on and installed not in case.fails_on:
        pytest.skip(f"{name} is fixed in jaxlib {installed} (wrong on {case.fails_on[-1]} and "
                    "earlier)")
    return case
