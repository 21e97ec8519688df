"""Triage identity: one key per distinct bug, not one per run that showed it.

A finding's fingerprint names its failure, never the circumstances of the run:

* before localization (`finding_key`): the failure class (``numeric`` for the three mismatch
  kinds: one wrong kernel gives NaN on one input and finite garbage on another), and
  - for a crash, the normalized check-failure line (`crash_signature`: source location and the
    failed check, no values, no addresses; glibc's heap-corruption messages, which vary from run
    to run for one out-of-bounds write, are one class);
  - for a compile error, its normalized message (`error_signature`);
  - otherwise the primitives of the failing outputs' cone of influence and the classes of the
    input dtypes it reads (`xlaprobe.jaxprs.output_cone`, `dtype_class`);
  Which configurations failed alike is data stored with the finding, not part of the key.
* a planted fault (a ``mutant:`` or ``spmd[...,mutant=]`` configuration's finding that no
  configuration without one shares, `planted_fault`) is one defect by construction, whatever it breaks and wherever: its
  key is its name alone, before and after localization.
* after localization (`localized_key`): the failing operation itself (jaxpr primitive or HLO
  opcode, its dtypes' classes, the guilty pass), so a crash and a mismatch of one operation, one
  operation reached from two unrelated programs, or one kernel failing alike in float32 and
  bfloat16 or at two sizes (shapes never enter a key), are one bug.

Source: the bucketing of crash reports by normalized top frames and of miscompilations by the
reduced failing operation, as in C-Reduce/CSmith triage and NNSmith's report deduplication.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

from xlaprobe import jaxprs
from xlaprobe.oracle import VerdictKind

_FATAL = re.compile(r"^F\d{4} [^\]]*?(\w+\.(?:cc|h|cpp)):(\d+)\] (.*)$", re.MULTILINE)
#: glibc's allocator aborts: which of these one out-of-bounds write triggers depends on the heap's
#: state, so they name one class of bug (heap corruption), not one each.
_HEAP = re.compile(r"(munmap_chunk|free\(\)|malloc\(\)|malloc_consolidate|realloc\(\)|"
                   r"double free|corrupted (size|double-linked|top size)|"
                   r"malloc\.c|invalid (pointer|next size|size))", re.IGNORECASE)
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")


def _mask(text: str) -> str:
    return re.sub(r"\d+", "#", _ADDRESS.sub("0x#", text)).strip()[:200]


def crash_signature(error: str) -> str:
    """What names a compiler crash in its stderr: the glog fatal line's source location and the
    failed check without values; glibc heap-corruption messages as one class; else the first
    line with numbers and addresses masked.

    A crash aborts the compilation of the whole program, so the cone of its outputs says nothing;
    two programs that fail the same check in the same pass are one bug.

    Args:
        error: the crash's stderr tail (text).

    Returns:
        A short text (at most 200 characters).

    >>> crash_signature("W0000 x\\nF1129 19:31:07.9 7861 algebraic_simplifier.cc:586] Check failed: "
    ...                 "computation->Accept(this) is OK (INTERNAL: f16[15,1] vs f16[16,1])\\n@ 0x7f")
    'algebraic_simplifier.cc:586 Check failed: computation->Accept(this) is OK'
    >>> crash_signature("munmap_chunk(): invalid pointer") == crash_signature(
    ...     "free(): invalid next size (fast)\\n")
    True
    >>> crash_signature("worker process 5754 died from signal 6 (SIGABRT) and wrote nothing")
    'worker process # died from signal # (SIGABRT) and wrote nothing'
    """
    match = _FATAL.search(error)
    if match:
        return f"{match.group(1)}:{match.group(2)} {match.group(3).split(' (')[0].strip()}"
    lines = [line.strip() for line in error.splitlines() if line.strip()]
    if any(_HEAP.search(line) for line in lines):
        return "heap corruption (glibc allocator abort)"
    return _mask(lines[0] if lines else "")


def error_signature(error: str) -> str:
    """A compile error's identity: its last non-empty line (where XLA and JAX put the status
    message), numbers, shapes' sizes and addresses masked.

    >>> error_signature("Traceback...\\nUNIMPLEMENTED: Unsupported dot f32[2,3] bf16[3,4]")
    'UNIMPLEMENTED: Unsupported dot f#[#,#] bf#[#,#]'
    """
    lines = [line.strip() for line in error.splitlines() if line.strip()]
    return _mask(lines[-1] if lines else "")


#: Dtype name prefixes -> class, longest first. Widths of one class are one key: a kernel that
#: mishandles subnormals or a rounding step fails in float32 and bfloat16 alike (cbrt of
#: subnormals gave three fingerprints in one campaign), and JAX widens narrow floats to float32
#: for many primitives anyway.
_DTYPE_CLASSES = (("bfloat", "float"), ("float", "float"), ("complex", "complex"),
                  ("uint", "uint"), ("int", "int"), ("bool", "bool"), ("pred", "bool"),
                  ("bf", "float"), ("f", "float"), ("c", "complex"), ("u", "uint"),
                  ("s", "int"), ("i", "int"))


def dtype_class(name: str) -> str:
    """The class of a NumPy or HLO dtype name that triage keys use: ``float`` (every width,
    bfloat16 and float8 kinds included), ``complex``, ``int``, ``uint`` or ``bool``; a name of
    no class is returned as it is (a PRNG key type).

    >>> [dtype_class(n) for n in ("bfloat16", "f32", "float8_e4m3fn", "u8", "int4", "pred")]
    ['float', 'float', 'float', 'uint', 'int', 'bool']
    """
    return next((c for prefix, c in _DTYPE_CLASSES if name.startswith(prefix)
                 and (len(prefix) > 2 or name[len(prefix):][:1].isdigit())), name)


def _digest(*parts: str) -> str:
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


_SPMD_MUTANT = re.compile(r"^spmd\[(?:.*,)?mutant=([^,\]]+)")


def planted_name(config: str) -> str:
    """The planted fault of a configuration spec: ``NAME`` of ``mutant:NAME`` and of a
    partitioning mutant ``spmd[...,mutant=NAME]`` (`xlaprobe.configs.spmd_mutants`; its names
    are not the single-device mutants'), ``""`` for a configuration without one.

    >>> planted_name("mutant:reduce-wrong-init")
    'reduce-wrong-init'
    >>> planted_name("spmd[mesh=2x2,mutant=halo-off-by-one]")
    'halo-off-by-one'
    >>> planted_name("spmd[mesh=2x2]"), planted_name("xla:O0")
    ('', '')
    """
    if config.startswith("mutant:"):
        return config.split(":", 1)[1]
    match = _SPMD_MUTANT.match(config)
    return match.group(1) if match else ""


def planted_fault(config: str, alike: Sequence[str] = ()) -> str:
    """The planted fault a finding of `config` is attributed to: its `planted_name` (a
    ``mutant:NAME`` or ``spmd[...,mutant=NAME]`` configuration), unless a configuration without a
    planted fault failed the same way (`alike`): then it is a real fault the mutant compiler (XLA
    plus one pass) shares, not the planted one.

    >>> planted_fault("mutant:reduce-wrong-init"), planted_fault("xla:O0")
    ('reduce-wrong-init', '')
    >>> planted_fault("mutant:reduce-wrong-init", ["mutant:reduce-wrong-init", "xla"])
    ''
    """
    name = planted_name(config)
    if not name or any(not planted_name(c) for c in alike):
        return ""
    return name


def planted_key(name: str) -> str:
    """The fingerprint (and bug key) of every finding of the planted fault `name` (hex, 16
    characters): one defect by construction."""
    return _digest("planted", name)


def is_planted(fingerprint: str, config: str) -> bool:
    """Whether a finding of `config` with `fingerprint` is its planted fault's. A ``mutant:``
    configuration's finding that a configuration without the fault failed alike is keyed as a
    real fault (`planted_fault`), which the mutant compiler shares: not planted.

    >>> is_planted(planted_key("swap"), "mutant:swap"), is_planted("0123456789abcdef", "mutant:swap")
    (True, False)
    """
    name = planted_fault(config)
    return bool(name) and fingerprint == planted_key(name)


def finding_key(program: Any, config: str, kind: VerdictKind, outputs: Sequence[int],
                error: str = "", alike: Sequence[str] = ()) -> str:
    """The fingerprint of a finding before localization (hex, 16 characters).

    Args:
        program: the `xlaprobe.program.Program`.
        config: the failing configuration's spec (only a planted fault's name enters the key).
        kind: its summary verdict kind (a finding kind).
        outputs: positions of its failing output leaves.
        error: the outcome's error text (crash and compile error).
        alike: the configurations that failed the same way (`planted_fault`).

    Returns:
        16 hex digits.
    """
    planted = planted_fault(config, alike)
    if planted:
        return planted_key(planted)
    if kind is VerdictKind.CRASH:
        return _digest("crash", crash_signature(error))
    if kind is VerdictKind.COMPILE_ERROR:
        return _digest("compile-error", error_signature(error))
    primitives, dtypes = jaxprs.output_cone(program.jaxpr, outputs)
    classes = {dtype_class(d) for d in dtypes}
    return _digest(kind.family, ",".join(sorted(primitives)), ",".join(sorted(classes)), "")


def result_dtypes(eqn: Any) -> list[str]:
    """The dtypes of an equation's results that name the arithmetic that went wrong: its floating
    (and complex) result dtypes, else all of them. Index and mask operands (an int32 scatter
    index, a bool predicate) do not, and would split one bug in several."""
    results = [str(v.aval.dtype) for v in eqn.outvars if hasattr(v, "aval")]
    return [d for d in results if d.startswith(("float", "bfloat", "complex"))] or results


def localized_key(operation: str, dtypes: Sequence[str], guilty_pass: str = "",
                  planted: str = "") -> str:
    """The fingerprint of a localized finding: the failing operation (hex, 16 characters).

    Args:
        operation: the failing HLO opcode inside the kernel when tier 4 named it, else the
            failing jaxpr primitive.
        dtypes: its operand and result dtype names (order does not matter; only their
            classes enter the key, `dtype_class`).
        guilty_pass: the HLO pass whose disabling fixes it (``""``: none named).
        planted: a planted fault's name (`planted_fault`).

    Returns:
        16 hex digits.

    >>> localized_key("subtract", ["f32"]) == localized_key("subtract", ["f32", "f32"])
    True
    >>> localized_key("subtract", ["f32"], "p", "swap") == localized_key("dot", [], "", "swap")
    True
    >>> localized_key("cbrt", ["float32"]) == localized_key("cbrt", ["bfloat16"])
    True
    """
    if planted:
        return planted_key(planted)
    classes = {dtype_class(d) for d in dtypes}
    return _digest("op", operation, ",".join(sorted(classes)), guilty_pass, "")
