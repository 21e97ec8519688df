"""A ready-to-file upstream issue for a finding: Markdown for openxla/xla (or jax-ml/jax when the
fault is JAX's), from what the store holds about it.

The report gathers the finding's verdicts (expected and actual value of its worst element, the
configurations that fail alike and those that do not), a standalone reproducer that imports only
jax and numpy (the verified ``repro.py`` of its reduction where one is stored, else the finding's
program printed as lax code: `xlaprobe.localization.repro.emit_repro`), the localization (guilty
HLO pass, failing kernel and its HLO), the release window of its bisection, the environment (jax,
jaxlib, Python, CPU model and ISA flags) and the search terms of a duplicate check. The
reproducer is run once in a fresh process and its output goes into the report.

Where the fault lies decides the tracker: a compile error that XLA did not raise (no XLA status
code such as ``UNIMPLEMENTED:`` or ``INTERNAL:``) is JAX's (its lowering or its Python side);
everything else (wrong values, aborts, XLA status errors) is filed against XLA.
"""

from __future__ import annotations

import dataclasses
import json
import platform
import re
import tempfile
from pathlib import Path
from typing import Any

import jax
import jaxlib
import numpy as np

from xlaprobe.artifact import is_artifact, load_artifact, load_reference
from xlaprobe.configs.registry import Configuration
from xlaprobe.errors import InvalidArgument
from xlaprobe.localization import repro as repro_mod
from xlaprobe.localization.reduce import run_repro
from xlaprobe.localization.spmd_repro import emit_spmd_repro
from xlaprobe.oracle import Verdict, summary_kind
from xlaprobe.program import Program
from xlaprobe.store import Store
from xlaprobe.upstream_text import body, search_terms, title
from xlaprobe.upstream_text import search_urls  # noqa: F401 (part of this module's API)

XLA_REPO = "openxla/xla"
JAX_REPO = "jax-ml/jax"
#: XLA's status codes, as its errors begin (absl::Status): a compile error carrying one is XLA's.
XLA_STATUS = re.compile(r"\b(UNIMPLEMENTED|INTERNAL|INVALID_ARGUMENT|FAILED_PRECONDITION|"
                        r"RESOURCE_EXHAUSTED|UNKNOWN|OUT_OF_RANGE|ABORTED|NOT_FOUND):")
#: CPU flags worth naming in a CPU compiler bug (vector ISAs, FMA, half and bfloat16 support).
ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
             "avx512dq", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_tile")


@dataclasses.dataclass(frozen=True)
class Evidence:
    """What the store knows about one finding.

    Attributes:
        finding: the stored finding (`xlaprobe.store.StoredFinding`).
        program: its program (from its artifact, or a sibling finding's of the same program).
        artifact: that artifact directory.
        verdicts: the finding's configuration's verdicts, one per output leaf.
        summaries: configuration -> summary verdict kind of every configuration of its check.
        error: the error text of the failing run ("" when it ran).
        reference: the float64 reference outputs, or None.
        localization: the newest stored localization (its JSON), or None.
        reduction: the newest stored reduction (its JSON with ``directory``), or None.
        bisection: the newest stored release bisection (its JSON), or None.
    """

    finding: Any
    program: Program
    artifact: str
    verdicts: tuple[Verdict, ...]
    summaries: dict[str, str]
    error: str
    reference: tuple[np.ndarray, ...] | None
    localization: dict[str, Any] | None
    reduction: dict[str, Any] | None
    bisection: dict[str, Any] | None


@dataclasses.dataclass(frozen=True)
class UpstreamReport:
    """A drafted upstream issue.

    Attributes:
        finding_id: the finding it reports.
        repository: ``openxla/xla`` or ``jax-ml/jax``.
        title: the issue's title.
        search_terms: queries for a duplicate check on the tracker.
        repro: the reproducer's source (imports jax and numpy only).
        repro_exit: its exit code in a fresh process (1: it shows the fault), or None (not run).
        repro_output: what it printed (tail).
        markdown: the whole issue body, title first.
    """

    finding_id: int
    repository: str
    title: str
    search_terms: tuple[str, ...]
    repro: str
    repro_exit: int | None
    repro_output: str
    markdown: str

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return dataclasses.asdict(self) | {"search_terms": list(self.search_terms)}


def gather(db: str | Path, finding_id: int) -> Evidence:
    """Read what the store at `db` holds about finding `finding_id`.

    Raises:
        InvalidArgument: no store, no such finding, or no artifact of its program left.
    """
    if not Path(db).exists():
        raise InvalidArgument(f"no store at {db}; run xlaprobe check first or pass --db")
    with Store(db, readonly=True) as store:
        found = store.finding(finding_id)
        if found is None:
            raise InvalidArgument(f"no finding {finding_id} in {db}; xlaprobe findings lists them")
        # A campaign keeps one artifact per fingerprint: a sibling's holds the same program.
        artifacts = [found.artifact] + [f.artifact for f in store.stored_findings()
                                        if f.program_id == found.program_id]
        artifact = next((a for a in artifacts if a and is_artifact(a)), None)
        if artifact is None:
            raise InvalidArgument(f"finding {finding_id} has no artifact left; rerun xlaprobe "
                                  f"check {found.name} --configs {found.config},reference")
        (check_id,) = store.select("SELECT check_id FROM findings WHERE id = ?", (found.id,))[0]
        runs = store.select("SELECT config, outcome, error FROM runs WHERE check_id = ? "
                            "ORDER BY id", (check_id,))
        verdicts = store.verdicts(check_id)
        localization = next(iter(store.localizations(found.id)), None)
        reduction = next(iter(store.reductions(found.id)), None)
        bisection = next(iter(store.bisections(found.id)), None)
    summaries = {config: summary_kind(v.kind for v in verdicts if v.config == config).value
                 for config, _, _ in runs}
    error = next((e for c, _, e in runs if c == found.config), "")
    return Evidence(found, load_artifact(artifact), artifact,
                    tuple(v for v in verdicts if v.config == found.config), summaries, error,
                    load_reference(artifact), localization, reduction, bisection)


