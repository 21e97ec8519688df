"""Artifacts rerun without the code that made them: bit-identical reload in a fresh process, and a
standalone repro.py that shows the mismatch."""

import json
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

from xlaprobe.artifact import load_artifact, load_reference, save_artifact
from xlaprobe.configs import reference
from xlaprobe.configs.registry import Configuration
from xlaprobe.configs.xla import compiler_options
from xlaprobe.errors import CorruptArtifact, InvalidArgument
from xlaprobe.program import Program, Provenance
from xlaprobe.sources.user import load_case
from xlaprobe.workers import WorkerPool  # noqa: F401  (the pool fixture)

CASES = pathlib.Path(__file__).parent / "cases"


def _run_xla_in_fresh_process(directory, out_file):
    script = (
        "import sys, numpy as np\n"
        "from xlaprobe.artifact import load_artifact\n"
        "from xlaprobe.configs.registry import Configuration, get_kind\n"
        f"p = load_artifact({str(directory)!r})\n"
        "c = Configuration.parse('xla')\n"
        "outs = get_kind('xla').run(c, p.jaxpr, p.inputs)\n"
        f"np.savez({str(out_file)!r}, *outs)\n")
    subprocess.run([sys.executable, "-c", script], check=True, capture_output=True)
    with np.load(out_file) as data:
        return [data[f"arr_{i}"] for i in range(len(data.files))]


def test_reload_in_fresh_process_is_bit_identical(tmp_path):
    from xlaprobe.sources.models import build_program
    from xlaprobe.configs.registry import get_kind
    program = build_program("mlp_mixer", seed=3)
    directory = save_artifact(program, tmp_path / "mixer")
    here = get_kind("xla").run(Configuration.parse("xla"), program.jaxpr, program.inputs)
    there = _run_xla_in_fresh_process(directory, tmp_path / "out.npz")
    assert len(here) == len(there)
    for a, b in zip(here, there):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    loaded = load_artifact(directory)
    assert loaded.fingerprint == program.fingerprint
    assert loaded.output_names == program.output_names


def test_repro_runs_standalone_and_prints_the_mismatch(tmp_path):
    case = load_case(str(CASES / "fastmath_masked_max.py"))
    program = case.program
    ref = reference.evaluate(program.jaxpr, program.inputs)
    config = Configuration.parse("xla:fastmath")
    directory = save_artifact(program, tmp_path / "fastmath", reference=ref,
                              repro_config=str(config), compiler_options=compiler_options(config))
    source = (directory / "repro.py").read_text()
    assert "xlaprobe" not in "".join(l for l in source.splitlines() if "import" in l)
    run = subprocess.run([sys.executable, "repro.py"], cwd=directory, capture_output=True, text=True)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "MISMATCH" in run.stdout and "xla:fastmath" in run.stdout
    defaults = subprocess.run([sys.executable, str(directory / "repro.py"), "--defaults"],
                              cwd=tmp_path, capture_output=True, text=True)
    assert defaults.returncode == 0, defaults.stdout + defaults.stderr
    np.testing.assert_array_equal(load_reference(directory)[0], ref[0])
    # A corrupt artifact exits 2 in one line, never 1 (1 means the fault shows).
    for name, junk in (("inputs.npz", "not a zip"), ("metadata.json", "{trunc")):
        (directory / name).write_text(junk)
        run = subprocess.run([sys.executable, "repro.py"], cwd=directory, capture_output=True,
                             text=True)
        assert run.returncode == 2, run.stdout + run.stderr
        assert run.stdout.startswith("repro: error: cannot read") and name in run.stdout
        assert "Traceback" not in run.stderr


def test_narrow_dtypes_round_trip(tmp_path):
    import ml_dtypes
    from xlaprobe.program import Program, Provenance
    x = np.array([1.5, -2.25], ml_dtypes.bfloat16)
    program = Program.from_function(lambda a, b: (a * 2, b + 1), (x, np.array([3], np.uint8)),
                                    Provenance("user", "narrow"))
    loaded = load_artifact(save_artifact(program, tmp_path / "narrow"))
    assert loaded.inputs[0].dtype == x.dtype and loaded.inputs[0].tobytes() == x.tobytes()
    assert loaded.inputs[1].dtype == np.uint8


