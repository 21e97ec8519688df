"""Silent wrong result: a min (or max) reduction over a sharded dimension drops a NaN on XLA:CPU.
lax.min/lax.max propagate NaN, and the one-device program returns NaN; partitioned, each device
reduces its shard and the all-reduce that combines the shards returns a number whenever the NaN
is not on every device. jax/jaxlib 0.12.0.1, 2 host devices, Shardy and GSPMD. Exits 1 on the bug.
Usage: python THIS [min|max] [gspmd]"""
import os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
import sys
import jax, numpy as np
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec as P, AxisType
if "gspmd" in sys.argv[1:]:
    jax.config.update("jax_use_shardy_partitioner", False)
mesh = jax.make_mesh((2,), ("x",), axis_types=(AxisType.Auto,))
x = np.array([1.0, np.nan, 3.0, 4.0], np.float32)  # the NaN is on device 0 only
f = (lambda v: lax.reduce_max(v, (0,))) if "max" in sys.argv[1:] else (lambda v: lax.reduce_min(v, (0,)))
want = np.asarray(jax.jit(f)(x))
s = NamedSharding(mesh, P("x"))
got = np.asarray(jax.jit(f, in_shardings=s)(jax.device_put(x, s)))
print("one device:", want, " 2 devices:", got)
sys.exit(int(not (np.isnan(want) and np.isnan(got))))
