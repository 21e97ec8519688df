"""Capture of real runs: a training script's jitted programs saved once each, with their first
call's arrays, and checked clean; the script's own exit codes and errors pass through."""

import json
from pathlib import Path

import numpy as np
import pytest

from xlaprobe.captures import capture
from xlaprobe.checking import check_program
from xlaprobe.cli.capture import capture_command
from xlaprobe.errors import InvalidArgument
from xlaprobe.sources.targets import resolve

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "capture" / "train_mlp.py"


def test_training_script_programs_are_captured_once_and_check_clean(tmp_path, capsys, pool):
    code = capture_command([str(SCRIPT), "--steps", "3"], out_dir=tmp_path, min_equations=2)
    printed = capsys.readouterr().out
    assert code == 0 and "step 2: loss" in printed
    dirs = sorted(p.name for p in tmp_path.iterdir())
    assert [d.split("-")[0] for d in dirs] == ["accuracy", "train_step"]
    # The train step compiled again for the jax arrays its first call returned: one program.
    assert "train_step: 169 equations, 15 inputs, compiled 2 times" in printed
    metadata = json.loads((tmp_path / dirs[1] / "metadata.json").read_text())
    assert metadata["provenance"]["source"] == "capture"
    program = resolve(str(tmp_path / dirs[1])).program
    # The first call's arrays: the script's initial weights (seed 0) and first batch.
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 32)).astype(np.float32)
    w0 = (rng.standard_normal((32, 64)) / np.sqrt(32)).astype(np.float32)
    assert any(np.array_equal(a, w0) for a in program.inputs)
    assert any(np.array_equal(a, x[:32]) for a in program.inputs)
    result = check_program(program, ["xla", "reference"], pool)
    assert result.ok and not result.incomplete


def test_an_equinox_training_script_is_captured_and_checks_clean(tmp_path, capsys, pool):
    # A script written the Equinox way (filter_jit, filter_value_and_grad, max pooling, whose
    # gradient names a primitive in its parameters): its training step is saved and checked.
    pytest.importorskip("equinox")
    script = SCRIPT.parent / "train_equinox.py"
    code = capture_command([str(script), "--steps", "2"], out_dir=tmp_path, min_equations=8)
    printed = capsys.readouterr().out
    assert code == 0 and "step 1: loss" in printed
    [step] = [p for p in tmp_path.iterdir() if p.name.startswith("make_step-")]
    assert f"check the largest: xlaprobe check {step}" in printed
    program = resolve(str(step)).program
    assert "select_and_scatter_add" in str(program.jaxpr)
    result = check_program(program, ["xla", "reference"], pool)
    assert result.ok and not result.incomplete


def test_typed_prng_keys_are_saved_as_key_data_and_check_clean(tmp_path, pool):
    # A typed key (jax.random.key) has no NumPy form: the program is saved over its key data
    # (uint32[2] for threefry2x32), wrapped inside, and the key it returns comes out as data.
    import jax
    import jax.numpy as jnp

    @jax.jit
    def init(key, x):
        k1, k2 = jax.random.split(key)
        return jnp.tanh(x @ jax.random.normal(k1, (4, 3))), k2

    key = jax.random.key(7)
    with capture(tmp_path) as captured:
        weights, next_key = init(key, jnp.ones((2, 4), jnp.float32))
    [entry] = [p for p in captured.programs.values() if p.name == "init"]
    assert entry.artifact and not entry.error
    program = resolve(entry.artifact).program
    assert program.inputs[0].dtype == np.uint32 and program.inputs[0].shape == (2,)
    assert np.array_equal(program.inputs[0], jax.random.key_data(key))
    assert "random_wrap" in str(program.jaxpr) and "random_unwrap" in str(program.jaxpr)
    result = check_program(program, ["xla", "reference"], pool)
    assert result.ok and not result.incomplete
    xla = result.outcomes[result.configs.index("xla")].outputs
    assert np.array_equal(xla[0], np.asarray(weights))  # the script's own values
    assert np.array_equal(xla[1], jax.random.key_data(next_key))


def test_functions_named_like_primitives_are_captured_and_dispatch_is_not(tmp_path):
    # `split` and `sin` are primitive names: op-by-op dispatch of jnp.sin is a jit named "sin"
    # binding only sin (left out); a user's jitted sin computing more is a program (kept).
    import jax
    import jax.numpy as jnp

    def split(x):
        a, b = jnp.split(x, 2)
        return a * 2 + b, jnp.tanh(a)

    def sin(x):
        return jnp.sin(x) * jnp.cos(x) + x

    x = np.linspace(0, 1, 8, dtype=np.float32)
    with capture(tmp_path) as captured:
        jax.jit(split)(x)
        jax.jit(sin)(x)
        jnp.sin(jnp.asarray(x))                           # dispatch: left out
    names = sorted(p.name for p in captured.programs.values())
    assert names == ["sin", "split"] and captured.skipped >= 1
    assert all(p.artifact for p in captured.programs.values())


def test_capture_block_leaves_out_op_by_op_dispatch(tmp_path):
    import jax
    import jax.numpy as jnp

    with capture(tmp_path) as captured:
        jnp.ones(3) + 1                                   # single-op dispatches
        jax.jit(lambda a: jnp.tanh(a) * a)(np.ones(4, np.float32))
    (entry,) = captured.programs.values()
    assert entry.equations == 2 and entry.calls == 1 and entry.artifact
    assert captured.skipped >= 1


def test_script_errors_and_exit_codes_pass_through(tmp_path, capsys):
    failing = tmp_path / "fails.py"
    failing.write_text("import sys\nraise ValueError('bad batch')\n")
    assert capture_command([str(failing)], out_dir=tmp_path / "a", min_equations=2) == 1
    assert f"ValueError at {failing}:2: bad batch" in capsys.readouterr().err
    exiting = tmp_path / "exits.py"
    exiting.write_text("import sys\nsys.exit(3)\n")
    assert capture_command(["python3", str(exiting)], out_dir=tmp_path / "b",
                           min_equations=2) == 3
    with pytest.raises(InvalidArgument, match="no script"):
        capture_command([str(tmp_path / "none.py")], out_dir=tmp_path / "c", min_equations=2)
    with pytest.raises(InvalidArgument, match="give the script"):
        capture_command(["python"], out_dir=tmp_path / "d", min_equations=2)


def test_options_after_the_script_are_the_scripts(tmp_path):
    import subprocess
    import sys
    script = tmp_path / "argv.py"
    script.write_text("import sys\nprint('ARGV', sys.argv[1:])\n")
    done = subprocess.run([sys.executable, "-m", "xlaprobe.cli", "capture", "--out",
                           str(tmp_path / "c"), str(script), "--steps", "5", "--out", "zz"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "ARGV ['--steps', '5', '--out', 'zz']" in done.stdout
    assert (tmp_path / "c").is_dir() and not (tmp_path / "zz").exists()
    missing = subprocess.run([sys.executable, "-m", "xlaprobe.cli", "capture", "-m",
                              "no_such_module_zz"], capture_output=True, text=True, cwd=tmp_path)
    assert missing.returncode == 2 and "no module named no_such_module_zz" in missing.stderr
