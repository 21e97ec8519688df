"""The command line, as a user runs it: exit codes, JSON, one-line errors, crashes as outcomes."""

import errno
import json
import os
import pathlib
import sqlite3
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "cases"


def xlaprobe(*args, cwd=None, timeout=600):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "xlaprobe.cli", *args], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=timeout)


def test_models_json():
    run = xlaprobe("models", "--json")
    assert run.returncode == 0, run.stderr
    names = {m["name"] for m in json.loads(run.stdout)}
    assert {"transformer_lm", "resnet", "mlp_mixer", "lstm"} <= names


def test_check_case_flags_finding_and_stores_it(tmp_path):
    db = tmp_path / "x.db"
    run = xlaprobe("check", str(CASES / "dus_shifted_self_update.py"), "--json", "--db", str(db))
    assert run.returncode == 1, run.stderr
    data = json.loads(run.stdout)
    finding = {f["config"]: f for f in data["findings"]}["xla"]
    assert finding["kind"] == "mismatch"
    assert pathlib.Path(finding["artifact"], "repro.py").is_file()
    listed = xlaprobe("findings", "--json", "--db", str(db))
    assert {f["config"]: f["id"] for f in json.loads(listed.stdout)}["xla"] == finding["id"]
    table = xlaprobe("check", str(CASES / "dus_shifted_self_update.py"), "--db", str(db))
    assert table.returncode == 1 and "mismatch" in table.stdout and "replay" in table.stdout
    # Each finding is printed with its id and the next commands, which find this store.
    text = " ".join(table.stdout.split())
    assert f"finding {finding['id']}: xla mismatch on 1 output," in text
    assert f"next: xlaprobe localize {finding['id']} --db {db.resolve()};" in text


def test_version_and_a_bare_command():
    import jax
    version = xlaprobe("--version")
    assert version.returncode == 0 and f"jax {jax.__version__}" in version.stdout
    bare = xlaprobe()
    assert bare.returncode == 0 and "Commands" in bare.stdout and "error" not in bare.stderr


def test_check_ok_exit_zero(tmp_path):
    run = xlaprobe("check", "jax.numpy:tanh", "--inputs", "f32[16]", "--db", str(tmp_path / "db"))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "all ok" in run.stdout


@pytest.mark.parametrize("args, words", [
    (["check", "transformr_lm"], "unknown target"),
    (["check", "lstm", "--configs", "xla,nosuch"], "unknown configuration kind"),
    (["check", "lstm", "--configs", "xla[xla_cpu_enable_fast_mat=true]"], "xla_cpu_enable_fast_mat"),
    (["check", "lstm", "--configs", "xla[oops"], "unbalanced"),
    (["check", "/no/such/file.py"], "no such file"),
    (["check", "jax.numpy:tanh", "--inputs", "f32[3"], "malformed input"),
    (["check", "jax.numpy:tanh"], "no inputs"),
    (["check"], "Missing argument"),
    (["frobnicate"], "No such command"),
])
def test_bad_input_one_line_exit_2(tmp_path, args, words):
    run = xlaprobe(*args, "--db", str(tmp_path / "db")) if args[:1] == ["check"] and len(args) > 1 \
        else xlaprobe(*args)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and words in lines[0], run.stderr


CRASHY = '''
import os, time
import jax, numpy as np


def _abort(x):
    os.abort()


def _sleep(x):
    time.sleep(120)
    return x


def aborts(x):
    return jax.pure_callback(_abort, jax.ShapeDtypeStruct(x.shape, x.dtype), x) + 1


def hangs(x):
    return jax.pure_callback(_sleep, jax.ShapeDtypeStruct(x.shape, x.dtype), x) + 1
'''


