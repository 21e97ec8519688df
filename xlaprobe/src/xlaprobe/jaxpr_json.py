"""A data-only, versioned serialization of canonical closed jaxprs, for artifacts that are shared.

`xlaprobe.jaxprs.dumps_jaxpr` pickles, which is right between xlaprobe's own processes and wrong for
a directory attached to a bug report: unpickling runs whatever the file names. This format is JSON
plus NumPy arrays loaded with ``allow_pickle=False``, and loading never imports or calls anything
the file names:

* a primitive is named by its ``name`` and must be one that jax's own modules define
  (`jaxcompat.module_primitives`);
* every parameter value is JSON ``null``/``true``/``false``/integer/string or an object whose tag
  ``"t"`` is in the closed table `_TAGS` (floats, tuples, NumPy scalars and dtypes, nested jaxprs,
  the lax enums and records, scan's flat trees, PRNG implementations by registered name, the empty
  abstract-mesh sharding and named shardings over an abstract mesh of ``Auto`` axes, and a
  ``shard_map``'s abstract mesh, partition specs and manual axes); anything else is refused;
* the jaxpr is rebuilt by binding the primitives under `jax.make_jaxpr`, so JAX's own shape and
  dtype rules check every equation, and each equation's outputs must have the recorded avals; a
  ``shard_map``'s body is bound inside ``jax.shard_map`` over its recorded mesh and specs (its
  collectives need the mesh's axes).

Document (``jaxpr.json``)::

    {"format": "xlaprobe-jaxpr", "version": 1, "jaxpr": GRAPH}
    GRAPH = {"invars": [VAR], "constvars": [VAR + {"const": k}], "eqns": [EQN], "outvars": [ATOM]}
    VAR   = {"id": n, "shape": [...], "dtype": "float32", "weak_type": false}
    EQN   = {"primitive": "add", "invars": [ATOM], "outvars": [VAR or {"drop": AVAL}],
             "params": {name: VALUE}}
    ATOM  = {"var": n} or {"literal": LITERAL}

Constants live in the arrays file (``consts.npz``) as ``c<k>``; narrow float types are stored as
their bit patterns and `document["consts"]` lists each one's dtype and kind.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import io
import json
import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
from jax.extend.core import Primitive
from jax.sharding import AxisType, NamedSharding
import ml_dtypes
import numpy as np

from xlaprobe import jaxcompat
from xlaprobe.errors import CorruptArtifact

FORMAT = "xlaprobe-jaxpr"
VERSION = 1


def dtype_by_name(name: Any) -> np.dtype:
    """The numeric NumPy (or ml_dtypes) dtype whose canonical name is `name` (the names
    artifacts, jaxpr files and release workers record).

    Raises:
        TypeError: not such a name (object, string and struct dtypes, aliases such as "float").
    """
    if not isinstance(name, str):
        raise TypeError(f"dtype {name!r} is not a name")
    if hasattr(ml_dtypes, name) and not hasattr(np, name):
        value = getattr(ml_dtypes, name)
        if isinstance(value, type) and issubclass(value, np.generic):
            return np.dtype(value)
        raise TypeError(f"unknown dtype '{name}'")
    try:
        dtype = np.dtype(name)
    except TypeError:
        raise TypeError(f"unknown dtype '{name}'") from None
    if dtype.kind not in "biufc" or dtype.name != name:  # objects, structs, strings, aliases
        raise TypeError(f"unknown dtype '{name}'")
    return dtype


# ------------------------------------------------------------------------------- the whitelist


@functools.cache
def _primitives() -> dict[str, Any]:
    """Primitive name -> the Primitive jax's own modules define under it (None: ambiguous)."""
    jaxcompat.primitive_names()  # imports the modules that define them
    table: dict[str, Any] = {}
    for _, _, prim in jaxcompat.module_primitives(("jax",)):
        if table.get(prim.name, prim) is not prim:
            table[prim.name] = None
        else:
            table[prim.name] = prim
    return table


@functools.cache
def _types() -> dict[str, Any]:
    """Tag -> the enum or record class it stands for (fixed jax classes, never named by a file)."""
    # Private jax modules (no public API): a jax that moved them fails here only.
    from jax._src.lax import convolution, fft, lax, slicing
    from jax._src.lax.control_flow import solves
    return {
        "Precision": lax.Precision, "RoundingMethod": lax.RoundingMethod,
        "AccuracyMode": lax.AccuracyMode, "DotAlgorithmPreset": lax.DotAlgorithmPreset,
        "RandomAlgorithm": lax.RandomAlgorithm, "GatherScatterMode": slicing.GatherScatterMode,
        "ConvDimensionNumbers": convolution.ConvDimensionNumbers,
        "GatherDimensionNumbers": slicing.GatherDimensionNumbers,
        "ScatterDimensionNumbers": slicing.ScatterDimensionNumbers,
        "DotAlgorithm": lax.DotAlgorithm, "FftType": fft.FftType,
        "LinearSolveTuple": solves._LinearSolveTuple,  # custom_linear_solve's jaxprs and lengths
    }


