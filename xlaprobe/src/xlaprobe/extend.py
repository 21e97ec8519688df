"""A new primitive in one place: one record (`PrimitiveDef`: its facts, its reference rule, its
generator rule and its error budget) registered in one call.

This follows JAX's ``jax/_src/lax/lax.py``: a primitive and its rules sit in adjacent statements,
and each interpreter holds a table keyed by primitive that those statements fill. xlaprobe's
tables are `xlaprobe.primitives.PRIMITIVES` (the facts every interpreter and localization read),
`xlaprobe.configs.reference.RULES` (the float64 reference), `xlaprobe.sources.ops.RULES` (the
fuzzer's catalogue) and `xlaprobe.approximations.BUDGETS` (how far XLA may honestly land on an
approximate primitive). xlaprobe's own primitives are `PrimitiveDef` records too (its elementwise
families in ``xlaprobe/lax_rules/elementwise.py``), from which those tables are built; a new
primitive (one of a newer jax, or a user's own ``jax.extend.core.Primitive``) is a record that
`register` adds to them all, or the same in keywords with `define_primitive`::

    cube_p = Primitive("cube")                    # with its impl, abstract eval and lowering
    define_primitive(PrimitiveFacts("cube", rounding=True, elementwise=True), primitive=cube_p,
                     reference_rule=lambda ctx, x, **_: x * x * x,
                     generator=unary_rule("cube", cube))

Call it at the top level of the module that defines the primitive: worker processes import that
module by name when a program using the primitive reaches them (the program travels with the
primitive as a module attribute), and the import registers the rules there too. Name the module
in ``XLAPROBE_EXTENSIONS`` (comma-separated module names) for the command line to import it before
it builds or generates programs (``xlaprobe fuzz`` then generates the primitive).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from typing import Any

from xlaprobe import approximations, primitives
from xlaprobe.configs import reference
from xlaprobe.errors import InvalidArgument
from xlaprobe.lax_rules.record import PrimitiveDef
from xlaprobe.primitives import PrimitiveFacts
from xlaprobe.sources import ops
from xlaprobe.sources.ops import OpRule

#: The environment variable naming the modules the command line imports first (comma-separated).
ENVIRONMENT = "XLAPROBE_EXTENSIONS"

__all__ = ["ENVIRONMENT", "PrimitiveDef", "define_primitive", "load_extensions", "register",
           "unary_rule"]

#: The public factory of a unary elementwise generator rule (floating dtypes by default).
unary_rule = ops.unary_rule


def define_primitive(facts: PrimitiveFacts, *, primitive: Any = None,
                     reference_rule: Callable[..., Any] | None = None,
                     generator: OpRule | None = None,
                     budget: approximations.Approximation | None = None) -> PrimitiveDef:
    """Register a primitive's facts and rules in every table that reads them: `register` of the
    `PrimitiveDef` these arguments make.

    Args:
        facts: what interpreters and localization know about it (its ``name`` is the JAX
            primitive name).
        primitive: the ``jax.extend.core.Primitive`` it binds, a module-level attribute of the
            calling module (workers import that module to unpickle programs that use it); None
            for a primitive of jax itself.
        reference_rule: the float64 reference's rule, ``rule(ctx, *args, **params)`` on float64
            NumPy arrays (see `xlaprobe.configs.reference`); None: the reference reports the
            primitive unsupported (a tool error, never a finding).
        generator: the fuzzer's rule (`xlaprobe.sources.ops.OpRule`, e.g. from `unary_rule`);
            None: never generated.
        budget: its error budget (`xlaprobe.approximations.Approximation`); only for
            ``facts.approximate`` primitives (None: the default 2 ULPs).

    Returns:
        The record registered.

    Raises:
        ValueError: a rule or budget named otherwise than `facts`, a budget for a primitive that
            is not approximate, or a name xlaprobe already defines differently.
    """
    definition = PrimitiveDef(facts, reference_rule, generator, budget)
    _register(definition, primitive, sys._getframe(1).f_globals["__name__"])
    return definition


def register(definition: PrimitiveDef, *, primitive: Any = None) -> None:
    """Add one primitive's record to every table that reads it (facts, reference rule, generator
    rule, budget), as xlaprobe's own records are.

    Args:
        definition: the record (`PrimitiveDef`), validated when it was made.
        primitive: the ``jax.extend.core.Primitive`` it binds, a module-level attribute of the
            calling module (see `define_primitive`); None for a primitive of jax itself.

    Raises:
        ValueError: a name xlaprobe already defines with other facts.
    """
    _register(definition, primitive, sys._getframe(1).f_globals["__name__"])


def _register(definition: PrimitiveDef, primitive: Any, module: str) -> None:
    name = definition.name
    known = primitives.PRIMITIVES.get(name)
    if known is not None and known != definition.facts:
        raise ValueError(f"primitive '{name}' is already defined with other facts: {known}")
    primitives.PRIMITIVES[name] = definition.facts
    if primitive is not None:
        primitives.EXTENSION_PACKAGES.add(module.split(".")[0])
    if definition.reference is not None:
        reference.RULES[name] = definition.reference
    if definition.generator is not None:
        ops.RULES[name] = definition.generator
    if definition.budget is not None:
        approximations.BUDGETS[name] = definition.budget


def load_extensions(environ: dict[str, str] | None = None) -> list[str]:
    """Import the modules named in ``XLAPROBE_EXTENSIONS`` (their imports call `define_primitive`).

    Returns:
        The module names imported, in order.

    Raises:
        InvalidArgument: a module that cannot be imported (its error in one line).
    """
    names = [n.strip() for n in (environ if environ is not None else os.environ).get(
        ENVIRONMENT, "").split(",") if n.strip()]
    for name in names:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            raise InvalidArgument(f"{ENVIRONMENT}: cannot import '{name}' ({exc}); put its "
                                  "directory on PYTHONPATH") from exc
        except (Exception, SystemExit) as exc:  # a module that exits must not end xlaprobe silently
            raise InvalidArgument(f"{ENVIRONMENT}: importing '{name}' failed ({type(exc).__name__}: "
                                  f"{exc})") from exc
    return names
