"""The ``xla`` configuration kind and XLA compiler option validation (configs/xla.py, xla_options.py)."""

from __future__ import annotations

import pathlib
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax._src.lib import _jax

from xlaprobe.configs import xla, xla_options
from xlaprobe.configs.registry import Configuration, get_kind
from xlaprobe.errors import InvalidArgument
from xlaprobe.program import Program, Provenance


def _program(fn, *args) -> Program:
    return Program.from_function(fn, args, Provenance("user", "test"))


def _masked_max(mask, scores):
    # shared/cases/xla_cpu_bugs/fastmath_masked_max.py: the mask term is -0.0 where mask == 1.
    s = scores + (-1.0 * 1e30 * (1.0 - mask))
    return s - s.max()


MASKED_MAX = (np.float32(1.0), np.array([0.9, 0.6], np.float32))


# --- known answers -------------------------------------------------------------------------------

def test_fastmath_masked_max_is_wrong_under_fastmath_only():
    program = _program(_masked_max, *MASKED_MAX)
    right = xla.KIND.run(Configuration.parse("xla"), program.jaxpr, program.inputs)
    np.testing.assert_allclose(right[0], [0.0, -0.3], atol=1e-6)
    wrong = xla.KIND.run(Configuration.parse("xla:fastmath"), program.jaxpr, program.inputs)
    # XLA's wrong answer (jaxlib 0.10.2): fast-math reassociation drops the max, leaving the raw scores.
    np.testing.assert_array_equal(wrong[0], np.array([0.9, 0.6], np.float32))
    same = xla.KIND.run(Configuration.parse("xla[xla_cpu_enable_fast_math=true]"), program.jaxpr,
                        program.inputs)
    np.testing.assert_array_equal(same[0], wrong[0])


def _dumped_debug_options(spec: str, tmp_path: pathlib.Path) -> str:
    program = _program(lambda x: jnp.sin(x) * 2.0 + 1.0, np.ones(4, np.float32))
    config = Configuration.parse(f"{spec}[xla_dump_to={tmp_path}]")
    outputs = xla.KIND.run(config, program.jaxpr, program.inputs)
    np.testing.assert_allclose(outputs[0], np.sin(np.ones(4)) * 2 + 1, rtol=1e-6)
    (dump,) = tmp_path.glob("*.debug_options")
    return dump.read_text()


def test_O0_reaches_xla(tmp_path):
    # O0 leaves the CPU HLO unchanged, so check the DebugOptions XLA itself dumps for the module.
    assert "xla_backend_optimization_level: 0" in _dumped_debug_options("xla:O0", tmp_path / "o0")
    assert "xla_backend_optimization_level: 0" not in _dumped_debug_options("xla", tmp_path / "o3")


def test_fastmath_reaches_xla(tmp_path):
    assert "xla_cpu_enable_fast_math: true" in _dumped_debug_options("xla:fastmath", tmp_path)


def test_compile_program_gives_hlo_and_cost_analysis():
    program = _program(lambda x: jnp.sin(x) * 2.0 + 1.0, np.ones(4, np.float32))
    compiled = xla.compile_program(Configuration.parse("xla"), program.jaxpr, program.inputs)
    assert "fusion" in compiled.as_text()
    assert compiled.cost_analysis()["transcendentals"] == 4.0
    outputs = xla.KIND.run(Configuration.parse("xla"), program.jaxpr, program.inputs)
    assert isinstance(outputs, list) and isinstance(outputs[0], np.ndarray)


def test_pass_list_reaches_xla_comma_joined():
    # `+` joins values in a spec; XLA gets "fusion,fusion-wrapper" and then fuses nothing.
    program = _program(lambda x: jnp.sin(x) * 2.0 + 1.0, np.ones(4, np.float32))
    config = Configuration.parse("xla[xla_disable_hlo_passes=fusion+fusion-wrapper]")
    assert xla.compiler_options(config) == {"xla_disable_hlo_passes": "fusion,fusion-wrapper"}
    text = xla.compile_program(config, program.jaxpr, program.inputs).as_text()
    # jax 0.12's XLA wraps every op left unfused in a one-op loop fusion ("wrapped_sine"): nothing
    # is fused together, unlike under the defaults.
    fused = re.findall(r"%(\S+) = \S+ fusion\(", text)
    assert fused and all(name.startswith("wrapped_") for name in fused), fused
    default = xla.compile_program(Configuration("xla"), program.jaxpr, program.inputs).as_text()
    assert any(not n.startswith("wrapped_") for n in re.findall(r"%(\S+) = \S+ fusion\(", default))


