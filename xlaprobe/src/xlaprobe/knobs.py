"""Program knobs: choices a program exposes that change the code it traces (block sizes, chunk
sizes, remat policy, layout), searched by the tuner beside XLA's compiler options.

A user function declares a knob as a keyword-only parameter whose default is `knob(...)`::

    def step(params, batch, *, block: int = xlaprobe.knob(128, (64, 128, 256))):
        ...

The zoo declares its knobs in `xlaprobe.sources.models.ModelSpec.knobs`.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from xlaprobe.errors import InvalidArgument


@dataclasses.dataclass(frozen=True)
class Knob:
    """A program knob: a default and the values the tuner may choose from.

    Attributes:
        default: the value the program uses untuned (one of `choices`).
        choices: the allowed values (hashable, JSON-representable: int, float, str, bool).
        help: one line for listings.
    """

    default: Any
    choices: tuple[Any, ...]
    help: str = ""

    def __post_init__(self) -> None:
        if not self.choices:
            raise InvalidArgument("a knob needs at least one choice")
        if self.default not in self.choices:
            raise InvalidArgument(f"knob default {self.default!r} is not among its choices "
                                  f"{list(self.choices)}")
        for value in self.choices:
            if not isinstance(value, (int, float, str, bool)):
                raise InvalidArgument(f"knob choice {value!r} is not an int, float, str or bool")


def knob(default: Any, choices: tuple[Any, ...] | list[Any], help: str = "") -> Any:
    """Declare a knob as the default of a keyword-only parameter (see the module docstring).

    Returns:
        A `Knob`; the tuner (and every other xlaprobe entry point) calls the function with a
        concrete value in its place.

    Raises:
        InvalidArgument: no choices, a default outside them, or a choice of an unsupported type.
    """
    try:
        return Knob(default, tuple(choices), help)
    except InvalidArgument as exc:
        # Raised while a def statement evaluates its defaults: the function does not exist yet,
        # so the line that declares the knob is what to name.
        caller = inspect.stack(context=0)[1]
        raise InvalidArgument(f"{exc} (at {caller.filename}:{caller.lineno})") from None


def declared_knobs(fn: Callable[..., Any]) -> dict[str, Knob]:
    """The knobs a function declares: keyword-only parameters whose default is a `Knob`.

    Raises:
        InvalidArgument: a `Knob` default on a parameter that is not keyword-only (it would be
            filled by a positional argument).
    """
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return {}
    for p in parameters:
        if isinstance(p.default, Knob) and p.kind is not inspect.Parameter.KEYWORD_ONLY:
            name = getattr(fn, "__qualname__", getattr(fn, "__name__", "the function"))
            raise InvalidArgument(f"knob parameter '{p.name}' of {name} must be keyword-only: "
                                  f"def {getattr(fn, '__name__', 'f')}(..., *, {p.name}=knob(...))")
    return {p.name: p.default for p in parameters
            if p.kind is inspect.Parameter.KEYWORD_ONLY and isinstance(p.default, Knob)}


def resolve_knobs(knobs: Mapping[str, Knob], values: Mapping[str, Any] | None) -> dict[str, Any]:
    """Every knob's value: the given ones, the defaults for the rest.

    Raises:
        InvalidArgument: an unknown knob name, or a value outside the knob's choices.
    """
    values = dict(values or {})
    unknown = sorted(set(values) - set(knobs))
    if unknown:
        raise InvalidArgument(f"unknown knob(s) {', '.join(unknown)}; this program declares "
                              f"{', '.join(sorted(knobs)) or 'none'}")
    resolved = {}
    for name, declared in knobs.items():
        value = values.get(name, declared.default)
        if value not in declared.choices:
            raise InvalidArgument(f"knob {name}={value!r} is not one of "
                                  f"{', '.join(map(repr, declared.choices))}")
        resolved[name] = value
    return resolved
