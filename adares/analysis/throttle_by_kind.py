"""Where the CPU throttling of a population replay comes from, by the generator's workload kind
(which the policies never see), and how much of it falls in a VM's first hour after a job
starts from idle.

    python analysis/throttle_by_kind.py SPEC POLICY CPU_MARGIN MEM_MARGIN [POLICY ...]

SPEC is a ``population:`` trace spec; each POLICY is replayed with the given margins (as
``adares compare`` found them) and its throttled core-hours are split by kind. Prints one line
per (policy, kind): the kind's share of VMs, of demanded core-hours and of throttled
core-hours, and its own throttled share; and the share of all throttling that falls in the
hour after a rise from idle (a step whose demand is over 20% of the flavor and over 3x the
previous hour's peak: a batch job or a spike starting).
"""

from __future__ import annotations

import sys

import numpy as np

from adares.policies.base import Margined, Observation
from adares.policies.registry import make_policy
from adares.population import population_kinds
from adares.replay import load_trace, population_calibration
from adares.simulator import simulate


class _PerVM:
    """Wraps a policy and sums each VM's throttled and demanded cores (N,)."""

    def __init__(self, inner, n: int, after_rise: np.ndarray) -> None:
        self.inner, self.name = inner, inner.name
        self.thr, self.dem = np.zeros(n), np.zeros(n)
        self.after_rise, self.thr_rise = after_rise, 0.0

    def reset(self, info) -> None:
        self.inner.reset(info)

    def arrive(self, mask: np.ndarray) -> None:
        self.inner.arrive(mask)

    def allocate(self, t: int):
        return self.inner.allocate(t)

    def observe(self, obs: Observation) -> None:
        self.thr += obs.cpu_throttled
        self.thr_rise += float(obs.cpu_throttled[self.after_rise[obs.t]].sum())
        self.dem += obs.cpu_used + obs.cpu_throttled
        self.inner.observe(obs)


def _after_rise(cpu: np.ndarray, request: np.ndarray, k: int = 12) -> np.ndarray:
    """(T, N) bool: within k steps after a rise from idle (see the module doc)."""
    t_steps = cpu.shape[0]
    prev = np.full_like(cpu, np.inf)
    for t in range(k, t_steps):
        prev[t] = cpu[t - k:t].max(axis=0)
    rise = (cpu > 0.2 * request[None, :]) & (cpu > 3 * prev)
    out = np.zeros_like(rise)
    for j in range(k):
        out[j:] |= rise[:t_steps - j]
    return out


def main(argv: list[str]) -> None:
    """Replay each (POLICY, CPU_MARGIN, MEM_MARGIN) of ``argv[1:]`` on the trace ``argv[0]``
    and print its throttling by kind (see the module doc)."""
    spec, rest = argv[0], argv[1:]
    trace = load_trace(spec)
    kv = dict(s.split("=") for s in spec.partition(":")[2].split(",") if "=" in s)
    kinds = population_kinds(trace.n_vms, int(kv.get("seed", 0)), population_calibration(spec))
    after = _after_rise(trace.cpu, trace.cpu_request)
    for i in range(0, len(rest), 3):
        name, mc, mm = rest[i], float(rest[i + 1]), float(rest[i + 2])
        rec = _PerVM(Margined(make_policy(name, trace), mc, mm), trace.n_vms, after)
        res = simulate(trace, rec)
        print(f"{name} at +{mc:g}/+{mm:g}: throttled {100 * res.cpu_throttled_share:.2f}% of "
              f"{rec.dem.sum() * trace.step_h:,.0f} demanded core-hours; "
              f"{100 * rec.thr_rise / rec.thr.sum():.1f}% of it in the hour after a rise from idle "
              f"({100 * after.mean():.1f}% of VM-steps)")
        for k in np.unique(kinds):
            sel = kinds == k
            print(f"  {k:12s} VMs {100 * sel.mean():5.1f}%  demand {100 * rec.dem[sel].sum() / rec.dem.sum():5.1f}%"
                  f"  throttled {100 * rec.thr[sel].sum() / rec.thr.sum():5.1f}%"
                  f"  own share {100 * rec.thr[sel].sum() / max(rec.dem[sel].sum(), 1e-12):6.2f}%")


if __name__ == "__main__":
    main(sys.argv[1:])
