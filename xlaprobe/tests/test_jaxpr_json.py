"""Artifacts are data: the jaxpr's JSON form round-trips every program of the zoo, the fuzzer and the
shared cases (same printed jaxpr, same fingerprint, same check results), and loading a crafted
artifact refuses it with one line and runs nothing."""

import json
import pathlib
import pickle

import jax
import numpy as np
import pytest

from xlaprobe import jaxpr_json
from xlaprobe.artifact import load_artifact, save_artifact
from xlaprobe.errors import CorruptArtifact
from xlaprobe.program import Program, Provenance
from xlaprobe.sources.user import load_case

TESTS = pathlib.Path(__file__).parent
CASE_FILES = sorted(p for d in ("cases", "fixed_cases") for p in (TESTS / d).glob("[a-z]*.py"))
X64_CASES = {"exp_nan_propagation"}
#: Fuzzer seeds of the default run: the first 20 and four that bind random_wrap (typed PRNG keys).
FUZZ_SEEDS = [*range(20), 99, 114, 149, 206]


def _round_trip(program: Program) -> Program:
    text, consts = jaxpr_json.dumps(program.jaxpr)
    json.loads(text)  # plain JSON
    back = jaxpr_json.loads(text, consts)
    return Program(back, program.inputs, program.provenance, program.output_names,
                   program.tolerance, program.expected)


def _assert_same(program: Program, back: Program) -> None:
    assert str(back.jaxpr) == str(program.jaxpr)
    assert back.fingerprint == program.fingerprint


def _case_program(path: pathlib.Path) -> Program:
    if path.stem in X64_CASES and not jax.config.jax_enable_x64:
        pytest.skip("a float64 case (X64): needs JAX_ENABLE_X64=1")
    return load_case(str(path)).program


@pytest.mark.parametrize("path", CASE_FILES, ids=lambda p: p.stem)
def test_shared_cases_round_trip(path):
    program = _case_program(path)
    _assert_same(program, _round_trip(program))


@pytest.mark.parametrize("name", ["mlp_mixer", "lstm", "convnet"])
def test_representative_models_round_trip(name):
    from xlaprobe.sources.models import build_program
    program = build_program(name)
    _assert_same(program, _round_trip(program))


@pytest.mark.slow
def test_every_zoo_model_round_trips():
    from xlaprobe.sources.models import MODELS, build_program
    for name in MODELS:
        program = build_program(name)
        _assert_same(program, _round_trip(program))


@pytest.mark.parametrize("seed", FUZZ_SEEDS)
def test_fuzzer_programs_round_trip(seed):
    from xlaprobe.sources.generator import generate
    program = generate(seed, x64=bool(seed % 2))
    _assert_same(program, _round_trip(program))


@pytest.mark.slow
def test_three_hundred_fuzzer_programs_round_trip():
    from xlaprobe.sources.generator import generate
    for seed in range(300):
        program = generate(seed, x64=bool(seed % 2))
        _assert_same(program, _round_trip(program))


@pytest.mark.parametrize("name, fn", [
    ("custom_linear_solve", lambda a: jax.numpy.linalg.solve(a + 4 * jax.numpy.eye(4), a[0])),
    ("fft", lambda a: jax.numpy.fft.fft(a).real),
    ("while", lambda a: jax.lax.while_loop(lambda c: c[0, 0] < 10, lambda c: c + 1, a)),
    ("composite with attributes", lambda a: jax.lax.composite(
        lambda y, scale, tag: jax.numpy.sin(y) * scale, name="my.sin2")(a, scale=2.0, tag=(1, "x"))),
    ("dot precision", lambda a: jax.lax.dot(a, a, precision=jax.lax.DotAlgorithmPreset.F32_F32_F32)),
    ("literals", lambda a: jax.numpy.where(a > 0, jax.numpy.nan, -0.0) * np.float32(3) + 2.5),
    ("max pool gradient (a primitive parameter)", lambda a: jax.grad(
        lambda y: jax.lax.reduce_window(y, -np.inf, jax.lax.max, (2, 2), (2, 2), "VALID").sum())(a)),
    ("scan over a dict carry", lambda a: jax.lax.scan(
        lambda c, r: ((c[0] + r, {"k": c[1]["k"] * 2}), r), (a[0], {"k": a[1]}), a)[0]),
])
def test_parameter_kinds_round_trip(name, fn):
    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4)
    program = Program.from_function(fn, (x,), Provenance("user", name))
    _assert_same(program, _round_trip(program))


