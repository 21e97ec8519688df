"""The policy registry: a toy policy registered in one place works end to end through the command
line (replay, compare, recommend, the report); knobs are checked against their ranges; the
shared vocabulary (--out, --jobs, --quiet; old spellings hidden); progress lines that do not
wrap; and no function over 80 lines in the package."""

import ast
import json
from pathlib import Path

import numpy as np
import pytest

from adares.policies import PolicySpec, get, register, unregister
from adares.trace import GIB

from .test_adares_usage_errors import _run

SMALL = ["--trace", "synthetic:vms=6,days=1,seed=0"]
STEPS = 288


class Fixed:
    """Toy policy: every VM gets 2 cores and 3 GiB, whatever it observes."""

    name = "toy-fixed"

    def reset(self, info):
        self._c, self._m = np.full(info.n_vms, 2.0), np.full(info.n_vms, 3 * GIB)

    def allocate(self, t):
        return self._c, self._m

    def observe(self, obs):
        pass


@pytest.fixture
def toy():
    register(PolicySpec("toy-fixed", lambda tr, o: Fixed(), "two cores, three GiB"))
    yield
    unregister("toy-fixed")


def test_toy_policy_end_to_end(monkeypatch, capsys, toy, tmp_path):
    hours = 6 * STEPS * 300 / 3600  # 6 VMs x 1 day
    code, out, err = _run(monkeypatch, capsys, "replay", *SMALL, "--policies",
                          "toy-fixed,threshold", "--json", "--out", str(tmp_path / "r.html"))
    assert code == 0, err
    doc = json.loads(out)
    assert doc["policies"]["toy-fixed"]["vcpu_hours"] == pytest.approx(2 * hours)
    assert doc["policies"]["toy-fixed"]["gb_hours"] == pytest.approx(3 * hours)
    assert "toy-fixed" in (tmp_path / "r.html").read_text()
    # compare with no bisection step: one replay at the top of the range (margin 1.0: x2)
    code, out, err = _run(monkeypatch, capsys, "compare", *SMALL, "--policies", "toy-fixed",
                          "--iters", "0", "--range", "0,1", "--json", "-q")
    assert code == 0 and err == ""
    at = json.loads(out)["policies"]["toy-fixed"]
    assert at["vcpu_hours"] == pytest.approx(4 * hours) and at["gb_hours"] == pytest.approx(6 * hours)
    code, out, err = _run(monkeypatch, capsys, "recommend", *SMALL, "--policy", "toy-fixed")
    assert code == 0 and out.count("cpu: 2000m") == 6 * 4  # target, uncapped target, bounds


def test_registered_names_are_the_cli_defaults(toy):
    from adares.policies import compare_names, policy_names

    assert policy_names()[-1] == "toy-fixed" and "toy-fixed" in compare_names()
    assert "clairvoyant" not in compare_names() and get("clairvoyant").bound
    with pytest.raises(ValueError, match="already registered"):
        register(PolicySpec("toy-fixed", lambda tr, o: Fixed(), "again"))


@pytest.mark.parametrize("args, line", [
    (["replay", "--policies", "nope"], "unknown policy 'nope'"),
    (["replay", "--knob", "vpa.safety_margin=2"], "knob vpa.safety_margin=2 is outside [0, 1]"),
    (["replay", "--knob", "vpa.nope=1"], "policy vpa has no knob 'nope'"),
    (["replay", "--knob", "vpa=1"], "--knob 'vpa=1': expected POLICY.KNOB=VALUE"),
    (["compare", "--knob", "threshold.up=x"], "--knob 'threshold.up=x': 'x' is not a number"),
    (["replay", "--out", "a.html", "--report", "b.html"], "--out and --report are one option"),
    (["replay", "--workers", "4"], "--workers sets the CPUs of the Ray instance"),
    (["replay", "--jobs", "-1"], "--jobs must be >= 0"),
    (["compare", "--resize-price", "-1"], "--resize-price '-1': expected P or CPU,MEM, finite"),
    (["replay", "--resize-cap", "-2"], "--resize-cap must be a finite number >= 0"),
    (["compare", "--tune", "3", "--knob", "vpa.safety_margin=0.2"], "--tune searches every knob"),
])
def test_bad_knobs_and_aliases_one_line_exit_2(monkeypatch, capsys, args, line):
    code, out, err = _run(monkeypatch, capsys, *args, "--trace", "alibaba:/nonexistent.csv")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"adares: error: {line}"), err


def test_knob_changes_the_policy(monkeypatch, capsys):
    docs = []
    for extra in ([], ["--knob", "threshold.grow=2.5", "--knob", "threshold.up=0.5"]):
        code, out, _ = _run(monkeypatch, capsys, "replay", *SMALL, "--policies", "threshold",
                            "--json", "-q", *extra)
        docs.append(json.loads(out)["policies"]["threshold"])
    assert docs[1]["vcpu_hours"] > docs[0]["vcpu_hours"]


def test_progress_lines_do_not_wrap_and_have_no_location(monkeypatch, capsys):
    code, out, err = _run(monkeypatch, capsys, "replay", "--trace",
                          "synthetic:vms=6,days=1,seed=0" + "," * 0, "--policies", "static")
    lines = err.splitlines()
    assert code == 0 and lines and all(ln.startswith("[") for ln in lines)
    assert not any("cli.py" in ln or "console.py" in ln for ln in lines)
    assert any("trace synthetic:vms=6,days=1,seed=0: 6 VMs x 288 steps" in ln for ln in lines)


def test_no_function_over_80_lines():
    src = Path(__file__).resolve().parents[1] / "src" / "adares"
    long = []
    for p in src.rglob("*.py"):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > 80:
                    long.append(f"{p.name}:{node.name} {n}")
    assert not long, long


def test_every_command_has_seed_and_quiet_of_one_declaration():
    # issue 33's vocabulary: evaluate had neither
    import typer

    from adares.cli import QUIET_HELP, SEED_HELP, app

    group = typer.main.get_command(app)
    for name in ("replay", "compare", "recommend", "evaluate"):
        params = {p.name: p for p in group.commands[name].params}
        assert params["seed"].opts == ["--seed"] and params["seed"].help == SEED_HELP, name
        assert params["seed"].default == 0, name
        assert sorted(params["quiet"].opts) == ["--quiet", "-q"] and params["quiet"].help == QUIET_HELP, name
