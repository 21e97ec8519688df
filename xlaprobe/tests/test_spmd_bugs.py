"""Real XLA bugs the partitioned hunt found on jax/jaxlib 0.12.0.1 (tests/spmd_bugs: standalone
jax-only scripts that present their own host devices). Each test asserts the bug is still there;
when one fails, the installed release fixed it: move the script to a regression test."""

import os
import pathlib
import subprocess
import sys

import pytest

BUGS = pathlib.Path(__file__).parent / "spmd_bugs"


def _run(name: str, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    return subprocess.run([sys.executable, str(BUGS / name), *args], capture_output=True,
                          text=True, env=env, timeout=300)


@pytest.mark.slow
def test_shardy_aborts_on_a_base_dilated_reduce_window_with_negative_padding():
    done = _run("reduce_window_base_dilation_negative_padding.py")
    assert done.returncode == -6 and "get_first_valid_element_offset_on_dilated_shard" in done.stderr
    assert _run("reduce_window_base_dilation_negative_padding.py", "gspmd").returncode == 0


@pytest.mark.slow
@pytest.mark.parametrize("op", ["xor", "and", "or"])
def test_a_sharded_bitwise_reduction_does_not_compile(op):
    done = _run("sharded_bitwise_reduction_unimplemented.py", op)
    assert done.returncode == 1 and "Unsupported reduction computation" in done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("partitioner", ["shardy", "gspmd"])
def test_a_partitioned_dynamic_update_slice_drops_a_clamped_update(partitioner):
    done = _run("dynamic_update_slice_clamp_dropped.py", partitioner)
    assert done.returncode == 1 and "2 devices: [-1.  3.]" in done.stdout


@pytest.mark.slow
def test_shardy_aborts_on_a_strided_dilated_reduce_window_over_four_shards():
    done = _run("reduce_window_stride_shard_shape.py", "4")
    assert done.returncode == -6 and "sharded_rw->shape()" in done.stderr
    assert _run("reduce_window_stride_shard_shape.py", "4", "gspmd").returncode == 0
    assert _run("reduce_window_stride_shard_shape.py", "2").returncode == 0


@pytest.mark.slow
@pytest.mark.parametrize("partitioner", ["shardy", "gspmd"])
def test_a_scatter_with_sharded_indices_fails_the_hlo_verifier(partitioner):
    done = _run("scatter_index_sharded_invalid_hlo.py", partitioner)
    assert done.returncode == 1 and "hlo_verifier" in done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("args", [("min",), ("max",), ("min", "gspmd")])
def test_a_sharded_min_or_max_drops_a_nan(args):
    done = _run("sharded_min_max_drops_nan.py", *args)
    assert done.returncode == 1 and "one device: nan" in done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("partitioner", ["shardy", "gspmd"])
def test_a_partitioned_gather_with_int8_indices_aborts(partitioner):
    done = _run("gather_int8_indices_abort.py", partitioner)
    assert done.returncode == -6 and "Unsupported indices type: S8" in done.stderr
