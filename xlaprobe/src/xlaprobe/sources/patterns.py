"""Programs written from the conditions of XLA:CPU passes (as WhiteFox derives them from an
optimization's source): each pattern builds, from a random generator, a small program that meets
one pass's or rewrite's trigger, with random shapes, constants and dtypes around it.

Read from openxla/xla's pass sources (algebraic_simplifier.cc, transpose_folding.cc,
while_loop_simplifier.cc, ...); each `Pattern` names the passes it aims at (``targets``), as the
pass pipeline log names them (`xlaprobe.coverage`). Whether a pattern reaches its target on a
given release is measured, not assumed: ``benchmarks/coverage.py`` counts what fired.

Every pattern keeps inputs in the domain of its ops (no log of negatives, a positive-definite
matrix for Cholesky) and has one right answer (no sign-ambiguous decompositions), so the oracle
judges it like any program.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax import lax
from jax.scipy.linalg import solve_triangular

Built = tuple[Callable[..., Any], tuple[np.ndarray, ...]]


@dataclasses.dataclass(frozen=True)
class Pattern:
    """One pass-targeted program family.

    Attributes:
        name: short key (``pattern:<name>`` arms of the steered generator).
        targets: pass names (and ``algsimp:[RULE]`` rewrites) it aims at.
        build: ``rng -> (function returning a list of arrays, inputs)``.
    """

    name: str
    targets: tuple[str, ...]
    build: Callable[[np.random.Generator], Built]


def _dims(rng: np.random.Generator, rank: int, choices: tuple[int, ...] = (1, 2, 3, 4, 8, 16)
          ) -> tuple[int, ...]:
    return tuple(int(rng.choice(choices)) for _ in range(rank))


def _floats(rng: np.random.Generator, shape: tuple[int, ...], lo: float = -2.0, hi: float = 2.0,
            dtype: Any = np.float32) -> np.ndarray:
    return rng.uniform(lo, hi, shape).astype(dtype)


def _pow(rng: np.random.Generator) -> Built:
    exponent = float(rng.choice([2.0, 3.0, 0.5, -1.0, 1.0, 0.0, -0.5]))
    x = _floats(rng, _dims(rng, 2), 0.1, 3.0)
    return (lambda x: [lax.pow(x, np.float32(exponent)) + x]), (x,)


def _const_chain(rng: np.random.Generator) -> Built:
    c1, c2 = (np.float32(rng.choice([2.0, 0.5, 3.0, -1.0, 0.25])) for _ in range(2))
    x = _floats(rng, _dims(rng, 2))
    add = bool(rng.integers(2))
    return (lambda x: [((x + c1) + c2) if add else ((x * c1) * c2)]), (x,)


def _div_const(rng: np.random.Generator) -> Built:
    c = np.float32(rng.choice([2.0, 4.0, 0.5, 8.0, 3.0]))
    x = _floats(rng, _dims(rng, 2))
    return (lambda x: [x / c, c / (x * x + 1.0)]), (x,)


def _reshape_elementwise(rng: np.random.Generator) -> Built:
    a, b = _dims(rng, 2, (2, 3, 4, 8))
    x, y = _floats(rng, (a, b)), _floats(rng, (a, b))
    if rng.integers(2):
        return (lambda x, y: [jnp.reshape(x, (b, a)) + jnp.reshape(y, (b, a))]), (x, y)
    return (lambda x, y: [jnp.transpose(x) * jnp.transpose(y) + 1.0]), (x, y)


def _dot_transpose(rng: np.random.Generator) -> Built:
    m, k, n = _dims(rng, 3, (2, 3, 4, 8, 16))
    x, y = _floats(rng, (k, m)), _floats(rng, (n, k))
    return (lambda x, y: [x.T @ y.T]), (x, y)


def _batch_dot(rng: np.random.Generator) -> Built:
    m, k, n = _dims(rng, 3, (2, 3, 4, 8))
    batch = int(rng.choice([1, 1, 2]))
    x, y = _floats(rng, (batch, m, k)), _floats(rng, (batch, k, n))
    return (lambda x, y: [jnp.einsum("bij,bjk->bik", x, y)]), (x, y)


def _multi_contract(rng: np.random.Generator) -> Built:
    i, j, k, l_ = _dims(rng, 4, (2, 3, 4))
    x, y = _floats(rng, (i, j, k)), _floats(rng, (j, k, l_))
    return (lambda x, y: [jnp.einsum("ijk,jkl->il", x, y)]), (x, y)


def _gemv(rng: np.random.Generator) -> Built:
    m, k = _dims(rng, 2, (2, 4, 8, 16, 32))
    x, v = _floats(rng, (m, k)), _floats(rng, (k,))
    return (lambda x, v: [x @ v, v @ x.T]), (x, v)


def _loop_invariant(rng: np.random.Generator) -> Built:
    trips = int(rng.choice([0, 1, 2, 5]))
    x = _floats(rng, _dims(rng, 2, (2, 3, 4)), -1.0, 1.0)

    def fn(x):
        c = jnp.float32(0.5)

        def body(i, carry):
            return carry * c + jnp.exp(x)  # exp(x) does not depend on the loop
        return [lax.fori_loop(0, trips, body, x)]
    return fn, (x,)


def _cond(rng: np.random.Generator) -> Built:
    x = _floats(rng, _dims(rng, 1, (2, 4, 8)))
    small = bool(rng.integers(2))

    def fn(x):
        pred = jnp.sum(x) > 0
        if small:  # scalar branches: conditional-to-select's case
            return [lax.cond(pred, lambda s: s * 2.0, lambda s: s - 1.0, jnp.sum(x))]
        return [lax.cond(pred, lambda v: jnp.sin(v), lambda v: jnp.cos(v) * 2.0, x)]
    return fn, (x,)


def _sort(rng: np.random.Generator) -> Built:
    n = int(rng.choice([4, 8, 16, 33]))
    x = rng.permutation(n).astype(np.float32)  # distinct keys: one right order
    v = _floats(rng, (n,))
    mode = int(rng.integers(3))
    if mode == 0:  # a sort result used only where an always-false mask discards it: once the
        # simplifier drops the select, simplify-sorts drops the operand (JAX keeps it); the mask
        # is computed (iota < 0), since an array constant reaches XLA as a parameter

        def fn(x, v):
            keys, values, positions = lax.sort((x, v, jnp.arange(n)), num_keys=1)
            return [keys, jnp.where(jnp.arange(n) < 0, positions.astype(v.dtype), values)]
        return fn, (x, v)
    if mode == 1:  # sort then the top slice: topk-rewriter
        k = int(rng.integers(1, n))
        return (lambda x, v: [jnp.sort(x)[::-1][:k] + v[:k]]), (x, v)
    return (lambda x, v: [lax.top_k(x, 3 if n > 3 else 1)[0]]), (x, v)


def _cumulative(rng: np.random.Generator) -> Built:
    shape = _dims(rng, 2, (2, 4, 8, 16, 64))
    x = _floats(rng, shape, -1.0, 1.0)
    axis = int(rng.integers(2))
    return (lambda x: [jnp.cumsum(x, axis=axis), lax.cummax(x, axis=axis)]), (x,)


def _gather_scatter(rng: np.random.Generator) -> Built:
    n, m = _dims(rng, 2, (4, 8, 16))
    x = _floats(rng, (n, m))
    idx = rng.integers(0, n, size=int(rng.choice([1, 3, 5]))).astype(np.int32)
    upd = _floats(rng, (len(idx), m))
    return (lambda x, i, u: [jnp.take(x, i, axis=0), x.at[i].add(u)]), (x, idx, upd)


def _big_reduce(rng: np.random.Generator) -> Built:
    shape = (int(rng.choice([3, 5])), int(rng.choice([64, 100, 257, 1024])))
    x = _floats(rng, shape, -1.0, 1.0)
    return (lambda x: [jnp.sum(x, axis=1), jnp.argmax(x, axis=1), jnp.max(x)]), (x,)


def _convert_pair(rng: np.random.Generator) -> Built:
    x = rng.integers(-100, 100, _dims(rng, 2)).astype(np.int8)
    wide = rng.choice([jnp.int32, jnp.int16, jnp.float32])
    return (lambda x: [x.astype(wide).astype(jnp.int8) + x]), (x,)


def _triangular(rng: np.random.Generator) -> Built:
    n = int(rng.choice([2, 3, 4, 8]))
    a = _floats(rng, (n, n), -0.5, 0.5)
    spd = (a @ a.T + n * np.eye(n)).astype(np.float32)
    b = _floats(rng, (n, 2))
    if rng.integers(2):
        return (lambda s, b: [jnp.linalg.cholesky(s)]), (spd, b)
    lower = np.tril(spd).astype(np.float32)
    if rng.integers(2):  # float16 has no LAPACK solve: XLA's own op, the expander's case
        lower, b = lower.astype(np.float16), b.astype(np.float16)
    return (lambda s, b: [solve_triangular(s, b, lower=True)]), (lower, b)


def _logistic(rng: np.random.Generator) -> Built:
    x = _floats(rng, _dims(rng, 2), -4.0, 4.0)
    return (lambda x: [jax.nn.sigmoid(x) * x]), (x,)


def _grouped_conv(rng: np.random.Generator) -> Built:
    groups = int(rng.choice([2, 4]))
    if rng.integers(2):  # batch groups (a weight gradient's form): convolution-group-converter
        x = _floats(rng, (2 * groups, 2, 6, 6), -1.0, 1.0)
        w = _floats(rng, (groups, 2, 3, 3), -1.0, 1.0)
        return (lambda x, w: [lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                                       batch_group_count=groups)]), (x, w)
    x = _floats(rng, (1, 2 * groups, 8, 8), -1.0, 1.0)
    w = _floats(rng, (2 * groups, 2, 3, 3), -1.0, 1.0)
    return (lambda x, w: [lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                                   feature_group_count=groups)]), (x, w)


def _bitcast(rng: np.random.Generator) -> Built:
    x = rng.integers(-1000, 1000, (4, int(rng.choice([2, 4, 8])))).astype(np.int32)
    return (lambda x: [lax.bitcast_convert_type(x, jnp.int16),
                       lax.bitcast_convert_type(x, jnp.uint8)]), (x,)


def _zero_sized(rng: np.random.Generator) -> Built:
    n = int(rng.choice([2, 4, 8]))
    x, empty = _floats(rng, (n, 3)), np.zeros((0, 3), np.float32)
    return (lambda x, e: [jnp.concatenate([x, jnp.exp(e)], axis=0) + jnp.sum(e)]), (x, empty)


def _maxpool_grad(rng: np.random.Generator) -> Built:
    x = rng.permutation(64).astype(np.float32).reshape(1, 8, 8, 1)  # distinct: one argmax

    def pool(x):
        return lax.reduce_window(x, -np.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID").sum()
    return (lambda x: [jax.grad(pool)(x)]), (x,)


def _dynamic_slice(rng: np.random.Generator) -> Built:
    n = int(rng.choice([8, 16]))
    x = _floats(rng, (n, 4))
    start = np.int32(rng.integers(-2, n + 2))  # out-of-range starts are clamped
    return (lambda x, s: [lax.dynamic_slice(x, (s, 0), (3, 4)),
                          lax.dynamic_update_slice(x, x[:2] * 2.0, (s, 0))]), (x, start)


def _duplicates(rng: np.random.Generator) -> Built:
    x = _floats(rng, _dims(rng, 2), 0.1, 2.0)
    return (lambda x: [jnp.sin(x) * jnp.log(x) + jnp.sin(x) * jnp.log(x)]), (x,)


def _mixed_precision(rng: np.random.Generator) -> Built:
    m, k, n = _dims(rng, 3, (2, 4, 8))
    x = _floats(rng, (m, k)).astype(jnp.bfloat16)
    y = _floats(rng, (k, n)).astype(jnp.bfloat16)
    return (lambda x, y: [lax.dot(x, y, preferred_element_type=jnp.float32),
                          (x * y[:, :1].T[:, :k]).astype(jnp.float32)]), (x, y)


def _decompositions(rng: np.random.Generator) -> Built:
    n = int(rng.choice([2, 3, 4, 6]))
    a = _floats(rng, (n, n), -1.0, 1.0)
    sym = ((a + a.T) / 2 + n * np.eye(n)).astype(np.float32)
    if rng.integers(2):  # eigenvalues only: unique, sorted
        return (lambda s: [jnp.linalg.eigvalsh(s)]), (sym,)
    return (lambda s: [jnp.abs(jnp.linalg.qr(s)[1])]), (sym,)  # |R|: no sign choice


#: Narrow element types XLA:CPU computes in float32 (one float-normalization-<type> pass each;
#: the 4-bit ones also through sub-byte-size-setter): type -> (low, high) of inputs inside its
#: range (float8_e8m0fnu holds positive powers of two only, uint4 0..15).
_NARROW = {"float8_e5m2": (-2.0, 2.0), "float8_e4m3fn": (-2.0, 2.0), "float8_e4m3": (-2.0, 2.0),
           "float8_e3m4": (-2.0, 2.0), "float8_e4m3fnuz": (-2.0, 2.0),
           "float8_e5m2fnuz": (-2.0, 2.0), "float8_e4m3b11fnuz": (-2.0, 2.0),
           "float8_e8m0fnu": (0.25, 4.0), "float4_e2m1fn": (-3.0, 3.0), "int4": (-4, 3),
           "uint4": (0, 7)}


def _narrow_types(rng: np.random.Generator) -> Built:
    shape = _dims(rng, 2, (2, 4, 8))
    kinds = [str(k) for k in rng.choice(sorted(_NARROW), 3, replace=False)]
    inputs = []
    for kind in kinds:  # sums of two values of the narrow type: no overflow, one rounding
        lo, hi = _NARROW[kind]
        if kind.startswith(("int", "uint")):
            inputs += [rng.integers(lo, hi + 1, shape).astype(np.int8) for _ in range(2)]
        else:
            inputs += [_floats(rng, shape, lo, hi) for _ in range(2)]

    def fn(*xs):
        out = []
        for i, kind in enumerate(kinds):
            narrow = getattr(ml_dtypes, kind)
            wide = jnp.int8 if kind.startswith(("int", "uint")) else jnp.float32
            out.append((xs[2 * i].astype(narrow) + xs[2 * i + 1].astype(narrow)).astype(wide))
        return out
    return fn, tuple(inputs)


def _int8_dot(rng: np.random.Generator) -> Built:
    m, k, n = _dims(rng, 3, (2, 4, 8))
    x = rng.integers(-20, 20, (m, k)).astype(np.int8)
    y = rng.integers(-20, 20, (k, n)).astype(np.int8)
    return (lambda x, y: [lax.dot(x, y, preferred_element_type=jnp.int32)]), (x, y)


def _rng_bits(rng: np.random.Generator) -> Built:
    shape = _dims(rng, 2, (2, 4, 8))
    dtype = rng.choice([jnp.uint32, jnp.uint8, jnp.uint16])
    key = rng.integers(0, 2 ** 31, (4,)).astype(np.uint32)

    def fn(key):  # the bits themselves (the reference is XLA:CPU's Philox, bit for bit); a
        # masked use (bits & 0) is simplified away before the expander runs
        new_key, bits = lax.rng_bit_generator(key, shape, dtype=dtype)
        return [new_key, bits]
    return fn, (key,)


def _narrow_dot(rng: np.random.Generator) -> Built:
    m, k, n = _dims(rng, 3, (2, 4, 8))
    x, y = _floats(rng, (m, k)), _floats(rng, (k, n))
    out = rng.choice([jnp.bfloat16, jnp.float16])
    return (lambda x, y: [lax.dot(x, y, preferred_element_type=out)]), (x, y)


def _barrier(rng: np.random.Generator) -> Built:
    x = _floats(rng, _dims(rng, 2, (2, 4, 8)))

    def fn(x):  # the same value on both sides of an optimization barrier: CSE must not merge
        a, b = lax.optimization_barrier((jnp.sin(x), x * 2.0))
        return [a + jnp.sin(x), b]
    return fn, (x,)


def _permutation_sort(rng: np.random.Generator) -> Built:
    x = rng.permutation(int(rng.choice([4, 8, 16]))).astype(np.float32)
    return (lambda x: [jnp.argsort(jnp.argsort(x)), jnp.argsort(x)]), (x,)


def _folded_constants(shape: tuple[int, ...]) -> dict[str, Any]:
    """Constants of `shape` that reach the HLO simplifier as constants: computed from an
    always-false ``iota < 0`` that constant folding turns into a literal. (A scalar constant is
    folded before the HLO pipeline, and an array constant of the program reaches XLA as a
    parameter, so neither ever meets algsimp's identities.) Call inside the traced function."""
    false = lax.broadcasted_iota(jnp.int32, shape, 0) < 0

    def full(value: float) -> Any:
        return jnp.where(false, jnp.float32(0.0), jnp.float32(value))
    return {"false": false, "true": ~false, "ones": full(1.0), "zeros": full(0.0),
            "c1": full(3.0), "c2": full(0.5)}


def _identity_table() -> dict[str, Callable[..., Any]]:
    """Algebraic identities of algebraic_simplifier.cc's handlers over a positive float ``x``, a
    float ``y``, a bool ``b`` and the constants ``k`` of `_folded_constants`."""
    return {
        "mul-one": lambda x, y, b, k: x * k["ones"], "one-mul": lambda x, y, b, k: k["ones"] * y,
        "add-zero": lambda x, y, b, k: y + k["zeros"],
        "zero-add": lambda x, y, b, k: k["zeros"] + x,
        "sub-const": lambda x, y, b, k: y - k["c1"],
        "const-sub-add": lambda x, y, b, k: (k["c1"] - y) + k["c2"],
        "div-one": lambda x, y, b, k: y / k["ones"],
        "log-exp": lambda x, y, b, k: jnp.log(jnp.exp(y)),
        "pow-zero": lambda x, y, b, k: lax.pow(x, k["zeros"]),
        "rsqrt-square": lambda x, y, b, k: lax.rsqrt(x) * lax.rsqrt(x),
        "sqrt-square": lambda x, y, b, k: jnp.sqrt(y * y),
        "xor-false": lambda x, y, b, k: (b ^ k["false"]).astype(jnp.float32),
        "false-xor": lambda x, y, b, k: (k["false"] ^ b).astype(jnp.float32),
        "false-and": lambda x, y, b, k: (k["false"] & b).astype(jnp.float32),
        "true-and": lambda x, y, b, k: (k["true"] & b).astype(jnp.float32),
        "false-or": lambda x, y, b, k: (k["false"] | b).astype(jnp.float32),
        "exp-mul": lambda x, y, b, k: jnp.exp(y) * jnp.exp(x),
        "neg-neg": lambda x, y, b, k: -(-y), "max-self": lambda x, y, b, k: jnp.maximum(y, y),
        "select-same": lambda x, y, b, k: jnp.where(b, y, y),
        "sub-self": lambda x, y, b, k: y - y,
        "abs-abs": lambda x, y, b, k: jnp.abs(jnp.abs(y)),
    }


def _identities(rng: np.random.Generator) -> Built:
    shape = _dims(rng, 2, (2, 3, 4, 8))
    table = _identity_table()
    chosen = [table[k] for k in rng.choice(sorted(table), int(rng.integers(2, 5)), replace=False)]
    x = _floats(rng, shape, 0.1, 2.0)
    y = _floats(rng, shape, -2.0, 2.0)
    b = rng.integers(0, 2, shape).astype(bool)

    def fn(x, y, b):
        constants = _folded_constants(shape)
        return [f(x, y, b, constants) for f in chosen]
    return fn, (x, y, b)


#: Every pattern, with the passes it was written for.
PATTERNS: dict[str, Pattern] = {p.name: p for p in [
    Pattern("pow", ("algsimp", "algsimp:[pow(A, 2) => A*A]"), _pow),
    Pattern("const-chain", ("algsimp", "constant_folding"), _const_chain),
    Pattern("div-const", ("algsimp",), _div_const),
    Pattern("reshape-elementwise", ("reshape-mover", "algsimp"), _reshape_elementwise),
    Pattern("dot-transpose", ("transpose-folding", "dot_decomposer"), _dot_transpose),
    Pattern("batch-dot", ("batch-dot-simplification", "dot_decomposer"), _batch_dot),
    Pattern("multi-contract", ("dot_decomposer", "algsimp"), _multi_contract),
    Pattern("gemv", ("gemv-rewriter", "dot-library-rewriter"), _gemv),
    Pattern("loop-invariant", ("while-loop-invariant-code-motion", "simplify-while-loops",
                               "while-loop-constant-sinking", "small-while-loop-hoisting"),
            _loop_invariant),
    Pattern("cond", ("simplify-conditional", "conditional-to-select", "conditional-canonicalizer"),
            _cond),
    Pattern("sort", ("simplify-sorts", "topk-rewriter", "topk-decomposer",
                     "comparison-expander"), _sort),
    Pattern("cumulative", ("reduce-window-rewriter", "associative-scan-rewriter"), _cumulative),
    Pattern("gather-scatter", ("gather_simplifier", "scatter_simplifier", "scatter_expander",
                               "gather_expander"), _gather_scatter),
    Pattern("big-reduce", ("tree_reduction_rewriter", "reduce-decomposer"), _big_reduce),
    Pattern("convert-pair", ("algsimp",), _convert_pair),
    Pattern("triangular", ("cholesky_expander", "triangular_solve_expander"), _triangular),
    Pattern("logistic", ("logistic-expander",), _logistic),
    Pattern("grouped-conv", ("convolution-group-converter",), _grouped_conv),
    Pattern("bitcast", ("bitcast_dtypes_expander",), _bitcast),
    Pattern("zero-sized", ("zero_sized_hlo_elimination",), _zero_sized),
    Pattern("maxpool-grad", ("select_and_scatter_expander",), _maxpool_grad),
    Pattern("dynamic-slice", ("dynamic-index-splitter", "algsimp"), _dynamic_slice),
    Pattern("duplicates", ("cse",), _duplicates),
    Pattern("identities", ("algsimp", "algsimp:[LHS*1 => LHS]", "algsimp:[A ^ False => A]",
                           "algsimp:[ln(exp(A)) => A]", "algsimp:[sqrt(A*A) => |A|]"),
            _identities),
    Pattern("decompositions", ("eigh_expander", "qr_expander"), _decompositions),
    Pattern("narrow-types", ("sub-byte-size-setter", "float-normalization-f8e5m2",
                             "float-normalization-f8e4m3fn", "float-normalization-f8e4m3",
                             "float-normalization-f8e3m4", "float-normalization-f8e4m3fnuz",
                             "float-normalization-f8e5m2fnuz",
                             "float-normalization-f8e4m3b11fnuz",
                             "float-normalization-f8e8m0fnu", "float-normalization-f4e2m1fn",
                             "float-normalization-s4", "float-normalization-u4"), _narrow_types),
    Pattern("int8-dot", ("change-op-data-type", "operand_upcaster", "result_caster"), _int8_dot),
    Pattern("rng-bits", ("rng-bit-generator-expander",), _rng_bits),
    Pattern("narrow-dot", ("result_caster",), _narrow_dot),
    Pattern("barrier", ("cse_barrier_expander",), _barrier),
    Pattern("permutation-sort", ("permutation_sort_simplifier", "simplify-sorts"),
            _permutation_sort),
    Pattern("mixed-precision", ("float-normalization-bf16", "operand_upcaster", "result_caster",
                                "change-op-data-type"), _mixed_precision),
]}
