"""Replay one trace under several policies and compare them (the ``adares replay`` job)."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

from adares.cluster import Cluster
from adares.errors import InputError
from adares.policies import REPLAY_BASELINES, Margined, Policy, PolicyOptions, get, make_policy
from adares.policies.bandit import DecisionLog
from adares.simulator import CostModel, Result, simulate
from adares.trace import Trace

__all__ = ["load_trace", "planned_size", "replay", "savings", "parse_margin"]


def _kv(items: list[str], spec: str) -> dict[str, str]:
    out = {}
    for it in items:
        if "=" not in it:
            raise InputError(f"trace spec {spec!r}: expected key=value, got {it!r}")
        k, v = (x.strip() for x in it.split("=", 1))
        if not k:
            raise InputError(f"trace spec {spec!r}: expected key=value, got {it!r}")
        if not v.isascii():  # int() reads full-width digits: "１２" would pass as 12
            raise InputError(f"trace spec {spec!r}: {k}={v!r} is not ASCII")
        if k in out:  # the last one silently winning hides a typo
            raise InputError(f"trace spec {spec!r}: {k} given twice")
        out[k] = v
    return out


#: The largest generated trace (VMs x 5-minute steps): 100,000 VMs over ten days.
MAX_VM_STEPS = 300_000_000


def _synthetic_spec(spec: str) -> tuple[int, float | None, int, str | None]:
    """``(vms, days or None for the default, seed, real series name or None)`` of a
    ``synthetic:`` or ``shaped:`` spec, checked; nothing is generated or loaded.
    Raises InputError on a malformed spec."""
    kind, _, rest = spec.partition(":")
    parts = rest.split(",") if rest else []
    if "" in parts:
        raise InputError(f"trace spec {spec!r}: an empty item (two commas, or a comma at an end)")
    source = None
    if kind == "shaped":
        if not parts or "=" in parts[0]:
            raise InputError(f"trace spec {spec!r}: expected shaped:SOURCE[,vms=N,days=D,seed=S]")
        source = parts.pop(0)
    kv = _kv(parts, spec)
    if kind == "population":
        # The calibration is checked (and chosen) by population_calibration, the lifetimes
        # by population_lifetimes.
        kv.pop("calibration", None)
        kv.pop("lifetimes", None)
    unknown = set(kv) - {"vms", "days", "seed"}
    if unknown:
        raise InputError(f"trace spec {spec!r}: unknown keys {', '.join(sorted(unknown))}")
    try:
        vms, seed = int(kv.get("vms", 500)), int(kv.get("seed", 0))
        days = float(kv["days"]) if "days" in kv else None
    except ValueError:
        raise InputError(f"trace spec {spec!r}: vms and seed must be integers, days a number") from None
    # float() accepts "nan" and "inf", and numpy's generator rejects negative seeds with a
    # traceback: both are bad specs, so say so here.
    if days is not None and not math.isfinite(days):
        raise InputError(f"trace spec {spec!r}: days must be a finite number")
    if seed < 0:
        raise InputError(f"trace spec {spec!r}: seed must be >= 0")
    from adares.trace import STEP_S

    steps = (8.0 if days is None else days) * 86400 / STEP_S
    if vms * steps > MAX_VM_STEPS:  # checked before any array is made: numpy would raise or swap
        raise InputError(f"trace spec {spec!r}: {vms:,} VMs x {steps:,.0f} steps is over "
                         f"{MAX_VM_STEPS:,} VM-steps (about 10 GB of arrays): fewer vms or days")
    return vms, days, seed, source


#: ``population:...,calibration=NAME``: the hand-chosen calibration (frozen in commit
#: 3d23365) or the one fitted to published Azure per-VM statistics (``adares.calibration``).
POPULATION_CALIBRATIONS = ("hand", "fitted")


def population_calibration(spec: str) -> dict | None:
    """The calibration a ``population:`` spec names (None: the hand-chosen default).
    Raises InputError on an unknown name."""
    if _population_choice(spec, "calibration", POPULATION_CALIBRATIONS) == "hand":
        return None
    from adares.calibration import fitted

    return fitted()


def population_lifetimes(spec: str) -> str:
    """The lifetime model a ``population:`` spec names (``adares.lifetimes.LIFETIME_MODELS``;
    default "none": every VM lives the whole trace). Raises InputError on an unknown name."""
    from adares.lifetimes import LIFETIME_MODELS

    return _population_choice(spec, "lifetimes", LIFETIME_MODELS)


def _population_choice(spec: str, key: str, choices: tuple[str, ...]) -> str:
    """The value of ``key`` in a ``population:`` spec, one of ``choices`` (default: the first).
    Raises InputError on another value."""
    name = _kv([s for s in spec.partition(":")[2].split(",") if s], spec).get(key, choices[0])
    if name not in choices:
        raise InputError(f"trace spec {spec!r}: unknown {key} {name!r} ({', '.join(choices)})")
    return name


def planned_size(spec: str) -> tuple[int | None, int | None]:
    """``(n_vms, n_steps)`` that ``load_trace(spec)`` will have, as far as the spec alone says:
    both for ``synthetic:``, the VMs (and the steps when ``days`` is given) for ``shaped:``,
    ``(None, None)`` for trace files (only loading them tells). Generates and reads nothing, so
    that options checked against the trace's size are refused before any work.
    Raises InputError on a malformed synthetic or shaped spec."""
    from adares.trace import STEP_S

    kind = spec.partition(":")[0]
    if kind not in ("synthetic", "shaped", "population"):
        return None, None
    vms, days, _, source = _synthetic_spec(spec)
    if days is None and source is None:
        days = 8.0
    return vms, None if days is None else int(round(days * 86400 / STEP_S))


def load_trace(spec: str) -> Trace:
    """A trace from a spec: ``synthetic[:vms=500,days=8,seed=0]``,
    ``population[:vms=500,days=8,seed=0,calibration=hand|fitted,lifetimes=none|azure]``
    (heterogeneous workload kinds, ``adares.population``; ``fitted``: fitted to published Azure
    per-VM statistics; ``azure``: VMs arrive and depart, ``adares.lifetimes``),
    ``shaped:SOURCE[,vms=..,days=..,seed=..]`` (SOURCE: alibaba2018, google2019, azure_v2: the
    synthetic VMs' total demand follows that real cluster series), or
    ``alibaba:USAGE.csv[,meta=META.csv]`` (Alibaba v2018 container_usage/container_meta), or
    ``google2019:INSTANCE_USAGE.parquet`` (Google 2019 instance_usage exported to Parquet), or
    ``azure:READINGS.csv[,vmtable=VMTABLE.csv,cpu=avgcpu|maxcpu]`` (Azure Public Dataset
    vm_cpu_readings; no memory readings: memory held at the VM's bucket).
    Raises InputError on a malformed spec or file."""
    from adares.alibaba import load_container_usage
    from adares.synthetic import generate

    kind, _, rest = spec.partition(":")
    if kind == "population":
        from adares.population import generate_population

        vms, days, seed, _ = _synthetic_spec(spec)
        return generate_population(vms, 8.0 if days is None else days, seed,
                                   calibration=population_calibration(spec),
                                   lifetimes=population_lifetimes(spec))
    if kind in ("synthetic", "shaped"):
        vms, days, seed, source = _synthetic_spec(spec)
        shape = None
        if source is not None:
            from adares.shaping import real_series

            shape = real_series(source)
        if days is None:
            days = 8.0 if shape is None else min(8.0, len(shape[0]) * 300 / 86400)
        if shape is None:
            return generate(vms, days, seed)
        return generate(vms, days, seed, cpu_shape=shape[0], mem_shape=shape[1])
    if kind == "alibaba":
        parts = rest.split(",")
        if not parts[0]:
            raise InputError(f"trace spec {spec!r}: expected alibaba:USAGE.csv[,meta=META.csv]")
        kv = _kv(parts[1:], spec)
        unknown = set(kv) - {"meta"}
        if unknown:
            raise InputError(f"trace spec {spec!r}: unknown keys {', '.join(sorted(unknown))}")
        return load_container_usage(Path(parts[0]), kv.get("meta"))
    if kind == "google2019":
        from adares.google2019 import load_instance_usage

        if not rest:
            raise InputError(f"trace spec {spec!r}: expected google2019:INSTANCE_USAGE.parquet")
        return load_instance_usage(Path(rest))
    if kind == "azure":
        from adares.azure import load_vm_cpu_readings

        parts = rest.split(",")
        if not parts[0]:
            raise InputError(f"trace spec {spec!r}: expected azure:READINGS.csv[,vmtable=VMTABLE.csv,cpu=avgcpu]")
        kv = _kv(parts[1:], spec)
        unknown = set(kv) - {"vmtable", "cpu"}
        if unknown:
            raise InputError(f"trace spec {spec!r}: unknown keys {', '.join(sorted(unknown))}")
        return load_vm_cpu_readings(Path(parts[0]), kv.get("vmtable"),
                                    cpu_column=kv.get("cpu", "avgcpu"))
    raise InputError(f"trace spec {spec!r}: unknown kind {kind!r} (synthetic, population, "
                     "shaped, alibaba, google2019, azure)")


def replay(trace: Trace, names: list[str], seed: int = 0, costs: CostModel = CostModel(),
           on_done: Callable[[Result], None] | None = None, warm_start: DecisionLog | None = None,
           logs: dict[str, DecisionLog] | None = None,
           record_vms: tuple[int, ...] = (), resize_mode: str = "in-place",
           bandit: str = "numpy", cluster: Cluster | None = None,
           margin: tuple[float, float] = (0.0, 0.0),
           progress: Callable[[str, int, int], None] | None = None,
           knobs: dict[str, dict[str, float | int]] | None = None) -> dict[str, Result]:
    """Simulate ``trace`` under each named policy; results by name, in order. When ``logs`` is a
    dict, the bandit's decision log is stored in it under its name; ``record_vms``: VMs whose
    allocations the results keep (for reports); ``resize_mode`` and ``cluster`` (nodes,
    overcommit): see ``simulate``; ``margin``: (cpu, mem) fractions added to every policy's
    allocations but the clairvoyant's (``adares.frontier.Margined``); ``progress``: called as
    progress(policy, steps done, steps) during each replay; ``knobs``: per policy, knob values
    (``adares.policies.parse_knobs``)."""
    out: dict[str, Result] = {}
    for name in names:
        spec = get(name)
        opts = PolicyOptions(seed, costs, (knobs or {}).get(name, {}),
                             warm_start if spec.learns else None,
                             keep_log=logs is not None and spec.learns, bandit=bandit)
        pol = make_policy(name, trace, opts)
        run: Policy = pol
        if margin != (0.0, 0.0) and not spec.bound:
            run = Margined(pol, *margin)
        res = simulate(trace, run, costs, record_vms, resize_mode, cluster,
                       None if progress is None else
                       (lambda done, total, n=name: progress(n, done, total)))
        if logs is not None and spec.learns:
            logs[name] = pol.log
        out[name] = res
        if on_done is not None:
            on_done(res)
    return out


#: The largest margin (+10,000%) and resize price (money per resize) the command line takes:
#: beyond them allocations and rewards overflow to inf (non-JSON) and no study needs more.
MAX_MARGIN, MAX_PRICE = 100.0, 1e6


def parse_pair(spec: str, flag: str, letter: str, lowest: float,
               inclusive: bool, highest: float = math.inf) -> tuple[float, float]:
    """``X`` (both resources) or ``CPU,MEM`` as two finite numbers above ``lowest`` (or equal
    to it when ``inclusive``) and at most ``highest``. InputError naming ``flag`` otherwise;
    ``letter`` names the single value in the message (M for margins, P for prices)."""
    try:
        vals = [float(v) for v in spec.split(",")]
    except ValueError:
        raise InputError(f"{flag} {spec!r}: expected {letter} or CPU,MEM (numbers)") from None
    if len(vals) == 1:
        vals *= 2
    ok = (lambda v: v >= lowest) if inclusive else (lambda v: v > lowest)
    if len(vals) != 2 or not all(math.isfinite(v) and ok(v) and v <= highest for v in vals):
        top = f" and <= {highest:g}" if math.isfinite(highest) else ""
        raise InputError(f"{flag} {spec!r}: expected {letter} or CPU,MEM, finite, "
                         f"{'>=' if inclusive else '>'} {lowest:g}{top}")
    return vals[0], vals[1]


def parse_margin(spec: str, flag: str = "--margin") -> tuple[float, float]:
    """``M`` (both resources) or ``CPU,MEM`` margins as fractions (0.15 = 15% above what the
    policy allocates; > -1). InputError otherwise."""
    return parse_pair(spec, flag, "M", -1.0, inclusive=False, highest=MAX_MARGIN)


def savings(results: dict[str, Result]) -> dict[str, dict[str, dict[str, float]]]:
    """Per policy, the share of vCPU-hours and GB-hours it saves against each baseline that was
    replayed (``REPLAY_BASELINES``: threshold, predictive): 1 - policy / baseline (0.35 = 35%
    fewer vCPU-hours), and
    the change of throttled share and OOM events (policy - baseline)."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for name, r in results.items():
        per: dict[str, dict[str, float]] = {}
        for b in REPLAY_BASELINES:
            if b not in results or b == name:
                continue
            base = results[b]
            per[f"vs_{b}"] = {
                "vcpu_hours": 1.0 - r.vcpu_hours / base.vcpu_hours if base.vcpu_hours else 0.0,
                "gb_hours": 1.0 - r.gb_hours / base.gb_hours if base.gb_hours else 0.0,
                "cpu_throttled_share_delta": r.cpu_throttled_share - base.cpu_throttled_share,
                "oom_events_delta": float(r.oom_events - base.oom_events),
            }
        out[name] = per
    return out
