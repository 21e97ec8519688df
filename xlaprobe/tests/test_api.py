"""The Python API (`xlaprobe.checking`, `localize`, `reduce`) and the pytest plugin, on real checks."""

import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from xlaprobe import api
from xlaprobe.errors import InvalidArgument
from xlaprobe.oracle import VerdictKind
from xlaprobe.store import Store

X = np.linspace(-3, 3, 64, dtype=np.float32)
PLANTED = "mutant:swap-subtract-fused"
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "pytest"


def _sin_minus(v):
    return jnp.sin(v) * 2 - v


def test_clean_function_checks_ok_without_a_store(pool, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = api.check(jnp.tanh, X, configs="xla,eager", db=None, pool=pool)
    assert result.ok and not result.findings and not result.incomplete
    assert list(result.verdicts) == ["xla", "eager", "reference"]  # the oracle is always added
    assert all(v.kind is VerdictKind.OK for v in result.verdicts["xla"])
    assert result.program.provenance.name == "jax.numpy:tanh"
    assert "all ok" in str(result) and not (tmp_path / ".xlaprobe").exists()


def test_planted_fault_is_a_stored_finding_printed_with_its_replay(pool, tmp_path):
    db = tmp_path / "store" / "x.db"
    result = api.check(_sin_minus, X, configs=f"xla,{PLANTED}", db=db, pool=pool, name="demo")
    assert not result.ok
    (finding,) = result.findings
    assert finding.config == PLANTED and finding.kind is VerdictKind.MISMATCH
    # sin(x)*2 - x with the subtract's operands swapped: every element is negated.
    worst = result.verdicts[PLANTED][0]
    assert worst.actual == pytest.approx(-worst.expected, rel=1e-6)
    artifact = Path(result.artifacts[PLANTED])
    assert (artifact / "metadata.json").is_file()
    with Store(db) as store:
        stored = store.finding(result.ids[PLANTED])
    assert stored is not None and stored.config == PLANTED and stored.name == "demo"
    text = result.table(width=400)
    assert f"finding {result.ids[PLANTED]}: {PLANTED} mismatch" in text
    assert str(artifact) in text and f"--db {db}" in text


def test_localize_reuses_the_checked_result(pool, tmp_path):
    db = tmp_path / "x.db"
    checked = api.check(_sin_minus, X, configs=PLANTED, db=db, pool=pool)
    loc = api.localize(checked, db=db, pool=pool)
    assert loc.located and loc.config == PLANTED
    assert loc.equation.primitive == "sub" and loc.op.opcode == "subtract"
    printed = str(loc)  # what `xlaprobe localize` prints, not the record's repr
    assert printed.startswith(f"{PLANTED} on ") and "tier 2 equation: " in printed
    assert f"tier 4 op:       {loc.op.instruction} (subtract)" in printed
    with Store(db) as store:
        row = store.finding(checked.ids[PLANTED])
    assert row is not None and row.bug  # the localization keyed the finding's bug


@pytest.mark.slow
def test_reduce_writes_a_repro_that_shows_the_fault(pool, tmp_path):
    checked = api.check(_sin_minus, X, configs=PLANTED, db=None, pool=pool)
    reduced = api.reduce(checked, out=tmp_path / "repro", db=None, pool=pool)
    assert reduced.reproduces and reduced.repro.is_file()
    assert f"repro:   python {reduced.repro}" in str(reduced) and "shows the fault" in str(reduced)
    assert reduced.reduction.equations_after <= reduced.reduction.equations_before


@pytest.mark.parametrize("call, message", [
    (lambda: api.check("mlp_mixer", X, db=None), "holds its own inputs"),
    (lambda: api.check(3, db=None), "looked up in a store"),
    (lambda: api.check(object(), db=None), "cannot check a object"),
    (lambda: api.check(jnp.tanh, X, configs="xla:nonsense", db=None), "nonsense"),
    (lambda: api.localize(jnp.tanh, X, db=None), "which configuration fails"),
    (lambda: api.localize(jnp.tanh, X, config="reference", db=None), "the oracle"),
    (lambda: api.reduce(jnp.tanh, X, config="xla", db=None), "give out="),
    (lambda: api.check(lambda v: v.undefined, X, db=None), "tracing"),
    (lambda: api.check(jnp.tanh, X, db=5), "db must be a file path"),
    (lambda: api.check(jnp.tanh, X, configs=5, db=None), "configs must be"),
    (lambda: api.check(jnp.tanh, X, jobs="2", db=None), "jobs must be"),
])
def test_bad_input_is_one_invalid_argument(call, message):
    with pytest.raises(InvalidArgument, match=message):
        call()


def test_a_bad_store_or_out_fails_before_any_run(tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(InvalidArgument, match="is a directory"):
        api.localize(_sin_minus, X, config=PLANTED, db=tmp_path)
    with pytest.raises(InvalidArgument, match="is a file"):
        api.reduce(_sin_minus, X, config=PLANTED, db=None, out=tmp_path / "afile")
    assert not (tmp_path / "5").exists()


def test_the_package_exports_the_api():
    import xlaprobe
    assert xlaprobe.check is api.check and xlaprobe.localize is api.localize
    assert xlaprobe.reduce is api.reduce and xlaprobe.bisect is api.bisect
    import xlaprobe.checking  # noqa: F401  (a submodule import must not shadow the function)
    import xlaprobe.localization.api  # noqa: F401
    assert xlaprobe.check is api.check and xlaprobe.localize is api.localize


def test_the_plugin_is_registered_as_a_pytest11_entry_point():
    points = {p.name: p.value for p in metadata.entry_points(group="pytest11")}
    assert points.get("xlaprobe") == "xlaprobe.pytest_plugin"


def test_plugin_fails_only_the_test_with_a_finding_and_shows_the_table(tmp_path):
    db = tmp_path / "plugin.db"
    env = os.environ | {"PYTHONDONTWRITEBYTECODE": "1"}
    # Where the entry point is not installed (an environment made before it), load the plugin by
    # name: this test is about its behaviour; the one above is about its registration.
    load = [] if "xlaprobe" in {p.name for p in metadata.entry_points(group="pytest11")} \
        else ["-p", "xlaprobe.pytest_plugin"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *load, "-k", "not vit",
         "--xlaprobe-configs", "xla,reference", "--xlaprobe-db", str(db),
         str(EXAMPLES / "test_numerics.py")],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed, 3 passed, 1 deselected" in done.stdout, done.stdout
    assert "xlaprobe: 1 finding on" in done.stdout and "test_planted_fault_is_reported" in done.stdout
    assert f"{PLANTED} mismatch" in done.stdout and "replay: python " in done.stdout
    with Store(db) as store:
        rows = store.findings()
    assert [r["config"] for r in rows] == [PLANTED]


def test_plugin_refuses_a_bad_configuration_once_before_any_test(tmp_path):
    load = [] if "xlaprobe" in {p.name for p in metadata.entry_points(group="pytest11")} \
        else ["-p", "xlaprobe.pytest_plugin"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *load,
         "--xlaprobe-configs", "xla,xla:O1", str(EXAMPLES / "test_numerics.py")],
        capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 4, done.stdout + done.stderr  # pytest's usage error
    assert "--xlaprobe-configs: unknown variant 'xla:O1'" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr
