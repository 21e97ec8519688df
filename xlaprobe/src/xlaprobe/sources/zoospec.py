"""The record of one zoo entry, shared by our own zoo (`xlaprobe.sources.models`) and the
third-party one (`xlaprobe.sources.ecosystem`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

#: ``seed -> (fn, args)``: a zoo entry's build function.
BuildFn = Callable[[int], tuple[Callable[..., Any], tuple[Any, ...]]]


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """One entry of the zoo.

    Attributes:
        name: registry key, e.g. ``"transformer_lm"``.
        description: one line for listings.
        kind: ``"train_step"`` (returns ``(loss, *new_state)``) or ``"forward"`` (returns
            outputs); `xlaprobe.sources.models` describes the arguments of each.
        build: ``seed -> (fn, args)``; all random initialization happens here, never in ``fn``.
            A model with knobs takes them as keyword arguments: ``build(seed, **knob_values)``.
        knobs: program knobs the tuner may set (`xlaprobe.knobs.Knob`), by name.
        large: a check takes minutes (benchmarks, ``-m slow`` tests); `SMALL` lists the others.
        library: the library the program is written with: ``"xlaprobe"`` for our own zoo,
            else the third-party library of an `xlaprobe.sources.ecosystem` workload.
    """

    name: str
    description: str
    kind: str
    build: BuildFn
    knobs: dict[str, Any] = dataclasses.field(default_factory=dict)
    large: bool = False
    library: str = "xlaprobe"
