"""The ``spmd`` configuration kind (configs/spmd.py), its partitioning mutants (spmd_mutants.py)
and the sharded zoo (sources/sharded.py). Multi-device runs use a 2x2 mesh of host devices."""

from __future__ import annotations

import collections
import math

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.sharding import AbstractMesh, AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from xlaprobe.checking import check_program
from xlaprobe.configs import spmd
from xlaprobe.configs.registry import Configuration, parse_configs
from xlaprobe.configs.spmd_mutants import SPMD_MUTANTS, apply_spmd_mutant
from xlaprobe.errors import InvalidArgument
from xlaprobe.program import Program, Provenance
from xlaprobe.sources.sharded import spmd_program

MESH = AbstractMesh((4, 2), ("data", "model"), axis_types=(AxisType.Auto,) * 2)


def _constrained(x, w):
    x = jax.lax.with_sharding_constraint(x, NamedSharding(MESH, P("data", None)))
    y = jax.numpy.tanh(x @ w)
    return jax.lax.with_sharding_constraint(y, NamedSharding(MESH, P("data", "model")))


def _constrained_program() -> Program:
    rng = np.random.default_rng(0)
    return Program.from_function(_constrained, (rng.standard_normal((8, 6), np.float32),
                                                rng.standard_normal((6, 4), np.float32)),
                                 Provenance("user", "constrained"))


# --- the spec grammar -----------------------------------------------------------------------------

@settings(deadline=None, max_examples=40)  # the first example loads XLA's option table
@given(mesh=st.lists(st.integers(1, 4), min_size=1, max_size=3),
       partitioner=st.sampled_from([None, "shardy", "gspmd"]),
       donate=st.sampled_from([None, "all", "0", "0+2"]),
       fast=st.booleans())
def test_spec_round_trips(mesh, partitioner, donate, fast):
    options = [f"mesh={'x'.join(map(str, mesh))}"]
    options += [f"partitioner={partitioner}"] if partitioner else []
    options += [f"donate={donate}"] if donate else []
    options += ["xla_cpu_enable_fast_math=true"] if fast else []
    config = Configuration.parse(f"spmd[{','.join(options)}]")
    assert Configuration.parse(str(config)) == config
    assert spmd.settings(config).devices == math.prod(mesh)
    assert config.isolation_group == ("xla-flags:--xla_force_host_platform_device_count="
                                      f"{math.prod(mesh)}")
    assert config.compiler_options == ({"xla_cpu_enable_fast_math": True} if fast else {})


@pytest.mark.parametrize("spec, message", [
    ("spmd", "needs a mesh"),
    ("spmd[mesh=128]", "at most 64 host devices"),
    ("spmd[mesh=4y2]", "malformed mesh"),
    ("spmd[mesh=0x2]", "malformed mesh"),
    ("spmd[mesh=4,partitioner=alpa]", "unknown partitioner 'alpa'"),
    ("spmd[mesh=4,donate=first]", "malformed donate"),
    ("spmd[mesh=4,mutant=nope]", "unknown partitioning mutant 'nope'"),
    ("spmd[mesh=4,xla_cpu_enable_fastmath=true]", "xla_cpu_enable_fastmath"),
    ("spmd:fast[mesh=4]", "takes no variant"),
])
def test_bad_specs_are_refused_in_one_line(spec, message):
    with pytest.raises(InvalidArgument, match=message) as error:
        parse_configs(spec)
    assert "\n" not in str(error.value)


# --- shardings -----------------------------------------------------------------------------------

def test_generated_spec_known_answers():
    axes = [("x", 4), ("y", 2)]
    assert spmd.generated_spec((8, 6), axes) == (("x",), ("y",))
    assert spmd.generated_spec((16, 3), axes) == (("x", "y"), ())
    assert spmd.generated_spec((3, 5), axes) == ((), ())  # uneven: replicated, never padded
    # x (4) divides only the 4; y (2) then divides the 6, not the 4's remaining 1.
    assert spmd.generated_spec((6, 4), axes) == (("y",), ("x",))


@settings(deadline=None)
@given(shape=st.lists(st.integers(1, 24), max_size=4),
       sizes=st.lists(st.integers(1, 4), min_size=1, max_size=3))