def test_crash_and_hang_are_outcomes(tmp_path):
    module = tmp_path / "crashy.py"
    module.write_text(CRASHY)
    env_path = f"{tmp_path}"
    run = xlaprobe("check", f"{module}:aborts", "--inputs", "f32[4]", "--json", "--configs",
                   "xla,eager,reference", "--db", str(tmp_path / "db"), cwd=env_path)
    assert run.returncode == 1, run.stderr
    data = json.loads(run.stdout)
    outcomes = {c["config"]: c for c in data["configs"]}
    assert outcomes["xla"]["outcome"] == "crash" and outcomes["xla"]["signal"] == 6
    assert outcomes["eager"]["outcome"] == "crash"
    hang = xlaprobe("check", f"{module}:hangs", "--inputs", "f32[4]", "--json", "--configs",
                    "xla,eager", "--timeout", "3", "--db", str(tmp_path / "db"), cwd=env_path)
    assert hang.returncode == 1, hang.stderr
    kinds = {c["config"]: c["outcome"] for c in json.loads(hang.stdout)["configs"]}
    # check adds the reference, the oracle, to every list
    assert set(kinds) == {"xla", "eager", "reference"}
    assert kinds["xla"] == kinds["eager"] == "timeout"


FNS = '''
import jax, jax.numpy as jnp, numpy as np


def add(x, y):
    return x + y


def local_callback(x):
    def cb(v):
        return v
    return jax.pure_callback(cb, jax.ShapeDtypeStruct(x.shape, x.dtype), x)


def no_args():
    return jnp.arange(3) * 2


def exits(x):
    import sys
    sys.exit(3)


def slow_to_compile(x):
    # 1500 equations: XLA needs 1-2 s to compile them (more than 0.5 s, less than the 30 s the
    # hang check gives, also on a loaded 2-core machine), the reference 0.04 s to evaluate them
    for i in range(1500):
        x = jnp.sin(x) * 1.01 + i
    return x
'''

BAD_CASE = '''
import numpy as np
def program(x):
    return x + 1
def inputs():
    return (np.zeros(3, np.float32),)
def expected():
    return np.zeros(4, np.float32)
'''


@pytest.mark.parametrize("args, words", [
    (["check", "[/red]"], "unknown target"),                     # rich markup in user text
    (["check", "FNS:add", "--inputs", "f32[/x]"], "malformed input"),
    (["check", "FNS:add", "--inputs", "f32[4],f32[4]", "--configs", "xla[/bold]"], "malformed"),
    (["check", "FNS:add", "--inputs", "f32[4,,4],f32[4]"], "malformed dimensions"),
    (["check", "FNS:add", "--inputs", "f32[4],f32[4]", "--seed", "-1"], "--seed"),
    (["check", "FNS:add", "--inputs", "f32[99999999999],f32[1]"], "GiB"),
    (["check", "FNS:local_callback", "--inputs", "f32[4]"], "define it at module level"),
    (["check", "BADCASE"], "expected() output"),
    (["check", "FNS:exits", "--inputs", "f32[2]"], "called sys.exit(3) while being traced"),
    (["localize", "FNS:add", "xla"], "pass --inputs"),
    (["localize", "FNS:slow_to_compile", "xla", "--inputs", "f32[4]", "--timeout", "0.5"],
     "raise --timeout"),
    (["localize", "7", "xla"], "no store"),
    (["check", "+3"], "finding ids are whole numbers from 1"),
    (["fuzz", "--campaign", "7", "--time", "1"], "there is no store"),
    (["reduce", "FNS:add", "xla", "--inputs", "f32[4],f32[4]", "--out", "FNS"], "is a file"),
    (["reduce", "FNS:add", "xla", "--inputs", "f32[4],f32[4]", "--out", "TMP"],
     "holds no earlier reduction"),
])
def test_more_bad_input(tmp_path, args, words):
    (tmp_path / "fns.py").write_text(FNS)
    (tmp_path / "badcase.py").write_text(BAD_CASE)
    args = [a.replace("FNS", str(tmp_path / "fns.py")).replace("BADCASE", str(tmp_path / "badcase.py"))
            .replace("TMP", str(tmp_path)) for a in args]
    run = xlaprobe(*args, "--db", str(tmp_path / "db"))
    assert run.returncode == 2, run.stdout + run.stderr
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert "Traceback" not in run.stderr and len(lines) == 1 and words in lines[0], run.stderr
    if args[0] == "fuzz":  # continuing a campaign that cannot exist makes no empty store
        assert not (tmp_path / "db").exists()


