"""Which configurations a fuzzed program runs: every one (``all``), or the cheap ones first and
the expensive ones only where they can still change the outcome (``adaptive``).

Why. Per generated program, ``eager`` costs about three ``xla`` runs and ``xla:O0`` most of one;
nearly every program checks clean, and on a clean program they add nothing the first tier did
not already decide. The adaptive schedule runs the first tier, judges it, and runs the rest only
when one of these holds (the reason is recorded with the check):

* **a finding to explain**: any first-tier configuration failed; every configuration runs, so
  the finding says which configurations fail alike (``Finding.alike``) as under ``all``;
* **no oracle**: the float64 reference is not among the configurations, did not run, or a
  first-tier run is a tool error: the configurations are each other's only baseline;
* **dead code** (``eager`` kinds only): equations whose values reach no output. The optimized
  compile deletes them, so a crash or a hang of their kernels shows only op by op. The generator
  keeps every value live, so this is rare in fuzzing (programs from other sources have it);
* **an audit**: one seed in `AUDIT_EVERY` (`is_audit`) runs everything, so faults of the
  expensive configurations alone (an ``xla:O0``-only miscompile) stay within reach at a known
  rate.

Everything else is skipped, with why: a skipped configuration is no "ok" (the store keeps it in
``skipped_runs``; a campaign counts it as ``skipped``).

The first tier: the reference (with its honest runs), plain ``xla``, and every configuration that
is a compiler under test of its own rather than an explainer of the optimized compile: every
``mutant:*`` (a planted fault is detected only by running it on the program), every other
release (``jaxlib==VERSION``: its bugs show only when it runs; a campaign that lists it is fuzzing
that release) and every ``xla`` configuration with options or another variant
(``xla:fastmath``, ``xla[...]``). Deferred are only the explainers, `EXPLAINERS`: op by op
(``eager``) and the unoptimized compile (``xla:O0``). Without plain ``xla``, the first
configuration listed takes its place.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from xlaprobe.checking import HONEST, REFERENCE, CheckResult, check_program, judge, split_honest
from xlaprobe.configs.registry import Configuration
from xlaprobe.errors import InvalidArgument
from xlaprobe.jaxcompat import Literal
from xlaprobe.outcome import Outcome
from xlaprobe.program import Program

#: The schedules ``xlaprobe fuzz --schedule`` takes.
SCHEDULES = ("adaptive", "all")
#: The default schedule of a new campaign.
DEFAULT_SCHEDULE = "adaptive"
#: One seed in this many (`is_audit`) runs every configuration under ``adaptive`` (0: never).
AUDIT_EVERY = 16
#: Configuration kinds that run every equation op by op (they see dead code).
OP_BY_OP_KINDS = ("eager",)
#: Configurations that explain a finding of the optimized compile (which equations, whether the
#: optimizer is to blame) rather than test a compiler of their own: deferred under ``adaptive``.
EXPLAINERS = ("eager", "xla:O0")
#: Why a configuration was skipped on a clean program (stored with the check).
SKIP_CLEAN = "first tier clean (xla agreed with the reference on every output), no dead code"


def is_audit(seed: int) -> bool:
    """Whether the program of `seed` is an audit (runs every configuration under ``adaptive``):
    one seed in `AUDIT_EVERY`, picked by a hash of the seed (SplitMix64's finalizer), so every
    seed shard (``--shard I/N``) audits its share and the shards' audits are the whole range's.

    >>> [s for s in range(64) if is_audit(s)]
    [6, 29, 38]
    """
    if AUDIT_EVERY <= 0:
        return False
    mask = (1 << 64) - 1
    z = (seed + 0x9E3779B97F4A7C15) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return (z ^ (z >> 31)) % AUDIT_EVERY == 0


def check_schedule(name: str) -> str:
    """`name` if it is a schedule.

    Raises:
        InvalidArgument: not one of `SCHEDULES`.
    """
    if name not in SCHEDULES:
        raise InvalidArgument(f"--schedule must be one of {', '.join(SCHEDULES)}, got '{name}'")
    return name


def first_tier(specs: Sequence[str]) -> tuple[str, ...]:
    """The configurations (of `specs`, in their order) a program runs first under ``adaptive``.

    >>> first_tier(["xla", "xla:O0", "eager", "mutant:swap-subtract-fused", "reference"])
    ('xla', 'mutant:swap-subtract-fused', 'reference')
    >>> first_tier(["xla:O0", "eager", "reference"])
    ('xla:O0', 'reference')
    >>> first_tier(["xla", "eager", "jaxlib==0.10.2", "xla:fastmath", "reference"])
    ('xla', 'jaxlib==0.10.2', 'xla:fastmath', 'reference')
    """
    lead = "xla" if "xla" in specs else next((s for s in specs if s != REFERENCE), None)
    return tuple(s for s in specs if s in (REFERENCE, lead) or not _explainer(s))


def _explainer(spec: str) -> bool:
    """Whether `spec` is one of `EXPLAINERS` (any ``eager`` configuration, plain ``xla:O0``)."""
    config = Configuration.parse(spec)
    return config.kind == "eager" or (config.kind == "xla" and config.variant == "O0"
                                      and not config.options)


def dead_equations(program: Program) -> int:
    """Top-level equations of `program` whose results reach no output (and have no effects):
    what an optimizing compile deletes."""
    jaxpr = program.jaxpr.jaxpr
    live = {v for v in jaxpr.outvars if not isinstance(v, Literal)}
    dead = 0
    for eqn in reversed(jaxpr.eqns):
        if eqn.effects or any(v in live for v in eqn.outvars):
            live.update(v for v in eqn.invars if not isinstance(v, Literal))
        else:
            dead += 1
    return dead


def later_reasons(program: Program, first: CheckResult, later: Sequence[str], *,
                  audit: bool = False) -> dict[str, str]:
    """Why each configuration of `later` runs after the first tier gave `first`, or why it is
    skipped: spec -> ``"run: <why>"`` or ``"skip: <why>"`` (pure).

    Args:
        program: the program.
        first: the judged first tier.
        later: the other configurations of the check.
        audit: this program is an audit (runs everything).
    """
    if audit:
        return {s: f"run: audit (one seed in {AUDIT_EVERY} runs every configuration)"
                for s in later}
    if first.findings:
        why = ", ".join(f"{f.config} {f.kind.value}" for f in first.findings)
        return {s: f"run: a finding to explain ({why})" for s in later}
    if first.judged_against != REFERENCE or first.incomplete:
        return {s: "run: no oracle verdict (the reference did not run or a run is a tool error)"
                for s in later}
    dead = dead_equations(program)
    return {s: (f"run: {dead} dead equation{'s' if dead != 1 else ''} (the optimized compile "
                "deletes them; op by op runs them)")
            if dead and Configuration.parse(s).kind in OP_BY_OP_KINDS else f"skip: {SKIP_CLEAN}"
            for s in later}


def check_scheduled(program: Program, configs: Sequence[str], pool: Any, *,
                    schedule: str = DEFAULT_SCHEDULE, audit: bool = False,
                    timeout_s: float | None = None) -> CheckResult:
    """Check `program` under `schedule` (see the module docstring).

    Args:
        program: the program.
        configs: configuration specs (validated), the reference among them or not.
        pool: an `xlaprobe.workers.WorkerPool`.
        schedule: ``"adaptive"`` or ``"all"`` (`xlaprobe.checking.check_program`).
        audit: run everything (an audit program under ``adaptive``).
        timeout_s: per-run limit (s); None: the pool's default.

    Returns:
        The `CheckResult` over the configurations that ran; its ``skipped`` holds
        (spec, why) of the others.

    Raises:
        InvalidArgument: an unknown schedule or configuration.
    """
    specs = [str(c) for c in configs]
    first = first_tier(specs)
    if check_schedule(schedule) == "all" or REFERENCE not in specs or len(first) == len(specs):
        return check_program(program, specs, pool, timeout_s=timeout_s)
    later = [s for s in specs if s not in first]
    kwargs = {} if timeout_s is None else {"timeout_s": timeout_s}
    runs = [*first, *HONEST]
    outcomes: dict[str, Outcome] = {}
    honest: dict[int, Outcome] = {}
    for index, outcome in pool.run_many([(program, s) for s in runs], **kwargs):
        if index < len(first):
            outcomes[first[index]] = outcome
        else:
            honest[index - len(first)] = outcome
    flushed, budget = split_honest([honest[i] for i in range(len(HONEST))])
    tier1 = judge(program, list(first), [outcomes[s] for s in first], budget, flushed)
    reasons = later_reasons(program, tier1, later, audit=audit)
    to_run = [s for s in later if reasons[s].startswith("run:")]
    if not to_run:
        return dataclasses.replace(tier1, skipped=tuple(
            (s, reasons[s].removeprefix("skip: ")) for s in later))
    for index, outcome in pool.run_many([(program, s) for s in to_run], **kwargs):
        outcomes[to_run[index]] = outcome
    ran = [s for s in specs if s in outcomes]
    result = judge(program, ran, [outcomes[s] for s in ran], budget, flushed)
    return dataclasses.replace(result, skipped=tuple(
        (s, reasons[s].removeprefix("skip: ")) for s in later if s not in outcomes))
