"""SPMD partitioner CHECK failure (the process aborts) under Shardy: a strided reduce_window with
base dilation 2 and padding (1, -1) over a dimension sharded 4 ways ("Check failed:
ShapeUtil::Compatible(shard_shape, sharded_rw->shape()) s32[1]{0} vs s32[0]{0}" in
spmd_partitioner.cc). GSPMD and 2 devices compile it right. jax/jaxlib 0.12.0.1, XLA:CPU.
Usage: python THIS N [gspmd] (N host devices).
Release window (benchmarks/spmd_bug_windows.py, every jaxlib on PyPI from 0.4.26): Shardy: a
regression of jaxlib 0.10.1 (right in 0.4.34 .. 0.10.0); no fix through 0.12.0.1. GSPMD: right in
0.4.26 and 0.12.0.1."""
import os, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=" + sys.argv[1]
import jax, numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
SHARDY = "gspmd" not in sys.argv[1:]
try:  # the option (and Shardy) is there from jax 0.4.31 on
    jax.config.update("jax_use_shardy_partitioner", SHARDY)
except AttributeError:
    if SHARDY:
        print("this jax has no Shardy partitioner"); sys.exit(3)
n = int(sys.argv[1])
mesh = Mesh(np.array(jax.devices()[:n]), ("x",))
x = np.arange(4, dtype=np.int32)
f = lambda v: lax.reduce_window(v, np.int32(2147483647), lax.min, (1,), (2,), ((1, -1),), (2,), (1,))
s = NamedSharding(mesh, P("x"))

want = np.asarray(jax.jit(f)(x))
print("one device:", want.tolist())
try:
    got = np.asarray(jax.jit(f, in_shardings=s)(jax.device_put(x, s)))
except Exception as e:  # a compile error of the partitioned program
    print(type(e).__name__, str(e).splitlines()[0][:300]); sys.exit(1)
print(f"{n} devices:", got.tolist())
sys.exit(int(not np.array_equal(want, got, equal_nan=True)))