def test_a_primitive_parameter_is_a_name_looked_up_in_jax():
    # select_and_scatter_add (max pooling's gradient) names its comparison by a Primitive: the
    # file holds its name, and a name that is no jax primitive is a corrupt file, not a lookup
    # anywhere else.
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    program = Program.from_function(lambda a: jax.grad(lambda y: jax.lax.reduce_window(
        y, -np.inf, jax.lax.max, (2, 2), (2, 2), "VALID").sum())(a), (x,), Provenance("user", "mp"))
    text, consts = jaxpr_json.dumps(program.jaxpr)
    assert '{"t":"primitive","name":"ge"}' in text
    back = jaxpr_json.loads(text, consts)
    expected = np.zeros((4, 4), np.float32)
    expected[1::2, 1::2] = 1.0  # the gradient goes to each window's maximum
    np.testing.assert_array_equal(jax.core.eval_jaxpr(back.jaxpr, back.consts, x)[0], expected)
    with pytest.raises(CorruptArtifact, match="unknown primitive parameter"):
        jaxpr_json.loads(text.replace('"name":"ge"', '"name":"os.system"'), consts)


def test_host_callback_is_not_described():
    program = Program.from_function(
        lambda x: jax.pure_callback(np.sin, jax.ShapeDtypeStruct(x.shape, x.dtype), x),
        (np.ones(3, np.float32),), Provenance("user", "callback"))
    with pytest.raises(TypeError, match="pure_callback.callback"):
        jaxpr_json.dumps(program.jaxpr)


def test_check_results_equal_after_reload(tmp_path, pool):
    from xlaprobe.checking import check_program
    program = load_case(str(TESTS / "cases" / "fastmath_masked_max.py")).program
    loaded = load_artifact(save_artifact(program, tmp_path / "a"))
    _assert_same(program, loaded)
    configs = ["xla", "xla:fastmath", "eager", "reference"]
    before, after = (check_program(p, configs, pool) for p in (program, loaded))
    assert [f.config for f in before.findings] == [f.config for f in after.findings] != []
    assert [f.kind for f in before.findings] == [f.kind for f in after.findings]
    for a, b in zip(before.outcomes, after.outcomes, strict=True):
        assert a.ran == b.ran and len(a.outputs) == len(b.outputs)
        for x, y in zip(a.outputs, b.outputs):
            assert np.asarray(x).dtype == np.asarray(y).dtype
            assert np.asarray(x).tobytes() == np.asarray(y).tobytes()


# ------------------------------------------------------------------------------ crafted artifacts