def _internals() -> tuple[Any, Any, Any, Any, Any]:
    """(flattree module, Either, prng module, NamedSharding, AbstractMesh): jax internals that
    scan's, random_wrap's and convert_element_type's parameters are made of (no public names)."""
    from jax._src import flattree, mesh, util  # private (no public names): fails here only
    prng = jaxcompat.prng_internals()[1]
    return flattree, util.Either, prng, NamedSharding, mesh.AbstractMesh


# ------------------------------------------------------------------------------------ encoding


class _Encoder:
    """Walks a closed jaxpr once; numbers its variables and collects constants."""

    def __init__(self) -> None:
        self.ids: dict[Any, int] = {}
        self.consts: list[np.ndarray] = []
        self.const_info: list[dict[str, Any]] = []

    def var(self, var: Any) -> dict[str, Any]:
        self.ids.setdefault(var, len(self.ids))
        return {"id": self.ids[var], **_aval(var.aval)}

    def atom(self, atom: Any) -> dict[str, Any]:
        if isinstance(atom, jaxcompat.Literal):
            return {"literal": _literal(atom.val)}
        return {"var": self.ids[atom]}

    def const(self, value: Any) -> int:
        kind = ("typed" if type(value).__name__ == "TypedNdArray" else
                "numpy" if isinstance(value, (np.ndarray, np.generic)) else "jax")
        array = np.asarray(value)
        self.const_info.append({"dtype": array.dtype.name, "kind": kind,
                                "weak_type": bool(getattr(value, "weak_type", False))})
        if array.dtype.type.__module__.startswith("ml_dtypes"):
            array = array.view(f"u{array.dtype.itemsize}")
        self.consts.append(array)
        return len(self.consts) - 1

    def graph(self, closed: Any) -> dict[str, Any]:
        jaxpr = closed.jaxpr
        constvars = [{**self.var(v), "const": self.const(c)}
                     for v, c in zip(jaxpr.constvars, closed.consts, strict=True)]
        invars = [self.var(v) for v in jaxpr.invars]
        eqns = [self.eqn(eqn) for eqn in jaxpr.eqns]
        return {"invars": invars, "constvars": constvars, "eqns": eqns,
                "outvars": [self.atom(v) for v in jaxpr.outvars]}

    def eqn(self, eqn: Any) -> dict[str, Any]:
        name = eqn.primitive.name
        if _primitives().get(name) is not eqn.primitive:
            raise TypeError(f"primitive '{name}' is not one jax defines under that name")
        invars = [self.atom(v) for v in eqn.invars]
        params = {k: self.value(v, f"{name}.{k}") for k, v in eqn.params.items()}
        outvars = [{"drop": _aval(v.aval)} if isinstance(v, jaxcompat.DropVar) else self.var(v)
                   for v in eqn.outvars]
        return {"primitive": name, "invars": invars, "outvars": outvars, "params": params}

    def value(self, value: Any, where: str) -> Any:
        kind = type(value)
        if value is None or kind in (bool, int, str):
            return value
        if kind is float:
            return {"t": "float", "hex": value.hex()}
        if kind in (tuple, list):
            return {"t": kind.__name__, "items": [self.value(v, where) for v in value]}
        if isinstance(value, np.generic) and value.dtype.kind in "biufc":
            return {"t": "scalar", "dtype": value.dtype.name, "hex": value.tobytes().hex()}
        if isinstance(value, np.dtype):
            dtype_by_name(value.name)
            return {"t": "dtype", "name": value.name}
        if jaxcompat.is_jaxpr(value):
            return {"t": "jaxpr", "graph": self.graph(jaxcompat.as_closed(value))}
        if isinstance(value, Primitive):  # select_and_scatter_add's select_prim
            if _primitives().get(value.name) is not value:
                raise TypeError(f"parameter {where} is primitive '{value.name}', which is not "
                                "one of jax's own (or its name is ambiguous)")
            return {"t": "primitive", "name": value.name}
        for tag, cls in _types().items():
            if kind is cls and isinstance(value, enum.Enum):
                return {"t": "enum", "type": tag, "name": value.name}
            if kind is cls:
                return {"t": "record", "type": tag,
                        "fields": {f: self.value(getattr(value, f), where) for f in cls._fields}}
        return self.internal(value, where)

    def internal(self, value: Any, where: str) -> Any:
        flattree, either, prng, named_sharding, abstract_mesh = _internals()
        kind = type(value)
        if kind is flattree.FTTuple:
            return {"t": "ft.tuple", "elts": [self.value(v, where) for v in value.elts]}
        if kind is flattree.FTSingleton:
            return {"t": "ft.singleton", "val": self.value(value.val, where)}
        if kind is flattree.FTStatic:
            return {"t": "ft.static", "val": self.value(value.val, where)}
        if kind is flattree.FTFiltered:
            return {"t": "ft.filtered", "val": self.value(value.val, where)}
        if kind is flattree.FTDict:
            return {"t": "ft.dict", "keys": [self.value(k, where) for k in value.keys],
                    "vals": [self.value(v, where) for v in value._vals]}
        if kind is flattree.FTPyTree:
            return {"t": "ft.pytree", "xs": [self.value(v, where) for v in value.xs],
                    "tree": _treedef(value.tree, where)}
        if kind is jax.tree_util.PyTreeDef:  # composite's attributes
            return {"t": "treedef", "tree": _treedef(value, where)}
        if kind is either:
            return {"t": "either", "right": value.is_right, "val": self.value(value.val, where)}
        if kind is prng.PRNGImpl and prng.prngs.get(value.name) is value:
            return {"t": "prng_impl", "name": value.name}
        if (kind is named_sharding and type(value.mesh) is abstract_mesh
                and value.mesh.axis_names == () and value.memory_kind is None
                and all(p is None for p in value.spec)):
            return {"t": "replicated", "ndim": len(value.spec)}
        if kind is jax.sharding.Mesh and not value.axis_names:  # sharding_constraint's context
            return {"t": "empty_mesh"}
        if kind is frozenset and all(type(v) is int for v in value):  # unconstrained_dims
            return {"t": "int_set", "items": sorted(value)}
        if kind is frozenset and all(type(v) is str for v in value):  # shard_map's manual axes
            return {"t": "str_set", "items": sorted(value)}
        if kind is abstract_mesh and _auto_axes(value):  # shard_map's mesh
            return {"t": "abstract_mesh", "sizes": list(value.axis_sizes),
                    "names": list(value.axis_names)}
        if kind is jax.sharding.PartitionSpec and not _spec_extras(value):  # shard_map's specs
            return {"t": "pspec", "spec": _spec_entries(value)}
        if (kind is named_sharding and type(value.mesh) is abstract_mesh
                and value.memory_kind is None and _auto_axes(value.mesh)):
            # with_sharding_constraint over an abstract mesh (xlaprobe.configs.spmd)
            return {"t": "named_sharding", "sizes": list(value.mesh.axis_sizes),
                    "names": list(value.mesh.axis_names),
                    "spec": _spec_entries(value.spec)}
        raise TypeError(f"parameter {where} is a {kind.__module__}.{kind.__qualname__}, which "
                        "xlaprobe's artifact format does not describe")


