"""Savings at equal violation rate: a margin on top of any policy, the margin that brings a
policy to target violation rates (bisection), and the savings-versus-violations frontier.

Comparing policies on allocated vCPU-hours and GB-hours alone rewards the one that throttles
and OOM-kills most; the fair comparison (ADARES' "fewer vCPUs at the same performance") is at
equal violation rates. Every policy gets the same knob, a margin: its allocations are multiplied
by (1 + cpu_margin) and (1 + mem_margin) (negative margins shrink them), and each margin is
bisected until the policy's CPU throttled share and OOM kills per VM-day meet their targets.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace


from adares.cluster import Cluster
from adares.policies import Margined, Policy, baseline_names
from adares.simulator import CostModel, Result, simulate

__all__ = ["Margined", "Point", "EqualViolation", "equal_violation", "equal_resizes", "sweep",
           "savings_at_equal_violation", "pareto", "frontier_png", "oom_per_vm_day"]
from adares.trace import Trace


def oom_per_vm_day(r: Result) -> float:
    """OOM kills per VM-day of a result (the memory violation rate)."""
    return r.oom_events / (r.vm_hours / 24.0) if r.vm_hours else 0.0


@dataclass
class Point:
    """One replay of a policy at margins (cpu_margin, mem_margin) (fractions): allocated
    vCPU-hours and GiB-hours, violations, reward per VM-hour, resizes and their cost (money)."""

    cpu_margin: float
    mem_margin: float
    vcpu_hours: float
    gb_hours: float
    cpu_throttled_share: float
    oom_per_vm_day: float
    oom_events: int
    reward: float
    resizes: int = 0
    resize_cost: float = 0.0

    @classmethod
    def of(cls, mc: float, mm: float, r: Result) -> Point:
        """The point of result ``r``."""
        return cls(mc, mm, r.vcpu_hours, r.gb_hours, r.cpu_throttled_share, oom_per_vm_day(r),
                   r.oom_events, r.reward, r.resizes, r.extra.get("resize_cost", 0.0))


@dataclass
class EqualViolation:
    """A policy at target violation rates: ``at`` is the replay at the smallest margins found
    whose throttled share and OOM rate are at most the targets (``reached_cpu`` /
    ``reached_mem`` False: even the largest margin tried misses that target, ``at`` is there);
    ``points``: every replay made, for the frontier."""

    policy: str
    at: Point
    reached_cpu: bool
    reached_mem: bool
    points: list[Point] = field(default_factory=list)


def _label(progress: Callable[[str, int, int], None] | None, name: str, mc: float,
           mm: float) -> Callable[[int, int], None] | None:
    if progress is None:
        return None
    label = f"{name} at {mc:+.3f}/{mm:+.3f}"
    return lambda done, total: progress(label, done, total)


def equal_violation(trace: Trace, make: Callable[[], Policy], target_cpu: float = 0.01,
                    target_oom: float = 0.01, lo: float = -0.5, hi: float = 1.5, iters: int = 7,
                    costs: CostModel = CostModel(), cluster: Cluster | None = None,
                    on_point: Callable[[Point], None] | None = None,
                    progress: Callable[[str, int, int], None] | None = None) -> EqualViolation:
    """Bisect a policy's CPU and memory margins in [lo, hi] at once (one replay per step, both
    intervals halved) until its CPU throttled share <= ``target_cpu`` (fraction of demanded
    core-hours) and its OOM kills per VM-day <= ``target_oom`` with the smallest margins, to
    (hi - lo) / 2**iters. Assumes each violation rate falls with its own margin and hardly
    depends on the other (true of every policy here but the bandit, whose reward couples them:
    the final replay at both margins is what is reported). ``make`` builds a fresh policy;
    ``on_point`` is called with each replay's point, ``progress`` as progress(label, steps done,
    steps) during each replay.
    Returns an EqualViolation; ValueError on lo >= hi, lo <= -1 or iters < 0.
    """
    if not (-1 < lo < hi) or iters < 0:
        raise ValueError(f"need -1 < lo < hi and iters >= 0, got {lo}, {hi}, {iters}")
    seen: dict[tuple[float, float], Point] = {}
    name = ""

    def run(mc: float, mm: float) -> Point:
        nonlocal name
        if (mc, mm) not in seen:
            pol = make()
            name = pol.name
            p = Point.of(mc, mm, simulate(trace, Margined(pol, mc, mm), costs, cluster=cluster,
                                          progress=_label(progress, name, mc, mm)))
            seen[(mc, mm)] = p
            if on_point is not None:
                on_point(p)
        return seen[(mc, mm)]

    # The upper ends are feasible until shown otherwise (checked by the final replay).
    c_lo, c_hi, m_lo, m_hi = lo, hi, lo, hi
    for _ in range(iters):
        mc, mm = (c_lo + c_hi) / 2, (m_lo + m_hi) / 2
        p = run(mc, mm)
        if p.cpu_throttled_share > target_cpu:
            c_lo = mc
        else:
            c_hi = mc
        if p.oom_per_vm_day > target_oom:
            m_lo = mm
        else:
            m_hi = mm
    at = run(c_hi, m_hi)
    return EqualViolation(name, at, at.cpu_throttled_share <= target_cpu,
                          at.oom_per_vm_day <= target_oom, list(seen.values()))


def equal_resizes(trace: Trace, make: Callable[[], Policy], target_resizes: int,
                  costs: CostModel = CostModel(), cap_iters: int = 4,
                  on_cap: Callable[[float, EqualViolation], None] | None = None,
                  free: EqualViolation | None = None, **kw) -> tuple[EqualViolation, float]:
    """Hold resizes equal as well as violations: bisect the resize cap (resizes per VM-hour,
    on a log scale, ``cap_iters`` steps, each an ``equal_violation`` with that cap in
    ``costs``) to the largest cap whose replay at the target violation rates makes at most
    ``target_resizes`` resizes. ``kw``: ``equal_violation``'s other arguments. Returns (the
    EqualViolation there, its cap); when even the uncapped policy makes at most
    ``target_resizes``, that one and ``costs.resize_cap``; when every cap tried makes more,
    the smallest cap's. ``on_cap(cap, result)`` is called after each step; ``free``: the
    uncapped result when already known (else it is replayed first).
    Raises ValueError when target_resizes < 0 or cap_iters < 1."""
    if target_resizes < 0 or cap_iters < 1:
        raise ValueError(f"need target_resizes >= 0 and cap_iters >= 1, got {target_resizes}, "
                         f"{cap_iters}")
    if free is None:
        free = equal_violation(trace, make, costs=costs, **kw)
    if free.at.resizes <= target_resizes:
        return free, costs.resize_cap
    vm_hours = trace.n_vms * trace.n_steps * trace.step_s / 3600.0
    # A VM can change at most once a step; fewer than one resize per VM over the trace is
    # the bottom of the range.
    hi = min(costs.resize_cap, 3600.0 / trace.step_s)
    lo = max(target_resizes / vm_hours / 4.0, 0.5 / (trace.n_steps * trace.step_s / 3600.0))
    best: tuple[EqualViolation, float] | None = None
    last: tuple[EqualViolation, float] | None = None
    for _ in range(cap_iters):
        cap = math.sqrt(lo * hi)
        ev = equal_violation(trace, make, costs=replace(costs, resize_cap=cap), **kw)
        if on_cap is not None:
            on_cap(cap, ev)
        last = (ev, cap)
        if ev.at.resizes > target_resizes:
            hi = cap
        else:
            lo, best = cap, (ev, cap)
    return best if best is not None else last


def sweep(trace: Trace, make: Callable[[], Policy], margins: list[float],
          costs: CostModel = CostModel(), cluster: Cluster | None = None,
          on_point: Callable[[Point], None] | None = None,
          progress: Callable[[str, int, int], None] | None = None) -> list[Point]:
    """One replay per margin (the same margin on CPU and memory): the policy's frontier.
    ``on_point`` and ``progress``: as in ``equal_violation``."""
    out = []
    for m in margins:
        pol = make()
        p = Point.of(m, m, simulate(trace, Margined(pol, m, m), costs, cluster=cluster,
                                    progress=_label(progress, pol.name, m, m)))
        if on_point is not None:
            on_point(p)
        out.append(p)
    return out


def savings_at_equal_violation(res: dict[str, EqualViolation],
                               baselines: tuple[str, ...] | None = None
                               ) -> dict[str, dict[str, dict[str, float]]]:
    """Per policy, against each baseline present (not itself; None: the registry's
    ``baseline_names()``): 1 - policy / baseline of vCPU-hours and GB-hours at the target
    violation rates (0.35 = 35% fewer)."""
    baselines = baseline_names() if baselines is None else baselines
    out: dict[str, dict[str, dict[str, float]]] = {}
    for n, ev in res.items():
        out[n] = {}
        for b in baselines:
            if b in res and b != n:
                bb = res[b].at
                out[n][f"vs_{b}"] = {
                    "vcpu_hours": 1 - ev.at.vcpu_hours / bb.vcpu_hours if bb.vcpu_hours else 0.0,
                    "gb_hours": 1 - ev.at.gb_hours / bb.gb_hours if bb.gb_hours else 0.0}
    return out


def pareto(xs: list[float], ys: list[float]) -> tuple[list[float], list[float]]:
    """The lower-left frontier of points (violation x, cost y): those no other point beats on
    both (x' <= x and y' <= y, one strictly), sorted by x."""
    order = sorted(range(len(xs)), key=lambda i: (xs[i], ys[i]))
    fx: list[float] = []
    fy: list[float] = []
    for i in order:
        if not fy or ys[i] < fy[-1]:
            fx.append(xs[i])
            fy.append(ys[i])
    return fx, fy


def frontier_png(res: dict[str, EqualViolation], target_cpu: float, target_oom: float,
                 extra: dict[str, list[Point]] | None = None) -> bytes:
    """The savings-versus-violations frontier as a PNG: per policy, vCPU-hours against CPU
    throttled share and GB-hours against OOM kills per VM-day over every replay made (dots;
    lines: their Pareto frontier), the equal-violation points starred, the targets dashed."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for i, (n, ev) in enumerate(res.items()):
        pts = ev.points + (extra or {}).get(n, [])
        color = f"C{i}"
        for ax, xs, ys, x_at, y_at in (
                (axes[0], [100 * p.cpu_throttled_share for p in pts], [p.vcpu_hours for p in pts],
                 100 * ev.at.cpu_throttled_share, ev.at.vcpu_hours),
                (axes[1], [p.oom_per_vm_day for p in pts], [p.gb_hours for p in pts],
                 ev.at.oom_per_vm_day, ev.at.gb_hours)):
            ax.plot(xs, ys, "o", ms=3, color=color, alpha=0.5)
            fx, fy = pareto(xs, ys)
            ax.plot(fx, fy, "-", lw=1.0, color=color, label=n)
            ax.plot([x_at], [y_at], "*", ms=14, color=color)
    axes[0].axvline(100 * target_cpu, ls="--", color="gray")
    axes[1].axvline(target_oom, ls="--", color="gray")
    axes[0].set_xlabel("CPU throttled (% of demand)")
    axes[0].set_ylabel("vCPU-hours allocated")
    axes[1].set_xlabel("OOM kills per VM-day")
    axes[1].set_ylabel("GB-hours allocated")
    for ax in axes:
        ax.set_xscale("symlog", linthresh=0.01)
        ax.set_xlim(left=0)
    axes[0].legend(fontsize=8)
    fig.suptitle("savings against violations (stars: at the target rates, dashed)")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()