class _WritesAFile:
    """Unpickling this writes `path` (what a crafted jaxpr.pkl in a bug report could do)."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return exec, (f"open({self.path!r}, 'w').write('pwned')",)


def evil_pickle(path) -> bytes:
    """A pickle whose loading writes `path`."""
    return pickle.dumps(_WritesAFile(path))


def test_the_evil_pickle_would_write_its_file(tmp_path):
    pickle.loads(evil_pickle(tmp_path / "written"))  # the known answer the refusals are held to
    assert (tmp_path / "written").read_text() == "pwned"


def make_artifact(directory) -> pathlib.Path:
    """A small valid artifact (the int8 case) in `directory`."""
    program = load_case(str(TESTS / "cases" / "int8_square_select_abs.py")).program
    return save_artifact(program, directory)


def _edit_json(directory, edit):
    document = json.loads((directory / "jaxpr.json").read_text())
    edit(document)
    (directory / "jaxpr.json").write_text(json.dumps(document))


def _first_eqn(document):
    return document["jaxpr"]["eqns"][0]


def _set_param(document, value):
    eqn = next(e for e in document["jaxpr"]["eqns"] if e["params"])
    eqn["params"][next(iter(eqn["params"]))] = value


def _schema_one(directory, sentinel):
    """The old layout: jaxpr.pkl instead of jaxpr.json and consts.npz; the pickle is evil."""
    (directory / "jaxpr.json").unlink()
    (directory / "consts.npz").unlink()
    (directory / "jaxpr.pkl").write_bytes(evil_pickle(sentinel))


def _evil_file(name):
    return lambda directory, sentinel: (directory / name).write_bytes(evil_pickle(sentinel))


#: (id, tamper(directory, sentinel), words of the one-line error)
CRAFTED = [
    ("schema 1 jaxpr.pkl", _schema_one, "no longer loads"),
    ("pickle as consts.npz", _evil_file("consts.npz"), "consts.npz"),
    ("pickle as inputs.npz", _evil_file("inputs.npz"), "inputs.npz"),
    ("pickle as jaxpr.json", _evil_file("jaxpr.json"), "not JSON"),
    ("unknown primitive", lambda d, s: _edit_json(
        d, lambda doc: _first_eqn(doc).update(primitive="os.system")), "unknown primitive"),
    ("tag outside the whitelist", lambda d, s: _edit_json(
        d, lambda doc: _set_param(doc, {"t": "builtins.eval", "args": [f"open('{s}','w')"]})),
     "unknown type tag"),
    ("record type outside the whitelist", lambda d, s: _edit_json(
        d, lambda doc: _set_param(doc, {"t": "record", "type": "subprocess.Popen",
                                        "fields": {"args": f"touch {s}"}})), "unknown record"),
    ("enum member outside its enum", lambda d, s: _edit_json(
        d, lambda doc: _set_param(doc, {"t": "enum", "type": "Precision", "name": "__class__"})),
     "no member"),
    ("object dtype", lambda d, s: _edit_json(
        d, lambda doc: doc["jaxpr"]["invars"][0].update(dtype="object")), "unknown dtype"),
    ("malformed JSON", lambda d, s: (d / "jaxpr.json").write_text('{"format": "xlaprobe-jaxpr",'),
     "not JSON"),
    ("wrong input shape", lambda d, s: _edit_json(
        d, lambda doc: doc["jaxpr"]["invars"][0].update(shape=[3, 5])), r"int8\[3, 5\], the file"),
    ("operands jax rejects", lambda d, s: _edit_json(
        d, lambda doc: _first_eqn(doc)["invars"].__setitem__(1, {"literal": {
            "kind": "float", "hex": "0x1.0p+0", "dtype": "float32"}})), "rejected by jax"),
    ("literal data of the wrong length", lambda d, s: _edit_json(
        d, lambda doc: doc["jaxpr"]["eqns"][1]["invars"].__setitem__(1, {"literal": {
            "kind": "typed", "hex": "00" * 9, "dtype": "int8", "shape": [], "weak_type": False}})),
     "wrong length"),
    ("wrong output shape", lambda d, s: _edit_json(
        d, lambda doc: _first_eqn(doc)["outvars"][0].update(shape=[7])), "the file says"),
    ("newer version", lambda d, s: _edit_json(d, lambda doc: doc.update(version=99)),
     "upgrade xlaprobe"),
    ("deep nesting", lambda d, s: (d / "jaxpr.json").write_text("[" * 100000 + "]" * 100000),
     "jaxpr.json"),
]


@pytest.mark.parametrize("tamper, words", [c[1:] for c in CRAFTED], ids=[c[0] for c in CRAFTED])
def test_crafted_artifact_is_refused_in_one_line(tmp_path, tamper, words):
    directory = make_artifact(tmp_path / "a")
    sentinel = tmp_path / "written"
    tamper(directory, sentinel)
    with pytest.raises(CorruptArtifact, match=words) as info:
        load_artifact(directory)
    assert "\n" not in str(info.value)
    assert not sentinel.exists()


def test_schema_one_refusal_names_the_command(tmp_path):
    directory = make_artifact(tmp_path / "a")
    _schema_one(directory, tmp_path / "written")
    with pytest.raises(CorruptArtifact, match=r"regenerate it with xlaprobe check \S*int8"):
        load_artifact(directory)
