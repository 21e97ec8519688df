"""Silent wrong result: dynamic_update_slice into an operand sharded along the updated dimension
ignores the clamping of an out-of-range start index (jax/jaxlib 0.12.0.1, XLA:CPU, 2 host
devices, Shardy and GSPMD). Start 4 on an operand of 2 clamps to 1: the update must land in the
last element. Exits 1 on the bug.
Release window (benchmarks/spmd_bug_windows.py, every jaxlib on PyPI from 0.4.26): Shardy: 0.4.34
through 0.12.0.1; GSPMD: 0.4.26 (the oldest tried) through 0.12.0.1; no fix."""
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
x = np.array([-1, 3], np.float32)
u = np.array([5], np.float32)
f = lambda x, u, i: lax.dynamic_update_slice(x, u, [i])
s, r = NamedSharding(mesh, P("x")), NamedSharding(mesh, P())

want = np.asarray(jax.jit(f)(x, u, np.int32(4)))
print("one device:", want.tolist())
try:
    got = np.asarray(jax.jit(f, in_shardings=(s, r, r))(jax.device_put(x, s), u, np.int32(4)))
except Exception as e:  # a compile error of the partitioned program
    print(type(e).__name__, str(e).splitlines()[0][:300]); sys.exit(1)
print("2 devices:", got.tolist())
sys.exit(int(not np.array_equal(want, got, equal_nan=True)))
