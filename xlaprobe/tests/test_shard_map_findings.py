"""shard_map findings: saved as artifacts (the jaxpr format describes a shard_map's abstract mesh,
partition specs and manual axes; its body is decoded inside ``jax.shard_map``) and replayed by
finding id; and the oracle's integer rule that the shard_map hunt's int16 ``psum`` finding
(seed 237) showed missing: a float rounded to its own dtype before a conversion to integer."""

from __future__ import annotations

import numpy as np
import pytest

from xlaprobe import jaxpr_json
from xlaprobe.oracle import VerdictKind, judge_leaf
from xlaprobe.sources.shardmap_gen import shard_map_generate


def test_a_shard_map_program_survives_the_artifact_format():
    program = shard_map_generate(237)  # psum, pmax, pmin, ppermute and axis_index in its body
    text, arrays = jaxpr_json.dumps(program.jaxpr)
    assert '"t":"abstract_mesh","sizes":[4,2],"names":["x","y"]' in text
    assert '"t":"str_set","items":["x","y"]' in text
    back = jaxpr_json.loads(text, arrays)
    assert str(back) == str(program.jaxpr)


def test_a_shard_map_with_a_scan_over_a_ppermute_survives_the_artifact_format():
    # Seed 239's body holds a scan whose carry moves by ppermute: the scan's own jaxpr is
    # decoded inside the shard_map, where its collective's axis is bound.
    program = shard_map_generate(239)
    text, arrays = jaxpr_json.dumps(program.jaxpr)
    assert '"primitive":"scan"' in text and '"primitive":"ppermute"' in text
    assert str(jaxpr_json.loads(text, arrays)) == str(program.jaxpr)


def test_a_corrupt_shard_map_is_refused_in_one_line():
    from xlaprobe.errors import CorruptArtifact
    text, arrays = jaxpr_json.dumps(shard_map_generate(237).jaxpr)
    with pytest.raises(CorruptArtifact, match="bad sharding mesh"):
        jaxpr_json.loads(text.replace('"sizes":[4,2],"names":["x","y"]',
                                      '"sizes":[4,2],"names":["x"]'), arrays)
    with pytest.raises(CorruptArtifact, match="shard_map"):
        jaxpr_json.loads(text.replace('"axis_name":"y"', '"axis_name":"q"', 1), arrays)


# --- the oracle: integers from honestly rounded floats ---------------------------------------------

#: Seed 237's int16 psum output, measured on 8 host devices (jax 0.12.0.1): XLA, the float64
#: reference, and the honest runs (reference:native, two Monte Carlo samples).
_XLA = np.array([-13696, -3712, -8352, 25216, 14364, -12732, -18432], np.int16)
_REFERENCE = np.array([-13668, -3684, -8356, 25244, 14364, -12732, -18404], np.int16)
_HONEST = [np.array(v, np.float64) for v in (
    [-13696, -3712, -8352, 25216, 14364, -12732, -18432],
    [-13712, -3696, -8368, 25264, 14368, -12732, -18368],
    [-13664, -3648, -8352, 25280, 14364, -12732, -18416])]


def test_an_integer_equal_to_an_honest_run_is_honest():
    assert judge_leaf(_XLA, _REFERENCE, budget=_HONEST).kind is VerdictKind.OK
    # Without the honest runs it is the exact comparison it always was.
    assert judge_leaf(_XLA, _REFERENCE).kind is VerdictKind.MISMATCH


def test_an_integer_no_honest_run_gives_is_still_wrong():
    wrong = _XLA.copy()
    wrong[4] += 1  # 14365: the reference and every honest run say 14364
    verdict = judge_leaf(wrong, _REFERENCE, budget=_HONEST)
    assert verdict.kind is VerdictKind.MISMATCH and verdict.worst == 4
    assert verdict.frac_over == pytest.approx(1 / 7)


def _f16_sum_to_int16(b):
    import jax.numpy as jnp
    return (b + jnp.float16(7)).astype(jnp.int16)


