"""Reference rules that call NumPy's and SciPy's LAPACK, FFT and special functions.

The rules of ``configs/reference.py`` write XLA's semantics out in NumPy; the primitives here are
too large to write out (a Cholesky factorization, an eigensolver, an FFT, the incomplete gamma
function), so their rules call the same algorithm XLA:CPU runs, in float64:

* **Linear algebra**: jaxlib's CPU kernels are LAPACK's (``potrf``, ``getrf``, ``geqrf`` plus
  ``orgqr``, ``gesdd``, ``syevd``, ``gtsv``), called here through ``scipy.linalg.lapack`` with the same
  driver, so pivots, the signs of Householder reflectors and the order of eigen- and singular
  values follow the same conventions. ``triangular_solve`` is XLA's own op: any correct solve is
  the answer. Outputs that are defined only up to a symmetry (the sign of each eigenvector or
  singular-vector pair, a rotation within a group of equal eigenvalues) are named in `GAUGES` and
  compared by the oracle after aligning them to the reference (`xlaprobe.oracle.align_gauges`).
* **FFT**: ``numpy.fft`` (pocketfft), all four ``fft_type``\\ s over the trailing ``fft_lengths``.
* **rng_bit_generator**: XLA:CPU's Philox-4x32 bit generator (``RNG_DEFAULT`` and
  ``RNG_PHILOX``), bit for bit, with its counter layout and round-robin word order
  (``jax.random`` with ``impl="rbg"`` or ``"unsafe_rbg"``); ``RNG_THREE_FRY`` has no rule yet.
* **Special functions** (the incomplete gamma and beta functions, ``igamma_grad_a``, the
  exponentially scaled Bessel functions, ``polygamma``, ``zeta``): their ``scipy.special``
  rules sit in their primitives' records, ``lax_rules/special.py``.

In float64 mode every rule computes in float64 (complex128). In native mode
(``reference:native``, the error budget) the factorizations and FFTs run in the program's own
precision (float32 LAPACK for a float32 program, float32 for float16 and bfloat16), so that the
honest run's distance from float64 shows the conditioning of the problem, as it does for sums.

A rule is ``rule(ctx, *args, **params)`` as in ``reference.py``; this module reads only
``ctx.native``, ``ctx.in_dtypes`` and ``ctx.out_dtypes`` and imports nothing from it.

Sources: LAPACK Users' Guide (3rd ed.) for the factorizations and their output conventions;
``jax/_src/lax/linalg.py`` and ``jax/_src/lax/fft.py`` for the primitives' parameters and
outputs; XLA's ``hlo/builder/lib/prng.cc`` and
``hlo/transforms/expanders/rng_bit_generator_expander.cc`` for the bit generator (Philox:
Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import scipy.linalg
import scipy.special
from scipy.linalg import lapack

from xlaprobe import jaxcompat, primitives
from xlaprobe.oracle import Gauge

Rule = Callable[..., Any]

__all__ = ["GAUGES", "OutputGauge", "RULES", "output_gauges"]


# ---------------------------------------------------------------------------------------------
# precision


def _work_dtype(ctx: Any, dtype: Any) -> np.dtype:
    """The dtype a factorization or FFT of logical `dtype` runs in: float64 / complex128 in
    float64 mode; in native mode the program's own precision (at least float32)."""
    dtype = np.dtype(dtype)
    complex_ = np.issubdtype(dtype, np.complexfloating)
    if ctx.native and dtype.itemsize < (16 if complex_ else 8):
        return np.dtype(np.complex64 if complex_ else np.float32)
    return np.dtype(np.complex128 if complex_ else np.float64)


def _batched(fn: Callable[..., Sequence[np.ndarray]], arrays: Sequence[np.ndarray],
             core: Sequence[int], n_out: int) -> list[np.ndarray]:
    """Apply `fn` to each batch element: `arrays` share leading batch dimensions and have
    `core[i]` trailing core dimensions each; `fn` returns `n_out` arrays per element."""
    batch = arrays[0].shape[:arrays[0].ndim - core[0]]
    per_item: list[list[np.ndarray]] = [[] for _ in range(n_out)]
    for index in np.ndindex(*batch):
        outs = fn(*(a[index] for a in arrays))
        for j, out in enumerate(outs):
            per_item[j].append(np.asarray(out))
    results = []
    for j in range(n_out):
        if per_item[j]:
            stacked = np.stack(per_item[j])
            results.append(stacked.reshape(batch + stacked.shape[1:]))
        else:  # an empty batch: the outputs' core shapes are not known here
            results.append(np.zeros(batch + (0,)))
    return results


