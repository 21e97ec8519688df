"""Program artifacts: a directory that reruns a Program without the code that made it.

Layout::

    metadata.json      provenance, jax/jaxlib versions, input avals, output names, tolerance
    inputs.npz         the inputs (narrow float types stored as their bit patterns)
    reference.npz      reference outputs (float64 for floats), when known
    expected.npz       known right outputs (a case's expected()), when known
    jaxpr.json         the canonical jaxpr as data (xlaprobe.jaxpr_json): eager and reference rerun
    consts.npz         the jaxpr's constants (loaded with allow_pickle=False)
    module.jax_export  the program serialized with jax.export: runs with jax alone (absent when
                       jax.export cannot serialize the program, e.g. host callbacks; metadata's
                       export_error says why)
    repro.py           standalone reproducer: compiles module.jax_export under the failing
                       configuration's compiler options and prints the mismatch against reference.npz
    errors.npz         a finding's per-element error maps of its failing leaves (xlaprobe.errormap)

Loading an artifact never runs code from it: every file is JSON or NumPy arrays read with
``allow_pickle=False``, and the jaxpr names its primitives and parameter types from closed tables
(see `xlaprobe.jaxpr_json`). Artifacts of schema 1 held a pickled ``jaxpr.pkl``; they are refused,
not unpickled, with a line saying how to regenerate them.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from xlaprobe import jaxpr_json
from xlaprobe.allowance import FILE_NAME as ALLOWANCE_FILE
from xlaprobe.allowance import REPRO_JUDGE, check_allowance_file
from xlaprobe.jaxpr_json import dtype_by_name
from xlaprobe.version import __version__
from xlaprobe.errors import CorruptArtifact, InvalidArgument
from xlaprobe.files import read_npz
from xlaprobe.program import Program, Provenance, Tolerance, enable_x64_for, export_module

#: 2: the jaxpr as data (jaxpr.json, consts.npz); 1: a pickled jaxpr.pkl (no longer loaded).
ARTIFACT_SCHEMA = 2
_FILES = ("metadata.json", "inputs.npz", "jaxpr.json", "consts.npz")


def _stored_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype an array of `dtype` has in an .npz archive: np.savez cannot round-trip ml_dtypes
    (bfloat16 loads as raw void), so their bits are stored as unsigned integers of their width."""
    return np.dtype(f"u{dtype.itemsize}") if dtype.type.__module__.startswith("ml_dtypes") \
        else dtype


def _pack(arrays: Sequence[np.ndarray]) -> tuple[dict[str, np.ndarray], list[str]]:
    packed, dtypes = {}, []
    for i, array in enumerate(arrays):
        array = np.asarray(array)
        dtypes.append(array.dtype.name)
        packed[f"arg{i}"] = array.view(_stored_dtype(array.dtype))
    return packed, dtypes


def _unpack(path: Path, dtypes: Sequence[str]) -> tuple[np.ndarray, ...]:
    data = read_npz(path)
    missing = [f"arg{i}" for i in range(len(dtypes)) if f"arg{i}" not in data]
    if missing:
        raise CorruptArtifact(f"cannot read {path}: no array {missing[0]}; the artifact is "
                              "corrupt")
    out = []
    for i, name in enumerate(dtypes):
        array = data[f"arg{i}"]
        try:
            dtype = dtype_by_name(name)
        except TypeError as exc:
            raise CorruptArtifact(f"{path}: {exc}") from exc
        # Any other dtype's bits read as this one would be other values (or a ValueError).
        if array.dtype not in (dtype, _stored_dtype(dtype)):
            raise CorruptArtifact(f"{path}: arg{i} is {array.dtype}, metadata.json says {name}; "
                                  "the artifact's files disagree")
        out.append(array.view(dtype) if array.dtype != dtype else array)
    return tuple(out)


def _save_arrays(path: Path, arrays: Sequence[np.ndarray]) -> list[str]:
    packed, dtypes = _pack(arrays)
    np.savez(path, **packed)
    return dtypes


