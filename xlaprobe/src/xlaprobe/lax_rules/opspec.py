"""The fuzzer's op rule and what samplers are made of: dtypes, abstract values, operand domains,
`OpRule`, bounds helpers and the elementwise sampler factories.

A leaf: the primitive records (the family modules of `xlaprobe.lax_rules`) build their generator
rules from it, and `xlaprobe.sources.ops` (the catalogue) and `xlaprobe.sources.generator` read it. Exactness,
domains and notes are explained in `xlaprobe.sources.ops`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import jax
import ml_dtypes
import numpy as np

# ---------------------------------------------------------------------------------------------
# dtypes

FLOATS = ("float32", "float16", "bfloat16")
SIGNED = ("int8", "int16", "int32")
UNSIGNED = ("uint8", "uint16", "uint32")
INTS = SIGNED + UNSIGNED
BOOL = ("bool",)
NUMERIC = FLOATS + INTS
ALL = NUMERIC + BOOL
#: 64-bit dtypes, generated only with ``x64=True`` (they need ``jax_enable_x64``).
X64 = ("float64", "int64", "uint64")
#: Index dtypes of gathers, scatters and dynamic slices, narrowest first.
INDEX_DTYPES = ("uint8", "int8", "uint16", "int16", "int32", "uint32")


def dtype_of(name: str | np.dtype) -> np.dtype:
    """The NumPy dtype of a dtype name (``bfloat16`` from ml_dtypes).

    >>> dtype_of("bfloat16").name
    'bfloat16'
    """
    if isinstance(name, np.dtype):
        return name
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def is_float(dtype: Any) -> bool:
    """True for float16, bfloat16, float32, float64."""
    return dtype_of(dtype).name in FLOATS + ("float64",)


def is_int(dtype: Any) -> bool:
    """True for signed and unsigned integers (not bool)."""
    return dtype_of(dtype).kind in "iu"


def bits(dtype: Any) -> int:
    """The width of `dtype` in bits."""
    return dtype_of(dtype).itemsize * 8


def mantissa_bits(dtype: Any) -> int:
    """Significand bits of float `dtype`, the implicit leading bit included (24 for float32).
    """
    return int(ml_dtypes.finfo(dtype_of(dtype)).nmant) + 1


def int_range(dtype: Any) -> tuple[int, int]:
    """The smallest and largest value of integer `dtype`."""
    info = np.iinfo(dtype_of(dtype))
    return int(info.min), int(info.max)


# ---------------------------------------------------------------------------------------------
# records


@dataclasses.dataclass(frozen=True, slots=True)
class Aval:
    """Shape and dtype of a value (``f32[3,4]``).

    >>> str(Aval((3, 4), dtype_of("float32")))
    'float32[3,4]'
    """

    shape: tuple[int, ...]
    dtype: np.dtype

    def __str__(self) -> str:
        return f"{self.dtype.name}[{','.join(map(str, self.shape))}]"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def struct(self) -> jax.ShapeDtypeStruct:
        return jax.ShapeDtypeStruct(self.shape, self.dtype)

    def with_dtype(self, dtype: Any) -> Aval:
        return Aval(self.shape, dtype_of(dtype))

    def with_shape(self, shape: Sequence[int]) -> Aval:
        return Aval(tuple(int(d) for d in shape), self.dtype)


@dataclasses.dataclass(frozen=True, slots=True)
class Domain:
    """The values an operand may hold: a closed interval, plus NaN if `nan`.

    Fresh inputs are drawn from it (with special values inside it injected at a small rate when
    `specials`); a computed value is reused for the operand only if its tracked bounds lie inside.

    Attributes:
        name: shown in notes and errors.
        lo, hi: bounds of the finite values (may be infinite).
        nan: NaN allowed.
        specials: fresh inputs may get special values (±0, ±Inf, subnormals, extremes, NaN if
            allowed) injected.
        nonzero: zero excluded (integer divisors; -1 also excluded, see `DIV_NOTE`).
        unique: integer index arrays with distinct values (scatter without combiner).
        oob: integer index arrays with a few out-of-range values (clamped or dropped by the op).
    """

    name: str
    lo: float = -math.inf
    hi: float = math.inf
    nan: bool = True
    specials: bool = True
    nonzero: bool = False
    unique: bool = False
    oob: bool = False

    def fresh_only(self) -> bool:
        """True when no computed value can be proved to fit (only fresh inputs do)."""
        return self.nonzero or self.unique or self.oob


ANY = Domain("any")
POSITIVE = Domain("nonnegative", lo=0.0)
ABOVE_MINUS_ONE = Domain("at least -1", lo=-1.0)
AT_LEAST_ONE = Domain("at least 1", lo=1.0)
UNIT = Domain("[-1, 1]", lo=-1.0, hi=1.0)
MODERATE = Domain("[-20, 20]", lo=-20.0, hi=20.0)
ANGLE = Domain("[-100, 100]", lo=-100.0, hi=100.0)
NONZERO = Domain("nonzero", nonzero=True, specials=False)
GAMMA = Domain("at least 0.05", lo=0.05)
NO_NAN = Domain("no NaN", nan=False)


@dataclasses.dataclass(frozen=True, slots=True)
class Operand:
    """A requirement on one array operand.

    Attributes:
        aval: its shape and dtype.
        domain: the values it may hold.
        exact: a floating operand must be exact and free of subnormals (module docstring).
        fresh: must be a new program input (its values are planned, e.g. unique indices).
        value: a value the generator already chose (captured by a loop body or branch).
        slice_of: build it as a slice of operand `slice_of` (in-place update of a slice of itself).
        const: a constant array instead of a value (an XLA constant, e.g. ``x * 2.5``).
    """

    aval: Aval
    domain: Domain = ANY
    exact: bool = False
    fresh: bool = False
    value: int | None = None
    slice_of: int | None = None
    const: np.ndarray | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Sample:
    """One sampled use of an op: operand requirements in call order and keyword parameters."""

    operands: tuple[Operand, ...]
    params: dict[str, Any]


class Context(Protocol):
    """What a rule's sampler may ask of the generator (loop bodies and branches)."""

    def subgraph(self, in_avals: Sequence[Aval], out_avals: Sequence[Aval],
                 rng: np.random.Generator) -> tuple[Any, tuple[int, ...]]:
        """A small callable graph ``(*in_values, *captured) -> out_values`` and the ids of the
        outer values it captures."""

    def constant(self, aval: Aval, domain: Domain, rng: np.random.Generator) -> np.ndarray:
        """A constant array of `aval` drawn from `domain`."""

    @property
    def x64(self) -> bool:
        """Whether 64-bit dtypes may be generated."""


