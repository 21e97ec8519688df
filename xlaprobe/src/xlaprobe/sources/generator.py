"""The fuzzer: random valid programs grown from the op catalogue (`xlaprobe.sources.ops`).

`generate(seed)` grows a DAG of catalogue ops over a few random inputs and returns it as a
`Program` (provenance ``fuzz:<seed>``). Every choice comes from one ``numpy.random.Generator``
seeded with `seed`, so a seed names a program: same seed, same jaxpr text, same inputs.

How a program grows (`_Builder.emit`): pick an op (weighted), pick its primary operand (an
existing value, preferring values that already have a consumer and recent ones, or a new
shape), let the rule sample its other operands and parameters, fulfil each operand requirement
by reusing a value that provably fits it (shape, dtype, tracked bounds, exactness: see
`xlaprobe.sources.ops`) or by a fresh input drawn from the requirement's domain, then confirm
the equation with JAX's abstract evaluation (``jax.make_jaxpr``, which also gives its equation
count and primitives). An equation JAX rejects, or one that is a no-op (the primitive absent
from its jaxpr), is dropped and another is sampled.

Biases, each a pattern real miscompiles hide in: values reused by several consumers; dynamic
updates of a slice of the operand itself; loops with constant start, bound and step (0 to 8
trips); narrow index dtypes (uint8, int8) with axes longer than they can address; negative and
interior padding; wrapping integer arithmetic (full-range integer inputs); constants (``x * 2.5``).

Every value is live: each sink of the DAG is a program output (plus, now and then, an
intermediate value), so the optimized compile checks every equation rather than deleting some.

Inputs are domain-aware (no log of generated negatives) and get special values (NaN, ±Inf, ±0,
subnormals, dtype extremes) injected at a small rate where the operand's domain allows them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import jax
import ml_dtypes
import numpy as np

from xlaprobe import jaxprs
from xlaprobe.errors import InvalidArgument
from xlaprobe.lax_rules import opspec, shapes
from xlaprobe.program import Program, Provenance
from xlaprobe.sources import ops
from xlaprobe.sources.ops import Aval, Domain, Operand, OpRule, dtype_of, is_float, is_int

__all__ = ["Graph", "Node", "generate", "generate_graph", "sample_input", "MAX_INPUTS"]

#: Most program inputs (fresh values) a program gets.
MAX_INPUTS = 8
#: Largest number of elements of any value.
MAX_ELEMENTS = opspec.MAX_ELEMENTS
#: Whole-program attempts before `generate` gives up (each attempt resamples everything).
MAX_ATTEMPTS = 20
#: Chance that a float input gets special values injected.
SPECIAL_RATE = 0.3
#: Chance of reusing an existing value (when one fits) rather than drawing a fresh input.
REUSE_RATE = 0.85

#: Dtype frequencies of new values.
_DTYPE_WEIGHTS = {"float32": 8, "float16": 2, "bfloat16": 2, "int32": 3, "int8": 2, "int16": 1,
                  "uint8": 2, "uint16": 1, "uint32": 1, "bool": 2}
#: Dtype frequencies of new values with ``x64=True`` (added to `_DTYPE_WEIGHTS`).
_X64_WEIGHTS = {"float64": 3, "int64": 1, "uint64": 1}
#: Scalar constants of binary ops, clamps and pads (cast to the dtype, kept inside the domain).
_NICE_CONSTANTS = (2.0, 0.5, -1.0, 3.0, 0.1, 1e-3, 10.0, -2.5, 1.0, 0.0, 1e4, 0.37, 7.0)


# ---------------------------------------------------------------------------------------------
# the graph: a replayable DAG of catalogue ops


@dataclasses.dataclass(frozen=True, slots=True)
class Node:
    """One op application.

    Attributes:
        rule: the catalogue key (JAX primitive name).
        operands: value ids (int) or constant arrays (`numpy.ndarray`), in call order.
        params: keyword parameters of the rule's build.
        outputs: the value ids it defines, one per result.
    """

    rule: str
    operands: tuple[int | np.ndarray, ...]
    params: dict[str, Any]
    outputs: tuple[int, ...]


@dataclasses.dataclass(frozen=True, eq=False)
class Graph:
    """A DAG of catalogue ops; calling it replays the lax calls (inside a trace or eagerly).

    Attributes:
        inputs: value ids of the inputs, in argument order.
        input_avals: their shapes and dtypes.
        nodes: in topological order.
        outputs: value ids returned, in order.
    """

    inputs: tuple[int, ...]
    input_avals: tuple[Aval, ...]
    nodes: tuple[Node, ...]
    outputs: tuple[int, ...]

    def __call__(self, *args: Any) -> list[Any]:
        if len(args) != len(self.inputs):
            raise TypeError(f"graph takes {len(self.inputs)} arguments, got {len(args)}")
        env: dict[int, Any] = dict(zip(self.inputs, args))
        for node in self.nodes:
            results = _apply(node, env)
            env.update(zip(node.outputs, results))
        return [env[i] for i in self.outputs]

    @property
    def rules(self) -> list[str]:
        """Rule names of the nodes, nested graphs included."""
        names = []
        for node in self.nodes:
            names.append(node.rule)
            for value in node.params.values():
                for sub in value if isinstance(value, tuple) else (value,):
                    if isinstance(sub, Graph):
                        names += sub.rules
        return names


def _apply(node: Node, env: dict[int, Any]) -> list[Any]:
    args = [o if isinstance(o, np.ndarray) else env[o] for o in node.operands]
    out = ops.RULES[node.rule].build(*args, **node.params)
    return list(out) if isinstance(out, (tuple, list)) else [out]


# ---------------------------------------------------------------------------------------------
# values


@dataclasses.dataclass(slots=True)
class _Value:
    """What the generator knows about one value (see `xlaprobe.sources.ops` on exactness).

    Attributes:
        id: its id in its builder.
        aval: shape and dtype.
        exact: equal in the float64 reference and in its own dtype (no rounding happened).
        lo, hi: bounds of its finite values.
        nan: may hold NaN.
        subnormal: may hold subnormals (of its dtype).
        uses: consumers so far.
        computed: defined by a node (not an input, a loop parameter or a capture).
    """

    id: int
    aval: Aval
    exact: bool
    lo: float
    hi: float
    nan: bool
    subnormal: bool
    uses: int = 0
    computed: bool = False


def _dtype_range(dtype: np.dtype) -> tuple[float, float]:
    if is_float(dtype):
        return -math.inf, math.inf
    if dtype == np.bool_:
        return 0.0, 1.0
    info = np.iinfo(dtype)
    return float(info.min), float(info.max)


def _unknown(vid: int, aval: Aval) -> _Value:
    lo, hi = _dtype_range(aval.dtype)
    floating = is_float(aval.dtype)
    return _Value(vid, aval, exact=not floating, lo=lo, hi=hi, nan=floating, subnormal=floating)


def _describe(vid: int, array: np.ndarray, aval: Aval) -> _Value:
    """The value of a concrete array (inputs and constants): exact, with its actual bounds."""
    if not is_float(aval.dtype):
        data = np.asarray(array).astype(np.float64)
        lo, hi = (float(data.min()), float(data.max())) if data.size else (0.0, 0.0)
        return _Value(vid, aval, True, lo, hi, False, False)
    data = np.asarray(array).astype(np.float64)
    finite = data[~np.isnan(data)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 0.0)
    tiny = float(ml_dtypes.finfo(aval.dtype).tiny)
    subnormal = bool(np.any((data != 0) & (np.abs(data) < tiny)))
    return _Value(vid, aval, True, lo, hi, bool(np.isnan(data).any()), subnormal)


def _fits(value: _Value, spec: Operand) -> bool:
    """Whether `value` may be reused for the operand requirement `spec`."""
    domain = spec.domain
    if value.aval != spec.aval or spec.fresh or domain.fresh_only():
        return False
    if value.lo < domain.lo or value.hi > domain.hi or (value.nan and not domain.nan):
        return False
    if spec.exact and is_float(value.aval.dtype) and (not value.exact or value.subnormal):
        return False
    return True


# ---------------------------------------------------------------------------------------------
# inputs


def _float_specials(dtype: np.dtype) -> list[float]:
    info = ml_dtypes.finfo(dtype)
    tiny, big = float(info.tiny), float(info.max)
    smallest = float(info.smallest_subnormal)
    return [math.nan, math.inf, -math.inf, 0.0, -0.0, big, -big, tiny, -tiny, tiny / 2,
            -tiny / 4, smallest, 1.0, -1.0]


def sample_input(rng: np.random.Generator, aval: Aval, domain: Domain = ops.ANY, *,
                 no_subnormals: bool = False) -> np.ndarray:
    """Random values of `aval` drawn from `domain`, special values injected at a small rate.

    Args:
        rng: the generator.
        aval: shape and dtype.
        domain: value bounds, NaN, uniqueness, out-of-range indices (see `ops.Domain`).
        no_subnormals: no subnormal values (operands of discontinuous ops).

    Returns:
        An array of exactly `aval`'s shape and dtype.

    Raises:
        ValueError: `domain` cannot be met (e.g. more unique indices than the range holds).
    """
    dtype, shape = aval.dtype, aval.shape
    if dtype == np.bool_:
        return rng.random(shape) < rng.uniform(0.2, 0.8)
    if is_int(dtype):
        return _sample_int(rng, shape, dtype, domain)
    return _sample_float(rng, shape, dtype, domain, no_subnormals)


def _sample_int(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype,
                domain: Domain) -> np.ndarray:
    lo_t, hi_t = int(np.iinfo(dtype).min), int(np.iinfo(dtype).max)  # exact (no float)
    lo = lo_t if domain.lo == -math.inf else max(lo_t, math.ceil(domain.lo))
    hi = hi_t if domain.hi == math.inf else min(hi_t, math.floor(domain.hi))
    if lo > hi:
        raise ValueError(f"empty integer domain {domain.name} for {dtype.name}")
    size = math.prod(shape)
    if domain.unique:
        if hi - lo + 1 < size:
            raise ValueError(f"{size} unique values do not fit in [{lo}, {hi}]")
        data = lo + rng.permutation(hi - lo + 1)[:size]
    elif rng.random() < 0.4 and (lo, hi) == (lo_t, hi_t):
        # Full range: products and sums wrap.
        data = rng.integers(lo, hi, size, endpoint=True, dtype=np.int64 if hi < 2 ** 63 else np.uint64)
    else:
        small_lo, small_hi = max(lo, -8), min(hi, 8)
        if small_lo > small_hi:
            small_lo, small_hi = lo, min(hi, lo + 16)
        data = rng.integers(small_lo, small_hi, size, endpoint=True)
    data = np.asarray(data, np.int64 if hi_t < 2 ** 63 else np.uint64)
    if domain.specials and size and rng.random() < SPECIAL_RATE:
        specials = [v for v in (lo_t, hi_t, 0, -1, 1) if lo <= v <= hi]
        picks = rng.choice(size, int(rng.integers(1, max(2, size // 6) + 1)), replace=True)
        data[picks] = rng.choice(np.asarray(specials, data.dtype), len(picks))
    if domain.nonzero:
        data = np.where((data == 0) | (data == -1), np.where(rng.random(size) < 0.5, 1, 2), data)
        data = np.clip(data, max(lo, 1) if lo > 0 else lo, hi)
        data[data == 0] = 1
    if domain.oob and size:
        outside = [v for v in (lo - 1, hi + 1, hi + 7, lo_t, hi_t)
                   if lo_t <= v <= hi_t and not lo <= v <= hi]
        if outside:
            picks = rng.choice(size, int(rng.integers(1, max(2, size // 4) + 1)), replace=False)
            outside = np.asarray(outside, data.dtype)
            chosen = rng.choice(outside, len(picks), replace=len(outside) < len(picks))
            if domain.unique:  # distinct out-of-range values only (each update then drops)
                chosen = rng.permutation(outside)[:len(picks)]
                picks = picks[:len(chosen)]
            data[picks] = chosen
    return data.reshape(shape).astype(dtype)


def _sample_float(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype,
                  domain: Domain, no_subnormals: bool) -> np.ndarray:
    info = ml_dtypes.finfo(dtype)
    big, tiny = float(info.max), float(info.tiny)
    lo, hi = max(domain.lo, -big), min(domain.hi, big)
    size = math.prod(shape)
    # A domain of finite but huge width ("finite": [-max, max]) samples as an unbounded one.
    interval = math.isfinite(domain.lo) and math.isfinite(domain.hi) and hi - lo <= 1e6
    mode = opspec.choice(rng, ["normal", "uniform", "integers", "wide"], [4, 2, 2, 1])
    if mode == "normal":
        data = rng.standard_normal(size) * 10 ** rng.uniform(-1, 1.5)
    elif mode == "uniform":  # over the domain, or over [-4, 4] moved inside a half-bounded one
        if interval:
            a, b = lo, hi
        elif math.isfinite(domain.lo) and domain.lo > -4.0:
            a, b = lo, lo + 8.0
        elif math.isfinite(domain.hi) and domain.hi < 4.0:
            a, b = hi - 8.0, hi
        else:
            a, b = -4.0, 4.0
        data = rng.uniform(a, b, size)
    elif mode == "integers":  # exact small integers: ties for sorts, comparisons and argmax
        data = rng.integers(-6, 7, size).astype(np.float64)
    else:  # wide magnitudes; sums of products of them stay finite (overflow is order-dependent)
        exponent = rng.uniform(math.log10(tiny) / 2, math.log10(big) / 4, size)
        data = np.where(rng.random(size) < 0.5, -1.0, 1.0) * 10 ** exponent
    # Map into the domain: a lower (upper) bound reflects, an interval wraps around. (lo and hi
    # are clipped to the dtype's range; the domain's own bounds say which sides are bounded.)
    lower, upper = math.isfinite(domain.lo), math.isfinite(domain.hi)
    if interval:
        inside = (data >= lo) & (data <= hi)
        data = np.where(inside, data, rng.uniform(lo, hi, size))
    elif lower:
        data = np.where(data >= lo, data, lo + np.abs(data - lo))
    elif upper:
        data = np.where(data <= hi, data, hi - np.abs(data - hi))
    data = np.clip(data, lo, hi)
    if domain.specials and size and rng.random() < SPECIAL_RATE:
        specials = [v for v in _float_specials(dtype) if (math.isnan(v) and domain.nan) or
                    (not math.isnan(v) and domain.lo <= v <= domain.hi)]
        if no_subnormals:
            specials = [v for v in specials if math.isnan(v) or v == 0 or abs(v) >= tiny]
        if specials:
            picks = rng.choice(size, int(rng.integers(1, max(2, size // 6) + 1)), replace=True)
            data[picks] = rng.choice(specials, len(picks))
    out = data.astype(dtype)
    wide = out.astype(np.float64)
    # Rounding to the dtype may step out of the domain (2**31 - 1 rounds up in float32).
    outside = (wide < domain.lo) | (wide > domain.hi)
    if outside.any():
        fallback = np.asarray(0.0 if lo <= 0.0 <= hi else lo, dtype)
        out = np.where(outside, fallback, out).astype(dtype)
    if no_subnormals:
        wide = out.astype(np.float64)
        out = np.where((wide != 0) & (np.abs(wide) < tiny), np.asarray(0.0, dtype), out).astype(dtype)
    return out.reshape(shape)


# ---------------------------------------------------------------------------------------------
# the builder


class _Reject(Exception):
    """An equation (or a whole attempt) that cannot be completed; the caller samples again."""


class _Builder:
    """Grows one graph (the program, or a loop body or branch nested in it)."""

    def __init__(self, rng: np.random.Generator, *, parent: _Builder | None = None,
                 x64: bool = False, depth: int = 0):
        self.rng = rng
        self.parent = parent
        self.x64 = x64
        self.depth = depth
        self.values: list[_Value] = []
        self.nodes: list[Node] = []
        self.inputs: list[int] = []              # value ids, argument order
        self.input_arrays: list[np.ndarray] = []  # top level only
        self.captured: list[int] = []            # nested only: parent ids, in input order
        self.capture_of: dict[int, int] = {}     # parent id -> own id
        self.eqns = 0

    # -- state -------------------------------------------------------------------------------

    def _snapshot(self) -> list[tuple[_Builder, tuple[Any, ...]]]:
        chain, builder = [], self
        while builder is not None:
            chain.append((builder, (len(builder.values), len(builder.nodes), len(builder.inputs),
                                    len(builder.input_arrays), len(builder.captured), builder.eqns,
                                    [v.uses for v in builder.values])))
            builder = builder.parent
        return chain

    @staticmethod
    def _restore(chain: list[tuple[_Builder, tuple[Any, ...]]]) -> None:
        for builder, (nv, nn, ni, na, nc, eqns, uses) in chain:
            for parent_id in builder.captured[nc:]:
                del builder.capture_of[parent_id]
            del builder.values[nv:], builder.nodes[nn:], builder.inputs[ni:]
            del builder.input_arrays[na:], builder.captured[nc:]
            builder.eqns = eqns
            for value, count in zip(builder.values, uses):
                value.uses = count

    def _new_value(self, aval: Aval, **props: Any) -> _Value:
        value = _Value(len(self.values), aval, **props)
        self.values.append(value)
        return value

    # -- Context (for rule samplers) ----------------------------------------------------------

    def constant(self, aval: Aval, domain: Domain, rng: np.random.Generator) -> np.ndarray:
        """A constant of `aval` inside `domain`: a nice scalar, or random values."""
        if aval.ndim == 0 or rng.random() < 0.7:
            for _ in range(10):
                value = float(opspec.choice(rng, _NICE_CONSTANTS))
                if not is_float(aval.dtype):
                    value = float(round(value)) if aval.dtype != np.bool_ else float(value != 0)
                    lo, hi = _dtype_range(aval.dtype)
                    value = min(max(value, lo), hi)
                if domain.lo <= value <= domain.hi and not (domain.nonzero and value in (0, -1)):
                    return np.full(aval.shape, value).astype(aval.dtype)
        try:
            return sample_input(rng, aval, dataclasses.replace(domain, specials=False),
                                no_subnormals=True)
        except ValueError:
            raise _Reject("no constant fits the domain") from None

    def subgraph(self, in_avals: Sequence[Aval], out_avals: Sequence[Aval],
                 rng: np.random.Generator) -> tuple[Graph, tuple[int, ...]]:
        """A loop body or branch: a few ops over `in_avals` returning `out_avals`."""
        child = _Builder(rng, parent=self, x64=self.x64, depth=self.depth + 1)
        for aval in in_avals:  # parameters: carries change between trips, so assume the worst
            child.inputs.append(child._new_value(aval, **_props(_unknown(0, aval))).id)
        child.grow(int(rng.integers(0, 5)), attempts_per_eqn=4)
        outputs = []
        for aval in out_avals:
            computed = [v for v in child.values if v.aval == aval and v.computed]
            params = [v for v in child.values[:len(in_avals)] if v.aval == aval]
            if computed and rng.random() < 0.85:
                chosen = computed[-1] if rng.random() < 0.7 else opspec.choice(rng, computed)
            elif params:
                chosen = params[0]
            elif computed:
                chosen = computed[-1]
            else:
                raise _Reject(f"a body cannot produce {aval}")
            outputs.append(chosen.id)
        in_ids = tuple(child.inputs)
        graph = Graph(in_ids, tuple(child.values[i].aval for i in in_ids), tuple(child.nodes),
                      tuple(outputs))
        return graph, tuple(child.captured)

    # -- operands -----------------------------------------------------------------------------

    def fresh(self, spec: Operand) -> int:
        """A new input of `spec.aval` drawn from its domain; in a body, captured from outside."""
        if self.parent is not None:
            return self.capture(self.parent.fresh(spec))
        if len(self.inputs) >= MAX_INPUTS:
            raise _Reject("too many inputs")
        try:
            array = sample_input(self.rng, spec.aval, spec.domain, no_subnormals=spec.exact)
        except ValueError as exc:
            raise _Reject(str(exc)) from None
        value = _describe(len(self.values), array, spec.aval)
        self.values.append(value)
        self.inputs.append(value.id)
        self.input_arrays.append(array)
        return value.id

    def capture(self, parent_id: int) -> int:
        """The own id of a parent value (captured as an extra input of this graph)."""
        if parent_id not in self.capture_of:
            outer = self.parent.values[parent_id]
            value = self._new_value(outer.aval, **_props(outer))
            self.capture_of[parent_id] = value.id
            self.captured.append(parent_id)
            self.inputs.append(value.id)
        return self.capture_of[parent_id]

    def _candidates(self, spec: Operand) -> list[tuple[_Value, bool]]:
        """(value, from parent) pairs that fit `spec`, own values first."""
        own = [(v, False) for v in self.values if _fits(v, spec)]
        outer = []
        if self.parent is not None:
            outer = [(v, True) for v in self.parent.values
                     if _fits(v, spec) and v.id not in self.capture_of]
        return own + outer

    def _pick(self, spec: Operand, prefer: int | None, taken: Sequence[int] = ()) -> int:
        if prefer is not None and _fits(self.values[prefer], spec) and self.rng.random() < 0.9:
            return prefer
        candidates = self._candidates(spec)
        if candidates and (self.rng.random() < REUSE_RATE or len(self._root().inputs) >= MAX_INPUTS):
            recent = {v.id for v in self.values[-3:]}
            # Values with consumers and recent ones are preferred; an operand of this very op
            # less so (x - x is rarely interesting).
            weights = [(1.0 + 2.0 * (v.uses > 0) + 1.5 * v.computed +
                        (1.0 if not outer and v.id in recent else 0.0) - (0.5 if outer else 0.0))
                       * (0.25 if not outer and v.id in taken else 1.0)
                       for v, outer in candidates]
            value, outer = candidates[int(self.rng.choice(len(candidates),
                                                          p=np.asarray(weights) / sum(weights)))]
            return self.capture(value.id) if outer else value.id
        return self.fresh(spec)

    def _root(self) -> _Builder:
        builder = self
        while builder.parent is not None:
            builder = builder.parent
        return builder

    # -- growing ------------------------------------------------------------------------------

    def rules(self) -> list[OpRule]:
        return [r for r in ops.RULES.values() if self.depth == 0 or r.in_bodies]

    def grow(self, budget: int, *, attempts_per_eqn: int = 6) -> None:
        """Emit ops until `budget` equations are used (or attempts run out)."""
        rules = self.rules()
        weights = np.asarray([r.weight for r in rules])
        weights = weights / weights.sum()
        attempts = 0
        while self.eqns < budget and attempts < attempts_per_eqn * max(budget, 1):
            attempts += 1
            rule = rules[int(self.rng.choice(len(rules), p=weights))]
            chain = self._snapshot()
            try:
                self.emit(rule, budget - self.eqns)
            except _Reject:
                self._restore(chain)

    def _primary(self, rule: OpRule) -> tuple[Aval, int | None]:
        dtypes = set(rule.dtypes) | ({d.replace("32", "64") for d in rule.dtypes} & set(ops.X64)
                                     if self.x64 else set())
        existing = [v for v in self.values
                    if v.aval.dtype.name in dtypes and v.aval.ndim >= rule.min_rank]
        # Indexing ops often get a new (possibly long) operand: narrow indices meet long axes.
        reuse = 0.6 if rule.family in ("index", "scatter") else 0.85
        if rule.arity != 0 and existing and self.rng.random() < reuse:
            recent = {v.id for v in self.values[-3:]}
            weights = np.asarray([1.0 + 1.5 * v.computed + (v.id in recent) for v in existing])
            value = existing[int(self.rng.choice(len(existing), p=weights / weights.sum()))]
            return value.aval, value.id
        table = {**_DTYPE_WEIGHTS, **(_X64_WEIGHTS if self.x64 else {})}
        names = [d for d in table if d in dtypes] or sorted(dtypes)
        weights = np.asarray([table.get(d, 1) for d in names], np.float64)
        dtype = dtype_of(names[int(self.rng.choice(len(names), p=weights / weights.sum()))])
        return Aval(_new_shape(self.rng, rule), dtype), None

    def emit(self, rule: OpRule, budget: int) -> list[int]:
        """Sample one use of `rule`, fulfil its operands, confirm it with JAX and add it.

        Returns:
            The ids of its results.

        Raises:
            _Reject: it could not be sampled, JAX rejected it, it is a no-op or over `budget`.
        """
        aval, prefer = self._primary(rule)
        sample = rule.sample(self.rng, aval, self)
        if sample is None:
            raise _Reject(f"{rule.name}: no sample for {aval}")
        operands: list[int | np.ndarray] = []
        for spec in sample.operands:
            if spec.const is not None:
                operands.append(np.asarray(spec.const, spec.aval.dtype))
            elif spec.value is not None:
                operands.append(spec.value)
            elif spec.slice_of is not None:
                operands.append(self._slice_of(operands[spec.slice_of], spec.aval))
            else:
                vid = self._pick(spec, prefer, [o for o in operands if isinstance(o, int)])
                if vid == prefer:
                    prefer = None
                operands.append(vid)
        outputs = self._add(rule, operands, sample.params, budget)
        return outputs

    def _slice_of(self, source: int | np.ndarray, aval: Aval) -> int:
        if isinstance(source, np.ndarray):
            raise _Reject("slice of a constant")
        shape = self.values[source].aval.shape
        if len(shape) != aval.ndim or any(n > d for n, d in zip(aval.shape, shape)):
            raise _Reject("slice larger than its source")
        params = shapes.slice_params(self.rng, shape, out=aval.shape)
        if params["start_indices"] == (0,) * len(shape) and tuple(params["limit_indices"]) == shape:
            return source  # the whole value: update it with itself
        return self._add(ops.RULES["slice"], [source], params, budget=MAX_ELEMENTS)[0]

    def _add(self, rule: OpRule, operands: list[int | np.ndarray], params: dict[str, Any],
             budget: int) -> list[int]:
        node_in = [o for o in operands if not isinstance(o, np.ndarray)]
        structs = [self.values[o].aval.struct for o in node_in]

        def fn(*arrays: Any) -> list[Any]:
            env = dict(zip(node_in, arrays))
            return _apply(Node(rule.name, tuple(operands), params, ()), env)

        try:
            closed = jax.make_jaxpr(fn)(*structs)
        except Exception as exc:  # JAX rejects the sample: shapes, dtypes or parameters
            raise _Reject(f"{rule.name}: {type(exc).__name__}") from None
        if rule.name not in jaxprs.primitives_used(closed):
            raise _Reject(f"{rule.name}: a no-op")
        cost = jaxprs.count_equations(closed)
        if cost > budget:
            raise _Reject(f"{rule.name}: {cost} equations over the budget {budget}")
        out_avals = [Aval(tuple(v.aval.shape), np.dtype(v.aval.dtype)) for v in closed.jaxpr.outvars]
        if any(a.size > MAX_ELEMENTS or a.size == 0 for a in out_avals):
            raise _Reject(f"{rule.name}: result too large or empty")
        ins = [self._operand_value(o) for o in operands]
        results = _result_props(rule, ins, params, out_avals)
        ids = []
        for aval, props in zip(out_avals, results):
            ids.append(self._new_value(aval, computed=True, **props).id)
        for o in node_in:
            self.values[o].uses += 1
        self.nodes.append(Node(rule.name, tuple(operands), dict(params), tuple(ids)))
        self.eqns += cost
        return ids

    def _operand_value(self, operand: int | np.ndarray) -> _Value:
        if isinstance(operand, np.ndarray):
            return _describe(-1, operand, Aval(operand.shape, operand.dtype))
        return self.values[operand]

    def graph(self, outputs: Sequence[int]) -> Graph:
        ids = tuple(self.inputs)
        return Graph(ids, tuple(self.values[i].aval for i in ids), tuple(self.nodes), tuple(outputs))


def _props(value: _Value) -> dict[str, Any]:
    return dict(exact=value.exact, lo=value.lo, hi=value.hi, nan=value.nan, subnormal=value.subnormal)


def _result_props(rule: OpRule, ins: list[_Value], params: dict[str, Any],
                  out_avals: list[Aval]) -> list[dict[str, Any]]:
    """Exactness, bounds, NaN and subnormal flags of each result."""
    floats_exact = all(v.exact for v in ins if is_float(v.aval.dtype))
    exact = rule.is_exact([v.aval for v in ins], params) and floats_exact
    nan = any(v.nan for v in ins)
    subnormal = any(v.subnormal for v in ins)
    bounds = None
    if rule.bounds is not None and ins:
        with np.errstate(all="ignore"):
            bounds = rule.bounds([(v.lo, v.hi) for v in ins], params)
    if rule.name == "gather" and params.get("mode") is jax.lax.GatherScatterMode.FILL_OR_DROP:
        nan = True  # dropped float gathers fill NaN
    results = []
    for k, aval in enumerate(out_avals):
        lo, hi = _dtype_range(aval.dtype)
        floating = is_float(aval.dtype)
        if k == 0 and bounds is not None and not math.isnan(bounds[0]) and not math.isnan(bounds[1]):
            b_lo, b_hi = bounds
            if floating or (lo <= b_lo and b_hi <= hi):  # integer bounds only without wrapping
                lo, hi = max(lo, b_lo), min(hi, b_hi)
        if rule.name == "iota" and not floating:
            lo, hi = _dtype_range(aval.dtype)
        if not floating:
            results.append(dict(exact=True, lo=lo, hi=hi, nan=False, subnormal=False))
        elif rule.name in ("bitcast_convert_type", "nextafter") or not exact:
            # Bits reinterpreted as floats may be anything; nextafter(0, 1) is subnormal.
            bits = rule.name == "bitcast_convert_type"
            results.append(dict(exact=exact, lo=-math.inf if bits else lo,
                                hi=math.inf if bits else hi, nan=True, subnormal=True))
        else:
            results.append(dict(exact=True, lo=lo, hi=hi, nan=nan, subnormal=subnormal))
    return results


def _new_shape(rng: np.random.Generator, rule: OpRule) -> tuple[int, ...]:
    """A shape for a new value: mostly small; long axes for indexing ops (narrow index dtypes)."""
    if rule.family in ("index", "scatter") and rng.random() < 0.25:
        long = int(rng.integers(129, 301))
        return (long,) if rng.random() < 0.6 else (long, int(rng.integers(1, 4)))
    if rule.name == "conv_general_dilated":
        rank = int(opspec.choice(rng, [3, 4]))
    else:
        rank = int(opspec.choice(rng, [0, 1, 2, 3, 4], [1, 4, 4, 2, 0.5]))
        rank = max(rank, rule.min_rank)
    return tuple(int(opspec.choice(rng, [1, 2, 3, 4, 5, 6, 7, 8, 16])) for _ in range(rank))


# ---------------------------------------------------------------------------------------------
# programs


def generate_graph(seed: int, *, max_equations: int = 30,
                   x64: bool = False) -> tuple[Graph, tuple[np.ndarray, ...]]:
    """The graph and inputs of `generate(seed)` (see there)."""
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InvalidArgument(f"fuzz seed must be a non-negative integer, got {seed!r}")
    if max_equations < 1:
        raise InvalidArgument(f"max_equations must be at least 1, got {max_equations}")
    if x64 and not jax.config.jax_enable_x64:
        jax.config.update("jax_enable_x64", True)  # else JAX narrows 64-bit values silently
    rng = np.random.default_rng(int(seed))
    for _ in range(MAX_ATTEMPTS):
        builder = _Builder(rng, x64=x64)
        target = int(rng.integers(1, max_equations + 1)) if rng.random() < 0.5 else \
            int(rng.integers(1, min(max_equations, 10) + 1))
        builder.grow(target)
        computed = [v for v in builder.values if v.computed]
        if not computed:
            continue
        # Every sink is an output, so every equation is live: an optimizing compile deletes
        # dead code, and faults in it would show only op by op (eager), which the adaptive
        # schedule runs on few programs (`xlaprobe.schedule`).
        sinks = [v.id for v in computed if v.uses == 0]
        used = [v.id for v in computed if v.uses > 0 and v.id not in sinks]
        if used and rng.random() < 0.3:  # observe an intermediate value too
            sinks.append(int(opspec.choice(rng, used)))
        graph = builder.graph(sorted(sinks))
        return graph, tuple(builder.input_arrays)
    raise RuntimeError(f"fuzz seed {seed}: no program after {MAX_ATTEMPTS} attempts "
                       "(a bug in xlaprobe/sources/generator.py)")


def generate(seed: int, *, max_equations: int = 30, x64: bool = False) -> Program:
    """A random valid program, determined by `seed`.

    Args:
        seed: non-negative integer; the same seed gives the same jaxpr text and inputs.
        max_equations: most equations (nested bodies included); sizes range from 1 to it.
        x64: also generate float64/int64 values (turns ``jax_enable_x64`` on for the process).

    Returns:
        A `Program` with provenance ``Provenance("fuzz", f"fuzz:{seed}", seed)``.

    Raises:
        InvalidArgument: a negative seed or `max_equations` below 1.

    >>> p = generate(7, max_equations=5)
    >>> p.provenance.name, 1 <= p.num_equations <= 5
    ('fuzz:7', True)
    """
    graph, inputs = generate_graph(seed, max_equations=max_equations, x64=x64)
    return Program.from_function(graph, inputs, Provenance("fuzz", f"fuzz:{seed}", int(seed)))
