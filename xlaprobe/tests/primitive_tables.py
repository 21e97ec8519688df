"""Fingerprints of xlaprobe's four per-primitive tables, to prove a reorganisation kept them.

The tables are `xlaprobe.primitives.PRIMITIVES` (facts), `xlaprobe.configs.reference.RULES` (the
float64 reference), `xlaprobe.sources.ops.RULES` (the fuzzer's catalogue, whose ORDER steers the
generator's draws) and `xlaprobe.approximations.BUDGETS`. Each entry's fingerprint is what it
does, not where it is written: a fact record's fields; a reference rule's outputs on fixed
float64, int32 and uint32 operands (or the exception it raises); an op rule's fields, its bounds
on fixed operand bounds, a sample from a fixed seed and the jaxpr its build traces for it; a
budget's fields and its exponent terms on fixed operands. Programs the fuzzer generates from
fixed seeds are fingerprinted too.

``python -m tests.primitive_tables`` (from ``xlaprobe/``) rewrites the fixture
``tests/data/primitive_tables.json``: only when a table is meant to change (or jax's jaxpr text
does, on a jax upgrade).
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import pathlib
from typing import Any

import jax
import numpy as np

from xlaprobe import approximations, primitives
from xlaprobe.configs import reference
from xlaprobe.sources import ops
from xlaprobe.sources.generator import generate

FIXTURE = pathlib.Path(__file__).resolve().parent / "data" / "primitive_tables.json"

#: Fuzz seeds whose generated programs are fingerprinted (small programs: a few seconds).
SEEDS = tuple(range(12))

#: Parameters some elementwise reference rules need (others get none).
_PARAMS: dict[str, dict[str, Any]] = {
    "integer_pow": {"y": 3}, "reduce_precision": {"exponent_bits": 5, "mantissa_bits": 7},
    "convert_element_type": {"new_dtype": np.dtype(np.int32)},
    "bitcast_convert_type": {"new_dtype": np.dtype(np.int32)},
}

_FLOATS = np.array([-2.5, -1.0, -0.3, 0.0, 0.4, 0.97, 1.5, 3.0, 7.25, np.nan])
_INTS = np.array([-7, -1, 0, 1, 2, 5, 31, 100, -128, 3], np.int32)


def _digest(value: Any) -> str:
    return hashlib.sha256(repr(value).encode()).hexdigest()[:12]


def _array(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_array(v) for v in value]
    try:
        a = np.asarray(value)
    except Exception:  # a key array or another carrier: its type is the fingerprint
        return type(value).__name__
    return [a.dtype.str, a.shape, hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()[:12]]


class _RuleCtx:
    """The context a reference rule reads (native off), for operands of one dtype."""

    def __init__(self, dtype: Any, arity: int, out_dtype: Any) -> None:
        self.in_dtypes = (np.dtype(dtype),) * arity
        self.out_dtypes = (np.dtype(out_dtype),)
        self.out_shapes = (_FLOATS.shape,)
        self.native = False
        self.multiple_results = False
        self.eqn = None

    @property
    def out_dtype(self) -> np.dtype:
        return self.out_dtypes[0]

    def acc_dtype(self, dtype: Any = None) -> np.dtype:
        return np.dtype(np.float64)


def reference_fingerprint(rule: Any, name: str) -> list[Any]:
    """Outputs of `rule` on fixed operands: arities 1 to 3, float32-, int32- and uint32-typed."""
    out: list[Any] = []
    params = _PARAMS.get(name, {})
    for dtype, values in ((np.float32, _FLOATS), (np.int32, _INTS),
                          (np.uint32, np.abs(_INTS).astype(np.uint32))):
        for arity in (1, 2, 3):
            args = [np.roll(values, k) for k in range(arity)]
            out_dtype = params.get("new_dtype", dtype)
            try:
                with np.errstate(all="ignore"):
                    result = rule(_RuleCtx(dtype, arity, out_dtype), *args, **params)
                out.append(_array(result))
            except Exception as exc:  # which operands a rule refuses is part of what it does
                out.append(type(exc).__name__)
    return out


class _GenCtx:
    """What an op rule's sampler may ask of the generator: constants from a fixed stream."""

    x64 = False

    def constant(self, aval: Any, domain: Any, rng: np.random.Generator) -> np.ndarray:
        lo, hi = max(domain.lo, -4.0), min(domain.hi, 4.0)
        return np.asarray(rng.uniform(lo, hi, aval.shape)).astype(aval.dtype)

    def subgraph(self, in_avals: Any, out_avals: Any, rng: np.random.Generator) -> Any:
        raise NotImplementedError("no subgraphs in fingerprints")


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in sorted(value.items())}
    if isinstance(value, np.ndarray):
        return _array(value)
    if isinstance(value, np.dtype):
        return value.name
    if callable(value):
        return "callable"
    if isinstance(value, float) and not np.isfinite(value):
        return repr(value)
    return value if isinstance(value, (int, float, str, bool, type(None))) else repr(value)


