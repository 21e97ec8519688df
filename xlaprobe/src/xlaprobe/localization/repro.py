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
import re
from collections.abc import Callable, Sequence
from typing import Any

import ml_dtypes
import numpy as np
from jax import lax
from xlaprobe import jaxcompat, primitives

from xlaprobe.allowance import REPRO_JUDGE
from xlaprobe.artifact import CRASH_ENTRY
from xlaprobe.oracle import BUDGET_FACTOR, DEFAULT_BOUNDS
from xlaprobe.lax_rules.control import scan_layout
from xlaprobe.program import Program, export_module

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
        self.lines: list[str] = []
        self.constants: list[str] = []
        self.counter = 0
        #: primitives printed as ``lax.<name>_p.bind``: no public function binds them exactly
        self.bound: set[str] = set()
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
        if value is None or (isinstance(value, (bool, int, str))
                             and not isinstance(value, enum.Enum)):  # IntEnum: printed below
            return repr(value)
        if isinstance(value, float):
            return _scalar(value, np.dtype(np.float64))
        if isinstance(value, np.dtype) or (isinstance(value, type)
                                           and issubclass(value, np.generic)):
            return f"np.dtype({_dtype_expr(value)})"
        if isinstance(value, jaxcompat.Primitive):
            return self.primitive(value)
        if isinstance(value, enum.Enum):
            if getattr(lax, type(value).__name__, None) is type(value):
                return f"lax.{type(value).__name__}.{value.name}"
            raise Unprintable(f"parameter value {value!r} has no public type in jax.lax")
        if isinstance(value, tuple) and hasattr(value, "_fields"):
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
        target = ", ".join(outs) + ("," if single else "") or "_"  # "_": no outputs at all
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
        # Parameters a public function sets to None itself: a None there says nothing.
        params = {k: v for k, v in params.items() if not (k in _DEFAULT_NONE and v is None)}
        if name == "reduce_window":
            return [f"{target} = {self._reduce_window(eqn, args)}"]
        if any(jaxcompat.is_jaxpr(v) for v in params.values()):
            raise Unprintable(f"primitive '{name}' carries a jaxpr parameter")
        # lax.<wrapper>(*operands) binds exactly the primitive when it carries no parameters
        wrapper = primitives.facts(name).wrapper
        if wrapper and not params:
            return [f"{target} = lax.{wrapper}({', '.join(args)})"]
        public = _PUBLIC.get(name)
        if public is not None:
            operand = eqn.invars[0].aval if eqn.invars else None
            text = public(self, args, params, operand)
            if text is not None:
                return [f"{target} = {text}"]
        self.bound.add(name)
        keywords = "".join(f", {k}={self.param(v)}" for k, v in params.items())
        return [f"{target} = {self.primitive(eqn.primitive)}.bind({', '.join(args)}{keywords})"]

    def _reduce_window(self, eqn: jaxcompat.JaxprEqn, args: list[str]) -> str:
        """``lax.reduce_window`` with the combiner printed as a function (a traced combiner is
        no monoid lax recognizes, so it binds the generic primitive again)."""
        p = eqn.params
        if p.get("consts"):
            raise Unprintable("reduce_window with combiner constants")
        n = len(args) // 2
        fn = self.fresh("combine")
        self.function(p["jaxpr"], fn)
        operands, inits = args[:n], args[n:]
        if n == 1:
            combine, ops, init = f"lambda a, b: {fn}(a, b)[0]", operands[0], inits[0]
        else:
            combine = f"lambda a, b: tuple({fn}(*a, *b))"
            ops, init = f"({', '.join(operands)})", f"({', '.join(inits)})"
        call = (f"lax.reduce_window({ops}, {init}, {combine}, {self.param(p['window_dimensions'])}, "
                f"{self.param(p['window_strides'])}, {self.param(p['padding'])}, "
                f"{self.param(p['base_dilation'])}, {self.param(p['window_dilation'])})")
        return f"[{call}]" if n == 1 else call

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
        nconsts, ncarry = scan_layout(p)
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

#: Parameters that public functions bind as None when not asked for (dropped when None).
_DEFAULT_NONE = frozenset({"accuracy", "out_dtype", "out_sharding", "sharding", "fill_value",
                           "precision", "preferred_element_type"})