def _shaped(outs: list[np.ndarray], ctx: Any) -> list[np.ndarray]:
    """Outputs with the equation's shapes (an empty batch gives placeholder shapes)."""
    return [np.asarray(o).reshape(s) if np.asarray(o).size == math.prod(s) else
            np.zeros(s, np.asarray(o).dtype) for o, s in zip(outs, ctx.out_shapes)]


def _lapack(name: str, dtype: np.dtype) -> Callable[..., Any]:
    """The LAPACK routine `name` (without its type letter) for `dtype`."""
    return lapack.get_lapack_funcs(name, dtype=dtype)


# ---------------------------------------------------------------------------------------------
# factorizations


def _cholesky(ctx: Any, a: np.ndarray, **_: Any) -> np.ndarray:
    """Lower Cholesky factor from the lower triangle (``potrf``); the strict upper triangle is
    zero; a matrix that is not positive definite gives NaN everywhere (jaxlib's CPU lowering)."""
    dtype = _work_dtype(ctx, ctx.in_dtypes[0])
    potrf = _lapack("potrf", dtype)

    def one(m: np.ndarray) -> list[np.ndarray]:
        if not m.size:
            return [m]
        factor, info = potrf(m.astype(dtype), lower=True, clean=True)
        return [np.tril(factor) if info == 0 else np.full(m.shape, np.nan, dtype)]
    return _shaped(_batched(one, [a], [2], 1), ctx)[0]


def _lu(ctx: Any, a: np.ndarray, **_: Any) -> list[np.ndarray]:
    """``getrf`` with partial pivoting: (packed L\\U, 0-based row pivots, the permutation they
    make). A singular matrix still factors (a zero on U's diagonal), as LAPACK and XLA do."""
    dtype = _work_dtype(ctx, ctx.in_dtypes[0])
    getrf = _lapack("getrf", dtype)
    m, n = a.shape[-2:]

    def one(x: np.ndarray) -> list[np.ndarray]:
        if not x.size:
            return [x, np.zeros(min(m, n), np.int64), np.arange(m)]
        packed, piv, _info = getrf(x.astype(dtype))
        return [packed, piv, _pivots_to_permutation(piv, m)]
    outs = _batched(one, [a], [2], 3)
    return _shaped([outs[0], outs[1].astype(ctx.out_dtypes[1]), outs[2].astype(ctx.out_dtypes[2])],
                   ctx)


def _pivots_to_permutation(pivots: np.ndarray, size: int) -> np.ndarray:
    """The row permutation that LAPACK's sequence of row swaps (0-based) applies; swaps with an
    index outside [0, size) are skipped, as XLA's kernel does."""
    perm = np.arange(size)
    for i, p in enumerate(np.asarray(pivots).tolist()):
        if 0 <= p < size and i < size:
            perm[i], perm[p] = perm[p], perm[i]
    return perm


def _lu_pivots_to_permutation(ctx: Any, pivots: np.ndarray, *, permutation_size: int,
                              **_: Any) -> np.ndarray:
    core = pivots.shape[-1]
    batch = pivots.shape[:-1]
    flat = pivots.reshape((-1, core))
    out = np.stack([_pivots_to_permutation(p, permutation_size) for p in flat]) if flat.shape[0] \
        else np.zeros((0, permutation_size), np.int64)
    return out.reshape(batch + (permutation_size,)).astype(ctx.out_dtype)


def _qr(ctx: Any, a: np.ndarray, *, pivoting: bool = False, full_matrices: bool = True,
        **_: Any) -> list[np.ndarray]:
    """Q and R by ``geqrf`` and ``orgqr`` (``geqp3`` with `pivoting`, then also the 0-based
    column permutation), as jaxlib's CPU lowering calls them."""
    dtype = _work_dtype(ctx, ctx.in_dtypes[0])
    mode = "full" if full_matrices else "economic"

    def one(x: np.ndarray) -> list[np.ndarray]:
        if pivoting:
            q, r, p = scipy.linalg.qr(x.astype(dtype), mode=mode, pivoting=True,
                                      check_finite=False)
            return [q, r, p]
        q, r = scipy.linalg.qr(x.astype(dtype), mode=mode, check_finite=False)
        return [q, r]
    outs = _batched(one, [a], [2], 3 if pivoting else 2)
    if pivoting:
        outs[2] = outs[2].astype(ctx.out_dtypes[2])
    return _shaped(outs, ctx)


