"""Outcome: what one run of one configuration on one Program gave."""

from __future__ import annotations

import dataclasses
import enum

import numpy as np


class OutcomeKind(enum.Enum):
    """How a run ended."""

    RAN = "ran"                      # outputs are available
    COMPILE_ERROR = "compile-error"  # the compiler or the interpreter raised
    CRASH = "crash"                  # the worker process died (abort, segfault, ...)
    TIMEOUT = "timeout"              # the run exceeded its time limit and the worker was killed


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    """The result of running one configuration in a worker.

    Attributes:
        config: the configuration spec string, e.g. ``"xla:O0"``.
        kind: how the run ended.
        outputs: the flat outputs (one NumPy array per jaxpr outvar) when ``kind is RAN``, else ().
        error: one-line error for COMPILE_ERROR; the stderr tail (last ~2 kB) for CRASH; a short
            description for TIMEOUT.
        signal: the signal number that killed the worker (CRASH), else None.
        seconds: wall time of compile plus run in the worker (s); for TIMEOUT the limit (s).
    """

    config: str
    kind: OutcomeKind
    outputs: tuple[np.ndarray, ...] = ()
    error: str = ""
    signal: int | None = None
    seconds: float = 0.0

    @property
    def ran(self) -> bool:
        """True when outputs are available."""
        return self.kind is OutcomeKind.RAN