def test_float64_and_zero_argument_functions(tmp_path):
    (tmp_path / "fns.py").write_text(FNS)
    run = xlaprobe("check", f"{tmp_path / 'fns.py'}:add", "--inputs", "f64[4],f64[4]", "--json",
                   "--db", str(tmp_path / "db"))
    assert run.returncode == 0, run.stderr
    zero = xlaprobe("check", f"{tmp_path / 'fns.py'}:no_args", "--db", str(tmp_path / "db"))
    assert zero.returncode == 0, zero.stdout + zero.stderr


def test_option_configs_keep_their_names(tmp_path):
    run = xlaprobe("check", str(CASES / "fastmath_masked_max.py"), "--configs",
                   "xla[xla_cpu_enable_fast_math=true],reference", "--db", str(tmp_path / "db"))
    assert run.returncode == 1
    assert "xla[xla_cpu_enable_fast_math=true]" in run.stdout
    assert "--configs 'xla[xla_cpu_enable_fast_math=true],reference'" in run.stdout


@pytest.mark.parametrize("value", ["bogus", "0", "-5m", "31d", "721h"])
def test_fuzz_time_parsed_by_the_campaign_parser(tmp_path, value):
    # One duration parser (xlaprobe.campaign.parse_duration) serves the CLI and the benchmarks.
    from xlaprobe.campaign import parse_duration
    from xlaprobe.errors import InvalidArgument

    with pytest.raises(InvalidArgument) as raised:
        parse_duration(value)
    run = xlaprobe("fuzz", "--time", value, "--db", str(tmp_path / "db"))
    assert run.returncode == 2 and run.stderr.strip() == f"xlaprobe: error: {raised.value}"
    assert not (tmp_path / "db").exists()
    assert parse_duration("720h") == 30 * 24 * 3600.0


def test_an_internal_error_exits_3_never_1(capsys):
    # 1 means "findings": a bug of xlaprobe itself must not read as a compiler bug.
    from xlaprobe.cli import commands as cli
    with pytest.raises(SystemExit) as info:
        cli._internal_error(KeyError("boom"))
    assert info.value.code == cli.EXIT_INTERNAL_ERROR == 3
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("xlaprobe: internal error: KeyError") and "KeyError" in lines[0]
    path = lines[0].split("traceback in ")[1].split(":")[0]
    assert "KeyError" in pathlib.Path(path).read_text()


@pytest.mark.parametrize("exc", [sqlite3.OperationalError("database or disk is full"),
                                 OSError(errno.ENOSPC, "No space left on device")])
def test_a_full_disk_is_one_error_line_not_an_internal_error(monkeypatch, capsys, exc):
    # The machine ran out of disk: not a bug of xlaprobe (exit 3), and no traceback file is
    # written onto the full disk.
    from xlaprobe.cli import commands as cli

    def full(**_):
        raise exc
    monkeypatch.setattr(cli, "app", full)
    monkeypatch.setattr(cli.tempfile, "NamedTemporaryFile", None)  # any traceback file: TypeError
    with pytest.raises(SystemExit) as info:
        cli.main()
    assert info.value.code == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("xlaprobe: error: the disk is full ("), lines
    assert lines[0].endswith("free space and run again; results stored so far are kept")


def test_an_unrelated_operational_error_is_still_an_internal_error(monkeypatch, capsys):
    from xlaprobe.cli import commands as cli

    def locked(**_):
        raise sqlite3.OperationalError("no such table: findings")
    monkeypatch.setattr(cli, "app", locked)
    with pytest.raises(SystemExit) as info:
        cli.main()
    assert info.value.code == 3