def _spec_entries(spec: Any) -> list[Any]:
    """A PartitionSpec's entries as JSON: per dimension null or the list of its mesh axes."""
    return [None if p is None else [p] if isinstance(p, str) else list(p) for p in spec]


def _spec_extras(spec: Any) -> bool:
    """Whether a PartitionSpec carries more than its entries (unreduced or reduced axes), which
    this format does not describe."""
    return bool(getattr(spec, "unreduced", None) or getattr(spec, "reduced", None))


def _aval(aval: Any) -> dict[str, Any]:
    if jax.dtypes.issubdtype(aval.dtype, jax.dtypes.prng_key):  # random_wrap's typed keys
        impl = aval.dtype._impl
        if _internals()[2].prngs.get(impl.name) is not impl:
            raise TypeError(f"PRNG implementation '{impl.name}' is not registered with jax")
        return {"shape": [int(d) for d in aval.shape], "key": impl.name,
                "weak_type": bool(aval.weak_type)}
    return {"shape": [int(d) for d in aval.shape], "dtype": dtype_by_name(np.dtype(aval.dtype).name).name,
            "weak_type": bool(aval.weak_type)}


def _literal(value: Any) -> dict[str, Any]:
    kind = type(value).__name__
    if kind == "TypedInt":
        return {"kind": "int", "value": int(value), "dtype": np.dtype(value.dtype).name}
    if kind == "TypedFloat":
        return {"kind": "float", "hex": float(value).hex(), "dtype": np.dtype(value.dtype).name}
    if kind == "TypedComplex":
        return {"kind": "complex", "hex": [value.real.hex(), value.imag.hex()],
                "dtype": np.dtype(value.dtype).name}
    if type(value) is bool:
        return {"kind": "bool", "value": value}
    if isinstance(value, (np.ndarray, np.generic)) and np.asarray(value).dtype.kind in "biufcV":
        array = np.asarray(value)
        return {"kind": "typed" if kind == "TypedNdArray" else "numpy",
                "dtype": dtype_by_name(array.dtype.name).name, "shape": list(array.shape),
                "weak_type": bool(getattr(value, "weak_type", False)),
                "hex": np.ascontiguousarray(array).tobytes().hex()}
    raise TypeError(f"a literal of type {type(value).__qualname__} is not described")