def _traced(rule: Any, sample: Any) -> str:
    arrays = [op.const if op.const is not None else jax.ShapeDtypeStruct(op.aval.shape,
                                                                            op.aval.dtype)
              for op in sample.operands]
    dynamic = [i for i, a in enumerate(arrays) if isinstance(a, jax.ShapeDtypeStruct)]

    def fn(*xs: Any) -> Any:
        full = list(arrays)
        for i, x in zip(dynamic, xs):
            full[i] = x
        return rule.build(*full, **sample.params)
    return str(jax.make_jaxpr(fn)(*[arrays[i] for i in dynamic]))


def op_fingerprint(rule: Any) -> dict[str, Any]:
    """An op rule's fields, bounds on fixed operand bounds, a fixed-seed sample and its jaxpr."""
    fields = {f.name: _plain(getattr(rule, f.name)) for f in dataclasses.fields(rule)
              if f.name not in ("sample", "build", "exact_result", "bounds")}
    entry: dict[str, Any] = {"fields": fields, "samples": []}
    if rule.bounds is not None:
        bounds = [(-1.5, 2.0)] * max(rule.arity, 3)
        try:
            entry["bounds"] = _plain(tuple(float(b) for b in rule.bounds(bounds, {})))
        except Exception as exc:
            entry["bounds"] = type(exc).__name__
    for dtype in rule.dtypes[:3]:
        aval = ops.Aval((3, 4), ops.dtype_of(dtype))
        try:
            sample = rule.sample(np.random.default_rng(7), aval, _GenCtx())
        except Exception as exc:
            entry["samples"].append(type(exc).__name__)
            continue
        if sample is None:
            entry["samples"].append(None)
            continue
        avals = [op.aval for op in sample.operands]
        exact = rule.is_exact(avals, sample.params)
        try:
            jaxpr = _digest(_traced(rule, sample))
        except Exception as exc:
            jaxpr = type(exc).__name__
        entry["samples"].append({"sample": _digest(_plain(sample)), "exact": exact,
                                 "jaxpr": jaxpr})
    return entry


def budget_fingerprint(entry: Any) -> dict[str, Any]:
    """A budget's fields, with its exponent terms evaluated on fixed operands."""
    out = _plain(entry)
    if entry.terms is not None:
        args = [np.array([0.5, 2.0, 9.0]), np.array([0.25, 1.5, 3.0]), np.array([0.1, 0.5, 0.9])]
        out["terms"] = _array(np.round(entry.terms(args), 12))
    return out


def program_fingerprints() -> list[str]:
    """The jaxpr text and inputs of the programs the fuzzer generates from `SEEDS`, hashed."""
    found = []
    for seed in SEEDS:
        program = generate(seed, max_equations=12)
        found.append(_digest((str(program.jaxpr), [_array(x) for x in program.inputs])))
    return found


def tables() -> dict[str, Any]:
    """Every table's keys (the catalogue's in order) and each entry's fingerprint."""
    return {
        "primitives": {n: _digest(_plain(f)) for n, f in primitives.PRIMITIVES.items()},
        "reference": {n: _digest(reference_fingerprint(r, n))
                      for n, r in reference.RULES.items()},
        "ops_order": list(ops.RULES),
        "ops": {n: _digest(op_fingerprint(r)) for n, r in ops.RULES.items()},
        "budgets": {n: _digest(budget_fingerprint(b)) for n, b in approximations.BUDGETS.items()},
        "programs": program_fingerprints(),
    }


if __name__ == "__main__":
    FIXTURE.write_text(json.dumps(tables(), sort_keys=True, separators=(",", ":")) + "\n")
    print(f"wrote {FIXTURE} ({FIXTURE.stat().st_size} bytes)")
