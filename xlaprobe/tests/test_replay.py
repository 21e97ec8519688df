"""Every replay command xlaprobe prints reproduces its finding (exit 1), run as a user pastes it:
the ``replay:`` line under each finding of ``check`` and of ``findings ID``, for a real XLA:CPU
bug (tests/cases/cbrt_subnormal.py, wrong on jax 0.12), a planted mutant, and a real eager-only
crash (a dead reduce_window with negative padding: the whole-program compile drops it, op by op it
aborts the compiler)."""

import os
import pathlib
import shlex
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

MUTANT_FILE = '''\
import jax.numpy as jnp
import numpy as np


def fn(x, y):
    return jnp.exp(x - y) * 2.0


def fn_inputs():
    return np.linspace(-1, 1, 8, dtype=np.float32), np.linspace(0, 3, 8, dtype=np.float32)
'''

DEAD_OP_FILE = '''\
import numpy as np
from jax import lax


def fn(x):
    # dead: nothing uses it, so jit's whole-program compile drops it; op by op XLA:CPU's
    # algebraic simplifier aborts on it (tests/fuzz_cases/reduce_window_negative_padding_abort.py)
    lax.reduce_window(x, -np.inf, lax.max, (1,), (1,), ((-1, 0),))
    return x * 2.0


def fn_inputs():
    return (np.array([3.0, 5.0], np.float32),)
'''


def _env():
    # The checkout under test, whatever the cwd (the tests run in a temporary directory).
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
                JAX_PLATFORMS="cpu")


def _run(argv, cwd):
    return subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env=_env(), timeout=600)


def _xlaprobe(cwd, *args):
    return _run([sys.executable, "-m", "xlaprobe.cli", *args], cwd)


def _replays(text):
    """The commands of every ``replay:`` line of `text`, each as an argv."""
    commands = []
    for line in text.splitlines():
        if line.strip().startswith("replay:"):
            for command in line.split("replay:", 1)[1].split("   or   "):
                argv = shlex.split(command)
                head = {"python": [sys.executable], "xlaprobe": [sys.executable, "-m",
                                                                  "xlaprobe.cli"]}[argv[0]]
                commands.append(head + argv[1:])
    return commands


def _resolved(commands, cwd):
    """`commands` with each argument that names a file or folder under `cwd` made absolute."""
    return [[str((cwd / a).resolve()) if (cwd / a).exists() else a for a in argv]
            for argv in commands]


@pytest.mark.slow
@pytest.mark.parametrize("target, configs, finding_config, source", [
    (str(ROOT / "tests" / "cases" / "cbrt_subnormal.py"), "xla", "xla", None),
    ("mutated.py:fn", "mutant:swap-subtract-fused", "mutant:swap-subtract-fused", MUTANT_FILE),
    ("deadop.py:fn", "xla,eager", "eager", DEAD_OP_FILE),
], ids=["real-xla-bug", "mutant", "eager-only"])
def test_every_printed_replay_reproduces(tmp_path, target, configs, finding_config, source):
    if source is not None:
        (tmp_path / target.split(":")[0]).write_text(source)
    check = _xlaprobe(tmp_path, "check", target, "--configs", configs, "--db", "x.db")
    assert check.returncode == 1, check.stdout + check.stderr
    assert f"finding 1: {finding_config} " in check.stdout, check.stdout
    assert "finding 2" not in check.stdout, check.stdout  # eager-only: xla passes
    shown = _xlaprobe(tmp_path, "findings", "1", "--db", "x.db")
    assert shown.returncode == 0, shown.stderr
    commands = _replays(check.stdout)
    assert len(commands) == 2, check.stdout
    # findings ID prints the same commands (paths may be spelled absolute there)
    assert _resolved(_replays(shown.stdout), tmp_path) == _resolved(commands, tmp_path), shown.stdout
    for argv in commands:
        replay = _run(argv, tmp_path)
        assert replay.returncode == 1, (argv, replay.stdout[-2000:], replay.stderr[-2000:])
    repro = (pathlib.Path(tmp_path) / commands[0][1]).read_text()
    if finding_config.startswith("mutant:"):
        assert "Needs jax, numpy and xlaprobe" in repro.splitlines()[0]
        assert "install('swap-subtract-fused')" in repro
    if finding_config == "eager":
        assert "jax.disable_jit()" in repro and "_p.bind" not in repro


def test_replay_line_quotes_paths_and_skips_python_for_other_releases():
    from xlaprobe.verdicts import replay_line
    assert _replays(replay_line("xla:O0", "my dir/a-xla")) == [
        [sys.executable, "my dir/a-xla/repro.py"],
        [sys.executable, "-m", "xlaprobe.cli", "check", "my dir/a-xla", "--configs",
         "xla:O0,reference"]]
    line = replay_line("jaxlib==0.4.33", "a")
    assert "python" not in line and textwrap.dedent(line).endswith("--configs 'jaxlib==0.4.33,reference'")