def _treedef(tree: Any, where: str) -> dict[str, Any]:
    """A treedef of tuples, lists, dicts (string keys) and None, as data."""
    if tree.num_nodes == 1 and tree.num_leaves == 1:
        return {"node": "leaf"}
    node, data = tree.node_data()
    children = [_treedef(c, where) for c in tree.children()]
    if node is type(None):
        return {"node": "none"}
    if node in (tuple, list):
        return {"node": node.__name__, "children": children}
    if node is dict and all(type(k) is str for k in data):
        return {"node": "dict", "keys": list(data), "children": children}
    raise TypeError(f"parameter {where} holds a pytree node {node.__qualname__}, which "
                    "xlaprobe's artifact format does not describe")


def encode(closed: Any) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """A canonical closed jaxpr as (JSON-ready document, arrays for the ``.npz`` file).

    Raises:
        TypeError: the jaxpr holds something this format does not describe (a host callback's
            Python function, a custom pytree node, a PRNG key input, an unknown parameter type).
    """
    encoder = _Encoder()
    graph = encoder.graph(closed)
    document = {"format": FORMAT, "version": VERSION, "consts": encoder.const_info, "jaxpr": graph}
    return document, {f"c{i}": a for i, a in enumerate(encoder.consts)}


def dumps(closed: Any) -> tuple[str, bytes]:
    """A canonical closed jaxpr as (``jaxpr.json`` text, ``consts.npz`` bytes).

    Raises:
        TypeError: as `encode`.
    """
    document, arrays = encode(closed)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return json.dumps(document, separators=(",", ":")) + "\n", buffer.getvalue()


# ------------------------------------------------------------------------------------ decoding


def _short(value: Any) -> str:
    text = json.dumps(value)[:60] if not isinstance(value, str) else repr(value[:60])
    return text.replace("\n", " ")


def _need(condition: bool, reason: str) -> None:
    if not condition:
        raise CorruptArtifact(reason)


def _int_list(value: Any, what: str) -> tuple[int, ...]:
    _need(type(value) is list and all(type(d) is int and d >= 0 for d in value),
          f"{what} {_short(value)} is not a list of non-negative integers")
    return tuple(value)


def _spec(var: Any) -> tuple[tuple[int, ...], Any, bool]:
    """(shape, dtype, weak_type) of a VAR or AVAL object; the dtype of a PRNG key is jax's."""
    _need(type(var) is dict, f"variable {_short(var)} is not an object")
    try:
        dtype = _key_dtype(var["key"]) if "key" in var else dtype_by_name(var.get("dtype"))
    except TypeError as exc:
        raise CorruptArtifact(str(exc)) from None
    weak = var.get("weak_type", False)
    _need(type(weak) is bool, f"weak_type {_short(weak)} is not a boolean")
    return _int_list(var.get("shape"), "shape"), dtype, weak


def _key_dtype(name: Any) -> Any:
    prng = _internals()[2]
    _need(type(name) is str and name in prng.prngs, f"unknown PRNG implementation {_short(name)}")
    return prng.KeyTy(prng.prngs[name])