def test_variant_options_are_overridden_by_spec_options():
    config = Configuration.parse("xla:O0[xla_backend_optimization_level=2,xla_cpu_enable_fast_math=true]")
    assert xla.compiler_options(config) == {"xla_backend_optimization_level": 2,
                                            "xla_cpu_enable_fast_math": True}
    assert xla.compiler_options(Configuration.parse("xla")) == {}
    assert get_kind("xla").isolation_group(config) == "default"


# --- validation errors (in the parent process, without compiling) ---------------------------------

@pytest.mark.parametrize("spec, words", [
    ("xla[xla_cpu_enable_fastmath=true]", ["unknown XLA compiler option 'xla_cpu_enable_fastmath'",
                                           "did you mean 'xla_cpu_enable_fast_math'"]),
    ("xla[xla_backend_optimisation_level=0]", ["did you mean 'xla_backend_optimization_level'"]),
    ("xla[xla_cpu_enable_fast_math=yes]", ["'yes' is not a bool", "true or false"]),
    ("xla[xla_backend_optimization_level=high]", ["'high' is not an integer"]),
    ("xla[xla_backend_optimization_level=4294967296]", ["out of the int32 range"]),
    ("xla[xla_gpu_autotune_gemm_rtol=abc]", ["'abc' is not a number"]),
    ("xla[xla_gpu_shape_checks=RUNTIM]", ["'RUNTIM' is not one of", "did you mean 'RUNTIME'"]),
    ("xla[xla_gpu_analytical_latency_estimator_options=a]", ["message option cannot be set"]),
    ("xla[xla_disable_hlo_passes=algsmp]", ["unknown HLO pass or pipeline 'algsmp'",
                                            "did you mean 'algsimp'"]),
    ("xla[xla_enable_hlo_passes_only=fusion+fusoin]", ["unknown HLO pass or pipeline 'fusoin'"]),
    ("xla[xla_disable_hlo_passes=algsimp,xla_enable_hlo_passes_only=fusion]", ["cannot be combined"]),
    ("xla:O1", ["unknown variant 'xla:O1'", "xla:O0, xla:fastmath"]),
])
def test_invalid_specs_give_one_line_errors(spec, words):
    with pytest.raises(InvalidArgument) as info:
        Configuration.parse(spec)
    message = str(info.value)
    assert "\n" not in message
    for word in words:
        assert word in message


@pytest.mark.parametrize("spec", [
    "xla[xla_disable_hlo_passes=algsimp+fusion]",
    "xla[xla_disable_hlo_passes=HLO passes after layout assignment]",   # a pipeline name
    "xla[xla_enable_hlo_passes_only=simplify-sorts]",
    "xla[xla_gpu_enable_command_buffer=FUSION+CUBLAS]",                 # repeated enum
    "xla[memory_fitting_level=O2,optimization_level=O1]",              # ExecutableBuildOptions
    "xla[xla_cpu_max_isa=AVX2,xla_gpu_autotune_gemm_rtol=1]",
])
def test_valid_specs_parse(spec):
    assert str(Configuration.parse(spec)) == spec


# --- the option schema agrees with XLA -------------------------------------------------------------

def test_schema_holds_every_option_jaxlib_exposes():
    # An independent list: the DebugOptions properties jaxlib's Python bindings expose.
    exposed = {name for name in dir(_jax.DebugOptions) if name.startswith("xla_")}
    specs = xla_options.option_specs()
    assert specs is not None and len(specs) > 250
    assert exposed <= set(specs)
    assert specs["xla_cpu_enable_fast_math"] == xla_options.OptionSpec("xla_cpu_enable_fast_math", "bool")
    assert specs["xla_disable_hlo_passes"].repeated


def _default_option_texts() -> dict[str, str]:
    """XLA's default DebugOptions (those set in code, as proto text) as spec value texts."""
    compile_options = _jax.CompileOptions()  # keep alive: debug_options points into it
    text = str(compile_options.executable_build_options.debug_options)
    specs = xla_options.option_specs()
    values: dict[str, str] = {}
    depth = 0
    for line in text.splitlines()[1:]:
        if line.endswith("{"):
            depth += 1
        elif line.strip() == "}":
            depth -= 1
        elif depth == 0 and ": " in line:
            name, _, value = line.partition(": ")
            value = value.strip('"')
            if value and name in specs and specs[name].repeated and name in values:
                values[name] += xla_options.LIST_SEPARATOR + value
            elif value:
                values[name] = value
    return values


