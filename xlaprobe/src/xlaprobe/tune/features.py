"""Features of a compiled program and of a candidate configuration, for the tuner's cost model.

Program features come from XLA's optimized HLO text and ``compiled.cost_analysis()``: opcode and
fusion-kind histograms, library calls (YNNPACK/XNNPACK/oneDNN custom calls and library
fusions), the elements produced by dots and convolutions, while-loop trip counts, and flops,
bytes accessed and transcendentals. Candidate features are one indicator per non-default value.
Features are sparse ``name -> float`` dicts; `FeatureTable` aligns them into a matrix (absent
features are NaN, which gradient-boosted trees treat as missing).
"""

from __future__ import annotations

import collections
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from xlaprobe.hlo import HloText

#: Opcodes counted individually (others count under ``op:other``).
OPCODES = ("fusion", "dot", "convolution", "custom-call", "reduce", "reduce-window", "while",
           "conditional", "call", "copy", "transpose", "broadcast", "reshape", "bitcast",
           "exponential", "log", "tanh", "logistic", "rsqrt", "sqrt", "divide", "multiply",
           "add", "subtract", "maximum", "select", "compare", "gather", "scatter", "slice",
           "dynamic-slice", "dynamic-update-slice", "concatenate", "pad", "sort", "iota",
           "convert", "constant", "parameter", "tuple", "get-tuple-element")
_FUSION_KIND = re.compile(r"\bkind=k(\w+)")
_CALL_TARGET = re.compile(r'custom_call_target="([^"]+)"')
_TRIP_COUNT = re.compile(r'"known_trip_count":\{"n":"(\d+)"\}')
_LIBRARY = re.compile(r"\b(ynn|xnn|onednn|eigen)\w*", re.IGNORECASE)


def hlo_features(hlo_text: str, cost: Mapping[str, float] | None = None) -> dict[str, float]:
    """Features of one optimized HLO module (``compiled.as_text()``).

    Args:
        hlo_text: the module text.
        cost: ``compiled.cost_analysis()`` (keys ``flops``, ``bytes accessed``,
            ``transcendentals``), or None.

    Returns:
        ``name -> value``: ``op:<opcode>`` counts, ``fusion:<kind>`` counts, ``lib:<name>``
        mentions of library calls, ``instructions``, ``log_dot_elements`` and
        ``log_conv_elements`` (log1p of elements produced), ``while_trips`` (sum of known trip
        counts), ``log_flops``, ``log_bytes``, ``log_transcendentals`` (log1p), and
        ``log_arithmetic_intensity`` (flops per byte, log1p). Counts are log1p-scaled too.
    """
    ops: collections.Counter[str] = collections.Counter()
    dot_elements = conv_elements = 0
    for instruction in HloText(hlo_text).instructions():
        opcode = instruction.opcode
        ops[opcode if opcode in OPCODES else "other"] += 1
        if opcode == "dot":
            dot_elements += math.prod(instruction.dims)
        elif opcode == "convolution":
            conv_elements += math.prod(instruction.dims)
    features = {f"op:{name}": math.log1p(count) for name, count in ops.items()}
    features["instructions"] = math.log1p(sum(ops.values()))
    for kind, count in collections.Counter(_FUSION_KIND.findall(hlo_text)).items():
        features[f"fusion:{kind}"] = math.log1p(count)
    for target in _CALL_TARGET.findall(hlo_text):
        features[f"call:{target[:40]}"] = features.get(f"call:{target[:40]}", 0.0) + 1.0
    for name, count in collections.Counter(m.lower() for m in _LIBRARY.findall(hlo_text)).items():
        features[f"lib:{name}"] = math.log1p(count)
    features["log_dot_elements"] = math.log1p(dot_elements)
    features["log_conv_elements"] = math.log1p(conv_elements)
    features["while_trips"] = math.log1p(sum(int(n) for n in _TRIP_COUNT.findall(hlo_text)))
    if cost:
        flops = float(cost.get("flops", 0.0))
        moved = float(cost.get("bytes accessed", 0.0))
        features["log_flops"] = math.log1p(max(flops, 0.0))
        features["log_bytes"] = math.log1p(max(moved, 0.0))
        features["log_transcendentals"] = math.log1p(max(float(cost.get("transcendentals", 0.0)), 0.0))
        features["log_arithmetic_intensity"] = math.log1p(max(flops, 0.0) / max(moved, 1.0))
    return features


def candidate_features(candidate: Mapping[str, Any], default: Mapping[str, Any]) -> dict[str, float]:
    """One indicator ``set:<dimension>=<value>`` per value that differs from the default."""
    return {f"set:{name}={value}": 1.0 for name, value in candidate.items()
            if value != default.get(name)}


#: The totals kept of ``cost_analysis()`` (it also lists per-operand details).
COST_KEYS = ("flops", "bytes accessed", "transcendentals", "optimal_seconds")


def cost_dict(cost: Any) -> dict[str, float]:
    """The `COST_KEYS` of ``compiled.cost_analysis()`` (a dict, or a list of one dict in older
    jax) as floats."""
    if isinstance(cost, (list, tuple)):
        cost = cost[0] if cost else {}
    return {str(k): float(v) for k, v in dict(cost or {}).items()
            if k in COST_KEYS and isinstance(v, (int, float)) and math.isfinite(float(v))}


class FeatureTable:
    """A fixed column order over sparse feature dicts.

    Args:
        rows: the dicts whose union of keys makes the columns (sorted).
    """

    def __init__(self, rows: Sequence[Mapping[str, float]]):
        self.columns = sorted({key for row in rows for key in row})
        self._index = {name: i for i, name in enumerate(self.columns)}

    def matrix(self, rows: Sequence[Mapping[str, float]]) -> np.ndarray:
        """float64[len(rows), len(columns)]; features absent from a row, or unknown columns'
        features, give NaN / are dropped."""
        out = np.full((len(rows), len(self.columns)), np.nan)
        for i, row in enumerate(rows):
            for key, value in row.items():
                j = self._index.get(key)
                if j is not None:
                    out[i, j] = value
        return out
