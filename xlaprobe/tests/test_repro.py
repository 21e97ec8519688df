"""repro.py as a compiler engineer pastes it: every primitive the fuzzer emits prints as a public
jax/lax call (no ``*_p.bind``), the script imports only what it uses, and the printed program
computes bit for bit what the program it came from computes (known answer: the program's own
XLA outputs)."""

import ast
import re

import jax
import ml_dtypes
import numpy as np
import pytest

from xlaprobe.configs.registry import Configuration
from xlaprobe.configs.xla import compile_program
from xlaprobe.localization.repro import emit_repro
from xlaprobe.program import Program, Provenance
from xlaprobe.sources import generator, ops

#: One primitive per family and every parametrized primitive the printer spells specially: the
#: default run; the slow sweep covers every primitive of the catalogue with each of its dtypes.
SAMPLE = ["add", "exp", "atan2", "and", "shift_right_logical", "lt", "select_n", "clamp",
          "convert_element_type", "bitcast_convert_type", "integer_pow", "reduce_precision",
          "round", "argmax", "reduce_sum", "reduce_xor", "cumlogsumexp", "dot_general",
          "conv_general_dilated", "reduce_window", "reduce_window_max", "reduce_window_sum",
          "broadcast_in_dim", "reshape", "squeeze", "transpose", "rev", "pad", "concatenate",
          "slice", "split", "dynamic_slice", "dynamic_update_slice", "gather", "scatter",
          "scatter-add", "iota", "sort", "top_k", "while", "scan", "cond", "random_bits"]


def _program(name: str, dtype: str, seed: int) -> Program | None:
    """One sampled use of catalogue op `name` on a `dtype` primary operand, as a Program with
    random inputs; None when the sampler does not fit the shape."""
    rule = ops.RULES[name]
    rng = np.random.default_rng(seed)
    builder = generator._Builder(rng)
    shape = (2, 3, 4, 5) if name == "conv_general_dilated" else (4, 6)
    try:
        sample = rule.sample(rng, ops.Aval(shape, ops.dtype_of(dtype)), builder)
    except Exception:  # a sampler may not take every shape
        return None
    if sample is None:
        return None
    args, inputs = [], []
    for spec in sample.operands:
        if spec.const is not None:
            args.append(np.asarray(spec.const, spec.aval.dtype))
            continue
        aval = builder.values[spec.value].aval if spec.value is not None else spec.aval
        args.append(None)
        inputs.append(generator.sample_input(rng, aval, spec.domain, no_subnormals=spec.exact))

    def fn(*arrays):
        it = iter(arrays)
        return rule.build(*[next(it) if a is None else a for a in args], **sample.params)
    try:
        return Program.from_function(fn, inputs, Provenance("test", f"{name}:{dtype}"))
    except Exception:  # JAX rejects this sample (a shape the rule's sampler did not plan for)
        return None


def _bits(array: np.ndarray) -> np.ndarray:
    array = np.asarray(array)
    floating = array.dtype.kind in "fc" or array.dtype.type.__module__.startswith("ml_dtypes")
    return array.view(f"u{array.dtype.itemsize}") if floating else array


def _unused_imports(source: str) -> list[str]:
    tree = ast.parse(source)
    imported = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                imported[(alias.asname or alias.name).split(".")[0]] = node.lineno
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                imported[alias.asname or alias.name] = node.lineno
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    return sorted(set(imported) - used)


def _check_one(name: str, dtype: str) -> bool:
    """Print one program of `name`, run the printed program jitted, compare bits; False when no
    sample fits."""
    program = next((p for p in (_program(name, dtype, s) for s in range(12)) if p is not None),
                   None)
    if program is None:
        return False
    compiled = compile_program(Configuration("xla"), program.jaxpr, program.inputs)
    expected = [np.asarray(o) for o in compiled(*program.inputs)]
    source = emit_repro(program, "xla", {}, expected)
    assert "_p.bind" not in source, f"{name} {dtype} printed with a primitive bind:\n{source}"
    assert not _unused_imports(source), (_unused_imports(source), source)
    namespace: dict = {"__name__": "repro_under_test"}
    exec(compile(source, "repro.py", "exec"), namespace)
    for given, rebuilt in zip(program.inputs, namespace["INPUTS"]):
        np.testing.assert_array_equal(_bits(rebuilt), _bits(given))
    outputs = jax.tree_util.tree_leaves(jax.jit(namespace["program"])(*namespace["INPUTS"]))
    assert len(outputs) == len(expected)
    for out, ref in zip(outputs, expected):
        out = np.asarray(out)
        assert out.dtype == ref.dtype and out.shape == ref.shape, (name, out.dtype, ref.dtype)
        np.testing.assert_array_equal(_bits(out), _bits(ref), err_msg=f"{name} {dtype}")
    return True


