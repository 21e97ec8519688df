"""xlaprobe: differential checking of ML compilers (XLA driven from JAX).

The data flows one way: sources -> Program -> configurations (in isolated workers) -> oracle ->
findings -> store/report. See README.md for the command line.
"""

from typing import Any

from xlaprobe.tune.knobs import Knob, knob
from xlaprobe.version import __version__

__all__ = ["Knob", "__version__", "capture", "knob", "tuned"]


def __getattr__(name: str) -> Any:
    # These import jax and the store: only when asked for, so `import xlaprobe` stays light.
    if name == "tuned":
        from xlaprobe.tune.api import tuned
        return tuned
    if name == "capture":
        from xlaprobe.captures import capture
        return capture
    raise AttributeError(f"module 'xlaprobe' has no attribute {name!r}")
