"""xlaprobe's sorting primitives, one record each (`xlaprobe.lax_rules.record.PrimitiveDef`):
``sort`` (one or several operands, lexicographic on the first ``num_keys``) and ``top_k``, each
with its facts, its float64 reference rule and its fuzzer rule side by side. They return their
operands' values exactly, in another order.

`DEFINITIONS` keeps the fuzzer's catalogue order: the generator draws a rule by its position in
`xlaprobe.sources.ops.RULES`.

Source: StableHLO specification (https://openxla.org/stablehlo/spec: sort) and XLA operation
semantics (https://openxla.org/xla/operation_semantics: Sort, TopK); JAX's sort comparator
(``jax/_src/lax/lax.py``) for NaN and signed zeros.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from jax import lax

from xlaprobe.lax_rules.numeric import RuleContext, dtype_kind, total_order_key
from xlaprobe.lax_rules.opspec import (ALL, DISCONTINUOUS, NO_NAN, Aval, Context, Operand, OpRule,
                                       Sample, call, choice)
from xlaprobe.lax_rules.record import PrimitiveDef, plain

__all__ = ["DEFINITIONS"]

# =============================================================================================
# reference rules (float64 NumPy)


def _sort(ctx: RuleContext, *operands: np.ndarray, dimension: int, is_stable: bool = True, num_keys: int = 1,
          **_: Any) -> list[np.ndarray]:
    """JAX's comparator: lexicographic on the first `num_keys` operands; floats with -0 == +0 and
    every NaN equal and last. Always stable (ties are unspecified when is_stable is false)."""
    moved = [np.moveaxis(x, dimension, -1) for x in operands]
    significance = []  # most significant first
    for x, dtype in zip(moved[:num_keys], ctx.in_dtypes):
        if dtype_kind(dtype) == "f":
            nan = np.isnan(x)
            significance += [nan, np.where(nan, 0.0, x + 0.0)]
        elif dtype_kind(dtype) == "c":
            for part in (np.real(x), np.imag(x)):
                nan = np.isnan(part)
                significance += [nan, np.where(nan, 0.0, part + 0.0)]
        else:
            significance.append(x)
    if moved[0].ndim == 0:
        return list(operands)
    keys = [np.broadcast_to(k, moved[0].shape) for k in reversed(significance)]
    perm = np.lexsort(keys, axis=-1)
    return [np.moveaxis(np.take_along_axis(x, perm, axis=-1), -1, dimension) for x in moved]


def _top_k(ctx: RuleContext, x: np.ndarray, *, k: int, axis: int = -1, **_: Any) -> list[np.ndarray]:
    """XLA TopK: descending in IEEE total order (NaN largest, -NaN smallest, +0 > -0), ties by index."""
    moved = np.moveaxis(x, axis, -1)
    key = total_order_key(moved, ctx.in_dtypes[0])
    perm = np.argsort(~key, axis=-1, kind="stable")[..., :k]
    values = np.take_along_axis(moved, perm, axis=-1)
    return [np.moveaxis(values, -1, axis),
            np.moveaxis(perm, -1, axis).astype(ctx.out_dtypes[1])]


# =============================================================================================
# generator rules


def _sort_sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
    n = int(choice(rng, [1, 1, 2, 3]))
    num_keys = int(rng.integers(1, n + 1))
    operands = [Operand(aval, exact=n > 1)]
    for i in range(1, n):
        other = aval.with_dtype(choice(rng, ALL))
        operands.append(Operand(other, exact=i < num_keys))
    return Sample(tuple(operands), {"dimension": int(rng.integers(aval.ndim)),
                                    "is_stable": bool(n > 1 or rng.random() < 0.5),
                                    "num_keys": num_keys})


def _sort_build(*xs: Any, dimension: int, is_stable: bool, num_keys: int) -> Any:
    out = lax.sort(xs, dimension=dimension, is_stable=is_stable, num_keys=num_keys)
    return tuple(out)


def _top_k_sample(rng: np.random.Generator, aval: Aval, ctx: Context) -> Sample | None:
    axis = int(rng.integers(aval.ndim))
    return Sample((Operand(aval, NO_NAN, exact=True),),
                  {"k": int(rng.integers(1, aval.shape[axis] + 1)), "axis": axis})


# =============================================================================================
# the records


#: Both sorting primitives' records, in the fuzzer's catalogue order (module docstring).
DEFINITIONS: tuple[PrimitiveDef, ...] = (
    plain("sort", _sort, OpRule(
        "sort", "sort", -1, ALL, _sort_sample, _sort_build, exact_result=True, min_rank=1,
        notes=("keys of a multi-operand sort are " + DISCONTINUOUS,
               "unstable sorts only of a single operand (ties of payloads are unordered)"))),
    plain("top_k", _top_k, OpRule(
        "top_k", "sort", 1, ALL, _top_k_sample, call(lax.top_k), exact_result=True, min_rank=1,
        notes=("no NaN: top_k orders NaNs by their sign bit, and NaN payloads are not preserved",
               DISCONTINUOUS))),
)
