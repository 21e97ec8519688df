"""The op catalogue of the fuzzer: one frozen `OpRule` per lax primitive, keyed by primitive name.

A rule says what the generator (`xlaprobe.sources.generator`) needs to emit its primitive in a
valid program: the dtypes of its primary operand, how to sample the other operands (as `Operand`
requirements: abstract value, value `Domain`, exactness) and the parameters from a NumPy
``Generator``, and how to build it with JAX's public lax function (so the jaxpr holds JAX's own
primitive). The rules of the elementwise primitives, reductions, shapes, indexing and sorting
primitives sit in their records (``lax_rules/<family>.py``, beside each one's facts, reference
rule and budget), built from `OpRule` and the sampler factories of ``lax_rules/opspec.py``; this
module adds the other families (contractions, windows, control flow, random bits) and keys the
catalogue. Its ORDER matters: the
generator draws a rule by its position.

Exactness (why `Operand.exact` exists). The oracle judges integer and boolean outputs exactly and
floating outputs within an error budget. A *discontinuous* op (a comparison, floor, a float to int
conversion, argmax, the keys of a multi-operand sort, a bitcast of a float) turns a rounding
difference between XLA and the float64 reference into a different integer, boolean or branch: a
false alarm. So a discontinuous op only takes floating operands that are *exact* (inputs, and
values computed from inputs by ops that never round: structural ops, max/min, select, neg, ...),
hold no subnormal (XLA:CPU flushes subnormal operands of comparisons: ``x > 0`` is false for
``x = 1e-40``) and, where the op reads the bits of NaNs (bitcasts, top_k's NaN order), no NaN.
Operand domains document the rest (each with its reason in `OpRule.notes`).

Source: XLA operation semantics (https://openxla.org/xla/operation_semantics) and the StableHLO
specification (https://openxla.org/stablehlo/spec) for what is implementation-defined.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax import lax

from xlaprobe import primitives
from xlaprobe.lax_rules import registry
from xlaprobe.lax_rules.opspec import (
    ABOVE_MINUS_ONE, ALL, ANGLE, ANY, AT_LEAST_ONE, FLOATS, GAMMA, INTS, MODERATE, NO_NAN, NONZERO,
    NUMERIC, POSITIVE, SIGNED, UNIT, UNSIGNED, X64, Aval, Context, Domain, Operand, OpRule,
    Sample, dtype_of, is_float, is_int, unary_rule)
from xlaprobe.lax_rules.opspec import choice as _choice
from xlaprobe.lax_rules.opspec import int_range as _int_range

__all__ = ["Aval", "Domain", "Operand", "OpRule", "Sample", "RULES", "FLOATS", "SIGNED",
           "UNSIGNED", "INTS", "NUMERIC", "ALL", "X64", "dtype_of", "is_float", "is_int",
           "unary_rule", "ANY", "POSITIVE", "ABOVE_MINUS_ONE", "AT_LEAST_ONE", "UNIT", "MODERATE",
           "ANGLE", "NONZERO", "GAMMA", "NO_NAN"]

# ---------------------------------------------------------------------------------------------
# control flow

_COMPARATORS = {"lt": lax.lt, "le": lax.le, "gt": lax.gt, "ge": lax.ge, "ne": lax.ne}


def _trip_plan(rng: np.random.Generator, dtype: np.dtype) -> dict[str, Any]:
    """Constant start, bound and step of a counted loop with 0 to 8 trips."""
    trips = int(_choice(rng, [0, 1, 1, 1, 2, 3, 5, 8]))
    # Steps beyond 1 with bounds that are no multiple of them: the last trip overshoots the
    # bound, a corner of trip-count analysis.
    step = int(_choice(rng, [1, 2, 3, 4, -1, -2]))
    lo_t, hi_t = _int_range(dtype)
    if step < 0 and lo_t == 0:
        step = -step
    start = int(rng.integers(max(lo_t, -5), min(hi_t, 5) + 1))
    last = start + trips * step  # the counter after the last trip
    if not lo_t <= last <= hi_t:
        start, last = 0, trips * step
    if step > 0:
        cmp = _choice(rng, ["lt", "le", "ne"], [2, 1, 1])
        # lt: stop = last - step + 1 .. last; le: stop = last - 1; ne: stop = last
        stop = {"lt": last - int(rng.integers(0, step)), "le": last - 1, "ne": last}[cmp]
    else:
        cmp = _choice(rng, ["gt", "ge", "ne"], [2, 1, 1])
        stop = {"gt": last + int(rng.integers(0, -step)), "ge": last + 1, "ne": last}[cmp]
    if cmp == "ne" and trips == 0:
        stop = start
    if not lo_t <= stop <= hi_t:
        cmp, stop = ("lt", last) if step > 0 else ("gt", last)
    return {"start": start, "stop": stop, "step": step, "cmp": cmp, "trips": trips,
            "counter_dtype": dtype}


def _while_sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
    counter = dtype_of(_choice(rng, ["int32", "int32", "int8", "uint8", "int16", "uint32"]))
    plan = _trip_plan(rng, counter)
    carries = [aval]
    if rng.random() < 0.3:
        carries.append(aval.with_dtype(_choice(rng, NUMERIC)))
    # The body sees the carries and the counter; it returns new carries.
    body, captured = ctx.subgraph(carries + [Aval((), counter)], carries, rng)
    operands = tuple(Operand(a) for a in carries) + tuple(
        Operand(a, value=v) for v, a in captured_avals(body, captured))
    return Sample(operands, {"body": body, "n_carry": len(carries), **plan})


def captured_avals(body: Any, captured: Sequence[int]) -> list[tuple[int, Aval]]:
    """(outer value id, aval) of each value a subgraph captures, in its input order."""
    n = len(body.input_avals) - len(captured)
    return [(v, body.input_avals[n + i]) for i, v in enumerate(captured)]


def _while_build(*operands: Any, body: Any, n_carry: int, start: int, stop: int, step: int,
                 cmp: str, trips: int, counter_dtype: Any) -> Any:
    carry, captured = operands[:n_carry], operands[n_carry:]
    dtype = dtype_of(counter_dtype)

    def cond(c: Any) -> Any:
        return _COMPARATORS[cmp](c[0], np.asarray(stop, dtype))

    def step_fn(c: Any) -> Any:
        outs = body(*c[1:], c[0], *captured)
        return (lax.add(c[0], np.asarray(step, dtype)), *outs)
    return tuple(lax.while_loop(cond, step_fn, (np.asarray(start, dtype), *carry)))


def _scan_sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
    length = int(rng.integers(1, 7))
    carries = [aval]
    xs = [aval.with_shape((length,) + aval.shape)]
    if rng.random() < 0.3:
        other = aval.with_dtype(_choice(rng, NUMERIC))
        xs.append(other.with_shape((length,) + other.shape))
    ys = [carries[0]] if rng.random() < 0.7 else []
    body, captured = ctx.subgraph(carries + [x.with_shape(x.shape[1:]) for x in xs],
                                  carries + ys, rng)
    operands = tuple(Operand(a) for a in carries + xs) + tuple(
        Operand(a, value=v) for v, a in captured_avals(body, captured))
    unroll = _choice(rng, [1, 1, 2, True])
    return Sample(operands, {"body": body, "n_carry": len(carries), "n_xs": len(xs),
                             "reverse": bool(rng.random() < 0.3), "unroll": unroll})


def _scan_build(*operands: Any, body: Any, n_carry: int, n_xs: int, reverse: bool, unroll: Any) -> Any:
    carry = operands[:n_carry]
    xs = operands[n_carry:n_carry + n_xs]
    captured = operands[n_carry + n_xs:]

    def f(c: Any, x: Any) -> Any:
        outs = body(*c, *x, *captured)
        return tuple(outs[:n_carry]), tuple(outs[n_carry:])
    c, ys = lax.scan(f, tuple(carry), tuple(xs), reverse=reverse, unroll=unroll)
    return (*c, *ys)


def _cond_sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
    n = int(_choice(rng, [2, 2, 3]))
    if n == 2 and rng.random() < 0.5:
        index = Operand(Aval((), dtype_of("bool")))
    else:
        # Out-of-range branch indices are clamped by lax.switch.
        index = Operand(Aval((), dtype_of("int32")), Domain("branch index", lo=-1, hi=n,
                                                            specials=False))
    branch_in = [aval]
    if rng.random() < 0.3:
        branch_in.append(aval.with_dtype(_choice(rng, NUMERIC)))
    branches, captured_all = [], []
    for _ in range(n):
        graph, captured = ctx.subgraph(branch_in, [aval], rng)
        branches.append(graph)
        captured_all.append([(v, a) for v, a in captured_avals(graph, captured)])
    operands = [index] + [Operand(a) for a in branch_in]
    counts = []
    for pairs in captured_all:
        operands += [Operand(a, value=v) for v, a in pairs]
        counts.append(len(pairs))
    return Sample(tuple(operands), {"branches": tuple(branches), "n_in": len(branch_in),
                                    "captures": tuple(counts)})


def _cond_build(index: Any, *operands: Any, branches: Any, n_in: int, captures: Any) -> Any:
    args = operands[:n_in]
    rest = list(operands[n_in:])
    fns = []
    for graph, count in zip(branches, captures):
        mine, rest = rest[:count], rest[count:]
        fns.append(lambda *a, g=graph, c=tuple(mine): g(*a, *c)[0])
    if np.dtype(index.dtype) == np.bool_:
        return lax.cond(index, fns[1], fns[0], *args)
    return lax.switch(index, fns, *args)


_CONTROL_RULES = [
    OpRule("while", "control", -1, ALL, _while_sample, _while_build, in_bodies=False, weight=2.0,
           notes=("constant start, bound and step, 0 to 8 trips, narrow counters",
                  "carries are treated as inexact inside the body")),
    OpRule("scan", "control", -1, ALL, _scan_sample, _scan_build, in_bodies=False, weight=1.5,
           notes=("forward and reverse, unrolled or not",)),
    OpRule("cond", "control", -1, ALL, _cond_sample, _cond_build, in_bodies=False, weight=1.0,
           notes=("bool predicates and clamped integer branch indices",)),
]

# ---------------------------------------------------------------------------------------------
# random bits


def _random_bits_sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
    shape = aval.shape if aval.ndim else (int(rng.integers(1, 9)),)
    return Sample((Operand(Aval((2,), dtype_of("uint32"))),), {"shape": shape, "dtype": aval.dtype})


def _random_bits_build(key_data: Any, *, shape: Any, dtype: Any) -> Any:
    key = jax.random.wrap_key_data(key_data, impl="threefry2x32")
    return jax.random.bits(key, shape, dtype)


_RANDOM_RULES = [
    OpRule("random_bits", "random", 1, UNSIGNED, _random_bits_sample, _random_bits_build,
           exact_result=True, weight=0.5, notes=("threefry2x32 keys from uint32[2] key data",)),
]

# ---------------------------------------------------------------------------------------------
# the table


#: primitive name -> rule.
RULES: dict[str, OpRule] = primitives.by_name([
    # every family but control flow and random bits: each rule sits in its primitive's record
    # (xlaprobe.lax_rules)
    *registry.generator_rules(),
    *_CONTROL_RULES, *_RANDOM_RULES,
], "op catalogue")