Sampler = Callable[[np.random.Generator, Aval, Context], Sample | None]
ParamSampler = Callable[[np.random.Generator, Aval], dict[str, Any] | None]
Bounds = Callable[[Sequence[tuple[float, float]], dict[str, Any]], tuple[float, float]]


@dataclasses.dataclass(frozen=True, slots=True)
class OpRule:
    """How the fuzzer emits one lax primitive.

    Attributes:
        name: the JAX primitive name (``scatter-add``, ``while``, ``conv_general_dilated``).
        family: ``unary``, ``binary``, ``bitwise``, ``compare``, ``select``, ``convert``,
            ``reduce``, ``cumulative``, ``contract``, ``window``, ``shape``, ``index``,
            ``scatter``, ``sort``, ``control``, ``random``.
        arity: array operands in the usual form (-1: variable).
        dtypes: dtypes of the primary operand (of the result for ops without operands) that the
            fuzzer generates; each is accepted by JAX (tested).
        sample: ``(rng, primary aval, context) -> Sample | None`` (None: the primary aval does not
            fit, e.g. a rank-0 operand for a transpose).
        build: ``(*arrays, **params) -> array or tuple``: calls the public lax function.
        exact_result: the results are exact when the floating operands are; a callable gets
            ``(operand avals, params)``.
        bounds: bounds of the (first) result from the operands' bounds, or None (unknown).
        min_rank: smallest rank of the primary operand.
        in_bodies: usable inside loop bodies and branches.
        weight: relative frequency.
        notes: XLA freedoms and why the domains and parameters are constrained.
        excluded: dtypes JAX accepts but the fuzzer does not generate, each with its reason.
    """

    name: str
    family: str
    arity: int
    dtypes: tuple[str, ...]
    sample: Sampler
    build: Callable[..., Any]
    exact_result: bool | Callable[[Sequence[Aval], dict[str, Any]], bool] = False
    bounds: Bounds | None = None
    min_rank: int = 0
    in_bodies: bool = True
    weight: float = 1.0
    notes: tuple[str, ...] = ()
    excluded: tuple[tuple[str, str], ...] = ()

    def is_exact(self, avals: Sequence[Aval], params: dict[str, Any]) -> bool:
        """Whether the results are exact given exact floating operands."""
        if callable(self.exact_result):
            return bool(self.exact_result(avals, params))
        return bool(self.exact_result)


