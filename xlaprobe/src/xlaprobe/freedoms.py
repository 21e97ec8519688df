"""Labelled freedoms: a configuration's answer that differs from the honest run in the program's
own dtype because XLA took a known floating-point freedom, diagnosed from evidence.

A freedom is neither a compiler fault nor a fault of the reference: the program's dtype does not
give XLA the liberty, but XLA documents (or always takes) it. Each is diagnosed from runs, never
from the program's shape alone:

- ``excess-range``: an intermediate that overflows in the program's dtype (every honest run,
  ``reference:native`` and its Monte Carlo samples, is non-finite there) while the configuration
  gives the float64 answer: XLA rewrote the expression into one that does not overflow (the
  algebraic simplifier's ``(a / b) / c -> a / (b * c)``), confirmed only when the recheck, the
  same configuration with ``xla_disable_hlo_passes=algsimp``, overflows there too (an overflow
  that depends on the order of a sum is reassociation, which XLA's reductions may do).
- ``fma``: the configuration's failing leaf is what the honest run gives when each product
  used once by an add or subtract is contracted into a fused multiply-add (``reference:fma``).
  Recheck: ``xla_cpu_max_isa=AVX`` (an ``XLA_FLAGS`` option: its worker starts XLA with it), which
  withholds FMA instructions (and AVX2 and AVX-512 with them: a right answer there is reported,
  not evidence). Evidence against: a recheck that is still wrong (XLA without FMA gets it wrong
  too: a fault, not the contraction), and an op-by-op configuration (``eager`` runs every
  equation as a kernel of its own, so no product and add are contracted across equations).
- ``ftz``: subnormal inputs or results flushed to zero (the oracle's ``ftz`` evidence: the output
  agrees with ``reference:ftz``, or is zero where the reference is subnormal). XLA:CPU has an
  ``xla_cpu_ftz`` option, but on jaxlib 0.12 it changes nothing, per compile or in ``XLA_FLAGS``
  (the runtime flushes whatever it says), so there is no recheck.

A labelled leaf gets verdict kind ``freedom`` (a finding) with `Verdict.freedom` naming the
labels, or kind ``ok`` with the label when the user accepts every freedom it took (``--accept``,
``accept=``; by default `DEFAULT_ACCEPT`). A leaf that fails for any other reason keeps its
mismatch: a fault is never relabelled a freedom unless a freedom run reproduces it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from xlaprobe.configs.registry import Configuration
from xlaprobe.errors import InvalidArgument
from xlaprobe.oracle import Verdict, VerdictKind, is_float, judge_leaf
from xlaprobe.outcome import Outcome
from xlaprobe.program import Program


@dataclasses.dataclass(frozen=True, slots=True)
class Freedom:
    """One known freedom XLA may take.

    Attributes:
        name: its label (``"fma"``); verdicts show ``freedom:<name>``.
        what: one line saying what XLA does.
        switch: the XLA options (spec texts) that take the freedom away, or () when XLA has none
            that works; an ``xla`` configuration with it added is the recheck.
        taken: what XLA did, as a noun phrase (``"the fused multiply-add"``): what localization
            says disabling a pass removes.
    """

    name: str
    what: str
    switch: tuple[tuple[str, str], ...] = ()
    taken: str = ""


FREEDOMS: dict[str, Freedom] = {f.name: f for f in (
    Freedom("excess-range", "an intermediate that overflows in the program's dtype was rewritten "
                            "into a form that does not", (("xla_disable_hlo_passes", "algsimp"),),
            "the rewrite that avoids the overflow"),
    Freedom("fma", "a multiply and an add were contracted into one fused multiply-add (one "
                   "rounding instead of two)", (("xla_cpu_max_isa", "AVX"),),
            "the fused multiply-add"),
    Freedom("ftz", "subnormal inputs or results were flushed to zero", (),
            "the flush of subnormals to zero"),
)}
#: Freedoms accepted when the caller names none: flushing subnormals, which XLA:CPU always does
#: (no option turns it off) and which the oracle has never reported as a finding.
DEFAULT_ACCEPT: frozenset[str] = frozenset({"ftz"})
#: The honest run with FMA contraction: the evidence for ``fma``.
FMA_EVIDENCE = "reference:fma"
#: The honest run with subnormals flushed to zero: the evidence for ``ftz``.
FTZ_EVIDENCE = "reference:ftz"
#: Per freedom, the run a labelled leaf's error statistics are measured against: the one whose
#: answer the label says XLA gave (excess range: float64's, the range XLA borrowed).
EVIDENCE_RUN: dict[str, str] = {"fma": FMA_EVIDENCE, "ftz": FTZ_EVIDENCE,
                                "excess-range": "reference"}


def parse_accept(value: str | Iterable[str] | None) -> frozenset[str]:
    """The accepted freedoms of ``--accept`` / ``accept=``.

    Args:
        value: comma-separated labels (``"ftz,fma"``), an iterable of labels, ``"none"`` or ``""``
            for none, ``"all"`` for every freedom, or None for `DEFAULT_ACCEPT`.

    Raises:
        InvalidArgument: an unknown label (one line naming the known ones).

    >>> sorted(parse_accept("fma, ftz"))
    ['fma', 'ftz']
    >>> parse_accept("none")
    frozenset()
    """
    if value is None:
        return DEFAULT_ACCEPT
    items = value.split(",") if isinstance(value, str) else value
    items = list(items) if isinstance(items, Iterable) and not isinstance(items, bytes) else None
    if items is None or not all(isinstance(n, str) for n in items):
        raise InvalidArgument(f"accept must be a comma-separated string or a list of freedom "
                              f"names such as 'ftz,fma', not {value!r}")
    names = [n.strip().removeprefix("freedom:") for n in items]
    names = [n for n in names if n]
    if names in (["none"], []):
        return frozenset()
    if names == ["all"]:
        return frozenset(FREEDOMS)
    if {"all", "none"} & set(names):
        raise InvalidArgument("'all' and 'none' stand alone in the freedoms to accept; give "
                              f"them alone or name freedoms ({', '.join(FREEDOMS)})")
    unknown = [n for n in names if n not in FREEDOMS]
    if unknown:
        raise InvalidArgument(f"unknown freedom '{unknown[0]}' to accept; known freedoms: "
                              f"{', '.join(FREEDOMS)} (or all, none)")
    return frozenset(names)


def recheck_config(config: str, label: str) -> str | None:
    """The spec of `config` with freedom `label` switched off, or None when XLA has no switch
    for it or `config` is not an ``xla`` configuration (options of other kinds mean other things).

    >>> recheck_config("xla:O0", "excess-range")
    'xla:O0[xla_disable_hlo_passes=algsimp]'
    >>> recheck_config("eager", "fma") is None
    True
    """
    switch = FREEDOMS[label].switch
    try:
        parsed = Configuration.parse(config)
    except InvalidArgument:
        return None
    if not switch or parsed.kind != "xla":
        return None
    options = dict(parsed.options)
    for name, value in switch:
        if name == "xla_disable_hlo_passes" and options.get(name):
            value = "+".join(sorted(set(options[name].split("+")) | {value}))
        options[name] = value
    return str(dataclasses.replace(parsed, options=tuple(sorted(options.items()))))


# --- evidence ------------------------------------------------------------------------------------

def _excess_range_elements(out: np.ndarray, ref: np.ndarray,
                           honest: Sequence[np.ndarray]) -> np.ndarray:
    """Elements where every honest run (program dtype) is non-finite, float64 is finite and the
    configuration is finite: the dtype's range was exceeded and XLA did not overflow."""
    with np.errstate(invalid="ignore"):
        out64, ref64 = np.asarray(out, np.float64), np.asarray(ref, np.float64)
        overflowed = np.ones(ref64.shape, bool)
        for run in honest:
            overflowed &= ~np.isfinite(np.asarray(run, np.float64))
        return overflowed & np.isfinite(ref64) & np.isfinite(out64)


