"""Heterogeneous VM populations: a mix of workload kinds whose demand moves in different ways,
so that no single sizing rule fits every VM (``population[:vms=500,days=8,seed=0]``).

The kinds and their shapes follow what published characterizations of real clusters report,
qualitatively:
- Cortez et al., "Resource Central: Understanding and Predicting Workloads for Improved Resource
  Management in Large Cloud Platforms", SOSP 2017 (Azure): most VMs are small (1-2 cores) and
  run at low average CPU utilization; VMs split into interactive ones (a daily cycle) and
  delay-insensitive ones (batch, no cycle); a VM's behaviour is consistent over its lifetime.
- Reiss et al., "Heterogeneity and Dynamicity of Clouds at Scale: Google Trace Analysis",
  SoCC 2012, and Tirmazi et al., "Borg: the Next Generation", EuroSys 2020 (Google 2019):
  requests overestimate usage; memory use is steadier than CPU use; usage is heavy-tailed.
- Guo et al., "Who Limits the Resource Efficiency of My Datacenter: An Analysis of Alibaba
  Datacenter Traces", IWQoS 2019: long-running online services hold stable, high memory at low
  CPU; batch work comes in short, intense episodes.

The numbers in ``CALIBRATION`` are this tool's choices within those shapes (the papers give
distributions this module does not fit), frozen in the commit that added them, before the
bandit was run on these populations. The policies never see the kind of a VM: only its usage
and its flavor, as an operator would.
"""

from __future__ import annotations

import numpy as np
from scipy.signal import lfilter

from adares.errors import InputError
from adares.trace import GIB, STEP_S, Trace

# Frozen (see the module doc): changing it changes every figure measured on populations.
CALIBRATION = {
    # share of VMs per kind
    "mix": {"interactive": 0.35, "batch": 0.20, "steady": 0.20, "spiky": 0.15, "idle": 0.10},
    # flavors: cores and their probabilities; GiB per core (compute, general, memory optimized)
    "cores": ((1, 2, 4, 8, 16), (0.35, 0.30, 0.20, 0.10, 0.05)),
    "gib_per_core": ((2.0, 4.0, 8.0), (0.25, 0.55, 0.20)),
    # CPU utilization of the flavor: median level (lognormal, sigma 0.5) per kind
    "cpu_level": {"interactive": 0.15, "batch": 0.03, "steady": 0.10, "spiky": 0.05,
                  "idle": 0.02},
    # memory use as a share of the flavor's memory (median; lognormal sigma 0.25)
    "mem_level": {"interactive": 0.45, "batch": 0.30, "steady": 0.70, "spiky": 0.40,
                  "idle": 0.20},
    "diurnal_amplitude": (0.4, 0.9),     # interactive: uniform range
    "batch_jobs_per_day": 4.0,           # Poisson episodes
    "batch_job_hours_median": 1.5,       # lognormal, sigma 0.6
    "batch_on_utilization": (0.6, 0.95),  # uniform per VM
    "batch_on_memory": 0.75,             # share of flavor memory while a job runs
    "spikes_per_day": (3.0, 8.0),        # spiky: uniform per VM
    "spike_utilization": (0.5, 0.95),    # uniform per spike
    "spike_stay": 0.5,                   # geometric duration, mean 2 steps
    "steady_mem_growth_per_day": (0.0, 0.02),
    "cpu_noise_sigma": {"interactive": 0.10, "batch": 0.10, "steady": 0.04, "spiky": 0.15,
                        "idle": 0.20},
}
KINDS = tuple(CALIBRATION["mix"])


def _episodes(rng: np.random.Generator, t_steps: int, n: int, per_day: np.ndarray,
              mean_steps: np.ndarray) -> np.ndarray:
    """(T, N) bool: on/off episodes that start at ``per_day`` a day and last a geometric
    number of steps with mean ``mean_steps`` (both (N,))."""
    start_p = per_day / (86400 / STEP_S)
    starts = rng.random((t_steps, n)) < start_p
    stay = rng.random((t_steps, n)) < 1.0 - 1.0 / np.maximum(mean_steps, 1.0)
    on = np.zeros((t_steps, n), dtype=bool)
    cur = np.zeros(n, dtype=bool)
    for t in range(t_steps):
        cur = starts[t] | (cur & stay[t])
        on[t] = cur
    return on


def _cpu_shape(rng: np.random.Generator, kind: np.ndarray, t_steps: int,
               tod: np.ndarray, c: dict) -> tuple[np.ndarray, np.ndarray]:
    """(T, N) CPU utilization of the flavor by kind (calibration ``c``), before noise, and
    (T, N) bool: a batch VM's job is running."""
    n = len(kind)
    level = np.array([c["cpu_level"][k] for k in kind]) * rng.lognormal(
        0.0, c.get("cpu_level_sigma", 0.5), n)
    amp = rng.uniform(*c["diurnal_amplitude"], n)
    peak_h = 14.0 + rng.normal(0.0, 2.0, n)
    diurnal = 1.0 + amp * np.cos(2 * np.pi * (tod - peak_h) / 24.0)
    util = np.where(kind == "interactive", level * diurnal, level)
    jobs = _episodes(rng, t_steps, n, np.full(n, c["batch_jobs_per_day"]),
                     rng.lognormal(np.log(c["batch_job_hours_median"] * 12), 0.6, n))
    on_u = rng.uniform(*c["batch_on_utilization"], n)
    util = np.where((kind == "batch") & jobs, on_u, util)
    spikes = _episodes(rng, t_steps, n, rng.uniform(*c["spikes_per_day"], n),
                       np.full(n, 1.0 / (1.0 - c["spike_stay"])))
    spike_u = rng.uniform(*c["spike_utilization"], (t_steps, n))
    util = np.where((kind == "spiky") & spikes, np.maximum(util, spike_u), util)
    return util, jobs


