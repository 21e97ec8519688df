"""Localization of a failing configuration, one module per tier, each with a typed record:
`outputs` (tier 1: failing outputs and their cone) -> `equation` (tier 2: the jaxpr equation and
the smallest segment that fails alone) -> `kernels` (tier 3: its fused kernels) -> `op` and
`inside` (tier 4: the HLO instruction inside a kernel) -> `passes` (tier 5: the guilty pass),
composed by `api.localize` into a `Localization`. `bisect` holds the search state and the
searches tier 2 runs, `segments` cuts a program into segments that compile alone, `fusion`
reads the faulty compile's optimized HLO.
"""

from xlaprobe.localization.api import Localization, cycle_bound, localize
from xlaprobe.localization.bisect import Step
from xlaprobe.localization.fusion import make_pool

__all__ = ["Localization", "Step", "cycle_bound", "localize", "make_pool"]
