"""VM lifetimes: VMs arrive and depart, as in a real cluster (``population:...,lifetimes=azure``).

The distribution is Resource Central's lifetime CDF of the whole Azure VM workload (Cortez et
al., SOSP 2017), read off the Azure Public Dataset notebook's figure
(``data/azure_vm_lifetimes.json`` says how, and what was assumed below and above the figure):
most VMs live under an hour (69%), a long tail lives for days. It was frozen in the commit that
added it, before any policy ran on a trace with lifetimes.

A trace with lifetimes keeps N VM slots (a cluster in steady state: each VM that departs is
replaced at once by a new one in its slot, of the same flavor and workload kind, like a
deployment re-creating its VM). Each slot is a renewal process: the VM running at step 0 has
the equilibrium residual lifetime (its lifetime drawn length-biased, then a uniform share of it
left), and each later VM a fresh draw. ``arrivals[t, i]`` marks a new VM in slot i at step t.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources

import numpy as np

#: Lifetime models by name (``population:...,lifetimes=NAME``); "none": every VM lives the
#: whole trace (the replay before lifetimes).
LIFETIME_MODELS = ("none", "azure")


@cache
def azure_lifetime_table() -> tuple[np.ndarray, np.ndarray]:
    """(hours (P,) float64 ascending, cdf (P,) float64 from 0 to 1): the frozen table."""
    doc = json.loads(resources.files("adares").joinpath("data/azure_vm_lifetimes.json")
                     .read_text(encoding="utf-8"))
    return np.asarray(doc["hours"], dtype=np.float64), np.asarray(doc["cdf"], dtype=np.float64)


def lifetime_quantile(u: np.ndarray) -> np.ndarray:
    """Lifetimes (hours, float64, same shape as ``u``) at CDF levels ``u`` in [0, 1]: the
    table's inverse, linear in log(hours) between its points."""
    hours, cdf = azure_lifetime_table()
    return np.exp(np.interp(u, cdf, np.log(hours)))


def sample_lifetimes(rng: np.random.Generator, n: int) -> np.ndarray:
    """(n,) float64 lifetimes in hours drawn from the table (inverse-CDF sampling)."""
    return lifetime_quantile(rng.random(n))


def _residual_hours(rng: np.random.Generator, n: int) -> np.ndarray:
    """(n,) hours left to the VMs running at step 0 of a cluster in steady state: a lifetime
    drawn length-biased (a running VM is more likely a long-lived one) times U(0, 1)."""
    u = (np.arange(20_000) + 0.5) / 20_000
    life = lifetime_quantile(u)
    pick = rng.choice(life, n, p=life / life.sum())
    return pick * rng.random(n)


def arrival_mask(t_steps: int, n: int, seed: int, step_s: int = 300) -> np.ndarray:
    """(t_steps, n) bool: True where a new VM starts in a slot (never at step 0: the VMs
    running then arrived before the trace). Deterministic for a seed; each lifetime is at
    least one step. Raises ValueError unless t_steps >= 1, n >= 1 and step_s > 0."""
    if t_steps < 1 or n < 1 or step_s <= 0:
        raise ValueError(f"arrival_mask needs t_steps, n >= 1 and step_s > 0, got "
                         f"{t_steps}, {n}, {step_s}")
    rng = np.random.default_rng([seed, 7])
    per_step = 3600.0 / step_s
    nxt = np.maximum(1, np.round(_residual_hours(rng, n) * per_step)).astype(np.int64)
    out = np.zeros((t_steps, n), dtype=bool)
    live = np.flatnonzero(nxt < t_steps)
    while live.size:
        out[nxt[live], live] = True
        steps = np.round(sample_lifetimes(rng, live.size) * per_step)
        nxt[live] += np.maximum(1, steps).astype(np.int64)
        live = live[nxt[live] < t_steps]
    return out
