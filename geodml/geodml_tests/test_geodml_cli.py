"""The command line: JSON shape of compare, plan, and one-line errors with exit 2 on bad input."""

import json
import os
import subprocess
import sys

import pytest

SMALL = ["--data", "sklearn:breast_cancer", "--rounds", "3", "--local-steps", "2"]


def _subprocess(*args, timeout=120):
    return subprocess.run([sys.executable, "-c", "from geodml.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=timeout)


def test_compare_json_shape():
    r = _subprocess("compare", *SMALL, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert set(out["algorithms"]) == {"centralize", "lbfgs", "fedavg", "fedprox", "diloco", "oneshot", "fadl"}
    for a, v in out["algorithms"].items():
        for key in ("bytes", "rounds", "sim_seconds", "dollars", "test_accuracy", "test_logloss"):
            assert key in v, (a, key)
        assert v["predicted"]["bytes"] == v["bytes"]
        assert 0.85 < v["test_accuracy"] <= 1.0
    assert set(out["crossover"]) == {"lbfgs", "fedavg", "fedprox", "diloco", "oneshot", "fadl"}
    assert [d["name"] for d in out["dcs"]] == ["us-east", "us-west", "eu-west", "ap-southeast"]


def test_compare_with_two_sovereign_dcs_refuses_centralizing_and_moves_no_raw_rows(geodml):
    r = geodml("compare", *SMALL, "--sovereign", "eu-west,us-east", "--partition", "dirichlet:0.5", "--dcs", "3",
                "--algos", "centralize,fedavg,lbfgs", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert "refused" in out["algorithms"]["centralize"]
    for a in ("fedavg", "lbfgs"):
        assert out["algorithms"][a]["raw_bytes_by_source"] == {"us-east": 0, "us-west": 0, "eu-west": 0}


def test_compare_table_output_and_report(geodml, tmp_path):
    rep = tmp_path / "r.html"
    r = geodml("compare", *SMALL, "--algos", "oneshot,centralize", "--report", str(rep))
    assert r.returncode == 0, r.stderr
    assert "oneshot" in r.stdout and "crossover" in r.stdout
    text = rep.read_text()
    assert text.count("data:image/png;base64,") == 3 and "oneshot" in text
    assert [p.name for p in tmp_path.iterdir()] == ["r.html"]  # no temp file left behind
    umask = os.umask(0)
    os.umask(umask)
    assert rep.stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's 0600


def test_scaling_curves_are_linear_for_centralize_and_flat_for_model_exchange(geodml):
    out = json.loads(geodml("compare", *SMALL, "--algos", "centralize,fedavg", "--json").stdout)
    sc = out["scaling"]
    c, f = sc["bytes"]["centralize"], sc["bytes"]["fedavg"]
    assert len(set(f)) == 1  # model exchange does not grow with rows
    assert c[-1] / c[0] == pytest.approx(sc["rows"][-1] / sc["rows"][0], rel=0.05)


def test_plan_json_recommends_and_gives_crossover(geodml):
    r = geodml("plan", "--rows", "10000000", "--features", "65536", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["recommend"] in out["predictions"]
    assert out["crossover"]["fedavg"]["rows_bytes"] > 0
    r2 = geodml("plan", "--rows", "10000000", "--sovereign", "eu-west,us-east", "--objective", "dollars")
    assert r2.returncode == 0 and "refused" in r2.stdout


@pytest.mark.parametrize("args,needle", [
    (["compare", "--data", "sklearn:breast_cancer", "--algos", "fedavg,sgd"], "unknown algorithm"),
    (["compare", "--data", "sklearn:nope"], "unknown scikit-learn dataset"),
    (["compare", "--data", "sklearn:breast_cancer", "--partition", "dirichlet:x"], "malformed partition"),
    (["compare", "--data", "sklearn:breast_cancer", "--partition", "dirichlet:-1"], "dirichlet:ALPHA with ALPHA > 0"),
    (["compare", "--data", "sklearn:iris", "--partition", "unequal:1,1,1,10000"], "empty"),
    (["compare", "--data", "sklearn:breast_cancer", "--dcs", "9"], "--dcs"),
    (["compare", "--data", "sklearn:breast_cancer", "--sovereign", "mars"], "sovereign"),
    (["compare", "--data", "sklearn:breast_cancer", "--wan", "/no/such.yaml"], "WAN file not found"),
    (["compare", "--data", "sklearn:breast_cancer", "--rounds", "abc"], "rounds"),
    (["compare", "--data", "sklearn:breast_cancer", "--rounds", "999999999999999999999"], "--rounds must be between 1 and 100,000"),
    (["compare", "--no-such-option"], "no-such-option"),
    (["plan", "--objective", "speed"], "unknown objective"),
    (["compare", "--data", "sklearn:breast_cancer", "--compress", "topk:7"], "compress"),
    (["compare", "--data", "sklearn:breast_cancer", "--inner", "lion"], "inner optimizer"),
    (["compare", "--data", "sklearn:breast_cancer", "--algos", "oneshot", "--report", "/no/such/dir/r.html"], "report folder"),
    (["plan", "--partition", "dirichlet:0.3"], "partition"),
    (["frobnicate"], "frobnicate"),
    (["compare", "--data", "sklearn:breast_cancer", "--seed", "-1"], "--seed"),
    (["plan", "--seed", "-1"], "--seed"),
    (["compare", "--data", "sklearn:breast_cancer", "--batch-size", "-1"], "--batch-size"),
    (["compare", "--data", "sklearn:breast_cancer", "--algos", " , "], "--algos ' , ' has an empty item"),
    (["plan", "--algos", ""], "--algos is empty"),
    (["plan", "--lbfgs-rounds", "0"], "--lbfgs-rounds"),
    (["plan", "--local-passes", "-1"], "--local-passes"),
    (["plan", "--features", "4", "--nnz-per-row", "5"], "--nnz-per-row"),
    (["plan", "--partition", "unequal:1,1,1,1e309"], "positive finite"),
    (["compare", "--data", "sklearn:breast_cancer", "--lr", "inf"], "--lr"),
    (["compare", "--data", "sklearn:breast_cancer", "--ray", "--flower"], "choose one"),
    (["compare", "--data", "sklearn:breast_cancer", "--flower", "--flower-timeout", "0"], "--flower-timeout must be a positive"),
    (["compare", "--data", "sklearn:breast_cancer", "--flower-timeout", "nan"], "--flower-timeout must be a finite number, got nan"),
    # one callback serves every float option: inf, nan and an overflowing 1e309 (float() reads it as inf)
    (["compare", "--data", "sklearn:breast_cancer", "--algos", "oneshot", "--l2", "inf"], "--l2 must be a finite number, got inf"),
    (["plan", "--l2", "inf"], "--l2 must be a finite number, got inf"),
    (["plan", "--lr", "nan"], "--lr must be a finite number, got nan"),
    (["plan", "--nnz-per-row", "1e309"], "--nnz-per-row must be a finite number, got inf"),
    (["compare", "--data", "sklearn:breast_cancer", "--weight-decay", "-inf"], "--weight-decay must be a finite number, got -inf"),
    # one parser serves every comma list: an empty item or a repeated name is refused, not skipped or merged
    (["compare", "--data", "sklearn:breast_cancer", "--algos", "oneshot,oneshot"], "--algos 'oneshot,oneshot' names oneshot twice"),
    (["compare", "--data", "sklearn:breast_cancer", "--algos", "oneshot,,fedavg"], "--algos 'oneshot,,fedavg' has an empty item"),
    (["plan", "--algos", "oneshot,"], "--algos 'oneshot,' has an empty item"),
    (["compare", "--data", "sklearn:breast_cancer", "--sovereign", "us-east,us-east"], "--sovereign 'us-east,us-east' names us-east twice"),
    (["plan", "--sovereign", "us-east,,eu-west"], "--sovereign 'us-east,,eu-west' has an empty item"),
])
def test_bad_input_one_line_exit_2(geodml, args, needle):
    r = geodml(*args)
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert needle.lower() in lines[0].lower()
    assert "Traceback" not in r.stderr


def test_flower_not_installed_is_one_line_exit_2(geodml, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "flwr" else real(name, *a))
    r = geodml("compare", "--data", "sklearn:breast_cancer", "--backend", "flower")
    assert r.returncode == 2 and r.stderr.strip() == "geodml: error: --backend flower needs Flower: pip install 'geodml[flower]'", r.stderr


def test_flower_without_ray_is_one_line_exit_2_before_any_work(geodml, monkeypatch):
    # Flower's simulation engine runs on Ray: without it the engine failed after the data was
    # loaded and Flower's server thread waited forever.
    import importlib.util

    real = importlib.util.find_spec
    fake = {"flwr": object(), "ray": None}
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: fake[name] if name in fake else real(name, *a))
    r = geodml("compare", "--data", "sklearn:breast_cancer", "--flower")  # the old spelling, a hidden alias
    assert r.returncode == 2 and r.stderr.strip() == (
        "geodml: error: --backend flower needs Ray for Flower's simulation engine: pip install "
        "'geodml[flower]'"), r.stderr


def test_malformed_wan_file_one_line_exit_2(geodml, tmp_path):
    p = tmp_path / "wan.yaml"
    p.write_text("regions:\n  - name: a\nlinks: []\n")
    r = geodml("compare", "--data", "sklearn:breast_cancer", "--wan", str(p))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "malformed WAN file" in r.stderr


@pytest.mark.slow
def test_default_compare_accuracy_claims(geodml):
    """The embedded default (ctr, 200k rows, 4 regions): exact-objective methods match
    centralized accuracy within 0.5 points; one-shot averaging moves < 1/6 of centralizing's
    Parquet bytes (0.147), every iterative algorithm more than centralizing (the README's table)."""
    r = geodml("compare", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    algos = out["algorithms"]
    central = algos["centralize"]["test_accuracy"]
    for a in ("lbfgs", "fadl", "diloco", "oneshot"):
        assert algos[a]["test_accuracy"] >= central - 0.005, (a, algos[a]["test_accuracy"], central)
    assert out["bytes_ratio_vs_centralize"]["oneshot"] < 1 / 6
    for a in ("lbfgs", "fadl", "diloco", "fedavg", "fedprox"):
        assert out["bytes_ratio_vs_centralize"][a] > 1, a
    for a, v in algos.items():
        assert v["predicted"]["bytes"] == v["bytes"]


@pytest.mark.slow
def test_ray_execution_matches_the_simulation_exactly(geodml):
    """Each DC as a Ray actor: same accuracy, bytes, rounds and simulated time as in-process."""
    pytest.importorskip("ray")
    args = ("compare", "--data", "ctr:rows=8000,features=1024,fields=10", "--rounds", "3", "--local-steps", "5",
            "--algos", "lbfgs,fedavg,diloco,oneshot,fadl", "--compress", "topk:0.1", "--inner", "adam", "--json")
    local = json.loads(geodml(*args).stdout)
    r = geodml(*args, "--ray")
    assert r.returncode == 0, r.stderr
    remote = json.loads(r.stdout)
    for a, v in local["algorithms"].items():
        w = remote["algorithms"][a]
        for key in ("bytes", "rounds", "sim_seconds", "dollars", "test_accuracy", "test_logloss", "intra_bytes"):
            assert w[key] == v[key], (a, key)
        m = w["measured"]
        assert 0 < m["payload_bytes"] < m["serialized_bytes"] and m["wall_seconds"] > 0


def test_plan_from_a_dataset_matches_compare_bytes_for_fixed_round_algorithms(geodml):
    """plan --data sizes the real partition; for algorithms whose rounds are fixed its byte
    predictions equal what compare then moves."""
    common = ("--data", "sklearn:breast_cancer", "--partition", "dirichlet:0.5", "--dcs", "3", "--rounds", "4")
    p = json.loads(geodml("plan", *common, "--algos", "centralize,fedavg,diloco,oneshot", "--json").stdout)
    c = json.loads(geodml("compare", *common, "--local-steps", "2", "--algos", "centralize,fedavg,diloco,oneshot", "--json").stdout)
    for a in ("centralize", "fedavg", "diloco", "oneshot"):
        assert p["predictions"][a]["bytes"] == c["algorithms"][a]["bytes"], a


def test_ctrl_c_during_compare_exits_130_with_one_line_and_no_report(geodml, monkeypatch, tmp_path):
    # KeyboardInterrupt is what Python raises on SIGINT; raising it from inside the run stands in
    # for a Ctrl-C that lands mid-training (typer turns it into a return value of 130).
    import importlib

    compare_module = importlib.import_module("geodml.compare")

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(compare_module, "partition", interrupted)
    report = tmp_path / "r.html"
    r = geodml("compare", "--data", "sklearn:breast_cancer", "--algos", "oneshot", "--report", str(report))
    assert r.returncode == 130, (r.returncode, r.stderr)
    assert [ln for ln in r.stderr.splitlines() if not ln.startswith("geodml: loaded")] == ["geodml: interrupted"]
    assert r.stdout == "" and list(tmp_path.iterdir()) == []


def test_fadl_under_strong_skew_moves_and_reports_its_stalled_iterations(geodml, tmp_path):
    # breast_cancer, dirichlet:0.3 over 4 DCs, seed 0: one DC holds only negatives, one holds 2
    # rows. Plain FADL's averaged local minimizers overshot every step of its line search, so the
    # model stayed at zero (test log loss ln 2 = 0.6931, accuracy 0.40). With the adaptive
    # proximal term one iteration stalls, then FADL reaches centralized accuracy; the stalled
    # iteration (3 rounds that moved nothing) is reported, in the table and the HTML report.
    report = tmp_path / "r.html"
    r = geodml("compare", "--data", "sklearn:breast_cancer", "--partition", "dirichlet:0.3", "--algos", "centralize,fadl",
               "--report", str(report))
    assert r.returncode == 0, r.stderr
    acc = {}
    for ln in r.stdout.splitlines():
        cells = [c.strip() for c in ln.split("│")]
        if len(cells) > 8 and cells[1] in ("centralize", "fadl"):
            acc[cells[1]] = float(cells[7])
    assert acc["fadl"] >= acc["centralize"] - 0.005, acc
    assert "fadl warning: line search found no decrease in 1 of 6 iterations" in " ".join(r.stdout.split())
    assert "warning: line search found no decrease" in report.read_text()


def test_fadl_on_iid_data_has_no_warning(geodml):
    out = json.loads(geodml("compare", "--data", "sklearn:breast_cancer", "--algos", "fadl", "--json").stdout)
    assert "warning" not in out["algorithms"]["fadl"]


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc, a folder no one may create files in")
def test_unwritable_report_folder_fails_before_training(geodml):
    r = geodml("compare", "--data", "sklearn:breast_cancer", "--algos", "oneshot", "--report", "/proc/geodml-report.html")
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [r.stderr.strip()]
    assert "cannot write report" in r.stderr and "geodml: running" not in r.stderr


@pytest.mark.parametrize("kind, keys", [("libsvm", ""), ("csv", ",label=y,region=r"), ("parquet", ",label=y,region=r")])
def test_a_folder_given_as_data_file_is_named_a_folder(geodml, tmp_path, kind, keys):
    # csv: and parquet: said "file not found" for a folder that exists
    r = geodml("compare", "--data", f"{kind}:{tmp_path}{keys}", "--algos", "oneshot")
    assert r.returncode == 2 and r.stderr.strip() == f"geodml: error: {kind} file is a folder: {str(tmp_path)!r}"


def test_one_data_center_has_no_crossover_and_no_traceback(geodml):
    # one DC: nothing crosses the WAN, the planner's crossover rounds are None (was a TypeError)
    r = geodml("compare", "--data", "sklearn:iris", "--algos", "oneshot", "--dcs", "1")
    assert r.returncode == 0, r.stderr
    assert "crossover oneshot: none in bytes" in r.stdout


def test_plan_huge_unequal_weights(geodml):
    out = json.loads(geodml("plan", "--rows", "1000", "--partition", "unequal:1e308,1e308,1e308,1e308", "--json").stdout)
    assert [z["n"] for z in out["sizes"]["dcs"]] == [250] * 4


def test_memory_error_is_one_line_exit_2(geodml, monkeypatch):
    import importlib

    compare_module = importlib.import_module("geodml.compare")

    def too_big(*a, **k):
        raise MemoryError("Unable to allocate 146. TiB for an array")

    monkeypatch.setattr(compare_module, "load_dataset", too_big)
    r = geodml("compare", "--algos", "oneshot")
    assert r.returncode == 2 and r.stderr.strip() == "geodml: error: not enough memory for this input (Unable to allocate 146. TiB for an array)"


def test_refused_centralize_table_says_what_ratio_is_against(geodml):
    r = geodml("compare", "--data", "sklearn:breast_cancer", "--sovereign", "eu-west,us-east", "--algos", "centralize,oneshot")
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    # the measured Parquet bytes of the three DCs that would ship to the hub (ap-southeast)
    j = json.loads(geodml("compare", "--data", "sklearn:breast_cancer", "--algos", "oneshot", "--json").stdout)
    moved = sum(dc["raw_bytes"] for dc in j["dcs"] if dc["name"] != "ap-southeast")
    assert j["centralize_bytes_if_allowed"] == moved
    from geodml.cli import _fmt_bytes
    assert f"ratio: WAN bytes over the {_fmt_bytes(moved)} centralizing would move if sovereignty allowed it" in text


def test_progress_prints_one_line_per_round_when_stderr_is_not_a_terminal(geodml):
    """Logs get one line per communication round, whose WAN bytes add up to the JSON totals."""
    r = geodml("compare", *SMALL, "--algos", "centralize,fedavg", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)["algorithms"]
    lines = [ln for ln in r.stderr.splitlines() if " round " in ln]
    fed = [ln for ln in lines if ln.startswith("geodml: fedavg round ")]
    assert [ln.split(":")[1].split()[-1] for ln in fed] == ["1", "2", "3"]
    assert fed[-1].split("WAN ")[1].split(" B")[0] == str(out["fedavg"]["bytes"])
    cen = [ln for ln in lines if ln.startswith("geodml: centralize round ")]
    assert len(cen) == 1 and f"WAN {out['centralize']['bytes']} B" in cen[0]


@pytest.mark.parametrize("args", [("plan",), ("plan", "--json")])
def test_a_closed_stdout_pipe_ends_quietly_with_exit_0(args):
    # `geodml plan | head -1`: the reader is gone before geodml writes (rich's table, print's JSON);
    # it exited 1 (click's and rich's EPIPE handlers); cat and grep end with 0 and say nothing
    p = subprocess.Popen([sys.executable, "-c", "from geodml.cli import main; main()", *args],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p.stdout.close()
    err = p.stderr.read()
    assert p.wait(timeout=120) == 0 and err == ""


def test_plan_says_what_it_loaded_unless_quiet(geodml):
    # plan had no --quiet; with --data it now says what it loaded, as compare does
    loud = geodml("plan", "--data", "sklearn:breast_cancer", "--json")
    assert loud.returncode == 0, loud.stderr
    n = sum(dc["n"] for dc in json.loads(loud.stdout)["sizes"]["dcs"])
    assert loud.stderr == f"geodml: loaded sklearn:breast_cancer: {n} training rows over 4 data centers (iid)\n"
    for flag in ("--quiet", "-q"):
        quiet = geodml("plan", "--data", "sklearn:breast_cancer", "--json", flag)
        assert quiet.returncode == 0 and quiet.stderr == "" and quiet.stdout == loud.stdout
