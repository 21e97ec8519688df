"""SPMD partitioner CHECK failure (the process aborts) under Shardy: a strided reduce_window with
base dilation 2 and padding (1, -1) over a dimension sharded 4 ways ("Check failed:
ShapeUtil::Compatible(shard_shape, sharded_rw->shape()) s32[1]{0} vs s32[0]{0}" in
spmd_partitioner.cc). GSPMD and 2 devices compile it right. jax/jaxlib 0.12.0.1, XLA:CPU.
Usage: python THIS N [gspmd] (N host devices)."""
import os, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=" + sys.argv[1]
import jax, numpy as np
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec as P, AxisType
if "gspmd" in sys.argv[2:]:
    jax.config.update("jax_use_shardy_partitioner", False)
n = int(sys.argv[1])
mesh = jax.make_mesh((n,), ("x",), axis_types=(AxisType.Auto,))
x = np.arange(4, dtype=np.int32)
f = lambda v: lax.reduce_window(v, np.int32(2147483647), lax.min, (1,), (2,), ((1, -1),), (2,), (1,))
print("one device:", jax.jit(f)(x))
s = NamedSharding(mesh, P("x"))
print(f"{n} devices:", jax.jit(f, in_shardings=s)(jax.device_put(x, s)))
