"""One fingerprint per bug across dtypes and shapes: the same kernel failing the same way in
float32 and bfloat16, or at two sizes, is one key before localization (`finding_key`) and after
(`localized_key`); another failure class or dtype class is another key."""

import jax.numpy as jnp
import ml_dtypes
import numpy as np

from xlaprobe.checking import check_program
from xlaprobe.oracle import VerdictKind
from xlaprobe.program import Program, Provenance
from xlaprobe.triage import finding_key, localized_key

TINY = float(np.finfo(np.float32).tiny)


def _cbrt_fingerprint(x, pool):
    program = Program.from_function(jnp.cbrt, (x,), Provenance("user", f"cbrt_{x.dtype}_{x.size}"))
    result = check_program(program, ["xla", "reference"], pool)
    [finding] = result.findings
    assert (finding.config, finding.kind) == ("xla", VerdictKind.MISMATCH)
    return finding.fingerprint


def test_cbrt_of_subnormals_is_one_fingerprint_in_float32_and_bfloat16_at_two_sizes(pool):
    # jax 0.12.0.1: jitted cbrt of subnormals is a constant near -5.6e-16 in both dtypes (the
    # shared case cbrt_subnormal); one campaign gave it three fingerprints.
    rng = np.random.default_rng(3)
    small = np.array([TINY / 2, 3e-41, 8.0], np.float32)
    large = np.concatenate([rng.uniform(1e-41, TINY, 13), [27.0]]).astype(np.float32)
    narrow = np.array([TINY / 4, 3e-39, -5e-40, 8.0], ml_dtypes.bfloat16)
    keys = {_cbrt_fingerprint(x, pool) for x in (small, large, narrow)}
    assert len(keys) == 1


def test_other_failure_class_or_dtype_class_is_another_key():
    floats = Program.from_function(jnp.cbrt, (np.ones(3, np.float32),), Provenance("user", "f"))
    halves = Program.from_function(jnp.cbrt, (np.ones(5, np.float16),), Provenance("user", "h"))
    ints = Program.from_function(lambda v: v * 3, (np.ones(3, np.int32),), Provenance("user", "i"))
    ints8 = Program.from_function(lambda v: v * 3, (np.ones(3, np.int8),), Provenance("user", "j"))
    key = lambda p, kind=VerdictKind.MISMATCH: finding_key(p, "xla", kind, (0,))  # noqa: E731
    assert key(floats) == key(halves) and key(ints) == key(ints8)
    assert key(floats) == key(floats, VerdictKind.NAN_MISMATCH)  # one numeric family
    assert len({key(floats), key(ints), key(floats, VerdictKind.TIMEOUT)}) == 3
    assert localized_key("cbrt", ["f32"]) == localized_key("cbrt", ["bf16", "bf16"])
    assert localized_key("cbrt", ["f32"]) != localized_key("cbrt", ["s32"])
    assert localized_key("cbrt", ["f32"]) != localized_key("cbrt", ["f32"], "algsimp")
