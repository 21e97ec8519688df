"""A reduced Program as a standalone ``repro.py``: plain jax/lax code with the inputs inline.

`emit_repro` prints the program's jaxpr back as Python: one line per equation, ``lax.add(x, y)``
for plain elementwise ops (the `primitives.PrimitiveFacts.wrapper` of the primitive), ``lax.<primitive>_p.bind(..., **params)`` otherwise (the parameters
printed as Python literals: tuples, dtypes, ``lax`` enums and dimension-number records), and
``lax.while_loop`` / ``lax.scan`` / ``lax.switch`` / ``lax.scatter_*`` where a parameter holds a
jaxpr. The inputs are written inline (small arrays as literals, larger ones as base64 of their
bytes) and passed to ``jax.jit(program)`` as arguments, as every ``xla`` configuration does (a
closed-over input would be constant-folded and change the compile). The script compiles with the
faulty configuration's compiler options, runs, and compares each output with the float64
reference values inline; it prints ``MISMATCH`` and exits 1 when the fault shows, exits 0
otherwise.

A program with a primitive this printer has no form for raises `Unprintable`; `emit_export_repro`
then writes the same script around the program serialized with ``jax.export`` (still standalone,
no longer readable code).
"""

from __future__ import annotations

import base64
import enum
from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np
from xlaprobe import jaxcompat, primitives

from xlaprobe.program import Program

#: Arrays with at most this many elements are written as literals; larger ones as base64.
LITERAL_ELEMENTS = 256
#: Scatter primitives -> the ``lax`` function that prints them (with their dimension numbers).
_SCATTERS = {"scatter": "scatter", "scatter-add": "scatter_add", "scatter-mul": "scatter_mul",
             "scatter-min": "scatter_min", "scatter-max": "scatter_max",
             "scatter-sub": "scatter_sub"}


class Unprintable(Exception):
    """The program holds a primitive or parameter the printer has no Python form for."""


def _dtype_expr(dtype: Any) -> str:
    """Python text naming a dtype (``np.float32``, ``jnp.bfloat16``).

    >>> _dtype_expr(np.dtype("float32"))
    'np.float32'
    """
    dtype = np.dtype(dtype)
    if dtype.type.__module__.startswith("ml_dtypes"):
        return f"jnp.{dtype.name}"
    return "np.bool_" if dtype == np.bool_ else f"np.{dtype.name}"


def _scalar(value: Any, dtype: np.dtype) -> str:
    if dtype == np.bool_:
        return "True" if bool(value) else "False"
    if np.issubdtype(dtype, np.integer):
        return str(int(value))
    if np.issubdtype(dtype, np.complexfloating):
        return repr(complex(value))
    value = float(value)
    if np.isnan(value):
        return "nan"
    if np.isinf(value):
        return "inf" if value > 0 else "-inf"
    return repr(value)


def array_expr(value: Any) -> str:
    """Python text that rebuilds `value` bit for bit (NaN payloads aside) as a NumPy array.

    Small arrays are nested-list literals, constant ones ``np.full``, larger ones base64 of their
    bytes (the script imports ``base64``).

    Args:
        value: any array or scalar of a NumPy or ml_dtypes dtype.

    Returns:
        An expression, e.g. ``np.array([1.5, -0.0], dtype=np.float32)``.

    >>> array_expr(np.array([1.5, -0.0], np.float32))
    'np.array([1.5, -0.0], dtype=np.float32)'
    >>> array_expr(np.zeros((2, 3), np.int8))
    'np.full((2, 3), 0, dtype=np.int8)'
    """
    array = np.asarray(value)
    dtype = array.dtype
    kind = _dtype_expr(dtype)
    signs = np.signbit(array) if np.issubdtype(dtype, np.floating) else np.zeros(array.shape, bool)
    if array.size > 1 and (array == array.flat[0]).all() and signs.any() == signs.all():
        return f"np.full({array.shape}, {_scalar(array.flat[0], dtype)}, dtype={kind})"
    if array.size <= LITERAL_ELEMENTS:
        wide = array.astype(np.float64) if dtype.type.__module__.startswith("ml_dtypes") else array
        text = _nested(wide.tolist(), dtype)
        return f"np.array({text}, dtype={kind})"
    data = base64.b64encode(np.ascontiguousarray(array).tobytes()).decode()
    return (f"np.frombuffer(base64.b64decode('{data}'), dtype={kind})"
            f".reshape({array.shape}).copy()")


