"""Jaxpr plumbing shared by every interpreter: one evaluation loop, canonical form, serialization.

A Program's jaxpr is kept in *canonical form*: call-like wrappers whose forward semantics is just
"evaluate the inner jaxpr" (jit, custom_jvp_call, custom_vjp_call, checkpoint, closed_call: those
`primitives.PrimitiveFacts.inlined` marks) are inlined, and control flow (while, scan, cond) and the
call-like primitives canonical form keeps (composite) keep canonical inner jaxprs. Canonical jaxprs
hold no Python callables, so they pickle (with primitives pickled by reference) and travel to
worker processes. The pickle is for xlaprobe's own processes only: artifacts, which are shared,
hold the data-only form of `xlaprobe.jaxpr_json` instead.
"""

from __future__ import annotations

import functools
import importlib
import io
import pickle
import types
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy  # noqa: F401  (registers the lax primitives)
import numpy as np
from xlaprobe import jaxcompat, primitives

from xlaprobe.errors import CorruptArtifact, InvalidArgument

ClosedJaxpr = jaxcompat.ClosedJaxpr
Jaxpr = jaxcompat.Jaxpr
JaxprEqn = jaxcompat.JaxprEqn


def eval_jaxpr_with(jaxpr: Jaxpr, consts: Sequence[Any], args: Sequence[Any],
                    apply_eqn: Callable[[JaxprEqn, list[Any]], Sequence[Any]]) -> list[Any]:
    """Evaluate `jaxpr` equation by equation, each through `apply_eqn(eqn, input_values)`.

    This is the read-apply-write loop of `jax.core.eval_jaxpr`, with the per-equation semantics
    handed in, so the eager, reference and canonicalizing interpreters share it.

    Args:
        jaxpr: an open jaxpr with ``len(consts)`` constvars and ``len(args)`` invars.
        consts: values for the constvars.
        args: values for the invars.
        apply_eqn: returns the equation's outputs, one value per outvar.

    Returns:
        One value per outvar of `jaxpr`. Literals are returned as their value.
    """
    env: dict[jaxcompat.Var, Any] = {}

    def read(atom: Any) -> Any:
        return atom.val if isinstance(atom, jaxcompat.Literal) else env[atom]

    def write(var: Any, value: Any) -> None:
        if not isinstance(var, jaxcompat.DropVar):
            env[var] = value

    for var, value in zip(jaxpr.constvars, consts, strict=True):
        write(var, value)
    for var, value in zip(jaxpr.invars, args, strict=True):
        write(var, value)
    for eqn in jaxpr.eqns:
        outs = apply_eqn(eqn, [read(v) for v in eqn.invars])
        if not eqn.primitive.multiple_results:
            outs = [outs] if not isinstance(outs, (list, tuple)) or len(eqn.outvars) != 1 else outs
        for var, value in zip(eqn.outvars, outs, strict=True):
            write(var, value)
    return [read(v) for v in jaxpr.outvars]


def _canonical_params(params: dict[str, Any]) -> dict[str, Any]:
    def convert(value: Any) -> Any:
        if isinstance(value, jaxcompat.ClosedJaxpr):
            return canonicalize(value)
        if (isinstance(value, tuple) and value
                and all(isinstance(v, jaxcompat.ClosedJaxpr) for v in value)):
            converted = [canonicalize(v) for v in value]
            # Keep named tuples (custom_linear_solve's `jaxprs`) as their own type.
            return type(value)(*converted) if hasattr(value, "_fields") else tuple(converted)
        return value

    return {k: convert(v) for k, v in params.items()}


def _inline_eqn(eqn: JaxprEqn, invals: list[Any]) -> Sequence[Any]:
    name = eqn.primitive.name
    if name == "call_hi_primitive":  # jax >= 0.11 "hijax" ops (searchsorted in expm): expand
        specs = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in eqn.invars]
        inner = jax.make_jaxpr(lambda *args: jaxcompat.expand_hi_primitive(eqn, args))(*specs)
        return eval_jaxpr_with(inner.jaxpr, inner.consts, invals, _inline_eqn)
    if primitives.facts(name).inlined:
        inner = primitives.call_jaxpr(eqn)
        return eval_jaxpr_with(inner.jaxpr, inner.consts, invals, _inline_eqn)
    # A shard_map body binds its mesh axes: re-tracing its inner jaxprs outside it would find
    # them unbound, so it stays as traced.
    params = eqn.params if name == "shard_map" else _canonical_params(eqn.params)
    return bind_eqn(eqn, invals, params)


def bind_eqn(eqn: JaxprEqn, invals: Sequence[Any], params: dict[str, Any] | None = None) -> Any:
    """Bind `eqn`'s primitive on `invals` with `params` (default: its own), as jax's own
    interpreter does: a primitive whose equation holds a jaxpr its bind takes as a function
    (``shard_map``) gets it back that way (``get_bind_params``).

    Returns:
        The primitive's result (a list when it has multiple results).
    """
    params = eqn.params if params is None else params
    bound = eqn.primitive.get_bind_params(params)
    if isinstance(bound, tuple):  # jax before 0.7: (subfuns, params)
        subfuns, bound = bound
        return eqn.primitive.bind(*subfuns, *invals, **bound)
    return eqn.primitive.bind(*invals, **bound)


def canonicalize(closed: ClosedJaxpr) -> ClosedJaxpr:
    """Re-trace `closed` with call-like equations inlined, recursively (see module docstring).

    The result computes the same function with the same primitives otherwise; XLA sees the same
    computation because it inlines calls itself.

    Args:
        closed: any closed jaxpr, e.g. from `jax.make_jaxpr`.

    Returns:
        A closed jaxpr with the same input and output avals.
    """
    avals = [v.aval for v in closed.jaxpr.invars]

    def run(*args: Any) -> list[Any]:
        return eval_jaxpr_with(closed.jaxpr, closed.consts, args, _inline_eqn)

    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals]
    return jax.make_jaxpr(run)(*specs)


@functools.cache
def _primitive_index() -> dict[int, tuple[str, str]]:
    # Primitives are module-level singletons: pickle them as (module, attribute) references.
    index: dict[int, tuple[str, str]] = {}
    for modname, attr, prim in jaxcompat.module_primitives(
            ("jax", "jaxlib", "flax", "optax", *primitives.EXTENSION_PACKAGES)):
        index.setdefault(id(prim), (modname, attr))
    return index


def _load_primitive(modname: str, attr: str) -> jaxcompat.Primitive:
    return getattr(importlib.import_module(modname), attr)


def _none() -> None:
    return None


def _typed_ndarray(value: np.ndarray, aval: Any) -> Any:
    return jaxcompat.typed_ndarray(value, aval)


class _JaxprPickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, jaxcompat.Primitive):
            ref = _primitive_index().get(id(obj))
            if ref is None:
                _primitive_index.cache_clear()
                ref = _primitive_index().get(id(obj))
            if ref is None:
                raise pickle.PicklingError(f"primitive '{obj.name}' is not a module attribute")
            return _load_primitive, ref
        if obj is _none or obj is _load_primitive or obj is _typed_ndarray:
            return NotImplemented
        if type(obj).__name__ == "TypedNdArray":  # literal arrays: ndarray pickling drops the aval
            return _typed_ndarray, (np.asarray(obj), obj.aval)
        if type(obj).__name__ == "Traceback":  # source tracebacks are not needed to rerun
            return _none, ()
        if isinstance(obj, types.FunctionType):
            try:
                pickle.dumps(obj)
            except Exception as exc:
                # Canonical jaxprs inline custom_jvp/vjp, so a function left here is called when
                # the program runs (a host callback): dropping it would change the program.
                raise InvalidArgument(
                    f"the program calls the Python function '{obj.__qualname__}' (e.g. through "
                    "jax.pure_callback), which worker processes cannot import by name: define it "
                    "at module level") from exc
        return NotImplemented


def dumps_jaxpr(closed: ClosedJaxpr) -> bytes:
    """Serialize a canonical closed jaxpr to bytes (pickle; primitives by reference).

    Raises:
        pickle.PicklingError: the jaxpr holds an object that cannot be pickled.
        InvalidArgument: the program calls a Python function that is not importable by name.
    """
    buffer = io.BytesIO()
    _JaxprPickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(closed)
    return buffer.getvalue()


