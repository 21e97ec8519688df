"""Invalid HLO from the SPMD partitioner: a point scatter (scatter_min, FILL_OR_DROP) into an
operand sharded along its second dimension, with sharded indices, fails XLA's own verifier after partitioning
("RET_CHECK failure (hlo_verifier.cc) output_dimension >= 0 && ... broadcast"), under Shardy and
GSPMD. jax/jaxlib 0.12.0.1, XLA:CPU, 8 host devices (mesh 4x2; the indices' index
vector dimension is sharded). Exits 1 on the bug."""
import os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import sys
import jax, numpy as np
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec as P, AxisType
if "gspmd" in sys.argv[1:]:
    jax.config.update("jax_use_shardy_partitioner", False)
mesh = jax.make_mesh((4, 2), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
x = np.arange(12, dtype=np.uint8).reshape(3, 4)
idx = np.array([[0, 1], [2, 3], [1, 0], [5, 5], [0, 0], [2, 2], [1, 3]], np.int32)
upd = np.arange(7, dtype=np.uint8)
dn = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0, 1),
                                 scatter_dims_to_operand_dims=(0, 1))
f = lambda x, i, u: lax.scatter_min(x, i, u, dn, mode=lax.GatherScatterMode.FILL_OR_DROP)
print("one device:", jax.jit(f)(x, idx, upd).tolist())
specs = (P(None, "x"), P(None, "y"), P())
shardings = tuple(NamedSharding(mesh, p) for p in specs)
try:
    print("8 devices:", jax.jit(f, in_shardings=shardings)(x, idx, upd).tolist())
except Exception as e:
    print(type(e).__name__, str(e).splitlines()[0][:300]); sys.exit(1)