#: ``(printer, operand names, parameters, first operand's aval) -> call text`` (None: no public
#: spelling for these parameters): the public ``jax.lax`` / ``jax.random`` call that binds exactly
#: the primitive with these parameters. Parameters equal to None and in `_DEFAULT_NONE` are gone.
_Public = Callable[["_Printer", list[str], dict[str, Any], Any], str | None]


def _keywords(printer: _Printer, params: dict[str, Any], *names: str) -> str:
    return "".join(f", {n}={printer.param(params[n])}" for n in names if n in params)


def _only(params: dict[str, Any], *names: str) -> bool:
    """No parameter outside `names` (one the public call could not pass on)."""
    return set(params) <= set(names)


def _window_identity(name: str, aval: Any) -> str:
    """The init value `lax.reduce_window` recognizes as the monoid of `name`'s primitive."""
    dtype = np.dtype(aval.dtype)
    floating = dtype.kind == "f" or dtype.type.__module__.startswith("ml_dtypes")
    if name == "reduce_window_sum":
        value: Any = False if dtype == np.bool_ else 0
    elif dtype == np.bool_:
        value = name == "reduce_window_min"
    elif floating:
        value = -np.inf if name == "reduce_window_max" else np.inf
    else:
        info = np.iinfo(dtype)
        value = info.min if name == "reduce_window_max" else info.max
    return f"{_dtype_expr(dtype)}({_scalar(value, dtype)})"


def _window(name: str) -> _Public:
    monoid = {"reduce_window_sum": "add", "reduce_window_max": "max", "reduce_window_min": "min"}

    def text(pr: _Printer, a: list[str], k: dict[str, Any], aval: Any) -> str:
        return (f"lax.reduce_window({a[0]}, {_window_identity(name, aval)}, lax.{monoid[name]}, "
                f"{pr.param(k['window_dimensions'])}, {pr.param(k['window_strides'])}, "
                f"{pr.param(k['padding'])}, {pr.param(k['base_dilation'])}, "
                f"{pr.param(k['window_dilation'])})")
    return text


def _call(fn: str, positional: Sequence[str] = (), keywords: Sequence[str] = (), *,
          operands: str = "each") -> _Public:
    """``fn(<operands>, <positional params>, <keyword params>)``; None when the equation holds
    another parameter. `operands`: ``each`` (one argument per operand) or ``list`` (one list)."""
    def text(pr: _Printer, a: list[str], k: dict[str, Any], aval: Any) -> str | None:
        if not _only(k, *positional, *keywords):
            return None
        head = [f"[{', '.join(a)}]"] if operands == "list" else list(a)
        head += [pr.param(k[n]) for n in positional]
        return f"{fn}({', '.join(head)}{_keywords(pr, k, *keywords)})"
    return text


def _argext(fn: str) -> _Public:
    def text(pr: _Printer, a: list[str], k: dict[str, Any], aval: Any) -> str | None:
        if not _only(k, "axes", "index_dtype") or len(k["axes"]) != 1:
            return None
        return f"lax.{fn}({a[0]}, {k['axes'][0]}, {pr.param(k['index_dtype'])})"
    return text


def _starts(fn: str, leading: int) -> _Public:
    """dynamic_slice / dynamic_update_slice: the start indices are one list argument."""
    def text(pr: _Printer, a: list[str], k: dict[str, Any], aval: Any) -> str | None:
        if not _only(k, "slice_sizes"):
            return None
        sizes = f", {pr.param(k['slice_sizes'])}" if "slice_sizes" in k else ""
        return f"lax.{fn}({', '.join(a[:leading])}, [{', '.join(a[leading:])}]{sizes})"
    return text


def _random_wrap(pr: _Printer, a: list[str], k: dict[str, Any], aval: Any) -> str | None:
    name = getattr(k.get("impl"), "name", None)
    if not _only(k, "impl") or not isinstance(name, str):
        return None
    return f"jax.random.wrap_key_data({a[0]}, impl={name!r})"


def _random_bits(pr: _Printer, a: list[str], k: dict[str, Any], aval: Any) -> str | None:
    if not _only(k, "bit_width", "shape"):
        return None
    return f"jax.random.bits({a[0]}, {pr.param(k['shape'])}, np.uint{k['bit_width']})"


def _reshape(pr: _Printer, a: list[str], k: dict[str, Any], aval: Any) -> str | None:
    if not _only(k, "new_sizes", "dimensions") or k.get("dimensions") is not None:
        return None
    return f"lax.reshape({a[0]}, {pr.param(k['new_sizes'])})"


