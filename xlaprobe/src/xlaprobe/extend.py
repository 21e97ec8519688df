"""A new primitive in one place: `define_primitive` registers its facts, its reference rule, its
generator rule and its error budget in one call.

This follows JAX's ``jax/_src/lax/lax.py``: a primitive and its rules sit in adjacent statements,
and each interpreter holds a table keyed by primitive that those statements fill. xlaprobe's
tables are `xlaprobe.primitives.PRIMITIVES` (the facts every interpreter and localization read),
`xlaprobe.configs.reference.RULES` (the float64 reference), `xlaprobe.sources.ops.RULES` (the
fuzzer's catalogue) and `xlaprobe.approximations.BUDGETS` (how far XLA may honestly land on an
approximate primitive). xlaprobe's own primitives fill them from their own modules; a new
primitive (one of a newer jax, or a user's own ``jax.extend.core.Primitive``) fills them all
here::

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
from xlaprobe.primitives import PrimitiveFacts
from xlaprobe.sources import ops
from xlaprobe.sources.ops import OpRule

#: The environment variable naming the modules the command line imports first (comma-separated).
ENVIRONMENT = "XLAPROBE_EXTENSIONS"

__all__ = ["ENVIRONMENT", "define_primitive", "load_extensions", "unary_rule"]

#: The public factory of a unary elementwise generator rule (floating dtypes by default).
unary_rule = ops.unary_rule


def define_primitive(facts: PrimitiveFacts, *, primitive: Any = None,
                     reference_rule: Callable[..., Any] | None = None,
                     generator: OpRule | None = None,
                     budget: approximations.Approximation | None = None) -> None:
    """Register a primitive's facts and rules in every table that reads them.

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

    Raises:
        ValueError: a rule or budget named otherwise than `facts`, a budget for a primitive that
            is not approximate, or a name xlaprobe already defines differently.
    """
    name = facts.name
    for what, record in (("generator rule", generator), ("budget", budget)):
        if record is not None and record.name != name:
            raise ValueError(f"primitive '{name}': its {what} is named '{record.name}'")
    if budget is not None and not facts.approximate:
        raise ValueError(f"primitive '{name}': a budget needs facts.approximate")
    known = primitives.PRIMITIVES.get(name)
    if known is not None and known != facts:
        raise ValueError(f"primitive '{name}' is already defined with other facts: {known}")
    primitives.PRIMITIVES[name] = facts
    if primitive is not None:
        primitives.EXTENSION_PACKAGES.add(sys._getframe(1).f_globals["__name__"].split(".")[0])
    if reference_rule is not None:
        reference.RULES[name] = reference_rule
    if generator is not None:
        ops.RULES[name] = generator
    if budget is not None:
        approximations.BUDGETS[name] = budget


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
