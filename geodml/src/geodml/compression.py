"""Uplink compression of model updates with error feedback.

A data center sends C(delta + e) instead of its update delta, and keeps the residual
e <- delta + e - decode(C(delta + e)) for the next round (error feedback: Seide et al., "1-bit SGD",
Interspeech 2014; Stich, Cordonnier, Jaggi, "Sparsified SGD with memory", NeurIPS 2018;
Karimireddy et al., "Error feedback fixes SignSGD", ICML 2019), so nothing is lost, only delayed.

Encodings are real byte strings (numpy uint8 arrays) whose nbytes the ledger counts:
  ``topk:F`` - the k = max(1, ceil(F * m)) largest-magnitude entries of an m-vector: a float64
  weight header, then k int32 indices and k float32 values: 8 + 8k bytes.
  ``q8`` - uniform 8-bit quantization: float64 header, float32 offset and step, m uint8 codes
  (round to nearest): 16 + m bytes; error per entry <= step / 2.
  ``none`` - float64 weight then the m float64 values: 8 + 8m bytes.
"""

from __future__ import annotations

import math

import numpy as np

from geodml.errors import GeodmlError


def parse(spec: str) -> tuple[str, float]:
    """('none'|'topk'|'q8', fraction) from a spec; raises GeodmlError if malformed."""
    if spec in ("none", "q8"):
        return spec, 1.0
    if spec.startswith("topk:"):
        try:
            f = float(spec[5:])
        except ValueError:
            raise GeodmlError(f"malformed compression spec {spec!r} (use none, q8 or topk:FRACTION)") from None
        if not 0 < f <= 1:
            raise GeodmlError(f"compression {spec!r}: the fraction must be in (0, 1]")
        return "topk", f
    raise GeodmlError(f"unknown compression {spec!r} (use none, q8 or topk:FRACTION)")


def encoded_nbytes(spec: str, m: int) -> int:
    """Bytes of one encoded m-vector (with its float64 weight header)."""
    kind, f = parse(spec)
    if kind == "none":
        return 8 + 8 * m
    if kind == "q8":
        return 16 + m
    return 8 + 8 * max(1, math.ceil(f * m))


def encode(spec: str, v: np.ndarray, weight: float) -> np.ndarray:
    """Encode v (m,) float64 and a float64 weight (the DC's row count) as uint8 bytes."""
    kind, f = parse(spec)
    head = np.array([weight], dtype=np.float64).tobytes()
    if kind == "none":
        body = v.astype(np.float64).tobytes()
    elif kind == "q8":
        lo, hi = float(v.min()), float(v.max())
        step = (hi - lo) / 255.0 if hi > lo else 1.0
        codes = np.clip(np.rint((v - np.float32(lo)) / np.float32(step)), 0, 255).astype(np.uint8)
        body = np.array([lo, step], dtype=np.float32).tobytes() + codes.tobytes()
    else:
        k = max(1, math.ceil(f * len(v)))
        idx = np.sort(np.argpartition(np.abs(v), len(v) - k)[len(v) - k:]).astype(np.int32)
        body = idx.tobytes() + v[idx].astype(np.float32).tobytes()
    return np.frombuffer(head + body, dtype=np.uint8)


def decode(spec: str, msg: np.ndarray, m: int) -> tuple[np.ndarray, float]:
    """Inverse of encode: (v_hat (m,) float64, weight)."""
    kind, f = parse(spec)
    raw = msg.tobytes()
    weight = float(np.frombuffer(raw[:8], dtype=np.float64)[0])
    body = raw[8:]
    if kind == "none":
        return np.frombuffer(body, dtype=np.float64).copy(), weight
    if kind == "q8":
        lo, step = np.frombuffer(body[:8], dtype=np.float32)
        codes = np.frombuffer(body[8:], dtype=np.uint8)
        return (np.float32(lo) + codes.astype(np.float32) * np.float32(step)).astype(np.float64), weight
    k = max(1, math.ceil(f * m))
    idx = np.frombuffer(body[: 4 * k], dtype=np.int32)
    vals = np.frombuffer(body[4 * k:], dtype=np.float32)
    out = np.zeros(m)
    out[idx] = vals
    return out, weight


class ErrorFeedback:
    """Per-DC residual memory for one compression spec."""

    def __init__(self, spec: str):
        parse(spec)
        self.spec = spec
        self.memory: dict[str, np.ndarray] = {}

    def send(self, dc: str, delta: np.ndarray, weight: float) -> np.ndarray:
        """Encode delta + memory for dc, keep the residual, return the uint8 message."""
        e = self.memory.get(dc)
        target = delta if e is None else delta + e
        msg = encode(self.spec, target, weight)
        self.memory[dc] = target - decode(self.spec, msg, len(target))[0]
        return msg