#: Independent draws of a kind's parameters (level, phase, jobs, noise) per slot: with
#: lifetimes, the slot's successive VMs take them in turn (VM j of a slot the draw j mod 4).
LAYERS = 4


def _demand(n: int, seed: int, layer: int, kind: np.ndarray, t_steps: int, step_s: int,
            start_s: float, c: dict,
            flavor: tuple[np.ndarray, np.ndarray] | None) -> tuple[np.ndarray, ...]:
    """(cores (N,), GiB (N,), cpu (T, N) cores, mem (T, N) bytes) of one draw of the
    population: ``layer`` 0 is the trace without lifetimes (its random stream unchanged);
    other layers are independent draws for later VMs of the slots, on ``flavor`` (cores, GiB)."""
    rng = np.random.default_rng([seed, 1] if layer == 0 else [seed, 1, layer])
    cores = rng.choice(np.asarray(c["cores"][0]), n, p=c["cores"][1]).astype(np.float64)
    mem_gib = cores * rng.choice(np.asarray(c["gib_per_core"][0]), n, p=c["gib_per_core"][1])
    if flavor is not None:
        cores, mem_gib = flavor
    tod = ((start_s + step_s * np.arange(t_steps)) / 3600.0 % 24.0)[:, None]
    util, jobs = _cpu_shape(rng, kind, t_steps, tod, c)
    sigma = np.array([c["cpu_noise_sigma"][k] for k in kind])
    ar = lfilter([1.0], [1.0, -0.9], rng.standard_normal((t_steps, n)) * sigma, axis=0)
    cpu = np.clip(util * np.exp(ar - sigma**2 / (2 * (1 - 0.81))), 0.0, 1.0) * cores
    mlevel = np.array([c["mem_level"][k] for k in kind]) * rng.lognormal(0.0, 0.25, n)
    growth = np.where(kind == "steady", rng.uniform(*c["steady_mem_growth_per_day"], n), 0.0)
    days_el = (np.arange(t_steps) * step_s / 86400.0)[:, None]
    mshare = mlevel * (1.0 + growth * days_el)
    mshare = np.where((kind == "batch") & jobs, np.maximum(mshare, c["batch_on_memory"]), mshare)
    mem_noise = np.exp(lfilter([1.0], [1.0, -0.95], rng.standard_normal((t_steps, n)) * 0.01,
                               axis=0))
    mem = np.clip(mshare * mem_noise, 0.02, 1.0) * mem_gib * GIB
    return cores, mem_gib, cpu, mem


def generate_population(n_vms: int = 500, days: float = 8.0, seed: int = 0,
                        step_s: int = STEP_S, start_s: float = 1_700_006_400.0,
                        calibration: dict | None = None, lifetimes: str = "none") -> Trace:
    """A heterogeneous trace of ``n_vms`` VMs over ``days`` days (``calibration``'s mix; None:
    the hand-chosen ``CALIBRATION``; ``adares.calibration.fitted()``: the one fitted to
    published Azure per-VM statistics).

    lifetimes: "none" (every VM lives the whole trace) or "azure" (``adares.lifetimes``: VMs
    depart after Azure-like lifetimes and a new VM of the slot's flavor and kind replaces each,
    with its own level, phase, jobs and noise; ``Trace.arrivals`` marks them).

    Returns a validated Trace: cpu in cores, mem in bytes, requests = the VM's flavor (cores,
    GiB per core x cores). Deterministic for a seed; the kinds are not in the trace (only
    ``population_kinds(n_vms, seed)`` tells them, for analysis). Raises InputError unless
    n_vms >= 1 and the trace has at least 2 steps, or when step_s is not 300 or the lifetime
    model is unknown.
    """
    from adares.lifetimes import LIFETIME_MODELS, arrival_mask

    t_steps = int(round(days * 86400 / step_s))
    if n_vms < 1 or t_steps < 2 or step_s != STEP_S:
        raise InputError(f"population: needs vms >= 1, >= 2 steps of {STEP_S} s; got {n_vms} "
                         f"VMs, {t_steps} steps of {step_s} s")
    if lifetimes not in LIFETIME_MODELS:
        raise InputError(f"population: unknown lifetimes {lifetimes!r} "
                         f"({', '.join(LIFETIME_MODELS)})")
    c = CALIBRATION if calibration is None else calibration
    kind = population_kinds(n_vms, seed, c)
    cores, mem_gib, cpu, mem = _demand(n_vms, seed, 0, kind, t_steps, step_s, start_s, c, None)
    arrivals = None
    if lifetimes == "azure":
        arrivals = arrival_mask(t_steps, n_vms, seed, step_s)
        draw = np.cumsum(arrivals, axis=0) % LAYERS
        for layer in range(1, LAYERS):
            _, _, c_l, m_l = _demand(n_vms, seed, layer, kind, t_steps, step_s, start_s, c,
                                     (cores, mem_gib))
            cpu = np.where(draw == layer, c_l, cpu)
            mem = np.where(draw == layer, m_l, mem)
    ids = tuple(f"vm-{i:05d}" for i in range(n_vms))
    return Trace(np.maximum(cpu, 1e-3), mem, cores, mem_gib * GIB, ids, step_s,
                 start_s, arrivals).validate()


def population_kinds(n_vms: int, seed: int = 0, calibration: dict | None = None) -> np.ndarray:
    """(N,) str: the kind of each VM of ``generate_population(n_vms, seed=seed,
    calibration=calibration)``."""
    rng = np.random.default_rng([seed, 0])
    mix = (CALIBRATION if calibration is None else calibration)["mix"]
    return rng.choice(np.array(KINDS), n_vms, p=list(mix.values()))