def test_findings_shows_one_finding_and_counts_distinct_bugs(tmp_path):
    db = tmp_path / "x.db"
    assert xlaprobe("check", str(CASES / "dus_shifted_self_update.py"), "--db", str(db)).returncode == 1
    [row] = [f for f in json.loads(xlaprobe("findings", "--json", "--db", str(db)).stdout)
             if f["config"] == "xla"]
    shown = xlaprobe("findings", str(row["id"]), "--json", "--db", str(db))
    assert shown.returncode == 0, shown.stderr
    detail = json.loads(shown.stdout)
    assert detail["id"] == row["id"] and detail["localizations"] == [] and detail["bug"] is None
    table = xlaprobe("findings", "--db", str(db))
    assert "2 findings, 1 distinct bug (" in table.stdout  # xla and xla:O0 fail alike
    # The next commands name this store, so that they can be pasted from anywhere.
    text = " ".join(xlaprobe("findings", str(row["id"]), "--db", str(db)).stdout.split())
    assert f"next: xlaprobe localize {row['id']} --db {db.resolve()};" in text
    missing = xlaprobe("findings", "999", "--db", str(db))
    assert missing.returncode == 2 and "no finding 999" in missing.stderr
    # Localizing the finding stores the localization and names the bug by its operation.
    assert xlaprobe("localize", str(row["id"]), "--json", "--db", str(db)).returncode == 0
    detail = json.loads(xlaprobe("findings", str(row["id"]), "--json", "--db", str(db)).stdout)
    assert detail["bug"]
    assert detail["localizations"][0]["equation"]["primitive"] == "dynamic_update_slice"
    # A finding whose artifact was swapped for a crafted schema-1 one (a pickle that writes a
    # file) is refused by id too: one line, exit 2, nothing written.
    from test_jaxpr_json import _schema_one
    sentinel = tmp_path / "written"
    _schema_one(pathlib.Path(row["artifact"]), sentinel)
    for verb in ("localize", "reduce"):
        run = xlaprobe(verb, str(row["id"]), "--db", str(db))
        assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1, run.stderr
        assert "no longer loads" in run.stderr and not sentinel.exists()


def test_a_stored_localization_reads_in_both_formats():
    from xlaprobe.cli.findings import _localized
    flat = {"equation": 3, "primitive": "sub", "op_instruction": "subtract.2",
            "op_opcode": "subtract", "compiler_pass": "algsimp"}
    nested = {"format": 2, "equation": {"index": 3, "primitive": "sub"},
              "op": {"instruction": "subtract.2", "opcode": "subtract"},
              "pass": {"compiler_pass": "algsimp"}}
    line = "equation 3 sub; op subtract.2 (subtract); pass algsimp"
    assert _localized(flat) == _localized(nested) == line
    assert _localized({"format": 2, "equation": {"index": -1}, "op": {}, "pass": None}) == \
        "nothing localized"


def test_a_check_the_reference_cannot_judge_is_incomplete_not_ok(tmp_path):
    # The float64 reference has no rule for the general eigensolver (eig): no finding, but
    # nothing was judged against the oracle, so the check says so (exit 4), in the table and
    # in the JSON.
    run = xlaprobe("check", "jax.numpy.linalg:eigvals", "--inputs", "f32[3,3]", "--configs",
                   "xla", "--json", "--db", str(tmp_path / "db"))
    assert run.returncode == 4, run.stdout + run.stderr
    data = json.loads(run.stdout)
    assert data["findings"] == [] and list(data["incomplete"]) == ["reference"]
    assert "tool-error" in data["incomplete"]["reference"]
    assert "'eig'" in data["incomplete"]["reference"]
    reference = {c["config"]: c for c in data["configs"]}["reference"]
    assert reference["outcome"] == "tool-error" and reference["verdict"] == "tool-error"


def _tree_bytes(root):
    return {p: p.read_bytes() for p in sorted(pathlib.Path(root).rglob("*")) if p.is_file()}


@pytest.mark.parametrize("crafted", ["schema 1 jaxpr.pkl", "pickle as consts.npz",
                                     "unknown primitive", "tag outside the whitelist"])
