"""Labelled freedoms (`xlaprobe.freedoms`): one real program per freedom, checked under XLA:CPU,
gets the right label; the recheck with the freedom switched off gives the honest answer; an
accepted freedom is ok with its label; a planted fault is never labelled a freedom."""

from __future__ import annotations

import dataclasses
import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xlaprobe
from xlaprobe import freedoms
from xlaprobe.checking import check_program, judge
from xlaprobe.configs.reference import evaluate
from xlaprobe.errors import InvalidArgument
from xlaprobe.oracle import VerdictKind
from xlaprobe.outcome import Outcome, OutcomeKind
from xlaprobe.program import Program, Provenance

HAS_FMA = " fma " in f" {pathlib.Path('/proc/cpuinfo').read_text()} " \
    if pathlib.Path("/proc/cpuinfo").exists() else False


def _program(fn, *args):
    return Program.from_function(fn, args, Provenance("user", fn.__name__))


def difference_of_squares(a, b):
    # sqrt(a*a - b*b) with a == b is exactly 0 in float32; contracted into an FMA, one product
    # stays exact and the other rounded, so the difference is +-(rounding error) and sqrt of a
    # negative one is NaN.
    return jnp.sqrt(a * a - b * b)


def quotient_of_quotient(a, b, c):
    # a / b overflows float32 for the first two elements; XLA's algebraic simplifier rewrites
    # (a / b) / c into a / (b * c), which does not.
    return (a / b) / c


def subnormal_product(x, y, scale):
    # 1e-20 * 1e-20 = 1e-40: a float32 subnormal, which XLA:CPU flushes to zero; scaled back
    # up, the flushed zero is 1e-20 away from the honest answer.
    return (x * y) * scale


def _squares_inputs():
    a = np.random.default_rng(0).uniform(1, 2, 64).astype(np.float32)
    return a, a.copy()


def test_accept_names_are_checked_in_one_line():
    assert freedoms.parse_accept("fma, ftz") == {"fma", "ftz"}
    assert freedoms.parse_accept(["freedom:excess-range"]) == {"excess-range"}
    assert freedoms.parse_accept("all") == set(freedoms.FREEDOMS)
    assert freedoms.parse_accept("none") == set() and freedoms.parse_accept(None) == {"ftz"}
    with pytest.raises(InvalidArgument, match=r"unknown freedom 'fmaa'.*known freedoms: "
                                              r"excess-range, fma, ftz"):
        freedoms.parse_accept("ftz,fmaa")


def test_the_contracted_honest_run_is_a_fused_multiply_add():
    a, b = _squares_inputs()
    closed = jax.make_jaxpr(difference_of_squares)(a, b)
    [native] = evaluate(closed, [a, b], round_each_op=True)
    [fused] = evaluate(closed, [a, b], round_each_op=True, contract=True)
    assert not np.isnan(native).any() and not native.any()  # honest float32: exactly 0
    # fma(a, a, -fl(b*b)) = a*a (exact in float64) - fl32(a*a): its sign decides NaN.
    residual = a.astype(np.float64) ** 2 - (a * a).astype(np.float64)
    np.testing.assert_array_equal(np.isnan(fused), residual < 0)
    # The residual has at most 24 significant bits (exact in float32); sqrt rounds once.
    kept = residual[residual >= 0].astype(np.float32)
    np.testing.assert_array_equal(fused[residual >= 0], np.sqrt(kept))


def test_excess_range_needs_its_recheck_to_overflow():
    """Pure judgement: XLA's finite float64 answer where the honest float32 run overflows is
    excess range only if XLA without the simplifier overflows too (else it is reassociation)."""
    args = (np.full(2, 1e30, np.float32), np.full(2, 1e-10, np.float32),
            np.full(2, 1e10, np.float32))
    program = _program(quotient_of_quotient, *args)
    right = np.full(2, 1e30)
    outcomes = [Outcome("xla", OutcomeKind.RAN, (right.astype(np.float32),)),
                Outcome("reference", OutcomeKind.RAN, (right,))]
    honest = [Outcome("reference:native", OutcomeKind.RAN, (np.full(2, np.inf),))]
    spec = "xla[xla_disable_hlo_passes=algsimp]"
    for recheck, label in ((np.full(2, np.inf, np.float32), "excess-range"),
                           (right.astype(np.float32), "")):
        result = judge(program, ["xla", "reference"], outcomes, honest,
                       rechecks=[Outcome(spec, OutcomeKind.RAN, (recheck,))])
        [verdict] = result.verdicts[0]
        assert verdict.freedom == label
        assert verdict.kind is (VerdictKind.FREEDOM if label else VerdictKind.OK)