def _agrees(actual: np.ndarray, explanation: np.ndarray, honest: Sequence[np.ndarray] | None,
            dtype: np.dtype, verdict: Verdict) -> bool:
    """Does `actual` equal the freedom run `explanation` as an honest run could (same bounds and
    budget), so that the freedom explains the leaf's failure?"""
    again = judge_leaf(actual, np.asarray(explanation, np.float64), budget=list(honest or []) or None,
                       config=verdict.config, output=verdict.output, index=verdict.index,
                       dtype=dtype)
    return not again.kind.is_finding


@dataclasses.dataclass(frozen=True, slots=True)
class Evidence:
    """What the freedom diagnosis of one check reads (all from runs of the same program).

    Attributes:
        reference: the float64 reference outputs, one per leaf.
        honest: per leaf, the honest runs' outputs in the program's dtype (native + Monte Carlo).
        dtypes: the program's output dtypes.
        runs: extra outcomes by spec: `FMA_EVIDENCE` and the rechecks (`recheck_config`).
        candidates: a first judgement, before those runs: label what they would have to
            confirm (``excess-range`` before its recheck), so that `followups` asks for them.
    """

    reference: Sequence[np.ndarray]
    honest: Sequence[Sequence[np.ndarray]] | None
    dtypes: Sequence[np.dtype]
    runs: Mapping[str, Outcome]
    candidates: bool = False

    def leaf(self, spec: str, index: int) -> np.ndarray | None:
        """Output `index` of evidence run `spec`, or None when it did not run."""
        run = self.runs.get(spec)
        return run.outputs[index] if run is not None and run.ran and \
            len(run.outputs) > index else None