def test_a_float16_sum_converted_to_int16_is_clean_on_one_device(pool):
    """The seed-237 pattern without shard_map: f16 30464 + 7 rounds to 30464 (float16's spacing
    there is 16), which the float64 reference does not; XLA is honest."""
    from xlaprobe.checking import check_program
    from xlaprobe.program import Program, Provenance
    b = np.array([30464, -26288, 1000, 3], np.float16)
    program = Program.from_function(_f16_sum_to_int16, (b,), Provenance("user", "f16_to_i16"))
    result = check_program(program, ["xla", "reference"], pool)
    xla, reference = result.outcomes[0].outputs[0], result.outcomes[1].outputs[0]
    assert not np.array_equal(xla, reference)  # the rule is what makes it clean
    np.testing.assert_array_equal(xla, [30464, -26288, 1007, 10])  # float16 spacing 16, 16, 1, 1
    assert result.ok, [(f.config, f.kind.value) for f in result.findings]


# --- replay by finding id -----------------------------------------------------------------------

@pytest.mark.slow  # a campaign on 8 host devices and a localization by finding id (~2 min)
def test_a_shard_map_finding_is_saved_and_localized_by_id(tmp_path):
    import os
    import subprocess
    import sys

    from xlaprobe.campaign import Campaign
    from xlaprobe.store import Store

    db = tmp_path / "hunt.db"
    campaign = Campaign(db, ["spmd[mesh=4x2]", "reference"], seed=239,
                        source=shard_map_generate)
    try:
        campaign.run(600, max_programs=1)
    finally:
        campaign.close()
    with Store(db) as store:
        rows = [r for r in store.stored_findings() if r.artifact]
    assert rows  # the pmin that drops a NaN one device holds
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    done = subprocess.run([sys.executable, "-m", "xlaprobe.cli", "localize", str(rows[0].id),
                           "--db", str(db), "--json", "-q"], capture_output=True, text=True,
                          env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    import json
    loc = json.loads(done.stdout)
    assert loc["equation"]["index"] == 0 and loc["config"] == rows[0].config
    assert {"pmin", "pmax"} & {c.split(".")[0] for c in loc["kernels"]["collectives"]}


# --- the reference: a psum's honest rounding in Monte Carlo runs ---------------------------------

def _f16_psum_program():
    import jax
    from jax import lax
    from jax.sharding import AbstractMesh, AxisType
    from jax.sharding import PartitionSpec as P

    from xlaprobe.program import Program, Provenance
    mesh = AbstractMesh((8,), ("x",), axis_types=(AxisType.Auto,))
    fn = jax.shard_map(lambda v: lax.psum(v, "x"), mesh=mesh, in_specs=P("x"), out_specs=P(),
                       check_vma=False)
    # Eight float16 terms summing to about -0.3 out of sum|terms| = 36: XLA's all-reduce adds
    # them in float16, where the partial sums' spacing is 1/64.
    terms = np.array([[7.3], [-6.9], [5.1], [-4.7], [3.3], [-2.9], [1.1], [-2.6]], np.float16)
    return Program.from_function(fn, (terms,), Provenance("user", "f16_psum"))


def test_a_monte_carlo_reference_samples_a_psums_rounding():
    """Seed 487 of the shard_map hunt (an f16 psum of 8 devices, XLA off by 16 ULPs of the
    result) was rounding the float64 psum did not sample: each Monte Carlo run now lands within
    sqrt(8) u sum|terms| of the exact sum, and not on it."""
    from xlaprobe.configs.reference import evaluate
    program = _f16_psum_program()
    terms = np.asarray(program.inputs[0], np.float64)
    exact = terms.sum()
    bound = np.sqrt(8) * 2.0 ** -11 * np.abs(terms).sum()
    native = evaluate(program.jaxpr, program.inputs, round_each_op=True)[0]
    assert float(native.ravel()[0]) == float(np.float16(exact))  # one rounding: no spread
    samples = [float(evaluate(program.jaxpr, program.inputs, round_each_op=True,
                              mca_seed=seed)[0].ravel()[0]) for seed in range(6)]
    ulp = 2.0 ** -12  # float16 spacing at 0.3
    assert all(abs(s - exact) <= bound + ulp for s in samples), (samples, exact, bound)
    assert max(abs(s - exact) for s in samples) > 4 * ulp  # the spread XLA's sum can land in


@pytest.mark.slow  # a check on 8 host devices under both partitioners
def test_the_f16_psum_finding_is_clean(pool):
    from xlaprobe.checking import check_program
    program = shard_map_generate(487)
    result = check_program(program, ["spmd[mesh=4x2]", "spmd[mesh=4x2,partitioner=gspmd]",
                                     "reference"], pool)
    assert result.ok, [(f.config, f.kind.value) for f in result.findings]