def factor_domain(dtype: np.dtype) -> Domain:
    """The domain of the factors of a floating product (see `PRODUCT`); any value otherwise."""
    if not is_float(dtype):
        return ANY
    bound = 1.5 if dtype.name == "float16" else 2.0
    return Domain(f"[-{bound}, {bound}]", -bound, bound)


# ---------------------------------------------------------------------------------------------
# small helpers for samplers

#: The most elements a generated value may have.
MAX_ELEMENTS = 4096


def crop_ok(size: int, lo: int, hi: int) -> bool:
    """Negative padding of `lo` and `hi` crops within the `size` (dilated) elements of the data.

    The fuzzer's pads and convolutions keep to such crops: the reference's pad once mis-sized a
    crop that reached into the opposite side's padding (``pad(f32[2], (-3, 3))`` gave 3 elements,
    not 2). ``lax_rules.numeric.pad_general`` crops through since (its doctests); the check
    stays because dropping it changes every program a seed makes (the notes of ``pad`` still
    name it ``_crop_ok``)."""
    return max(-lo, 0) + max(-hi, 0) <= size




def choice(rng: np.random.Generator, items: Sequence[Any], p: Sequence[float] | None = None) -> Any:
    """One of `items`, drawn with probabilities proportional to `p` (uniform if None)."""
    if p is not None:
        p = np.asarray(p, np.float64) / np.sum(p)
    return items[int(rng.choice(len(items), p=p))]


def subset(rng: np.random.Generator, n: int, *, nonempty: bool = True) -> tuple[int, ...]:
    """Indices of a random subset of ``range(n)`` (non-empty when `nonempty` and n > 0)."""
    while True:
        chosen = tuple(i for i in range(n) if rng.random() < 0.5)
        if chosen or not nonempty or n == 0:
            return chosen


def same(aval: Aval, n: int, **kwargs: Any) -> tuple[Operand, ...]:
    """`n` operand requirements of the same `aval` (and keyword fields)."""
    return tuple(Operand(aval, **kwargs) for _ in range(n))


def hull(bounds: Sequence[tuple[float, float]], *extra: float) -> tuple[float, float]:
    """The smallest interval holding every interval of `bounds` and the `extra` values."""
    lows = [b[0] for b in bounds] + list(extra)
    highs = [b[1] for b in bounds] + list(extra)
    return (min(lows), max(highs)) if lows else (-math.inf, math.inf)


def fixed(lo: float, hi: float) -> Bounds:
    """Bounds that are always ``(lo, hi)``, whatever the operands'."""
    return lambda bounds, params: (lo, hi)


def monotone(fn: Callable[[float], float], increasing: bool = True) -> Bounds:
    """Bounds of ``fn`` of the first operand, for a monotone `fn` (increasing or not)."""
    def bounds(b: Sequence[tuple[float, float]], params: dict[str, Any]) -> tuple[float, float]:
        with np.errstate(all="ignore"):
            lo, hi = float(fn(b[0][0])), float(fn(b[0][1]))
        if math.isnan(lo) or math.isnan(hi):
            return -math.inf, math.inf
        return (lo, hi) if increasing else (hi, lo)
    return bounds


