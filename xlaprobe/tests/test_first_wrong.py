"""One key per bug before localization: the first wrong intermediate names the faulty operation
whatever surrounds it, and two bugs keep two keys.

Known answers from XLA:CPU in jaxlib 0.12.0.1 (the shared case cbrt_subnormal and the fuzz case
pow_subnormal_base): cbrt of a float32 or bfloat16 subnormal and pow of a float32 subnormal base
return constant garbage, in jit and op by op. The shifted self dynamic_update_slice (shared case
dus_shifted_self_update) goes wrong only while its result is not an output: followed by a reshape
or by a cumsum it is wrong, exposed it is right, so the full exposure names nothing and the walk
back names it.
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


def _dus_then_reshape(x):
    y = x + np.float32(1)  # [1, 2, 3, 4]; rows 1..3 <- rows 0..2: [1, 1, 2, 3]; XLA: [1, 1, 1, 1]
    return (lax.dynamic_update_slice(y, y[:3], (1, 0, 0)).reshape((1, 4, 1)),)


def _dus_then_cumsum(x):
    c = jnp.cos(x)
    return (jnp.cumsum(lax.dynamic_update_slice(c, c[:4], (np.int16(1),))),)  # XLA: [1, 2, .., 5]


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
    "dus_then_reshape": lambda: _program("dus_then_reshape", _dus_then_reshape,
                                         np.arange(4, dtype=np.float32).reshape(4, 1, 1)),
    "dus_then_cumsum": lambda: _program("dus_then_cumsum", _dus_then_cumsum,
                                        np.linspace(0, 2, 5).astype(np.float32)),
}
#: Programs whose full exposure hides the fault (their key without the walk back is kept too).
HIDDEN = ("dus_then_reshape", "dus_then_cumsum")


@pytest.fixture(scope="module")
def keyed():
    """name -> (cone fingerprint, first-wrong key, and for `HIDDEN` the key of the full exposure
    alone) of each program's xla finding."""
    out = {}
    with make_pool(1) as pool:
        for name, make in PROGRAMS.items():
            program = make()
            check = check_program(program, CONFIGS, pool)
            (finding,) = [f for f in check.findings if f.config == "xla"]
            exposed = first_wrong_key(program, "xla", check, pool, walk_back=False) \
                if name in HIDDEN else None
            out[name] = (finding.fingerprint, first_wrong_key(program, "xla", check, pool),
                         exposed)
    return out


def test_one_bug_in_three_surroundings_is_one_key(keyed):
    cones = {keyed[n][0] for n in ("cbrt_then_exp2", "tanh_of_scaled_cbrt", "cbrt_bf16")}
    deep = {keyed[n][1] for n in ("cbrt_then_exp2", "tanh_of_scaled_cbrt", "cbrt_bf16")}
    assert len(cones) == 3  # the cone keys split it
    assert deep == {localized_key("cbrt", ["float32"])}


def test_two_bugs_keep_two_keys(keyed):
    assert keyed["pow_subnormal"][1] == localized_key("pow", ["float32"])
    assert keyed["pow_subnormal"][1] != keyed["cbrt_then_exp2"][1]


def test_update_hidden_by_exposure_is_one_key_whatever_consumes_it(keyed):
    assert keyed["dus_then_reshape"][0] != keyed["dus_then_cumsum"][0]  # two cone keys
    # Exposing every intermediate hides the fault: without the walk back, no key.
    assert keyed["dus_then_reshape"][2] is None and keyed["dus_then_cumsum"][2] is None
    dus = localized_key("dynamic_update_slice", ["float32"])
    assert keyed["dus_then_reshape"][1] == keyed["dus_then_cumsum"][1] == dus
    assert dus not in {keyed[n][1] for n in PROGRAMS if n not in HIDDEN}  # no bug merged


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
