"""One policy's part of ``adares compare``, as a job that runs here or as a Ray task: its
equal-violation point, its sweep, and, when resizes are held equal, its resize cap."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from adares.cluster import Cluster
from adares.costs import CostModel
from adares.frontier import EqualViolation, Point, equal_resizes, equal_violation, sweep
from adares.policies import PolicyOptions, make_policy
from adares.trace import Trace


@dataclass(frozen=True)
class CompareJob:
    """What one policy's bisection needs: its name and options, the targets (CPU throttled
    share, OOM kills per VM-day), the margin range and steps, sweep margins, the prices (with
    their resize cap) and, to hold resizes equal, the resize count to reach (None: not held)
    with the cap bisection's steps."""

    name: str
    options: PolicyOptions
    target_cpu: float
    target_oom: float
    lo: float
    hi: float
    iters: int
    sweep: tuple[float, ...] = ()
    costs: CostModel = CostModel()
    target_resizes: int | None = None
    cap_iters: int = 4


@dataclass
class JobResult:
    """A job's equal-violation result, its sweep points and the resize cap it ran with
    (resizes per VM-hour; inf: none)."""

    result: EqualViolation
    sweep: list[Point]
    resize_cap: float


def run_job(trace: Trace, job: CompareJob, cluster: Cluster | None = None,
            free: EqualViolation | None = None,
            on_point: Callable[[Point], None] | None = None,
            progress: Callable[[str, int, int], None] | None = None) -> JobResult:
    """Run ``job`` on ``trace``; ``free``: its equal-violation result without a cap, when
    already known (the resize bisection starts from it); ``on_point`` and ``progress`` as in
    ``equal_violation`` (here only: they do not travel to a Ray task). Raises InputError on a
    bad knob."""
    def make():
        return make_policy(job.name, trace, job.options)

    kw = dict(target_cpu=job.target_cpu, target_oom=job.target_oom, lo=job.lo, hi=job.hi,
              iters=job.iters, cluster=cluster, on_point=on_point, progress=progress)
    if job.target_resizes is None:
        ev, cap = equal_violation(trace, make, costs=job.costs, **kw), job.costs.resize_cap
    else:
        ev, cap = equal_resizes(trace, make, job.target_resizes, job.costs, job.cap_iters,
                                free=free, **kw)
    costs = job.costs if cap == job.costs.resize_cap else replace(job.costs, resize_cap=cap)
    pts = (sweep(trace, make, list(job.sweep), costs, cluster=cluster, on_point=on_point,
                 progress=progress) if job.sweep else [])
    return JobResult(ev, pts, cap)
