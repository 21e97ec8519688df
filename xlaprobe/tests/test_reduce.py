"""Reduction (ddmin over equations, then shapes and values) and the standalone repro.py, against
known answers: the seven real XLA:CPU bug cases of tests/cases and a planted fault (ddmin itself
is tested in test_search.py)."""

import subprocess
import sys

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax

from tests.cases import ROOT as CASES_DIR, load_present
from xlaprobe.configs.registry import Configuration
from xlaprobe.configs.xla import compile_program
from xlaprobe.errors import InvalidArgument, NotReproducible
from xlaprobe.localization import make_pool
from xlaprobe.cli.reduce import reduce_command
from xlaprobe.hlo import kernel_text
from xlaprobe.localization.reduce import reduce, write_outputs
from xlaprobe.localization.repro import array_expr, emit_repro
from xlaprobe.program import Program, Provenance
from xlaprobe.sources.corpus import corpus_program


@pytest.fixture(scope="module")
def rpool():
    with make_pool(size=1, timeout_s=300) as pool:
        yield pool


# ------------------------------------------------------------------------------ printing


@pytest.mark.parametrize("value", [
    np.array([1.5, -0.0, np.nan, np.inf, -np.inf, 1e-45], np.float32),
    np.array([[1, -128], [127, 0]], np.int8),
    np.array([True, False]),
    np.array(3.25, np.float64),
    np.array([1.0, 2.5, -3.0], ml_dtypes.bfloat16),
    np.arange(300, dtype=np.uint16).reshape(3, 100),  # base64
    np.full((2, 3), 7, np.int32),
])
def test_array_expr_rebuilds_the_bits(value):
    rebuilt = eval(array_expr(value), {"np": np, "jnp": jnp, "base64": __import__("base64"),
                                       "nan": float("nan"), "inf": float("inf")})
    assert rebuilt.dtype == value.dtype and rebuilt.shape == value.shape
    floating = value.dtype.kind == "f" or value.dtype == ml_dtypes.bfloat16
    bits = f"u{value.dtype.itemsize}"
    np.testing.assert_array_equal(rebuilt.view(bits) if floating else rebuilt,
                                  value.view(bits) if floating else value)


def _control_flow(x, idx, upd):
    def body(c):
        return c[0] + 1, c[1] * 1.5

    _, y = lax.while_loop(lambda c: c[0] < 3, body, (0, x))
    z, ys = lax.scan(lambda c, v: (c + v, c * v), jnp.float32(0), y)
    w = lax.cond(z > 0, lambda a: a + 1.0, lambda a: a - 1.0, ys)
    s = w.at[idx].add(upd)
    return jnp.sort(s), jnp.argmax(s), lax.reduce_precision(s, 5, 10)


def test_emitted_program_computes_what_xla_computes():
    # while, scan, cond (switch), scatter-add, sort, argmax and a parametrized op, printed as lax
    # code and executed: the same outputs as the program compiled by xlaprobe.
    args = (np.linspace(-1, 1, 6, dtype=np.float32), np.array([1, 4], np.int32),
            np.array([10.0, 20.0], np.float32))
    program = Program.from_function(_control_flow, args, Provenance("user", "control"))
    expected = [np.asarray(o) for o in compile_program(Configuration("xla"), program.jaxpr,
                                                       program.inputs)(*program.inputs)]
    source = emit_repro(program, "xla", {}, expected)
    namespace: dict = {"__name__": "repro_under_test"}
    exec(compile(source, "repro.py", "exec"), namespace)
    outputs = jax.jit(namespace["program"])(*namespace["INPUTS"])
    for out, ref in zip(outputs, expected):
        np.testing.assert_array_equal(np.asarray(out), ref)
    assert namespace["main"]() == 0  # the printed program agrees with the values given


def test_kernel_text_holds_the_fusion_and_its_computations():
    program = corpus_program("row_sums")
    text = compile_program(Configuration("xla"), program.jaxpr, program.inputs).as_text()
    fusion = next(line.split("=")[0].strip().lstrip("ROOT ").lstrip("%")
                  for line in text.splitlines() if " fusion(" in line)
    hlo = kernel_text(text, [fusion])
    assert f"%{fusion} = " in hlo and "fused_computation" in hlo and "ENTRY" not in hlo
    assert kernel_text(text, ["no-such-instruction"]) == ""


# ------------------------------------------------------------------------------ real bugs

