"""The autotuner: compiler options and program knobs, a learned cost model, a correctness guard."""

from xlaprobe.knobs import Knob, knob

__all__ = ["Knob", "knob"]
