"""The words of an upstream issue (`xlaprobe.upstream`): its title, its search terms and its
Markdown body, from a finding's `xlaprobe.upstream.Evidence`. Pure functions of their arguments."""

from __future__ import annotations

import re
import urllib.parse
from typing import Any

import ml_dtypes
import numpy as np

from xlaprobe.configs.registry import Configuration
from xlaprobe.outcome import crash_message

#: What each verdict kind means, in an issue title.
WHAT = {"mismatch": "returns wrong values", "nan-mismatch": "returns NaN where the result is finite",
        "inf-mismatch": "returns Inf where the result is finite", "crash": "aborts the process",
        "compile-error": "rejects a valid program", "timeout": "hangs"}


#: Operations that only move or relabel data: not what a title names when nothing is localized.
LAYOUT = frozenset({"reshape", "broadcast_in_dim", "convert_element_type", "squeeze",
                    "transpose", "copy", "copy_p", "expand_dims"})


def _value_class(value: float) -> str:
    if np.isnan(value):
        return "NaN"
    return ("-Inf" if value < 0 else "Inf") if np.isinf(value) else "a finite value"


def behaviour(evidence: Any) -> str:
    """What the finding's configuration does, for a title: `WHAT` of its kind, except that a
    NaN or Inf mismatch says which way it went from its worst element (``returns Inf where the
    result is NaN``: a NaN lost is not a NaN made)."""
    kind = evidence.finding.kind
    if kind in ("nan-mismatch", "inf-mismatch"):
        for v in evidence.verdicts:
            if v.kind.is_finding and v.worst >= 0:
                got, right = _value_class(v.actual), _value_class(v.expected)
                if got != right:
                    right = "finite" if right == "a finite value" else right
                    return f"returns {got} where the result is {right}"
    return WHAT.get(kind, kind)


def _failing_equation(evidence: Any) -> tuple[str, Any]:
    """(the faulty operation's primitive name, its top-level equation or None): the localized
    equation (the HLO instruction tier may name another equation fused into its kernel), else
    the program's last equation that is not a layout operation (`LAYOUT`)."""
    loc = evidence.localization or {}
    eqns = evidence.program.jaxpr.jaxpr.eqns
    for tier in ("equation", "op"):
        named = loc.get(tier) or {}
        if named.get("primitive"):
            index = named.get("index", named.get("equation", -1))
            eqn = eqns[index] if isinstance(index, int) and 0 <= index < len(eqns) and \
                eqns[index].primitive.name == named["primitive"] else None
            return str(named["primitive"]), eqn
    for eqn in reversed(eqns):
        if eqn.primitive.name not in LAYOUT:
            return eqn.primitive.name, eqn
    return (eqns[-1].primitive.name, eqns[-1]) if eqns else ("program", None)


def primitive(evidence: Any) -> str:
    """The faulty operation's primitive name (see `_failing_equation`)."""
    return _failing_equation(evidence)[0]


def dtypes(evidence: Any) -> list[str]:
    """The faulty operation's dtypes, operands then results, in order of first appearance: a
    bfloat16 convolution's in a program that also holds int16 is ``["bfloat16"]``. The
    program's input dtypes when no equation is known."""
    _, eqn = _failing_equation(evidence)
    if eqn is not None:
        found = [np.dtype(v.aval.dtype).name for v in (*eqn.invars, *eqn.outvars)
                 if hasattr(v.aval, "dtype")]
    else:
        found = [np.asarray(x).dtype.name for x in evidence.program.inputs]
    return list(dict.fromkeys(found))


#: Inputs are "subnormal inputs" in a title when at least this share of their nonzero float
#: elements is subnormal (a few subnormals among random weights say nothing about the fault).
SUBNORMAL_SHARE = 0.25


def subnormal_inputs(evidence: Any) -> bool:
    """Are at least `SUBNORMAL_SHARE` of the program's nonzero float input elements subnormal
    (nonzero, below their dtype's smallest normal)?"""
    nonzero = subnormal = 0
    for x in evidence.program.inputs:
        x = np.asarray(x)
        if x.dtype.kind == "f" or x.dtype == np.dtype(ml_dtypes.bfloat16):
            tiny = float(ml_dtypes.finfo(x.dtype).tiny)
            values = np.abs(x.astype(np.float64))
            nonzero += int((values > 0).sum())
            subnormal += int(((values > 0) & (values < tiny)).sum())
    return nonzero > 0 and subnormal >= SUBNORMAL_SHARE * nonzero


