"""SPMD partitioner CHECK failure (the process aborts): reduce_window with base dilation 2 and
negative padding over a sharded dimension, under Shardy (GSPMD compiles it right).
jax/jaxlib 0.12.0.1, XLA:CPU, 2 host devices. The same CHECK fires for conv_general_dilated with
lhs_dilation and negative padding. Dies of SIGABRT on the bug ("Check failed:
get_first_valid_element_offset_on_dilated_shard(0) == swd->padding_low() (1 vs. -1)" in
spmd_partitioner.cc); prints the one-device and two-device results, equal, when fixed.
Release window (benchmarks/spmd_bug_windows.py, every jaxlib on PyPI from 0.4.26): Shardy: present
in every release whose Shardy runs it, 0.4.34 through 0.12.0.1 (0.4.26-0.4.30 have no Shardy
option, 0.4.31 and 0.4.33 cannot run Shardy); no fix. GSPMD: right in 0.4.26 and 0.12.0.1."""
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
x = np.arange(16, dtype=np.float32)
def f(v):
    return lax.reduce_window(v, np.float32(0), lax.add, (2,), (1,), ((-1, -1),), (2,), (1,))
s = NamedSharding(mesh, P("x"))

want = np.asarray(jax.jit(f)(x))
print("one device:", want.tolist())
try:
    got = np.asarray(jax.jit(f, in_shardings=s)(jax.device_put(x, s)))
except Exception as e:  # a compile error of the partitioned program
    print(type(e).__name__, str(e).splitlines()[0][:300]); sys.exit(1)
print("2 devices:", got.tolist())
sys.exit(int(not np.array_equal(want, got, equal_nan=True)))