def diagnose(verdict: Verdict, actual: np.ndarray, evidence: Evidence) -> tuple[str, ...]:
    """The freedoms that explain one leaf's verdict, from evidence (empty: none does).

    Args:
        verdict: the oracle's verdict on the leaf (kind ok, ftz or a numeric finding).
        actual: the configuration's output for the leaf.
        evidence: the check's evidence.

    Returns:
        Labels, in `FREEDOMS` order.
    """
    i, dtype = verdict.index, np.dtype(evidence.dtypes[verdict.index])
    if not is_float(dtype) or np.shape(actual) != np.shape(evidence.reference[i]):
        return ()
    honest = None if evidence.honest is None else evidence.honest[i]
    labels: list[str] = []
    if verdict.kind in (VerdictKind.OK, VerdictKind.FTZ) and honest:
        where = _excess_range_elements(actual, evidence.reference[i], honest)
        # The honest run's overflow is mandated only if XLA without its rewrites overflows
        # too: a sum that overflows in one order and not in another is reassociation, which
        # XLA may do (its reductions have no order), not excess range.
        switched = recheck_config(verdict.config, "excess-range")
        without = None if switched is None else evidence.leaf(switched, i)
        if where.any() and (evidence.candidates or (without is not None and np.any(
                where & ~np.isfinite(np.asarray(without, np.float64))))):
            labels.append("excess-range")
    contracted = evidence.leaf(FMA_EVIDENCE, i)
    # Only the contracted honest run is evidence for: the recheck without FMA instructions also
    # withholds AVX2 and AVX-512, so a fault of their code paths would vanish there too. A
    # recheck still wrong is evidence against: the fault does not need the contraction.
    if verdict.kind.is_numeric and contracted is not None and _contracts(verdict.config) and \
            _agrees(actual, contracted, honest, dtype, verdict) and \
            not _wrong_without(verdict, "fma", evidence):
        labels.append("fma")
    if verdict.kind is VerdictKind.FTZ:
        labels.append("ftz")
    return tuple(labels)


def _contracts(config: str) -> bool:
    """Whether `config` may contract a product and an add of two equations into one FMA (not
    the op-by-op ``eager``, whose every equation is a kernel of its own)."""
    try:
        return Configuration.parse(config).kind != "eager"
    except InvalidArgument:
        return True


def _wrong_without(verdict: Verdict, label: str, evidence: Evidence) -> bool:
    """Whether the recheck of `verdict`'s configuration with `label` off ran and is still a
    numeric finding against float64 (with the honest budget): the freedom does not explain it."""
    spec = recheck_config(verdict.config, label)
    other = None if spec is None else evidence.leaf(spec, verdict.index)
    if other is None:
        return False
    i = verdict.index
    honest = None if evidence.honest is None else list(evidence.honest[i]) or None
    again = judge_leaf(other, np.asarray(evidence.reference[i], np.float64), budget=honest,
                       dtype=evidence.dtypes[i])
    return again.kind.is_finding and again.kind.is_numeric


def _recheck_note(label: str, verdict: Verdict, actual: np.ndarray,
                  evidence: Evidence) -> str:
    """One clause reporting both answers: the configuration's and the one with `label` off
    (its oracle verdict, and the values at the first element where they differ)."""
    spec = recheck_config(verdict.config, label)
    if spec is None:
        return f"{label}: XLA has no switch to recheck with"
    run = evidence.runs.get(spec)
    other = evidence.leaf(spec, verdict.index)
    if run is None:
        return f"{label}: not rechecked"
    if other is None:
        return f"{label}: recheck {spec} did not run ({run.kind.value})"
    i = verdict.index
    ref = np.asarray(evidence.reference[i], np.float64)
    with np.errstate(invalid="ignore"):
        if label == "excess-range" and evidence.honest:
            where = _excess_range_elements(actual, ref, evidence.honest[i])
        else:
            where = ~(np.asarray(actual, np.float64) == np.asarray(other, np.float64))
            where &= ~(np.isnan(np.asarray(actual, np.float64)) & np.isnan(np.asarray(
                other, np.float64)))
    at = int(np.argmax(where.ravel())) if where.any() else max(verdict.worst, 0)
    flat = lambda x: float(np.asarray(x, np.float64).ravel()[at])  # noqa: E731
    honest = None if evidence.honest is None else list(evidence.honest[i]) or None
    again = judge_leaf(other, ref, budget=honest, dtype=evidence.dtypes[i]).kind.value
    same = "the same answer" if not where.any() else f"{again}"
    return (f"{label}: off ({spec}) gives {same}; at element {at}: {flat(actual):.7g} here, "
            f"{flat(other):.7g} with {label} off, {flat(ref):.7g} in float64")


