"""xlaprobe's control-flow primitives, one record each (`xlaprobe.lax_rules.record.PrimitiveDef`):
``while``, ``scan`` and ``cond``, which the fuzzer generates (counted loops, scans forward and
reverse, two- and three-way branches, each body a small generated graph), and
``custom_linear_solve``, which it does not. Each record holds the primitive's facts (PRNG key
arrays pass through it whole: `PrimitiveFacts.takes_keys`), its reference rule (it evaluates the
body jaxprs with the interpreter's own rules through `RuleContext.eval`, so a body's arithmetic
is the reference's) and its fuzzer rule.

`DEFINITIONS` keeps the fuzzer's catalogue order: the generator draws a rule by its position in
`xlaprobe.sources.ops.RULES`.

Source: StableHLO specification (https://openxla.org/stablehlo/spec: while, case) and XLA
operation semantics (https://openxla.org/xla/operation_semantics: While, Conditional); JAX's
``lax.scan`` and ``lax.custom_linear_solve`` for their equations' layouts (``jax/_src/lax/
control_flow/``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from jax import lax

from xlaprobe.lax_rules.facts import PrimitiveFacts
from xlaprobe.lax_rules.numeric import Keys, Rule, RuleContext, carrier, dtype_kind
from xlaprobe.lax_rules.opspec import (ALL, NUMERIC, Aval, Context, Domain, Operand, OpRule,
                                       Sample, choice, dtype_of, int_range)
from xlaprobe.lax_rules.record import PrimitiveDef

__all__ = ["DEFINITIONS", "captured_avals", "scan_layout"]

# =============================================================================================
# reference rules (the body jaxprs evaluated by the interpreter)


def scan_layout(params: dict[str, Any]) -> tuple[int, int]:
    """(number of constant operands, number of carry operands) of a ``scan`` equation.

    jax <= 0.10 names them ``num_consts``/``num_carry``; jax >= 0.11 packs the operands as a flat
    tree ``ft_in`` of three parts (consts, carry, xs).
    """
    if "num_consts" in params:
        return int(params["num_consts"]), int(params["num_carry"])
    consts, carry, _ = params["ft_in"].unpack()
    return len(consts), len(carry)


def _index0(value: Any, i: int) -> Any:
    if isinstance(value, Keys):
        return Keys(value.impl, value.data[i])
    return value[i]


def _stack0(values: list[Any], shape: tuple[int, ...], dtype: Any) -> Any:
    """The scan outputs `values` stacked along a new leading axis into an array of `shape` and
    logical `dtype` (keys: a `Keys` carrier), zeros when the scan ran no trip."""
    if dtype_kind(dtype) == "k":
        if not values:
            return Keys(dtype._impl, np.zeros(tuple(shape) + tuple(dtype._impl.key_shape),
                                              np.uint32))
        return Keys(values[0].impl, np.stack([v.data for v in values]))
    if not values:
        return np.zeros(tuple(shape), carrier(dtype))
    return np.stack(values)


def _while(ctx: RuleContext, *args: Any, cond_jaxpr: Any, body_jaxpr: Any, cond_nconsts: int,
           body_nconsts: int, **_: Any) -> list[Any]:
    cond_consts = list(args[:cond_nconsts])
    body_consts = list(args[cond_nconsts:cond_nconsts + body_nconsts])
    carry = list(args[cond_nconsts + body_nconsts:])
    while True:
        (pred,) = ctx.eval(cond_jaxpr, cond_consts + carry)
        pred = np.asarray(pred)
        if not pred.any():
            return carry
        new = ctx.eval(body_jaxpr, body_consts + carry)
        if pred.ndim == 0:
            carry = new
        else:
            # A batched predicate (vmap of a while loop): JAX lowers it to "loop while any", with
            # each carry's leading (batch) elements advanced only where their predicate holds.
            carry = [_select_leading(pred, n, c) for n, c in zip(new, carry)]


def _select_leading(pred: np.ndarray, new: Any, old: Any) -> Any:
    if isinstance(new, Keys):
        return Keys(new.impl, _select_leading(pred, new.data, old.data))
    return np.where(pred.reshape(pred.shape + (1,) * (np.ndim(new) - pred.ndim)), new, old)


def _scan(ctx: RuleContext, *args: Any, jaxpr: Any, length: int, reverse: bool = False,
          **params: Any) -> list[Any]:
    num_consts, num_carry = scan_layout(params)
    consts = list(args[:num_consts])
    carry = list(args[num_consts:num_consts + num_carry])
    xs = list(args[num_consts + num_carry:])
    ys: list[list[Any]] = []
    order = range(length - 1, -1, -1) if reverse else range(length)
    for i in order:
        outs = ctx.eval(jaxpr, consts + carry + [_index0(x, i) for x in xs])
        carry, y = outs[:num_carry], outs[num_carry:]
        ys.append(y)
    if reverse:
        ys.reverse()
    shapes, dtypes = ctx.out_shapes[num_carry:], ctx.out_dtypes[num_carry:]
    stacked = [_stack0([y[j] for y in ys], shape, dtype)
               for j, (shape, dtype) in enumerate(zip(shapes, dtypes))]
    return carry + stacked


def _cond(ctx: RuleContext, index: np.ndarray, *args: Any, branches: Sequence[Any], **_: Any) -> list[Any]:
    i = min(max(int(np.asarray(index)), 0), len(branches) - 1)  # XLA clamps the branch index
    return ctx.eval(branches[i], list(args))


def _custom_linear_solve(ctx: RuleContext, *args: Any, const_lengths: Any, jaxprs: Any,
                         **_: Any) -> list[Any]:
    counts = list(const_lengths)
    offsets = np.cumsum([0] + counts)
    solve_consts = list(args[offsets[2]:offsets[3]])
    b = list(args[offsets[-1]:])
    solve = jaxprs.solve if hasattr(jaxprs, "solve") else jaxprs[2]  # a plain tuple once rebuilt
    return ctx.eval(solve, solve_consts + b)


# =============================================================================================
# generator rules


_COMPARATORS = {"lt": lax.lt, "le": lax.le, "gt": lax.gt, "ge": lax.ge, "ne": lax.ne}


def _trip_plan(rng: np.random.Generator, dtype: np.dtype) -> dict[str, Any]:
    """Constant start, bound and step of a counted loop with 0 to 8 trips."""
    trips = int(choice(rng, [0, 1, 1, 1, 2, 3, 5, 8]))
    # Steps beyond 1 with bounds that are no multiple of them: the last trip overshoots the
    # bound, a corner of trip-count analysis.
    step = int(choice(rng, [1, 2, 3, 4, -1, -2]))
    lo_t, hi_t = int_range(dtype)
    if step < 0 and lo_t == 0:
        step = -step
    start = int(rng.integers(max(lo_t, -5), min(hi_t, 5) + 1))
    last = start + trips * step  # the counter after the last trip
    if not lo_t <= last <= hi_t:
        start, last = 0, trips * step
    if step > 0:
        cmp = choice(rng, ["lt", "le", "ne"], [2, 1, 1])
        # lt: stop = last - step + 1 .. last; le: stop = last - 1; ne: stop = last
        stop = {"lt": last - int(rng.integers(0, step)), "le": last - 1, "ne": last}[cmp]
    else:
        cmp = choice(rng, ["gt", "ge", "ne"], [2, 1, 1])
        stop = {"gt": last + int(rng.integers(0, -step)), "ge": last + 1, "ne": last}[cmp]
    if cmp == "ne" and trips == 0:
        stop = start
    if not lo_t <= stop <= hi_t:
        cmp, stop = ("lt", last) if step > 0 else ("gt", last)
    return {"start": start, "stop": stop, "step": step, "cmp": cmp, "trips": trips,
            "counter_dtype": dtype}


def _while_sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
    counter = dtype_of(choice(rng, ["int32", "int32", "int8", "uint8", "int16", "uint32"]))
    plan = _trip_plan(rng, counter)
    carries = [aval]
    if rng.random() < 0.3:
        carries.append(aval.with_dtype(choice(rng, NUMERIC)))
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
        other = aval.with_dtype(choice(rng, NUMERIC))
        xs.append(other.with_shape((length,) + other.shape))
    ys = [carries[0]] if rng.random() < 0.7 else []
    body, captured = ctx.subgraph(carries + [x.with_shape(x.shape[1:]) for x in xs],
                                  carries + ys, rng)
    operands = tuple(Operand(a) for a in carries + xs) + tuple(
        Operand(a, value=v) for v, a in captured_avals(body, captured))
    unroll = choice(rng, [1, 1, 2, True])
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
    n = int(choice(rng, [2, 2, 3]))
    if n == 2 and rng.random() < 0.5:
        index = Operand(Aval((), dtype_of("bool")))
    else:
        # Out-of-range branch indices are clamped by lax.switch.
        index = Operand(Aval((), dtype_of("int32")), Domain("branch index", lo=-1, hi=n,
                                                            specials=False))
    branch_in = [aval]
    if rng.random() < 0.3:
        branch_in.append(aval.with_dtype(choice(rng, NUMERIC)))
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


# =============================================================================================
# the records


def _control(name: str, reference: Rule, generator: OpRule | None = None) -> PrimitiveDef:
    """A control-flow primitive: key arrays pass through it whole."""
    return PrimitiveDef(PrimitiveFacts(name, takes_keys=True), reference, generator)


#: Every control-flow primitive's record, in the fuzzer's catalogue order (module docstring).
DEFINITIONS: tuple[PrimitiveDef, ...] = (
    _control("while", _while, OpRule(
        "while", "control", -1, ALL, _while_sample, _while_build, in_bodies=False, weight=2.0,
        notes=("constant start, bound and step, 0 to 8 trips, narrow counters",
               "carries are treated as inexact inside the body"))),
    _control("scan", _scan, OpRule(
        "scan", "control", -1, ALL, _scan_sample, _scan_build, in_bodies=False, weight=1.5,
        notes=("forward and reverse, unrolled or not",))),
    _control("cond", _cond, OpRule(
        "cond", "control", -1, ALL, _cond_sample, _cond_build, in_bodies=False, weight=1.0,
        notes=("bool predicates and clamped integer branch indices",))),
    _control("custom_linear_solve", _custom_linear_solve),
)
