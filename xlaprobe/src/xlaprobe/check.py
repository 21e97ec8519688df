"""Differential check of one Program: run every configuration in workers, judge each output leaf
against the float64 reference with the honest-run error budget, and name the findings."""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xlaprobe import jaxprs
from xlaprobe.configs.registry import Configuration
from xlaprobe.oracle import Verdict, VerdictKind, judge_leaf, judge_outcome
from xlaprobe.outcome import Outcome
from xlaprobe.program import Program

REFERENCE = "reference"
#: The honest run in the program's own dtypes: the error budget (see `xlaprobe.oracle`).
BUDGET = "reference:native"
#: The honest run with subnormals flushed to zero: explains `ftz` differences.
FLUSHED = "reference:ftz"
#: Monte Carlo arithmetic samples of honest rounding: one round-to-nearest run is a single sample
#: of the rounding error and can land close to float64 by chance (see `reference.evaluate`).
MCA_SAMPLES = ("reference:mca[seed=1]", "reference:mca[seed=2]")
DEFAULT_CONFIGS = "xla,xla:O0,eager,reference"

#: Severity order used to pick a configuration's verdict kind for its finding.
_SEVERITY = [VerdictKind.CRASH, VerdictKind.TIMEOUT, VerdictKind.COMPILE_ERROR,
             VerdictKind.NAN_MISMATCH, VerdictKind.INF_MISMATCH, VerdictKind.MISMATCH]