def _geqrf(ctx: Any, a: np.ndarray, **_: Any) -> list[np.ndarray]:
    dtype = _work_dtype(ctx, ctx.in_dtypes[0])
    geqrf = _lapack("geqrf", dtype)

    def one(x: np.ndarray) -> list[np.ndarray]:
        packed, taus, _work, _info = geqrf(x.astype(dtype))
        return [packed, taus]
    return _shaped(_batched(one, [a], [2], 2), ctx)


def _householder_product(ctx: Any, a: np.ndarray, taus: np.ndarray, **_: Any) -> np.ndarray:
    """The first columns of the product of Householder reflectors (``orgqr`` / ``ungqr``)."""
    dtype = _work_dtype(ctx, ctx.in_dtypes[0])
    orgqr = _lapack("ungqr" if dtype.kind == "c" else "orgqr", dtype)

    def one(x: np.ndarray, t: np.ndarray) -> list[np.ndarray]:
        q, _work, _info = orgqr(x.astype(dtype), t.astype(dtype))
        return [q]
    return _shaped(_batched(one, [a, taus], [2, 1], 1), ctx)[0]


def _eigh(ctx: Any, a: np.ndarray, *, lower: bool = True, sort_eigenvalues: bool = True,
          subset_by_index: Any = None, **_: Any) -> list[np.ndarray]:
    """(eigenvectors as columns, eigenvalues ascending) of the Hermitian matrix in the `lower`
    (else upper) triangle, by ``syevd`` / ``heevd``; `subset_by_index` (start, end) keeps those
    eigenpairs."""
    dtype = _work_dtype(ctx, ctx.in_dtypes[0])

    def one(x: np.ndarray) -> list[np.ndarray]:
        w, v = scipy.linalg.eigh(x.astype(dtype), lower=lower, driver="evd", check_finite=False)
        if subset_by_index is not None:
            start, end = subset_by_index
            w, v = w[start:end], v[:, start:end]
        return [v, w]
    return _shaped(_batched(one, [a], [2], 2), ctx)


def _svd(ctx: Any, a: np.ndarray, *, full_matrices: bool = True, compute_uv: bool = True,
         subset_by_index: Any = None, algorithm: Any = None, **_: Any) -> list[np.ndarray]:
    """(s descending, U, V^H) by ``gesdd`` (``gesvd`` for the QR algorithm), or (s,) without
    `compute_uv`; `subset_by_index` (start, end) keeps those singular triplets."""
    dtype = _work_dtype(ctx, ctx.in_dtypes[0])
    driver = "gesvd" if "QR" in str(algorithm) else "gesdd"

    def one(x: np.ndarray) -> list[np.ndarray]:
        if not x.size:
            k = min(x.shape)
            return [np.zeros(k), np.eye(x.shape[0], x.shape[0] if full_matrices else k),
                    np.eye(x.shape[1] if full_matrices else k, x.shape[1])]
        u, s, vh = scipy.linalg.svd(x.astype(dtype), full_matrices=full_matrices,
                                    lapack_driver=driver, check_finite=False)
        if subset_by_index is not None:
            start, end = subset_by_index
            s, u, vh = s[start:end], u[:, start:end], vh[start:end]
        return [s, u, vh]
    outs = _batched(one, [a], [2], 3)
    return _shaped(outs if compute_uv else outs[:1], ctx)