def save_artifact(program: Program, directory: str | Path, *,
                  reference: Sequence[np.ndarray] | None = None,
                  repro_config: str = "xla", compiler_options: dict[str, Any] | None = None,
                  note: str = "", repro_source: str = "",
                  repro_tolerance: Sequence[tuple[float, float]] | None = None) -> Path:
    """Write `program` as an artifact directory (created; existing files are replaced).

    Args:
        program: the program.
        directory: where to write.
        reference: the reference outputs (float64 for floats), used by repro.py to show a mismatch.
        repro_config: configuration spec repro.py reproduces (shown and recorded).
        compiler_options: the XLA compiler options of `repro_config` (None: defaults).
        note: a line for metadata (e.g. the verdict).
        repro_source: the text of ``repro.py``; empty: `repro_text` of `repro_config` (it runs
            module.jax_export).
        repro_tolerance: (atol, rtol) per output that repro.py judges with (the check's bounds,
            `localize.repro.tolerances`); None: per-dtype defaults.

    Returns:
        The directory path.

    Raises:
        TypeError: the jaxpr holds something `xlaprobe.jaxpr_json` does not describe (a host
            callback's Python function, say); nothing is written then.
        OSError: the directory cannot be written.
    """
    jaxpr_text, consts = jaxpr_json.dumps(program.jaxpr)
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    input_dtypes = _save_arrays(root / "inputs.npz", program.inputs)
    metadata: dict[str, Any] = {
        "schema": ARTIFACT_SCHEMA,
        "xlaprobe": __version__,
        "jax": jax.__version__,
        "jaxlib": jax.lib.__version__ if hasattr(jax.lib, "__version__") else jax.__version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "provenance": program.provenance.to_json(),
        "inputs": [{"shape": list(x.shape), "dtype": d} for x, d in zip(program.inputs, input_dtypes)],
        "output_names": list(program.output_names),
        "tolerance": program.tolerance.to_json(),
        "num_equations": program.num_equations,
        "fingerprint": program.fingerprint,
        "repro_config": repro_config,
        "compiler_options": compiler_options or {},
        "note": note,
    }
    if repro_tolerance is not None:
        metadata["repro_tolerance"] = [[float(a), float(r)] for a, r in repro_tolerance]
    if reference is not None:
        metadata["reference_dtypes"] = _save_arrays(root / "reference.npz", reference)
    if program.expected is not None:
        metadata["expected_dtypes"] = _save_arrays(root / "expected.npz", program.expected)
    (root / "jaxpr.json").write_text(jaxpr_text)
    (root / "consts.npz").write_bytes(consts)
    (root / "jaxpr.pkl").unlink(missing_ok=True)  # a schema-1 artifact rewritten in place
    try:
        (root / "module.jax_export").write_bytes(export_module(program))
    except Exception as exc:  # e.g. host callbacks, which jax.export cannot serialize
        (root / "module.jax_export").unlink(missing_ok=True)
        metadata["export_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    (root / "repro.py").write_text(repro_source or repro_text(repro_config))
    (root / "metadata.json").write_text(json.dumps(metadata, indent=2) + "\n")
    return root


def is_artifact(path: str | Path) -> bool:
    """True if `path` is a directory holding an artifact's metadata.json."""
    return (Path(path) / "metadata.json").is_file()


def load_artifact(directory: str | Path) -> Program:
    """Load a Program saved by `save_artifact`; the provenance source becomes ``"artifact"`` only in
    name: the original provenance is kept.

    Nothing in the directory is unpickled, imported or called (see the module docstring).

    Raises:
        InvalidArgument: not a directory.
        CorruptArtifact: a required file is missing or unreadable, the jaxpr names an unknown
            primitive or type or does not type-check, it does not match the recorded inputs, or
            the artifact is of schema 1 (a pickle, refused with how to regenerate it).
    """
    root = Path(directory)
    if not root.is_dir():
        raise InvalidArgument(f"no such artifact directory: {directory}")
    if (root / "jaxpr.pkl").exists() and not (root / "jaxpr.json").exists():
        raise CorruptArtifact(_old_artifact(root))
    missing = [name for name in _FILES if not (root / name).is_file()]
    if missing:
        raise CorruptArtifact(f"{directory} is not a complete artifact: missing {', '.join(missing)}")
    try:
        metadata = json.loads((root / "metadata.json").read_text())
        if not isinstance(metadata, dict):
            raise TypeError(f"a JSON {type(metadata).__name__}, not an object")
        if int(metadata.get("schema", 0)) > ARTIFACT_SCHEMA:
            raise CorruptArtifact(f"{directory} has artifact schema {metadata['schema']}, newer than "
                                  f"this xlaprobe ({ARTIFACT_SCHEMA}); upgrade xlaprobe")
        input_dtypes = [item["dtype"] for item in metadata["inputs"]]
        provenance = Provenance.from_json(metadata["provenance"])
        tolerance = Tolerance.from_json(metadata.get("tolerance", {}))
        output_names = tuple(metadata["output_names"])
        # Every dtype must be known and every tolerance a number before anything runs on them.
        for name in input_dtypes + list(metadata.get("expected_dtypes") or []):
            dtype_by_name(name)
        tolerance.validate()
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CorruptArtifact(f"{root / 'metadata.json'} is malformed: {exc}") from exc
    inputs = _unpack(root / "inputs.npz", input_dtypes)
    enable_x64_for(inputs)
    expected = None
    if (root / "expected.npz").is_file() and "expected_dtypes" in metadata:
        expected = _unpack(root / "expected.npz", metadata["expected_dtypes"])
    try:
        jaxpr_text, consts = (root / "jaxpr.json").read_bytes(), (root / "consts.npz").read_bytes()
    except OSError as exc:
        raise CorruptArtifact(f"cannot read the jaxpr of {directory}: {exc}") from exc
    try:
        closed = jaxpr_json.loads(jaxpr_text, consts)
    except CorruptArtifact as exc:
        raise CorruptArtifact(f"{root / 'jaxpr.json'}: {exc}") from None
    _check_arrays(root / "inputs.npz", inputs, [v.aval for v in closed.jaxpr.invars], "input",
                  dtypes=True)
    if len(output_names) != len(closed.jaxpr.outvars):
        raise CorruptArtifact(f"{directory}: metadata lists {len(output_names)} outputs, the jaxpr "
                              f"has {len(closed.jaxpr.outvars)}")
    _check_companions(root, metadata, closed.out_avals, expected)
    return Program(closed, inputs, provenance, output_names, tolerance, expected,
                   origin=str(root.resolve()))


def _check_arrays(path: Path, arrays: Sequence[np.ndarray], avals: Sequence[Any], what: str, *,
                  dtypes: bool) -> None:
    """Refuse arrays of `path` whose count or shapes (and, with `dtypes`, dtypes) are not the
    jaxpr's `avals`: one line naming the file and the first that differs.

    Raises:
        CorruptArtifact: as above.
    """
    if len(arrays) != len(avals):
        raise CorruptArtifact(f"{path} holds {len(arrays)} {what}s, the jaxpr has {len(avals)}; "
                              "the artifact's files disagree")
    for k, (array, aval) in enumerate(zip(arrays, avals)):
        want, got = np.dtype(aval.dtype), np.asarray(array).dtype
        if tuple(aval.shape) != np.shape(array) or (dtypes and want != got):
            raise CorruptArtifact(
                f"{path}: {what} {k} is {got if dtypes else ''}{list(np.shape(array))}, the "
                f"jaxpr's {want if dtypes else ''}{list(aval.shape)}; the artifact's files "
                "disagree")


def _check_companions(root: Path, metadata: dict[str, Any], out_avals: Sequence[Any],
                      expected: Sequence[np.ndarray] | None) -> None:
    """Refuse the output files of an artifact (``reference.npz``, ``expected.npz``,
    ``allowance.npz``) that are unreadable or of other shapes than the jaxpr's outputs, before
    a command reads (or silently ignores) them.

    Raises:
        CorruptArtifact: one line naming the file.
    """
    if expected is not None:
        _check_arrays(root / "expected.npz", expected, out_avals, "output", dtypes=False)
    if (root / "reference.npz").is_file() and "reference_dtypes" in metadata:
        reference = _unpack(root / "reference.npz", metadata["reference_dtypes"])
        _check_arrays(root / "reference.npz", reference, out_avals, "output", dtypes=False)
    if (root / ALLOWANCE_FILE).is_file():
        check_allowance_file(root / ALLOWANCE_FILE, [tuple(a.shape) for a in out_avals])


def _old_artifact(root: Path) -> str:
    """The one-line refusal of a schema-1 artifact, naming the command that regenerates it."""
    try:
        provenance = Provenance.from_json(json.loads((root / "metadata.json").read_text())
                                          ["provenance"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        provenance = None
    command = "xlaprobe check <the program's model, case or FILE:FN>"
    if provenance is not None and provenance.source in ("model", "user", "case"):
        command = f"xlaprobe check {shlex.quote(str(provenance.name))}"
        if provenance.input_spec:
            command += f" --inputs {shlex.quote(str(provenance.input_spec))}"
        if provenance.seed is not None:
            command += f" --seed {provenance.seed}"
    return (f"{root} is an artifact of an older xlaprobe: its jaxpr.pkl is a pickle, which "
            "xlaprobe no longer loads because unpickling a shared file can run code; regenerate "
            f"it with {command}")


def artifact_config(directory: str | Path) -> str:
    """The configuration an artifact's ``repro.py`` reproduces (its finding's), or "" when the
    metadata names none."""
    try:
        metadata = json.loads((Path(directory) / "metadata.json").read_text())
    except (OSError, ValueError):
        return ""
    config = metadata.get("repro_config", "") if isinstance(metadata, dict) else ""
    return config if isinstance(config, str) else ""


def load_reference(directory: str | Path) -> tuple[np.ndarray, ...] | None:
    """The reference outputs stored with an artifact, or None."""
    root = Path(directory)
    metadata = json.loads((root / "metadata.json").read_text())
    if "reference_dtypes" not in metadata or not (root / "reference.npz").is_file():
        return None
    return _unpack(root / "reference.npz", metadata["reference_dtypes"])


#: The entry point of a crash finding's script: a crash kills the process, so the check runs in a
#: child and a death by signal becomes CRASH and exit 1, like any other failure.
CRASH_ENTRY = """if __name__ == "__main__":
    if "--child" in sys.argv[1:]:
        sys.exit(main())
    import os
    import subprocess
    here = os.path.abspath(__file__)
    code = subprocess.run([sys.executable, here, "--child", *sys.argv[1:]]).returncode
    if code < 0:
        print("CRASH: the process running the program died of signal %d" % -code)
    sys.exit(1 if code < 0 else code)
"""

# The reproducer must run with jax and numpy alone: it duplicates the tiny array (un)packing on purpose.
_REPRO = '''\
"""Standalone reproducer written by xlaprobe. NEEDS

Compiles module.jax_export (the program, serialized with jax.export) with the XLA compiler options
of the failing configuration, runs it on inputs.npz, and compares each output with reference.npz
(an XLA-independent float64 reference). Exit code 1 when an output differs beyond tolerance.

    python repro.py                 # the configuration recorded in metadata.json
    python repro.py --defaults      # jit with default options, for comparison
"""
import json
import pathlib
import sys

import jax
import ml_dtypes
import numpy as np
from jax import export

HERE = pathlib.Path(__file__).resolve().parent


def corrupt(name, exc):
    # Exit 2, not 1: 1 means the fault shows, and a broken artifact shows nothing.
    print("repro: error: cannot read %s (%s: %s); the artifact is corrupt"
          % (HERE / name, type(exc).__name__, exc))
    sys.exit(2)


try:
    META = json.loads((HERE / "metadata.json").read_text())
except Exception as exc:
    corrupt("metadata.json", exc)
ATOL = {"float64": 1e-12, "float32": 1e-6, "float16": 1e-3, "bfloat16": 1e-2}
RTOL = {"float64": 1e-9, "float32": 1e-5, "float16": 1e-2, "bfloat16": 2e-2}


def load(name, dtypes):
    try:
        with np.load(HERE / name, allow_pickle=False) as data:
            arrays = [data["arg%d" % i] for i in range(len(dtypes))]
    except Exception as exc:
        corrupt(name, exc)
    out = []
    for array, dtype in zip(arrays, dtypes):
        dtype = np.dtype(getattr(ml_dtypes, dtype)) if dtype in ("bfloat16",) else np.dtype(dtype)
        out.append(array.view(dtype) if array.dtype != dtype else array)
    return out


JUDGE

def main():
    defaults = "--defaults" in sys.argv[1:]
    options = {} if defaults else META["compiler_options"]
    config = "xla" if defaults else META["repro_config"]
    if "export_error" in META:
        print("this program could not be serialized with jax.export (%s); rerun it with "
              "xlaprobe check %s" % (META["export_error"], HERE))
        return 3
    if config.startswith("jaxlib=="):
        # A finding of another XLA release: this jax would run its own XLA and show nothing.
        print("this finding is for %s and this is jax %s: replay it with xlaprobe check %s "
              "--configs '%s,reference' (it runs that release's environment), or python "
              "repro.py --defaults to run the installed release"
              % (config, jax.__version__, HERE, config))
        return 3
    INSTALL
    inputs = load("inputs.npz", [i["dtype"] for i in META["inputs"]])
    exported = export.deserialize(bytearray((HERE / "module.jax_export").read_bytes()))
    compiled = jax.jit(exported.call).lower(*inputs).compile(compiler_options=options or None)
    outputs = [np.asarray(x) for x in jax.tree_util.tree_leaves(compiled(*inputs))]
    print("program: %s (%s), jax %s; configuration %s, options %s"
          % (META["provenance"]["name"], META["provenance"]["source"], jax.__version__, config, options))
    if "reference_dtypes" not in META:
        for name, out in zip(META["output_names"], outputs):
            print(name, out)
        return 0
    reference = load("reference.npz", META["reference_dtypes"])
    # (atol, rtol) per output: the check's own bounds where recorded, else per-dtype defaults
    bounds = META.get("repro_tolerance") or [None] * len(outputs)
    # Per element, what the check allowed (its honest-run budget; see xlaprobe.allowance)
    allowance = load_allowance(__file__)
    failed = 0
    for i, (name, out, ref, bound) in enumerate(zip(META["output_names"], outputs, reference, bounds)):
        if np.issubdtype(out.dtype, np.integer) or out.dtype == np.bool_:
            bad = out.astype(np.float64) != ref.astype(np.float64)
        elif "allowed_%d" % i in allowance:
            bad = judged_as_the_check(out, ref, leaf_allowance(allowance, i))
        else:
            o, r = out.astype(np.float64), ref.astype(np.float64)
            kind = out.dtype.name
            atol, rtol = bound or (ATOL.get(kind, 1e-6), RTOL.get(kind, 1e-5))
            with np.errstate(invalid="ignore"):
                err = np.abs(o - r)
                bad = (err > atol) & (err > rtol * np.abs(r))
            bad |= np.isnan(o) != np.isnan(r)
            bad |= np.isinf(o) & np.isfinite(r) | np.isinf(r) & np.isfinite(o)
            tiny = float(ml_dtypes.finfo(out.dtype).tiny)
            bad &= ~((o == 0) & (np.abs(r) < tiny))  # flush to zero: legal
        if bad.any():
            failed += 1
            index = int(np.argmax(bad.ravel()))
            print("MISMATCH %s: %d of %d elements; first at flat index %d: got %r, reference %r"
                  % (name, int(bad.sum()), bad.size, index, out.ravel()[index].item(),
                     ref.ravel()[index].item()))
        else:
            print("ok       %s" % name)
    print("%d of %d outputs mismatch" % (failed, len(outputs)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
'''


def repro_text(config: str, *, crash: bool = False) -> str:
    """The artifact's ``repro.py`` for configuration `config`: jax alone, except for a planted
    mutant (``mutant:<name>``), whose HLO pass the script installs from xlaprobe (without it the
    compile is the healthy one and the fault does not show). With `crash` (the fault kills the
    process) the check runs in a child process and a death by signal exits 1.

    >>> "install('swap-subtract-fused')" in repro_text("mutant:swap-subtract-fused")
    True
    >>> "xlaprobe" in repro_text("xla").split("\\n")[0], "install(" in repro_text("xla")
    (True, False)
    """
    text = _REPRO.replace("JUDGE\n", REPRO_JUDGE.strip("\n") + "\n")
    if crash:
        text = text.replace('if __name__ == "__main__":\n    sys.exit(main())\n', CRASH_ENTRY)
    mutant = config.partition(":")[2] if config.startswith("mutant:") else ""
    if not mutant:
        return text.replace("NEEDS", "Needs only jax (and numpy).").replace("    INSTALL\n", "")
    needs = (f"Needs jax, numpy and xlaprobe: it installs\nxlaprobe's planted mutant "
             f"'{mutant}' (an HLO pass) into XLA,\nso that the compile below is the faulty one.")
    install = ("    if not defaults:  # the planted fault: xlaprobe's mutant pass, for every compile\n"
               "        from xlaprobe.configs.mutants import install\n"
               f"        install({mutant!r})\n")
    return text.replace("NEEDS", needs).replace("    INSTALL\n", install)
