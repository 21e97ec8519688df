"""``xlaprobe upstream``: a ready-to-file issue whose reproducer runs alone and shows the fault."""

import ast
import dataclasses
import json
import pathlib

import pytest

from tests.test_cli import CASES, xlaprobe
from xlaprobe import upstream
from xlaprobe.errors import InvalidArgument

DRAFTS = pathlib.Path(__file__).resolve().parent.parent / "docs" / "upstream"

#: Modules a reproducer filed upstream may import: jax, numpy and the standard library.
ALLOWED = {"jax", "numpy", "sys", "os", "subprocess", "base64"}


def _imports(source: str) -> set[str]:
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    return imported


@pytest.mark.slow  # tests/test_mcp.py drafts a report through the same command in the default run
def test_upstream_report_of_a_shared_case_reproduces_alone(tmp_path):
    db = tmp_path / "x.db"
    checked = xlaprobe("check", str(CASES / "cbrt_subnormal.py"), "--configs", "xla,reference",
                       "--json", "--db", str(db))
    assert checked.returncode == 1, checked.stderr
    (finding,) = json.loads(checked.stdout)["findings"]
    out = tmp_path / "issue.md"
    run = xlaprobe("upstream", str(finding["id"]), "--db", str(db), "--out", str(out), "--json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["repository"] == "openxla/xla" and report["repro_exit"] == 1
    assert report["title"] == "[XLA:CPU] cbrt of float32 subnormal inputs returns wrong values"
    assert "cbrt subnormal" in report["search_terms"]
    text = out.read_text()
    for heading in ("## Summary", "## Reproducer (imports only jax and numpy)", "## Environment",
                    "## Release window", "## Where in the compiler", "## Duplicate check",
                    "## Expected values and how they were obtained"):
        assert heading in text
    assert "the right value is **1.80466606e-13**" in text and "jaxlib: " in text
    # The reproducer as filed imports only jax and numpy; upstream ran it alone (a fresh process
    # in an empty directory) and it showed the fault.
    source = text.split("```python\n", 1)[1].split("\n```\n", 1)[0]
    assert _imports(source) <= ALLOWED
    assert "MISMATCH output 0: 3 of 4 elements" in report["repro_output"]
    assert "prints, and exits 1" in text


def test_upstream_of_an_unknown_finding_is_a_one_line_error(tmp_path):
    run = xlaprobe("upstream", "7", "--db", str(tmp_path / "none.db"))
    assert run.returncode == 2 and "no store at" in run.stderr and "Traceback" not in run.stderr


@pytest.mark.parametrize("where", ["no/such/issue.md", "."])
def test_upstream_out_in_a_missing_folder_or_a_directory_is_refused_first(tmp_path, where):
    # Refused before the store is read or the reproducer run (this one has no store at all);
    # it was an internal error (exit 3) on a FileNotFoundError / IsADirectoryError.
    out = tmp_path / where
    run = xlaprobe("upstream", "7", "--db", str(tmp_path / "none.db"), "--out", str(out))
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert ("does not exist" if where != "." else "is a directory") in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and not (tmp_path / "no").exists()


@pytest.mark.parametrize("draft", sorted(p.name for p in DRAFTS.glob("*.md")))
def test_committed_drafts_are_complete_and_their_repros_showed_the_fault(draft):
    text = (DRAFTS / draft).read_text()
    for heading in ("## Summary", "## Reproducer (imports only jax and numpy)", "## Environment",
                    "## Release window", "## Where in the compiler", "## Duplicate check",
                    "## Upstream thread"):
        assert heading in text, heading
    assert "prints, and exits 1:" in text  # the reproducer was run when drafted, and failed
    source = text.split("```python\n", 1)[1].split("\n```\n", 1)[0]
    assert _imports(source) <= ALLOWED


def test_a_nan_or_inf_mismatch_title_says_which_way_it_went():
    # tests/fuzz_cases/log_rsqrt_negative_zero.py: XLA gives +inf where the right value is NaN;
    # "returns NaN where the result is finite" said the reverse.
    from types import SimpleNamespace

    from xlaprobe.oracle import VerdictKind
    from xlaprobe.upstream_text import behaviour

    def evidence(kind, actual, expected):
        verdict = SimpleNamespace(kind=VerdictKind(kind), worst=0, actual=actual,
                                  expected=expected)
        return SimpleNamespace(finding=SimpleNamespace(kind=kind), verdicts=(verdict,))

    nan, inf = float("nan"), float("inf")
    assert behaviour(evidence("nan-mismatch", inf, nan)) == "returns Inf where the result is NaN"
    assert behaviour(evidence("nan-mismatch", nan, 2.0)) == (
        "returns NaN where the result is finite")
    assert behaviour(evidence("inf-mismatch", -inf, 3.0)) == (
        "returns -Inf where the result is finite")
    assert behaviour(evidence("inf-mismatch", 1.0, inf)) == (
        "returns a finite value where the result is Inf")
    assert behaviour(evidence("mismatch", 1.0, 2.0)) == "returns wrong values"


def test_a_nan_mismatch_draft_says_its_relative_error_is_over_finite_elements():
    from types import SimpleNamespace

    import numpy as np

    from xlaprobe.oracle import judge_leaf
    from xlaprobe.upstream_text import _worst

    # Element 0 is NaN where float64 gives 1; element 2 is off by 20%; element 1 is right.
    verdict = dataclasses.replace(judge_leaf(np.float32([np.nan, 1.0, 2.0]),
                                             np.float64([1.0, 1.0, 2.5])), output="out")
    assert verdict.kind.value == "nan-mismatch" and abs(verdict.max_rel - 0.2) < 1e-6
    line = _worst(SimpleNamespace(verdicts=(verdict,)))
    assert "element 0 is **nan**, the right value is **1**" in line
    assert "66.7% of its elements are off" in line
    assert "max relative error 0.2 where both values are finite" in line
    exact = dataclasses.replace(judge_leaf(np.float32([np.nan, 1.0]), np.float64([1.0, 1.0])),
                                output="out")
    assert "where both values are finite they agree" in _worst(SimpleNamespace(verdicts=(exact,)))


def test_a_partitioned_repro_can_judge_by_the_checks_allowance():
    from xlaprobe.configs.reference import evaluate
    from xlaprobe.localization.spmd_repro import emit_spmd_repro
    from xlaprobe.sources.sharded import spmd_program

    program = spmd_program("matmul_tanh_sum")
    reference = evaluate(program.jaxpr, program.inputs)
    text = emit_spmd_repro(program, "spmd[mesh=2x2]", reference, allowance=True)
    assert "load_allowance(__file__)" in text and "MESH_SHAPE = (2, 2)" in text
    assert "load_allowance" not in emit_spmd_repro(program, "spmd[mesh=2x2]", reference)
    compile(text, "repro.py", "exec")


@pytest.mark.slow  # a 4-device partitioned check (about 45 s on a loaded machine)
def test_upstream_of_a_partitioned_finding_keeps_its_mesh_and_its_allowance(pool, tmp_path):
    """Without a reduction, the draft's reproducer of an spmd finding presents the mesh's devices
    and partitions as the finding did (not a one-device jit), and the artifact's repro judges by
    the check's allowance.npz."""
    from xlaprobe.finding_artifacts import save_finding_artifacts
    from xlaprobe.store import Store
    from tests.test_spmd import _dropped_all_reduce

    program, spec, result = _dropped_all_reduce(pool)
    artifacts = save_finding_artifacts(result, tmp_path / "artifacts", [spec])
    with Store(tmp_path / "x.db") as store:
        store.record_check(result, artifacts)
        (finding,) = store.stored_findings()
    text = upstream.reproducer(upstream.gather(tmp_path / "x.db", finding.id))
    assert "--xla_force_host_platform_device_count=4" in text and "MESH_SHAPE = (2, 2)" in text
    assert "in_shardings=ins" in text
    repro = (pathlib.Path(artifacts[spec]) / "repro.py").read_text()
    assert "MESH_SHAPE = (2, 2)" in repro and "load_allowance(__file__)" in repro
    compile(repro, "repro.py", "exec")


@pytest.mark.parametrize("spec", ["mutant:swap-subtract-fused",
                                  "spmd[mesh=2x2,mutant=all-reduce-twice]"])
def test_a_planted_fault_is_no_upstream_report(spec):
    # A mutant's finding was drafted as an openxla/xla issue whose repro needs xlaprobe.
    with pytest.raises(InvalidArgument, match="a fault xlaprobe planted .* nothing to file"):
        upstream._refuse_planted(spec, 3)
    upstream._refuse_planted("spmd[mesh=2x2]", 3)  # a real partitioned finding is drafted
    upstream._refuse_planted("xla:O0", 3)


def test_a_title_names_the_failing_operations_dtypes_not_the_programs():
    # A draft titled "conv_general_dilated (int16/bfloat16) ..." for a bfloat16-only conv: the
    # dtypes were the program's inputs'.
    from types import SimpleNamespace

    import jax
    import jax.numpy as jnp
    import numpy as np

    from xlaprobe.program import Program, Provenance
    from xlaprobe.upstream_text import search_terms, title

    def program(counts, image, kernel):
        out = jax.lax.conv_general_dilated(image, kernel, (1, 1), "SAME")
        return out, counts * 2

    args = (np.arange(4, dtype=np.int16), np.ones((1, 2, 5, 5), jnp.bfloat16),
            np.ones((3, 2, 3, 3), jnp.bfloat16))
    p = Program.from_function(program, args, Provenance("user", "t"))
    (index,) = [k for k, e in enumerate(p.jaxpr.jaxpr.eqns)
                if e.primitive.name == "conv_general_dilated"]

    def evidence(localization):
        return SimpleNamespace(program=p, localization=localization, error="", verdicts=(),
                               finding=SimpleNamespace(kind="mismatch", config="xla"))

    localized = evidence({"equation": {"index": index, "primitive": "conv_general_dilated"}})
    assert title(localized) == "[XLA:CPU] conv_general_dilated (bfloat16) returns wrong values"
    assert "conv_general_dilated bfloat16" in search_terms(localized)
    # Localized by the instruction tier only: its equation's dtypes too.
    by_op = evidence({"op": {"equation": index, "primitive": "conv_general_dilated"}})
    assert title(by_op) == title(localized)
    # Nothing localized: the last non-layout equation (the int16 multiply) names the title.
    assert title(evidence(None)) == "[XLA:CPU] mul (int16) returns wrong values"
