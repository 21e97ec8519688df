"""The SPMD partitioner aborts on a gather from a sharded operand whose indices are int8:
"gather_scatter_handler.cc:244] Unsupported indices type: S8" (LOG(FATAL): the process dies).
One device compiles and runs it. jax/jaxlib 0.12.0.1, XLA:CPU, 2 host devices.
Usage: python THIS [gspmd]"""
import os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
import sys
import jax, numpy as np
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec as P, AxisType
if "gspmd" in sys.argv[1:]:
    jax.config.update("jax_use_shardy_partitioner", False)
mesh = jax.make_mesh((2,), ("x",), axis_types=(AxisType.Auto,))
x = np.arange(32, dtype=np.float32).reshape(8, 4)
idx = np.array([[1], [6]], np.int8)
dn = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
f = lambda x, i: lax.gather(x, i, dn, (1, 4), mode=lax.GatherScatterMode.PROMISE_IN_BOUNDS)
print("one device:", jax.jit(f)(x, idx).tolist())
s, r = NamedSharding(mesh, P("x")), NamedSharding(mesh, P())
print("2 devices:", jax.jit(f, in_shardings=(s, r))(jax.device_put(x, s), idx).tolist())