def structural_bounds(b: Sequence[tuple[float, float]], params: dict[str, Any]) -> tuple[float, float]:
    """Bounds of an op that only moves values (zero included: pad and fill values)."""
    return hull(b, 0.0)  # zero: fill values of pads, dropped gathers


def add_bounds(b: Sequence[tuple[float, float]], params: dict[str, Any]) -> tuple[float, float]:
    """Bounds of ``x + y`` from the operands' bounds (unknown where they give NaN)."""
    (a, c), (d, e) = b
    with np.errstate(all="ignore"):
        lo, hi = a + d, c + e
    return (-math.inf if math.isnan(lo) else lo, math.inf if math.isnan(hi) else hi)


def mul_bounds(b: Sequence[tuple[float, float]], params: dict[str, Any]) -> tuple[float, float]:
    """Bounds of ``x * y`` from the operands' bounds (unknown where they give NaN)."""
    (a, c), (d, e) = b
    with np.errstate(all="ignore"):
        products = [a * d, a * e, c * d, c * e]
    if any(math.isnan(p) for p in products):
        return -math.inf, math.inf
    return min(products), max(products)


def square_bounds(b: Sequence[tuple[float, float]], params: dict[str, Any]) -> tuple[float, float]:
    """Bounds of ``x * x`` from the operand's bounds."""
    lo, hi = b[0]
    top = max(lo * lo, hi * hi)
    return (0.0 if lo <= 0 <= hi else min(lo * lo, hi * hi)), top


def abs_bounds(b: Sequence[tuple[float, float]], params: dict[str, Any]) -> tuple[float, float]:
    """Bounds of ``|x|`` from the operand's bounds."""
    lo, hi = b[0]
    return (0.0 if lo <= 0 <= hi else min(abs(lo), abs(hi))), max(abs(lo), abs(hi))


def max_bounds(b: Sequence[tuple[float, float]], params: dict[str, Any]) -> tuple[float, float]:
    """Bounds of an elementwise maximum from the operands' bounds."""
    return max(x[0] for x in b), max(x[1] for x in b)


def min_bounds(b: Sequence[tuple[float, float]], params: dict[str, Any]) -> tuple[float, float]:
    """Bounds of an elementwise minimum from the operands' bounds."""
    return min(x[0] for x in b), min(x[1] for x in b)


# ---------------------------------------------------------------------------------------------
# elementwise families


def elementwise_sampler(arity: int, domains: Sequence[Domain | Callable[[np.dtype], Domain]],
                         exact: Sequence[bool],
                         const_p: float = 0.2,
                         params: ParamSampler | None = None,
                         operand_dtype: Callable[[Aval, int], Aval] | None = None) -> Sampler:
    """A sampler for an elementwise op of `arity` operands of the primary's shape.

    Operand i takes its domain from ``domains[i]`` (the last repeats; a callable gives one per
    dtype) and its exactness from ``exact[i]``; the last operand is a constant with probability
    `const_p`; parameters come from `params`, operand dtypes from `operand_dtype`.
    """
    def sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
        operands = []
        # At most one constant operand (the last), like x * 2.5 in real programs.
        const_at = arity - 1 if arity >= 2 and rng.random() < const_p else -1
        for i in range(arity):
            a = operand_dtype(aval, i) if operand_dtype else aval
            domain = domains[min(i, len(domains) - 1)]
            if callable(domain):  # a domain per dtype
                domain = domain(a.dtype)
            if i == const_at and not domain.fresh_only():
                value = ctx.constant(Aval((), a.dtype), domain, rng)
                operands.append(Operand(a, domain, const=np.broadcast_to(value, a.shape).copy()
                                        if rng.random() < 0.5 else value))
            else:
                operands.append(Operand(a, domain, exact=exact[min(i, len(exact) - 1)],
                                        fresh=domain.fresh_only()))
        extra = params(rng, aval) if params else {}
        if extra is None:
            return None
        return Sample(tuple(operands), extra)
    return sample