def options(evidence: Any) -> dict[str, Any]:
    """The failing configuration's XLA options ({} for default jit)."""
    config = Configuration.parse(evidence.finding.config)
    return dict(config.compiler_options) if config.kind == "xla" else {}


def error_line(error: str, limit: int = 120) -> str:
    """The first line of an error without the Python exception's name, cut at a word.

    >>> error_line("JaxRuntimeError: UNIMPLEMENTED: Unsupported element type")
    'UNIMPLEMENTED: Unsupported element type'
    """
    line = error.strip().splitlines()[0] if error.strip() else ""
    head, sep, rest = line.partition(": ")
    if sep and head.isidentifier() and head.endswith(("Error", "Exception")):
        line = rest
    return line if len(line) <= limit else line[:limit].rsplit(" ", 1)[0] + " ..."


def title(evidence: Any) -> str:
    """The issue title, e.g. ``[XLA:CPU] cbrt of float32 subnormal inputs returns wrong values``."""
    op = primitive(evidence)
    types = "/".join(dtypes(evidence))
    of = f"{op} of {types} subnormal inputs" if subnormal_inputs(evidence) else f"{op} ({types})"
    what = behaviour(evidence)
    if evidence.finding.kind == "compile-error" and evidence.error:
        what += f": {error_line(evidence.error)}"
    opts = options(evidence)
    under = " with " + ", ".join(f"{k}={v}" for k, v in opts.items()) if opts else ""
    if evidence.finding.config == "eager":
        under = " in op-by-op execution"
    return f"[XLA:CPU] {of} {what}{under}"


def search_terms(evidence: Any) -> list[str]:
    """Queries for a duplicate check: the operation with the trait that makes it fail, the
    HLO opcode, the error's words."""
    op = primitive(evidence)
    loc = evidence.localization or {}
    opcode = (loc.get("op") or {}).get("opcode") or ""
    crashed = evidence.finding.kind == "crash"
    terms = [f"{op} CPU crash" if crashed else f"{op} CPU wrong"]
    if subnormal_inputs(evidence):
        terms = [f"{op} subnormal", f"{op} denormal"]
    if any("fast_math" in k for k in options(evidence)):
        terms.append(f"fast math {op}")
    if opcode and opcode != op:
        terms.append(f"{opcode} CPU")
    if evidence.error:
        message = crash_message(evidence.error) if crashed else error_line(evidence.error, 400)
        terms += check_terms(message) or [" ".join(message.rsplit(": ", 1)[-1].split()[:6])]
    for dtype in dtypes(evidence):
        if dtype in ("bfloat16", "float16", "int8", "uint8"):
            terms.append(f"{op} {dtype}")
    return list(dict.fromkeys(t for t in terms if t.strip()))


#: A failed check's source file and condition, and an XLA RET_CHECK's, in a crash message.
_CHECK = re.compile(r"(\w+)\.(?:cc|h|cpp):\d+\] Check failed: (.*?)(?: \(|$)")
_RET_CHECK = re.compile(r"RET_CHECK failure \(\S*?(\w+)\.(?:cc|h|cpp):\d+\) ([\w:]+)")


def check_terms(message: str) -> list[str]:
    """Search terms of a failed check in an error or crash message (`error_line`,
    `xlaprobe.outcome.crash_message`): the failed check with its source file, and the
    RET_CHECK's file and condition, without values; [] when it names no check.

    >>> check_terms('algebraic_simplifier.cc:650] Check failed: computation->Accept(this) is OK '
    ...             '(INTERNAL: RET_CHECK failure (external/xla/hlo_computation.cc:1975) '
    ...             'ShapeUtil::Compatible(old->shape()) "reduce-window" (f32[1,1]))')
    ... # doctest: +NORMALIZE_WHITESPACE
    ['algebraic_simplifier Check failed computation->Accept(this) is OK',
     'RET_CHECK hlo_computation ShapeUtil::Compatible']
    >>> check_terms("munmap_chunk(): invalid pointer")
    []
    """
    terms = []
    if check := _CHECK.search(message):
        terms.append(" ".join(f"{check.group(1)} Check failed {check.group(2)}".split()[:8]))
    if ret := _RET_CHECK.search(message):
        terms.append(f"RET_CHECK {ret.group(1)} {ret.group(2)}")
    return terms


