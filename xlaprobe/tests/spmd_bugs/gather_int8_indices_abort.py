"""The SPMD partitioner aborts on a gather from a sharded operand whose indices are int8:
"gather_scatter_handler.cc:244] Unsupported indices type: S8" (LOG(FATAL): the process dies).
One device compiles and runs it. jax/jaxlib 0.12.0.1, XLA:CPU, 2 host devices.
Usage: python THIS [gspmd]
Release window (benchmarks/spmd_bug_windows.py, every jaxlib on PyPI from 0.4.26): both
partitioners: right through 0.4.36; 0.4.38-0.5.3 fail otherwise (the partitioned HLO fails XLA's
verifier, RET_CHECK); the abort from 0.6.0 through 0.12.0.1; no fix."""
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
x = np.arange(32, dtype=np.float32).reshape(8, 4)
idx = np.array([[1], [6]], np.int8)
dn = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
f = lambda x, i: lax.gather(x, i, dn, (1, 4), mode=lax.GatherScatterMode.PROMISE_IN_BOUNDS)
s, r = NamedSharding(mesh, P("x")), NamedSharding(mesh, P())

want = np.asarray(jax.jit(f)(x, idx))
print("one device:", want.tolist())
try:
    got = np.asarray(jax.jit(f, in_shardings=(s, r))(jax.device_put(x, s), idx))
except Exception as e:  # a compile error of the partitioned program
    print(type(e).__name__, str(e).splitlines()[0][:300]); sys.exit(1)
print("2 devices:", got.tolist())
sys.exit(int(not np.array_equal(want, got, equal_nan=True)))