def _triangular_solve(ctx: Any, a: np.ndarray, b: np.ndarray, *, left_side: bool = False,
                      lower: bool = False, transpose_a: bool = False, conjugate_a: bool = False,
                      unit_diagonal: bool = False, **_: Any) -> np.ndarray:
    """x with op(a) x = b (`left_side`) or x op(a) = b, reading only a's `lower` (else upper)
    triangle, its diagonal taken as ones with `unit_diagonal`; op transposes and/or conjugates."""
    dtype = np.result_type(_work_dtype(ctx, ctx.in_dtypes[0]), _work_dtype(ctx, ctx.in_dtypes[1]))

    def one(m: np.ndarray, rhs: np.ndarray) -> list[np.ndarray]:
        tri = np.tril(m) if lower else np.triu(m)
        if unit_diagonal:
            np.fill_diagonal(tri, 1)
        op = tri.conj() if conjugate_a else tri
        op = op.T if transpose_a else op
        if not left_side:  # x op = b  <=>  op^T x^T = b^T
            op, rhs = op.T, rhs.T
        is_lower = lower != (transpose_a != (not left_side))
        x = scipy.linalg.solve_triangular(op.astype(dtype), rhs.astype(dtype), lower=is_lower,
                                          check_finite=False)
        return [x if left_side else x.T]
    if not b.size:
        return np.zeros(ctx.out_shapes[0])
    return _shaped(_batched(one, [a, b], [2, 2], 1), ctx)[0]


def _tridiagonal_solve(ctx: Any, dl: np.ndarray, d: np.ndarray, du: np.ndarray, b: np.ndarray, *,
                       perturb_singular: bool = False, **_: Any) -> np.ndarray:
    """X with A X = B for the tridiagonal A (sub-diagonal dl[1:], diagonal d, super-diagonal
    du[:-1]) by ``gtsv`` (partial pivoting), as jaxlib's CPU kernel; a singular system gives NaN.

    Raises:
        NotImplementedError: `perturb_singular` (jaxlib's own perturbed kernel has no rule).
    """
    if perturb_singular:
        raise NotImplementedError("tridiagonal_solve with perturb_singular has no reference rule")
    dtype = _work_dtype(ctx, ctx.in_dtypes[3])
    gtsv = _lapack("gtsv", dtype)

    def one(lo: np.ndarray, mid: np.ndarray, up: np.ndarray, rhs: np.ndarray) -> list[np.ndarray]:
        if not rhs.size:
            return [rhs]
        *_factors, x, info = gtsv(lo[1:].astype(dtype), mid.astype(dtype), up[:-1].astype(dtype),
                                  rhs.astype(dtype))
        return [x if info == 0 else np.full(rhs.shape, np.nan, dtype)]
    return _shaped(_batched(one, [dl, d, du, b], [1, 1, 1, 2], 1), ctx)[0]


def _symmetric_product(ctx: Any, a: np.ndarray, c: np.ndarray, *, alpha: float = 1.0,
                       beta: float = 0.0, **_: Any) -> np.ndarray:
    """alpha A A^T + beta C (``syrk``; jax's CPU lowering is this product written out)."""
    return alpha * (a @ np.swapaxes(a, -1, -2)) + beta * c


# ---------------------------------------------------------------------------------------------
# FFT


def _fft(ctx: Any, x: np.ndarray, *, fft_type: Any, fft_lengths: Sequence[int],
         **_: Any) -> np.ndarray:
    """FFT, IFFT (normalized by 1/n), RFFT (the n//2+1 non-negative frequencies of the last
    axis) and IRFFT (real output of length `fft_lengths`, the imaginary parts of the
    self-conjugate bins ignored) over the trailing ``len(fft_lengths)`` axes."""
    kind = getattr(fft_type, "name", str(fft_type)).rsplit(".", 1)[-1].upper()
    lengths = tuple(int(n) for n in fft_lengths)
    axes = tuple(range(x.ndim - len(lengths), x.ndim))
    if kind == "RFFT":
        work = _work_dtype(ctx, ctx.in_dtypes[0])
        return np.fft.rfftn(x.astype(work), s=lengths, axes=axes)
    work = _work_dtype(ctx, ctx.in_dtypes[0])
    data = x.astype(work)
    if not x.size or not math.prod(lengths):
        return np.zeros(ctx.out_shapes[0], np.complex128 if kind != "IRFFT" else np.float64)
    if kind == "FFT":
        return np.fft.fftn(data, s=lengths, axes=axes)
    if kind == "IFFT":
        return np.fft.ifftn(data, s=lengths, axes=axes)
    if kind == "IRFFT":
        return np.fft.irfftn(data, s=lengths, axes=axes)
    raise ValueError(f"fft_type {fft_type!r} is none of FFT, IFFT, RFFT, IRFFT")


# ---------------------------------------------------------------------------------------------
# rng_bit_generator: XLA's bit generators (xla/hlo/builder/lib/prng.cc), bit for bit