def test_every_default_option_converts_to_a_value_xla_accepts():
    # ~220 options of every kind (bool, ints, floats, strings, enums, repeated enums) at their
    # defaults: one compile fails if any conversion gives XLA a type it rejects.
    values = _default_option_texts()
    assert len(values) > 150
    options = xla_options.compiler_options(sorted(values.items()), check_passes=False)
    compiled = jax.jit(lambda x: x * 2).lower(np.float32(1)).compile(compiler_options=options)
    assert float(compiled(np.float32(3))) == 6.0


def test_xla_rejects_what_we_reject_and_accepts_what_we_accept():
    lowered = jax.jit(lambda x: x + 1).lower(np.float32(1))
    with pytest.raises(Exception, match="No such compile option"):
        lowered.compile(compiler_options={"xla_cpu_enable_fastmath": True})
    with pytest.raises(Exception, match="not a valid bool"):
        lowered.compile(compiler_options={"xla_cpu_enable_fast_math": "true"})  # hence the conversion
    lowered.compile(compiler_options=xla_options.compiler_options([("xla_cpu_enable_fast_math", "true")]))
    build_options = [("memory_fitting_level", "O2"), ("optimization_level", "O1")]
    # jax 0.12 dropped exec_time_optimization_effort and memory_fitting_effort: now unknown names.
    with pytest.raises(InvalidArgument, match="exec_time_optimization_effort"):
        xla_options.compiler_options([("exec_time_optimization_effort", "-0.5")])
    assert xla_options.compiler_options(build_options)["optimization_level"] == 19
    lowered.compile(compiler_options=xla_options.compiler_options(build_options))


def test_pass_list_covers_what_the_pipeline_runs():
    script = ("import sys, json, jax, jax.numpy as jnp, numpy as np\n"
              "for options in json.loads(sys.argv[1]):\n"
              "    jax.jit(lambda x: jnp.sort(jnp.cumsum(jnp.tanh(x @ x.T), 0), 1)).lower("
              "np.ones((4, 4), np.float32)).compile(compiler_options=options)\n")
    seen = xla_options.collect_pass_names([{}], script=script, timeout=120)
    assert {"algsimp", "fusion", "simplification"} <= seen
    assert seen <= xla_options.pass_names()


# --- round trip ------------------------------------------------------------------------------------

def _value_strategy(spec: xla_options.OptionSpec) -> st.SearchStrategy[str]:
    if spec.kind == "bool":
        return st.sampled_from(["true", "false"])
    if spec.kind == "int32":
        return st.integers(-2**31, 2**31 - 1).map(str)
    if spec.kind == "int64":
        return st.integers(-2**63, 2**63 - 1).map(str)
    if spec.kind == "float":
        return st.floats(allow_nan=False, allow_infinity=False, width=32).map(repr)
    if spec.kind == "enum":
        single = st.sampled_from(spec.enum_values)
        if spec.repeated:
            return st.lists(single, min_size=1, max_size=3).map(xla_options.LIST_SEPARATOR.join)
        return single
    if spec.name in xla_options.PASS_LIST_OPTIONS:
        return (st.lists(st.sampled_from(sorted(xla_options.pass_names())), min_size=1, max_size=3)
                .map(xla_options.LIST_SEPARATOR.join))
    return st.text("abcxyz_./-0123456789", min_size=1, max_size=12).filter(lambda s: s == s.strip())


_SETTABLE = sorted(name for name, spec in (xla_options.option_specs() or {}).items()
                   if spec.kind in ("bool", "int32", "int64", "float", "string")
                   or (spec.kind == "enum" and spec.enum_values))


@st.composite
def _configs(draw) -> Configuration:
    names = draw(st.lists(st.sampled_from(_SETTABLE), max_size=5, unique=True)
                 .filter(lambda ns: not set(xla_options.PASS_LIST_OPTIONS) <= set(ns)))
    specs = xla_options.option_specs()
    options = tuple(sorted((name, draw(_value_strategy(specs[name]))) for name in names))
    return Configuration("xla", draw(st.sampled_from([None, "O0", "fastmath"])), options)


@settings(max_examples=80, deadline=None)
@given(_configs())
def test_spec_round_trips(config):
    assert Configuration.parse(str(config)) == config
    xla.KIND.validate(config)
