"""Silent wrong result: a 1-D convolution whose input is sharded along its spatial dimension and
whose kernel along its input features, both over axis "y" of a 2x2 mesh whose other axis "x" the
program leaves unused (replicated), with padding (-1, 0): every output element comes back
multiplied by 2, the size of the unused axis (on a 4x2 mesh, by 4). The partitioned module sums
the per-device partial products with an all-reduce whose replica_groups={{0,1,2,3}} span the whole
mesh instead of the "y" groups {{0,1},{2,3}}, so each partial sum is added once per copy along "x".
Padding (0, 0) or (2, 1) is right (the partitioner all-gathers the kernel instead); (0, -1),
(-1, -1) and (1, 0) are doubled too; either operand replicated, or a 1-D mesh, is right.
jax/jaxlib 0.12.0.1, XLA:CPU, Shardy and GSPMD. Found by the sharded-program campaign
(benchmarks/spmd_hunt.py --seed 7000, seed 7108: a bfloat16 conv_general_dilated with padding
(-3, -3) on the 4x2 mesh, 3.125 where the float64 reference is 0.77977, in all 60 elements),
reduced by hand. Exits 1 on the bug. Usage: python THIS [gspmd] [PAD_LO PAD_HI]
Release window (benchmarks/spmd_bug_windows.py --only conv_sharded_contraction, every jaxlib on
PyPI from 0.4.26): Shardy: 0.4.34 (its first working release) through 0.12.0.1; GSPMD: 0.4.26 (the
oldest tried) through 0.12.0.1; no fix."""
import os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
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
numbers = [int(a) for a in sys.argv[1:] if a.lstrip("-").isdigit()]
lo, hi = numbers[:2] if len(numbers) >= 2 else (-1, 0)
mesh = Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("x", "y"))
lhs = np.arange(1, 9, dtype=np.float32).reshape(1, 2, 4)  # (batch, in features, width)
rhs = np.ones((1, 2, 1), np.float32)                       # (out features, in features, width)


def f(l, r):
    return lax.conv_general_dilated(l, r, (1,), ((lo, hi),),
                                    dimension_numbers=("NCH", "OIH", "NCH"))


# The right value: a 1-wide all-ones kernel sums the two input features of the padded input.
padded = np.pad(lhs, ((0, 0), (0, 0), (max(lo, 0), max(hi, 0))))[:, :, max(-lo, 0):]
padded = padded[:, :, :padded.shape[2] - max(-hi, 0)]
right = padded.sum(axis=1, keepdims=True)
print("right:", right.ravel().tolist())
print("one device:", np.asarray(jax.jit(f)(lhs, rhs)).ravel().tolist())
shardings = (NamedSharding(mesh, P(None, None, "y")), NamedSharding(mesh, P(None, "y", None)))
got = np.asarray(jax.jit(f, in_shardings=shardings)(lhs, rhs))
print("2x2 mesh:", got.ravel().tolist())
sys.exit(int(not np.array_equal(right, got)))
