"""Synthetic per-VM demand: diurnal cycle, AR(1) noise, bursts and slow memory growth.

The shape follows what cloud VM studies report (Cortez et al., "Resource Central", SOSP 2017;
Cano et al., "ADARES", 2018): most VMs are provisioned well above their demand, CPU demand has
a daily cycle with noise and short bursts, memory is steadier but some VMs leak slowly.
"""

from __future__ import annotations

import numpy as np
from scipy.signal import lfilter

from adares.errors import InputError
from adares.trace import GIB, STEP_S, Trace

CPU_FLAVORS = np.array([0.25, 0.5, 1, 2, 4, 8, 16, 32], dtype=np.float64)
MEM_FLAVORS_GIB = np.array([0.5, 1, 2, 4, 8, 16, 32, 64, 128], dtype=np.float64)


def _flavor(need: np.ndarray, flavors: np.ndarray) -> np.ndarray:
    """Smallest flavor >= need (the largest flavor when none is)."""
    idx = np.searchsorted(flavors, need, side="left")
    return flavors[np.minimum(idx, len(flavors) - 1)]


def _bursts(rng: np.random.Generator, t_steps: int, n: int, step_s: int) -> np.ndarray:
    """(T, N) CPU burst factors: 1 outside bursts; bursts start 0.2-2 times a day per VM,
    multiply demand by 1.5-4 and last a geometric number of steps (mean ~3.3)."""
    burst_rate_per_step = rng.uniform(0.2, 2.0, n) / (86400 / step_s)
    starts = rng.random((t_steps, n)) < burst_rate_per_step
    mags = rng.uniform(1.5, 4.0, (t_steps, n))
    stay = rng.random((t_steps, n)) < 0.7  # geometric duration, mean ~3.3 steps
    burst = np.ones((t_steps, n))
    cur = np.ones(n)
    for t in range(t_steps):
        cur = np.where(starts[t], mags[t], np.where(stay[t], cur, 1.0))
        burst[t] = cur
    return burst


def generate(n_vms: int = 500, days: float = 8.0, seed: int = 0, step_s: int = STEP_S,
             start_s: float = 1_700_006_400.0, cpu_shape: np.ndarray | None = None,
             mem_shape: np.ndarray | None = None) -> Trace:
    """A synthetic trace of ``n_vms`` VMs over ``days`` days at ``step_s``-second steps.

    Returns a validated Trace: cpu in cores, mem in bytes, requests chosen from VM flavors at
    0.6x to 3x (lognormal) the VM's 99th-percentile CPU and first-day peak memory, so most VMs
    are over-provisioned and some under-provisioned. Deterministic for a given seed.

    cpu_shape / mem_shape: optional aggregate series (one value per step, at least as many steps
    as the trace, e.g. a cluster's CPU utilization): the VMs' daily cycles are replaced by the
    series' normalized shape and each step's total CPU (memory) demand is rescaled to follow it
    exactly, mean preserved (``shaped``).
    Raises InputError unless n_vms >= 1 and the trace has at least 2 steps, or when a shape is
    too short, non-finite or not positive.
    """
    t_steps = int(round(days * 86400 / step_s))
    if n_vms < 1 or t_steps < 2:
        raise InputError(f"synthetic: needs at least 1 VM (vms=) and 2 steps, got {n_vms} VMs, "
                         f"{t_steps} steps")
    rng = np.random.default_rng(seed)
    n = n_vms
    hours = (start_s + step_s * np.arange(t_steps)) / 3600.0
    tod = (hours % 24.0)[:, None]  # time of day, hours (UTC as the VMs' local time)

    # CPU: base level, daily cycle peaking mid-afternoon, AR(1) log-noise, bursts.
    cpu_base = np.clip(rng.lognormal(np.log(0.6), 0.8, n), 0.02, 12.0)
    amp = rng.uniform(0.05, 0.7, n)
    peak_h = 14.0 + rng.normal(0.0, 2.0, n)
    shapes = {}
    for name, sh in (("cpu", cpu_shape), ("mem", mem_shape)):
        if sh is None:
            continue
        sh = np.asarray(sh, dtype=np.float64)
        if sh.ndim != 1 or len(sh) < t_steps or not np.all(np.isfinite(sh[:t_steps])) or sh[:t_steps].min() <= 0:
            raise InputError(f"synthetic: {name} shape needs {t_steps} positive finite values, got {sh.shape}")
        shapes[name] = sh[:t_steps] / sh[:t_steps].mean()
    if "cpu" in shapes:
        diurnal = np.broadcast_to(shapes["cpu"][:, None], (t_steps, n))
    else:
        diurnal = 1.0 + amp * np.cos(2 * np.pi * (tod - peak_h) / 24.0)
    phi = rng.uniform(0.8, 0.97, n)
    sigma = rng.uniform(0.05, 0.2, n)
    eps = rng.standard_normal((t_steps, n)) * sigma
    ar = np.empty_like(eps)
    for j in range(n):  # one IIR filter per VM (phi differs); fast for n ~ 1e3
        ar[:, j] = lfilter([1.0], [1.0, -phi[j]], eps[:, j])
    var = sigma**2 / (1 - phi**2)
    noise = np.exp(ar - var / 2)
    burst = _bursts(rng, t_steps, n, step_s)
    cpu = cpu_base * diurnal * noise * burst
    if "cpu" in shapes:
        total = cpu.sum(axis=1)
        cpu *= (shapes["cpu"] * total.mean() / total)[:, None]

    # Memory: base, a weak daily cycle, small noise, slow growth (leaks) on 40% of VMs.
    mem_base = np.clip(rng.lognormal(np.log(2 * GIB), 0.8, n), 0.2 * GIB, 64 * GIB)
    leak = np.where(rng.random(n) < 0.4, rng.uniform(0.0, 0.06, n), 0.0)  # share per day
    days_elapsed = (np.arange(t_steps) * step_s / 86400.0)[:, None]
    mem_diurnal = 1.0 + 0.25 * amp * np.cos(2 * np.pi * (tod - peak_h) / 24.0)
    mem_eps = rng.standard_normal((t_steps, n)) * 0.01
    mem_ar = lfilter([1.0], [1.0, -0.95], mem_eps, axis=0)
    mem = mem_base * (1.0 + leak * days_elapsed) * mem_diurnal * np.exp(mem_ar)
    mem *= np.where(burst > 1.0, 1.1, 1.0)
    if "mem" in shapes:
        total = mem.sum(axis=1)
        mem *= (shapes["mem"] * total.mean() / total)[:, None]

    over = rng.lognormal(np.log(1.5), 0.45, n)  # provisioning factor, median 1.5x
    first_day = slice(0, min(t_steps, int(86400 / step_s)))
    cpu_request = _flavor(np.quantile(cpu, 0.99, axis=0) * over, CPU_FLAVORS)
    mem_request = _flavor(mem[first_day].max(axis=0) * over / GIB, MEM_FLAVORS_GIB) * GIB
    ids = tuple(f"vm-{i:05d}" for i in range(n))
    return Trace(cpu, mem, cpu_request, mem_request, ids, step_s, start_s).validate()