def _honest(closed, args, **how):
    return Outcome(how.pop("spec"), OutcomeKind.RAN,
                   tuple(evaluate(closed, list(args), round_each_op=True, **how)))


def test_a_freedom_row_measures_its_error_against_the_freedom_evidence():
    """Pure judgement, no XLA: an output that is exactly what the contracted honest run gives
    is labelled fma, its numbers are against ``reference:fma`` (no error there), and its float64
    figures are in the detail, said as such, with the NaN count the residuals predict."""
    a, b = _squares_inputs()
    program = _program(difference_of_squares, a, b)
    closed = program.jaxpr
    native = _honest(closed, (a, b), spec="reference:native")
    fused = _honest(closed, (a, b), spec="reference:fma", contract=True)
    reference = Outcome("reference", OutcomeKind.RAN, tuple(evaluate(closed, [a, b])))
    xla = Outcome("xla", OutcomeKind.RAN, (fused.outputs[0].astype(np.float32),))
    flushed = _honest(closed, (a, b), spec="reference:ftz", flush_subnormals=True)
    result = judge(program, ["xla", "reference"], [xla, reference], [native], flushed,
                   rechecks=[fused])
    [verdict] = result.verdicts[0]
    assert (verdict.kind, verdict.freedom, verdict.against) == (
        VerdictKind.FREEDOM, "fma", "reference:fma")
    assert verdict.max_abs == 0 and verdict.margin == 0 and verdict.frac_over == 0
    nan = int((a.astype(np.float64) ** 2 - (a * a).astype(np.float64) < 0).sum())
    assert 0 < nan < 64
    assert "against float64: max abs " in verdict.detail
    assert f"error/allowed inf, NaN at {nan} of 64 elements" in verdict.detail
    assert result.to_json()["configs"][0]["outputs"][0]["against"] == "reference:fma"


def test_ftz_and_excess_range_rows_name_their_evidence():
    x, y, scale = np.full(3, 1e-20, np.float32), np.float32([1e-20, 3e-19, 1]), \
        np.full(3, 1e20, np.float32)
    program = _program(subnormal_product, x, y, scale)
    flushed = _honest(program.jaxpr, (x, y, scale), spec="reference:ftz", flush_subnormals=True)
    np.testing.assert_array_equal(flushed.outputs[0], [0, 0, 1])  # 1e-40, 3e-39 are subnormal
    result = judge(program, ["xla", "reference"], [
        Outcome("xla", OutcomeKind.RAN, (np.float32([0, 0, 1]),)),
        Outcome("reference", OutcomeKind.RAN, (np.array([1e-20, 3e-19, 1.0]),))],
        [_honest(program.jaxpr, (x, y, scale), spec="reference:native")], flushed,
        accept=frozenset())
    [verdict] = result.verdicts[0]
    assert (verdict.kind, verdict.freedom, verdict.against) == (
        VerdictKind.FREEDOM, "ftz", "reference:ftz")
    assert verdict.max_abs == 0 and verdict.max_rel == 0 and verdict.margin == 0
    assert "against float64: max abs 3e-19" in verdict.detail
    # Excess range borrows float64's range: its row is against float64, and the detail says
    # how many elements the program's own dtype overflows at.
    args = (np.full(2, 1e30, np.float32), np.float32([1e-10, 1]), np.float32([1e10, 3]))
    right = np.array([1e30, 1e30 / 3])
    result = judge(_program(quotient_of_quotient, *args), ["xla", "reference"], [
        Outcome("xla", OutcomeKind.RAN, (right.astype(np.float32),)),
        Outcome("reference", OutcomeKind.RAN, (right,))],
        [Outcome("reference:native", OutcomeKind.RAN, (np.array([np.inf, right[1]]),))],
        rechecks=[Outcome("xla[xla_disable_hlo_passes=algsimp]", OutcomeKind.RAN,
                          (np.float32([np.inf, right[1]]),))])
    [verdict] = result.verdicts[0]
    assert (verdict.freedom, verdict.against) == ("excess-range", "reference")
    assert "float32 (reference:native) overflows at 1 of 2 elements" in verdict.detail