def _nested(value: Any, dtype: np.dtype) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_nested(v, dtype) for v in value) + "]"
    return _scalar(value, dtype)


class _Printer:
    """Prints jaxprs as Python functions, collecting module-level constants."""

    def __init__(self) -> None:
        import jax.lax as lax
        self.lines: list[str] = []
        self.constants: list[str] = []
        self.counter = 0
        self._lax = {id(getattr(lax, a)): a for a in dir(lax)
                     if isinstance(getattr(lax, a), jaxcompat.Primitive)}

    def fresh(self, prefix: str) -> str:
        """A new Python name ``prefix<N>``."""
        self.counter += 1
        return f"{prefix}{self.counter}"

    def constant(self, value: Any) -> str:
        """A module-level constant holding `value`; returns its name."""
        name = f"CONST{len(self.constants)}"
        self.constants.append(f"{name} = {array_expr(value)}")
        return name

    def primitive(self, prim: jaxcompat.Primitive) -> str:
        """``lax.<name>_p`` for a primitive jax.lax exports; else `Unprintable`."""
        if id(prim) in self._lax:
            return f"lax.{self._lax[id(prim)]}"
        raise Unprintable(f"primitive '{prim.name}' is not exported by jax.lax")

    def param(self, value: Any) -> str:
        """A parameter value as Python text; `Unprintable` where there is none."""
        if value is None or isinstance(value, (bool, int, str)):
            return repr(value)
        if isinstance(value, float):
            return _scalar(value, np.dtype(np.float64))
        if isinstance(value, np.dtype) or (isinstance(value, type)
                                           and issubclass(value, np.generic)):
            return f"np.dtype({_dtype_expr(value)})"
        if isinstance(value, jaxcompat.Primitive):
            return self.primitive(value)
        if isinstance(value, enum.Enum):
            import jax.lax as lax
            if getattr(lax, type(value).__name__, None) is type(value):
                return f"lax.{type(value).__name__}.{value.name}"
            raise Unprintable(f"parameter value {value!r} has no public type in jax.lax")
        if isinstance(value, tuple) and hasattr(value, "_fields"):
            import jax.lax as lax
            name = type(value).__name__
            if getattr(lax, name, None) is not type(value):
                raise Unprintable(f"parameter record {name} is not in jax.lax")
            fields = ", ".join(f"{f}={self.param(getattr(value, f))}" for f in value._fields)
            return f"lax.{name}({fields})"
        if isinstance(value, (tuple, list)):
            inner = ", ".join(self.param(v) for v in value)
            return f"({inner},)" if isinstance(value, tuple) and len(value) == 1 else (
                f"({inner})" if isinstance(value, tuple) else f"[{inner}]")
        if isinstance(value, (np.ndarray, np.generic)):
            return array_expr(value)
        if isinstance(value, (np.bool_, np.integer, np.floating)):
            return repr(value.item())
        raise Unprintable(f"parameter of type {type(value).__name__} has no Python form here")

    def atom(self, atom: Any, names: dict[Any, str]) -> str:
        """A variable's Python name, or a literal's value as typed NumPy text."""
        if isinstance(atom, jaxcompat.Literal):
            value = np.asarray(atom.val)
            dtype = np.dtype(atom.aval.dtype)
            if value.ndim == 0:
                return f"{_dtype_expr(dtype)}({_scalar(value, dtype)})"
            return array_expr(value.astype(dtype))
        return names[atom]

    def function(self, closed: jaxcompat.ClosedJaxpr | jaxcompat.Jaxpr, name: str,
                 indent: str = "") -> None:
        """Print ``def name(*invars): ...; return [outvars]`` (constvars as module constants)."""
        closed = jaxcompat.as_closed(closed)
        jaxpr, consts = closed.jaxpr, closed.consts
        names: dict[Any, str] = {}
        for var, value in zip(jaxpr.constvars, consts):
            names[var] = self.constant(np.asarray(value))
        args = []
        for var in jaxpr.invars:
            names[var] = self.fresh("x")
            args.append(names[var])
        body: list[str] = []
        for eqn in jaxpr.eqns:
            body.extend(self.equation(eqn, names))
        outs = ", ".join(self.atom(v, names) for v in jaxpr.outvars)
        self.lines.append(f"{indent}def {name}({', '.join(args)}):")
        self.lines.extend(f"{indent}    {line}" for line in body)
        self.lines.append(f"{indent}    return [{outs}]")
        self.lines.append("")

    def equation(self, eqn: jaxcompat.JaxprEqn, names: dict[Any, str]) -> list[str]:
        """Lines computing one equation; binds its outvars in `names`."""
        args = [self.atom(a, names) for a in eqn.invars]
        outs = []
        for var in eqn.outvars:
            outs.append("_" if isinstance(var, jaxcompat.DropVar) else self.fresh("v"))
            if not isinstance(var, jaxcompat.DropVar):
                names[var] = outs[-1]
        single = len(outs) == 1 and eqn.primitive.multiple_results
        target = ", ".join(outs) + ("," if single else "")
        name = eqn.primitive.name
        params = dict(eqn.params)
        if name == "while":
            return self._while(eqn, args, target)
        if name == "scan":
            return self._scan(eqn, args, target)
        if name == "cond":
            return self._cond(eqn, args, target)
        if name in _SCATTERS:
            if params.get("update_consts"):
                raise Unprintable(f"{name} with update constants")
            dims = self.param(params["dimension_numbers"])
            return [f"{target} = lax.{_SCATTERS[name]}({', '.join(args)}, {dims}, "
                    f"indices_are_sorted={params['indices_are_sorted']!r}, "
                    f"unique_indices={params['unique_indices']!r}, "
                    f"mode={self.param(params['mode'])})"]
        if any(jaxcompat.is_jaxpr(v) for v in params.values()):
            raise Unprintable(f"primitive '{name}' carries a jaxpr parameter")
        # lax.<wrapper>(*operands) binds exactly the primitive when it carries no parameters
        wrapper = primitives.facts(name).wrapper
        if wrapper and all(k == "accuracy" and v is None for k, v in params.items()):
            return [f"{target} = lax.{wrapper}({', '.join(args)})"]
        keywords = "".join(f", {k}={self.param(v)}" for k, v in params.items())
        return [f"{target} = {self.primitive(eqn.primitive)}.bind({', '.join(args)}{keywords})"]

    def _while(self, eqn: jaxcompat.JaxprEqn, args: list[str], target: str) -> list[str]:
        p = eqn.params
        cond, body = self.fresh("cond"), self.fresh("body")
        self.function(p["cond_jaxpr"], cond)
        self.function(p["body_jaxpr"], body)
        nc, nb = p["cond_nconsts"], p["body_nconsts"]
        cconsts, bconsts, init = args[:nc], args[nc:nc + nb], args[nc + nb:]
        pre = "".join(f"{c}, " for c in cconsts)
        bpre = "".join(f"{c}, " for c in bconsts)
        return [f"{target} = lax.while_loop(lambda c: {cond}({pre}*c)[0], "
                f"lambda c: tuple({body}({bpre}*c)), ({', '.join(init)},))"]

    def _scan(self, eqn: jaxcompat.JaxprEqn, args: list[str], target: str) -> list[str]:
        p = eqn.params
        fn = self.fresh("step")
        self.function(p["jaxpr"], fn)
        nconsts, ncarry = jaxcompat.scan_layout(p)
        consts, carry, xs = args[:nconsts], args[nconsts:nconsts + ncarry], args[nconsts + ncarry:]
        pre = "".join(f"{c}, " for c in consts)
        wrapper = self.fresh("scan_body")
        result = self.fresh("scanned")
        return [f"def {wrapper}(c, x):",
                f"    out = {fn}({pre}*c, *x)",
                f"    return tuple(out[:{ncarry}]), tuple(out[{ncarry}:])",
                f"{result} = lax.scan({wrapper}, ({', '.join(carry)}{',' if carry else ''}), "
                f"({', '.join(xs)}{',' if xs else ''}), length={p['length']}, "
                f"reverse={p['reverse']!r}, unroll={p['unroll']!r})",
                f"{target} = [*{result}[0], *{result}[1]]"]

    def _cond(self, eqn: jaxcompat.JaxprEqn, args: list[str], target: str) -> list[str]:
        branches = []
        for branch in eqn.params["branches"]:
            fn = self.fresh("branch")
            self.function(branch, fn)
            branches.append(fn)
        index, operands = args[0], args[1:]
        return [f"{target} = lax.switch({index}, [{', '.join(branches)}]"
                + "".join(f", {a}" for a in operands) + ")"]