def _float64_note(verdict: Verdict, actual: np.ndarray, evidence: Evidence) -> str:
    """The leaf's error against float64, said as such: what a labelled leaf's row no longer
    shows (its statistics are against the freedom's evidence run)."""
    i = verdict.index
    with np.errstate(invalid="ignore"):
        out = np.asarray(actual, np.float64)
        ref = np.asarray(evidence.reference[i], np.float64)
        nan = int((np.isnan(out) & ~np.isnan(ref)).sum())
        inf = int((np.isinf(out) & ~np.isinf(ref)).sum())
    parts = [f"max abs {verdict.max_abs:.3g}", f"error/allowed {verdict.margin:.3g}"]
    if nan:
        parts.append(f"NaN at {nan} of {out.size} elements")
    if inf:
        parts.append(f"inf at {inf} of {out.size} elements")
    note = f"against float64: {', '.join(parts)}"
    honest = None if evidence.honest is None else evidence.honest[i]
    if honest:
        with np.errstate(invalid="ignore"):
            overflowed = int((~np.isfinite(np.asarray(honest[0], np.float64))
                              & np.isfinite(ref)).sum())
        if overflowed:
            dtype = np.dtype(evidence.dtypes[i]).name
            note += (f"; {dtype} (reference:native) overflows at {overflowed} of {out.size} "
                     f"elements")
    return note


def against_evidence(verdict: Verdict, labels: Sequence[str], actual: np.ndarray,
                     evidence: Evidence) -> Verdict:
    """`verdict` (the oracle's, against float64) with its error statistics measured against the
    evidence run of the first of `labels` that has one and agrees (`EVIDENCE_RUN`), so that a
    labelled leaf's numbers say how closely XLA's answer is the freedom's, and
    `Verdict.against` names that run; its float64 figures go to the detail, said as such.
    Unchanged (against float64) when no evidence run agrees.

    Args:
        verdict: the oracle's verdict on the leaf, before labelling.
        labels: the leaf's freedoms (`diagnose`).
        actual: the configuration's output for the leaf.
        evidence: the check's evidence.
    """
    i, dtype = verdict.index, np.dtype(evidence.dtypes[verdict.index])
    honest = None if evidence.honest is None else list(evidence.honest[i]) or None
    for name in labels:
        spec = EVIDENCE_RUN.get(name, "")
        if spec == "reference":
            return dataclasses.replace(verdict, against="reference")
        run = evidence.leaf(spec, i)
        if run is None:
            continue
        again = judge_leaf(actual, np.asarray(run, np.float64), budget=honest,
                           config=verdict.config, output=verdict.output, index=i, dtype=dtype)
        if not again.kind.is_finding:
            return dataclasses.replace(again, kind=verdict.kind, against=spec,
                                       detail=verdict.detail)
    return verdict


def label(verdicts: Sequence[Verdict], outputs: Sequence[np.ndarray], evidence: Evidence,
          accept: frozenset[str]) -> list[Verdict]:
    """One configuration's leaf verdicts with their freedoms labelled.

    A leaf explained by freedoms gets kind FREEDOM (kind OK when every label is in `accept`),
    `Verdict.freedom` set, its error statistics measured against the freedom's evidence run
    (`against_evidence`: `Verdict.against`), and a detail that says what each freedom's recheck
    gave and the error against float64. Other leaves, and every leaf of a configuration that
    did not run, are returned unchanged.

    Args:
        verdicts: the oracle's verdicts, one per leaf.
        outputs: the configuration's outputs, one per leaf (empty when it did not run).
        evidence: the check's evidence.
        accept: the accepted freedoms (`parse_accept`).
    """
    if len(outputs) != len(verdicts):
        return list(verdicts)
    labelled = []
    for verdict, actual in zip(verdicts, outputs):
        labels = diagnose(verdict, np.asarray(actual), evidence)
        if not labels:
            labelled.append(verdict)
            continue
        notes = [_recheck_note(n, verdict, np.asarray(actual), evidence)
                 for n in labels if FREEDOMS[n].switch]
        kind = VerdictKind.OK if set(labels) <= accept else VerdictKind.FREEDOM
        measured = against_evidence(verdict, labels, np.asarray(actual), evidence)
        float64 = _float64_note(verdict, np.asarray(actual), evidence) \
            if measured.against not in ("", "reference") or "excess-range" in labels else ""
        detail = "; ".join(filter(None, (verdict.detail, *notes, float64)))
        labelled.append(dataclasses.replace(measured, kind=kind, freedom="+".join(labels),
                                            detail=detail))
    return labelled