def test_corrupt_artifacts(tmp_path):
    case = load_case(str(CASES / "while_loop_skipped.py"))
    directory = save_artifact(case.program, tmp_path / "w")
    (directory / "jaxpr.json").write_bytes(b"garbage")
    with pytest.raises(CorruptArtifact):
        load_artifact(directory)
    fresh = save_artifact(case.program, tmp_path / "v")
    (fresh / "inputs.npz").write_text("not a zip")  # np.load called this "pickled data"
    with pytest.raises(CorruptArtifact, match=r"not an \.npz \(zip\) archive"):
        load_artifact(fresh)
    (directory / "inputs.npz").unlink()
    with pytest.raises(CorruptArtifact, match="missing inputs.npz"):
        load_artifact(directory)
    (directory / "metadata.json").write_text("{not json")
    (directory / "inputs.npz").write_bytes(b"")
    with pytest.raises(CorruptArtifact):
        load_artifact(directory)
    with pytest.raises(InvalidArgument):
        load_artifact(tmp_path / "nothing")


@pytest.mark.parametrize("edit, words", [
    (lambda m: [1, 2], "not an object"),
    (lambda m: {**m, "tolerance": [1]}, "tolerance must be an object"),
    (lambda m: {**m, "tolerance": {"atol": {"float32": "x"}}}, "not a non-negative number"),
    (lambda m: {**m, "inputs": [{**m["inputs"][0], "dtype": "float99"}] + m["inputs"][1:]},
     "unknown dtype 'float99'"),
])
def test_malformed_metadata_is_a_corrupt_artifact(tmp_path, edit, words):
    case = load_case(str(CASES / "int8_square_select_abs.py"))
    directory = save_artifact(case.program, tmp_path / "w")
    metadata = json.loads((directory / "metadata.json").read_text())
    (directory / "metadata.json").write_text(json.dumps(edit(metadata)))
    with pytest.raises(CorruptArtifact, match=words):
        load_artifact(directory)


@pytest.mark.parametrize("stored", [np.uint8, np.float32, np.int16])
def test_an_inputs_file_of_another_dtype_is_refused_not_reinterpreted(tmp_path, stored):
    # The case's input is int8[5]. Its bits read as int8 would be another program's inputs
    # (uint8: silently; float32: "int8[20]", a shape the file does not hold), and int8 bits
    # read as a wider dtype a ValueError (exit 3). The file says what it holds.
    case = load_case(str(CASES / "int8_square_select_abs.py"))
    directory = save_artifact(case.program, tmp_path / "w")
    np.savez(directory / "inputs.npz", arg0=np.ones(5, stored))
    with pytest.raises(CorruptArtifact, match=re.escape(
            f"{directory / 'inputs.npz'}: arg0 is {np.dtype(stored).name}, metadata.json says "
            "int8; the artifact's files disagree")):
        load_artifact(directory)
    wide = save_artifact(Program.from_function(lambda x: x + 1, (np.ones((4, 1), np.int32),),
                                               Provenance("user", "wide")), tmp_path / "i32")
    np.savez(wide / "inputs.npz", arg0=np.ones((4, 1), np.int8))
    with pytest.raises(CorruptArtifact, match="arg0 is int8, metadata.json says int32"):
        load_artifact(wide)


def test_narrow_floats_still_round_trip_through_their_bits(tmp_path):
    import ml_dtypes
    x = np.linspace(-2, 2, 6).astype(ml_dtypes.bfloat16)
    loaded = load_artifact(save_artifact(Program.from_function(
        lambda a: a * 2, (x,), Provenance("user", "bf16")), tmp_path / "b"))
    assert loaded.inputs[0].dtype == x.dtype and loaded.inputs[0].tobytes() == x.tobytes()


