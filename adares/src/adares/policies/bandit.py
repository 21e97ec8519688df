"""ADARES: contextual-bandit rightsizing (Cano et al., "ADARES: Adaptive Resource Management for
Virtual Machines", arXiv:1812.01837, 2018), on Vowpal Wabbit's ``cb_explore_adf``.

Every ``period_steps`` steps and for each VM and resource (CPU, memory) the bandit picks a size
as a multiple of the resource's recent base level (CPU: 95th percentile of the demand estimate,
used + throttled cores; memory: the peak use; both over the last ``cpu_window_steps`` /
``mem_window_steps``, by default the last decision period). Context: time of day, the last
day's distribution's shape relative to the base (spread, tail ratios, trend), the last period's
throttling and the last day's OOM kills. The cost it learns (lower is better), per resource and period, in units
of the base: the mean allocation plus the price-weighted penalties of what went wrong (throttled
cores x throttle_penalty / vcpu_hour; OOM kills x their cost in base-GB-periods). One model per
resource is shared by all VMs.

Safety mask: sizes below a quantile of the same window's CPU demand (default 1 - vcpu_hour /
throttle_penalty, the cost-optimal quantile: 0.9) or its memory peak, plus ``margin``, are not
offered; an OOM grows memory at once by max(20%, 100 MiB) (the VPA's bump).
Decisions are logged with their propensities (``self.log``) for off-policy evaluation.

Learners (``backend``): "numpy" (default; ``adares.learner.RidgeCB``: per-action ridge cost
models, epsilon-greedy, vectorized over VMs: ~15x faster) or "vw" (``CBLearner``: Vowpal
Wabbit ``cb_explore_adf``, any VW exploration, e.g. SquareCB).
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from adares.errors import InputError
from adares.files import write_atomic
from adares.learner import CBLearner, RidgeCB, check_backend
from adares.costs import CostModel
from adares.policies.base import Observation, TraceInfo
from adares.policies.baselines import MIN_CPU, MIN_MEM
from adares.policies.common import Ages, Window, requests_where
from adares.trace import GIB

# Sizes offered, as multiples of the base level. Sizes up to 8x (to reach a batch VM's job from
# an idle hour's base) were tried and cost more at equal violations than they saved (README).
MULTIPLIERS = (0.9, 1.0, 1.1, 1.25, 1.5, 1.75, 2.0, 2.5)
# Columns of Adares._context: a log with another width comes from another version or is corrupt.
# VM level: 14 (time of day, the day's shape, throttling, OOMs, flavor, idle share, crossing
# rate, peak ratio); cluster level: 2 (load, violations); node level: 2 (free share, demand).
CONTEXT_DIM = 18


@dataclass
class DecisionLog:
    """Logged bandit decisions: per row the resource, context vector, allowed action mask,
    chosen action index, its probability and the observed cost; and what the actions mean:
    multipliers (the sizes, multiples of the base level) and floor_action (the largest size
    below the safety floor stood for the floor itself); None where a log does not say."""

    resource: list[str] = field(default_factory=list)
    context: list[np.ndarray] = field(default_factory=list)
    allowed: list[np.ndarray] = field(default_factory=list)
    action: list[int] = field(default_factory=list)
    prob: list[float] = field(default_factory=list)
    cost: list[float] = field(default_factory=list)
    multipliers: tuple[float, ...] | None = None
    floor_action: bool | None = None


RESOURCES = ("cpu", "mem")


def save_log(log: DecisionLog, path: str | Path) -> None:
    """Write a decision log as a compressed .npz (no pickled objects), atomically.
    Raises ValueError on an empty log."""
    if not log.action:
        raise ValueError("empty decision log")
    path = Path(path)
    arrays = {
        "resource": np.array([RESOURCES.index(r) for r in log.resource], dtype=np.int8),
        "context": np.vstack(log.context), "allowed": np.vstack(log.allowed),
        "action": np.asarray(log.action, dtype=np.int64), "prob": np.asarray(log.prob),
        "cost": np.asarray(log.cost)}
    if log.multipliers is not None and log.floor_action is not None:
        arrays["multipliers"] = np.asarray(log.multipliers, dtype=np.float64)
        arrays["floor_action"] = np.asarray([log.floor_action], dtype=np.int8)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    write_atomic(path, buffer.getvalue())


def load_log(path: str | Path, context_dim: int | None = None) -> DecisionLog:
    """Read a log written by ``save_log``. Raises InputError (one line) on a missing or corrupt
    file or inconsistent arrays, or when ``context_dim`` is given (a warm start needs
    ``CONTEXT_DIM``; off-policy evaluation takes any width) and the contexts have another."""
    path = Path(path)
    keys = ("resource", "context", "allowed", "action", "prob", "cost")
    if path.is_dir():
        raise InputError(f"{path}: is a folder, give a decision log (.npz)")
    try:
        with np.load(path, allow_pickle=False) as z:
            missing = [k for k in keys if k not in z.files]
            if missing:
                raise InputError(f"{path}: not a decision log (no array {', '.join(missing)})")
            a = {k: z[k] for k in keys}
            meaning = ((z["multipliers"], z["floor_action"]) if "multipliers" in z.files
                       and "floor_action" in z.files else None)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except InputError:
        raise
    except Exception:
        raise InputError(f"{path}: not a decision log (not a .npz archive of arrays)") from None
    n = len(a["action"])
    numeric = {"resource": "iu", "action": "iu", "context": "fiu", "allowed": "biu",
               "prob": "fiu", "cost": "fiu"}
    if any(a[k].dtype.kind not in kinds for k, kinds in numeric.items()):
        raise InputError(f"{path}: decision log arrays of the wrong type (actions and resources "
                         "are integers, contexts, probabilities and costs numbers)")
    if (a["context"].ndim != 2 or a["allowed"].ndim != 2 or any(len(a[k]) != n for k in keys)
            or n == 0):
        raise InputError(f"{path}: inconsistent decision log arrays")
    if (not np.all((a["prob"] > 0) & (a["prob"] <= 1)) or not np.all(np.isfinite(a["cost"]))
            or np.any((a["resource"] < 0) | (a["resource"] > 1))):
        raise InputError(f"{path}: decision log has invalid probabilities, costs or resources")
    if np.any(a["action"] < 0) or np.any(a["action"] >= a["allowed"].shape[1]):
        raise InputError(f"{path}: decision log has actions out of range")
    if context_dim is not None and a["context"].shape[1] != context_dim:
        raise InputError(f"{path}: decision log contexts have {a['context'].shape[1]} features, "
                         f"the bandit uses {context_dim}")
    if not np.all(np.isfinite(a["context"])):
        raise InputError(f"{path}: decision log has non-finite contexts")
    if not np.all(a["allowed"][np.arange(n), a["action"]]):
        raise InputError(f"{path}: decision log has logged actions outside their allowed set")
    mult = floor = None
    if meaning is not None:
        if (meaning[0].shape != (a["allowed"].shape[1],) or meaning[1].shape != (1,)
                or not np.all(np.isfinite(meaning[0]))):
            raise InputError(f"{path}: decision log's action set does not match its actions")
        mult, floor = tuple(float(x) for x in meaning[0]), bool(meaning[1][0])
    return DecisionLog([RESOURCES[i] for i in a["resource"]], list(a["context"]),
                       list(a["allowed"].astype(bool)), a["action"].tolist(), a["prob"].tolist(),
                       a["cost"].tolist(), mult, floor)


def check_action_set(log: DecisionLog, multipliers: tuple[float, ...], floor_action: bool,
                     where: str) -> None:
    """InputError (one line, naming ``where``) unless ``log`` was made with these actions:
    the same multipliers and the same floor_action (a log that does not record them is
    refused: what its actions meant cannot be checked)."""
    if log.multipliers is None or log.floor_action is None:
        raise InputError(f"{where}: the decision log does not record its action set (written "
                         "by an older version): record it again")
    if (len(log.multipliers) != len(multipliers)
            or not np.allclose(log.multipliers, multipliers, rtol=0, atol=1e-12)):
        raise InputError(f"{where}: the log's sizes {list(log.multipliers)} are not the "
                         f"bandit's {list(multipliers)}")
    if log.floor_action != floor_action:
        raise InputError(f"{where}: the log was made with floor_action={int(log.floor_action)}, "
                         f"the bandit has floor_action={int(floor_action)}")


def _rows_quantile(x: np.ndarray, q: float) -> np.ndarray:
    """``np.quantile(x, q, axis=0)`` of a (k, N) window, the same values: partitioning each VM's
    k values as one contiguous row is several times faster than along the strided axis 0."""
    return np.quantile(np.ascontiguousarray(x.T), q, axis=1)


#: Steps of one decision period of :class:`Adares` (an hour of 300 s steps).
PERIOD_STEPS = 12


def logs_a_decision(n_steps: int, period_steps: int = PERIOD_STEPS) -> bool:
    """Whether a replay of ``n_steps`` steps leaves :class:`Adares` a non-empty decision log: a
    decision is logged with its cost when the period after it ends, so the first one at the end
    of the second period (``n_steps >= 2 * period_steps``)."""
    return n_steps >= 2 * period_steps


class Adares:
    """The ADARES bandit policy (see module doc). ``epsilon``: exploration share;
    ``multipliers``: sizes offered, as multiples of the base level; ``cpu_window_steps`` /
    ``mem_window_steps``: steps (at most a day, 288) over which the base levels and safety
    floors are taken (None: ``period_steps``; 288 was the default before: the last day);
    ``warm_epsilon``: exploration share when ``warm_start`` is given (None: epsilon / 5);
    ``explore_span``: explore only within this many sizes of the greedy one (None: any;
    numpy learner); ``floor_action``: the safety floor itself is a size (the rule without
    learning), so the bandit can always do what ``adares-nolearn`` does; ``conservative``:
    keep the rule's size unless the model predicts a cost lower by more than this share."""

    name = "adares"

    def __init__(self, period_steps: int = PERIOD_STEPS, multipliers: tuple[float, ...] = MULTIPLIERS,
                 epsilon: float = 0.05, margin: float = 0.05, seed: int = 0,
                 costs: CostModel = CostModel(), keep_log: bool = False,
                 cpu_floor_quantile: float | None = None, exploration: str | None = None,
                 warm_start: DecisionLog | None = None, warm_rows: int = 40_000,
                 backend: str = "numpy", cpu_window_steps: int | None = None,
                 mem_window_steps: int | None = None, name: str = "adares",
                 warm_epsilon: float | None = None, explore_span: int | None = 1,
                 floor_action: bool = True, conservative: float = 0.0) -> None:
        self.name = name
        self.period = period_steps
        # The base levels and the safety floors follow the last decision period by default
        # (None), not the whole day: a day's p95 or peak kept every night's allocation at the
        # day's top, and the multipliers (>= 0.9) could not follow the daily cycle down.
        self.cpu_window = period_steps if cpu_window_steps is None else cpu_window_steps
        self.mem_window = period_steps if mem_window_steps is None else mem_window_steps
        self.mult = np.asarray(multipliers, dtype=np.float64)
        self.epsilon, self.margin, self.seed, self.costs = epsilon, margin, seed, costs
        # Transfer as safer exploration: a model warm-started on another cluster's decisions
        # explores less (warm_epsilon, default epsilon / 5) than a cold one.
        if exploration is None and warm_start is not None:
            exploration = f"--epsilon {epsilon / 5 if warm_epsilon is None else warm_epsilon}"
        exploration = exploration or f"--epsilon {epsilon}"
        self.keep_log = keep_log
        # Default CPU floor: the newsvendor quantile 1 - price / penalty (0.9 under the default
        # costs), the allocation that minimizes expected cost; a p99 floor (memory keeps its peak
        # floor) would forbid the cheapest sizes and cost more than the throttling it avoids.
        self.cpu_floor_quantile = (1.0 - costs.vcpu_hour / costs.throttle_penalty
                                   if cpu_floor_quantile is None else cpu_floor_quantile)
        self.exploration = exploration
        self.warm_start, self.warm_rows = warm_start, warm_rows
        self.backend = check_backend(backend)
        # Local exploration (numpy learner): explore within explore_span places of the greedy
        # size (None: anywhere allowed). Exploring anywhere on the grid (up to 2.5x) was the
        # largest part of what the bandit lost to adares-nolearn on homogeneous traces (README).
        self.explore_span = None if explore_span is None else int(explore_span)
        self.floor_action = bool(floor_action)
        # Conservative exploitation (numpy learner): keep the rule's size unless the model
        # predicts a cost lower by more than this share.
        self.conservative = float(conservative)

    def reset(self, info: TraceInfo) -> None:
        """Start a replay with fresh models."""
        feats = np.log(self.mult)[:, None]
        if self.backend == "vw":
            self._cb = {r: CBLearner(len(self.mult), feats, self.exploration, self.seed + i)
                        for i, r in enumerate(RESOURCES)}
        else:
            self._cb = {r: RidgeCB(len(self.mult), feats, self.exploration, self.seed + i,
                                   span=self.explore_span) for i, r in enumerate(RESOURCES)}
        if self.warm_start is not None:
            self._pretrain(self.warm_start)
        self._c, self._m = info.cpu_request.copy(), info.mem_request.copy()
        self._info = info
        self._w = Window(info.n_vms, 288)
        self._step_h = info.step_s / 3600.0
        self._pending: dict[str, tuple] = {}
        self._acc_c = np.zeros(info.n_vms)
        self._acc_thr = np.zeros(info.n_vms)
        self._acc_m = np.zeros(info.n_vms)
        self._acc_oom = np.zeros(info.n_vms)
        self.log = DecisionLog(multipliers=tuple(float(x) for x in self.mult),
                               floor_action=self.floor_action)
        # Lifetimes: a new VM keeps its request until a period of its own usage is seen, and
        # only periods one VM lived through under a bandit decision are learned from.
        self._age = Ages(info.n_vms)
        self._decided = np.ones(info.n_vms, dtype=bool)

    def arrive(self, mask: np.ndarray) -> None:
        """New VMs in the slots ``mask`` ((N,) bool) start at their requests (flavors)."""
        self._c, self._m = requests_where(mask, (self._info.cpu_request, self._info.mem_request),
                                          self._c, self._m)
        self._age.arrive(mask)

    def allocate(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """Current allocations."""
        return self._c, self._m

    def _context(self, x: np.ndarray, base: np.ndarray, hour: float, thr: np.ndarray,
                 ooms: np.ndarray, request: np.ndarray, shared: np.ndarray) -> np.ndarray:
        """(N, CONTEXT_DIM) context of one resource: x (k, N) its window, base (N,), hour of
        day, thr (N,) last period's throttled share, ooms (N,) the window's OOM kills,
        request (N,) the VM's flavor, shared (N, 4) cluster and node columns."""
        b = np.maximum(base, 1e-12)
        mean = x.mean(axis=0)
        peak = x.max(axis=0)
        k = self.period
        recent = x[-k:].mean(axis=0)
        before = x[-2 * k:-k].mean(axis=0) if x.shape[0] >= 2 * k else recent
        above = x > mean
        cols = [np.full(x.shape[1], math.sin(2 * math.pi * hour / 24)),
                np.full(x.shape[1], math.cos(2 * math.pi * hour / 24)),
                x.std(axis=0) / np.maximum(mean, 1e-12),
                _rows_quantile(x, 0.99) / b, peak / b, mean / b,
                x[-k:].max(axis=0) / b, np.log(np.maximum(recent, 1e-12) / np.maximum(before, 1e-12)),
                thr, np.minimum(ooms, 5.0),
                np.log(np.maximum(request, 1e-12) / b), (x < 0.2 * peak).mean(axis=0),
                (above[1:] != above[:-1]).mean(axis=0) if x.shape[0] > 1 else np.zeros(x.shape[1]),
                np.log1p(peak / b)]
        ctx = np.clip(np.nan_to_num(np.column_stack(cols + [shared])), -10.0, 10.0)
        assert ctx.shape[1] == CONTEXT_DIM  # keep load_log's check in step with this
        return ctx

    def _shared(self, demand: np.ndarray, alloc: np.ndarray, bad: np.ndarray,
                capacity: np.ndarray | None) -> np.ndarray:
        """(N, 4) cluster and node columns of one resource from the last period's means per VM:
        demand, alloc (N,) and bad (N,) (throttled cores or OOM kills): the cluster's load
        (demand / allocation) and violation share; the VM's node's free share (1 - allocated /
        capacity) and its co-located demand (node demand / capacity); zeros without nodes."""
        n = len(demand)
        load = demand.sum() / max(alloc.sum(), 1e-12)
        viol = bad.sum() / max(demand.sum(), 1e-12) if bad.dtype != bool else bad.mean()
        cols = [np.full(n, load), np.full(n, viol), np.zeros(n), np.zeros(n)]
        node_of = self._info.node_of
        if node_of is not None and capacity is not None:
            k = len(capacity)
            cols[2] = (1.0 - np.bincount(node_of, alloc, minlength=k) / capacity)[node_of]
            cols[3] = (np.bincount(node_of, demand, minlength=k) / capacity)[node_of]
        return np.column_stack(cols)

    def _learn(self, r: str, costs: np.ndarray, rows: np.ndarray | None = None) -> None:
        """Learn the pending decisions of resource ``r`` from their costs (N,); only the VMs
        ``rows`` ((k,) int) when given."""
        ctx, shared, allowed, chosen, probs = self._pending[r]
        if rows is not None:
            ctx, allowed, chosen, probs, costs = (a[rows] for a in (ctx, allowed, chosen,
                                                                      probs, costs))
            shared = ([shared[i] for i in rows] if isinstance(shared, list)
                      else shared[rows])
            if not len(rows):
                return
        self._cb[r].learn(shared, chosen, probs, costs, allowed)
        if self.keep_log:
            for i in range(len(chosen)):
                self.log.resource.append(r)
                self.log.context.append(ctx[i])
                self.log.allowed.append(allowed[i])
                self.log.action.append(int(chosen[i]))
                self.log.prob.append(float(probs[i]))
                self.log.cost.append(float(costs[i]))

    def _pretrain(self, log: DecisionLog) -> None:
        """Transfer: off-policy training on another replay's logged decisions (VW weighs each
        logged cost by 1 / its propensity), the last ``warm_rows`` rows per resource."""
        res = np.array(log.resource)
        for r in RESOURCES:
            rows = np.flatnonzero(res == r)[-self.warm_rows:]
            if rows.size == 0:
                continue
            allowed = np.vstack([log.allowed[i] for i in rows])
            if allowed.shape[1] != len(self.mult):
                raise InputError(f"decision log has {allowed.shape[1]} actions, the policy {len(self.mult)}")
            if log.multipliers is not None:
                check_action_set(log, tuple(self.mult), self.floor_action, "warm start")
            ctx = np.vstack([log.context[i] for i in rows])
            cb = self._cb[r]
            cb.learn(cb.shared_lines(ctx), np.asarray(log.action)[rows],
                     np.asarray(log.prob)[rows], np.asarray(log.cost)[rows], allowed)

    def _decide(self, r: str, ctx: np.ndarray, base: np.ndarray, floor: np.ndarray) -> np.ndarray:
        """Choose one size per VM for resource ``r`` (batched over VMs): base x an allowed
        multiplier (those at or above the floor, the largest below it, which the floor lifts
        to the floor itself, and the largest), never below the floor."""
        sizes = base[:, None] * self.mult[None, :]
        allowed = sizes >= floor[:, None]
        if self.floor_action:
            # The floor itself is an action: the rule without learning (adares-nolearn) sits
            # there, so the bandit's choices include it (multipliers ascend: the ones below
            # the floor are a prefix, and its last one is lifted to the floor).
            below = (~allowed).sum(axis=1) - 1
            rows = np.flatnonzero(below >= 0)
            allowed[rows, below[rows]] = True
        allowed[:, -1] = True
        shared = self._cb[r].shared_lines(ctx)
        if self.conservative > 0 and self.backend == "numpy":
            # The rule's size, max(base, floor): the smallest allowed multiplier >= 1.
            rule = np.argmax(allowed & (self.mult[None, :] >= 1.0), axis=1)
            rule = np.where(allowed[np.arange(len(base)), rule], rule, len(self.mult) - 1)
            chosen, probs, _ = self._cb[r].choose(shared, allowed, rule, self.conservative)
        else:
            chosen, probs, _ = self._cb[r].choose(shared, allowed)
        self._pending[r] = (ctx, shared, allowed, chosen, probs)
        return np.maximum(sizes[np.arange(len(base)), chosen], floor)

    @property
    def decisions(self) -> int:
        """Bandit decisions made so far (VM x resource x period)."""
        return sum(cb.decisions for cb in self._cb.values())

    def observe(self, obs: Observation) -> None:
        """Accumulate the period's costs; at period ends learn and decide."""
        self._w.push(obs)
        self._age.tick()
        self._acc_c += obs.cpu_alloc
        self._acc_thr += obs.cpu_throttled
        self._acc_m += obs.mem_alloc
        self._acc_oom += obs.oom
        if obs.oom.any():
            bumped = np.maximum(self._m * 1.2, self._m + 100 * 2**20)
            self._m = np.where(obs.oom, bumped, self._m)
        if (obs.t + 1) % self.period:
            return
        k = self.period
        cpu, mem = self._w.cpu(), self._w.mem()
        hour = (obs.time_s / 3600.0) % 24
        if self._pending:
            c = self.costs
            base_c, base_m = self._pending["cpu_base"], self._pending["mem_base"]
            cost_c = (self._acc_c / k + c.throttle_penalty / c.vcpu_hour * self._acc_thr / k) / base_c
            oom_units = c.oom_cost / (c.gb_hour * np.maximum(base_m / GIB, 1e-3) * k * self._step_h)
            cost_m = self._acc_m / k / base_m + (oom_units + 2.0) * self._acc_oom
            valid = self._decided & self._age.ready(k)
            rows = None if valid.all() else np.flatnonzero(valid)
            self._learn("cpu", cost_c, rows)
            self._learn("mem", cost_m, rows)
        info = self._info
        shared = {"cpu": self._shared(cpu[-k:].mean(axis=0), self._acc_c / k, self._acc_thr / k,
                                      info.node_cpu),
                  "mem": self._shared(mem[-k:].mean(axis=0), self._acc_m / k, self._acc_oom > 0,
                                      info.node_mem)}
        self._acc_c[:] = self._acc_thr[:] = self._acc_m[:] = self._acc_oom[:] = 0.0
        thr_share = self._w.thr(k).sum(axis=0) / np.maximum(cpu[-k:].sum(axis=0), 1e-12)
        ooms = self._w.oom().sum(axis=0).astype(np.float64)
        cw = cpu[-self.cpu_window:]
        base_c = np.maximum(_rows_quantile(cw, 0.95), MIN_CPU)
        peak_m = mem[-self.mem_window:].max(axis=0)
        base_m = np.maximum(peak_m, MIN_MEM)
        floor_c = _rows_quantile(cw, self.cpu_floor_quantile) * (1 + self.margin)
        floor_m = peak_m * (1 + self.margin)
        self._pending = {"cpu_base": base_c, "mem_base": base_m}
        self._decided = self._age.ready(k)
        for r, base, floor, x, req in (("cpu", base_c, floor_c, cpu, info.cpu_request),
                                       ("mem", base_m, floor_m, mem, info.mem_request)):
            ctx = self._context(x, base, hour, thr_share, ooms, req, shared[r])
            alloc = self._decide(r, ctx, base, floor)
            if r == "cpu":
                self._c = np.where(self._decided, np.maximum(alloc, MIN_CPU), self._c)
            else:
                self._m = np.where(self._decided, np.maximum(alloc, MIN_MEM), self._m)