def test_the_table_shows_what_a_freedom_row_is_measured_against():
    import io

    from rich.console import Console

    from xlaprobe.verdicts import print_result
    a, b = _squares_inputs()
    program = _program(difference_of_squares, a, b)
    fused = _honest(program.jaxpr, (a, b), spec="reference:fma", contract=True)
    result = judge(program, ["xla", "eager", "reference"], [
        Outcome("xla", OutcomeKind.RAN, (fused.outputs[0].astype(np.float32),)),
        Outcome("eager", OutcomeKind.RAN, (np.zeros(64, np.float32),)),
        Outcome("reference", OutcomeKind.RAN, (np.zeros(64),))],
        [_honest(program.jaxpr, (a, b), spec="reference:native")], rechecks=[fused])
    text = io.StringIO()
    print_result(result, {}, False, console=Console(file=text, width=400))
    lines = text.getvalue().splitlines()
    main = lines[:next(i for i, x in enumerate(lines) if x.startswith("└"))]  # the first table
    header = [c.strip() for c in next(x for x in main if "max abs" in x).split("┃")[1:-1]]
    rows = {cells[0]: cells for cells in ([c.strip() for c in x.split("│")[1:-1]]
                                           for x in main if x.startswith("│"))}
    column = header.index("against")
    assert rows["xla"][column] == "reference:fma" and rows["eager"][column] == "reference"
    assert rows["xla"][header.index("error/allowed")] == "0"  # not inf: NaN is what FMA gives
    assert "float64 figures are in its output leaf's detail" in " ".join(lines)


def test_fma_is_labelled_and_rechecked_without_fma(pool):
    if not HAS_FMA:
        pytest.skip("this CPU has no FMA instructions: XLA cannot contract")
    program = _program(difference_of_squares, *_squares_inputs())
    result = check_program(program, ["xla", "eager", "reference"], pool)
    xla, eager = result.verdicts[0][0], result.verdicts[1][0]
    assert (xla.kind, xla.freedom) == (VerdictKind.FREEDOM, "fma")
    assert eager.kind is VerdictKind.OK and not eager.freedom  # op by op: nothing to contract
    assert [f.freedom for f in result.findings] == ["fma"]
    # The recheck withholds the FMA instructions: XLA's answer is then the honest one.
    without = {o.config: o for o in result.rechecks}["xla[xla_cpu_max_isa=AVX]"]
    assert without.ran and not np.isnan(without.outputs[0]).any()
    assert "fma: off (xla[xla_cpu_max_isa=AVX]) gives ok" in xla.detail
    data = result.to_json()
    assert data["configs"][0]["freedom"] == "fma" and data["findings"][0]["freedom"] == "fma"
    json.dumps(data)
    accepted = judge(program, list(result.configs), list(result.outcomes), result.budget,
                     result.flushed, rechecks=result.rechecks, accept=frozenset({"fma"}))
    assert accepted.ok and accepted.verdicts[0][0].kind is VerdictKind.OK
    assert accepted.verdicts[0][0].freedom == "fma"


def test_a_fault_without_fma_too_is_no_fma(pool):
    """Known answer: XLA's contracted answer is labelled fma while XLA without FMA is right;
    the same answer from every configuration, op by op and without FMA too, is a fault."""
    if not HAS_FMA:
        pytest.skip("this CPU has no FMA instructions: XLA cannot contract")
    program = _program(difference_of_squares, *_squares_inputs())
    result = check_program(program, ["xla", "eager", "reference"], pool)
    assert result.verdicts[0][0].freedom == "fma"  # the control: the recheck is right
    xla = result.outcomes[0]
    recheck = "xla[xla_cpu_max_isa=AVX]"
    shared = [dataclasses.replace(o, outputs=xla.outputs) if o.config == recheck else o
              for o in result.rechecks]
    rejudged = judge(program, list(result.configs),
                     [xla, dataclasses.replace(xla, config="eager"), result.outcomes[2]],
                     result.budget, result.flushed, rechecks=shared)
    for verdict in (rejudged.verdicts[0][0], rejudged.verdicts[1][0]):  # xla, eager
        assert (verdict.kind, verdict.freedom) == (VerdictKind.NAN_MISMATCH, "")  # NaN by FMA
    assert sorted(f.config for f in rejudged.findings) == ["eager", "xla"]


