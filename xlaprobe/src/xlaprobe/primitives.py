"""What xlaprobe knows about each JAX primitive: one frozen record per primitive name.

JAX keeps a primitive's rules beside the primitive; xlaprobe's interpreters and localization need
a few plain facts about a primitive (does IEEE arithmetic round its result, is it a transcendental
XLA approximates, is it a call that evaluates a sub-jaxpr, does it only move data), and this table
holds them, once, instead of name sets beside each user. Most primitives' facts come from their
records (`xlaprobe.lax_rules`, one `PrimitiveDef` with facts, reference rule, generator rule and
budget per primitive: elementwise, special functions, reductions, contractions and windows,
shapes, indexing, sorting, control flow); the other families' facts (calls, callbacks,
annotations, linear algebra, FFT, PRNG, collectives) are written here, their rules with their users (``configs/reference.py``, ``sources/ops.py``, ``repro.py``'s printer): tests check
that each of their names is known here.

The call-like table is the one that canonical form (``jaxprs.canonicalize``), ``eager`` and
``reference`` all follow: every call-like primitive is evaluated by recursing into its sub-jaxpr,
and canonical form inlines those marked `PrimitiveFacts.inlined`.

Names are jax 0.12's; a name only older releases use carries `PrimitiveFacts.retired`. A name this
table lacks has no facts (`facts` returns an empty record): it computes, it is not called into, and
its result counts as exact.

Source: the primitive definitions in ``jax/_src/lax/*.py`` and ``jax/_src/*.py`` (names and
parameters, checked by ``tests/test_primitives.py`` against the jax installed).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from xlaprobe import jaxcompat
from xlaprobe.lax_rules import registry
from xlaprobe.lax_rules.facts import Movement, PrimitiveFacts

__all__ = ["EXTENSION_PACKAGES", "Movement", "PRIMITIVES", "PrimitiveFacts", "by_name",
           "call_jaxpr", "facts", "is_call_like", "names"]


def _family(names: str, **known: Any) -> list[PrimitiveFacts]:
    """One record per whitespace-separated name, all with the same facts."""
    return [PrimitiveFacts(name, **known) for name in names.split()]


def _call(name: str, *keys: str, inlined: bool = True, retired: str = "") -> PrimitiveFacts:
    return PrimitiveFacts(name, call_keys=keys, inlined=inlined, retired=retired)


_Named = TypeVar("_Named")


def by_name(records: Iterable[_Named], table: str) -> dict[str, _Named]:
    """Records keyed by their ``name`` (a primitive name), as every per-primitive table is built.

    Args:
        records: objects with a ``name`` attribute, in table order.
        table: what the table is, for the error (``"op catalogue"``).

    Raises:
        ValueError: two records carry the same name.

    >>> by_name([PrimitiveFacts("add"), PrimitiveFacts("add")], "test")
    Traceback (most recent call last):
    ValueError: test: 'add' defined twice
    """
    keyed: dict[str, _Named] = {}
    for record in records:
        name = record.name  # type: ignore[attr-defined]
        if name in keyed:
            raise ValueError(f"{table}: '{name}' defined twice")
        keyed[name] = record
    return keyed


#: primitive name -> facts.
PRIMITIVES: dict[str, PrimitiveFacts] = by_name(itertools.chain.from_iterable([
    # elementwise, special functions, reductions, contractions and windows, shapes, indexing,
    # sorting, control flow: one record each (xlaprobe.lax_rules)
    registry.facts(),
    # data movement
    _family("copy", movement=Movement.COPY, takes_keys=True),
    _family("iota_2x32_shape threefry2x32 platform_index stop_gradient "
            "with_memory_space_constraint"),
    # linear algebra: factorizations and solves (LAPACK on XLA:CPU; triangular_solve is XLA's)
    _family("cholesky lu qr geqrf householder_product eigh svd triangular_solve "
            "tridiagonal_solve symmetric_product", rounding=True, accumulates=True),
    _family("lu_pivots_to_permutation rng_bit_generator"),
    # FFT: sums of n terms per output element
    _family("fft", rounding=True, accumulates=True),
    # callbacks and annotations: PRNG keys pass through whole
    _family("pure_callback io_callback debug_callback debug_print tie optimization_barrier "
            "sharding_constraint reshard layout_constraint device_put pvary name",
            takes_keys=True),
    # shard_map and its collectives (the reference runs the body per device)
    _family("psum psum_invariant reduce_scatter", rounding=True, accumulates=True),
    _family("shard_map pmax pmin all_gather all_gather_invariant ppermute all_to_all axis_index "
            "pbroadcast"),
    _family("random_seed random_split random_fold_in random_bits random_wrap random_unwrap "
            "random_clone random_gamma", takes_keys=True),
    # call-like: forward semantics "evaluate the sub-jaxpr"
    [_call("jit", "jaxpr"), _call("pjit", "jaxpr", retired="jax <= 0.6 (jit since 0.7)"),
     _call("eval_jaxpr", "call_jaxpr"),
     _call("closed_call", "call_jaxpr", retired="jax <= 0.11 (eval_jaxpr since 0.12)"),
     _call("custom_jvp_call", "call_jaxpr"), _call("custom_vjp_call", "call_jaxpr"),
     _call("custom_vjp_call_jaxpr", "fun_jaxpr", retired="jax <= 0.5"),
     _call("remat2", "jaxpr"),  # jax.checkpoint
     _call("program_order", "call_jaxpr"),  # jax >= 0.11: orders effects only
     _call("xla_metadata_call", "jaxpr"),  # jax >= 0.10: attaches XLA metadata only
     # XLA sees a composite as one op with a decomposition: canonical form keeps it
     _call("composite", "call_jaxpr", "jaxpr", inlined=False),  # "jaxpr" until jax 0.10
     _call("custom_vmap_call", "call", inlined=False),
     # the linearization of a custom_jvp/vjp: never in a forward program, not evaluated by call
     PrimitiveFacts("custom_lin")],
]), "primitive registry")


#: Top-level packages (or modules) that define primitives of extensions (`xlaprobe.extend.define_primitive`): programs that
#: use one travel to worker processes as a reference to the module's attribute.
EXTENSION_PACKAGES: set[str] = set()


def facts(name: str) -> PrimitiveFacts:
    """The facts about the primitive named `name`; a record with no facts for an unknown name.

    >>> facts("exp").approximate, facts("add").approximate, facts("reshape").movement.value
    (True, False, 'reshape')
    >>> facts("pallas_call") == PrimitiveFacts("pallas_call")
    True
    """
    record = PRIMITIVES.get(name)
    return record if record is not None else PrimitiveFacts(name)


def names(predicate: Callable[[PrimitiveFacts], bool]) -> frozenset[str]:
    """Names of the known primitives whose facts satisfy `predicate`.

    >>> sorted(names(lambda p: p.movement is Movement.RESHAPE))
    ['reshape', 'squeeze']
    """
    return frozenset(name for name, record in PRIMITIVES.items() if predicate(record))


def is_call_like(eqn: Any) -> bool:
    """True when the equation's primitive only evaluates a sub-jaxpr (see `call_jaxpr`)."""
    return facts(eqn.primitive.name).call_like


def call_jaxpr(eqn: Any) -> Any:
    """The closed jaxpr a call-like equation evaluates on its operands (consts bound).

    Call-like primitives that carry constants (custom_jvp_call, custom_vjp_call) pass them as
    leading operands already, so the operands are exactly the jaxpr's inputs.

    Raises:
        KeyError: the equation is not call-like, or holds none of its primitive's `call_keys`.
    """
    record = facts(eqn.primitive.name)
    for key in record.call_keys:
        if key in eqn.params:
            return jaxcompat.as_closed(eqn.params[key])
    raise KeyError(f"equation of '{record.name}' holds no call jaxpr (parameters "
                   f"{sorted(eqn.params)}; call-like primitives: see xlaprobe/primitives.py)")