def _tolerances(reference: Sequence[np.ndarray], honest: Sequence[Sequence[np.ndarray]],
                outputs: Sequence[Any]) -> list[tuple[float, float]]:
    """(atol, rtol) per output: the oracle's dtype bounds, atol widened to `BUDGET_FACTOR` times
    the largest honest error of the leaf."""
    from xlaprobe.oracle import BUDGET_FACTOR, DEFAULT_BOUNDS
    bounds = []
    for i, (ref, var) in enumerate(zip(reference, outputs)):
        dtype = np.dtype(var.aval.dtype)
        if not (np.issubdtype(dtype, np.floating) or dtype == np.dtype(ml_dtypes.bfloat16)):
            bounds.append((0.0, 0.0))
            continue
        atol, rtol, _ = DEFAULT_BOUNDS.get(dtype.name, DEFAULT_BOUNDS["float32"])
        ref64 = np.asarray(ref, np.float64)
        worst = 0.0
        for run in honest:
            with np.errstate(invalid="ignore"):
                err = np.abs(np.asarray(run[i], np.float64) - ref64)
            err = err[np.isfinite(err)]
            if err.size:
                worst = max(worst, float(err.max()))
        bounds.append((max(atol, BUDGET_FACTOR * worst), rtol))
    return bounds


