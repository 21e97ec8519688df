"""A numeric finding's triage key at the depth of its fault: the first wrong intermediate.

A key made of the failing outputs' cone (`xlaprobe.triage.finding_key`) names every primitive the
wrong value flowed through, so one faulty kernel met in two programs gets two keys (cbrt of
subnormals had four in one campaign: its cones also held erf, exp2, tanh...). The operation that
computes the first wrong value does not depend on what surrounds it. One compile of the program
with every intermediate of the cone as an output, under the faulty configuration, judged against
the reference's intermediates with their honest budgets (the oracle's own judgement, leaf by
leaf), names it: the first cone equation, in program order, whose value is wrong. Its key is
`xlaprobe.triage.localized_key` of that primitive and its result dtypes, the key a full
localization gives when tier 4 names no other instruction.

Exposing the intermediates can change what XLA fuses; where it hides the fault (no intermediate
wrong), or the finding is no numeric one, there is no such key and the cone key stands.

Source: the first-divergence rule of differential debugging (the "cuts" of tier 2,
`xlaprobe.localization.api`, taken at one cut holding every intermediate).
"""

from __future__ import annotations

from typing import Any

from xlaprobe.checking import CheckResult
from xlaprobe.localization.bisect import record
from xlaprobe.localization.outputs import failing_outputs
from xlaprobe.localization.segments import recording_program
from xlaprobe.oracle import judge_leaf
from xlaprobe.program import Program
from xlaprobe.triage import localized_key, result_dtypes


def first_wrong_equation(program: Program, config: str, check: CheckResult, pool: Any,
                         timeout_s: float | None = None) -> int | None:
    """The index of the first top-level equation of the failing cone whose value `config` gets
    wrong (judged like an output: beyond the absolute AND relative bound and the honest budget).

    Args:
        program: the program.
        config: the faulty configuration's spec (it ran in `check`, with ``reference``).
        check: its `CheckResult` (the failing outputs come from it).
        pool: a `xlaprobe.workers.WorkerPool`.
        timeout_s: per-run limit (s); None: the pool's default.

    Returns:
        The equation index, or None: no numeric finding of `config`, the reference cannot
        record the intermediates, or no intermediate is wrong once exposed.
    """
    verdicts = check.verdicts[check.configs.index(config)]
    if not any(v.kind.is_finding and v.kind.is_numeric for v in verdicts):
        return None
    try:
        cone = failing_outputs(program, verdicts).cone
        recorder, variables = recording_program(program, cone)
        recording = record(pool, recorder, variables, timeout_s)
    except Exception:  # noqa: BLE001 - no recording (NotReproducible, RuntimeError): no key
        return None
    kwargs = {} if timeout_s is None else {"timeout_s": timeout_s}
    outcome = pool.run(recorder, config, **kwargs)
    if not outcome.ran:
        return None
    producer = {v: k for k in cone for v in program.jaxpr.jaxpr.eqns[k].outvars}
    wrong = [producer[var] for var, actual in zip(variables, outcome.outputs)
             if judge_leaf(actual, recording.reference[var], budget=recording.budget.get(var),
                           flushed=recording.flushed.get(var),
                           tolerance=program.tolerance).kind.is_finding]
    return min(wrong) if wrong else None


def first_wrong_key(program: Program, config: str, check: CheckResult, pool: Any,
                    timeout_s: float | None = None) -> str | None:
    """`xlaprobe.triage.localized_key` of `first_wrong_equation` (its primitive and result
    dtypes), or None where it names none."""
    index = first_wrong_equation(program, config, check, pool, timeout_s)
    if index is None:
        return None
    eqn = program.jaxpr.jaxpr.eqns[index]
    return localized_key(eqn.primitive.name, result_dtypes(eqn))
