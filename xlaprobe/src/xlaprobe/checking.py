"""Differential check of one Program: run every configuration in workers, judge each output leaf
against the float64 reference with the honest-run error budget, and name the findings."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xlaprobe import freedoms
from xlaprobe.checker import Checker, Failure
from xlaprobe.configs.reference_scipy import output_gauges
from xlaprobe.configs.registry import Configuration, get_kind
from xlaprobe.oracle import Verdict, VerdictKind, judge_outcome, judge_outcomes, summary_kind
from xlaprobe.outcome import Outcome, OutcomeKind
from xlaprobe.program import Program
from xlaprobe.triage import finding_key

REFERENCE = "reference"
#: The honest run in the program's own dtypes: the error budget (see `xlaprobe.oracle`).
BUDGET = "reference:native"
#: The honest run with subnormals flushed to zero: explains `ftz` differences.
FLUSHED = "reference:ftz"
#: Monte Carlo arithmetic samples of honest rounding: one round-to-nearest run is a single sample
#: of the rounding error and can land close to float64 by chance (see `reference.evaluate`).
MCA_SAMPLES = ("reference:mca[seed=1]", "reference:mca[seed=2]")
#: The honest runs that run beside ``reference``, in the one order every user reads them in
#: (`split_honest`): the flushed run, then the error budget (native, then Monte Carlo samples).
HONEST = (FLUSHED, BUDGET, *MCA_SAMPLES)
DEFAULT_CONFIGS = "xla,xla:O0,eager,reference"
#: Why each honest run is there, as progress lines label it (`run_plan`).
HONEST_ROLES = {FLUSHED: "subnormals flushed, explains ftz differences",
                BUDGET: "error budget in the program's own dtypes",
                **{s: f"error budget, Monte Carlo rounding sample {i}"
                   for i, s in enumerate(MCA_SAMPLES, 1)}}


def run_plan(asked: Sequence[str], checked: Sequence[str]) -> list[tuple[str, str]]:
    """Every run a check makes, in order, as ``(spec, label)``: what the user asked for
    labelled as itself, and what the check adds labelled as added, with why.

    >>> run_plan(["xla"], ["xla", "reference"])[:3]  # doctest: +NORMALIZE_WHITESPACE
    [('xla', 'xla'), ('reference', 'reference (added: the float64 oracle)'),
     ('reference:ftz', 'reference:ftz (added reference variant: subnormals flushed, explains
     ftz differences)')]

    Args:
        asked: the specs the user gave (``--configs``).
        checked: the configurations the check runs (`xlaprobe.api.with_oracle`: `asked`, then
            those the target names and ``reference``); with ``reference`` the `HONEST` runs
            follow, as `check_program` runs them.
    """
    given = set(asked)
    plan = []
    for spec in checked:
        why = None if spec in given else (
            "the float64 oracle" if spec == REFERENCE else "named by the target")
        plan.append((spec, spec if why is None else f"{spec} (added: {why})"))
    if REFERENCE in checked:
        plan += [(s, f"{s} (added reference variant: {HONEST_ROLES[s]})") for s in HONEST]
    return plan


def split_honest(outcomes: Sequence[Outcome]) -> tuple[Outcome | None, tuple[Outcome, ...]]:
    """(the flushed run, the budget runs) from the outcomes of `HONEST`, in its order.

    Args:
        outcomes: one per spec of `HONEST`, or none (no honest runs: (None, ())).
    """
    if not outcomes:
        return None, ()
    return outcomes[0], tuple(outcomes[1:])


@dataclasses.dataclass(frozen=True, slots=True)
class Finding:
    """A configuration whose verdict on the program is not ok.

    Attributes:
        config: the configuration spec.
        kind: its most severe verdict kind over output leaves.
        outputs: names of the failing output leaves.
        fingerprint: the identity of its failure for deduplication (hex, 16 chars;
            `xlaprobe.triage.finding_key`): failure class, and the failing outputs' cone (or the
            crash's check-failure line, or the compile error's message).
        alike: every configuration of the check that fails the same way
            (`xlaprobe.checker.Checker.same`: failure class, crash signature, a failing output
            in common), sorted: data about the bug, not part of its key.
        freedom: for kind FREEDOM, the freedoms XLA took (``+``-joined labels), else "".
    """

    config: str
    kind: VerdictKind
    outputs: tuple[str, ...]
    fingerprint: str
    alike: tuple[str, ...] = ()
    freedom: str = ""

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"config": self.config, "kind": self.kind.value, "outputs": list(self.outputs),
                "fingerprint": self.fingerprint, "alike": list(self.alike),
                "freedom": self.freedom}


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """Everything one check produced.

    Attributes:
        program: the checked program.
        configs: the configuration specs, in the order given.
        outcomes: one Outcome per configuration.
        verdicts: per configuration, one Verdict per output leaf.
        judged_against: ``"reference"``, or the configuration used as baseline when the reference
            is not among the configurations or did not run.
        budget: the honest-run outcomes (``reference:native`` then the Monte Carlo samples).
        flushed: the flushed honest-run outcome (``reference:ftz``) or None.
        findings: the configurations with a finding, in configuration order.
        accepted: the freedoms accepted as ok (`xlaprobe.freedoms.parse_accept`).
        rechecks: the freedom evidence runs (``reference:fma``, configurations with a freedom
            switched off), whose answers the labelled verdicts' details report.
        skipped: (spec, why) of each configuration the check was asked for but did not run (an
            adaptive schedule, `xlaprobe.schedule`): not in `configs`, and no "ok".
    """

    program: Program
    configs: tuple[str, ...]
    outcomes: tuple[Outcome, ...]
    verdicts: tuple[tuple[Verdict, ...], ...]
    judged_against: str
    budget: tuple[Outcome, ...]
    flushed: Outcome | None
    findings: tuple[Finding, ...]
    accepted: frozenset[str] = freedoms.DEFAULT_ACCEPT
    rechecks: tuple[Outcome, ...] = ()
    skipped: tuple[tuple[str, str], ...] = ()

    @property
    def ok(self) -> bool:
        """True when there is no finding."""
        return not self.findings

    @property
    def incomplete(self) -> dict[str, str]:
        """Configurations xlaprobe itself could not run or judge, each with why: a tool error
        of its interpreters (`xlaprobe.outcome.OutcomeKind.TOOL_ERROR`), and the float64
        reference when it was asked for but did not run (the oracle never judged; the other
        configurations were compared with each other only). Empty when the check is complete."""
        return {c: f"{o.kind.value}: {o.last_line}" for c, o in zip(self.configs, self.outcomes)
                if o.kind is OutcomeKind.TOOL_ERROR or (c == REFERENCE and not o.ran)}

    def failure(self, spec: str) -> Failure | None:
        """The failure configuration `spec` shows (`xlaprobe.checker.Failure`); None when it
        passed, did not run here, or the check was not judged against the float64 reference
        (nothing else decides "wrong")."""
        if self.judged_against != REFERENCE or spec not in self.configs:
            return None
        index = self.configs.index(spec)
        return Failure.of(self.verdicts[index], self.outcomes[index])

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready summary (for ``--json``)."""
        p = self.program
        return {
            "program": {"name": p.provenance.name, "source": p.provenance.source,
                        "seed": p.provenance.seed, "fingerprint": p.fingerprint,
                        "equations": p.num_equations, "outputs": len(p.output_names)},
            "judged_against": self.judged_against,
            "configs": [
                {"config": c, "outcome": o.kind.value, "seconds": round(o.seconds, 4),
                 "error": o.error[-500:], "signal": o.signal,
                 "verdict": summary_kind(x.kind for x in v).value,
                 "freedom": freedoms.labels_of(v),
                 "outputs": [x.to_json() for x in v]}
                for c, o, v in zip(self.configs, self.outcomes, self.verdicts)],
            "findings": [f.to_json() for f in self.findings],
            "incomplete": self.incomplete,
            "freedoms": {"accepted": sorted(self.accepted),
                         "rechecks": [{"config": o.config, "outcome": o.kind.value}
                                      for o in self.rechecks]},
            "skipped": [{"config": c, "why": why} for c, why in self.skipped],
        }