def _crash_detail(evidence: Any, verdict: Any) -> str:
    """A crash verdict's detail with its stored text (a stack frame, in findings stored before
    `Outcome.last_line` picked the check line) replaced by the error's `crash_message`."""
    if verdict.kind.value != "crash" or not evidence.error:
        return verdict.detail
    signal = re.match(r"signal \d+: ", verdict.detail or "")
    return (signal.group(0) if signal else "") + crash_message(evidence.error, 300)


def _worst(evidence: Any) -> str:
    """The failing leaves' worst elements as Markdown bullets; outputs that failed alike with
    no element to show (a crash, a hang) share one bullet."""
    lines: list[str] = []
    alike: dict[str, list[str]] = {}
    for v in evidence.verdicts:
        if not v.kind.is_finding:
            continue
        if v.worst < 0:
            detail = _crash_detail(evidence, v)
            text = v.kind.value + (f" ({detail[:300]})" if detail else "")
            if text not in alike:
                lines.append(text)
            alike.setdefault(text, []).append(v.output)
        else:
            lines.append(f"- output `{v.output}`: element {v.worst} is **{v.actual:.9g}**, the "
                         f"right value is **{v.expected:.9g}** ({v.frac_over:.1%} of its "
                         f"elements are off; {_relative(v)})")
    lines = [f"- {_outputs(alike[line])}: {line}" if line in alike else line for line in lines]
    return "\n".join(lines) or "- (no per-output detail stored)"


def _outputs(names: list[str]) -> str:
    """``output `y` `` or ``2 outputs `a`, `b` ``, at most six named."""
    if len(names) == 1:
        return f"output `{names[0]}`"
    shown = ", ".join(f"`{n}`" for n in names[:6]) + (", ..." if len(names) > 6 else "")
    return f"{len(names)} outputs {shown}"


