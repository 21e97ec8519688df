"""Every JAX internal xlaprobe touches, in one place, detected by feature rather than by version.

xlaprobe interprets jaxprs equation by equation, rebuilds them (segments, reductions) and compiles
single HLO modules, which JAX's public API does not cover. Public names come from `jax.extend`;
each private one below says why it is needed. Facts that changed in jax 0.11/0.12 (checked on
0.12.0.1): ``ClosedJaxpr`` is merged into ``Jaxpr`` (a jaxpr carries its constants; constvars
without attached values are plain leading invars), and ``scan`` describes its operands with flat
trees ``ft_in``/``ft_out`` instead of ``num_consts``/``num_carry``.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import jax
from jax._src import core as _core  # join_effects, DebugInfo: building jaxprs (not in jax.extend)
from jax.extend import core as _extend

Jaxpr = _extend.Jaxpr
JaxprEqn = _extend.JaxprEqn
Var = _extend.Var
Literal = _extend.Literal
DropVar = _extend.DropVar
Primitive = _extend.Primitive
DebugInfo = _extend.DebugInfo

#: True where a jaxpr holds its own constants (jax >= 0.11): there is no separate ClosedJaxpr.
JAXPR_HOLDS_CONSTS: bool = not hasattr(_core, "ClosedJaxpr")

#: The type of a closed jaxpr (constants bound); on jax >= 0.11 this is `Jaxpr` itself.
ClosedJaxpr = Jaxpr if JAXPR_HOLDS_CONSTS else _core.ClosedJaxpr


def is_jaxpr(value: Any) -> bool:
    """True for a jaxpr, open or closed (a parameter of a higher-order primitive, say)."""
    return isinstance(value, (Jaxpr, ClosedJaxpr))


def as_closed(value: Any) -> Any:
    """A parameter jaxpr as a closed jaxpr: an open one gets no constants, a closed one is kept.

    On jax >= 0.11 every jaxpr is closed already; wrapping it again with empty constants would
    turn its constants into inputs, so it is returned as it is.

    Raises:
        TypeError: `value` is not a jaxpr.
    """
    if not is_jaxpr(value):
        raise TypeError(f"expected a jaxpr, got {type(value).__name__}")
    if JAXPR_HOLDS_CONSTS or isinstance(value, ClosedJaxpr):
        return value
    return _core.ClosedJaxpr(value, ())


def close(jaxpr: Any, consts: Sequence[Any]) -> Any:
    """`jaxpr` (whose leading ``len(consts)`` inputs are its constvars) closed over `consts`.

    On jax >= 0.11 the constants of an already closed jaxpr are replaced.
    """
    if JAXPR_HOLDS_CONSTS:
        return Jaxpr(jaxpr, consts=list(consts))
    return _core.ClosedJaxpr(jaxpr.jaxpr if isinstance(jaxpr, ClosedJaxpr) else jaxpr, list(consts))


def new_closed_jaxpr(constvars: Sequence[Any], invars: Sequence[Any], outvars: Sequence[Any],
                     eqns: Sequence[Any], consts: Sequence[Any], what: str,
                     effects: Any = None) -> Any:
    """A closed jaxpr built from parts (one value in `consts` per constvar).

    Args:
        what: a name for the jaxpr's debug info (what it computes).
        effects: the equations' joint effects; None joins those of `eqns`.
    """
    if effects is None:
        effects = _core.join_effects(*(eqn.effects for eqn in eqns)) if eqns else frozenset()
    # DebugInfo has no public constructor; its arg names must match the inputs.
    info = DebugInfo("xlaprobe", what, tuple(str(v) for v in invars),
                     tuple(str(v) for v in outvars))
    if JAXPR_HOLDS_CONSTS:
        return Jaxpr(list(constvars), list(invars), list(outvars), list(eqns), effects, info,
                     consts=list(consts) if constvars else None)
    open_jaxpr = _core.Jaxpr(list(constvars), list(invars), list(outvars), list(eqns), effects,
                             info)
    return _core.ClosedJaxpr(open_jaxpr, list(consts))


def typed_ndarray(value: Any, aval: Any) -> Any:
    """A literal array with its aval (how jax >= 0.10 stores array literals in jaxprs)."""
    from jax._src.literals import TypedNdArray  # literal arrays: no public constructor
    return TypedNdArray(value, aval)


def typed_scalar(value: complex, dtype: Any) -> Any:
    """A weakly typed Python scalar literal of `dtype` (jax >= 0.10's ``TypedInt``/``TypedFloat``/
    ``TypedComplex``, how jaxprs hold Python-number literals).

    Raises:
        TypeError: `value` is not an int, float or complex.
    """
    from jax._src import literals  # no public constructor
    kinds = {int: literals.TypedInt, float: literals.TypedFloat, complex: literals.TypedComplex}
    if type(value) not in kinds:
        raise TypeError(f"a scalar literal must be an int, float or complex, not "
                        f"{type(value).__name__}")
    return kinds[type(value)](value, dtype)


def shaped_array(shape: Sequence[int], dtype: Any, weak_type: bool = False) -> Any:
    """The abstract value of an array (`jax.core.ShapedArray`)."""
    return _core.ShapedArray(tuple(shape), dtype, weak_type=weak_type)


def device_array(value: Any, weak_type: bool = False) -> Any:
    """A `jax.Array` holding `value` as it is (no dtype canonicalization), optionally weakly
    typed (as jax's own constants of Python scalars are)."""
    from jax._src.lax import lax as lax_internal  # weak-typed arrays: no public constructor
    array = jax.device_put(value)
    return lax_internal._convert_element_type(array, weak_type=True) if weak_type else array


def source_summary(eqn: Any) -> str:
    """``file:line (function)`` of the user code that made an equation, or "" when unknown."""
    try:
        from jax._src import source_info_util  # no public API reads an equation's source info
        return source_info_util.summarize(eqn.source_info)
    except Exception:  # source info is dropped when a jaxpr is pickled (artifacts, workers)
        return ""


def hlo_module_from_text(text: str) -> Any:
    """Parse HLO text into an ``HloModule`` (jaxlib's parser; no public wrapper exists)."""
    from jax._src.lib import xla_client  # private (no public wrapper): a moved one fails here
    return xla_client.hlo.hlo_module_from_text(text)


def hlo_module_from_proto(serialized: bytes) -> Any:
    """An ``HloModule`` from a serialized HloModuleProto (what module transformations receive)."""
    from jax._src.lib import xla_client  # private: a moved one fails here only
    return xla_client.hlo.HloModule.from_serialized_hlo_module_proto(serialized)


def hlo_print_options_with_constants() -> Any:
    """HLO print options that keep large constants (the default elides them as ``{...}``)."""
    from jax._src.lib import xla_client  # private: a moved one fails here only
    options = xla_client.hlo.HloPrintOptions()
    options.print_large_constants = True
    return options


def compile_hlo_text(text: str, options: dict[str, Any]) -> Any:
    """Compile one HLO module on the CPU backend with XLA options; returns a loaded executable.

    jax compiles only what it traced; a single fused computation cut out of a module needs the
    backend's own compile (via `jax._src.compiler` for the options it accepts).

    Raises:
        Exception: whatever XLA raises on a module it rejects.
    """
    # Private jax modules (no public API): a jax that moved them fails here only.
    from jax._src import compiler
    from jax._src.lib import xla_client
    from jax.extend.mlir import hlo_to_stablehlo

    module = hlo_module_from_text(text)
    mlir = hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
    backend = jax.extend.backend.get_backend("cpu")
    devices = xla_client.DeviceList(tuple(backend.devices()[:1]))
    compile_options = compiler.get_compile_options(1, 1, env_options_overrides=dict(options))
    return backend.compile_and_load(mlir, devices, compile_options)


def jaxpr_as_fun(closed: Any) -> Any:
    """A Python function that evaluates a closed jaxpr (its equations bound as they are)."""
    return _extend.jaxpr_as_fun(closed)


def portable_stablehlo(text: str) -> str:
    """StableHLO module text without locations or Shardy (``sdy.*``) attributes.

    Releases before 0.5 reject today's serialized exports and parse neither Shardy attributes nor
    every location form; without them the text compiles on every release since 0.4.33. Uses
    jax's MLIR context (`jax._src.interpreters.mlir`: it registers the dialects).
    """
    # Private jax modules (no public API): a jax that moved them fails here only.
    from jax._src.interpreters import mlir
    from jax.extend.mlir import ir

    with mlir.make_ir_context():
        module = ir.Module.parse(text)

        def strip(op: Any) -> Any:
            names = [a if isinstance(a, str) else a.name for a in op.attributes]
            for name in names:
                if name.startswith("sdy."):
                    del op.attributes[name]
            return ir.WalkResult.ADVANCE

        module.operation.walk(strip)
        for name in [a if isinstance(a, str) else a.name for a in module.operation.attributes]:
            if name.startswith("sdy."):
                del module.operation.attributes[name]
        return module.operation.get_asm(enable_debug_info=False)


def prng_internals() -> tuple[Any, Any]:
    """(`jax._src.random.core`, `jax._src.random.prng`): JAX's own definitions of the PRNG
    primitives on raw key data, which the reference evaluates (no public API exposes them)."""
    # Private jax modules (no public API): a jax that moved them fails here only.
    from jax._src.random import core as random_core
    from jax._src.random import prng
    return random_core, prng


def expand_hi_primitive(eqn: Any, invals: Sequence[Any]) -> list[Any]:
    """Bind the lower-level definition of a ``call_hi_primitive`` equation (jax >= 0.11's
    user-level primitives, e.g. ``SearchSorted``): its ``_prim.expand`` on the unflattened
    operands, flattened again."""
    prim = eqn.params["_prim"]
    args = jax.tree_util.tree_unflatten(prim.in_tree, list(invals))
    return list(jax.tree_util.tree_leaves(prim.expand(*args)))


def build_option_names() -> frozenset[str]:
    """Names of the compile options jax sets on ``ExecutableBuildOptions`` rather than on XLA's
    DebugOptions (jax 0.10 had four, 0.12 two): read off jax's own `get_compile_options`, which
    lists them in ``overrides_on_build_options``."""
    from jax._src import compiler  # the list is a local of get_compile_options
    source = inspect.getsource(compiler.get_compile_options)
    names = {"optimization_level", "memory_fitting_level", "exec_time_optimization_effort",
             "memory_fitting_effort"}
    return frozenset(n for n in names if f'"{n}"' in source or f"'{n}'" in source)


def module_primitives(packages: Sequence[str]) -> Iterator[tuple[str, str, Any]]:
    """(module name, attribute, primitive) for each `Primitive` bound at module level in an
    imported module of `packages` (top-level package names such as ``"jax"``)."""
    for modname, module in list(sys.modules.items()):
        if module is None or modname.split(".")[0] not in packages:
            continue
        for attr, value in list(vars(module).items()):
            if isinstance(value, Primitive):
                yield modname, attr, value


#: Modules defining primitives that importing jax's public API does not load (jax >= 0.10).
_PRIMITIVE_MODULES = ("jax._src.program_order", "jax._src.xla_metadata")


def primitive_names() -> frozenset[str]:
    """Names of the primitives the installed jax defines (``"add"``, ``"scatter-add"``, ``"jit"``).

    jax.extend lists only some (``jax.extend.core.primitives`` lacks ``composite``, the
    ``random_*`` and the callbacks), so this imports jax's public modules plus
    `_PRIMITIVE_MODULES` and collects every module-level `Primitive` in them.
    """
    for name in ("jax.numpy", "jax.random", "jax.scipy.special", "jax.custom_batching",
                 "jax.experimental", "jax.extend.core.primitives", *_PRIMITIVE_MODULES):
        try:
            importlib.import_module(name)
        except ImportError:  # an older jax without it
            continue
    return frozenset(prim.name for _, _, prim in module_primitives(("jax",)))


def hook_jit_calls(on_call: Any) -> Any:
    """Call ``on_call(jaxpr, args, name)`` before every top-level ``jax.jit`` call that compiles
    (a cache miss of jit's C++ dispatch: the first call of each program and shape), with the
    closed jaxpr and the concrete arguments; returns a function that removes the hook.

    Private: jit's Python fallback ``jax._src.pjit._pjit_call_impl_python`` is where both the
    dispatch of a traced program and the ``jit`` primitive's impl meet concrete arguments; no
    public API reports which programs a script compiles with which arrays. Looked up as a
    module global at every call, so replacing it takes effect at once.

    Raises:
        RuntimeError: this jax has no such function (capture is unavailable).
    """
    from jax._src import pjit as _pjit  # private: capture's hook, checked below

    original = getattr(_pjit, "_pjit_call_impl_python", None)
    if original is None:
        raise RuntimeError("this jax release has no jit dispatch hook xlaprobe knows "
                           "(jax._src.pjit._pjit_call_impl_python)")

    def hooked(*args: Any, **params: Any) -> Any:
        on_call(params["jaxpr"], args, params.get("name", "jit"))
        return original(*args, **params)

    _pjit._pjit_call_impl_python = hooked

    def remove() -> None:
        _pjit._pjit_call_impl_python = original
    return remove