def test_excess_range_is_labelled_and_the_simplifier_off_overflows(pool):
    args = (np.full(4, 1e30, np.float32), np.float32([1e-10, 1e-10, 1, 2]),
            np.float32([1e10, 1e10, 3, 4]))
    result = check_program(_program(quotient_of_quotient, *args), ["xla", "eager", "reference"],
                           pool)
    xla, eager = result.verdicts[0][0], result.verdicts[1][0]
    assert (xla.kind, xla.freedom) == (VerdictKind.FREEDOM, "excess-range")
    assert eager.kind is VerdictKind.OK and not eager.freedom  # overflows like float32 must
    without = {o.config: o for o in result.rechecks}["xla[xla_disable_hlo_passes=algsimp]"]
    np.testing.assert_array_equal(np.isinf(without.outputs[0]), [True, True, False, False])
    assert "1e+30 here, inf with excess-range off, 1e+30 in float64" in xla.detail


def test_ftz_is_accepted_by_default_and_a_finding_when_not(pool):
    x = np.full(3, 1e-20, np.float32)
    y = np.float32([1e-20, 3e-19, 1.0])
    program = _program(subnormal_product, x, y, np.full(3, 1e20, np.float32))
    result = check_program(program, ["xla", "reference"], pool)
    [verdict] = result.verdicts[0]
    assert result.ok and (verdict.kind, verdict.freedom) == (VerdictKind.OK, "ftz")
    # The Python API: accept nothing, and the same leaf is a labelled finding.
    with pytest.raises(InvalidArgument, match="unknown freedom 'flush'"):
        xlaprobe.check(subnormal_product, *program.inputs, configs="xla", db=None, pool=pool,
                       accept="flush")
    strict = xlaprobe.check(subnormal_product, *program.inputs, configs="xla", db=None,
                            pool=pool, accept="none")
    assert [(f.kind, f.freedom) for f in strict.findings] == [(VerdictKind.FREEDOM, "ftz")]
    assert "freedom:ftz" in str(strict)


def test_a_planted_fault_is_not_labelled_a_freedom(pool):
    a = np.random.default_rng(1).uniform(2, 3, 64).astype(np.float32)
    b = np.random.default_rng(2).uniform(1, 2, 64).astype(np.float32)
    result = check_program(_program(difference_of_squares, a, b),
                           ["xla", "mutant:swap-subtract-fused", "reference"], pool,
                           accept=frozenset(freedoms.FREEDOMS))
    assert result.verdicts[0][0].kind is VerdictKind.OK
    [finding] = result.findings  # sqrt(b*b - a*a): NaN, which no freedom explains
    assert (finding.config, finding.kind, finding.freedom) == (
        "mutant:swap-subtract-fused", VerdictKind.NAN_MISMATCH, "")
    assert "reference:fma" in {o.config for o in result.rechecks}  # the evidence was looked at


def test_localizing_an_accepted_freedom_is_refused_in_one_line(pool):
    from xlaprobe.errors import NotReproducible
    from xlaprobe.localization import localize
    x = np.full(3, 1e-20, np.float32)
    program = _program(subnormal_product, x, np.float32([1e-20, 3e-19, 1.0]),
                       np.full(3, 1e20, np.float32))
    with pytest.raises(NotReproducible, match=r"differs from float64 only by the flush of "
                       r"subnormals to zero \(a legal liberty, freedom:ftz\), which localize "
                       r"accepts as ok \(the default, ftz\); nothing to localize \(XLA:CPU runs "
                       r"every kernel in the processor's flush-to-zero mode: no one kernel or "
                       r"pass takes it\)$"):
        localize(program, "xla", pool)


def test_the_pass_search_calls_a_freedom_a_liberty_not_a_fault(pool):
    """Tier 5 on a real fma freedom: disabling fusion keeps the multiply and the subtract in
    separate kernels, so nothing is contracted; the evidence says what was removed."""
    if not HAS_FMA:
        pytest.skip("this CPU has no FMA instructions: XLA cannot contract")
    from xlaprobe.configs.registry import Configuration
    from xlaprobe.localization.passes import blame_pass
    program = _program(difference_of_squares, *_squares_inputs())
    check = check_program(program, ["xla", "reference"], pool)
    assert check.findings[0].freedom == "fma"
    blame = blame_pass(program, Configuration.parse("xla"), pool, check)
    assert blame.compiler_pass == "fusion"
    assert blame.evidence == ("disabling it alone removes the fused multiply-add (a legal "
                              "liberty, freedom:fma), not a fault")