def error_text(evidence: Any, limit: int = 1500) -> str:
    """The finding's error for the issue's Error section, at most about `limit` characters: a
    crash's check-failure line (`crash_message`) first, then the tail of its stderr; any other
    error's tail."""
    text = evidence.error.strip()
    if evidence.finding.kind != "crash" or len(text) <= limit:
        return text[-limit:]
    message = crash_message(text, limit // 2)
    tail = text[-(limit - len(message)):].partition("\n")[2]  # from a line's start
    return f"{message}\n...\n{tail}"


def _relative(verdict: Any) -> str:
    """The leaf's max relative error, said over which elements: a NaN or Inf mismatch's is over
    the elements where both values are finite (the others have no finite error)."""
    if verdict.kind.value not in ("nan-mismatch", "inf-mismatch"):
        return f"max relative error {verdict.max_rel:.3g}"
    what = "NaN" if verdict.kind.value == "nan-mismatch" else "Inf"
    finite = (f"max relative error {verdict.max_rel:.3g} where both values are finite"
              if verdict.max_rel else "where both values are finite they agree")
    return f"a {what} where the other value is not, an error no number measures; {finite}"


def _right_value(evidence: Any) -> str:
    """How the right value was obtained."""
    text = ("The right values come from xlaprobe's float64 reference: a NumPy interpreter of the "
            "program's jaxpr that does not use XLA. Each element is judged against per-dtype "
            "bounds widened by the error of honest runs in the program's own dtype (the same "
            "NumPy interpreter in float32/bfloat16, plus Monte Carlo arithmetic samples), so "
            "ordinary rounding is not reported.")
    if evidence.program.expected is not None:
        text += (" The case also states its expected outputs computed independently (by hand "
                 "or NumPy), and the reference agrees with them.")
    good = sorted(c for c, k in evidence.summaries.items() if k in ("ok", "ftz")
                  and not c.startswith("reference"))
    alike = [c for c in evidence.finding.alike if c != evidence.finding.config]
    if alike:
        text += f" The same failure shows under {', '.join(f'`{c}`' for c in alike)}."
    if good:
        text += f" It is right under {', '.join(f'`{c}`' for c in good)}."
    return text


def _window(evidence: Any) -> str:
    b = evidence.bisection
    if not b:
        return (f"Not bisected yet (`xlaprobe bisect {evidence.finding.id}` runs it across "
                "jaxlib releases).")
    runs = ", ".join(f"{r['release']} {r['verdict']}" for r in b.get("runs", []) if not r.get("rerun"))
    oldest = " (the oldest release tried already fails)" if b.get("first_bad") and \
        not b.get("last_good") else ""
    return (f"Last good jaxlib: {b.get('last_good') or '-'}; first bad: "
            f"{b.get('first_bad') or '-'}{oldest}; first fixed: {b.get('first_fixed') or '-'} "
            f"(runs: {runs}).")


def _where(evidence: Any) -> str:
    loc = evidence.localization
    if not loc:
        return (f"Not localized yet (`xlaprobe localize {evidence.finding.id}` names the op, the "
                "kernel and the HLO pass).")
    op, compiler_pass = loc.get("op") or {}, loc.get("pass") or {}
    lines = [f"- failing operation: `{primitive(evidence)}` (equation "
             f"{(loc.get('equation') or {}).get('index', '?')} of the program)"]
    if op.get("kernel"):
        lines.append(f"- failing kernel: `{op['kernel']}`, instruction `{op.get('instruction')}` "
                     f"(opcode `{op.get('opcode')}`)")
    guilty = compiler_pass.get("compiler_pass")
    if guilty and guilty != "none":
        lines.append(f"- guilty HLO pass: `{guilty}` (disabling it fixes the result; "
                     f"{compiler_pass.get('evidence', '')})")
    elif compiler_pass:
        lines.append(f"- no HLO pass is guilty: {compiler_pass.get('evidence', '')}")
    hlo = loc.get("kernel_hlo") or ""
    if hlo:
        lines += ["", "The failing kernel's optimized HLO:", "", "```", hlo.strip(), "```"]
    return "\n".join(lines)


def body(evidence: Any, repo: str, heading: str, terms: list[str], repro: str,
         code: int | None, output: str, env: dict[str, str]) -> str:
    """The whole issue in Markdown (see `xlaprobe.upstream.draft`)."""
    ran = ("(not run here)" if code is None else
           f"Running it (`python repro.py`) prints, and exits {code}:\n\n```\n{output.strip()}\n```")
    summary = (f"On XLA:CPU (jax {env['jax']}, jaxlib {env['jaxlib']}), `{primitive(evidence)}` "
               f"{behaviour(evidence)} under configuration "
               f"`{evidence.finding.config}`"
               + (f" (XLA options {options(evidence)})" if options(evidence) else "")
               + f". Found by differential testing (xlaprobe), finding {evidence.finding.id}, "
               f"fingerprint `{evidence.finding.fingerprint}`.")
    sections = [
        f"# {heading}", "", f"Repository: {repo}", "", "## Summary", "", summary, "",
        _worst(evidence), "",
        "## Reproducer (imports only jax and numpy)", "", "```python", repro.rstrip(), "```", "",
        ran, "", "## Expected values and how they were obtained", "", _right_value(evidence), "",
        "## Release window", "", _window(evidence), "", "## Where in the compiler", "",
        _where(evidence), "", "## Environment", "",
        *(f"- {k}: {v}" for k, v in env.items()), "", "## Duplicate check", "",
        "Search terms: " + "; ".join(f"`{t}`" for t in terms), "",
        *(f"- {url}" for url in search_urls(repo, terms)), ""]
    if evidence.error:
        sections[sections.index("## Release window"):sections.index("## Release window")] = [
            "## Error", "", "```", error_text(evidence), "```", ""]
    return "\n".join(sections)


def search_urls(repository_name: str, terms: list[str] | tuple[str, ...]) -> list[str]:
    """Issue-search URLs of `terms` on a GitHub repository.

    >>> search_urls("openxla/xla", ["cbrt subnormal"])
    ['https://github.com/openxla/xla/issues?q=cbrt+subnormal']
    """
    return [f"https://github.com/{repository_name}/issues?q={urllib.parse.quote_plus(t)}"
            for t in terms]
