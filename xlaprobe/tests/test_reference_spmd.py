"""The float64 reference's shard_map rule: the body per device, collectives emulated exactly.
Known answers worked by hand on a 2x2 mesh (traced on one device over an abstract mesh), and a
slow comparison with XLA partitioning the same program over 4 host devices."""

import os
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest
from jax import lax
from jax.sharding import AbstractMesh, AxisType, PartitionSpec as P

from xlaprobe.configs.reference import evaluate

MESH = AbstractMesh((2, 2), ("x", "y"), axis_types=(AxisType.Auto,) * 2)


def run(body, in_specs, out_specs, *args):
    f = jax.shard_map(body, mesh=MESH, in_specs=in_specs, out_specs=out_specs, check_vma=False)
    return evaluate(jax.make_jaxpr(f)(*args), list(args))


def test_psum_over_one_axis_adds_the_blocks_of_its_group():
    x = np.arange(4, dtype=np.float32).reshape(2, 2)  # device (i, j) holds x[i, j]
    (out,) = run(lambda a: (lax.psum(a, "x"),), (P("x", "y"),), (P(None, "y"),), x)
    # psum over x: device (i, j) gets x[0, j] + x[1, j]; out_spec P(None, 'y') takes row 0
    np.testing.assert_array_equal(out, [[0 + 2, 1 + 3]])


def test_axis_index_is_row_major_over_the_named_axes():
    x = np.zeros((2, 2), np.int32)
    (out,) = run(lambda a: (a + lax.axis_index(("x", "y")) * 10 + lax.axis_index("y"),),
                 (P("x", "y"),), (P("x", "y"),), x)
    np.testing.assert_array_equal(out, [[0, 11], [20, 31]])


def test_ppermute_shifts_blocks_and_zeros_devices_nobody_sends_to():
    x = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    # along x: 0 -> 1 only; device (0, j) receives nothing (zeros)
    (out,) = run(lambda a: (lax.ppermute(a, "x", [(0, 1)]),), (P("x", "y"),), (P("x", "y"),), x)
    np.testing.assert_array_equal(out, [[0, 0], [1, 2]])


def test_all_gather_tiled_and_stacked():
    x = np.arange(8, dtype=np.float32).reshape(2, 4)  # device (i, j) holds x[i, 2j:2j+2]
    tiled, stacked = run(lambda a: (lax.all_gather(a, "y", axis=1, tiled=True),
                                    lax.all_gather(a, "y", axis=0)),
                         (P("x", "y"),), (P("x", None), P(None, "x")), x)
    np.testing.assert_array_equal(tiled, x)
    # untiled: each device stacks its row's two blocks -> (2, 1, 2) per device; x splits dim 1
    np.testing.assert_array_equal(stacked, [[[0, 1], [4, 5]], [[2, 3], [6, 7]]])


def test_all_to_all_transposes_blocks_within_the_group():
    x = np.arange(8, dtype=np.float32).reshape(1, 8)  # device (0, j) ... replicated over x
    (out,) = run(lambda a: (lax.all_to_all(a, "y", 1, 0, tiled=True),),
                 (P(None, "y"),), (P(None, "y"),), x)
    # device j holds x[0, 4j:4j+4], splits it in two along dim 1, receives chunk j of each
    # device stacked along dim 0: device 0 -> [[0,1],[4,5]], device 1 -> [[2,3],[6,7]]
    np.testing.assert_array_equal(out, [[0, 1, 2, 3], [4, 5, 6, 7]])


def test_pmax_propagates_nan_and_psum_scatter_sums_then_splits():
    x = np.array([[1.0, np.nan], [3.0, 4.0]], np.float32)
    (mx,) = run(lambda a: (lax.pmax(a, "y"),), (P("x", "y"),), (P("x", None),), x)
    assert np.isnan(mx[0, 0]) and mx[1, 0] == 4.0
    y = np.arange(8, dtype=np.float32).reshape(2, 4)  # device (i, j): y[i, 2j:2j+2]
    (rs,) = run(lambda a: (lax.psum_scatter(a, "y", scatter_dimension=1, tiled=True),),
                (P("x", "y"),), (P("x", "y"),), y)
    # row 0: blocks [0,1] + [2,3] = [2,4]; device 0 keeps 2, device 1 keeps 4
    np.testing.assert_array_equal(rs, [[2, 4], [10, 12]])


def test_a_scan_with_a_ppermute_in_the_body_meets_at_every_step():
    x = np.array([[1.0, 2.0]], np.float32)  # over y: device j holds x[0, j]

    def body(a):
        def step(c, _):
            c = lax.ppermute(c, "y", [(0, 1), (1, 0)]) + 1
            return c, c
        return lax.scan(step, a, None, length=3)

    last, trace = run(body, (P(None, "y"),), (P(None, "y"), P(None, None, "y")), x)
    # swap and add 1, three times: [1,2] -> [3,2] -> [3,4] -> [5,4]
    np.testing.assert_array_equal(last, [[5, 4]])
    np.testing.assert_array_equal(trace[:, 0], [[3, 2], [3, 4], [5, 4]])


def test_a_collective_outside_shard_map_is_unsupported():
    from xlaprobe.configs.reference_spmd import RULES
    from xlaprobe.errors import UnsupportedPrimitive
    with pytest.raises(UnsupportedPrimitive):
        RULES["axis_index"](None, axis_name="x")


@pytest.mark.slow
def test_every_collective_matches_xla_on_four_host_devices():
    script = textwrap.dedent('''
        import os
        os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
        import jax, numpy as np
        from jax import lax
        from jax.sharding import AbstractMesh, AxisType, Mesh, PartitionSpec as P
        from xlaprobe.configs.reference import evaluate

        def body(a, b):
            def step(c, _):
                c = lax.ppermute(c, "y", [(0, 1), (1, 0)]) * 2 + lax.axis_index("x")
                return c, c.sum()
            c, ys = lax.scan(step, b, None, length=3)
            return (lax.psum(a, "x") + lax.ppermute(a, "x", [(0, 1), (1, 0)])
                    + lax.axis_index(("x", "y")), lax.all_gather(a, "y", axis=0, tiled=True),
                    lax.all_gather(a, ("x", "y"), axis=1), lax.all_to_all(a, "y", 0, 1, tiled=True),
                    lax.pmax(a, ("x", "y")), lax.pmin(b, "y"),
                    lax.psum_scatter(a, "y", scatter_dimension=1, tiled=True), c, ys)
        ins = (P("x", "y"), P("x", "y"))
        outs = (P("x", "y"), P("x", None), P("x", None), P("x", "y"), P(), P("x", None),
                P("x", "y"), P("x", "y"), P(("x", "y")))
        rng = np.random.default_rng(0)
        a, b = (rng.standard_normal((4, 8)).astype(np.float32) for _ in range(2))
        abstract = AbstractMesh((2, 2), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
        f = jax.shard_map(body, mesh=abstract, in_specs=ins, out_specs=outs, check_vma=False)
        ref = evaluate(jax.make_jaxpr(f)(a, b), [a, b])
        mesh = Mesh(np.array(jax.devices()).reshape(2, 2), ("x", "y"))
        g = jax.shard_map(body, mesh=mesh, in_specs=ins, out_specs=outs, check_vma=False)
        got = jax.jit(g)(a, b)
        bad = [k for k, (r, x) in enumerate(zip(ref, got))
               if not np.allclose(r, np.asarray(x, np.float64), rtol=1e-5, atol=1e-5)]
        print("bad outputs:", bad)
        raise SystemExit(1 if bad else 0)
    ''')
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