@dataclasses.dataclass(frozen=True, slots=True)
class Finding:
    """A configuration whose verdict on the program is not ok.

    Attributes:
        config: the configuration spec.
        kind: its most severe verdict kind over output leaves.
        outputs: names of the failing output leaves.
        fingerprint: structural key for deduplication (hex, 16 chars): primitives of the failing
            outputs' cone of influence, the input dtypes it reads, the configurations failing
            alike and the verdict kind (`structural_fingerprint`); for a crash, the crash's
            `crash_signature` instead of the cone.
    """

    config: str
    kind: VerdictKind
    outputs: tuple[str, ...]
    fingerprint: str

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"config": self.config, "kind": self.kind.value, "outputs": list(self.outputs),
                "fingerprint": self.fingerprint}


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
    """

    program: Program
    configs: tuple[str, ...]
    outcomes: tuple[Outcome, ...]
    verdicts: tuple[tuple[Verdict, ...], ...]
    judged_against: str
    budget: tuple[Outcome, ...]
    flushed: Outcome | None
    findings: tuple[Finding, ...]

    @property
    def ok(self) -> bool:
        """True when there is no finding."""
        return not self.findings

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
                 "verdict": _summary_kind(v).value,
                 "outputs": [x.to_json() for x in v]}
                for c, o, v in zip(self.configs, self.outcomes, self.verdicts)],
            "findings": [f.to_json() for f in self.findings],
        }


def _summary_kind(verdicts: Sequence[Verdict]) -> VerdictKind:
    kinds = {v.kind for v in verdicts}
    for kind in _SEVERITY:
        if kind in kinds:
            return kind
    if VerdictKind.UNSUPPORTED in kinds:
        return VerdictKind.UNSUPPORTED
    return VerdictKind.FTZ if VerdictKind.FTZ in kinds else VerdictKind.OK


def structural_fingerprint(program: Program, config: str, kind: VerdictKind,
                           outputs: Sequence[int] | None = None) -> str:
    """Deduplication key of a finding (hex, 16 chars).

    Hashes the sorted primitive names of the failing outputs' cone of influence (the equations
    they depend on, nested bodies included), the dtypes of the program inputs that cone reads, the
    configuration difference and the verdict kind. Equations that feed only passing outputs do not
    count, so two fuzzed programs that hit one compiler bug beside different unrelated code get one
    key; `judge` passes as `config` all the configurations that fail alike (same kind, same
    outputs), so a fault that every XLA configuration shares is one key, not one per configuration.

    Args:
        program: the program.
        config: the failing configuration's spec, or the sorted comma-joined specs of all the
            configurations failing alike (``"eager,xla,xla:O0"``).
        kind: its verdict kind.
        outputs: positions of the failing output leaves; None: all outputs.

    Returns:
        16 hex digits.
    """
    positions = range(len(program.jaxpr.jaxpr.outvars)) if outputs is None else outputs
    primitives, dtypes = jaxprs.output_cone(program.jaxpr, positions)
    parts = [",".join(sorted(primitives)), ",".join(sorted(dtypes)), config, kind.value]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


_FATAL = re.compile(r"^F\d{4} [^\]]*?(\w+\.(?:cc|h|cpp)):(\d+)\] (.*)$", re.MULTILINE)


def crash_signature(error: str) -> str:
    """What names a compiler crash in its stderr, for deduplication: the glog fatal line's source
    location and the failed check, without values; else the first line, digits masked.

    A crash aborts the compilation of the whole program, so the cone of its outputs says nothing;
    two programs that fail the same check in the same pass are one bug.

    >>> crash_signature("W0000 x\\nF1129 19:31:07.9 7861 algebraic_simplifier.cc:586] Check failed: "
    ...                 "computation->Accept(this) is OK (INTERNAL: f16[15,1] vs f16[16,1])\\n@ 0x7f")
    'algebraic_simplifier.cc:586 Check failed: computation->Accept(this) is OK'
    >>> crash_signature("munmap_chunk(): invalid pointer")
    'munmap_chunk(): invalid pointer'
    >>> crash_signature("worker process 5754 died from signal 6 (SIGABRT) and wrote nothing")
    'worker process # died from signal # (SIGABRT) and wrote nothing'
    """
    match = _FATAL.search(error)
    if match:
        return f"{match.group(1)}:{match.group(2)} {match.group(3).split(' (')[0].strip()}"
    first = next((line.strip() for line in error.splitlines() if line.strip()), "")
    return re.sub(r"\d+", "#", first)[:200]


def _reference_verdicts(program: Program, outcome: Outcome) -> list[Verdict]:
    # The reference is the oracle; it is only judged where the right answer is known.
    if outcome.ran and program.expected is not None:
        # Judge the float64 reference rounded to the program's output dtypes, as expected() is.
        rounded = tuple(np.asarray(r).astype(np.asarray(e).dtype)
                        for r, e in zip(outcome.outputs, program.expected))
        return judge_outcome(dataclasses.replace(outcome, outputs=rounded), program.expected,
                             program.output_names, tolerance=program.tolerance)
    if outcome.ran:
        return [Verdict(config=outcome.config, output=n, index=i, kind=VerdictKind.OK,
                        detail="the oracle") for i, n in enumerate(program.output_names)]
    return judge_outcome(outcome, [], program.output_names)


def judge(program: Program, configs: Sequence[str], outcomes: Sequence[Outcome],
          budget: Sequence[Outcome] = (), flushed: Outcome | None = None) -> CheckResult:
    """Turn outcomes into verdicts and findings (pure; no running).

    Args:
        program: the program.
        configs: configuration specs, one per outcome.
        outcomes: one per configuration.
        budget: the ``reference:native`` and Monte Carlo outcomes (empty: no budget).
        flushed: the ``reference:ftz`` outcome, or None.

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
    verdicts: list[tuple[Verdict, ...]] = []
    failed: list[tuple[str, VerdictKind, tuple[int, ...], str]] = []
    findings: list[Finding] = []
    for config, outcome in zip(configs, outcomes):
        if config == REFERENCE:
            leaf_verdicts = _reference_verdicts(program, outcome)
        elif baseline is None:
            leaf_verdicts = judge_outcome(outcome, [np.zeros(0)] * len(program.output_names),
                                          program.output_names)
            if outcome.ran:  # nothing to compare with
                leaf_verdicts = [dataclasses.replace(v, kind=VerdictKind.OK, detail="no baseline")
                                 for v in leaf_verdicts]
        else:
            leaf_verdicts = judge_outcome(outcome, baseline, program.output_names, budget=honest,
                                          flushed=flushed_outputs, tolerance=program.tolerance)
        verdicts.append(tuple(leaf_verdicts))
        kind = _summary_kind(leaf_verdicts)
        # A reference that cannot run is a gap in xlaprobe, not a compiler bug.
        if kind.is_finding and not (config == REFERENCE and not outcome.ran):
            failing = tuple(v.index for v in leaf_verdicts if v.kind.is_finding)
            signature = crash_signature(outcome.error) if kind is VerdictKind.CRASH else ""
            failed.append((config, kind, failing, signature))
    for config, kind, failing, signature in failed:
        # The configuration difference: every configuration that fails alike (same verdict kind,
        # same outputs) is named, so one fault that xla, xla:O0 and eager share is one key.
        alike = ",".join(sorted(c for c, k, f, _ in failed if (k, f) == (kind, failing)))
        key = (hashlib.sha256(f"{signature}|{alike}|{kind.value}".encode()).hexdigest()[:16]
               if signature else structural_fingerprint(program, alike, kind, failing))
        findings.append(Finding(config, kind, tuple(program.output_names[i] for i in failing),
                                key))
    return CheckResult(program, tuple(configs), tuple(outcomes), tuple(verdicts), judged_against,
                       tuple(budget), flushed, tuple(findings))


def check_program(program: Program, configs: Sequence[Configuration | str], pool: Any, *,
                  on_outcome: Callable[[Outcome], None] | None = None,
                  timeout_s: float | None = None) -> CheckResult:
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

    Returns:
        The `CheckResult`.

    Raises:
        InvalidArgument: a configuration spec is invalid.
    """
    parsed = [c if isinstance(c, Configuration) else Configuration.parse(c) for c in configs]
    specs = [str(c) for c in parsed]
    run = list(parsed)
    if REFERENCE in specs:
        run += [Configuration.parse(s) for s in (FLUSHED, BUDGET, *MCA_SAMPLES)]
    outcomes: dict[int, Outcome] = {}
    kwargs = {} if timeout_s is None else {"timeout_s": timeout_s}
    for index, outcome in pool.run_many([(program, c) for c in run], **kwargs):
        outcomes[index] = outcome
        if on_outcome is not None:
            on_outcome(outcome)
    extra = [outcomes[i] for i in range(len(parsed), len(run))]
    return judge(program, specs, [outcomes[i] for i in range(len(parsed))], extra[1:],
                 extra[0] if extra else None)
