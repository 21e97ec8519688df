"""Localization tiers 3 and 5 on partitioned programs (``spmd`` configurations): the per-device
collective a planted partitioning fault changed or dropped (known answers: the mutant's own site),
and the pass search over the partitioned compile (known answer: the fast-math fault XLA's fusion
pass makes on one device is made by the same pass inside the partitioned module). Meshes of 2
and 4 host devices."""

from __future__ import annotations

import pytest

from xlaprobe.checking import check_program
from xlaprobe.configs.registry import Configuration
from xlaprobe.localization import localize
from xlaprobe.localization.fusion import differing_collectives, hlo_config
from xlaprobe.localization.kernels import trusted_partitioning
from xlaprobe.localization.passes import PARTITIONING
from xlaprobe.sources.sharded import spmd_program

from tests.cases import load_present


def _hlo_name(instruction: str) -> str:
    """The planted site's instruction as the mutated module prints it (the mutant renames
    ``-`` to ``_`` so that XLA's parser reads the module back)."""
    return instruction.replace("-", "_")


def _planted(pool, program_name: str, mutant: str):
    program = spmd_program(program_name)
    spec = f"spmd[mesh=2x2,mutant={mutant}]"
    check = check_program(program, ["xla", spec, "reference"], pool)
    (site,) = check.outcomes[1].mutations
    return localize(program, spec, pool, check=check), site


def test_an_spmd_compile_has_a_per_device_hlo_and_a_trusted_twin_only_when_planted():
    assert hlo_config("spmd[mesh=2x2]").kind == "spmd"
    assert str(trusted_partitioning(Configuration.parse(
        "spmd[mesh=2x2,mutant=halo-off-by-one,partitioner=gspmd]"))) == \
        "spmd[mesh=2x2,partitioner=gspmd]"
    assert trusted_partitioning(Configuration.parse("spmd[mesh=2x2]")) is None
    assert trusted_partitioning(Configuration.parse("xla")) is None


_TRUSTED = """ENTRY %main (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  %all-reduce = f32[4]{0} all-reduce(%p), channel_id=1, replica_groups={{0,1}}, to_apply=%add, metadata={op_name="jit(program)/eqn2/reduce_sum"}
  %collective-permute = f32[4]{0} collective-permute(%all-reduce), channel_id=2, source_target_pairs={{0,1},{1,0}}, metadata={op_name="jit(program)/eqn2/reduce_sum"}
  ROOT %r = f32[4]{0} add(%collective-permute, %p)
}
"""


def test_differing_collectives_known_answers():
    twice = _TRUSTED.replace(
        "  %collective-permute",
        '  %again = f32[4]{0} all-reduce(%all-reduce), channel_id=7, replica_groups={{0,1}}, '
        'to_apply=%add, metadata={op_name="jit(program)/eqn2/reduce_sum"}\n  %collective-permute')
    assert differing_collectives(twice, _TRUSTED, 2) == (("again",), ())
    shifted = _TRUSTED.replace("{{0,1},{1,0}}", "{{0,0},{1,1}}")
    assert differing_collectives(shifted, _TRUSTED, 2) == (("collective-permute",), ())
    dropped = _TRUSTED.replace("all-reduce(%p), channel_id=1, replica_groups={{0,1}}, "
                               "to_apply=%add,", "copy(%p),")
    assert differing_collectives(dropped, _TRUSTED, 2) == ((), ("all-reduce",))
    assert differing_collectives(_TRUSTED, _TRUSTED, 2) == ((), ())
    assert differing_collectives(_TRUSTED, _TRUSTED, 3) == ((), ())  # no collective of eqn3


def test_tier3_names_the_planted_collective_permute(pool):
    loc, site = _planted(pool, "conv_halo", "halo-off-by-one")
    assert loc.equation.index == site.equation
    assert loc.kernels.changed == (_hlo_name(site.instruction),)
    assert loc.kernels.fusions[0] == _hlo_name(site.instruction)
    assert loc.op.evidence.startswith("skipped: a partitioned module")
    assert loc.compiler_pass == "xlaprobe-mutant-halo-off-by-one"
    assert any("differs from the trusted compile's" in line for line in loc.tiers())
    assert loc.to_json()["kernels"]["changed"] == [_hlo_name(site.instruction)]