def _reference_verdicts(program: Program, outcome: Outcome) -> list[Verdict]:
    # The reference is the oracle; it is only judged where the right answer is known.
    if outcome.ran and program.expected is not None:
        # Judge the float64 reference rounded to the program's output dtypes, as expected() is.
        rounded = tuple(np.asarray(r).astype(np.asarray(e).dtype)
                        for r, e in zip(outcome.outputs, program.expected))
        return judge_outcome(dataclasses.replace(outcome, outputs=rounded), program.expected,
                             program.output_names, tolerance=program.tolerance)
    if outcome.ran:
        # Nothing was compared: no ULP count (shown "-").
        return [Verdict(config=outcome.config, output=n, index=i, kind=VerdictKind.OK,
                        max_ulp=math.nan, detail="the oracle")
                for i, n in enumerate(program.output_names)]
    return judge_outcome(outcome, [], program.output_names)


def judge(program: Program, configs: Sequence[str], outcomes: Sequence[Outcome],
          budget: Sequence[Outcome] = (), flushed: Outcome | None = None, *,
          rechecks: Sequence[Outcome] = (), accept: frozenset[str] | None = None,
          candidates: bool = False) -> CheckResult:
    """Turn outcomes into verdicts and findings (pure; no running).

    Args:
        program: the program.
        configs: configuration specs, one per outcome.
        outcomes: one per configuration.
        budget: the ``reference:native`` and Monte Carlo outcomes (empty: no budget).
        flushed: the ``reference:ftz`` outcome, or None.
        rechecks: freedom evidence runs (`xlaprobe.freedoms.followups`), by their spec.
        accept: accepted freedoms; None: `xlaprobe.freedoms.DEFAULT_ACCEPT`.
        candidates: label the freedoms the rechecks would have to confirm (a first judgement,
            whose labels `xlaprobe.freedoms.followups` reads; see `check_program`).

    Returns:
        The `CheckResult`.
    """
    by_config = dict(zip(configs, outcomes))
    reference = by_config.get(REFERENCE)
    if reference is not None and reference.ran:
        judged_against, baseline = REFERENCE, reference.outputs
    else:
        ran = [c for c in configs if by_config[c].ran and c != REFERENCE]
        judged_against = ran[0] if ran else ""
        baseline = by_config[judged_against].outputs if ran else None
    def usable(extra: Outcome | None) -> tuple[np.ndarray, ...] | None:
        return extra.outputs if extra is not None and extra.ran and judged_against == REFERENCE \
            else None

    honest_runs = [o for o in map(usable, budget) if o is not None]
    honest = [list(leaves) for leaves in zip(*honest_runs)] if honest_runs else None
    flushed_outputs = usable(flushed)
    # Interpreters return float64 arrays of float32 outputs: judge (and count ULPs) in the
    # program's dtypes.
    dtypes = [aval.dtype for aval in program.jaxpr.out_avals]
    # Eigenvectors and singular vectors are compared up to their symmetry (sign, rotation).
    gauges = output_gauges(program.jaxpr) if baseline is not None else ()
    accepted = freedoms.DEFAULT_ACCEPT if accept is None else accept
    evidence = freedoms.Evidence(baseline or (), honest, dtypes,
                                 {o.config: o for o in (*outcomes, *rechecks, *(
                                     [flushed] if flushed is not None else []))}, candidates)
    judged: dict[int, list[Verdict]] = {}
    if baseline is not None:
        # Every configuration that ran against the baseline at once: each leaf's budget is
        # made once.
        compared = [i for i, (c, o) in enumerate(zip(configs, outcomes))
                    if c != REFERENCE and o.ran and len(o.outputs) == len(baseline)]
        judged = dict(zip(compared, judge_outcomes(
            [outcomes[i] for i in compared], baseline, program.output_names, budget=honest,
            flushed=flushed_outputs, tolerance=program.tolerance, gauges=gauges,
            dtypes=dtypes)))
    verdicts: list[tuple[Verdict, ...]] = []
    failed: list[tuple[str, Failure, tuple[int, ...], str]] = []  # config, failure, outputs, error
    for position, (config, outcome) in enumerate(zip(configs, outcomes)):
        if config == REFERENCE:
            leaf_verdicts = _reference_verdicts(program, outcome)
        elif baseline is None:
            leaf_verdicts = judge_outcome(outcome, [np.zeros(0)] * len(program.output_names),
                                          program.output_names)
            if outcome.ran:  # nothing to compare with
                leaf_verdicts = [dataclasses.replace(v, kind=VerdictKind.OK, detail="no baseline")
                                 for v in leaf_verdicts]
        else:
            leaf_verdicts = judged[position] if position in judged else judge_outcome(
                outcome, baseline, program.output_names)
            if judged_against == REFERENCE and outcome.ran:
                leaf_verdicts = freedoms.label(leaf_verdicts, outcome.outputs, evidence, accepted)
        verdicts.append(tuple(leaf_verdicts))
        failure = Failure.of(leaf_verdicts, outcome)
        # A reference that cannot run is a gap in xlaprobe, not a compiler bug.
        if failure is not None and not (config == REFERENCE and not outcome.ran):
            failing = tuple(v.index for v in leaf_verdicts if v.kind.is_finding)
            failed.append((config, failure, failing, outcome.error))
    findings = _findings(program, failed, dict(zip(configs, verdicts)))
    return CheckResult(program, tuple(configs), tuple(outcomes), tuple(verdicts), judged_against,
                       tuple(budget), flushed, tuple(findings), accepted, tuple(rechecks))


