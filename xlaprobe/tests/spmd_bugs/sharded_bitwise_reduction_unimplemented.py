"""XLA:CPU cannot compile a partitioned bitwise reduction: jnp reduce over a sharded dimension with
lax.reduce_xor / reduce_and / reduce_or gives "UNIMPLEMENTED: Unsupported reduction computation"
(the all-reduce the partitioner inserts has an xor/and/or combiner). jax/jaxlib 0.12.0.1, 2 host
devices. Exits 1 on the bug."""
import os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
import sys
import jax, numpy as np
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec as P, AxisType
if "gspmd" in sys.argv[1:]:
    jax.config.update("jax_use_shardy_partitioner", False)
mesh = jax.make_mesh((2,), ("x",), axis_types=(AxisType.Auto,))
x = np.arange(8, dtype=np.int32)
op = {"xor": lax.reduce_xor, "and": lax.reduce_and, "or": lax.reduce_or}[
    next((a for a in sys.argv[1:] if a in ("xor", "and", "or")), "xor")]
f = lambda v: op(v, (0,))
print("one device:", jax.jit(f)(x))
s = NamedSharding(mesh, P("x"))
try:
    print("2 devices:", jax.jit(f, in_shardings=s)(jax.device_put(x, s)))
except Exception as e:
    print(type(e).__name__, str(e).splitlines()[0]); sys.exit(1)