def followups(configs: Sequence[str], verdicts: Sequence[Sequence[Verdict]]) -> list[str]:
    """The evidence runs a judgement calls for: `FMA_EVIDENCE` when some configuration has a
    numeric finding, and each ``xla`` configuration's recheck with a freedom switched off for
    every freedom labelled on it that has a switch (``excess-range`` as a candidate, to
    confirm it; ``fma`` once the contracted run gave it, to report the answer without FMA).

    Args:
        configs: the configuration specs; verdicts: per configuration, per leaf.

    Returns:
        Specs to run, without duplicates, in a stable order.

    >>> followups(["xla", "reference"], [[Verdict("xla", "[0]", 0, VerdictKind.NAN_MISMATCH)],
    ...                                  [Verdict("reference", "[0]", 0, VerdictKind.OK)]])
    ['reference:fma']
    >>> followups(["xla"], [[Verdict("xla", "[0]", 0, VerdictKind.FREEDOM, freedom="fma")]])
    ['xla[xla_cpu_max_isa=AVX]']
    """
    wanted: list[str] = []
    for config, leaf_verdicts in zip(configs, verdicts):
        labels = set(labels_of(leaf_verdicts).split("+"))
        if any(v.kind.is_numeric for v in leaf_verdicts):
            wanted.append(FMA_EVIDENCE)
        wanted += [recheck_config(config, n) or "" for n in FREEDOMS if n in labels]
    return [s for s in dict.fromkeys(wanted) if s and s not in configs]


def finding_labels(verdicts: Iterable[Verdict]) -> str:
    """The freedoms of a configuration whose every failing leaf is a labelled freedom (kind
    FREEDOM): its finding is a legal liberty, not a fault; "" when some leaf fails otherwise
    or none fails.

    >>> finding_labels([Verdict("xla", "[0]", 0, VerdictKind.FREEDOM, freedom="fma"),
    ...                 Verdict("xla", "[1]", 1, VerdictKind.OK, freedom="ftz")])
    'fma'
    """
    failing = [v for v in verdicts if v.kind.is_finding]
    if not failing or any(v.kind is not VerdictKind.FREEDOM for v in failing):
        return ""
    return labels_of(failing)


def taken(labels: str) -> str:
    """What XLA did under ``+``-joined `labels`, as a noun phrase, with the label: ``"the fused
    multiply-add (a legal liberty, freedom:fma)"``.

    >>> taken("fma")
    'the fused multiply-add (a legal liberty, freedom:fma)'
    """
    names = [n for n in labels.split("+") if n in FREEDOMS]
    return (" and ".join(FREEDOMS[n].taken for n in names)
            + f" ({'legal liberties' if len(names) > 1 else 'a legal liberty'}, freedom:{labels})")


def labels_of(verdicts: Iterable[Verdict]) -> str:
    """The ``+``-joined freedoms of a configuration's leaves, in `FREEDOMS` order ("" if none).

    >>> labels_of([Verdict("xla", "[0]", 0, VerdictKind.FREEDOM, freedom="fma+ftz")])
    'fma+ftz'
    """
    present = {n for v in verdicts for n in v.freedom.split("+") if n}
    return "+".join(n for n in FREEDOMS if n in present)


def verdict_text(kind: VerdictKind, verdicts: Sequence[Verdict]) -> str:
    """A configuration's verdict as the table shows it: ``freedom:fma`` for a freedom finding,
    ``ok (ftz)`` for an accepted freedom, else the kind's value.

    >>> verdict_text(VerdictKind.FREEDOM, [Verdict("xla", "[0]", 0, VerdictKind.FREEDOM,
    ...                                            freedom="fma")])
    'freedom:fma'
    """
    labels = labels_of(verdicts)
    if kind is VerdictKind.FREEDOM:
        return f"freedom:{labels}"
    if kind is VerdictKind.OK and labels:
        return f"ok ({labels})"
    return kind.value


def program_dtypes(program: Program) -> list[np.dtype]:
    """The program's output dtypes (what verdicts are judged in)."""
    return [np.dtype(aval.dtype) for aval in program.jaxpr.out_avals]
