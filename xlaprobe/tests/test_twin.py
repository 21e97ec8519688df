"""Tier 4's trusted twin: instruction matching between two compiles, the agreement bound, and the
portable form of an optimized module that compiles again with the same values."""

import numpy as np
import pytest

from xlaprobe.hlo import HloText, kernel_module, portable
from xlaprobe.localization.inside import run_module
from xlaprobe.localization.twin import agrees, find_twin, match_computation

# A faulty module whose fused subtract has its operands swapped (as mutant swap-subtract-fused
# leaves it) and a trusted one whose pipeline numbered the kernel differently.
FAULTY = """HloModule jit_f, entry_computation_layout={(f32[4]{0}, f32[4]{0})->f32[4]{0}}

%fused_computation (param_0: f32[4], param_1: f32[4]) -> f32[4] {
  %param_0 = f32[4]{0} parameter(0)
  %param_1 = f32[4]{0} parameter(1)
  %sub.0 = f32[4]{0} subtract(%param_1, %param_0), metadata={op_name="jit(f)/eqn0/sub"}
  %exp.0 = f32[4]{0} exponential(%sub.0), metadata={op_name="jit(f)/eqn1/exp"}
  ROOT %mul.0 = f32[4]{0} multiply(%exp.0, %param_0), metadata={op_name="jit(f)/eqn2/mul"}
}

ENTRY %main (x: f32[4], y: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  %y = f32[4]{0} parameter(1)
  ROOT %subtract_fusion = f32[4]{0} fusion(%x, %y), kind=kLoop, calls=%fused_computation, metadata={op_name="jit(f)/eqn2/mul"}
}
"""
TRUSTED = """HloModule jit_f, entry_computation_layout={(f32[4]{0}, f32[4]{0})->f32[4]{0}}

%fused_computation.1 (param_0.1: f32[4], param_1.1: f32[4]) -> f32[4] {
  %param_0.1 = f32[4]{0} parameter(0)
  %param_1.1 = f32[4]{0} parameter(1)
  %subtract.7 = f32[4]{0} subtract(%param_0.1, %param_1.1), metadata={op_name="jit(f)/eqn0/sub"}
  %exponential.2 = f32[4]{0} exponential(%subtract.7), metadata={op_name="jit(f)/eqn1/exp"}
  ROOT %multiply.3 = f32[4]{0} multiply(%exponential.2, %param_0.1), metadata={op_name="jit(f)/eqn2/mul"}
}

%other (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %neg.1 = f32[4]{0} negate(%p), metadata={op_name="jit(f)/eqn5/neg"}
}

ENTRY %main (x: f32[4], y: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  %y = f32[4]{0} parameter(1)
  %negate_fusion = f32[4]{0} fusion(%x), kind=kLoop, calls=%other
  ROOT %multiply_fusion = f32[4]{0} fusion(%x, %y), kind=kLoop, calls=%fused_computation.1
}
"""


def _instructions(text):
    return list(HloText(text).instructions())


def test_match_by_name_then_by_equation_opcode_and_shape():
    faulty = [i for i in _instructions(FAULTY) if i.computation == "fused_computation"]
    trusted = [i for i in _instructions(TRUSTED) if i.computation == "fused_computation.1"]
    assert match_computation(faulty, trusted) == {
        "sub.0": "subtract.7", "exp.0": "exponential.2", "mul.0": "multiply.3"}
    # Same names win even where the opcode changed (a fault may change it); parameters and
    # constants are never matched.
    renamed = TRUSTED.replace("subtract.7", "sub.0").replace("subtract(", "add(")
    trusted = [i for i in _instructions(renamed) if i.computation == "fused_computation.1"]
    assert match_computation(faulty, trusted)["sub.0"] == "sub.0"


def test_find_twin_picks_the_kernel_sharing_the_most_instructions():
    twin = find_twin(_instructions(FAULTY), "fused_computation", "subtract_fusion",
                     _instructions(TRUSTED))
    assert twin is not None
    assert (twin.fusion, twin.computation) == ("multiply_fusion", "fused_computation.1")
    assert len(twin.names) == 3
    assert find_twin(_instructions(FAULTY), "fused_computation", "subtract_fusion",
                     _instructions(TRUSTED.replace("eqn", "other"))) is None


def test_agreement_is_relative_to_the_leaf_scale():
    # 1e-4 of the leaf's largest magnitude: near-zero elements may move by that much.
    assert agrees(np.float32([1000.0, 0.0]), np.float32([1000.0, 0.05]), "f32")
    assert not agrees(np.float32([1000.0, 0.0]), np.float32([1000.0, 0.5]), "f32")
    assert not agrees(np.float32([np.nan, 1]), np.float32([0, 1]), "f32")
    assert agrees(np.float32([np.inf, 1]), np.float32([np.inf, 1]), "f32")
    assert not agrees(np.float32([-np.inf, 1]), np.float32([np.inf, 1]), "f32")
    assert not agrees(np.float32([1, 2]), np.float32([1, 2, 3]), "f32")
    assert agrees(np.array([True]), np.array([True]), "pred")


def test_portable_module_turns_fusions_into_calls_and_keeps_values():
    text = portable(FAULTY)
    assert "fusion(" not in text and "call(%x, %y), to_apply=%fused_computation" in text
    x, y = np.float32([1, 2, 3, 4]), np.float32([0.5, 0.5, 0.5, 0.5])
    [out] = run_module(None, None, text=text, args=[x, y], options={})
    np.testing.assert_allclose(out, np.exp(y - x) * x, rtol=1e-6)  # the swapped subtract


@pytest.mark.parametrize("replace_sub", [False, True])
def test_kernel_module_replaces_and_exposes_instructions(replace_sub):
    x, y = np.float32([1, 2, 3, 4]), np.float32([0.5, 0.5, 0.5, 0.5])
    replaced = {"sub.0": 2} if replace_sub else {}
    module = kernel_module(FAULTY, "fused_computation", replaced, exposed=["sub.0", "mul.0"])
    right = x - y
    args = [x, y] + ([right] if replace_sub else [])
    sub, mul = run_module(None, None, text=module, args=args, options={})
    expected_sub = right if replace_sub else y - x
    np.testing.assert_allclose(sub, expected_sub, rtol=1e-6)
    np.testing.assert_allclose(mul, np.exp(expected_sub) * x, rtol=1e-6)


def test_feeding_follows_the_failing_outputs_back_through_the_entry():
    from xlaprobe.localization.fusion import feeding
    text = TRUSTED.replace(
        "  ROOT %multiply_fusion = f32[4]{0} fusion(%x, %y), kind=kLoop, calls=%fused_computation.1\n",
        "  %multiply_fusion = f32[4]{0} fusion(%x, %y), kind=kLoop, calls=%fused_computation.1\n"
        "  ROOT %out = (f32[4]{0}, f32[4]{0}) tuple(%negate_fusion, %multiply_fusion)\n")
    assert feeding(text, [1]) == {"multiply_fusion", "x", "y"}
    assert feeding(text, [0]) == {"negate_fusion", "x"}
    assert feeding(TRUSTED, [0]) == {"multiply_fusion", "x", "y"}  # a single output
