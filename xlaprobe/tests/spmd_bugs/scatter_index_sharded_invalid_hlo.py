"""Invalid HLO from the SPMD partitioner: a point scatter (scatter_min, FILL_OR_DROP) into an
operand sharded along its second dimension, with sharded indices, fails XLA's own verifier after partitioning
("RET_CHECK failure (hlo_verifier.cc) output_dimension >= 0 && ... broadcast"), under Shardy and
GSPMD. jax/jaxlib 0.12.0.1, XLA:CPU, 8 host devices (mesh 4x2; the indices' index
vector dimension is sharded). Exits 1 on the bug.
Release window (benchmarks/spmd_bug_windows.py, every jaxlib on PyPI from 0.4.26): Shardy: 0.4.34
through 0.12.0.1; GSPMD: 0.4.26 (the oldest tried) through 0.12.0.1; no fix."""
import os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import sys
import jax, numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
SHARDY = "gspmd" not in sys.argv[1:]
try:  # the option (and Shardy) is there from jax 0.4.31 on
    jax.config.update("jax_use_shardy_partitioner", SHARDY)
except AttributeError:
    if SHARDY:
        print("this jax has no Shardy partitioner"); sys.exit(3)
mesh = Mesh(np.array(jax.devices()[:8]).reshape(4, 2), ("x", "y"))
x = np.arange(12, dtype=np.uint8).reshape(3, 4)
idx = np.array([[0, 1], [2, 3], [1, 0], [5, 5], [0, 0], [2, 2], [1, 3]], np.int32)
upd = np.arange(7, dtype=np.uint8)
dn = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0, 1),
                                 scatter_dims_to_operand_dims=(0, 1))
f = lambda x, i, u: lax.scatter_min(x, i, u, dn, mode=lax.GatherScatterMode.FILL_OR_DROP)
ins = tuple(NamedSharding(mesh, p) for p in (P(None, "x"), P(None, "y"), P()))

want = np.asarray(jax.jit(f)(x, idx, upd))
print("one device:", want.tolist())
try:
    got = np.asarray(jax.jit(f, in_shardings=ins)(x, idx, upd))
except Exception as e:  # a compile error of the partitioned program
    print(type(e).__name__, str(e).splitlines()[0][:300]); sys.exit(1)
print("8 devices:", got.tolist())
sys.exit(int(not np.array_equal(want, got, equal_nan=True)))