@pytest.mark.parametrize("name", SAMPLE)
def test_printed_primitive_is_public_and_bit_identical(name):
    assert _check_one(name, ops.RULES[name].dtypes[0]), f"no sample of {name}"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ops.RULES))
def test_every_catalogue_primitive_prints_bit_identical(name):
    checked = [dtype for dtype in ops.RULES[name].dtypes if _check_one(name, dtype)]
    assert checked, f"no sample of {name}"


def test_fallback_bind_is_named_in_a_comment():
    # A primitive with no public function (copy_p: jnp.array(copy=True) may skip it) still prints,
    # through its bind, and the file says which one and why.
    program = Program.from_function(lambda x: jax.lax.copy_p.bind(x) * 2, [np.ones(3, np.float32)],
                                    Provenance("test", "copy"))
    source = emit_repro(program, "xla", {}, [np.full(3, 2.0)])
    assert "lax.copy_p.bind(" in source
    comment = next(line for line in source.splitlines() if line.startswith("# copy:"))
    assert "no public jax function" in comment
    assert not _unused_imports(source)


def test_only_used_modules_are_imported():
    program = Program.from_function(lambda x: x + 1.0, [np.arange(3, dtype=np.float32)],
                                    Provenance("test", "inc"))
    source = emit_repro(program, "xla", {}, [np.arange(1, 4, dtype=np.float64)])
    assert "import base64" not in source and "jax.numpy" not in source
    assert not _unused_imports(source)
    big = Program.from_function(lambda x: x * 2.0, [np.arange(600, dtype=ml_dtypes.bfloat16)],
                                Provenance("test", "big"))
    source = emit_repro(big, "xla", {}, [np.arange(600) * 2.0])
    assert "import base64" in source and "import jax.numpy as jnp" in source
    assert not _unused_imports(source)


def _run_script(path):
    import os
    import pathlib
    import subprocess
    import sys
    root = pathlib.Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root / "src"), str(root)]),
               JAX_PLATFORMS="cpu")
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          env=env, timeout=300, cwd=path.parent)


def test_a_mutant_repro_needs_xlaprobe_and_shows_the_planted_fault(tmp_path):
    # exp(x - y) fuses: swap-subtract-fused computes exp(y - x). Known answer: NumPy's exp(x - y).
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    y = np.linspace(0, 3, 8, dtype=np.float32)
    program = Program.from_function(lambda a, b: jax.numpy.exp(a - b) * 2.0, [x, y],
                                    Provenance("test", "exp_sub"))
    reference = [2.0 * np.exp(x.astype(np.float64) - y)]
    source = emit_repro(program, "mutant:swap-subtract-fused", {}, reference,
                        mutant="swap-subtract-fused")
    assert "Needs jax, numpy and xlaprobe" in source.splitlines()[0]
    assert "install('swap-subtract-fused')" in source and not _unused_imports(source)
    (tmp_path / "repro.py").write_text(source)
    run = _run_script(tmp_path / "repro.py")
    assert run.returncode == 1 and "MISMATCH output 0" in run.stdout, run.stdout + run.stderr
    # plain numbers, not NumPy reprs (np.float32(5.436...)): exp(1) * 2 against exp(-1) * 2
    assert re.search(r"first at flat index 0: got 5\.43656\d*, expected 0\.73575888\d*$",
                     run.stdout, re.M), run.stdout
    healthy = emit_repro(program, "xla", {}, reference)  # the same program, no mutant: clean
    (tmp_path / "healthy.py").write_text(healthy)
    assert _run_script(tmp_path / "healthy.py").returncode == 0


def test_an_eager_repro_runs_op_by_op(tmp_path):
    # A real XLA:CPU abort (tests/fuzz_cases/reduce_window_negative_padding_abort.py) in a dead
    # op: jit's whole-program compile drops it and passes; op by op it aborts the compiler.
    def dead_op(x):
        jax.lax.reduce_window(x, -np.inf, jax.lax.max, (1,), (1,), ((-1, 0),))
        return x * 2.0
    x = np.array([3.0, 5.0], np.float32)
    program = Program.from_function(dead_op, [x], Provenance("test", "dead_op"))
    reference = [x.astype(np.float64) * 2]
    eager = emit_repro(program, "eager", {}, reference, eager=True, crash=True)
    assert "with jax.disable_jit():" in eager and "lax.reduce_window(" in eager
    (tmp_path / "eager.py").write_text(eager)
    run = _run_script(tmp_path / "eager.py")
    assert run.returncode == 1 and "CRASH" in run.stdout, run.stdout + run.stderr[-2000:]
    # What a jit repro showed: compiled whole, the dead op is gone and nothing fails (safe here).
    namespace: dict = {"__name__": "whole"}
    exec(compile(emit_repro(program, "eager", {}, reference), "whole.py", "exec"), namespace)
    assert namespace["main"]() == 0