def _header(program: Program, config: str, options: dict[str, Any], mutant: str,
            note: str) -> list[str]:
    x64 = any(np.dtype(v.aval.dtype).itemsize == 8 and np.dtype(v.aval.dtype).kind in "fiuc"
              for v in program.jaxpr.jaxpr.invars + program.jaxpr.jaxpr.outvars
              if hasattr(v, "aval"))
    lines = [
        '"""Reproducer written by xlaprobe reduce. Needs only jax (and numpy).',
        "",
        f"Program: {program.provenance.name} reduced to {len(program.jaxpr.jaxpr.eqns)} "
        f"equation(s); configuration {config}.",
        "Compiles `program` with the configuration's XLA compiler options, runs it on the inputs",
        "below and compares each output with its float64 reference (computed without XLA).",
        "Prints MISMATCH and exits 1 when the fault shows; exits 0 otherwise.",
    ]
    if note:
        lines += ["", note]
    lines += ['"""', "import base64", "import sys", "", "import jax", "import jax.numpy as jnp",
              "import numpy as np", "from jax import lax", "",
              "nan, inf = float('nan'), float('inf')"]
    if x64:
        lines.append('jax.config.update("jax_enable_x64", True)')
    lines += ["", f"CONFIGURATION = {config!r}", f"OPTIONS = {options!r}"]
    if mutant:
        lines += ["# A planted fault (xlaprobe mutant): registering its HLO pass needs xlaprobe.",
                  "from xlaprobe.configs import mutants as _mutants",
                  f"_mutants.KIND._register(_mutants.get_mutant({mutant!r}))"]
    return lines


_MAIN = '''

def main():
    compiled = jax.jit(program).lower(*INPUTS).compile(compiler_options=OPTIONS or None)
    outputs = [np.asarray(x) for x in jax.tree_util.tree_leaves(compiled(*INPUTS))]
    print("jax %s, configuration %s, options %s" % (jax.__version__, CONFIGURATION, OPTIONS))
    failed = 0
    for k, (out, ref, (atol, rtol)) in enumerate(zip(outputs, EXPECTED, TOLERANCE)):
        if out.dtype.kind in "biu":
            bad = out.astype(np.float64) != np.asarray(ref, np.float64)
        else:
            o, r = out.astype(np.float64), np.asarray(ref, np.float64)
            with np.errstate(invalid="ignore"):
                err = np.abs(o - r)
                bad = (err > atol) & (err > rtol * np.abs(r))
            bad |= np.isnan(o) != np.isnan(r)
            bad |= np.isinf(o) & np.isfinite(r) | np.isinf(r) & np.isfinite(o)
            bad &= ~((o == 0) & (np.abs(r) < np.finfo(out.dtype).tiny))  # flush to zero: legal
        if bad.any():
            failed += 1
            index = int(np.argmax(bad.ravel()))
            print("MISMATCH output %d: %d of %d elements; first at flat index %d: got %r, "
                  "expected %r" % (k, int(bad.sum()), bad.size, index, out.ravel()[index],
                                   np.asarray(ref).ravel()[index]))
        else:
            print("ok       output %d" % k)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
'''


