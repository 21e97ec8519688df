"""Localization of a failing configuration: outputs -> jaxpr segment -> equation -> fused kernel.

`localize` runs tiers 1-3 (see `xlaprobe.localize.api`); `segments` cuts a program into segments
that compile alone; `fusion` reads the faulty compile's optimized HLO.
"""

from xlaprobe.localize.api import Localization, cycle_bound, localize
from xlaprobe.localize.bisect import Step
from xlaprobe.localize.fusion import make_pool

__all__ = ["Localization", "Step", "cycle_bound", "localize", "make_pool"]
