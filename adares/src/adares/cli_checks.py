"""The command line's validation: option strings in, checked and typed requests out, or an
InputError (one line) before any trace is loaded or replayed. Nothing here prints or replays;
``adares.cli`` runs the jobs and ``adares.render`` prints their results."""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from adares.costs import CostModel
from adares.errors import InputError
from adares.items import split_items
from adares.learner import check_backend
from adares.policies import get, parse_knobs, parse_policies


def check_seed(seed: int) -> int:
    """``seed`` if >= 0; InputError otherwise."""
    if seed < 0:
        raise InputError(f"--seed must be >= 0, got {seed}")
    return seed


def check_out(path: str, flag: str) -> None:
    """Refuse an output path that cannot be written before minutes of replay, not after."""
    if not path:
        return
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{flag} {path}: is a folder, give a file name")
    parent = p.parent.resolve()
    if not parent.is_dir():
        raise InputError(f"{flag} {path}: folder does not exist")
    # A probe file rather than os.access: root passes access() on folders that refuse new
    # files anyway (a read-only mount, /proc).
    try:
        with tempfile.TemporaryFile(dir=parent, prefix=".adares-probe."):
            pass
    except OSError as exc:
        raise InputError(f"{flag} {path}: cannot write in that folder "
                         f"({exc.strerror or type(exc).__name__})") from None


@dataclass(frozen=True)
class Flag:
    """An option's value and the spelling it was given under (error messages use that one)."""

    value: str | int
    flag: str


def alias(new: str | int, old: str | int, unset: str | int, new_flag: str,
          old_flag: str) -> Flag:
    """The value of an option given under its new or its old (hidden) spelling; InputError when
    both are given. ``unset``: the options' shared default."""
    if old != unset and new != unset:
        raise InputError(f"{new_flag} and {old_flag} are one option ({old_flag} is its old "
                         "spelling): give one")
    return Flag(old, old_flag) if old != unset else Flag(new, new_flag)


def check_backend_jobs(backend: str, jobs: int, jobs_flag: str = "--jobs") -> tuple[str, int]:
    """``--backend local|ray`` and ``--jobs`` (the Ray instance's CPUs, 0: every core).
    InputError on an unknown backend, negative jobs, jobs without Ray, or Ray not installed."""
    from adares.backends import BACKENDS

    if backend not in BACKENDS:
        raise InputError(f"unknown backend {backend!r} ({', '.join(BACKENDS)})")
    if jobs < 0:
        raise InputError(f"{jobs_flag} must be >= 0, got {jobs}")
    if jobs and backend != "ray":  # the local backend runs in this one process
        raise InputError(f"{jobs_flag} sets the CPUs of the Ray instance: add --backend ray")
    if backend == "ray":
        try:
            import ray  # noqa: F401 - checked here, before the trace is loaded
        except ImportError:
            raise InputError("--backend ray: Ray is not installed "
                             "(pip install 'adares[ray]')") from None
    return backend, jobs


def parse_resize_costs(price: str, cap: float) -> CostModel:
    """The CostModel of ``--resize-price CPU,MEM`` (money per resize of each resource; one
    number: both) and ``--resize-cap`` (resizes per VM-hour, 0: none). InputError on a
    negative or non-finite price or a negative cap."""
    from adares.replay import MAX_PRICE, parse_pair

    vals = parse_pair(price, "--resize-price", "P", 0.0, inclusive=True, highest=MAX_PRICE)
    if not (math.isfinite(cap) and cap >= 0):
        raise InputError(f"--resize-cap must be a finite number >= 0 (0: no cap), got {cap}")
    return CostModel(cpu_resize_cost=vals[0], mem_resize_cost=vals[1],
                     resize_cap=cap if cap > 0 else float("inf"))


@dataclass(frozen=True)
class ReplayRequest:
    """A checked ``adares replay``: what to replay and where to write. Paths are "" when unset;
    knobs by policy (``parse_knobs``); margins (cpu, mem) fractions."""

    trace: str
    names: list[str]
    seed: int
    bandit: str
    resize: str
    cluster: str
    margins: tuple[float, float]
    clusters: int
    backend: str
    jobs: int
    out: str
    save_log: str
    transfer_from: str
    knobs: dict[str, dict[str, float | int]] = field(default_factory=dict)
    costs: CostModel = CostModel()


def check_replay(trace: str, policies: str, seed: int, bandit: str, resize: str, cluster: str,
                 margin: str, clusters: int, backend: str, jobs: Flag, out: Flag, save_log: str,
                 transfer_from: str, knobs: list[str], resize_price: str = "0.01,0.05",
                 resize_cap: float = 0.0) -> ReplayRequest:
    """Every ``adares replay`` option that the spec alone can check. Raises InputError."""
    from adares import replay as rp
    from adares.simulator import RESIZE_MODES

    names = parse_policies(policies)
    check_backend(bandit)
    if resize not in RESIZE_MODES:
        raise InputError(f"unknown resize mode {resize!r} ({', '.join(RESIZE_MODES)})")
    check_seed(seed)
    margins = rp.parse_margin(margin)
    costs = parse_resize_costs(resize_price, resize_cap)
    check_backend_jobs(backend, int(jobs.value), jobs.flag)
    if clusters < 1:
        raise InputError(f"--clusters must be >= 1, got {clusters}")
    if cluster:
        from adares.cluster import parse_node_spec

        parse_node_spec(cluster)
    check_out(save_log, "--save-log")
    check_out(str(out.value), out.flag)
    learners = [n for n in names if get(n).learns]
    if (save_log or transfer_from) and not learners:
        raise InputError("--save-log and --transfer-from need the adares policy")
    n_vms, _ = rp.planned_size(trace)
    if n_vms is not None and n_vms >= 1 and clusters > n_vms:
        raise InputError(f"--clusters must be in 1..{n_vms} (the VMs), got {clusters}")
    return ReplayRequest(trace, names, seed, bandit, resize, cluster, margins, clusters, backend,
                         int(jobs.value), str(out.value), save_log, transfer_from,
                         knobs_of(knobs, names), costs)