def loads_jaxpr(data: bytes) -> ClosedJaxpr:
    """Inverse of `dumps_jaxpr`.

    Raises:
        CorruptArtifact: the bytes are not a pickled closed jaxpr of this jax version.
    """
    try:
        closed = pickle.loads(data)
    except ModuleNotFoundError as exc:
        raise CorruptArtifact(f"the program calls Python code from module '{exc.name}' (a host "
                              "callback such as jax.pure_callback), which is not importable here; "
                              "put its directory on PYTHONPATH") from exc
    except Exception as exc:
        raise CorruptArtifact(f"cannot read serialized jaxpr ({type(exc).__name__}: {exc}); "
                              "was it written by another jax version?") from exc
    if not isinstance(closed, jaxcompat.ClosedJaxpr):
        raise CorruptArtifact(f"serialized jaxpr holds a {type(closed).__name__}, not a ClosedJaxpr")
    return closed


def count_equations(closed: ClosedJaxpr) -> int:
    """Number of equations, counting those in nested jaxprs (scan/while/cond bodies)."""
    total = 0
    for eqn in closed.jaxpr.eqns:
        total += 1
        for value in eqn.params.values():
            subs = value if isinstance(value, tuple) else (value,)
            for sub in subs:
                if jaxcompat.is_jaxpr(sub):
                    total += count_equations(jaxcompat.as_closed(sub))
    return total


def primitives_used(closed: ClosedJaxpr) -> set[str]:
    """Names of all primitives in `closed`, nested jaxprs included."""
    names: set[str] = set()
    for eqn in closed.jaxpr.eqns:
        names |= _eqn_primitives(eqn)
    return names


def _eqn_primitives(eqn: JaxprEqn) -> set[str]:
    """The equation's primitive and those of its nested jaxprs."""
    names = {eqn.primitive.name}
    for value in eqn.params.values():
        for sub in value if isinstance(value, tuple) else (value,):
            if jaxcompat.is_jaxpr(sub):
                names |= primitives_used(jaxcompat.as_closed(sub))
    return names


def output_cone(closed: ClosedJaxpr, outputs: Sequence[int]) -> tuple[set[str], set[str]]:
    """Primitives and input dtypes of the cone of influence of some outputs.

    The cone is the top-level equations the outputs depend on (transitively); a primitive inside a
    nested jaxpr (scan, while, cond bodies) of a cone equation counts too.

    Args:
        closed: the program's closed jaxpr.
        outputs: positions in ``closed.jaxpr.outvars``.

    Returns:
        (primitive names, dtype names of the jaxpr inputs the cone reads). An output that is an
        input itself adds its dtype and no primitive; a literal output adds nothing.

    >>> closed = jax.make_jaxpr(lambda x, i: (jax.numpy.sin(x), i * 2))(1.0, 3)
    >>> output_cone(closed, [1])
    ({'mul'}, {'int32'})
    """
    jaxpr = closed.jaxpr
    def is_var(atom: Any) -> bool:
        return isinstance(atom, jaxcompat.Var) and not isinstance(atom, jaxcompat.DropVar)

    producer = {v: k for k, eqn in enumerate(jaxpr.eqns) for v in eqn.outvars if is_var(v)}
    inputs = set(jaxpr.invars)
    primitives: set[str] = set()
    dtypes: set[str] = set()
    seen: set[int] = set()
    stack = [jaxpr.outvars[i] for i in outputs]
    while stack:
        atom = stack.pop()
        if not is_var(atom):
            continue
        if atom in inputs:
            dtypes.add(np.dtype(atom.aval.dtype).name if hasattr(atom.aval, "dtype") else
                       str(atom.aval))
        k = producer.get(atom)
        if k is None or k in seen:
            continue
        seen.add(k)
        eqn = jaxpr.eqns[k]
        primitives |= _eqn_primitives(eqn)
        stack.extend(eqn.invars)
    return primitives, dtypes


def as_numpy(value: Any) -> np.ndarray:
    """A concrete value (jax.Array, NumPy scalar, Python scalar) as a NumPy array."""
    return np.asarray(value)
