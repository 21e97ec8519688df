"""xlaprobe: differential checking of ML compilers (XLA driven from JAX).

The data flows one way: sources -> Program -> configurations (in isolated workers) -> oracle ->
findings -> store/report. See README.md for the command line.
"""

from typing import Any

from xlaprobe.knobs import Knob, knob
from xlaprobe.version import __version__

__all__ = ["Knob", "__version__", "bisect", "capture", "check", "knob", "localize", "reduce",
           "tuned"]

#: The Python API (`xlaprobe.api`): the commands as functions.
_API = ("check", "localize", "reduce", "bisect")


def __getattr__(name: str) -> Any:
    # These import jax and the store: only when asked for, so `import xlaprobe` stays light.
    if name in _API:
        from xlaprobe import api  # imports jax and the store (above)
        return getattr(api, name)
    if name == "tuned":
        from xlaprobe.tune.api import tuned  # imports jax and the store (above)
        return tuned
    if name == "capture":
        from xlaprobe.captures import capture  # imports numpy (above)
        return capture
    raise AttributeError(f"module 'xlaprobe' has no attribute {name!r}")
