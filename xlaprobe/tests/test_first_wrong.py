"""One key per bug before localization: the first wrong intermediate names the faulty operation
whatever surrounds it, and two bugs keep two keys.

Known answers from XLA:CPU in jaxlib 0.12.0.1 (the shared case cbrt_subnormal and the fuzz case
pow_subnormal_base): cbrt of a float32 or bfloat16 subnormal and pow of a float32 subnormal base
return constant garbage, in jit and op by op.
"""

import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from xlaprobe.campaign import Campaign
from xlaprobe.checking import check_program
from xlaprobe.localization import make_pool
from xlaprobe.localization.first_wrong import first_wrong_equation, first_wrong_key
from xlaprobe.program import Program, Provenance
from xlaprobe.store import Store
from xlaprobe.triage import localized_key

SUBNORMAL = np.array([5.877e-39, 3e-41, 0.5, 8.0], np.float32)
CONFIGS = ["xla", "reference"]


def _program(name, fn, *args):
    return Program.from_function(fn, args, Provenance("user", name))


#: cbrt of subnormals in three surroundings (float32 twice, bfloat16), pow of a subnormal base.
PROGRAMS = {
    "cbrt_then_exp2": lambda: _program("cbrt_then_exp2", lambda x: jnp.exp(jnp.cbrt(x) * 1e13),
                                       SUBNORMAL),
    "tanh_of_scaled_cbrt": lambda: _program(
        "tanh_of_scaled_cbrt", lambda x, y: (jnp.tanh(jnp.cbrt(x) * 1e12) + y,),
        SUBNORMAL, np.ones(4, np.float32)),
    "cbrt_bf16": lambda: _program("cbrt_bf16", lambda x: jnp.abs(jnp.cbrt(x)),
                                  SUBNORMAL.astype(jnp.bfloat16)),
    "pow_subnormal": lambda: _program("pow_subnormal", lambda x, y: lax.pow(jnp.abs(x), y),
                                      SUBNORMAL, np.full(4, 0.5, np.float32)),
}


@pytest.fixture(scope="module")
def keyed():
    """name -> (cone fingerprint, first-wrong key) of each program's xla finding."""
    out = {}
    with make_pool(1) as pool:
        for name, make in PROGRAMS.items():
            program = make()
            check = check_program(program, CONFIGS, pool)
            (finding,) = [f for f in check.findings if f.config == "xla"]
            out[name] = (finding.fingerprint, first_wrong_key(program, "xla", check, pool))
    return out


def test_one_bug_in_three_surroundings_is_one_key(keyed):
    cones = {keyed[n][0] for n in ("cbrt_then_exp2", "tanh_of_scaled_cbrt", "cbrt_bf16")}
    deep = {keyed[n][1] for n in ("cbrt_then_exp2", "tanh_of_scaled_cbrt", "cbrt_bf16")}
    assert len(cones) == 3  # the cone keys split it
    assert deep == {localized_key("cbrt", ["float32"])}


def test_two_bugs_keep_two_keys(keyed):
    assert keyed["pow_subnormal"][1] == localized_key("pow", ["float32"])
    assert keyed["pow_subnormal"][1] != keyed["cbrt_then_exp2"][1]


def test_no_numeric_finding_names_no_equation():
    program = _program("fine", lambda x: x + 1.0, np.ones(3, np.float32))
    with make_pool(1) as pool:
        check = check_program(program, CONFIGS, pool)
        assert first_wrong_equation(program, "xla", check, pool) is None


def _contexts(seed):
    """Seed -> one of the cbrt programs (a campaign's source)."""
    names = ["cbrt_then_exp2", "tanh_of_scaled_cbrt", "cbrt_bf16"]
    return PROGRAMS[names[seed % 3]]()


def test_campaign_groups_fingerprints_by_first_wrong_key(tmp_path):
    db = tmp_path / "fuzz.db"
    campaign = Campaign(db, CONFIGS, seed=0, jobs=1, source=_contexts, schedule="all")
    try:
        summary = campaign.run(300.0, max_programs=3)
    finally:
        campaign.close()
    assert summary.unique_findings == 3 and summary.distinct_bugs == 1
    with Store(db) as store:
        assert store.distinct_bugs() == 1
        assert {r["bug"] for r in store.findings()} == {localized_key("cbrt", ["float32"])}
    # A resumed campaign reads the keys back (old states without them group by fingerprint).
    again = Campaign(db, CONFIGS, resume=True, source=_contexts)
    try:
        assert again.state.distinct_bugs == 1
    finally:
        again.close()