def _refuse_planted(spec: str, finding_id: int) -> None:
    """Raise InvalidArgument when `spec` plants a fault (``mutant:...`` or an ``spmd[...]`` with
    ``mutant=``): the finding is xlaprobe's own planted fault, nothing to file upstream."""
    config = Configuration.parse(spec)
    if config.kind == "mutant" or any(k == "mutant" for k, _ in config.options):
        raise InvalidArgument(f"finding {finding_id} is under '{spec}', a fault xlaprobe planted "
                              "(a mutant), not XLA's: there is nothing to file upstream")


def repository(evidence: Evidence) -> str:
    """The tracker the fault belongs on (see module docstring).

    >>> class E: pass
    >>> e = E(); e.finding = type("F", (), {"kind": "compile-error"})(); e.error = "TypeError: x"
    >>> repository(e)
    'jax-ml/jax'
    >>> e.error = "UNIMPLEMENTED: Unsupported element type for DotThunk"; repository(e)
    'openxla/xla'
    """
    if evidence.finding.kind == "compile-error" and not XLA_STATUS.search(evidence.error or ""):
        return JAX_REPO
    return XLA_REPO


def draft(evidence: Evidence, *, run: bool = True) -> UpstreamReport:
    """The upstream issue of a finding (see module docstring).

    Args:
        evidence: from `gather`.
        run: run the reproducer once in a fresh process and include its output.

    Returns:
        The `UpstreamReport`.

    Raises:
        InvalidArgument: the finding is under a fault xlaprobe planted (a mutant), or has no
            float64 reference stored.
    """
    _refuse_planted(evidence.finding.config, evidence.finding.id)
    repro = reproducer(evidence)
    code, output = run_reproducer(repro) if run else (None, "")
    repo = repository(evidence)
    heading = title(evidence)
    terms = search_terms(evidence)
    markdown = body(evidence, repo, heading, terms, repro, code, output, environment())
    return UpstreamReport(evidence.finding.id, repo, heading, tuple(terms), repro, code, output,
                          markdown)


def reproducer(evidence: Evidence) -> str:
    """The standalone reproducer: the stored reduction's verified ``repro.py`` where there is
    one, else the finding's program printed as lax code (or inline ``jax.export`` when it cannot
    be printed), compiled with the failing configuration's XLA options."""
    reduction = evidence.reduction or {}
    written = reduction.get("written") or {}
    directory = reduction.get("directory") or written.get("directory")
    if directory and written.get("repro_exit") == 1 and (Path(directory) / "repro.py").is_file():
        return (Path(directory) / "repro.py").read_text()
    config = Configuration.parse(evidence.finding.config)
    options = config.compiler_options if config.kind == "xla" else {}
    reference = evidence.reference
    if reference is None:
        raise InvalidArgument(f"finding {evidence.finding.id} has no float64 reference stored "
                              "to compare with; rerun its check with the reference")
    style = dict(eager=config.kind == "eager", crash=evidence.finding.kind == "crash")
    if config.kind == "spmd":  # keep the mesh, the shardings and the partitioner
        try:
            return emit_spmd_repro(evidence.program, str(config), reference,
                                   crash=style["crash"])
        except repro_mod.Unprintable:
            pass
    try:
        return repro_mod.emit_repro(evidence.program, str(config), options, reference, **style)
    except repro_mod.Unprintable:
        return repro_mod.emit_export_repro(evidence.program, str(config), options, reference,
                                           **style)


def run_reproducer(source: str) -> tuple[int, str]:
    """Run a reproducer's source in a fresh Python process, in an empty directory.

    Returns:
        (exit code, the tail of what it printed); 124 when it ran past its time limit.
    """
    with tempfile.TemporaryDirectory(prefix="xlaprobe-upstream-") as tmp:
        path = Path(tmp) / "repro.py"
        path.write_text(source)
        return run_repro(path)


def environment() -> dict[str, str]:
    """jax, jaxlib, Python, OS, CPU model and the CPU's ISA flags (`ISA_FLAGS` it has)."""
    model, flags = "", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and not model:
                model = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    except OSError:
        pass
    return {"jax": jax.__version__, "jaxlib": getattr(jaxlib, "__version__", "?"),
            "python": platform.python_version(), "os": f"{platform.system()} {platform.release()}",
            "machine": platform.machine(), "cpu": model or platform.processor() or "?",
            "isa": " ".join(f for f in ISA_FLAGS if f in flags) or "?",
            "backend": _backend()}


def _backend() -> str:
    try:
        return f"{jax.default_backend()} ({jax.devices()[0].device_kind})"
    except RuntimeError:
        return "?"


def to_json_text(report: UpstreamReport) -> str:
    """`report` as indented JSON text."""
    return json.dumps(report.to_json(), indent=2)
