"""User functions, input specs and case modules."""

import numpy as np
import pytest

from xlaprobe.errors import InvalidArgument
from xlaprobe.sources.targets import TargetKind, parse_target, resolve
from xlaprobe.sources.user import load_case, parse_input_spec, random_inputs, user_program


def test_input_spec_parse():
    specs = parse_input_spec("f32[8,128],i32[8],bool[],u8[3]")
    assert [(s.shape, s.dtype.name) for s in specs] == [
        ((8, 128), "float32"), ((8,), "int32"), ((), "bool"), ((3,), "uint8")]


@pytest.mark.parametrize("bad", ["", "f32", "f33[2]", "f32[2", "f32[a]"])
def test_input_spec_errors(bad):
    with pytest.raises(InvalidArgument):
        parse_input_spec(bad)


def test_random_inputs_seeded():
    specs = parse_input_spec("f32[4],i8[5]")
    a, b = random_inputs(specs, 1), random_inputs(specs, 1)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not np.array_equal(a[0], random_inputs(specs, 2)[0])
    assert a[1].dtype == np.int8 and a[1].min() >= -10 and a[1].max() <= 10


def test_user_function_from_file(tmp_path):
    f = tmp_path / "mine.py"
    f.write_text("import jax.numpy as jnp\nimport numpy as np\n"
                 "def f(x, y):\n    return jnp.tanh(x) * y\n"
                 "def f_inputs():\n    return np.ones(3, np.float32), np.float32(2)\n")
    program = user_program(f"{f}:f")
    assert [x.shape for x in program.inputs] == [(3,), ()]
    program = user_program(f"{f}:f", input_spec="f32[5],f32[]", seed=3)
    assert program.inputs[0].shape == (5,) and program.provenance.seed == 3
    with pytest.raises(InvalidArgument, match="no function 'g'"):
        user_program(f"{f}:g")


def test_user_function_from_module():
    program = user_program("jax.numpy:sin", input_spec="f32[4]")
    assert program.num_equations == 1


@pytest.mark.parametrize("target, words", [
    ("/no/such/file.py:f", "no such file"),
    ("no_such_module_xyz:f", "cannot import"),
    ("transformr_lm", "did you mean 'transformer_lm'"),
    ("/no/such/case.py", "no such file"),
])
def test_bad_targets(target, words):
    with pytest.raises(InvalidArgument, match=words):
        resolve(target)


def test_a_target_is_parsed_once_into_what_it_names(tmp_path):
    (tmp_path / "art").mkdir()
    (tmp_path / "art" / "metadata.json").write_text("{}")
    (tmp_path / "case.py").write_text("x = 1\n")
    known = {
        ("12", True): (TargetKind.FINDING, "12"), (" 007 ", True): (TargetKind.FINDING, "7"),
        (str(tmp_path / "art"), True): (TargetKind.ARTIFACT, str(tmp_path / "art")),
        (f"{tmp_path}/case.py:f", False): (TargetKind.FUNCTION, f"{tmp_path}/case.py:f"),
        ("jax.numpy:sin", True): (TargetKind.FUNCTION, "jax.numpy:sin"),
        (str(tmp_path / "case.py"), False): (TargetKind.CASE, str(tmp_path / "case.py")),
        ("transformer_lm", True): (TargetKind.MODEL, "transformer_lm"),
    }
    for (text, findings), (kind, normal) in known.items():
        spec = parse_target(text, findings=findings)
        assert (spec.kind, spec.text) == (kind, normal), text
    assert parse_target("12", findings=True).finding_id == 12
    assert parse_target("transformer_lm").finding_id is None
    # Where no finding is meant, a number is refused as one (the user meant a finding id).
    for text in ("12", "-3"):
        with pytest.raises(InvalidArgument, match="finding ids are whole numbers"):
            parse_target(text)
    with pytest.raises(InvalidArgument, match="directory but not an artifact"):
        parse_target(str(tmp_path))
    with pytest.raises(InvalidArgument, match="--inputs does not apply to zoo model"):
        resolve("transformer_lm", input_spec="f32[2]")


def test_case_module(tmp_path):
    f = tmp_path / "case.py"
    f.write_text("import numpy as np\nKIND = 'add'\nFAULTY_CONFIG = 'xla:fastmath'\n"
                 "def program(x):\n    return x + 1\n"
                 "def inputs():\n    return (np.zeros(2, np.int32),)\n"
                 "def expected():\n    return np.ones(2, np.int32)\n")
    target = resolve(str(f))
    assert target.extra_configs == ("xla:fastmath",) and target.kind == "add"
    assert np.array_equal(target.program.expected[0], [1, 1])
    g = tmp_path / "notacase.py"
    g.write_text("x = 1\n")
    with pytest.raises(InvalidArgument, match="not a case module"):
        load_case(str(g))


_RAISING = '''\
import jax.numpy as jnp


def helper(x):
    raise ValueError("negative sizes are not supported")


def fn(x):
    return helper(jnp.sin(x))


def broken_inputs():
    return {}["missing"]


def broken(x):
    return x
'''


def test_a_raising_user_function_keeps_its_file_and_line(tmp_path, monkeypatch):
    (tmp_path / "mymod.py").write_text(_RAISING)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidArgument) as raised:
        user_program("mymod.py:fn", input_spec="f32[4]")
    assert str(raised.value).startswith(
        "mymod.py:5 in helper: ValueError: negative sizes are not supported (tracing mymod.py:fn")
    with pytest.raises(InvalidArgument, match=r"^mymod.py:13 in broken_inputs: KeyError: 'missing'"):
        user_program("mymod.py:broken")
    (tmp_path / "badimport.py").write_text("import math\n\nmath.sqrt(-1)\n")
    with pytest.raises(InvalidArgument, match=r"^badimport.py:3 in <module>: ValueError: "):
        user_program("badimport.py:f")


def test_traceback_option_prints_the_whole_traceback(tmp_path):
    import os
    import pathlib
    import subprocess
    import sys
    root = pathlib.Path(__file__).resolve().parent.parent
    (tmp_path / "mymod.py").write_text(_RAISING)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root / "src"), str(root)]))

    def run(*options):
        return subprocess.run([sys.executable, "-m", "xlaprobe.cli", *options, "check",
                               "mymod.py:fn", "--inputs", "f32[4]", "--db", "x.db"],
                              capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    plain = run()
    lines = plain.stderr.strip().splitlines()
    assert plain.returncode == 2 and len(lines) == 1, plain.stderr
    assert lines[0].startswith("xlaprobe: error: mymod.py:5 in helper: ValueError: negative sizes"), lines
    full = run("--traceback")
    assert full.returncode == 2 and full.stderr.startswith("Traceback (most recent call last)")
    assert 'mymod.py", line 9, in fn' in full.stderr and 'mymod.py", line 5, in helper' in full.stderr