_M64 = (1 << 64) - 1


def _philox4x32(counters: list[np.ndarray], key: tuple[int, int]) -> list[np.ndarray]:
    """Philox-4x32 with 10 rounds (Salmon et al. 2011) on uint32 counter words (low first)."""
    x = [np.asarray(c, np.uint64) for c in counters]
    k0, k1 = key
    for _ in range(10):
        p0 = x[0] * np.uint64(0xD2511F53)
        p1 = x[2] * np.uint64(0xCD9E8D57)
        x = [(p1 >> np.uint64(32)) ^ x[1] ^ np.uint64(k0), p1 & np.uint64(0xFFFFFFFF),
             (p0 >> np.uint64(32)) ^ x[3] ^ np.uint64(k1), p0 & np.uint64(0xFFFFFFFF)]
        k0, k1 = (k0 + 0x9E3779B9) & 0xFFFFFFFF, (k1 + 0xBB67AE85) & 0xFFFFFFFF
    return [w.astype(np.uint32) for w in x]


def _philox_blocks(key: int, low: int, high: int, blocks: int) -> tuple[list[np.ndarray], int]:
    """`blocks` Philox outputs (4 uint32 words each) for the 128-bit counters (high, low) + i,
    and the counter's new low word (XLA keeps only that in a 2-word state)."""
    i = np.arange(blocks, dtype=np.uint64)
    lows = np.uint64(low) + i  # wraps modulo 2**64 like XLA's u64 add
    highs = np.where(lows < np.uint64(low), np.uint64((high + 1) & _M64), np.uint64(high))
    words = [lows & np.uint64(0xFFFFFFFF), lows >> np.uint64(32),
             highs & np.uint64(0xFFFFFFFF), highs >> np.uint64(32)]
    out = _philox4x32(words, (key & 0xFFFFFFFF, key >> 32))
    return out, (low + blocks) & _M64