def _data(program: Program, reference: Sequence[np.ndarray],
          honest: Sequence[Sequence[np.ndarray]]) -> list[str]:
    outvars = program.jaxpr.jaxpr.outvars
    lines = ["", "INPUTS = ["]
    lines += [f"    {array_expr(x)}," for x in program.inputs]
    lines += ["]", "# float64 reference outputs (integers and booleans exact)", "EXPECTED = ["]
    for ref, var in zip(reference, outvars):
        dtype = np.dtype(var.aval.dtype)
        floating = np.issubdtype(dtype, np.floating) or dtype == np.dtype(ml_dtypes.bfloat16)
        ref = np.asarray(ref, np.float64) if floating else np.asarray(ref).astype(dtype)
        lines.append(f"    {array_expr(ref)},")
    bounds = [(float(a), float(r)) for a, r in _tolerances(reference, honest, outvars)]
    lines += ["]", "# (atol, rtol) per output: the oracle's bounds widened by the honest "
              "float error", f"TOLERANCE = {bounds!r}"]
    return lines


def emit_repro(program: Program, config: str, options: dict[str, Any],
               reference: Sequence[np.ndarray], honest: Sequence[Sequence[np.ndarray]] = (), *,
               mutant: str = "") -> str:
    """The text of a standalone ``repro.py`` running `program` as plain jax/lax code.

    Args:
        program: a (reduced) Program; its jaxpr is printed as the function ``program``.
        config: the faulty configuration spec (shown).
        options: its typed XLA compiler options (``xla.compiler_options``).
        reference: float64 reference outputs, one per output (dtype of the output for integers).
        honest: honest runs' outputs (``reference:native``, Monte Carlo samples) that widen the
            float tolerance as the oracle's budget does; empty: the dtype bounds alone.
        mutant: a planted-fault mutant name; the script then registers its pass (needs xlaprobe).

    Returns:
        Python source text.

    Raises:
        Unprintable: a primitive or parameter has no Python form here (use `emit_export_repro`).
    """
    printer = _Printer()
    printer.function(program.jaxpr, "program")
    code = printer.lines
    header = _header(program, config, options, mutant, "")
    return "\n".join(header + [""] + printer.constants + ["", ""] + code
                     + _data(program, reference, honest)) + "\n" + _MAIN


def emit_export_repro(program: Program, config: str, options: dict[str, Any],
                      reference: Sequence[np.ndarray], honest: Sequence[Sequence[np.ndarray]] = (),
                      *, mutant: str = "") -> str:
    """Like `emit_repro`, but the program is the ``jax.export`` serialization of `program`
    (base64 inline): for programs `emit_repro` cannot print.

    Raises:
        Exception: whatever ``jax.export`` raises on a program it cannot serialize.
    """
    from xlaprobe.artifact import export_module
    blob = base64.b64encode(export_module(program)).decode()
    note = ("The program is inline as a jax.export module: it holds an operation xlaprobe "
            "cannot print as lax code.")
    header = _header(program, config, options, mutant, note)
    code = ["from jax import export", "",
            f"_EXPORTED = export.deserialize(bytearray(base64.b64decode('{blob}')))", "",
            "def program(*args):", "    return _EXPORTED.call(*args)", ""]
    return "\n".join(header + [""] + code + _data(program, reference, honest)) + "\n" + _MAIN


def count_lines(source: str) -> int:
    """Non-empty, non-comment lines of `source` (a size figure for reports)."""
    return sum(1 for line in source.splitlines()
               if line.strip() and not line.strip().startswith("#"))


__all__ = ["LITERAL_ELEMENTS", "Unprintable", "array_expr", "count_lines", "emit_export_repro",
           "emit_repro"]
