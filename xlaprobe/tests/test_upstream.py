"""``xlaprobe upstream``: a ready-to-file issue whose reproducer runs alone and shows the fault."""

import ast
import json

from tests.test_cli import CASES, xlaprobe

#: Modules a reproducer filed upstream may import: jax, numpy and the standard library.
ALLOWED = {"jax", "numpy", "sys", "os", "subprocess", "base64"}


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
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported <= ALLOWED, imported
    assert "MISMATCH output 0: 3 of 4 elements" in report["repro_output"]
    assert "prints, and exits 1" in text


def test_upstream_of_an_unknown_finding_is_a_one_line_error(tmp_path):
    run = xlaprobe("upstream", "7", "--db", str(tmp_path / "none.db"))
    assert run.returncode == 2 and "no store at" in run.stderr and "Traceback" not in run.stderr
