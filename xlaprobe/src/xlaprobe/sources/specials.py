"""Inputs placed at IEEE 754 special values, for programs whose compile fired a rewrite.

A rewrite of the algebraic simplifier (and its kin) is proved on the reals; where it is wrong it
is most often wrong at a value the reals do not have or where rounding differs: a signed zero
(log(rsqrt(x)) -> -0.5*log(x) at x = -0.0), an infinity, a NaN, a subnormal, the largest finite
value, or a value at a rounding boundary (1 +- one ulp, a tie, 2**mantissa where integers stop
being exact, the edges where exp over- and underflows). The steered generator
(`xlaprobe.sources.steered`) re-runs a program whose compile fired a rewrite with its float inputs
replaced by such values (`special_variants`), judged by the same oracle.

Which operand of a rewritten instruction an input feeds is not traced: every floating input (or
one of them, so the others stay ordinary) is filled, element by element, from the special values
of its dtype, in an order drawn per variant so that pairs of inputs meet in different
combinations. Integer and boolean inputs (indices, masks, counts) keep their values: their
out-of-range semantics are the generator's to choose.

Source: the special-value operand classes of IEEE 754-2019 (sections 6.1-6.3, 7) and the
boundary-value testing of test-design practice (values at and next to each edge).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import ml_dtypes
import numpy as np

#: Share of each filled input's elements set to a special value (the rest keep theirs, so an
#: operand is not all NaN and a reduction over it still says something).
FILL_SHARE = 0.75
#: Primitives that read the bits of a NaN (its sign and payload are unspecified): a program with
#: one gets no NaN among its special values (a bitcast of NaN gave 0xFFC00000 for 0x7FC00000).
READS_NAN_BITS = frozenset({"bitcast_convert_type", "sort", "top_k"})
#: ml_dtypes' narrow floats (NumPy's kind of theirs is not 'f').
_NARROW = frozenset(np.dtype(t) for t in (ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn,
                                          ml_dtypes.float8_e5m2))


def special_values(dtype: np.dtype, *, subnormals: bool = False, nan: bool = True) -> np.ndarray:
    """The special and boundary values of a floating dtype.

    Subnormals are left out unless asked for: XLA:CPU may flush them to zero anywhere (a freedom
    the oracle models at a program's inputs and outputs, not inside a comparison or a product
    chain: the first runs with them gave only such false alarms and the known subnormal-base bugs
    of pow and cbrt).

    Args:
        dtype: a NumPy or ml_dtypes floating dtype (float16/32/64, bfloat16, float8 kinds).
        subnormals: also the smallest and largest subnormals (positive and negative).
        nan: NaN among them (`READS_NAN_BITS`).

    Returns:
        A 1-D array of `dtype` (values the dtype cannot hold, such as inf in float8_e4m3fn,
        become what the cast makes of them and duplicates are dropped): +-0, +-inf, NaN,
        (with `subnormals`: +-the smallest and the largest subnormal), +-the smallest normal,
        +-max, +-1, 1 +- one ulp, the
        ties 0.5, 1.5 and 2.5, 2**mantissa (and one past it), exp's over- and underflow edges
        log(max) and log(tiny), and sqrt(max).

    Raises:
        ValueError: `dtype` is not floating.
    """
    dtype = np.dtype(dtype)
    if not is_floating(dtype):
        raise ValueError(f"special values are for floating dtypes, not {dtype}")
    info = ml_dtypes.finfo(dtype)
    tiny, big, eps = float(info.tiny), float(info.max), float(info.eps)
    smallest = float(info.smallest_subnormal)
    mantissa = 2.0 ** int(info.nmant)
    values = [0.0, -0.0, math.inf, -math.inf, *((math.nan,) if nan else ()),
              *((smallest, -smallest, tiny - smallest) if subnormals else ()), tiny, -tiny, big,
              -big, 1.0, -1.0, 1.0 + eps, 1.0 - eps / 2, -1.0 - eps, 0.5, 1.5, 2.5, -2.5,
              mantissa, mantissa + 1.0, math.log(big), math.log(tiny), math.sqrt(big)]
    with np.errstate(over="ignore", invalid="ignore"):
        cast = np.asarray(values, np.float64).astype(dtype)
    keep, seen = [], set()
    for value in cast:
        key = value.tobytes()
        if key not in seen:
            seen.add(key)
            keep.append(value)
    return np.asarray(keep, dtype)


def is_floating(dtype: np.dtype) -> bool:
    """Whether inputs of `dtype` get special values (NumPy floats and ml_dtypes' narrow ones)."""
    dtype = np.dtype(dtype)
    return dtype.kind == "f" or dtype in _NARROW


def fill_specials(array: np.ndarray, rng: np.random.Generator,
                  share: float = FILL_SHARE, *, nan: bool = True) -> np.ndarray:
    """A copy of a floating `array` with a `share` of its elements, and at least as many as
    its dtype has special values (or all of them), set to those values, each used once before
    any repeats, in a drawn order.

    Args:
        array: any shape, a floating dtype (`is_floating`).
        rng: the generator (draws the positions and the order).
        share: fraction of elements replaced, in (0, 1].
        nan: NaN among the values (`special_values`).

    Returns:
        An array of the same shape and dtype.
    """
    out = np.array(array, copy=True)
    if out.size == 0:
        return out
    values = rng.permutation(special_values(out.dtype, nan=nan))
    count = min(out.size, max(len(values), int(round(share * out.size))))
    where = rng.choice(out.size, count, replace=False)
    flat = out.reshape(-1)
    flat[where] = np.resize(values, count)
    return flat.reshape(out.shape)


def special_variants(inputs: Sequence[np.ndarray], rng: np.random.Generator,
                     count: int = 2, *, nan: bool = True) -> list[tuple[np.ndarray, ...]]:
    """Input tuples for re-running a program at special values.

    The first variant fills every floating input; each further one fills a single floating input
    (in turn), so an operand meets special values while the others stay ordinary.

    Args:
        inputs: the program's inputs (NumPy arrays, any dtypes).
        rng: the generator.
        count: most variants made.
        nan: NaN among the values (False for a program using `READS_NAN_BITS`).

    Returns:
        Up to `count` tuples of arrays of the inputs' shapes and dtypes; empty when no input is
        floating (or has no element).
    """
    floating = [i for i, x in enumerate(inputs) if is_floating(x.dtype) and x.size]
    if not floating:
        return []
    chosen = [floating, *([i] for i in floating)][:count]
    return [tuple(fill_specials(x, rng, nan=nan) if i in which else x for i, x in enumerate(inputs))
            for which in chosen]