@pytest.mark.slow  # two more localizations on 4 host devices (~15 s each on a loaded machine)
@pytest.mark.parametrize("mutant", ["all-reduce-twice", "all-reduce-dropped"])
def test_tier3_names_the_planted_all_reduce(pool, mutant):
    loc, site = _planted(pool, "matmul_tanh_sum", mutant)
    assert loc.equation.index == site.equation
    if mutant == "all-reduce-twice":  # the second application, which reads the first
        assert loc.kernels.changed == (_hlo_name(site.instruction),)
        assert loc.kernels.fusions[0] == _hlo_name(site.instruction)
    else:  # gone from the faulty module: named as the trusted module names it
        assert loc.kernels.changed == () and loc.kernels.missing == (site.instruction,)
        assert any("is missing (dropped)" in line for line in loc.tiers())


@pytest.mark.slow  # three localizations with pass searches (~50 s on a loaded machine)
def test_tier5_searches_the_partitioned_compile(pool):
    """The fast-math masked max (tests/cases) is made wrong by XLA's fusion pass on one device;
    partitioned over 2 devices the same pass makes it wrong in each device's module, and the
    search over the partitioned compile, whose candidates include the partitioner's passes,
    names it under both partitioners."""
    case = load_present("fastmath_masked_max")
    for partitioner, held in (("shardy", "shardy-xla"), ("gspmd", "sharding-propagation")):
        spec = f"spmd[mesh=2,partitioner={partitioner},xla_cpu_enable_fast_math=true]"
        loc = localize(case.program, spec, pool, inside=False)
        assert loc.compiler_pass == "fusion", loc.blame
        assert loc.blame.disabled == ("fusion",)
        assert {held, "spmd-partitioning"} <= set(loc.blame.candidates) & PARTITIONING
        assert "never disabled" in loc.blame.evidence


def test_tier5_never_disables_the_partitioner_and_says_so(pool):
    """A sharded min drops the NaN one device holds (tests/spmd_bugs, the CPU all-reduce's
    min combiner): disabling the partitioner's entry pass would "fix" it by not partitioning
    at all; no other pass does, so the answer is none, the partitioner or a collective's runtime."""
    import jax.numpy as jnp
    import numpy as np

    from xlaprobe.program import Program, Provenance

    def sharded_min(x):
        return jnp.min(x * 2.0)

    program = Program.from_function(sharded_min, (np.array([1, np.nan, 3, 4], np.float32),),
                                    Provenance("user", "sharded_min"))
    loc = localize(program, "spmd[mesh=2]", pool, inside=False)
    assert loc.equation.primitive == "reduce_min"
    assert loc.kernels.collectives and loc.kernels.fusions[0] == loc.kernels.collectives[0]
    assert loc.compiler_pass == "none", loc.blame
    assert "the partitioner itself (shardy-xla, spmd-partitioning" in loc.blame.evidence


def test_the_reducer_rejects_a_candidate_the_mesh_does_not_fit():
    """The partitioned hunt's seed 7009: the reducer shrank an output the program constrains
    over mesh axis y (2 devices) to one element, and `spmd` refused the candidate before any run;
    that ended the reduction with exit 2. A refused candidate is just not interesting."""
    import jax
    import numpy as np
    from jax.sharding import AbstractMesh, AxisType, NamedSharding
    from jax.sharding import PartitionSpec as P

    from xlaprobe.localization.reduce import Interesting
    from xlaprobe.program import Program, Provenance
    mesh = AbstractMesh((4, 2), ("x", "y"), axis_types=(AxisType.Auto,) * 2)

    def shrunk(v):
        return jax.lax.with_sharding_constraint(v * 2, NamedSharding(mesh, P("y")))

    candidate = Program.from_function(shrunk, (np.ones(1, np.float32),),
                                      Provenance("user", "shrunk"))
    interesting = Interesting(Configuration.parse("spmd[mesh=4x2]"), None, None, None)
    assert interesting(candidate) is False and interesting.tests == 1
