"""Silent wrong result: dynamic_update_slice into an operand sharded along the updated dimension
ignores the clamping of an out-of-range start index (jax/jaxlib 0.12.0.1, XLA:CPU, 2 host
devices, Shardy and GSPMD). Start 4 on an operand of 2 clamps to 1: the update must land in the
last element. Exits 1 on the bug."""
import os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
import sys
import jax, numpy as np
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec as P, AxisType
if "gspmd" in sys.argv[1:]:
    jax.config.update("jax_use_shardy_partitioner", False)
mesh = jax.make_mesh((2,), ("x",), axis_types=(AxisType.Auto,))
x = np.array([-1, 3], np.float32)
u = np.array([5], np.float32)
f = lambda x, u, i: lax.dynamic_update_slice(x, u, [i])
want = np.asarray(jax.jit(f)(x, u, np.int32(4)))
s = NamedSharding(mesh, P("x"))
r = NamedSharding(mesh, P())
got = np.asarray(jax.jit(f, in_shardings=(s, r, r))(jax.device_put(x, s), u, np.int32(4)))
print("one device:", want, " 2 devices:", got)
sys.exit(int(not np.array_equal(want, got)))