def test_generated_spec_always_divides(shape, sizes):
    axes = list(zip("xyz", sizes))
    spec = spmd.generated_spec(tuple(shape), axes)
    used = [a for entry in spec for a in entry]
    assert len(used) == len(set(used))
    for dim, entry in zip(shape, spec):
        assert dim % math.prod(dict(axes)[a] for a in entry) == 0


def test_plan_takes_the_program_shardings():
    program = _constrained_program()
    layout = spmd.plan(Configuration.parse("spmd[mesh=2x2]"), program.jaxpr)
    assert layout.source == "program"
    assert layout.axes == (("data", 2), ("model", 2))
    assert layout.inputs == ((("data",), ()), None)  # w has no constraint: replicated
    assert layout.outputs == ((("data",), ("model",)),)


def test_plan_generates_shardings_for_a_program_without():
    program = spmd_program("matmul_tanh_sum")
    layout = spmd.plan(Configuration.parse("spmd[mesh=2x2,donate=all]"), program.jaxpr)
    assert layout.source == "generated" and layout.donate == (0, 1)
    # a: f32[8,16], b: f32[16,6]; each axis takes the largest dimension it divides.
    assert layout.inputs == ((("y",), ("x",)), (("x", "y"), ()))


@pytest.mark.parametrize("spec, message", [
    ("spmd[mesh=8]", "axes data, model .2 axes.; give a mesh of that rank, e.g. mesh=4x2"),
    ("spmd[mesh=3x2]", "mesh axes data .3 devices. do not divide dimension 0 .size 8."),
    ("spmd[mesh=2x3]", "mesh axes model .3 devices. do not divide dimension 1 .size 4."),
    ("spmd[mesh=2x2,donate=5]", "donated input 5 does not exist; the program has 2 inputs"),
])
def test_a_mesh_that_does_not_fit_the_program_is_refused_before_any_run(spec, message):
    class NoPool:
        def run_many(self, *args, **kwargs):
            raise AssertionError("ran")
    with pytest.raises(InvalidArgument, match=message):
        check_program(_constrained_program(), [spec, "reference"], NoPool())