def _philox_bits(key: int, low: int, high: int, n: int, width: int) -> tuple[np.ndarray, int]:
    """n values of `width` bits (32 or 64) and the new counter low word: XLA's PhiloxRngBit32 /
    PhiloxRngBit64, the words of consecutive blocks taken round robin."""
    if width == 64:
        words, new_low = _philox_blocks(key, low, high, -(-2 * n // 4))
        pairs = [words[0].astype(np.uint64) | (words[1].astype(np.uint64) << np.uint64(32)),
                 words[2].astype(np.uint64) | (words[3].astype(np.uint64) << np.uint64(32))]
        return np.stack(pairs, axis=1).reshape(-1)[:n], new_low
    words, new_low = _philox_blocks(key, low, high, -(-n // 4))
    return np.stack(words, axis=1).reshape(-1)[:n], new_low


def _rng_bit_generator(ctx: Any, key: np.ndarray, *, shape: Sequence[int], dtype: Any,
                       algorithm: Any, **_: Any) -> list[np.ndarray]:
    """XLA:CPU's RngBitGenerator: RNG_DEFAULT is Philox there (as is RNG_PHILOX), its 2-word
    state (key, counter) read as the 128-bit counter (high = key, low = counter) with the key
    as Philox's key; jax passes a uint32[4] key as that uint64[2]. Narrow unsigned outputs keep
    the low bits of 32-bit values, other integer dtypes convert from uint32 (jax's lowering).

    Raises:
        NotImplementedError: RNG_THREE_FRY (no rule yet).
    """
    if "THREE_FRY" in str(algorithm):
        raise NotImplementedError("rng_bit_generator with RNG_THREE_FRY has no reference rule")
    data = np.asarray(key)
    words = data.astype(np.uint64)
    if data.dtype == np.uint32:  # bitcast uint32[4] -> uint64[2], little-endian pairs
        words = words[0::2] | (words[1::2] << np.uint64(32))
    k, counter = int(words[0]), int(words[1])
    dtype = np.dtype(dtype)
    n = math.prod(shape)
    width = 64 if dtype.itemsize == 8 and dtype.kind == "u" else 32
    bits, new_low = _philox_bits(k, counter, k, n, width)
    if dtype.kind != "u" or dtype.itemsize < 4:
        bits = bits.astype(np.uint32).astype(dtype)  # truncating / wrapping conversions
    state = np.array([k, new_low], np.uint64)
    if data.dtype == np.uint32:
        state = state.view(np.uint32)  # uint64[2] -> uint32[4], little-endian
    return [state.astype(data.dtype), bits.reshape(tuple(shape))]


# ---------------------------------------------------------------------------------------------
# outputs defined up to a symmetry


@dataclasses.dataclass(frozen=True, slots=True)
class OutputGauge:
    """Which results of a primitive are defined only up to a symmetry, by result position.

    Attributes:
        vectors: the result whose columns (last axis) are each defined up to a unit factor
            (a sign for real dtypes), and jointly up to a unitary within a group of equal
            `values`.
        values: the result holding the eigen- or singular values that name those groups, or
            None.
        partner: a result whose rows transform with `vectors`' columns (V^H of an SVD: u_i and
            v_i flip together), or None.
        what: the symmetry in words, for verdict details.
    """

    vectors: int
    values: int | None
    partner: int | None
    what: str


#: primitive name -> the gauge of its results (see `xlaprobe.oracle.align_gauges`).
GAUGES: dict[str, Callable[[dict[str, Any]], OutputGauge | None]] = {
    "eigh": lambda params: OutputGauge(0, 1, None, "eigenvectors of eigh"),
    "svd": lambda params: OutputGauge(1, 0, 2, "singular vectors of svd")
    if params.get("compute_uv", True) else None,
}


#: Where a program output comes from: (the producing equation's path, result position, gauge).
_Source = tuple[tuple[int, ...], int, OutputGauge]


def _sources(jaxpr: Any, path: tuple[int, ...]) -> list[_Source | None]:
    """Per outvar of `jaxpr`, the gauge primitive's result it is, looking through call-like
    equations (``jnp.linalg.eigh`` is a ``jit`` around ``eigh``); None for anything else."""
    env: dict[Any, _Source] = {}
    for i, eqn in enumerate(jaxpr.eqns):
        name = eqn.primitive.name
        if name in GAUGES and (gauge := GAUGES[name](eqn.params)) is not None:
            for position, var in enumerate(eqn.outvars):
                env[var] = (path + (i,), position, gauge)
        elif primitives.facts(name).call_like:
            inner = _sources(primitives.call_jaxpr(eqn).jaxpr, path + (i,))
            for var, source in zip(eqn.outvars, inner):
                if source is not None:
                    env[var] = source
    return [None if isinstance(v, jaxcompat.Literal) else env.get(v) for v in jaxpr.outvars]


def output_gauges(closed_jaxpr: Any) -> tuple[Gauge, ...]:
    """The program's output leaves defined only up to a symmetry (`GAUGES`), for the oracle.

    An output counts when it is a gauge primitive's vectors exactly (through calls, not through
    other operations: a product V diag(w) V^T is already invariant). Its values and partner are
    named when they are outputs too; V^H of an SVD without U is a gauge of its own (rows).

    Args:
        closed_jaxpr: the program's closed jaxpr.

    Returns:
        One `xlaprobe.oracle.Gauge` per vectors output, in output order.
    """
    sources = _sources(jaxcompat.as_closed(closed_jaxpr).jaxpr, ())

    def leaf_of(path: tuple[int, ...], position: int | None) -> int | None:
        if position is None:
            return None
        return next((k for k, s in enumerate(sources)
                     if s is not None and s[0] == path and s[1] == position), None)
    gauges = []
    for k, source in enumerate(sources):
        if source is None:
            continue
        path, position, gauge = source
        if position == gauge.vectors:
            gauges.append(Gauge(k, False, leaf_of(path, gauge.values),
                                leaf_of(path, gauge.partner), gauge.what))
        elif position == gauge.partner and leaf_of(path, gauge.vectors) is None:
            gauges.append(Gauge(k, True, leaf_of(path, gauge.values), None, gauge.what))
    return tuple(gauges)


RULES: dict[str, Rule] = {
    "cholesky": _cholesky, "lu": _lu, "lu_pivots_to_permutation": _lu_pivots_to_permutation,
    "qr": _qr, "geqrf": _geqrf, "householder_product": _householder_product, "eigh": _eigh,
    "svd": _svd, "triangular_solve": _triangular_solve, "tridiagonal_solve": _tridiagonal_solve,
    "symmetric_product": _symmetric_product, "fft": _fft,
    "rng_bit_generator": _rng_bit_generator,
}