def _array(hexdigits: Any, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    _need(type(hexdigits) is str and len(hexdigits) == 2 * dtype.itemsize * math.prod(shape),
          f"array data of {dtype.name}{list(shape)} has the wrong length")
    try:
        raw = bytes.fromhex(hexdigits)
    except ValueError:
        raise CorruptArtifact("array data is not hexadecimal") from None
    return np.frombuffer(raw, dtype).reshape(shape).copy()


def _literal_value(data: Any) -> Any:
    _need(type(data) is dict, f"literal {_short(data)} is not an object")
    kind = data.get("kind")
    if kind == "bool":
        _need(type(data.get("value")) is bool, "a bool literal is not true or false")
        return data["value"]
    if kind in ("typed", "numpy"):
        shape, dtype, weak = _spec(data)
        array = _array(data.get("hex"), dtype, shape)
        if kind == "numpy":
            return array if shape else array[()]
        return jaxcompat.typed_ndarray(array, jaxcompat.shaped_array(shape, dtype, weak))
    try:
        dtype = dtype_by_name(data.get("dtype"))
        if kind == "int" and type(data.get("value")) is int:
            return jaxcompat.typed_scalar(int(data["value"]), dtype)
        if kind == "float":
            return jaxcompat.typed_scalar(float.fromhex(data["hex"]), dtype)
        if kind == "complex":
            real, imag = (float.fromhex(h) for h in data["hex"])
            return jaxcompat.typed_scalar(complex(real, imag), dtype)
    except (TypeError, ValueError, KeyError, OverflowError) as exc:
        raise CorruptArtifact(f"literal {_short(data)}: {exc}") from None
    raise CorruptArtifact(f"literal {_short(data)} is of no known kind")


class _Decoder:
    """Rebuilds closed jaxprs from GRAPH objects, binding jax's primitives under tracing."""

    def __init__(self, consts: Sequence[Any]):
        self.consts = consts

    def closed(self, graph: Any) -> Any:
        """The closed jaxpr a GRAPH object describes, traced from its equations."""
        run, specs = self.function(graph)
        structs = [jax.ShapeDtypeStruct(s, d, weak_type=w) for s, d, w in specs]
        return jax.make_jaxpr(run)(*structs)

    def function(self, graph: Any) -> tuple[Callable[..., list[Any]], list[Any]]:
        """(a function that binds the GRAPH's equations on its inputs, the inputs' (shape,
        dtype, weak_type)): `closed` traces it; a ``shard_map`` traces its body inside
        ``jax.shard_map``, where the body's collectives have their mesh axes."""
        _need(type(graph) is dict, f"jaxpr {_short(graph)} is not an object")
        invars, constvars, eqns, outvars = (graph.get(k) for k in
                                            ("invars", "constvars", "eqns", "outvars"))
        for name, part in (("invars", invars), ("constvars", constvars), ("eqns", eqns),
                           ("outvars", outvars)):
            _need(type(part) is list, f"jaxpr {name} is not a list")
        specs = [_spec(v) for v in invars]
        consts = []
        for var in constvars:
            index = var.get("const") if type(var) is dict else None
            _need(type(index) is int and 0 <= index < len(self.consts),
                  f"constant {_short(index)} is not in the arrays file")
            consts.append(self.consts[index])
        steps = [self.step(eqn) for eqn in eqns]
        ids = [_var_id(v) for v in constvars] + [_var_id(v) for v in invars]

        def run(*args: Any) -> list[Any]:
            env = dict(zip(ids, [*consts, *args], strict=True))
            for k, (prim, atoms, params, outs) in enumerate(steps):
                values = _bind(prim, [_read(env, a) for a in atoms], params, k)
                _need(len(values) == len(outs), f"equation {k} ({prim.name}) gives "
                      f"{len(values)} outputs, the file lists {len(outs)}")
                for (var_id, spec), value in zip(outs, values):
                    aval = value.aval if hasattr(value, "aval") else jax.typeof(value)
                    got = (tuple(aval.shape), aval.dtype, bool(aval.weak_type))
                    _need(got == spec, f"equation {k} ({prim.name}) gives "
                          f"{got[1]}{list(got[0])}, the file says {spec[1]}{list(spec[0])}")
                    if var_id is not None:
                        env[var_id] = value
            return [_read(env, a) for a in outvars]

        return run, specs

    def step(self, eqn: Any) -> tuple[Any, list[Any], dict[str, Any], list[Any]]:
        _need(type(eqn) is dict, f"equation {_short(eqn)} is not an object")
        name = eqn.get("primitive")
        prim = _primitives().get(name) if type(name) is str else None
        _need(prim is not None, f"unknown primitive {_short(name)}: not one jax defines")
        atoms, params, outs = eqn.get("invars"), eqn.get("params"), eqn.get("outvars")
        _need(type(atoms) is list and type(params) is dict and type(outs) is list,
              f"equation {name} lacks invars, params or outvars")
        if name == "shard_map":  # its body binds collectives: traced inside jax.shard_map
            body = params.get("jaxpr")
            _need(type(body) is dict and body.get("t") == "jaxpr", "shard_map needs a jaxpr")
            decoded = {str(k): self.value(v) for k, v in params.items() if k != "jaxpr"}
            graph = body.get("graph")
            _need(type(graph) is dict and type(graph.get("invars")) is list,
                  f"jaxpr {_short(graph)} is not an object")
            # Decoded when bound: inner jaxprs (a scan with a ppermute) trace in its axes.
            decoded["jaxpr"] = _Body(self, graph, [_spec(v) for v in graph["invars"]])
        else:
            decoded = {str(k): self.value(v) for k, v in params.items()}
        out_specs = []
        for out in outs:
            dropped = type(out) is dict and "drop" in out
            out_specs.append((None if dropped else _var_id(out),
                              _spec(out["drop"] if dropped else out)))
        return prim, atoms, decoded, out_specs

    def value(self, data: Any) -> Any:
        if data is None or type(data) in (bool, int, str):
            return data
        _need(type(data) is dict and type(data.get("t")) is str,
              f"parameter value {_short(data)} has no type tag")
        decode = _TAGS.get(data["t"])
        _need(decode is not None, f"unknown type tag {_short(data['t'])}")
        try:
            return decode(self, data)
        except CorruptArtifact:
            raise
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
            raise CorruptArtifact(f"parameter value {_short(data)}: "
                                  f"{type(exc).__name__}: {exc}") from None

    def items(self, data: Any, key: str) -> list[Any]:
        _need(type(data.get(key)) is list, f"'{data['t']}' needs a list '{key}'")
        return [self.value(v) for v in data[key]]


def _var_id(var: Any) -> int:
    _need(type(var) is dict and type(var.get("id")) is int, f"variable {_short(var)} has no id")
    return var["id"]


def _read(env: dict[int, Any], atom: Any) -> Any:
    _need(type(atom) is dict, f"operand {_short(atom)} is not an object")
    if "literal" in atom:
        return _literal_value(atom["literal"])
    _need(atom.get("var") in env, f"operand {_short(atom)} is not defined before its use")
    return env[atom["var"]]


def _bind(prim: Any, values: list[Any], params: dict[str, Any], index: int) -> list[Any]:
    """Bind one primitive; any error of JAX's (a bad shape, dtype or parameter) is a corrupt file.

    Raises:
        CorruptArtifact: JAX rejects the operands or parameters (its reason, first line).
    """
    try:
        if isinstance(params.get("jaxpr"), _Body):
            return _shard_map(params, values)
        outs = prim.bind(*values, **params)
    except CorruptArtifact:
        raise
    except Exception as exc:  # JAX raises many types for malformed equations
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise CorruptArtifact(f"equation {index} ({prim.name}) is rejected by jax: "
                              f"{type(exc).__name__}: {first}") from None
    return list(outs) if prim.multiple_results else [outs]


@dataclasses.dataclass(frozen=True)
class _Body:
    """A ``shard_map`` body to decode inside ``jax.shard_map``: the decoder, its GRAPH, its
    inputs' (shape, dtype, weak_type)."""

    decoder: Any
    graph: dict[str, Any]
    specs: list[Any]

    def run(self, *args: Any) -> list[Any]:
        """Decode the body's equations (here, under the shard_map's axes) and bind them."""
        return self.decoder.function(self.graph)[0](*args)


def _shard_map(params: dict[str, Any], values: list[Any]) -> list[Any]:
    """A ``shard_map`` equation bound again through ``jax.shard_map`` (its primitive's bind
    takes the body as a traced function, not as a jaxpr)."""
    _need(sorted(params) == ["check_vma", "in_specs", "jaxpr", "mesh", "newly_manual_axes",
                             "out_specs"], f"shard_map parameters {sorted(params)}")
    mesh, body = params["mesh"], params["jaxpr"]
    _need(type(mesh) is _internals()[4], "a shard_map mesh is not an abstract mesh")
    _need(len(body.specs) == len(values), "a shard_map body's inputs do not match its operands")
    fn = jax.shard_map(lambda *a: tuple(body.run(*a)), mesh=mesh,
                       in_specs=tuple(params["in_specs"]), out_specs=tuple(params["out_specs"]),
                       check_vma=_boolean(params["check_vma"]),
                       axis_names=set(params["newly_manual_axes"]))
    return list(fn(*values))


def _boolean(value: Any) -> bool:
    _need(type(value) is bool, f"{_short(value)} is not true or false")
    return value


def _record(decoder: _Decoder, data: dict[str, Any]) -> Any:
    cls = _types().get(data["type"])
    _need(cls is not None and hasattr(cls, "_fields"), f"unknown record type {_short(data['type'])}")
    fields = data["fields"]
    _need(type(fields) is dict and sorted(fields) == sorted(cls._fields),
          f"{data['type']} needs exactly the fields {', '.join(cls._fields)}")
    return cls(**{f: decoder.value(v) for f, v in fields.items()})


def _enum(decoder: _Decoder, data: dict[str, Any]) -> Any:
    cls = _types().get(data["type"])
    _need(cls is not None and issubclass(cls, enum.Enum), f"unknown enum {_short(data['type'])}")
    _need(data["name"] in cls.__members__, f"{data['type']} has no member {_short(data['name'])}")
    return cls.__members__[data["name"]]


def _scalar(decoder: _Decoder, data: dict[str, Any]) -> Any:
    return _array(data["hex"], dtype_by_name(data["dtype"]), ())[()]


def _prng_impl(decoder: _Decoder, data: dict[str, Any]) -> Any:
    impls = _internals()[2].prngs
    _need(data["name"] in impls, f"unknown PRNG implementation {_short(data['name'])}")
    return impls[data["name"]]


def _primitive(decoder: _Decoder, data: dict[str, Any]) -> Any:
    prim = _primitives().get(data["name"]) if type(data["name"]) is str else None
    _need(prim is not None, f"unknown primitive parameter {_short(data['name'])}")
    return prim


def _auto_axes(mesh: Any) -> bool:
    return bool(mesh.axis_names) and all(t == AxisType.Auto for t in mesh.axis_types)


def _named_sharding(decoder: _Decoder, data: dict[str, Any]) -> Any:
    sizes, names = _mesh_of(data)
    spec = _partition_spec(data.get("spec"), names, "bad sharding spec")
    return _internals()[3](_auto_mesh(sizes, names), spec)


def _mesh_of(data: dict[str, Any]) -> tuple[tuple[int, ...], tuple[str, ...]]:
    sizes, names = data.get("sizes"), data.get("names")
    _need(type(sizes) is list and type(names) is list and len(sizes) == len(names) <= 8
          and all(type(n) is int and n > 0 for n in sizes)
          and all(type(n) is str and n.isidentifier() for n in names), "bad sharding mesh")
    return tuple(sizes), tuple(names)


def _auto_mesh(sizes: tuple[int, ...], names: tuple[str, ...]) -> Any:
    return _internals()[4](sizes, names, axis_types=(AxisType.Auto,) * len(names))


def _partition_spec(spec: Any, names: tuple[str, ...] | None, what: str) -> Any:
    """The PartitionSpec of JSON entries (`_spec_entries`), each axis a string (and one of
    `names` where given); CorruptArtifact(`what`) otherwise."""
    _need(type(spec) is list and len(spec) < 64 and all(
        p is None or (type(p) is list and all(type(a) is str and (names is None or a in names)
                                              for a in p)) for p in spec), what)
    return jax.sharding.PartitionSpec(
        *[None if p is None else p[0] if len(p) == 1 else tuple(p) for p in spec])


def _abstract_mesh(decoder: _Decoder, data: dict[str, Any]) -> Any:
    return _auto_mesh(*_mesh_of(data))


def _pspec(decoder: _Decoder, data: dict[str, Any]) -> Any:
    return _partition_spec(data.get("spec"), None, "bad partition spec")


def _str_set(decoder: _Decoder, data: dict[str, Any]) -> Any:
    items = data.get("items")
    _need(type(items) is list and all(type(i) is str for i in items), "bad string set")
    return frozenset(items)


def _int_set(decoder: _Decoder, data: dict[str, Any]) -> Any:
    items = data.get("items")
    _need(type(items) is list and all(type(i) is int for i in items), "bad integer set")
    return frozenset(items)


def _empty_mesh(decoder: _Decoder, data: dict[str, Any]) -> Any:
    return jax.sharding.Mesh(np.empty((), dtype=object), ())


def _replicated(decoder: _Decoder, data: dict[str, Any]) -> Any:
    _, _, _, named_sharding, abstract_mesh = _internals()
    _need(type(data["ndim"]) is int and 0 <= data["ndim"] < 64, "bad sharding rank")
    mesh = abstract_mesh((), (), axis_types=())
    return named_sharding(mesh, jax.sharding.PartitionSpec(*[None] * data["ndim"]))


def _tree(data: Any) -> Any:
    """A prototype pytree for a treedef (leaves are 0)."""
    _need(type(data) is dict, f"treedef {_short(data)} is not an object")
    node = data.get("node")
    if node == "leaf":
        return 0
    if node == "none":
        return None
    children = data.get("children")
    _need(type(children) is list, f"treedef node {_short(node)} needs children")
    kids = [_tree(c) for c in children]
    if node == "tuple":
        return tuple(kids)
    if node == "list":
        return kids
    keys = data.get("keys")
    _need(node == "dict" and type(keys) is list and len(keys) == len(kids)
          and all(type(k) is str for k in keys), f"unknown treedef node {_short(node)}")
    return dict(zip(keys, kids))


def _ft_pytree(decoder: _Decoder, data: dict[str, Any]) -> Any:
    flattree = _internals()[0]
    treedef = flattree.tracing_registry.flatten(_tree(data["tree"]))[1]
    xs = decoder.items(data, "xs")
    _need(len(xs) == treedef.num_leaves, "a flat tree's values do not match its tree")
    return flattree.FTPyTree(xs, treedef)


_TAGS: dict[str, Callable[[_Decoder, dict[str, Any]], Any]] = {
    "float": lambda d, data: float.fromhex(data["hex"]),
    "tuple": lambda d, data: tuple(d.items(data, "items")),
    "list": lambda d, data: d.items(data, "items"),
    "scalar": _scalar,
    "dtype": lambda d, data: dtype_by_name(data["name"]),
    "jaxpr": lambda d, data: d.closed(data["graph"]),
    "enum": _enum,
    "record": _record,
    "prng_impl": _prng_impl,
    "primitive": _primitive,
    "replicated": _replicated,
    "named_sharding": _named_sharding,
    "empty_mesh": _empty_mesh,
    "int_set": _int_set,
    "str_set": _str_set,
    "abstract_mesh": _abstract_mesh,
    "pspec": _pspec,
    "either": lambda d, data: _internals()[1](_boolean(data["right"]), d.value(data["val"])),
    "ft.tuple": lambda d, data: _internals()[0].FTTuple(*d.items(data, "elts")),
    "ft.singleton": lambda d, data: _internals()[0].FTSingleton(d.value(data["val"])),
    "ft.static": lambda d, data: _internals()[0].FTStatic(d.value(data["val"])),
    "ft.filtered": lambda d, data: _internals()[0].FTFiltered(d.value(data["val"])),
    "ft.dict": lambda d, data: _internals()[0].FTDict(tuple(d.items(data, "keys")),
                                                       tuple(d.items(data, "vals"))),
    "ft.pytree": _ft_pytree,
    "treedef": lambda d, data: jax.tree_util.tree_structure(_tree(data["tree"])),
}


def _load_consts(info: Any, arrays: Any) -> list[Any]:
    _need(type(info) is list, "the document's consts is not a list")
    consts = []
    for i, item in enumerate(info):
        _need(type(item) is dict and item.get("kind") in ("typed", "numpy", "jax"),
              f"constant {i} has no known kind")
        _need(f"c{i}" in arrays, f"constant {i} is missing from the arrays file")
        try:
            dtype = dtype_by_name(item.get("dtype"))
        except TypeError as exc:
            raise CorruptArtifact(f"constant {i}: {exc}") from None
        array = arrays[f"c{i}"]
        _need(array.dtype.itemsize == dtype.itemsize and array.dtype.kind in "biufc",
              f"constant {i} is stored as {array.dtype.name}, not {dtype.name}")
        array = array.view(dtype) if array.dtype != dtype else array
        weak = bool(item.get("weak_type", False))
        if item["kind"] == "typed":
            consts.append(jaxcompat.typed_ndarray(
                array, jaxcompat.shaped_array(array.shape, dtype, weak)))
        elif item["kind"] == "jax":
            consts.append(jaxcompat.device_array(array, weak))
        else:
            consts.append(array)
    return consts


def loads(text: str | bytes, arrays_file: bytes) -> Any:
    """Inverse of `dumps`: the closed jaxpr of a ``jaxpr.json`` text and ``consts.npz`` bytes.

    Nothing the file names is imported or called: primitives come from jax's own modules, values
    from the closed tag table, arrays from NumPy with ``allow_pickle=False``.

    Raises:
        CorruptArtifact: malformed JSON or arrays, another format or a newer version, an unknown
            primitive or type tag, or equations JAX rejects (one line saying which).
    """
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise CorruptArtifact(f"jaxpr.json is not JSON: {str(exc).splitlines()[0]}") from None
    _need(type(document) is dict and document.get("format") == FORMAT,
          f"jaxpr.json is not an {FORMAT} document")
    version = document.get("version")
    _need(type(version) is int and version <= VERSION,
          f"jaxpr.json has version {_short(version)}, newer than this xlaprobe's ({VERSION}): "
          "upgrade xlaprobe")
    try:
        with np.load(io.BytesIO(arrays_file), allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
    except Exception as exc:  # zipfile, ValueError (pickled object arrays), ...
        raise CorruptArtifact(f"cannot read consts.npz: {type(exc).__name__}: {exc}") from None
    decoder = _Decoder(_load_consts(document.get("consts"), arrays))
    try:
        return decoder.closed(document.get("jaxpr"))
    except RecursionError:
        raise CorruptArtifact("jaxpr.json nests too deeply") from None