CASES = ["cbrt_subnormal.py", "conv_negative_padding.py", "dus_shifted_self_update.py",
         "fastmath_masked_max.py", "int8_square_select_abs.py", "scatter_narrow_index_dtype.py",
         "while_loop_skipped.py"]


@pytest.mark.parametrize("name", CASES)
def test_real_case_reduces_to_a_standalone_repro(name, rpool, tmp_path):
    case = load_present(name)
    result = reduce(case.program, case.faulty_config, rpool)
    assert result.equations_after <= min(5, len(case.program.jaxpr.jaxpr.eqns))
    assert result.input_elements_after <= result.input_elements_before
    assert not result.flaky, result.notes
    written = write_outputs(result, tmp_path, rpool)
    assert written.equations <= 5 and written.repro_exit == 1, written.notes
    # A fresh interpreter, only the file: it shows the fault.
    done = subprocess.run([sys.executable, "repro.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "MISMATCH" in done.stdout
    source = (tmp_path / "repro.py").read_text()
    assert not any(line.startswith(("import xlaprobe", "from xlaprobe"))
                   for line in source.splitlines())  # plain jax
    assert (tmp_path / "module.hlo").read_text().startswith("HloModule")
    assert (tmp_path / "reduction.json").is_file()
    assert (tmp_path / "artifact" / "metadata.json").is_file()


def test_reduction_keeps_the_failing_equation_of_a_planted_fault(rpool, tmp_path):
    # exp(x - y) * ...: the swapped subtract must survive; the repro registers the mutant's pass.
    program = corpus_program("fused_arithmetic")
    spec = "mutant:swap-subtract-fused"
    result = reduce(program, spec, rpool)
    assert "sub" in result.primitives and result.equations_after < result.equations_before
    assert result.kind == "mismatch"
    written = write_outputs(result, tmp_path, rpool)
    assert written.repro_exit == 1, written.notes
    assert written.kernels and (tmp_path / "fusion.hlo").read_text().strip()


def test_nothing_to_reduce_is_not_reproducible(rpool):
    with pytest.raises(NotReproducible, match="no finding"):
        reduce(corpus_program("matmul"), "xla", rpool)


# ------------------------------------------------------------------------------ command


def test_reduce_command_json(tmp_path, capsys):
    import json
    code = reduce_command(str(CASES_DIR / "dus_shifted_self_update.py"), "", db=tmp_path / "x.db",
                          json_output=True)
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["config"] == "xla" and data["equations_after"] <= 3
    assert data["written"]["repro_exit"] == 1
    assert list((tmp_path / "reductions").glob("*/repro.py"))


def test_reduce_command_bad_input(tmp_path):
    with pytest.raises(InvalidArgument, match="oracle"):
        reduce_command(str(CASES_DIR / "int8_square_select_abs.py"), "reference", db=tmp_path / "x.db")
    with pytest.raises(InvalidArgument, match="max-tests"):
        reduce_command(str(CASES_DIR / "int8_square_select_abs.py"), "xla", db=tmp_path / "x.db",
                       max_tests=0)
    with pytest.raises(NotReproducible, match="no finding"):
        reduce_command(str(CASES_DIR / "int8_square_select_abs.py"), "eager", db=tmp_path / "x.db")


@pytest.mark.parametrize("args,words", [
    (["reduce", str(CASES_DIR / "int8_square_select_abs.py"), "reference"], "oracle"),
    (["reduce", str(CASES_DIR / "int8_square_select_abs.py"), "xla:nope"], "unknown"),
    (["reduce", str(CASES_DIR / "int8_square_select_abs.py"), "--max-tests", "0"], "max-tests"),
    (["reduce", "42"], "no store"),
])
def test_reduce_cli_bad_input_one_line_exit_2(tmp_path, args, words):
    run = subprocess.run([sys.executable, "-m", "xlaprobe.cli", *args, "--db",
                          str(tmp_path / "x.db")], capture_output=True, text=True, timeout=300)
    assert run.returncode == 2, run.stdout + run.stderr
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in run.stderr, run.stderr


def test_repro_runs_from_a_relative_path(tmp_path, monkeypatch):
    # The default output directory is relative (.xlaprobe/reductions/...): the reproducer runs
    # in its own directory, so the path handed to Python must not be relative to ours.
    from xlaprobe.localization.reduce import run_repro
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "repro.py").write_text("import sys\nsys.exit(1)\n")
    monkeypatch.chdir(tmp_path)
    assert run_repro("out/repro.py")[0] == 1
