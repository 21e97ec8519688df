"""Silent wrong result: a min (or max) reduction over a sharded dimension drops a NaN on XLA:CPU.
lax.min/lax.max propagate NaN, and the one-device program returns NaN; partitioned, each device
reduces its shard and the all-reduce that combines the shards returns a number whenever the NaN
is not on every device. jax/jaxlib 0.12.0.1, 2 host devices, Shardy and GSPMD. Exits 1 on the bug.
Usage: python THIS [min|max] [gspmd]
Release window (benchmarks/spmd_bug_windows.py, every jaxlib on PyPI from 0.4.26): Shardy: 0.4.34
(its first working Shardy) through 0.12.0.1; GSPMD: 0.4.26 (the oldest tried) through 0.12.0.1; no
fix."""
import os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
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
mesh = Mesh(np.array(jax.devices()[:2]), ("x",))
x = np.array([1.0, np.nan, 3.0, 4.0], np.float32)  # the NaN is on device 0 only
# lax.reduce with the min/max monoid binds reduce_min/reduce_max (lax.reduce_min: jax >= 0.5.1)
if "max" in sys.argv[1:]:
    f = lambda v: lax.reduce(v, np.float32(-np.inf), lax.max, (0,))
else:
    f = lambda v: lax.reduce(v, np.float32(np.inf), lax.min, (0,))
s = NamedSharding(mesh, P("x"))

want = np.asarray(jax.jit(f)(x))
print("one device:", want.tolist())
try:
    got = np.asarray(jax.jit(f, in_shardings=s)(jax.device_put(x, s)))
except Exception as e:  # a compile error of the partitioned program
    print(type(e).__name__, str(e).splitlines()[0][:300]); sys.exit(1)
print("2 devices:", got.tolist())
sys.exit(int(not np.array_equal(want, got, equal_nan=True)))
