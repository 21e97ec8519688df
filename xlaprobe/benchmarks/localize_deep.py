"""Localization at scale: a residual network deep enough for 10,000+ top-level equations under a
planted fault, localized from scratch (tiers 1-3, and tier 4 inside the kernel).

The program is plain jax.numpy: ``depth`` blocks of [layer norm, dense, gelu, dense, residual]
on a [16, 64] activation (about 30 equations a block), built from NumPy-seeded weights. The
mutant's `MutationSite` is the ground truth; printed: equations, truth and found equation,
fusion and instruction named, compile+run cycles against 2 log2(n) + 10, seconds, load.

    python benchmarks/localize_deep.py                    # depth 350: ~10,500 equations
    python benchmarks/localize_deep.py --depth 40 --mutant swap-divide-fused
"""

from __future__ import annotations

import argparse
import math
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from xlaprobe.localization import localize, make_pool
from xlaprobe.program import Program, Provenance


def deep_program(depth: int, seed: int = 0) -> Program:
    """``depth`` residual MLP blocks on float32[16, 64] (weights float32, NumPy-seeded)."""
    rng = np.random.default_rng(seed)
    width, hidden = 64, 128
    params = [{"w1": (rng.standard_normal((width, hidden)) / 8).astype(np.float32),
               "w2": (rng.standard_normal((hidden, width)) / 11).astype(np.float32),
               "b": (0.02 * rng.standard_normal(hidden)).astype(np.float32)}
              for _ in range(depth)]
    x = rng.standard_normal((16, width)).astype(np.float32)

    def net(params, x):
        for p in params:
            mean = x.mean(-1, keepdims=True)
            h = (x - mean) * jax.lax.rsqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 1e-5)
            h = jax.nn.gelu(h @ p["w1"] + p["b"]) @ p["w2"]
            x = x + 0.5 * h / (1.0 + jnp.abs(h).mean())
        return (x * x).mean(), x

    return Program.from_function(net, (params, x), Provenance("user", f"deep_mlp[{depth}]"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depth", type=int, default=350)
    parser.add_argument("--mutant", default="swap-subtract-fused")
    args = parser.parse_args()
    started = time.perf_counter()
    program = deep_program(args.depth)
    n = len(program.jaxpr.jaxpr.eqns)
    print(f"deep_mlp[{args.depth}]: {n} top-level equations (traced in "
          f"{time.perf_counter() - started:.1f} s)", flush=True)
    spec = f"mutant:{args.mutant}"
    with make_pool(size=1, timeout_s=1800) as pool:
        t0 = time.perf_counter()
        outcome = pool.run(program, spec)
        if not outcome.mutations:
            print(f"{spec} did not fire on this program")
            return
        site = outcome.mutations[0]
        print(f"ground truth: equation {site.equation}, {site.instruction} in {site.fusion} "
              f"({time.perf_counter() - t0:.1f} s)", flush=True)
        t0 = time.perf_counter()
        load = os.getloadavg()[0]
        loc = localize(program, spec, pool, passes=False)
        seconds = time.perf_counter() - t0
    bound = 2 * math.log2(n) + 10
    print(f"found equation {loc.equation.index} ({'exact' if loc.equation.index == site.equation else 'WRONG'}); "
          f"fusion {'right' if site.fusion in loc.kernels.fusions else 'WRONG'} ({', '.join(loc.kernels.fusions[:3])}); "
          f"instruction {loc.op.instruction or '-'} "
          f"({'exact' if loc.op.instruction == site.instruction else 'not exact'}); "
          f"{loc.cycles} cycles (bound {bound:.1f}) + {loc.op.cycles} tier-4; {seconds:.0f} s "
          f"localizing (limit 600 s); load {load:.1f} at start, {os.getloadavg()[0]:.1f} at end")


if __name__ == "__main__":
    main()