FTZ_CASE = '''
import numpy as np

def program(x, y, scale):
    return (x * y) * scale

def inputs():
    return (np.full(3, 1e-20, np.float32), np.float32([1e-20, 3e-19, 1.0]),
            np.full(3, 1e20, np.float32))
'''


def _cli(*args, cwd):
    import os
    import subprocess
    import sys
    env = dict(os.environ, PYTHONPATH=str(pathlib.Path(__file__).parents[1] / "src"))
    return subprocess.run([sys.executable, "-m", "xlaprobe.cli", *args], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=600)


def test_cli_refuses_an_unknown_freedom_in_one_line(tmp_path):
    bad = _cli("check", "lstm", "--accept", "ftz,fmaa", cwd=tmp_path)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip().splitlines() == [
        "xlaprobe: error: unknown freedom 'fmaa' to accept; known freedoms: excess-range, fma, ftz "
        "(or all, none)"]


def test_the_store_keeps_labels_and_accepted_freedoms(tmp_path):
    import sqlite3

    from xlaprobe.store import Store
    args = (np.full(2, 1e30, np.float32), np.full(2, 1e-10, np.float32),
            np.full(2, 1e10, np.float32))
    right = np.full(2, 1e30)
    result = judge(_program(quotient_of_quotient, *args), ["xla", "reference"], [
        Outcome("xla", OutcomeKind.RAN, (right.astype(np.float32),)),
        Outcome("reference", OutcomeKind.RAN, (right,))],
        [Outcome("reference:native", OutcomeKind.RAN, (np.full(2, np.inf),))],
        rechecks=[Outcome("xla[xla_disable_hlo_passes=algsimp]", OutcomeKind.RAN,
                          (np.full(2, np.inf, np.float32),))], accept=frozenset({"ftz"}))
    with Store(tmp_path / "x.db") as store:
        store.record_check(result)
        [stored] = store.findings()
        assert (stored["kind"], stored["freedom"]) == ("freedom", "excess-range")
        assert store.distinct_bugs() == 0  # a legal liberty of XLA's, not a bug
    conn = sqlite3.connect(tmp_path / "x.db")
    assert conn.execute("SELECT accepted FROM checks").fetchall() == [("ftz",)]
    [(data,)] = conn.execute("SELECT data FROM verdicts WHERE kind = 'freedom'").fetchall()
    assert json.loads(data)["freedom"] == "excess-range"


@pytest.mark.slow
def test_cli_accept_none_shows_the_label_in_json_and_store(tmp_path):
    import sqlite3
    case = tmp_path / "flush.py"
    case.write_text(FTZ_CASE)
    db = tmp_path / "x.db"
    run = _cli("check", str(case), "--configs", "xla", "--accept", "none", "--json", "--db",
               str(db), cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    data = json.loads(run.stdout)
    assert (data["configs"][0]["verdict"], data["configs"][0]["freedom"]) == ("freedom", "ftz")
    assert data["freedoms"]["accepted"] == []
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT kind, freedom FROM findings").fetchall() == [("freedom", "ftz")]
    assert conn.execute("SELECT accepted FROM checks").fetchall() == [("",)]
    ok = _cli("check", str(case), "--configs", "xla", "--accept", "ftz", "--db", str(db),
              cwd=tmp_path)
    assert ok.returncode == 0 and "ok (ftz)" in ok.stdout, ok.stdout + ok.stderr


@pytest.mark.parametrize("value, words", [
    (5, "comma-separated string or a list"), (True, "comma-separated string or a list"),
    (b"fma", "comma-separated string or a list"), (["fma", None], "comma-separated string"),
    ("all,fma", "stand alone"), ("none,fma", "stand alone"), ("fmaa", "unknown freedom 'fmaa'"),
])
def test_bad_accept_values_are_one_invalid_argument(value, words):
    from xlaprobe.errors import InvalidArgument
    from xlaprobe.freedoms import parse_accept

    with pytest.raises(InvalidArgument, match=words):
        parse_accept(value)
    assert parse_accept(["freedom:fma", " ftz "]) == {"fma", "ftz"}