@pytest.mark.slow  # a CLI process (the library path is tested above in the default run)
def test_cli_refuses_a_mesh_that_does_not_divide(tmp_path):
    import subprocess
    import sys
    # Generated shardings never fail to divide; a program's own constraint does.
    case = tmp_path / "case.py"
    case.write_text("import jax\nfrom jax.sharding import AbstractMesh, AxisType, NamedSharding, "
                    "PartitionSpec as P\nMESH = AbstractMesh((2,), ('d',), axis_types=(AxisType.Auto,))\n"
                    "def fn(x):\n    return jax.lax.with_sharding_constraint(x, NamedSharding(MESH, "
                    "P('d')))\n")
    done = subprocess.run([sys.executable, "-m", "xlaprobe", "check", f"{case}:fn", "--inputs",
                           "f32[6]", "--configs", "xla,spmd[mesh=4]", "--db",
                           str(tmp_path / "x.db")], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "do not divide" in done.stderr


# --- partitioning mutants as pure HLO rewrites ---------------------------------------------------

_PERMUTE = """HloModule m, entry_computation_layout={(f32[4]{0})->f32[4]{0}}

ENTRY %main (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %cp = f32[4]{0} collective-permute(%p), channel_id=1, source_target_pairs={{0,1},{1,2},{2,3}}, metadata={op_name="jit(program)/eqn3/ppermute"}
}
"""


def test_halo_off_by_one_rotates_the_targets():
    text, site = apply_spmd_mutant("halo-off-by-one", _PERMUTE)
    assert "source_target_pairs={{0,2},{1,3},{2,1}}" in text
    assert site.equation == 3 and site.opcode == "collective-permute"


_GATHER = """HloModule m, entry_computation_layout={(f32[2,3]{1,0})->f32[4,3]{1,0}}

ENTRY %main (p: f32[2,3]) -> f32[4,3] {
  %p = f32[2,3]{1,0} parameter(0)
  ROOT %ag = f32[4,3]{1,0} all-gather(%p), channel_id=1, replica_groups={{0,1}}, dimensions={0}, metadata={op_name="jit(program)/eqn1/dot_general"}
}
"""


def test_all_gather_shard_order_reverses_the_blocks():
    text, site = apply_spmd_mutant("all-gather-shard-order", _GATHER)
    assert "slice={[2:4], [0:3]}" in text and "slice={[0:2], [0:3]}" in text
    assert text.index("[2:4]") < text.index("[0:2]")  # the second shard first
    assert "ROOT %ag = f32[4,3]{1,0} concatenate(" in text and site.equation == 1


_COMBINED = """HloModule m, entry_computation_layout={(f32[4]{0}, f32[2]{0})->(f32[4]{0}, f32[2]{0})}

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main (p: f32[4], q: f32[2]) -> (f32[4], f32[2]) {
  %p = f32[4]{0} parameter(0)
  %q = f32[2]{0} parameter(1)
  ROOT %ar = (f32[4]{0}, f32[2]{0}) all-reduce(%p, %q), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=%add, metadata={op_name="jit(program)/eqn7/add_any"}
}
"""


def test_a_combined_all_reduce_is_dropped_as_a_tuple_of_its_operands():
    # Data-parallel gradients come back in one combined all-reduce of several values.
    text, site = apply_spmd_mutant("all-reduce-dropped", _COMBINED)
    assert 'ROOT %ar = (f32[4]{0}, f32[2]{0}) tuple(%p, %q), metadata={op_name="jit(' in text
    assert site.equation == 7


def test_the_partitioning_mutants_are_listed():
    assert set(SPMD_MUTANTS) == {"all-reduce-dropped", "all-reduce-twice",
                                 "all-gather-shard-order", "halo-off-by-one",
                                 "donated-read-after-write"}


# --- on a mesh of host devices --------------------------------------------------------------------

def test_partitioned_runs_match_and_are_partitioned(pool):
    program = spmd_program("matmul_tanh_sum")
    specs = ["xla", "spmd[mesh=2x2]", "spmd[mesh=2x2,partitioner=gspmd]",
             "spmd[donate=all,mesh=2x2]", "reference"]
    result = check_program(program, specs, pool)
    assert result.ok, [f.config for f in result.findings]
    assert all(o.ran for o in result.outcomes)
    xla = result.outcomes[0].outputs
    for outcome in result.outcomes[1:4]:
        for got, want in zip(outcome.outputs, xla):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    hlo = pool.call(program, "xlaprobe.configs.spmd:partitioned_hlo",
                    {"spec": "spmd[mesh=2x2]"},
                    group=Configuration.parse("spmd[mesh=2x2]").isolation_group)
    assert hlo.ran, hlo.error
    # One device's program: a quarter of a, the contraction summed across devices.
    assert "f32[4,8]" in hlo.value and "all-reduce(" in hlo.value


def _dropped_all_reduce(pool):
    program = spmd_program("matmul_tanh_sum")
    spec = "spmd[mesh=2x2,mutant=all-reduce-dropped]"
    return program, spec, check_program(program, ["xla", spec, "reference"], pool)


def test_a_dropped_all_reduce_is_found_at_its_equation(pool):
    program, spec, result = _dropped_all_reduce(pool)
    (site,) = result.outcomes[1].mutations
    # The collective carries the op_name of the equation the partitioner made it for.
    assert site.opcode == "all-reduce" and site.equation >= 0
    assert site.op_name.endswith(program.jaxpr.jaxpr.eqns[site.equation].primitive.name)
    assert [f.config for f in result.findings] == [spec]


@pytest.mark.slow  # a jax process of its own with 4 host devices
def test_the_repro_of_a_partitioned_finding_presents_its_devices(pool, tmp_path):
    import os
    import subprocess
    import sys

    from xlaprobe.localization.spmd_repro import emit_spmd_repro
    program, spec, result = _dropped_all_reduce(pool)
    script = tmp_path / "repro.py"
    script.write_text(emit_spmd_repro(program, spec, result.outcomes[2].outputs))
    assert "--xla_force_host_platform_device_count=4" in script.read_text()
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env)
    assert done.returncode == 1 and "MISMATCH output 0" in done.stdout, done.stdout + done.stderr


def test_the_repro_script_sets_the_device_count_before_jax_starts():
    from xlaprobe.configs.reference import evaluate
    from xlaprobe.localization.spmd_repro import emit_spmd_repro
    program = spmd_program("matmul_tanh_sum")
    text = emit_spmd_repro(program, "spmd[mesh=2x2,partitioner=gspmd,donate=all]",
                           evaluate(program.jaxpr, program.inputs))
    assert text.index("--xla_force_host_platform_device_count=4") < text.index("\nimport jax\n")
    assert "SHARDY = False" in text and "DONATE = (0, 1)" in text
    assert "IN_SPECS = [('y', 'x', ), (('x', 'y'), None, )]" in text
    compile(text, "repro.py", "exec")


