"""Real XLA bugs the partitioned hunt found on jax/jaxlib 0.12.0.1 (tests/spmd_bugs: standalone
jax-only scripts that present their own host devices). Each case asserts the bug is still there;
when one fails, the installed release fixed it: move the script to a regression test."""

import os
import pathlib
import subprocess
import sys

import pytest

BUGS = pathlib.Path(__file__).parent / "spmd_bugs"
ABORT = -6  # SIGABRT: a CHECK failure or LOG(FATAL) in XLA

#: (script, its arguments, expected exit code, "stdout" or "stderr", text it must print there).
CASES = [
    ("reduce_window_base_dilation_negative_padding.py", (), ABORT, "stderr",
     "get_first_valid_element_offset_on_dilated_shard"),
    ("reduce_window_base_dilation_negative_padding.py", ("gspmd",), 0, "stdout", "2 devices:"),
    ("reduce_window_stride_shard_shape.py", ("4",), ABORT, "stderr", "sharded_rw->shape()"),
    ("reduce_window_stride_shard_shape.py", ("4", "gspmd"), 0, "stdout", "4 devices:"),
    ("reduce_window_stride_shard_shape.py", ("2",), 0, "stdout", "2 devices:"),
    ("sharded_bitwise_reduction_unimplemented.py", ("xor",), 1, "stdout",
     "Unsupported reduction computation"),
    ("sharded_bitwise_reduction_unimplemented.py", ("and",), 1, "stdout",
     "Unsupported reduction computation"),
    ("sharded_bitwise_reduction_unimplemented.py", ("or",), 1, "stdout",
     "Unsupported reduction computation"),
    ("dynamic_update_slice_clamp_dropped.py", ("shardy",), 1, "stdout", "2 devices: [-1.0, 3.0]"),
    ("dynamic_update_slice_clamp_dropped.py", ("gspmd",), 1, "stdout", "2 devices: [-1.0, 3.0]"),
    ("scatter_index_sharded_invalid_hlo.py", ("shardy",), 1, "stdout", "hlo_verifier"),
    ("scatter_index_sharded_invalid_hlo.py", ("gspmd",), 1, "stdout", "hlo_verifier"),
    ("sharded_min_max_drops_nan.py", ("min",), 1, "stdout", "one device: nan"),
    ("sharded_min_max_drops_nan.py", ("max",), 1, "stdout", "one device: nan"),
    ("sharded_min_max_drops_nan.py", ("min", "gspmd"), 1, "stdout", "one device: nan"),
    ("gather_int8_indices_abort.py", ("shardy",), ABORT, "stderr", "Unsupported indices type: S8"),
    ("gather_int8_indices_abort.py", ("gspmd",), ABORT, "stderr", "Unsupported indices type: S8"),
    ("reduce_window_shift_sharded_consumer.py", ("shardy",), 1, "stdout", "2 devices: [0.0, 0.0]"),
    ("reduce_window_shift_sharded_consumer.py", ("gspmd",), 1, "stdout", "2 devices: [0.0, 0.0]"),
    ("conv_sharded_contraction_all_reduce_whole_mesh.py", (), 1, "stdout",
     "2x2 mesh: [16.0, 20.0, 24.0]"),
    ("conv_sharded_contraction_all_reduce_whole_mesh.py", ("gspmd",), 1, "stdout",
     "2x2 mesh: [16.0, 20.0, 24.0]"),
    ("conv_sharded_contraction_all_reduce_whole_mesh.py", ("0", "0"), 0, "stdout",
     "2x2 mesh: [6.0, 8.0, 10.0, 12.0]"),
]


@pytest.mark.slow
@pytest.mark.parametrize("script, args, code, stream, text", CASES,
                         ids=[f"{c[0][:-3]}-{'-'.join(c[1]) or 'default'}" for c in CASES])
def test_the_bug_is_still_there(script, args, code, stream, text):
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    done = subprocess.run([sys.executable, str(BUGS / script), *args], capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == code and text in getattr(done, stream), done.stdout + done.stderr