def _convert(pr: _Printer, a: list[str], k: dict[str, Any], aval: Any) -> str | None:
    # weak_type changes only how later Python-scalar arithmetic promotes; every later line
    # names its dtypes, so the values are the same either way.
    if not _only(k, "new_dtype", "weak_type"):
        return None
    return f"lax.convert_element_type({a[0]}, {pr.param(k['new_dtype'])})"


_PUBLIC: dict[str, _Public] = {
    "argmax": _argext("argmax"),
    "argmin": _argext("argmin"),
    "bitcast_convert_type": _call("lax.bitcast_convert_type", ["new_dtype"]),
    "broadcast_in_dim": _call("lax.broadcast_in_dim", ["shape", "broadcast_dimensions"]),
    "concatenate": _call("lax.concatenate", ["dimension"], operands="list"),
    "conv_general_dilated": _call(
        "lax.conv_general_dilated", ["window_strides", "padding", "lhs_dilation", "rhs_dilation",
                                     "dimension_numbers", "feature_group_count",
                                     "batch_group_count"],
        ["precision", "preferred_element_type"]),
    "convert_element_type": _convert,
    **{name: _call(f"lax.{name}", (), ["axis", "reverse"])
       for name in ("cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp")},
    "dot_general": _call("lax.dot_general", ["dimension_numbers"],
                         ["precision", "preferred_element_type"]),
    "dynamic_slice": _starts("dynamic_slice", 1),
    "dynamic_update_slice": _starts("dynamic_update_slice", 2),
    "gather": _call("lax.gather", ["dimension_numbers", "slice_sizes"],
                    ["unique_indices", "indices_are_sorted", "mode", "fill_value"]),
    "integer_pow": _call("lax.integer_pow", ["y"]),
    "iota": lambda pr, a, k, aval: (f"lax.broadcasted_iota({pr.param(k['dtype'])}, "
                                    f"{pr.param(k['shape'])}, {k['dimension']})"
                                    if _only(k, "dtype", "shape", "dimension") else None),
    "pad": _call("lax.pad", ["padding_config"]),
    "random_bits": _random_bits,
    "random_wrap": _random_wrap,
    **{name: _call(f"lax.{name}", ["axes"])
       for name in ("reduce_sum", "reduce_prod", "reduce_max", "reduce_min", "reduce_and",
                    "reduce_or", "reduce_xor")},
    "reduce_precision": _call("lax.reduce_precision", (), ["exponent_bits", "mantissa_bits"]),
    **{name: _window(name) for name in ("reduce_window_sum", "reduce_window_max",
                                        "reduce_window_min")},
    "reshape": _reshape,
    "rev": _call("lax.rev", ["dimensions"]),
    "round": _call("lax.round", ["rounding_method"]),
    "slice": _call("lax.slice", ["start_indices", "limit_indices", "strides"]),
    "sort": _call("lax.sort", (), ["dimension", "is_stable", "num_keys"], operands="list"),
    "split": _call("lax.split", ["sizes"], ["axis"]),
    "squeeze": _call("lax.squeeze", ["dimensions"]),
    "top_k": _call("lax.top_k", ["k"], ["axis", "is_stable"]),
    "transpose": _call("lax.transpose", ["permutation"]),
}


def tolerances(reference: Sequence[np.ndarray], honest: Sequence[Sequence[np.ndarray]],
                outputs: Sequence[Any]) -> list[tuple[float, float]]:
    """(atol, rtol) per output: the oracle's dtype bounds, atol widened to `BUDGET_FACTOR` times
    the largest honest error of the leaf; (0, 0) for integer and boolean outputs.

    Args:
        reference: float64 reference outputs.
        honest: honest runs' outputs (reference:native, Monte Carlo samples); may be empty.
        outputs: the jaxpr's outvars (their dtypes choose the bounds).
    """
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


def _uses(body: str, name: str) -> bool:
    """`body` refers to the bare name `name` (not an attribute ``np.name``, not inside a word)."""
    return re.search(rf"(?<![\w.]){name}\b", body) is not None


