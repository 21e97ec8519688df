"""XLA:CPU cannot compile a partitioned bitwise reduction: jnp reduce over a sharded dimension with
lax.reduce_xor / reduce_and / reduce_or gives "UNIMPLEMENTED: Unsupported reduction computation"
(the all-reduce the partitioner inserts has an xor/and/or combiner). jax/jaxlib 0.12.0.1, 2 host
devices. Exits 1 on the bug.
Release window (benchmarks/spmd_bug_windows.py, every jaxlib on PyPI from 0.4.26): Shardy: 0.4.34
through 0.12.0.1; GSPMD: 0.4.33 through 0.12.0.1 with this message, and 0.4.26-0.4.31 fail the same
way in other words ("UNIMPLEMENTED: AllReduce for computation ..."); no fix."""
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
x = np.arange(8, dtype=np.int32)
# lax.reduce with a bitwise monoid binds reduce_xor/and/or (lax.reduce_xor: jax >= 0.5.1)
op, unit = {"xor": (lax.bitwise_xor, 0), "and": (lax.bitwise_and, -1), "or": (lax.bitwise_or, 0)}[
    next((a for a in sys.argv[1:] if a in ("xor", "and", "or")), "xor")]
f = lambda v: lax.reduce(v, np.int32(unit), op, (0,))
s = NamedSharding(mesh, P("x"))

want = np.asarray(jax.jit(f)(x))
print("one device:", want.tolist())
try:
    got = np.asarray(jax.jit(f, in_shardings=s)(jax.device_put(x, s)))
except Exception as e:  # a compile error of the partitioned program
    print(type(e).__name__, str(e).splitlines()[0][:300]); sys.exit(1)
print("2 devices:", got.tolist())
sys.exit(int(not np.array_equal(want, got, equal_nan=True)))