def _findings(program: Program, failed: list[tuple[str, Failure, tuple[int, ...], str]],
              verdicts: dict[str, tuple[Verdict, ...]]) -> list[Finding]:
    """The findings of the failed configurations ((config, failure, failing leaves, error))."""
    findings = []
    for config, failure, failing, error in failed:
        # Which configurations fail the same way is the checker's answer, the same one that
        # localization and reduction ask: a NaN and a finite wrong value of one output, or one
        # abort with different addresses, are one failure.
        checker = Checker(failure)
        alike = tuple(sorted(c for c, other, *_ in failed if checker.same(other)))
        labels = freedoms.labels_of(verdicts[config]) \
            if failure.kind is VerdictKind.FREEDOM else ""
        findings.append(Finding(config, failure.kind, failure.outputs,
                                finding_key(program, config, failure.kind, failing, error, alike),
                                alike, labels))
    return findings


def validate_for(program: Program, configs: Sequence[Configuration]) -> None:
    """Check, before any run, that each configuration can run `program` (kinds with a
    ``validate_program`` rule: an ``spmd`` mesh must fit the program's shardings).

    Raises:
        InvalidArgument: a configuration cannot run this program (one line, naming the fix).
    """
    for config in configs:
        rule = getattr(get_kind(config.kind), "validate_program", None)
        if rule is not None:
            rule(config, program)