def _header(program: Program, config: str, options: dict[str, Any], mutant: str,
            note: str, body: str, *, eager: bool = False, bound: Sequence[str] = ()) -> list[str]:
    """The docstring, imports (only those `body` uses) and settings of a repro.py."""
    x64 = any(np.dtype(v.aval.dtype).itemsize == 8 and np.dtype(v.aval.dtype).kind in "fiuc"
              for v in program.jaxpr.jaxpr.invars + program.jaxpr.jaxpr.outvars
              if hasattr(v, "aval"))
    needs = ("Needs jax, numpy and xlaprobe (it installs xlaprobe's planted mutant "
             f"'{mutant}', an HLO pass, into XLA)." if mutant else "Needs only jax (and numpy).")
    how = (["Runs `program` op by op under jax.disable_jit(), as xlaprobe's eager configuration does:",
            "each lax call is its own XLA computation (a jit compile of the whole program may drop",
            "or fuse the op that fails). Compares each output with its float64 reference."]
           if eager else
           ["Compiles `program` with the configuration's XLA compiler options, runs it on the inputs",
            "below and compares each output with its float64 reference (computed without XLA)."])
    lines = [
        f'"""Reproducer written by xlaprobe. {needs}',
        "",
        f"Program: {program.provenance.name}, {len(program.jaxpr.jaxpr.eqns)} equation(s); "
        f"configuration {config}.",
        *how,
        "Prints MISMATCH (CRASH when the process dies) and exits 1 when the fault shows; exits 0",
        "otherwise.",
    ]
    if note:
        lines += ["", note]
    lines += ['"""'] + ["import base64"] * _uses(body, "base64") + ["import sys", "", "import jax"]
    lines += ["import jax.numpy as jnp"] * _uses(body, "jnp") + ["import numpy as np"]
    lines += ["from jax import lax"] * _uses(body, "lax")
    specials = [n for n in ("nan", "inf") if _uses(body, n)]
    if specials:
        lines += ["", f"{', '.join(specials)} = {', '.join(f'float({n!r})' for n in specials)}"]
    if x64:
        lines.append('jax.config.update("jax_enable_x64", True)')
    if bound:
        lines += ["", f"# {', '.join(sorted(bound))}: no public jax function binds "
                      f"{'this primitive' if len(bound) == 1 else 'these primitives'} with these "
                      "parameters, so the program", "# binds it directly (lax.<name>_p.bind), "
                      "which may change between JAX releases."]
    lines += ["", f"CONFIGURATION = {config!r}", f"OPTIONS = {options!r}"]
    if mutant:
        lines += ["# The planted fault: xlaprobe's mutant pass, registered into XLA for every "
                  "compile of this process.",
                  "from xlaprobe.configs.mutants import install  # noqa: E402",
                  f"install({mutant!r})"]
    return lines


