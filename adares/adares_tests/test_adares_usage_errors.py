"""Bad input through the console script's entry (adares.cli.main, as the installed `adares` runs
it): usage errors (a value of the wrong type, an unknown option or command, a missing argument)
are one line and exit 2 like every other bad input; folders given as input files say so; a
malformed --cluster is refused before the trace is loaded."""

import pytest

from adares.cli import main


def _run(monkeypatch, capsys, *args):
    monkeypatch.setattr("sys.argv", ["adares", *args])
    with pytest.raises(SystemExit) as exc:
        main()
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


@pytest.mark.parametrize("args, line", [
    (["replay", "--seed", "x"], "adares: error: Invalid value for '--seed': "),
    (["compare", "--iters", "1.5"], "adares: error: Invalid value for '--iters': "),
    (["replay", "--xyzzy"], "adares: error: No such option: --xyzzy (see adares replay --help)"),
    (["nope"], "adares: error: No such command 'nope'. (see adares --help)"),
    (["evaluate"], "adares: error: Missing argument 'log'. (see adares evaluate --help)"),
    (["replay", "--json", "extra"], "adares: error: Got unexpected extra argument(s) (extra)"),
    (["compare", "--trace", "population:vms=5,,days=1"],
     "adares: error: trace spec 'population:vms=5,,days=1': an empty item"),
    (["replay", "--trace", "synthetic:vms=5,"], "adares: error: trace spec 'synthetic:vms=5,': "
                                                "an empty item"),
    (["replay", "--trace", "population:vms=5,days=1,lifetimes=weibull"],
     "adares: error: trace spec 'population:vms=5,days=1,lifetimes=weibull': unknown lifetimes"),
    (["replay", "--policies", "static,,vpa"],
     "adares: error: --policies 'static,,vpa': an empty item"),
    # --targets and --sweep-margin skipped the empty item that --policies refuses
    (["evaluate", "missing.npz", "--targets", "1.0,,2.0"],
     "adares: error: --targets '1.0,,2.0': an empty item (two commas, or a comma at an end)"),
    (["compare", "--sweep-margin", "0.1,"],
     "adares: error: --sweep-margin '0.1,': an empty item (two commas, or a comma at an end)"),
    (["replay", "--trace", "synthetic:vms=\uff11\uff12"],
     "adares: error: trace spec 'synthetic:vms=\uff11\uff12': vms='\uff11\uff12' is not ASCII"),
    (["replay", "--policies", "threshold", "--knob", "vpa.safety_margin=0.1"],
     "adares: error: --knob vpa.safety_margin: vpa is not in --policies (threshold)"),
    (["compare", "--policies", "adares", "--knob", "threshold.up=0.7"],
     "adares: error: --knob threshold.up: threshold is not in --policies (adares)"),
])
def test_usage_errors_one_line_exit_2(monkeypatch, capsys, args, line):
    code, out, err = _run(monkeypatch, capsys, *args)
    assert code == 2 and out == ""
    assert err.startswith(line) and err.count("\n") == 1, err


@pytest.mark.parametrize("args, line", [
    (["replay", "--trace", "alibaba:{d}"], "adares: error: {d}: is a folder, give a file"),
    (["replay", "--trace", "google2019:{d}"], "adares: error: {d}: is a folder, give a file"),
    (["evaluate", "{d}"], "adares: error: {d}: is a folder, give a decision log (.npz)"),
    (["replay", "--cluster", "nodes=x", "--trace", "alibaba:/nonexistent.csv"],
     "adares: error: --cluster 'nodes=x': expected nodes=K,cpu=C,mem=GIB[,overcommit=R]"),
    (["replay", "--cluster", "nodes=0,cpu=8,mem=32"],
     "adares: error: --cluster 'nodes=0,cpu=8,mem=32': nodes must be between 1 and 1,000,000"),
    (["replay", "--cluster", "nodes=99999999,cpu=32,mem=128"],
     "adares: error: --cluster 'nodes=99999999,cpu=32,mem=128': nodes must be between 1 and 1,000,000"),
    (["replay", "--trace", "synthetic:vms=99999999999999999999,days=1"],
     "adares: error: trace spec 'synthetic:vms=99999999999999999999,days=1': "
     "99,999,999,999,999,999,999 VMs x 288 steps is over 300,000,000 VM-steps (about 10 GB of "
     "arrays): fewer vms or days"),
    (["replay", "--trace", "population:vms=100000000,days=8"],
     "adares: error: trace spec 'population:vms=100000000,days=8': 100,000,000 VMs x 2,304 steps "
     "is over 300,000,000 VM-steps (about 10 GB of arrays): fewer vms or days"),
    (["replay", "--margin", "1e300"],
     "adares: error: --margin '1e300': expected M or CPU,MEM, finite, > -1 and <= 100"),
    (["replay", "--resize-price", "1e308,1e308"],
     "adares: error: --resize-price '1e308,1e308': expected P or CPU,MEM, finite, >= 0 and <= 1e+06"),
    (["replay", "--knob", "adares.explore_span=1.5"],
     "adares: error: knob adares.explore_span=1.5 must be a whole number (explore within this many "
     "sizes of the greedy one (7: any))"),
])
def test_folders_and_node_specs_one_line_exit_2(monkeypatch, capsys, tmp_path, args, line):
    d = str(tmp_path)
    code, out, err = _run(monkeypatch, capsys, *(a.format(d=d) for a in args), "--policies"
                          if args[0] == "replay" else "--json", *(["static"] if args[0] == "replay" else []))
    assert code == 2
    # Checked before any trace is loaded: no log line comes first.
    assert err == line.format(d=d) + "\n"


def test_no_arguments_print_the_help(monkeypatch, capsys):
    code, out, _ = _run(monkeypatch, capsys)
    assert code == 2 and "replay" in out and "compare" in out