def check_program(program: Program, configs: Sequence[Configuration | str], pool: Any, *,
                  on_outcome: Callable[[Outcome], None] | None = None,
                  timeout_s: float | None = None,
                  accept: frozenset[str] | None = None) -> CheckResult:
    """Run every configuration on `program` in `pool`'s workers and judge the outputs.

    When ``reference`` is among the configurations, ``reference:native`` and two Monte Carlo
    arithmetic samples (the error budget) and ``reference:ftz`` (what flushing subnormals gives)
    run too. Crashes, hangs and compile errors are outcomes, never exceptions.

    Args:
        program: the program.
        configs: configurations or spec strings (parsed and validated in this process).
        pool: an `xlaprobe.workers.WorkerPool`.
        on_outcome: called with each outcome as it arrives (progress display).
        timeout_s: per-run limit (s); None: the pool's default.
        accept: freedoms accepted as ok (`xlaprobe.freedoms.parse_accept`); None: the default.

    Returns:
        The `CheckResult`.

    Raises:
        InvalidArgument: a configuration spec is invalid.
    """
    parsed = [c if isinstance(c, Configuration) else Configuration.parse(c) for c in configs]
    validate_for(program, parsed)
    specs = [str(c) for c in parsed]
    run = list(parsed)
    if REFERENCE in specs:
        run += [Configuration.parse(s) for s in HONEST]
    outcomes: dict[int, Outcome] = {}
    kwargs = {} if timeout_s is None else {"timeout_s": timeout_s}
    for index, outcome in pool.run_many([(program, c) for c in run], **kwargs):
        outcomes[index] = outcome
        if on_outcome is not None:
            on_outcome(outcome)
    flushed, budget = split_honest([outcomes[i] for i in range(len(parsed), len(run))])
    ran = [outcomes[i] for i in range(len(parsed))]
    result = judge(program, specs, ran, budget, flushed, accept=accept, candidates=True)
    if result.judged_against != REFERENCE:
        return result
    # Freedoms are diagnosed from evidence, run only when a judgement calls for it: first the
    # contracted honest run (for a numeric finding) and the rechecks that confirm a candidate
    # label; then the rechecks of the labels that evidence gave (both answers are reported).
    rechecks: list[Outcome] = []
    candidate = any("excess-range" in v.freedom for leaves in result.verdicts for v in leaves)
    for _ in freedoms.FREEDOMS:  # each round adds evidence; a few rounds at most
        done = {o.config for o in rechecks}
        wanted = [s for s in freedoms.followups(specs, result.verdicts) if s not in done]
        if not wanted and (rechecks or not candidate):
            break
        ran_now = [o for _, o in sorted(pool.run_many(
            [(program, Configuration.parse(s)) for s in wanted], **kwargs), key=lambda p: p[0])]
        for outcome in ran_now:
            if on_outcome is not None:
                on_outcome(outcome)
        rechecks += ran_now
        result = judge(program, specs, ran, budget, flushed, rechecks=rechecks, accept=accept)
    return result
