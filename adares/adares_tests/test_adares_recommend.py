"""adares recommend: VPA-shaped YAML and a resize plan, written atomically."""

import csv
import json

from typer.testing import CliRunner

from adares.cli import app
from adares.policies.vpa import VPA
from adares.recommend import recommend, resize_plan, vpa_yaml
from adares.simulator import simulate
from adares.synthetic import generate

runner = CliRunner()


def test_vpa_recommendation_matches_the_recommender():
    tr = generate(3, 2, seed=4)
    rec = recommend(tr, "vpa")
    pol = VPA()
    simulate(tr, pol)
    r = pol.recommendation()
    assert (rec.cpu_target * 1000 == r["target_cpu"]).all()
    assert (rec.mem_lower == r["lower_memory"]).all()
    assert (rec.cpu_lower <= rec.cpu_target).all() and (rec.cpu_target <= rec.cpu_upper).all()
    y = vpa_yaml(rec)
    assert y.count("kind: VerticalPodAutoscaler") == 3
    assert f"cpu: {int(r['target_cpu'][0])}m" in y
    plan = resize_plan(rec)
    assert [p["vm_id"] for p in plan] == list(tr.vm_ids)
    assert all(p["cpu_action"] in ("grow", "shrink", "keep") for p in plan)


def test_cli_writes_yaml_and_plan(tmp_path):
    y, p = tmp_path / "vpa.yaml", tmp_path / "plan.json"
    res = runner.invoke(app, ["recommend", "--trace", "synthetic:vms=4,days=1.5", "--policy",
                              "threshold", "--yaml", str(y), "--plan", str(p), "--format", "json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(p.read_text())
    assert len(rows) == 4 and y.read_text().count("containerRecommendations") == 4
    assert not list(tmp_path.glob(".*.tmp"))
    res = runner.invoke(app, ["recommend", "--trace", "synthetic:vms=2,days=1", "--plan",
                              str(tmp_path / "plan.csv")])
    assert res.exit_code == 0
    assert len(list(csv.DictReader((tmp_path / "plan.csv").open()))) == 2


def test_cli_recommend_bad_input(tmp_path):
    for args in (["--policy", "vpa,static"], ["--format", "xml"],
                 ["--yaml", str(tmp_path / "missing" / "x.yaml")]):
        res = runner.invoke(app, ["recommend", "--trace", "synthetic:vms=2,days=1", *args])
        assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1