def knobs_of(items: list[str], names: list[str]) -> dict[str, dict[str, float | int]]:
    """``parse_knobs(items)``, refusing (InputError) a knob of a policy that is not replayed
    (``names``): it would be ignored, and the run would not be the one asked for."""
    parsed = parse_knobs(items)
    unused = [p for p in parsed if p not in names]
    if unused:
        raise InputError(f"--knob {unused[0]}.{next(iter(parsed[unused[0]]))}: {unused[0]} is "
                         f"not in --policies ({','.join(names)})")
    return parsed


def check_save_log(save_log: str, steps: int) -> None:
    """InputError when ``--save-log`` is asked of a replay too short for one logged decision."""
    from adares.policies.bandit import logs_a_decision

    if save_log and steps >= 2 and not logs_a_decision(steps):
        raise InputError(f"--save-log: the bandit makes no decision in {steps} steps "
                         "(too short); nothing written")


def load_warm_start(path: str, knobs: dict[str, float | int] | None = None):
    """The decision log of ``--transfer-from`` (None for ""), checked against this version's
    context width and the action set of the bandit with ``knobs`` (adares's; its
    ``floor_action``). Raises InputError on a corrupt log or another action set."""
    if not path:
        return None
    from adares.policies.bandit import CONTEXT_DIM, MULTIPLIERS, check_action_set, load_log

    warm = load_log(path, CONTEXT_DIM)
    if len(warm.allowed[0]) != len(MULTIPLIERS):
        raise InputError(f"--transfer-from {path}: {len(warm.allowed[0])} actions, "
                         f"this version has {len(MULTIPLIERS)}")
    check_action_set(warm, MULTIPLIERS, bool((knobs or {}).get("floor_action", 1)),
                     f"--transfer-from {path}")
    return warm


@dataclass(frozen=True)
class CompareRequest:
    """A checked ``adares compare``: policies, targets (CPU throttled share, OOM kills per
    VM-day), the bisection's range and steps, extra sweep margins, knobs by policy."""

    trace: str
    names: list[str]
    seed: int
    bandit: str
    target_throttle: float
    target_oom: float
    lo: float
    hi: float
    iters: int
    sweep: list[float]
    cluster: str
    out: str
    knobs: dict[str, dict[str, float | int]] = field(default_factory=dict)
    costs: CostModel = CostModel()
    tune: int = 0
    equal_resizes: bool = False
    backend: str = "local"
    jobs: int = 0


def _check_sweep(sweep_margin: str) -> list[float]:
    if not sweep_margin:
        return []
    items = split_items(sweep_margin, "--sweep-margin")
    try:
        ms = [float(v) for v in items]
    except ValueError:
        raise InputError(f"--sweep-margin {sweep_margin!r}: not numbers") from None
    from adares.replay import MAX_MARGIN

    if not all(math.isfinite(m) and -1 < m <= MAX_MARGIN for m in ms):
        raise InputError(f"--sweep-margin: margins must be finite, > -1 and <= {MAX_MARGIN:g}")
    return ms


def check_compare(trace: str, policies: str, seed: int, bandit: str, target_throttle: float,
                  target_oom: float, margin_range: str, iters: int, sweep_margin: str,
                  cluster: str, out: Flag, knobs: list[str], resize_price: str = "0.01,0.05",
                  resize_cap: float = 0.0, tune: int = 0, equal_resizes: bool = False,
                  backend: str = "local", jobs: int = 0) -> CompareRequest:
    """Every ``adares compare`` option. Raises InputError."""
    from adares import replay as rp

    names = parse_policies(policies)
    bounds = [n for n in names if get(n).bound]
    if bounds:
        raise InputError(f"compare: {bounds[0]} has no margin to set (it is the lower bound)")
    check_backend(bandit)
    check_seed(seed)
    for v, flag in ((target_throttle, "--target-throttle"), (target_oom, "--target-oom")):
        if not (math.isfinite(v) and v >= 0):
            raise InputError(f"{flag} must be a finite number >= 0, got {v}")
    costs = parse_resize_costs(resize_price, resize_cap)
    lo, hi = rp.parse_margin(margin_range, "--range")
    if not lo < hi:
        raise InputError(f"--range {margin_range!r}: LO must be below HI")
    if not 0 <= iters <= 30:
        raise InputError(f"--iters must be in 0..30, got {iters}")
    sweep = _check_sweep(sweep_margin)
    if cluster:
        from adares.cluster import parse_node_spec

        parse_node_spec(cluster)
    check_out(str(out.value), out.flag)
    if not 0 <= tune <= 500:
        raise InputError(f"--tune must be in 0..500 trials, got {tune}")
    parsed = knobs_of(knobs, names)
    if tune and parsed:
        raise InputError("--tune searches every knob: drop --knob, or --tune")
    if tune and (sweep or cluster or equal_resizes or backend != "local"):
        raise InputError("--tune runs without --sweep-margin, --cluster, --equal-resizes and "
                         "--backend ray")
    backend, jobs = check_backend_jobs(backend, jobs)
    return CompareRequest(trace, names, seed, bandit, target_throttle, target_oom, lo, hi, iters,
                          sweep, cluster, str(out.value), parsed, costs, tune, equal_resizes,
                          backend, jobs)