def call(fn: Callable[..., Any]) -> Callable[..., Any]:
    """build() of an elementwise op whose constant operand is a NumPy array or scalar."""
    return lambda *args, **params: fn(*args, **params)


def unary(name: str, fn: Callable[..., Any], dtypes: Sequence[str] = FLOATS, *,
           domain: Domain | Callable[[np.dtype], Domain] = ANY, exact: bool = False,
           exact_result: bool = False, bounds: Bounds | None = None, notes: Sequence[str] = (),
           excluded: Sequence[tuple[str, str]] = (), params: ParamSampler | None = None,
           weight: float = 1.0) -> OpRule:
    """The rule of a one-operand elementwise op built by `fn` (public as `unary_rule`)."""
    return OpRule(name, "unary", 1, tuple(dtypes),
                  elementwise_sampler(1, [domain], [exact], params=params), call(fn),
                  exact_result=exact_result, bounds=bounds, notes=tuple(notes),
                  excluded=tuple(excluded), weight=weight)


#: The factory of a unary elementwise rule: ``unary_rule(name, fn, dtypes=FLOATS, *, domain=ANY,
#: exact=False, exact_result=False, bounds=None, notes=(), excluded=(), params=None,
#: weight=1.0)``, public for primitives defined elsewhere (`xlaprobe.extend`).
unary_rule = unary


def binary(name: str, fn: Callable[..., Any], dtypes: Sequence[str], *,
            domains: Sequence[Domain] = (ANY, ANY), exact: Sequence[bool] = (False, False),
            exact_result: bool | Callable[..., bool] = False, bounds: Bounds | None = None,
            family: str = "binary", notes: Sequence[str] = (),
            excluded: Sequence[tuple[str, str]] = (), weight: float = 1.0,
            operand_dtype: Callable[[Aval, int], Aval] | None = None) -> OpRule:
    """The rule of a two-operand elementwise op built by `fn` (family ``binary`` by default).
    """
    return OpRule(name, family, 2, tuple(dtypes),
                  elementwise_sampler(2, domains, exact, operand_dtype=operand_dtype), call(fn),
                  exact_result=exact_result, bounds=bounds, notes=tuple(notes),
                  excluded=tuple(excluded), weight=weight)


def int_exact(avals: Sequence[Aval], params: dict[str, Any]) -> bool:
    """True when no operand is floating (integer results are exact)."""
    return not any(is_float(a.dtype) for a in avals)


DISCONTINUOUS = ("discontinuous: floating operands must be exact and free of subnormals, else a "
                  "rounding difference between XLA and the float64 reference flips the result")
APPROX = ("XLA:CPU evaluates it with a polynomial or rational approximation (a few ULPs), covered "
           "by the oracle's relative bound")
FTZ = "XLA:CPU may flush subnormal operands and results to zero (labelled ftz by the oracle)"
EDGE = ("exact operands: ill-conditioned at the ends of its domain, where the few-ULP "
         "approximation errors of a producer become large (XLA's tanh returns -1 for x < -7.9, "
         "so atanh(tanh(-8)) is -inf instead of -8)")
ILL = ("exact operands: ill-conditioned (erfc's tail: relative condition 2x**2; tan near its "
        "poles), so the few-ULP error of an approximate producer (XLA's lgamma) grows past the "
        "oracle's bound, while its error budget only models correctly rounded producers")
PRODUCT = ("floating factors in [-2, 2] ([-1.5, 1.5] for float16): XLA may associate a product "
            "differently, and a partial product that overflows and meets a zero gives NaN where "
            "the sequential product is 0")
RANK0 = ("rank >= 1 for now: the reference rule returns shape (1,) for a rank-0 operand "
          "(np.ascontiguousarray makes 0-d arrays 1-d); drop min_rank when reference.py is fixed")
DIV_NOTE = ("integer division or remainder by 0 and INT_MIN / -1 are implementation-defined "
             "(StableHLO): integer divisors are fresh inputs without 0 and -1")
