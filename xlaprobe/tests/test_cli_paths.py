"""One rule for the folders commands write into: the default store folder ``.xlaprobe/`` may be
created; a folder the user names that does not exist is refused in one line, exit 2, before any
work (nothing is created). And a configuration refused for its program leaves no store behind
and prints nothing but the error line."""

import os
import pathlib
import subprocess
import sys

import pytest

from xlaprobe.cli.paths import check_folder_of
from xlaprobe.errors import InvalidArgument

ROOT = pathlib.Path(__file__).resolve().parent.parent


def xlaprobe(*args, cwd):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "xlaprobe.cli", *args], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=600)


def test_the_rule_on_known_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    check_folder_of(pathlib.Path("x.db"), flag="--db")  # the working directory exists
    check_folder_of(tmp_path / "x.db", flag="--db")
    # The default store's folder may be missing: it is created when the store is.
    check_folder_of(pathlib.Path(".xlaprobe/xlaprobe.db"), flag="--db",
                    default_folder=pathlib.Path(".xlaprobe"))
    check_folder_of(tmp_path / ".xlaprobe" / "other.db", flag="--db",
                    default_folder=pathlib.Path(".xlaprobe"))
    with pytest.raises(InvalidArgument) as error:
        check_folder_of(pathlib.Path("runs/x.db"), flag="--db",
                        default_folder=pathlib.Path(".xlaprobe"))
    assert str(error.value) == ("--db runs/x.db: the folder runs does not exist; create it "
                                "first (nothing is created for you)")
    (tmp_path / "afile").write_text("")
    with pytest.raises(InvalidArgument, match="the folder afile does not exist"):
        check_folder_of(pathlib.Path("afile/out"), flag="--out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]  # nothing was created


# Each command that writes a store or an output folder, with a missing folder: refused while the
# options are read, so even a target that does not exist is never looked at.
@pytest.mark.parametrize("args", [
    ["check", "no_such_target", "--db", "missing/x.db"],
    ["fuzz", "--time", "1", "--db", "missing/x.db"],
    ["localize", "no_such_target", "xla", "--db", "missing/x.db"],
    ["reduce", "no_such_target", "xla", "--db", "missing/x.db"],
    ["reduce", "no_such_target", "xla", "--out", "missing/reduced"],
    ["merge", "a.db", "--db", "missing/x.db"],
    ["capture", "--out", "missing/captured", "script.py"],
])
def test_a_missing_folder_is_refused_in_one_line(tmp_path, args):
    (tmp_path / "script.py").write_text("raise SystemExit('must not run')\n")
    run = xlaprobe(*args, cwd=tmp_path)
    assert run.returncode == 2, run.stdout + run.stderr
    flag = "--out" if "--out" in args else "--db"
    named = args[args.index(flag) + 1]
    assert run.stderr.strip().splitlines() == [
        f"xlaprobe: error: {flag} {named}: the folder missing does not exist; create it first "
        "(nothing is created for you)"], run.stderr
    assert run.stdout == "" and not (tmp_path / "missing").exists()


#: fuzz:1 has 4 inputs: donating input 7 is refused once the program is built.
REFUSED = "spmd[mesh=2x2,donate=7]"
MESSAGE = ("spmd[donate=7,mesh=2x2]: donated input 7 does not exist; the program has 4 inputs "
           "(0..3)")


def _commands():
    from xlaprobe.cli.bisect import bisect_command
    from xlaprobe.cli.check import check_command
    from xlaprobe.cli.localize import localize_command
    from xlaprobe.cli.reduce import reduce_command
    return {
        "check": lambda db: check_command("fuzz:1", REFUSED, input_spec="", seed=0, db=db, jobs=1,
                                          timeout_s=60.0, json_output=False, all_outputs=False),
        "localize": lambda db: localize_command("fuzz:1", REFUSED, db=db, json_output=False),
        "reduce": lambda db: reduce_command("fuzz:1", REFUSED, db=db),
        "bisect": lambda db: bisect_command("fuzz:1", REFUSED, releases=None, db=db,
                                            json_output=False, timeout_s=60.0),
    }


@pytest.mark.parametrize("command", ["check", "localize", "reduce", "bisect"])
def test_a_configuration_refused_for_the_program_says_only_that(tmp_path, capsys, command):
    # Refused after the build, before the store is opened (check left an empty x.db behind) and
    # before the first progress line (localize printed "localizing ...", bisect "bisecting ...").
    with pytest.raises(InvalidArgument) as error:
        _commands()[command](tmp_path / "x.db")
    assert str(error.value) == MESSAGE
    assert capsys.readouterr() == ("", "")
    assert list(tmp_path.iterdir()) == []
