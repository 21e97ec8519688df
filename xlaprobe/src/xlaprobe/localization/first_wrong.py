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

Exposing the intermediates can change what XLA fuses or updates in place (the shifted self
dynamic_update_slice computes right once the buffer it updates, or its result, is an output too).
Where that hides the fault (no intermediate wrong), a walk back from the failing output exposes
less at each step: the wrong equation's result with its operands, one compile each. An equation
whose operands are right and whose result is wrong is named; where exposing the operands makes
the result right too, the operand whose exposure hides the fault is named (the producer that goes
wrong only unexposed, whatever consumes it: a reshape in one program, a cumsum in another). Where
the finding is no numeric one, or the walk names nothing, there is no such key and the cone key
stands.

Source: the first-divergence rule of differential debugging (the "cuts" of tier 2,
`xlaprobe.localization.api`, taken at one cut holding every intermediate).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xlaprobe import jaxcompat
from xlaprobe.checking import CheckResult
from xlaprobe.localization.bisect import Recording, record
from xlaprobe.localization.outputs import failing_outputs
from xlaprobe.localization.segments import recording_program
from xlaprobe.oracle import judge_leaf
from xlaprobe.program import Program
from xlaprobe.triage import localized_key, result_dtypes


#: Most steps of the walk back (one compile each) before it gives up (the cone key stands).
WALK_STEPS = 8


def first_wrong_equation(program: Program, config: str, check: CheckResult, pool: Any,
                         timeout_s: float | None = None, walk_back: bool = True) -> int | None:
    """The index of the first top-level equation of the failing cone whose value `config` gets
    wrong (judged like an output: beyond the absolute AND relative bound and the honest budget).

    Every intermediate of the cone is exposed at once; where none is wrong then (the exposure hid
    the fault), `_walk_back` from the failing output names the equation.

    Args:
        program: the program.
        config: the faulty configuration's spec (it ran in `check`, with ``reference``).
        check: its `CheckResult` (the failing outputs come from it).
        pool: a `xlaprobe.workers.WorkerPool`.
        timeout_s: per-run limit (s); None: the pool's default.
        walk_back: whether to walk back where the full exposure names none (False: the
            full exposure alone, for an ablation).

    Returns:
        The equation index, or None: no numeric finding of `config`, the reference cannot
        record the intermediates, or neither the full exposure nor the walk back names one.
    """
    verdicts = check.verdicts[check.configs.index(config)]
    if not any(v.kind.is_finding and v.kind.is_numeric for v in verdicts):
        return None
    try:
        outputs = failing_outputs(program, verdicts)
        recorder, variables = recording_program(program, outputs.cone)
        recording = record(pool, recorder, variables, timeout_s)
    except Exception:  # noqa: BLE001 - no recording (NotReproducible, RuntimeError): no key
        return None
    wrong = _wrong_equations(program, config, outputs.cone, recording, pool, timeout_s)
    if wrong is None:
        return None
    if wrong or not walk_back:
        return wrong[0] if wrong else None
    return _walk_back(program, config, outputs.indices[0], recording, pool, timeout_s)


def _wrong_equations(program: Program, config: str, eqns: Sequence[int], recording: Recording,
                     pool: Any, timeout_s: float | None) -> list[int] | None:
    """The equations among `eqns` whose values `config` gets wrong when exactly their results
    are the program's outputs (sorted; None: that program did not run)."""
    exposed, variables = recording_program(program, eqns)
    kwargs = {} if timeout_s is None else {"timeout_s": timeout_s}
    outcome = pool.run(exposed, config, **kwargs)
    if not outcome.ran:
        return None
    producer = {v: k for k in eqns for v in program.jaxpr.jaxpr.eqns[k].outvars}
    return sorted({producer[var] for var, actual in zip(variables, outcome.outputs)
                   if judge_leaf(actual, recording.reference[var],
                                 budget=recording.budget.get(var),
                                 flushed=recording.flushed.get(var),
                                 tolerance=program.tolerance).kind.is_finding})


def _walk_back(program: Program, config: str, output: int, recording: Recording, pool: Any,
               timeout_s: float | None) -> int | None:
    """Walk back from the equation computing failing output `output` (wrong, as the check
    found), exposing at each step that equation's result with its computed operands (one compile):
    a wrong operand is the next step; right operands and a wrong result name the equation; all
    right means exposing the operands hid the fault, and `_hider` names the operand whose exposure
    hides it (the producer whose kernel goes wrong only unexposed: an in-place update that reads
    its own buffer). At most `WALK_STEPS` steps; None: more, or a run that did not run."""
    jaxpr = program.jaxpr.jaxpr
    producer = {v: k for k, eqn in enumerate(jaxpr.eqns) for v in eqn.outvars
                if isinstance(v, jaxcompat.Var)}
    out = jaxpr.outvars[output]
    current = producer.get(out) if isinstance(out, jaxcompat.Var) else None
    for _ in range(WALK_STEPS):
        if current is None:
            return None
        operands = sorted({producer[v] for v in jaxpr.eqns[current].invars
                           if isinstance(v, jaxcompat.Var) and v in producer})
        if not operands:
            return current
        wrong = _wrong_equations(program, config, [*operands, current], recording, pool,
                                 timeout_s)
        if wrong is None:
            return None
        if wrong and wrong[0] != current:
            current = wrong[0]
        elif wrong:
            return current
        else:
            return _hider(program, config, current, operands, recording, pool, timeout_s)
    return None


def _hider(program: Program, config: str, current: int, operands: Sequence[int],
           recording: Recording, pool: Any, timeout_s: float | None) -> int | None:
    """The first of `operands` whose result, exposed beside equation `current`'s, makes
    `current` right (one compile each beyond the first; None: none does alone, or a run that
    did not run)."""
    if len(operands) == 1:
        return operands[0]
    for k in operands:
        wrong = _wrong_equations(program, config, [k, current], recording, pool, timeout_s)
        if wrong is None:
            return None
        if current not in wrong:
            return k
    return None


def first_wrong_key(program: Program, config: str, check: CheckResult, pool: Any,
                    timeout_s: float | None = None, walk_back: bool = True) -> str | None:
    """`xlaprobe.triage.localized_key` of `first_wrong_equation` (its primitive and result
    dtypes), or None where it names none."""
    index = first_wrong_equation(program, config, check, pool, timeout_s, walk_back)
    if index is None:
        return None
    eqn = program.jaxpr.jaxpr.eqns[index]
    return localized_key(eqn.primitive.name, result_dtypes(eqn))
