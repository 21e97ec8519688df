"""A finding's repro.py judges like the check that flagged it (``allowance.npz``): it exits 1 on
every finding of a campaign and flags the leaves the check flagged."""

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from xlaprobe.allowance import REPRO_JUDGE
from xlaprobe.campaign import Campaign
from xlaprobe.program import Program, Provenance
from xlaprobe.sources.generator import generate
from xlaprobe.store import Store


def _source(seed: int) -> Program:
    # Seed 183 of the generator: a scatter-mul whose float32 result 2.008e-38 comes out 0 under
    # xla (the one-minute campaign; its repro.py used to exit 0 on it); then a program
    # with a fused subtract for the planted mutant.
    if seed == 0:
        return generate(183)
    x, y = (np.random.default_rng(seed).standard_normal(16).astype(np.float32) for _ in range(2))
    return Program.from_function(lambda a, b: (a - b) * 2.0 + 1.0, (x, y),
                                 Provenance("fuzz", f"fuzz:{seed}", seed))


def _flagged_leaves(stdout: str) -> set[str]:
    return set(re.findall(r"^MISMATCH (\S+?):", stdout, re.M))


def test_every_finding_repro_exits_1_on_the_leaves_its_check_flagged(tmp_path):
    db = tmp_path / "fuzz.db"
    campaign = Campaign(db, ["xla", "reference", "mutant:swap-subtract-fused"], seed=0, jobs=1,
                        source=_source)
    try:
        campaign.run(300.0, max_programs=2)
    finally:
        campaign.close()
    with Store(db) as store:
        artifacts = {Path(r["artifact"]) for r in store.findings() if r["artifact"]}
    # The planted fault's at least (and, while the oracle flags it, the scatter-mul's).
    assert artifacts
    for artifact in sorted(artifacts):
        meta = json.loads((artifact / "metadata.json").read_text())
        flagged = ast.literal_eval(re.search(r" on (\[.*?\]); fingerprint", meta["note"]).group(1))
        assert (artifact / "allowance.npz").is_file()
        run = subprocess.run([sys.executable, str(artifact / "repro.py")], capture_output=True,
                             text=True, timeout=300, cwd=artifact)
        assert run.returncode == 1, (artifact.name, run.stdout, run.stderr)
        assert _flagged_leaves(run.stdout) == set(flagged), (artifact.name, run.stdout)


def test_a_wide_allowance_names_the_honest_run_that_set_it():
    from xlaprobe.allowance import wide_allowances
    from xlaprobe.checking import judge
    from xlaprobe.outcome import Outcome, OutcomeKind

    ref = np.array([1.0, 2.0, 3.0, 4.0])
    program = Program.from_function(lambda x: x * 1.0, (ref.astype(np.float32),),
                                    Provenance("user", "wide"))

    def ran(config, delta):
        return Outcome(config, OutcomeKind.RAN, outputs=((ref + delta).astype(np.float32),))
    # The native run is off by 0.3 at element 2, a Monte Carlo sample by -0.1: 0.3 is over
    # 1000 epsilons of the leaf's scale 4, so every element may be off by 4 x 0.3 = 1.2.
    budget = [ran("reference:native", [0, 0, 0.3, 0]), ran("reference:mca[seed=1]", [0, 0, -0.1, 0])]
    result = judge(program, ["xla", "reference"],
                   [ran("xla", [0, 0, 0.5, 0]), Outcome("reference", OutcomeKind.RAN, outputs=(ref,))],
                   budget)
    assert not result.findings
    (wide,) = wide_allowances(result)
    assert (wide.config, wide.element, wide.set_by, wide.leaf_wide) == ("xla", 2, "reference:native", True)
    np.testing.assert_allclose([wide.allowed_rel, wide.honest_rel, wide.spread_rel, wide.leaf_spread_rel],
                               [(3e-5 + 4 * 0.3) / 3, 0.1, 0.4 / 3, 0.1], rtol=1e-6)
    assert "is set by reference:native, off 0.1 there" in wide.text() and wide.magnitude == 0.75
    # A well-conditioned leaf of the same program has no wide allowance.
    calm = judge(program, ["xla", "reference"],
                 [ran("xla", 0.0), Outcome("reference", OutcomeKind.RAN, outputs=(ref,))],
                 [ran("reference:native", 0.0)])
    assert wide_allowances(calm) == []


def test_an_eager_findings_lax_repro_judges_by_the_allowance_too(tmp_path, pool):
    # cbrt of subnormals is wrong op by op too: the eager finding's repro.py is lax code run
    # under disable_jit, and reads the allowance.npz beside it.
    from xlaprobe.finding_artifacts import save_finding_artifacts
    from xlaprobe.checking import check_program
    from xlaprobe.sources.user import load_case

    case = load_case(str(Path(__file__).parent / "cases" / "cbrt_subnormal.py"))
    result = check_program(case.program, ["eager", "reference"], pool)
    saved = save_finding_artifacts(result, tmp_path)
    repro = Path(saved["eager"]) / "repro.py"
    assert "load_allowance(__file__)" in repro.read_text()
    run = subprocess.run([sys.executable, str(repro)], capture_output=True, text=True,
                         timeout=300, cwd=repro.parent)
    assert run.returncode == 1, (run.stdout, run.stderr)
    assert "MISMATCH output 0: 3 of 4 elements" in run.stdout


def test_a_corrupt_allowance_exits_2_not_1(tmp_path, capsys):
    # A traceback exits 1, which a reader (and `xlaprobe upstream`) takes for "the fault shows".
    scope = {"np": np}
    exec(REPRO_JUDGE, scope)  # the template as pasted into repro.py
    script = tmp_path / "repro.py"
    assert scope["load_allowance"](str(script)) == {}
    np.savez(tmp_path / "allowance.npz", allowed_0=np.ones(2))
    assert list(scope["load_allowance"](str(script))) == ["allowed_0"]
    (tmp_path / "allowance.npz").write_text("not a zip")
    with pytest.raises(SystemExit) as exited:
        scope["load_allowance"](str(script))
    assert exited.value.code == 2
    assert "allowance.npz is not a readable .npz archive" in capsys.readouterr().err
