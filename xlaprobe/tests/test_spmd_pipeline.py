"""The pipeline-parallel zoo model (sources/pipeline.py: shard_map + ppermute) and bisecting a
partitioned finding over releases (releases/scripts.py, releases/spmd.py)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from xlaprobe.checking import check_program
from xlaprobe.configs import spmd
from xlaprobe.configs.reference import evaluate
from xlaprobe.configs.registry import Configuration
from xlaprobe.errors import InvalidArgument
from xlaprobe.program import Program, Provenance
from xlaprobe.releases import envs
from xlaprobe.releases.scripts import classify
from xlaprobe.sources.models import build_program
from xlaprobe.sources.pipeline import PIPELINE_MODELS


def test_the_pipelined_step_is_the_plain_mlp_step_in_the_reference():
    fn, args = PIPELINE_MODELS["mlp_pipeline"].build(0)
    w, b, xs, target = args
    loss, new_w, new_b = evaluate(jax.make_jaxpr(fn)(*args), list(args))

    def plain(w, b):  # the same layers, one after another, no pipeline
        h = xs
        for s in range(w.shape[0]):
            h = jnp.tanh(h @ w[s] + b[s])
        return jnp.mean((h - target) ** 2)

    want, (gw, gb) = jax.value_and_grad(plain, argnums=(0, 1))(w, b)
    np.testing.assert_allclose(loss, want, rtol=1e-6)
    np.testing.assert_allclose(new_w, w - 0.05 * gw, atol=1e-6)
    np.testing.assert_allclose(new_b, b - 0.05 * gb, atol=1e-6)


def test_a_shard_map_program_needs_its_own_mesh():
    program = build_program("mlp_pipeline")
    assert spmd.plan(Configuration.parse("spmd[mesh=4]"), program.jaxpr).axes == (("stage", 4),)
    with pytest.raises(InvalidArgument, match="give mesh=4"):
        spmd.plan(Configuration.parse("spmd[mesh=2]"), program.jaxpr)


@pytest.mark.slow  # a 4-device worker per partitioner, and the training step's honest runs
def test_the_pipeline_checks_clean_under_both_partitioners(pool):
    program = build_program("mlp_pipeline")
    result = check_program(program, ["xla", "spmd[mesh=4]", "spmd[mesh=4,partitioner=gspmd]",
                                      "reference"], pool)
    assert result.ok, [f.config for f in result.findings]
    assert [o.kind.value for o in result.outcomes[:4]] == ["unsupported", "ran", "ran", "ran"]


@pytest.mark.parametrize("code, stdout, stderr, verdict", [
    (0, "2 devices: [1.0]", "", "ok"),
    (1, "one device: nan\n2 devices: 3.0", "", "mismatch"),
    (1, "MISMATCH output 0: 1 of 2 elements", "", "mismatch"),
    (1, "JaxRuntimeError INTERNAL: RET_CHECK failure (hlo_verifier.cc:1633)", "", "error"),
    (1, "", "Traceback (most recent call last):\n  ...\njax.errors.JaxRuntimeError: UNIMPLEMENTED",
     "error"),
    (1, "", "Traceback (most recent call last):\nAttributeError: module 'jax' has no attribute "
     "'shard_map'", "unsupported"),
    (3, "this jax has no Shardy partitioner", "", "unsupported"),
    (-6, "", "F1203 spmd_partitioner.cc:1128] Check failed: a == b (1 vs. -1)", "crash"),
])
def test_a_script_run_is_judged_by_how_it_ended(code, stdout, stderr, verdict):
    assert classify(code, stdout, stderr)[0] == verdict


def _dus(x, u):
    return jax.lax.dynamic_update_slice(x, u, [np.int32(4)])


def test_an_spmd_finding_is_bisected_with_its_reproducer_in_each_release(tmp_path):
    from xlaprobe.localization.spmd_repro import emit_spmd_repro
    from xlaprobe.releases.spmd import spmd_judge
    x, u = np.array([-1.0, 3.0], np.float32), np.array([5.0], np.float32)
    program = Program.from_function(_dus, (x, u), Provenance("user", "dus"))
    script = tmp_path / "repro.py"
    script.write_text(emit_spmd_repro(program, "spmd[mesh=2]", [np.array([-1.0, 5.0])]))
    judge = spmd_judge(script)
    run = judge(envs.installed_version())  # openxla/xla#49118: the clamped update is dropped
    assert (run.verdict, run.bad) == ("mismatch", True), run.detail
    assert "MISMATCH output 0" in run.detail


def test_generated_shard_map_bodies_carry_collectives_the_reference_runs():
    from xlaprobe.sources.shardmap_gen import coverage, shard_map_generate
    seen = set()
    for seed in range(6):
        program = shard_map_generate(seed)
        counts = coverage(program.jaxpr)
        assert counts["axis_index"] >= 1  # every device's inputs are its own
        seen |= set(counts)
        outs = evaluate(program.jaxpr, list(program.inputs))
        assert len(outs) == len(program.jaxpr.jaxpr.outvars)
    assert {"ppermute", "all_gather", "psum", "scan"} <= seen