def test_the_sharded_zoo_carries_its_shardings():
    from xlaprobe.sources.models import build_program
    program = build_program("transformer_lm_tp")
    layout = spmd.plan(Configuration.parse("spmd[mesh=4x2]"), program.jaxpr)
    assert layout.source == "program" and layout.axes == (("data", 4), ("model", 2))
    names = program.output_names
    # Outputs are (loss, new params, new Adam state): fc1 column-parallel, fc2 row-parallel.
    fc1 = names.index("[1]['blocks'][0]['fc1']['kernel']")
    fc2 = names.index("[1]['blocks'][0]['fc2']['kernel']")
    assert layout.outputs[fc1] == ((), ("model",)) and layout.outputs[fc2] == (("model",), ())
    assert layout.inputs[-1] == (("data",), ())  # the batch of tokens, i32[8, 17]
    with pytest.raises(InvalidArgument, match="do not divide"):
        spmd.plan(Configuration.parse("spmd[mesh=3x2]"), program.jaxpr)


def test_a_sharded_program_survives_the_artifact_format():
    from xlaprobe import jaxpr_json
    program = _constrained_program()
    text, arrays = jaxpr_json.dumps(program.jaxpr)
    assert '"t":"named_sharding","sizes":[4,2],"names":["data","model"]' in text
    back = jaxpr_json.loads(text, arrays)
    config = Configuration.parse("spmd[mesh=2x2]")
    assert str(back) == str(program.jaxpr)
    assert spmd.plan(config, back) == spmd.plan(config, program.jaxpr)
    with pytest.raises(Exception, match="bad sharding spec"):
        jaxpr_json.loads(text.replace('"spec":[["data"]', '"spec":[["nope"]'), arrays)


def test_sharded_programs_carry_valid_constraints():
    from xlaprobe.sources.sharding_gen import coverage, sharded_generate
    total = collections.Counter()
    for seed in range(8):
        program = sharded_generate(seed, max_equations=12)
        again = sharded_generate(seed, max_equations=12)
        assert str(program.jaxpr) == str(again.jaxpr)  # a seed replays
        total += coverage(program.jaxpr)
        # Inputs and outputs always divide; the spmd kind accepts every generated program.
        assert spmd.plan(Configuration.parse("spmd[mesh=4x2]"), program.jaxpr).source in (
            "program", "generated")
    assert total["input"] > 0 and total["axis:x"] > 0 and total["axis:y"] > 0


def test_coverage_counts_an_uneven_intermediate_constraint():
    from xlaprobe.sources.sharding_gen import coverage

    def fn(x):
        y = jax.lax.with_sharding_constraint(jax.numpy.sin(x)[:7], NamedSharding(MESH, P("data")))
        return y * 2
    program = Program.from_function(fn, (np.ones(8, np.float32),), Provenance("user", "u"))
    assert coverage(program.jaxpr) == {"intermediate": 1, "uneven": 1, "axis:data": 1,
                                       "two-axes-one-dim": 0}


def test_the_reducer_writes_a_partitioned_repro_for_an_spmd_finding():
    from xlaprobe.configs.reference import evaluate
    from xlaprobe.localization.reduce import _compiler_options, _emit
    program = spmd_program("donated_update")
    config = "spmd[donate=all,mesh=2x2]"
    assert _compiler_options(Configuration.parse(config)) == ({}, "", "")
    text = _emit((program, config, {}, evaluate(program.jaxpr, program.inputs), ()), "", {})
    assert "--xla_force_host_platform_device_count=4" in text and "DONATE = (0, 1)" in text


def test_eager_runs_a_sharded_program_as_on_one_device():
    # Sharding constraints place values; op by op on one device they are the identity (eager
    # used to bind them to single-device arrays and fail with a TypeError).
    from xlaprobe.configs.eager import evaluate
    program = _constrained_program()
    [out] = evaluate(program.jaxpr, program.inputs)
    x, w = program.inputs
    np.testing.assert_allclose(np.asarray(out), np.tanh(x.astype(np.float64) @ w), rtol=1e-5)
