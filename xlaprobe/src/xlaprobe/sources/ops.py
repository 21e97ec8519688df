"""The op catalogue of the fuzzer: one frozen `OpRule` per lax primitive, keyed by primitive name.

A rule says what the generator (`xlaprobe.sources.generator`) needs to emit its primitive in a
valid program: the dtypes of its primary operand, how to sample the other operands (as `Operand`
requirements: abstract value, value `Domain`, exactness) and the parameters from a NumPy
``Generator``, and how to build it with JAX's public lax function (so the jaxpr holds JAX's own
primitive). Every rule but ``random_bits``'s sits in its primitive's record
(``lax_rules/<family>.py``, beside its facts, reference rule and budget), built from `OpRule` and
the sampler factories of ``lax_rules/opspec.py``; this module adds ``random_bits`` (the PRNG's
reference rules stay with the interpreter, which carries key arrays) and keys the catalogue. Its ORDER matters: the
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

from typing import Any

import jax
import numpy as np

from xlaprobe import primitives
from xlaprobe.lax_rules import registry
from xlaprobe.lax_rules.opspec import (
    ABOVE_MINUS_ONE, ALL, ANGLE, ANY, AT_LEAST_ONE, FLOATS, GAMMA, INTS, MODERATE, NO_NAN, NONZERO,
    NUMERIC, POSITIVE, SIGNED, UNIT, UNSIGNED, X64, Aval, Context, Domain, Operand, OpRule,
    Sample, dtype_of, is_float, is_int, unary_rule)

__all__ = ["Aval", "Domain", "Operand", "OpRule", "Sample", "RULES", "FLOATS", "SIGNED",
           "UNSIGNED", "INTS", "NUMERIC", "ALL", "X64", "dtype_of", "is_float", "is_int",
           "unary_rule", "ANY", "POSITIVE", "ABOVE_MINUS_ONE", "AT_LEAST_ONE", "UNIT", "MODERATE",
           "ANGLE", "NONZERO", "GAMMA", "NO_NAN"]

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
    # every family but the PRNG's: each rule sits in its primitive's record (xlaprobe.lax_rules)
    *registry.generator_rules(),
    *_RANDOM_RULES,
], "op catalogue")