_MAIN = '''

def main():
RUN
    print("jax %s, configuration %s, options %s" % (jax.__version__, CONFIGURATION, OPTIONS))
    failed = 0
    allowance = ALLOWANCE
    for k, (out, ref, (atol, rtol)) in enumerate(zip(outputs, EXPECTED, TOLERANCE)):
        if out.dtype.kind in "biu":
            bad = out.astype(np.float64) != np.asarray(ref, np.float64)
        elif "allowed_%d" % k in allowance:  # the check's per-element allowance, beside this file
            bad = judged_as_the_check(out, ref, leaf_allowance(allowance, k))
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
                  "expected %r" % (k, int(bad.sum()), bad.size, index, out.ravel()[index].item(),
                                   np.asarray(ref).ravel()[index].item()))
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
    bounds = [(float(a), float(r)) for a, r in tolerances(reference, honest, outvars)]
    lines += ["]", "# (atol, rtol) per output: the oracle's bounds widened by the honest "
              "float error", f"TOLERANCE = {bounds!r}"]
    return lines


def emit_repro(program: Program, config: str, options: dict[str, Any],
               reference: Sequence[np.ndarray], honest: Sequence[Sequence[np.ndarray]] = (), *,
               mutant: str = "", eager: bool = False, crash: bool = False,
               allowance: bool = False) -> str:
    """The text of a standalone ``repro.py`` running `program` as plain jax/lax code.

    Every equation is a call of a public function (``lax.mul``, ``lax.dot_general``,
    ``lax.while_loop``, ``jax.random.bits``); a primitive no public function binds exactly with its
    parameters falls back to ``lax.<name>_p.bind`` and a comment at the top names it. Only the
    modules the code uses are imported.

    Args:
        program: a (reduced) Program; its jaxpr is printed as the function ``program``.
        config: the faulty configuration spec (shown).
        options: its typed XLA compiler options (``xla.compiler_options``).
        reference: float64 reference outputs, one per output (dtype of the output for integers).
        honest: honest runs' outputs (``reference:native``, Monte Carlo samples) that widen the
            float tolerance as the oracle's budget does; empty: the dtype bounds alone.
        mutant: a planted-fault mutant name; the script then installs its pass (needs xlaprobe).
        eager: run the program op by op (``jax.disable_jit``), as the ``eager`` configuration
            does, instead of compiling it whole with ``jax.jit``.
        crash: the fault kills the process: run it in a child, a death being exit 1.
        allowance: judge float outputs by the ``allowance.npz`` stored beside the script (a
            finding's artifact: `xlaprobe.allowance`) where there is one, as the check did.

    Returns:
        Python source text.

    Raises:
        Unprintable: a primitive or parameter has no Python form here (use `emit_export_repro`).
    """
    printer = _Printer()
    printer.function(program.jaxpr, "program")
    constants = ["", *printer.constants] if printer.constants else []
    body = "\n".join(constants + ["", ""] + printer.lines
                      + _data(program, reference, honest)) + "\n" + _main(eager, crash, allowance)
    header = _header(program, config, options, mutant, "", body, eager=eager,
                     bound=sorted(printer.bound))
    return "\n".join(header) + "\n" + body


def emit_export_repro(program: Program, config: str, options: dict[str, Any],
                      reference: Sequence[np.ndarray], honest: Sequence[Sequence[np.ndarray]] = (),
                      *, mutant: str = "", eager: bool = False, crash: bool = False) -> str:
    """Like `emit_repro`, but the program is the ``jax.export`` serialization of `program`
    (base64 inline): for programs `emit_repro` cannot print. With `eager` the module still runs
    as one compiled computation (a serialized module has no ops to dispatch one by one).

    Raises:
        Exception: whatever ``jax.export`` raises on a program it cannot serialize.
    """
    blob = base64.b64encode(export_module(program)).decode()
    note = ("The program is inline as a jax.export module: it holds an operation xlaprobe "
            "cannot print as lax code.")
    if eager:
        note += (" The module runs as one computation, not op by op as the eager configuration "
                 "ran it, so a fault of a single op run alone may not show.")
    code = ["from jax import export", "",
            f"_EXPORTED = export.deserialize(bytearray(base64.b64decode('{blob}')))", "",
            "def program(*args):", "    return _EXPORTED.call(*args)", ""]
    body = "\n".join([""] + code + _data(program, reference, honest)) + "\n" + _main(False, crash)
    header = _header(program, config, options, mutant, note, body)
    return "\n".join(header) + "\n" + body


#: The script's run of the program compiled whole (`xlaprobe.localization.spmd_repro` replaces
#: it with a partitioned run).
RUN_JIT = """\
    compiled = jax.jit(program).lower(*INPUTS).compile(compiler_options=OPTIONS or None)
    outputs = [np.asarray(x) for x in jax.tree_util.tree_leaves(compiled(*INPUTS))]
"""
_RUN_EAGER = """\
    with jax.disable_jit():  # op by op: no whole-program compile to drop or fuse the faulty op
        outputs = [np.asarray(x) for x in jax.tree_util.tree_leaves(program(*INPUTS))]
"""


_ENTRY = """if __name__ == "__main__":
    sys.exit(main())
"""


def _main(eager: bool, crash: bool = False, allowance: bool = False) -> str:
    """The script's ``main`` and entry point, running the program jitted or op by op; with
    `crash`, in a child process (`CRASH_ENTRY`); with `allowance`, judging by the check's
    ``allowance.npz`` beside the script where there is one."""
    text = _MAIN.replace("RUN\n", _RUN_EAGER if eager else RUN_JIT)
    if allowance:
        text = REPRO_JUDGE + text.replace("ALLOWANCE", "load_allowance(__file__)")
    else:
        text = text.replace("ALLOWANCE", "{}")
    return text.replace(_ENTRY, CRASH_ENTRY) if crash else text


def count_lines(source: str) -> int:
    """Non-empty, non-comment lines of `source` (a size figure for reports)."""
    return sum(1 for line in source.splitlines()
               if line.strip() and not line.strip().startswith("#"))


__all__ = ["LITERAL_ELEMENTS", "Unprintable", "array_expr", "count_lines",
           "emit_export_repro", "emit_repro", "tolerances"]
