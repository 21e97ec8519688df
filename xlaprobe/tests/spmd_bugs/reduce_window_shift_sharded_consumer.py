"""Silent wrong result: a reduce_window min with a 1-element window and padding (1, -1) (a shift
right by one that fills with the init value, +inf) whose result also feeds a clamp sharded over 2
host devices: element 0, a window of padding only, comes back 0.0 (a real element) instead of inf
(jax/jaxlib 0.12.0.1, XLA:CPU, Shardy and GSPMD; right on one device). Found by the sharded-program
campaign (benchmarks/spmd_hunt.py --seed 7000, seed 7009), reduced by xlaprobe reduce. Exits 1 on
the bug.
Release window (benchmarks/spmd_bug_windows.py --only reduce_window_shift, every jaxlib on PyPI from
0.4.26): Shardy: 0.4.34 (its first working release) through 0.12.0.1; GSPMD: 0.4.26 (the oldest
tried) through 0.12.0.1; no fix."""
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
mesh = Mesh(np.array(jax.devices()[:2]), ("y",))
x = np.zeros(2, np.float32)


def f(x1, x2):
    shifted = lax.reduce_window(x1, np.float32(np.inf), lax.min, (1,), (1,), ((1, -1),))
    return shifted, lax.clamp(x2, shifted, x1)


r, s = NamedSharding(mesh, P()), NamedSharding(mesh, P("y"))
want = np.asarray(jax.jit(f)(x, x)[0])
print("one device:", want.tolist())
got = np.asarray(jax.jit(f, in_shardings=(r, r), out_shardings=(None, s))(x, x)[0])
print("2 devices:", got.tolist())
sys.exit(int(not np.array_equal(want, got)))
