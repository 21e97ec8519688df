"""A new primitive defined in one place -- one `PrimitiveDef` record, registered by
`xlaprobe.extend.register` or made by `xlaprobe.extend.define_primitive` -- works end to end
through the command line: a program using it is built, run under XLA and eagerly, checked against
the float64 reference by the primitive's own reference rule, and judged; the fuzzer generates it."""

import json
import os
import sqlite3
import subprocess
import sys

import pytest

#: A toy primitive, ``toy_cube(x) = x * x * x``, with XLA's lowering given by LOWERED (a planted
#: fault lowers it as x * x). Everything xlaprobe knows about it is one record: the
#: define_primitive call, or (RECORD) the same PrimitiveDef written out and registered.
TOY = '''
import jax
import numpy as np
from jax.extend.core import Primitive
from jax.interpreters import mlir

from xlaprobe.approximations import Approximation
from xlaprobe.extend import PrimitiveDef, define_primitive, register, unary_rule
from xlaprobe.primitives import PrimitiveFacts

toy_cube_p = Primitive("toy_cube")
toy_cube_p.def_impl(lambda x: x * x * x)
toy_cube_p.def_abstract_eval(lambda x: x)
mlir.register_lowering(toy_cube_p, mlir.lower_fun(lambda x: LOWERED, multiple_results=False))


def toy_cube(x):
    return toy_cube_p.bind(x)


define_primitive(PrimitiveFacts("toy_cube", rounding=True, elementwise=True, approximate=True),
                 primitive=toy_cube_p, reference_rule=lambda ctx, x, **_: x * x * x,
                 generator=unary_rule("toy_cube", toy_cube, weight=1e6),
                 # x * x * x rounds twice: one correctly rounded operation's budget is too tight
                 # (seed 85 chains seven cubes in float32 and lands 1.01x over it)
                 budget=Approximation("toy_cube", ulps=1.5))


RECORD

def fn(x):
    return toy_cube(x) + 1.0


def inputs():
    return (np.linspace(-3.0, 3.0, 64, dtype=np.float32),)
'''


#: The toy's record written as a PrimitiveDef, registered as xlaprobe's own records are built.
RECORD = '''
register(PrimitiveDef(
    PrimitiveFacts("toy_cube", rounding=True, elementwise=True, approximate=True),
    reference=lambda ctx, x, **_: x * x * x,
    generator=unary_rule("toy_cube", toy_cube, weight=1e6),
    budget=Approximation("toy_cube", ulps=1.5)), primitive=toy_cube_p)
'''


def _toy(lowered, record=False):
    """The toy module's source: its one define_primitive call, or with `record` its PrimitiveDef."""
    source = TOY.replace("LOWERED", lowered)
    if record:
        start = source.index("define_primitive(")
        source = source[:start] + source[source.index("RECORD"):]
    return source.replace("RECORD", RECORD if record else "")


def _cli(tmp_path, lowered, *args, record=False):
    (tmp_path / "toymod.py").write_text(_toy(lowered, record))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(tmp_path), os.environ.get("PYTHONPATH", "")]), "XLAPROBE_EXTENSIONS": "toymod"}
    return subprocess.run([sys.executable, "-m", "xlaprobe.cli", *args], capture_output=True,
                          text=True, cwd=tmp_path, env=env, timeout=600)


@pytest.mark.parametrize("lowered, code, record", [
    pytest.param("x * x * x", 0, False, marks=pytest.mark.slow), ("x * x", 1, False),
    ("x * x", 1, True)])
