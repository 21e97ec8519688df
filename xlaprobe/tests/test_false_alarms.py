"""Known false alarms (tests/false_alarms, copied from the shared cases): generated programs that
the default configurations flagged on jax 0.12.0.1 although XLA computed what the dtype allows
(scatters with repeated indices: accumulation order in float16 and bfloat16, products flushed to
zero part way in XLA:CPU's order). Each checks ok, or ok with a freedom's label whose evidence
run reproduces XLA's answer."""

import pathlib

import pytest

from xlaprobe.artifact import load_artifact
from xlaprobe.checking import DEFAULT_CONFIGS, FLUSHED, check_program
from xlaprobe.oracle import VerdictKind

ROOT = pathlib.Path(__file__).parent / "false_alarms"
CASES = sorted(p.name for p in ROOT.iterdir() if (p / "jaxpr.json").is_file())
#: The cases whose answer is a product flushed to zero part way: labelled ``ftz``, measured
#: against the flushed honest run (reference:ftz), which agrees exactly.
FLUSHED_PART_WAY = {"scatter_mul_ftz_intermediate", "scatter_mul_ftz_intermediate_2",
                    "scatter_mul_ftz_intermediate_3"}


def test_five_false_alarms_present():
    assert CASES == sorted(FLUSHED_PART_WAY | {"scatter_sub_f16_cancellation",
                                               "scan_scatter_narrow_accumulation"})


@pytest.mark.parametrize("name", CASES)
def test_false_alarm_checks_ok(name, pool):
    result = check_program(load_artifact(ROOT / name), DEFAULT_CONFIGS.split(","), pool)
    assert result.judged_against == "reference" and not result.incomplete
    assert result.ok, [(f.config, f.kind.value, f.outputs) for f in result.findings]
    labelled = [(c, v) for c, leaves in zip(result.configs, result.verdicts) for v in leaves
                if v.freedom]
    if name in FLUSHED_PART_WAY:
        assert {c for c, _ in labelled} == {"xla", "xla:O0", "eager"}
        assert all((v.kind, v.freedom, v.against, v.max_abs) == (VerdictKind.OK, "ftz",
                                                                   FLUSHED, 0.0)
                   for _, v in labelled)
    else:
        assert not labelled