# ------------------------------------------- a real finding's artifact: kept, and its files checked

@pytest.fixture
def finding_artifact(pool, tmp_path):
    """A real check's finding artifact (``xla`` on the shifted dynamic_update_slice case) and
    its store: (artifact directory, store path, finding id)."""
    from xlaprobe.api import check

    db = tmp_path / "x.db"
    checked = check(str(CASES / "dus_shifted_self_update.py"), configs="xla,reference", db=db,
                    pool=pool)
    return pathlib.Path(checked.artifacts["xla"]), db, checked.ids["xla"]


def _files(directory):
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in directory.iterdir()}


def test_checking_an_artifact_writes_to_the_store_only(finding_artifact, pool):
    from xlaprobe.api import check

    directory, db, _ = finding_artifact
    before = _files(directory)
    checked = check(str(directory), configs="xla,xla:O0,reference", db=db, pool=pool)
    assert {f.config for f in checked.findings} == {"xla", "xla:O0"}
    assert checked.artifacts["xla"] == str(directory)  # the input, named, not rewritten
    assert _files(directory) == before  # bytes and modification times
    assert pathlib.Path(checked.artifacts["xla:O0"]).parent == directory.parent  # a new one


@pytest.mark.parametrize("name, corrupt, words", [
    ("inputs.npz", lambda p: np.savez(p, arg0=np.zeros(8, np.int32)),
     "input 0 is int32[8], the jaxpr's int32[4, 1, 1]; the artifact's files disagree"),
    ("reference.npz", lambda p: p.write(b"\x13" * 300), "not an .npz (zip) archive"),
    ("reference.npz", lambda p: np.savez(p, arg0=np.zeros(3, np.int32)),
     "output 0 is [3], the jaxpr's [1, 4, 1]; the artifact's files disagree"),
    ("allowance.npz", lambda p: p.write(b"PK" + b"\x00" * 100), "not an .npz (zip) archive"),
    ("allowance.npz", lambda p: np.savez(p, allowed_0=np.zeros(2)),
     "array 'allowed_0' has shape [2], its output's is [1, 4, 1]"),
    ("allowance.npz", lambda p: np.savez(p, allowed_7=np.zeros(2)),
     "array 'allowed_7' is not an allowance of one of the program's 1 outputs"),
])
def test_an_artifact_whose_files_disagree_is_refused_naming_the_file(finding_artifact, name,
                                                                      corrupt, words):
    from xlaprobe.cli.localize import localize_command
    from xlaprobe.cli.reduce import reduce_command
    from xlaprobe.cli.upstream import upstream_command

    directory, db, finding_id = finding_artifact
    path = directory / name
    with open(path, "wb") as handle:  # np.savez to an open file keeps the name
        corrupt(handle)
    match = f"{re.escape(str(path))}.*{re.escape(words)}"
    with pytest.raises(CorruptArtifact, match=match):
        load_artifact(directory)
    # localize and reduce of the artifact, upstream of its finding: refused before any run.
    with pytest.raises(CorruptArtifact, match=match):
        localize_command(str(directory), "", db=db, json_output=True)
    with pytest.raises(CorruptArtifact, match=match):
        reduce_command(str(directory), "", db=db, out=directory.parent / "r")
    with pytest.raises(CorruptArtifact, match=match):
        upstream_command(finding_id, out=None, db=db, run=False, json_output=True)


def test_the_cli_refuses_a_disagreeing_artifact_in_one_line(finding_artifact):
    from tests.test_cli import xlaprobe

    directory, db, _ = finding_artifact
    with open(directory / "reference.npz", "wb") as handle:
        np.savez(handle, arg0=np.zeros(3, np.int32))
    run = xlaprobe("localize", str(directory), "--db", str(db))
    assert run.returncode == 2 and run.stderr.splitlines() == [
        f"xlaprobe: error: {directory / 'reference.npz'}: output 0 is [3], the jaxpr's "
        "[1, 4, 1]; the artifact's files disagree"], run.stderr