def test_check_of_a_crafted_artifact_writes_nothing_one_line_exit_2(tmp_path, crafted):
    """Issue 14: a shared artifact whose loading would write a file: nothing is written, one line
    on stderr, exit 2 (and no store is created)."""
    from test_jaxpr_json import CRAFTED, make_artifact
    tamper = {c[0]: c[1] for c in CRAFTED}[crafted]
    directory = make_artifact(tmp_path / "artifact")
    sentinel = tmp_path / "written"
    tamper(directory, sentinel)
    before = _tree_bytes(tmp_path)
    run = xlaprobe("check", str(directory), "--db", str(tmp_path / "x.db"), cwd=tmp_path)
    assert run.returncode == 2, run.stdout + run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and run.stdout == "", run.stderr
    assert "--db" not in run.stderr  # refused for the artifact, not for the store's folder
    assert not sentinel.exists()
    assert _tree_bytes(tmp_path) == before  # nothing written anywhere under the test's folder


def test_the_cli_default_store_is_the_stores():
    from xlaprobe.cli.options import DEFAULT_DB
    from xlaprobe.store import DEFAULT_DB as STORE_DEFAULT
    assert DEFAULT_DB == STORE_DEFAULT


def test_db_none_is_refused_on_the_command_line(tmp_path):
    # `none` keeps nothing in pytest and Python; the commands always record: no file "none".
    run = subprocess.run([sys.executable, "-m", "xlaprobe.cli", "findings", "--db", "none"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 2 and "always records" in run.stderr
    assert not (tmp_path / "none").exists()


@pytest.mark.parametrize("args, words", [
    (["fuzz", "--campaign", "1", "--configs", "xla"], "drop --configs"),
    (["fuzz", "--campaign", "1", "--resume"], "drop --configs, --seed, --shard and --resume"),
    (["check", "/etc/hostname:f"], "not a Python source file"),
    (["report", "--db", "."], "is a directory"),
])
def test_contradictions_and_wrong_files_are_one_line(tmp_path, args, words):
    run = subprocess.run([sys.executable, "-m", "xlaprobe.cli", *args], capture_output=True,
                         text=True, cwd=tmp_path)
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert run.returncode == 2 and len(lines) == 1 and words in lines[0], run.stderr


def test_python_dash_m_xlaprobe_is_the_command_line(tmp_path):
    run = subprocess.run([sys.executable, "-m", "xlaprobe", "findings", "--db", "none"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert run.returncode == 2 and "always records" in run.stderr


def test_envs_list_table_shows_sizes_in_gb_and_local_times():
    import time as time_module

    from xlaprobe.cli.bisect import _env_cell
    from xlaprobe.cli.console import local_time
    assert _env_cell("size_bytes", 537_324_127) == "0.54 GB"
    stamp = 1_764_605_293  # 2025-12-01T16:08:13Z
    iso = time_module.strftime("%Y-%m-%dT%H:%M:%SZ", time_module.gmtime(stamp))
    assert _env_cell("created", iso) == local_time(stamp)
    assert _env_cell("created", "yesterday") == "yesterday" and _env_cell("version", "0.10.2") == "0.10.2"


def test_mcp_without_the_sdk_says_how_to_install_it(tmp_path):
    # The README's install has no mcp extra: `xlaprobe mcp` was an internal error (anyio missing)
    # before the install hint could be given. The SDK and anyio are hidden from the child.
    code = ("import sys; sys.modules['mcp'] = sys.modules['anyio'] = None; "
            "sys.argv = ['xlaprobe', 'mcp', '--db', sys.argv[1]]; "
            "from xlaprobe.cli.commands import main; main()")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "x.db")], input="",
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == ("xlaprobe: error: xlaprobe mcp needs the mcp SDK: "
                                   "pip install 'xlaprobe[mcp]'"), proc.stderr


def test_the_command_line_loads_without_jax_or_numpy():
    # `xlaprobe --help` imports every command module (each registers its own command): the
    # library, jax and numpy load inside the command bodies, so help stays quick.
    code = ("import sys; import xlaprobe.cli.commands; "
            "print(sorted(m for m in ('jax', 'numpy', 'xlaprobe.store', 'xlaprobe.checking') "
            "if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stdout + proc.stderr


def test_reduce_default_budget_is_the_reducers():
    from xlaprobe.cli.reduce import MAX_TESTS
    from xlaprobe.localization.reduce import MAX_TESTS as REDUCER_DEFAULT
    assert MAX_TESTS == REDUCER_DEFAULT
