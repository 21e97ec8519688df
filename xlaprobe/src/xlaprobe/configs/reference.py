"""The ``reference`` configuration: a NumPy interpreter of jaxprs that never calls XLA.

It is the oracle's second opinion, and the only one that sees faults XLA makes op by op (a wrong
``cbrt`` kernel, a scatter that drops valid indices, a convolution that reads past its padding):
every rule below follows the XLA / StableHLO semantics of its primitive, written out in NumPy.

Two modes, one rule table:

* **float64** (default, ``reference``): every floating value is carried and computed in float64,
  whatever the program's dtype (float16, bfloat16, float32 inputs, literals and constants are upcast;
  conversions between float dtypes are the identity). This is the "true" answer, up to float64
  rounding, that a correct compilation approximates.
* **native** (``reference:native``, ``round_each_op=True``): after every equation each floating
  result is rounded to its outvar's dtype (then carried as float64), and sums (reduce_sum,
  dot_general, convolutions, cumulative and windowed sums, scatter-add) accumulate in the program's
  dtype. It models an honest computation in the program's own precision; its distance from the
  float64 run is the error budget the oracle allows a configuration, so that ill-conditioned
  programs raise no alarm while a fault far beyond that budget still does. float16 and bfloat16
  sums accumulate in float32, as every hardware dot unit and XLA:CPU do, except scatters: their
  combines round to the output dtype one update at a time, in XLA:CPU's order
  (`_scatter_rounding`).

Integers and booleans are exact in both modes: arithmetic wraps in two's complement, division and
remainder truncate, shifts and conversions saturate or wrap exactly as XLA specifies. Operations
about the representation (bitcast_convert_type, nextafter, reduce_precision) act on the value
rounded to the operand's dtype in both modes. Subnormals are never flushed (XLA:CPU may flush them:
a legal freedom the oracle labels, not a reference behaviour).

Rules live in `RULES`, keyed by JAX primitive name. The rules of the elementwise primitives, the
special functions, reductions, contractions and windows, shapes, indexing, sorting and control
flow come from their records (``lax_rules/<family>.py``, beside each primitive's facts, fuzzer
rule and budget), those that call SciPy's LAPACK and NumPy's FFT (linear algebra, ``fft``) from
``configs/reference_scipy.py``, the collectives' from ``configs/reference_spmd.py``; calls,
callbacks, annotations and the PRNG are written below (they read the equation itself or trace
JAX's own PRNG definition). A rule is ``rule(ctx, *args, **params)``: `ctx`
(a `_Ctx`, which satisfies `xlaprobe.lax_rules.numeric.RuleContext`) tells the mode and the equation's logical dtypes and shapes, `args` are NumPy arrays
(floating ones as float64), `params` are the equation's parameters. It returns one array, or a list
for multiple-result primitives; the interpreter then rounds (native mode) and casts to the outvar
dtype. PRNG key arrays are carried as `Keys` (``lax_rules.numeric``: impl plus uint32 key data); structural primitives
work on them component by component, and the ``random_*`` primitives evaluate JAX's own definition
of the PRNG (traced to a jaxpr) with these same rules, so ``jax.random`` is bit-exact.

Source: StableHLO specification (https://openxla.org/stablehlo/spec) and XLA operation semantics
(https://openxla.org/xla/operation_semantics); behaviours the specs leave open (float to int
conversion of NaN and out-of-range values, division by zero, out-of-bounds scatter) follow XLA:CPU
as measured on jaxlib 0.10.2.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import jax
import ml_dtypes
import numpy as np
from xlaprobe import jaxcompat

from xlaprobe import approximations, jaxprs, primitives
from xlaprobe.configs import reference_scipy, reference_spmd
from xlaprobe.lax_rules import registry
from xlaprobe.lax_rules.numeric import Keys as _Keys
from xlaprobe.lax_rules.numeric import Rule
from xlaprobe.lax_rules.numeric import carrier as _carrier
from xlaprobe.lax_rules.numeric import dtype_kind as _kind
from xlaprobe.lax_rules.numeric import flushed as _flushed
from xlaprobe.errors import InvalidArgument, UnsupportedPrimitive

if TYPE_CHECKING:
    from xlaprobe.configs.registry import Configuration

_WHERE = "xlaprobe/configs/reference.py"

__all__ = ["KIND", "RULES", "ReferenceKind", "evaluate"]


# ---------------------------------------------------------------------------------------------
# dtypes and values


def _prepare(value: Any, aval: Any) -> Any:
    """An input value in carried form: float64 for floats, the exact dtype otherwise."""
    if isinstance(value, _Keys):
        return value
    dtype = aval.dtype
    if _kind(dtype) == "k":
        data = np.asarray(jax.random.key_data(value), np.uint32)
        return _Keys(dtype._impl, data)
    return np.asarray(value, dtype=_carrier(dtype))


def _finish(value: Any, aval: Any, native: bool, flush: bool = False,
            rng: np.random.Generator | None = None, roundoffs: float = 1.0) -> Any:
    """A rule's result in carried form; in native mode floats are rounded to the outvar dtype, and
    with `flush` subnormal results become zero of the same sign; with `rng` (Monte Carlo
    arithmetic) each result is first perturbed by a random relative amount of up to `roundoffs`
    unit roundoffs of its dtype."""
    dtype = aval.dtype
    kind = _kind(dtype)
    if kind == "k":
        return value
    if kind in "fc":
        out = np.asarray(value, dtype=_carrier(dtype))
        if native and rng is not None and kind == "f" and out.size:
            # Like stochastic rounding, leave results the dtype represents exactly alone.
            roundoff = roundoffs * float(ml_dtypes.finfo(dtype).eps) / 2
            inexact = out.astype(dtype).astype(out.dtype) != out
            out = np.where(inexact, out * (1.0 + roundoff * rng.uniform(-1.0, 1.0, out.shape)), out)
        if native and np.dtype(dtype) != out.dtype:
            out = out.astype(dtype).astype(out.dtype)
        if flush and kind == "f":
            out = _flushed(out, dtype)
        return out
    return np.asarray(value).astype(dtype, copy=False)


# ---------------------------------------------------------------------------------------------
# the interpreter


@dataclasses.dataclass(frozen=True, slots=True)
class _Ctx:
    """What a rule may know besides its operands and parameters.

    Attributes:
        interp: the running interpreter (for inner jaxprs).
        eqn: the equation being evaluated.
        in_dtypes: logical dtype per operand (float32, not the float64 it is carried in).
        out_dtypes: logical dtype per result.
        out_shapes: shape per result.
    """

    interp: _Interpreter
    eqn: Any
    in_dtypes: tuple[np.dtype, ...]
    out_dtypes: tuple[np.dtype, ...]
    out_shapes: tuple[tuple[int, ...], ...]

    @property
    def native(self) -> bool:
        return self.interp.native

    @property
    def flush(self) -> bool:
        return self.interp.flush

    @property
    def rng(self) -> np.random.Generator | None:
        return self.interp.rng

    @property
    def out_dtype(self) -> np.dtype:
        return self.out_dtypes[0]

    @property
    def multiple_results(self) -> bool:
        return self.eqn.primitive.multiple_results

    def acc_dtype(self, dtype: Any = None) -> np.dtype:
        """The dtype a sum producing `dtype` (default: the first result's) accumulates in."""
        dtype = np.dtype(self.out_dtype if dtype is None else dtype)
        kind = _kind(dtype)
        if kind not in "fc":
            return np.dtype(np.uint64 if kind == "u" else np.int64) if kind != "b" else dtype
        if not self.native:
            return _carrier(dtype)
        if kind == "f" and dtype.itemsize < 4:
            return np.dtype(np.float32)
        return dtype

    def eval(self, closed: Any, args: Sequence[Any], consts: Sequence[Any] = ()) -> list[Any]:
        if consts:
            closed = jaxcompat.close(closed, consts)
        return self.interp.eval_closed(closed, args)


#: Primitives a floating multiply's result is contracted into (``fma`` variant): an add or a
#: subtract of the product, as LLVM contracts ``fmul`` then ``fadd``/``fsub`` into one FMA.
_CONTRACTING = frozenset({"add", "sub"})


def _contracted_products(jaxpr: Any) -> set[int]:
    """ids of the floating ``mul`` outvars of `jaxpr` that an FMA contraction leaves unrounded:
    a product used once, by an add or subtract, and not a jaxpr output. Of an add of two such
    products the first operand is contracted, as LLVM's DAG combiner tries the first first."""
    uses: collections.Counter[int] = collections.Counter(
        id(v) for eqn in jaxpr.eqns for v in eqn.invars if not isinstance(v, jaxcompat.Literal))
    for v in jaxpr.outvars:
        if not isinstance(v, jaxcompat.Literal):
            uses[id(v)] += 1
    products = {id(eqn.outvars[0]) for eqn in jaxpr.eqns if eqn.primitive.name == "mul"
                and _kind(eqn.outvars[0].aval.dtype) == "f"}
    chosen: set[int] = set()
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in _CONTRACTING:
            first = next((id(v) for v in eqn.invars if not isinstance(v, jaxcompat.Literal)
                          and id(v) in products and uses[id(v)] == 1), None)
            if first is not None:
                chosen.add(first)
    return chosen


class _Interpreter:
    def __init__(self, native: bool, flush: bool = False, rng: np.random.Generator | None = None,
                 contract: bool = False):
        self.native = native
        self.flush = flush
        self.rng = rng
        self.contract = contract
        self.unrounded: set[int] = set()

    def eval_closed(self, closed: Any, args: Sequence[Any]) -> list[Any]:
        closed = jaxcompat.as_closed(closed)
        jaxpr = closed.jaxpr
        if self.contract:
            self.unrounded |= _contracted_products(jaxpr)
        consts = [_prepare(c, v.aval) for c, v in zip(closed.consts, jaxpr.constvars, strict=True)]
        outs = jaxprs.eval_jaxpr_with(jaxpr, consts, list(args), self.apply)
        return [_prepare(o, v.aval) for o, v in zip(outs, jaxpr.outvars, strict=True)]

    def apply(self, eqn: Any, invals: list[Any]) -> list[Any]:
        name = eqn.primitive.name
        rule = RULES.get(name)
        if rule is None:
            raise UnsupportedPrimitive(name, _WHERE)
        args = [_prepare(v, a.aval) for v, a in zip(invals, eqn.invars, strict=True)]
        ctx = _Ctx(self, eqn, tuple(a.aval.dtype for a in eqn.invars),
                   tuple(v.aval.dtype for v in eqn.outvars),
                   tuple(tuple(getattr(v.aval, "shape", ())) for v in eqn.outvars))
        known = primitives.facts(name)
        try:
            if not known.whole_keys and any(isinstance(a, _Keys) for a in args):
                outs = _on_key_components(rule, ctx, args, eqn.params)
            else:
                outs = rule(ctx, *args, **eqn.params)
        except (UnsupportedPrimitive, InvalidArgument):
            raise
        except Exception as exc:
            exc.add_note(f"in the reference rule for '{name}' ({_WHERE})")
            raise
        if not eqn.primitive.multiple_results:
            outs = [outs]
        if self.rng is not None and name in _ACCUMULATION_TERMS and _kind(ctx.out_dtype) == "f":
            outs = [self._accumulation_error(rule, ctx, args, eqn.params, outs[0])]
        # Monte Carlo arithmetic perturbs only results that IEEE arithmetic rounds: a max, a
        # select or a slice is exact, and perturbing it would break exact equalities programs
        # rely on (the argmax mask eq(x, max(x)) of a max's gradient).
        rng = self.rng if known.rounding else None
        if rng is not None and name in approximations.BUDGETS and len(outs) == 1 and \
                _kind(ctx.out_dtype) == "f":
            # A special function whose measured error budget is known: sample it, then round.
            outs = [self._approximation_error(name, rule, ctx, args, eqn.params, outs[0])]
            rng = None
        # XLA's transcendental kernels are approximations a few ULPs wide, not correctly rounded.
        roundoffs = 2.0 * APPROXIMATION_ULPS if known.approximate else 1.0
        # An FMA keeps the product exact (float64 holds a float32 product exactly) and rounds
        # once, after the add.
        native = self.native and not (self.contract and id(eqn.outvars[0]) in self.unrounded)
        return [_finish(o, v.aval, native, self.flush, rng, roundoffs)
                for o, v in zip(outs, eqn.outvars, strict=True)]


    def _approximation_error(self, name: str, rule: Rule, ctx: _Ctx, args: list[Any],
                             params: dict[str, Any], out: np.ndarray) -> np.ndarray:
        # XLA's kernel may land anywhere within its measured budget (`approximations`): a random
        # sign times a share of it in `approximations.SAMPLED`, so that every sample gives the
        # oracle (4x the honest error) between one and two budgets, and downstream
        # cancellation sees it.
        out = np.asarray(out, np.float64)
        floats = [np.asarray(a, np.float64) if isinstance(a, np.ndarray) and a.dtype.kind == "f"
                  else a for a in args]
        width = approximations.allowed_error(
            name, floats, out, ctx.out_dtype,
            fn=lambda *moved: np.asarray(rule(ctx, *moved, **params), np.float64))
        size = self.rng.uniform(*approximations.SAMPLED, out.shape) * self.rng.choice(
            [-1.0, 1.0], out.shape)
        return out + width * size

    def _accumulation_error(self, rule: Rule, ctx: _Ctx, args: list[Any], params: dict[str, Any],
                            out: np.ndarray) -> np.ndarray:
        # NumPy sums pairwise and in blocks; XLA may sum sequentially, with an error up to ~n times
        # larger. Monte Carlo arithmetic that perturbs only the final sum would undersample it, so
        # sample the probabilistic bound sqrt(n) * u * sum|terms| (Higham and Mary, "A new approach
        # to probabilistic rounding error analysis", SIAM J. Sci. Comput. 2019).
        # |terms|: the floating operands only (abs of scatter indices would move them).
        magnitude = np.asarray(rule(ctx, *[np.abs(a) if isinstance(a, np.ndarray) and
                                           a.dtype.kind in "fc" else a for a in args],
                                    **params), np.float64)
        terms = _ACCUMULATION_TERMS[ctx.eqn.primitive.name](args, params, magnitude)
        roundoff = float(ml_dtypes.finfo(ctx.out_dtype).eps) / 2
        noise = self.rng.uniform(-1.0, 1.0, magnitude.shape)
        return np.asarray(out, np.float64) + roundoff * math.sqrt(max(terms, 1)) * magnitude * noise


def evaluate(closed_jaxpr: Any, inputs: Sequence[np.ndarray], *,
             round_each_op: bool = False, flush_subnormals: bool = False,
             mca_seed: int | None = None, contract: bool = False) -> list[np.ndarray]:
    """Evaluate a closed jaxpr in NumPy, following XLA semantics, without XLA.

    Args:
        closed_jaxpr: a `jax.core.ClosedJaxpr` (canonical or not: call-like equations are
            evaluated by recursion).
        inputs: one array per invar, of the invar's shape; floating inputs of any float dtype.
        round_each_op: native mode (see the module docstring): round every floating result to its
            dtype and accumulate sums in that dtype. Default: float64 throughout.
        flush_subnormals: with `round_each_op`, also flush subnormal inputs and results of every
            equation to zero (``reference:ftz``): what XLA:CPU may legally do (DAZ/FTZ).
        mca_seed: with `round_each_op`, Monte Carlo arithmetic (``reference:mca[seed=N]``): every
            floating result is perturbed by a random relative amount of up to one unit roundoff
            (`APPROXIMATION_ULPS` ULPs for approximate primitives, sums by
            `_ACCUMULATION_TERMS`) before rounding, so repeated runs sample the spread of honest
            rounding errors rather than one instance of it. Source: D. S. Parker, "Monte Carlo Arithmetic" (1997); the
            CESTAC method of J. Vignes (1993).
        contract: with `round_each_op`, FMA contraction (``reference:fma``): a floating product
            used once, by an add or subtract, is not rounded (`_contracted_products`), so the
            pair rounds once, as a fused multiply-add does: the evidence for the ``fma`` freedom
            (`xlaprobe.freedoms`).

    Returns:
        One array per outvar: float64 for floating outvars (both modes), the exact outvar dtype for
        integer and boolean ones, the uint32 key data for PRNG key outvars.

    Raises:
        UnsupportedPrimitive: the jaxpr uses a primitive that has no rule in `RULES`.
        InvalidArgument: wrong number of inputs.

    >>> import jax
    >>> closed = jax.make_jaxpr(lambda b: b * b)(np.int8(16))
    >>> evaluate(closed, [np.int8(16)])  # int8 arithmetic wraps
    [array(0, dtype=int8)]
    >>> closed = jax.make_jaxpr(lambda x: x / 3)(np.float32(1))
    >>> [float(v) for v in evaluate(closed, [np.float32(1)])]
    [0.3333333333333333]
    >>> [float(v) for v in evaluate(closed, [np.float32(1)], round_each_op=True)]
    [0.3333333432674408]
    """
    jaxpr = closed_jaxpr.jaxpr
    if len(inputs) != len(jaxpr.invars):
        raise InvalidArgument(f"the jaxpr takes {len(jaxpr.invars)} inputs, got {len(inputs)}")
    flush = round_each_op and flush_subnormals
    rng = np.random.default_rng(mca_seed) if round_each_op and mca_seed is not None else None
    interp = _Interpreter(round_each_op, flush, rng, contract=round_each_op and contract)
    args = [_prepare(x, v.aval) for x, v in zip(inputs, jaxpr.invars)]
    if round_each_op:
        args = [_finish(a, v.aval, True, flush) for a, v in zip(args, jaxpr.invars)]
    with np.errstate(all="ignore"):
        outs = interp.eval_closed(closed_jaxpr, args)
    return [o.data if isinstance(o, _Keys) else np.asarray(o) for o in outs]


# ---------------------------------------------------------------------------------------------
# PRNG keys: structural primitives act on each key component separately


def _on_key_components(rule: Rule, ctx: _Ctx, args: list[Any], params: dict[str, Any]) -> Any:
    impl = next(a.impl for a in args if isinstance(a, _Keys))
    key_shape = tuple(impl.key_shape)
    width = math.prod(key_shape)
    phys = lambda dts: tuple(np.dtype(np.uint32) if _kind(d) == "k" else d for d in dts)  # noqa: E731
    pctx = dataclasses.replace(ctx, in_dtypes=phys(ctx.in_dtypes), out_dtypes=phys(ctx.out_dtypes))

    def component(a: Any, c: int) -> Any:
        if not isinstance(a, _Keys):
            return a
        return a.data.reshape(a.shape + (width,))[..., c]

    per_component = []
    for c in range(width):
        outs = rule(pctx, *[component(a, c) for a in args], **params)
        per_component.append(list(outs) if ctx.multiple_results else [outs])
    results = []
    for j, dtype in enumerate(ctx.out_dtypes):
        if _kind(dtype) == "k":
            data = np.stack([np.asarray(p[j], np.uint32) for p in per_component], axis=-1)
            results.append(_Keys(dtype._impl, data.reshape(data.shape[:-1] + key_shape)))
        else:
            results.append(per_component[0][j])
    return results if ctx.multiple_results else results[0]


# ---------------------------------------------------------------------------------------------
# identities: copies, sharding and scheduling annotations (the other families' rules live in
# their primitives' records, xlaprobe.lax_rules)


def _identity(ctx: _Ctx, *args: Any, **_: Any) -> Any:
    return list(args) if ctx.multiple_results else args[0]


# ---------------------------------------------------------------------------------------------
# control flow and calls


def _call(ctx: _Ctx, *args: Any, **params: Any) -> list[Any]:
    outs = ctx.eval(primitives.call_jaxpr(ctx.eqn), list(args))
    return outs if ctx.multiple_results else outs[0]


def _logical_args(ctx: _Ctx, args: Sequence[Any]) -> list[Any]:
    """Operands in the program's own dtypes, for user callbacks."""
    return [a.data if isinstance(a, _Keys) else np.asarray(a).astype(d)
            for a, d in zip(args, ctx.in_dtypes)]


def _pure_callback(ctx: _Ctx, *args: Any, callback: Callable[..., Any], **_: Any) -> list[Any]:
    outs = callback(*_logical_args(ctx, args))
    return [np.asarray(o) for o in jax.tree_util.tree_leaves(outs)]


def _debug_callback(ctx: _Ctx, *args: Any, callback: Callable[..., Any], **_: Any) -> list[Any]:
    callback(*_logical_args(ctx, args))
    return []


def _no_output(ctx: _Ctx, *args: Any, **_: Any) -> list[Any]:
    return []  # debug_print: printing from the oracle would duplicate the program's own output


def _platform_index(ctx: _Ctx, *, platforms: Any, **_: Any) -> np.ndarray:
    default = None
    for i, names in enumerate(platforms):
        if names is None:
            default = i
        elif "cpu" in names:
            return np.int32(i)
    return np.int32(default if default is not None else 0)


def _tie(ctx: _Ctx, x: Any, y: Any, **_: Any) -> Any:
    return y


# ---------------------------------------------------------------------------------------------
# PRNG: threefry2x32 in NumPy, and the key primitives by JAX's own definition


def _rotl32(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _threefry2x32(ctx: _Ctx, k1: np.ndarray, k2: np.ndarray, x1: np.ndarray, x2: np.ndarray,
                  **_: Any) -> list[np.ndarray]:
    """Threefry-2x32 with 20 rounds (Salmon et al. 2011, "Parallel random numbers: as easy as 1, 2, 3")."""
    k1, k2, x1, x2 = np.broadcast_arrays(*(np.asarray(a, np.uint32) for a in (k1, k2, x1, x2)))
    ks = [k1, k2, k1 ^ k2 ^ np.uint32(0x1BD11BDA)]
    rotations = ((13, 15, 26, 6), (17, 29, 16, 24))
    x = [x1 + ks[0], x2 + ks[1]]
    for i in range(5):
        for r in rotations[i % 2]:
            x[0] = x[0] + x[1]
            x[1] = _rotl32(x[1], r) ^ x[0]
        x[0] = x[0] + ks[(i + 1) % 3]
        x[1] = x[1] + ks[(i + 2) % 3] + np.uint32(i + 1)
    return x


def _iota_2x32_shape(ctx: _Ctx, *, shape: Sequence[int], **_: Any) -> list[np.ndarray]:
    counts = np.arange(math.prod(shape), dtype=np.uint64).reshape(tuple(shape))
    return [(counts >> np.uint64(32)).astype(np.uint32), counts.astype(np.uint32)]


@functools.lru_cache(maxsize=256)
def _traced_prng(op: str, impl: Any, in_avals: tuple[tuple[tuple[int, ...], str], ...],
                 params: tuple[Any, ...]) -> Any:
    """JAX's own definition of a PRNG primitive on raw key data, as a jaxpr (cached)."""
    random_core, prng = jaxcompat.prng_internals()

    key_ndim = len(in_avals[0][0]) - len(impl.key_shape)
    if op == "seed":
        fn = prng.iterated_vmap_unary(len(in_avals[0][0]), impl.seed)
    elif op == "split":
        (shape,) = params
        fn = prng.iterated_vmap_unary(key_ndim, lambda k: impl.split(k, shape))
    elif op == "bits":
        bit_width, shape = params
        fn = prng.iterated_vmap_unary(key_ndim, lambda k: impl.random_bits(k, bit_width, shape))
    elif op == "fold_in":
        fn = prng.iterated_vmap_binary_bcast(in_avals[0][0][:key_ndim], in_avals[1][0], impl.fold_in)
    else:  # gamma: the lowering's definition (vmapped samples), on wrapped keys
        (log_space,) = params

        def fn(data: Any, a: Any) -> Any:
            keys = prng.random_wrap(data, impl=impl)
            return random_core._gamma_impl(keys, a, log_space=log_space, use_vmap=True)
    specs = [jax.ShapeDtypeStruct(shape, np.dtype(dtype)) for shape, dtype in in_avals]
    return jax.make_jaxpr(fn)(*specs)


def _run_prng(ctx: _Ctx, op: str, impl: Any, arrays: Sequence[np.ndarray],
              params: tuple[Any, ...] = ()) -> np.ndarray:
    dtypes = [np.dtype(np.uint32) if _kind(d) == "k" else np.dtype(d) for d in ctx.in_dtypes]
    avals = tuple((tuple(a.shape), d.str) for a, d in zip(arrays, dtypes))
    closed = _traced_prng(op, impl, avals, params)
    return ctx.eval(closed, list(arrays))[0]


def _random_seed(ctx: _Ctx, seeds: np.ndarray, *, impl: Any, **_: Any) -> _Keys:
    return _Keys(impl, np.asarray(_run_prng(ctx, "seed", impl, [seeds]), np.uint32))


def _random_split(ctx: _Ctx, keys: _Keys, *, shape: Sequence[int], **_: Any) -> _Keys:
    data = _run_prng(ctx, "split", keys.impl, [keys.data], (tuple(shape),))
    return _Keys(keys.impl, np.asarray(data, np.uint32))


def _random_fold_in(ctx: _Ctx, keys: _Keys, msgs: np.ndarray, **_: Any) -> _Keys:
    data = _run_prng(ctx, "fold_in", keys.impl, [keys.data, msgs])
    return _Keys(keys.impl, np.asarray(data, np.uint32))


def _random_bits(ctx: _Ctx, keys: _Keys, *, bit_width: int, shape: Sequence[int], **_: Any) -> np.ndarray:
    return _run_prng(ctx, "bits", keys.impl, [keys.data], (int(bit_width), tuple(shape)))


def _random_gamma(ctx: _Ctx, keys: _Keys, a: np.ndarray, *, log_space: bool = False,
                  **_: Any) -> np.ndarray:
    return _run_prng(ctx, "gamma", keys.impl, [keys.data, a], (bool(log_space),))


def _random_wrap(ctx: _Ctx, data: np.ndarray, *, impl: Any, **_: Any) -> _Keys:
    return _Keys(impl, np.asarray(data, np.uint32))


def _random_unwrap(ctx: _Ctx, keys: _Keys, **_: Any) -> np.ndarray:
    return keys.data


# ---------------------------------------------------------------------------------------------
# the rule table

RULES: dict[str, Rule] = {
    # elementwise, special functions, reductions, contractions and windows, shapes, indexing,
    # sorting, control flow: each rule sits in its primitive's record (xlaprobe.lax_rules)
    **registry.reference_rules(),
    # identities: copies, sharding and scheduling annotations
    **{name: _identity for name in ("copy", "optimization_barrier", "sharding_constraint", "reshard",
                                    "layout_constraint", "device_put", "pvary", "name",
                                    "stop_gradient", "random_clone",
                                    "with_memory_space_constraint")},
    "tie": _tie,
    # structure
    # control flow and calls
    **{name: _call for name in sorted(primitives.names(lambda p: p.call_like))},
    "pure_callback": _pure_callback, "io_callback": _pure_callback,
    "debug_callback": _debug_callback, "debug_print": _no_output,
    "platform_index": _platform_index,
    # PRNG
    "threefry2x32": _threefry2x32, "iota_2x32_shape": _iota_2x32_shape,
    "random_seed": _random_seed, "random_split": _random_split, "random_fold_in": _random_fold_in,
    "random_bits": _random_bits, "random_wrap": _random_wrap, "random_unwrap": _random_unwrap,
    "random_gamma": _random_gamma,
    # linear algebra and FFT by NumPy's and SciPy's LAPACK and pocketfft
    **reference_scipy.RULES,
    # shard_map, its body per device, and the collectives (exact emulation)
    **reference_spmd.RULES,
}


# ---------------------------------------------------------------------------------------------
# the configuration kind


@dataclasses.dataclass(frozen=True, slots=True)
class ReferenceKind:
    """The ``reference`` configuration kind (see the module docstring).

    Variants: none (float64 throughout) and ``native`` (each op rounded to its dtype: the error
    budget). No options: there is no compiler to configure.
    """

    name: str = "reference"
    #: xlaprobe's own interpreter: an exception it raises is a tool error, not a finding.
    interpreter: bool = True
    description: str = ("NumPy interpreter of the jaxpr, independent of XLA: float64 by default; "
                        "':native' rounds each op to the program's dtypes, ':ftz' also flushes "
                        "subnormals, ':fma' contracts multiply-adds, ':mca[seed=N]' adds Monte Carlo "
                        "arithmetic (error budget)")

    def validate(self, config: Configuration) -> None:
        """Raise `InvalidArgument` unless `config` is ``reference`` or ``reference:native``."""
        if config.variant not in (None, "native", "ftz", "mca", "fma"):
            raise InvalidArgument(
                f"unknown variant '{config.variant}' of configuration kind 'reference'; "
                "use 'reference' (float64), 'reference:native' (rounded to the program's dtypes), "
                "'reference:ftz' (native, subnormals flushed to zero), 'reference:fma' (native, "
                "products contracted into the add that uses them) or 'reference:mca[seed=N]' "
                "(native with Monte Carlo arithmetic)")
        if config.variant == "mca":
            names = [name for name, _ in config.options]
            if names not in ([], ["seed"]) or not all(v.isdigit() for _, v in config.options):
                raise InvalidArgument(f"configuration '{config}': reference:mca takes only "
                                      "seed=N (a non-negative integer), e.g. reference:mca[seed=1]")
            return
        if config.options:
            raise InvalidArgument(
                f"configuration '{config}' takes no options: the NumPy reference has no compiler; "
                "use 'reference' or 'reference:native'")

    def isolation_group(self, config: Configuration) -> str:
        """The reference changes no process state: ``"default"``."""
        return "default"

    def run(self, config: Configuration, jaxpr: Any, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Evaluate `jaxpr` on `inputs` with `evaluate` (native mode for ``reference:native``)."""
        seed = int(dict(config.options).get("seed", 0)) if config.variant == "mca" else None
        return evaluate(jaxpr, inputs,
                        round_each_op=config.variant in ("native", "ftz", "mca", "fma"),
                        flush_subnormals=config.variant == "ftz", mca_seed=seed,
                        contract=config.variant == "fma")


#: Width of XLA's transcendental approximations assumed by Monte Carlo arithmetic (ULPs): it
#: perturbs the results of `primitives.PrimitiveFacts.approximate` primitives by up to this many
#: ULPs instead of half a ULP, so that cancellation downstream (``tan(x) - tanh(tan(x))``) gets a
#: budget for it (a legal freedom: DESIGN.md, "approximate transcendentals").
APPROXIMATION_ULPS = 2

#: Primitives that sum many terms -> number of terms per output element (Monte Carlo mode).
_ACCUMULATION_TERMS: dict[str, Callable[[list[Any], dict[str, Any], np.ndarray], int]] = {
    "reduce_sum": lambda args, params, out: args[0].size // max(out.size, 1),
    "dot_general": lambda args, params, out: math.prod(
        args[0].shape[d] for d in params["dimension_numbers"][0][0]),
    "conv_general_dilated": lambda args, params, out: args[1].size // max(
        args[1].shape[params["dimension_numbers"].rhs_spec[0]], 1),
    # a prefix sum's last element adds the whole axis
    "cumsum": lambda args, params, out: args[0].shape[params["axis"]] if args[0].ndim else 1,
    "reduce_window_sum": lambda args, params, out: math.prod(params["window_dimensions"]),
}


KIND = ReferenceKind()
