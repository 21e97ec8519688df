"""A check's findings written as artifact directories (`xlaprobe.artifact`), each with the
``repro.py`` of its failing configuration (printed as lax code by `xlaprobe.localization.repro`
where it can be), its error maps and its allowances: what ``xlaprobe check`` and campaigns store
beside each finding.

It sits above `xlaprobe.artifact` and `xlaprobe.localization`: the artifact format itself needs
neither localization nor the check."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from xlaprobe.allowance import FILE_NAME as ALLOWANCE_FILE
from xlaprobe.allowance import element_allowances, save_allowances
from xlaprobe.artifact import repro_text, save_artifact
from xlaprobe.checking import REFERENCE
from xlaprobe.configs.registry import Configuration
from xlaprobe.errormap import FILE_NAME as ERRORS_FILE
from xlaprobe.errormap import error_maps, save_error_maps
from xlaprobe.localization.repro import Unprintable, emit_repro, tolerances
from xlaprobe.localization.spmd_repro import emit_spmd_repro
from xlaprobe.program import Program


def save_finding_artifacts(result: Any, root: str | Path,
                           configs: Sequence[str] | None = None) -> dict[str, str]:
    """Write one artifact directory per finding of a check (``xlaprobe check`` and campaigns).

    Each directory is ``<root>/<program fingerprint>-<configuration, filesystem-safe>`` (at most
    120 characters) and holds the program, the float64 reference outputs (when the reference
    ran), and a ``repro.py`` for the failing configuration with its XLA compiler options.

    Args:
        result: a `xlaprobe.checking.CheckResult`.
        root: the artifacts directory (``<db dir>/artifacts``); created if missing.
        configs: the failing configurations to save; None: every finding's.

    Returns:
        configuration spec -> artifact directory. The directory a program was loaded from
        (`Program.origin`: ``xlaprobe check ARTIFACT``) is named, never rewritten. A write that
        fails (OSError, a program the artifact format does not describe) is left out with a
        warning on stderr: the finding itself is still stored.
    """
    reference = next((o.outputs for c, o in zip(result.configs, result.outcomes)
                      if c == REFERENCE and o.ran), None)
    honest = tuple(tuple(o.outputs) for o in result.budget if o.ran)
    bounds = None
    if reference is not None:
        bounds = tolerances(reference, honest, result.program.jaxpr.jaxpr.outvars)
    allowances = element_allowances(result) if reference is not None else {}
    saved = {}
    for finding in result.findings:
        if configs is not None and finding.config not in configs:
            continue
        options = Configuration.parse(finding.config).compiler_options
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in finding.config)
        directory = Path(root) / f"{result.program.fingerprint}-{safe}"[:120]
        if result.program.origin and directory.resolve() == Path(result.program.origin):
            # The checked artifact itself: it holds this program already, and a check never
            # modifies its input (its results go to the store).
            saved[finding.config] = str(directory)
            continue
        try:
            source = _finding_repro(result.program, finding.config, reference, honest,
                                    crash=finding.kind.value == "crash")
            save_artifact(result.program, directory, reference=reference,
                          repro_config=finding.config, compiler_options=options,
                          note=f"{finding.kind.value} on {list(finding.outputs)}; fingerprint "
                               f"{finding.fingerprint}", repro_source=source,
                          repro_tolerance=bounds)
        except (OSError, TypeError) as exc:
            print(f"warning: could not write the artifact of {finding.config} to {directory}: "
                  f"{exc}", file=sys.stderr)
            continue
        _save_error_maps(result, finding.config, reference, directory)
        _save_allowances(allowances, directory)
        saved[finding.config] = str(directory)
    return saved


def _finding_repro(program: Program, config: str, reference: Sequence[np.ndarray] | None,
                   honest: Sequence[Sequence[np.ndarray]], *, crash: bool) -> str:
    """The ``repro.py`` of one finding. An ``eager`` finding's is the program printed as lax code
    and run op by op (`localize.repro.emit_repro`): module.jax_export compiles the program whole,
    and that compile may drop or fuse the op that fails alone. Every other finding's runs
    module.jax_export (`repro_text`); a crash's runs it in a child process."""
    if config.startswith("spmd[") and reference is not None:
        try:  # a script that presents the mesh's devices and partitions as the finding did
            return emit_spmd_repro(program, config, reference, honest, crash=crash,
                                   allowance=True)
        except Unprintable:
            pass
    if config == "eager" and reference is not None:
        try:
            return emit_repro(program, config, {}, reference, honest, eager=True, crash=crash,
                              allowance=True)
        except Unprintable:  # the module.jax_export script, compiled whole, is the best left
            pass
    return repro_text(config, crash=crash)


def _save_error_maps(result: Any, config: str, reference: Any, directory: Path) -> None:
    """Write ``errors.npz`` (`xlaprobe.errormap`) beside a finding's artifact: where its
    failing leaves go wrong, for ``xlaprobe report``. Nothing when the configuration or the
    reference did not run; a write that fails only warns (the artifact stands without it)."""
    index = result.configs.index(config)
    outcome = result.outcomes[index]
    maps = error_maps(outcome.outputs, reference, result.verdicts[index],
                      result.program.tolerance) if reference is not None and outcome.ran else []
    try:
        (directory / ERRORS_FILE).unlink(missing_ok=True)  # an older check's maps are not these
        if maps:
            save_error_maps(directory / ERRORS_FILE, maps)
    except OSError as exc:
        print(f"warning: could not write the error maps of {config}: {exc}", file=sys.stderr)


def _save_allowances(arrays: dict[str, np.ndarray], directory: Path) -> None:
    """Write ``allowance.npz`` (`xlaprobe.allowance`) beside a finding's artifact, or remove an
    older check's; a write that fails only warns (repro.py falls back to scalar bounds)."""
    try:
        (directory / ALLOWANCE_FILE).unlink(missing_ok=True)
        if arrays:
            save_allowances(directory / ALLOWANCE_FILE, arrays)
    except OSError as exc:
        print(f"warning: could not write the allowances to {directory}: {exc}", file=sys.stderr)