def test_a_toy_primitive_defined_in_one_place_is_checked_and_judged(tmp_path, lowered, code,
                                                                    record):
    run = _cli(tmp_path, lowered, "check", "toymod:fn", "--inputs", "f32[64]", "--configs",
               "xla,eager,reference", "--db", str(tmp_path / "x.db"), "--json", record=record)
    assert run.returncode == code, run.stderr
    data = json.loads(run.stdout)
    verdicts = {c["config"]: (c["outcome"], c["verdict"]) for c in data["configs"]}
    assert data["judged_against"] == "reference" and verdicts["reference"][0] == "ran"
    # eager runs the primitive's impl: right either way; XLA runs its lowering: wrong when planted
    assert verdicts["eager"] == ("ran", "ok")
    assert verdicts["xla"] == ("ran", "ok" if code == 0 else "mismatch"), verdicts
    assert {f["config"] for f in data["findings"]} == (set() if code == 0 else {"xla"})


def test_the_fuzzer_generates_a_toy_primitive_and_judges_it(tmp_path):
    run = _cli(tmp_path, "x * x * x", "fuzz", "--time", "15s", "--configs", "xla,reference",
               "--db", str(tmp_path / "f.db"), "--json", record=True)
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    assert summary["programs"] >= 1 and "toy_cube" not in summary["uncovered"], summary
    with sqlite3.connect(tmp_path / "f.db") as db:  # the campaign's coverage: ops generated
        (state,), = db.execute("SELECT state FROM fuzz_campaigns").fetchall()
    assert json.loads(state)["coverage"].get("toy_cube", 0) >= 1
    assert summary["findings"] == 0 and summary["verdicts"]["xla"].get("ok", 0) >= 1, summary


@pytest.mark.parametrize("body, words", [
    (None, "(No module named 'xp_missing_ext'); put its directory on PYTHONPATH"),
    ("raise RuntimeError('no licence')", "importing 'xp_ext' failed (RuntimeError: no licence)"),
    ("import sys\nsys.exit(0)", "importing 'xp_ext' failed (SystemExit: 0)"),
])
def test_an_extension_that_cannot_load_is_named_with_its_own_error(tmp_path, monkeypatch, body,
                                                                   words):
    # A module that exits used to end xlaprobe silently with status 0; only a missing module
    # gets the PYTHONPATH hint.
    from xlaprobe.errors import InvalidArgument
    from xlaprobe.extend import ENVIRONMENT, load_extensions

    name = "xp_missing_ext" if body is None else "xp_ext"
    if body is not None:
        (tmp_path / "xp_ext.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    with pytest.raises(InvalidArgument) as err:
        load_extensions({ENVIRONMENT: name})
    assert str(err.value) == f"{ENVIRONMENT}: cannot import '{name}' " + words \
        if body is None else str(err.value) == f"{ENVIRONMENT}: " + words


def test_one_record_fills_every_table():
    """The record's four parts land in the four tables, and nowhere else needs an edit."""
    from xlaprobe import approximations, primitives
    from xlaprobe.approximations import Approximation
    from xlaprobe.configs import reference
    from xlaprobe.extend import PrimitiveDef, register, unary_rule
    from xlaprobe.primitives import PrimitiveFacts
    from xlaprobe.sources import ops

    rule = lambda ctx, x, **_: x * x  # noqa: E731
    record = PrimitiveDef(PrimitiveFacts("toy_square", rounding=True, approximate=True,
                                         elementwise=True), rule,
                          unary_rule("toy_square", lambda x: x * x),
                          Approximation("toy_square", ulps=3.0))
    try:
        register(record)
        assert primitives.facts("toy_square") is record.facts
        assert reference.RULES["toy_square"] is rule
        assert ops.RULES["toy_square"] is record.generator and approximations.budget(
            "toy_square").ulps == 3.0
    finally:
        for table in (primitives.PRIMITIVES, reference.RULES, ops.RULES, approximations.BUDGETS):
            table.pop("toy_square", None)
    with pytest.raises(ValueError, match="its budget is named 'other'"):
        PrimitiveDef(record.facts, budget=Approximation("other", ulps=1.0))
    with pytest.raises(ValueError, match="a budget needs facts.approximate"):
        PrimitiveDef(PrimitiveFacts("toy_square"), budget=Approximation("toy_square", ulps=1.0))
