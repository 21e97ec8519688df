"""A data center's ClientApp failing mid-run on Flower's simulation engine (real engine, real
Ray workers; the failure is injected into one DC's DCWorker by geodml_tests/inject/
sitecustomize.py, which every process of the run loads): an exception, a worker process that
dies, a ClientApp that hangs. Each ends `geodml compare --flower` with one error line and exit 2
within a bounded time, where a hang used to keep the run waiting for ever (Flower's Grid waits
for a reply with no timeout, and its engine waits for every running ClientApp before stopping)."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

INJECT = Path(__file__).parent / "inject"
SRC = Path(__file__).resolve().parents[1] / "src"
RUN = ["compare", "--flower", "--data", "sklearn:breast_cancer", "--algos", "fedavg", "--rounds", "5",
       "--local-steps", "5", "--flower-timeout", "15"]


def _compare_with_failure(how: str, dc: int = 1, at_call: int = 3, limit_s: float = 240.0):
    """Run the CLI with DC ``dc``'s ClientApp failing (``how``) from its ``at_call``-th
    computation (round 3 of FedAvg); (exit code, stderr lines, seconds)."""
    env = dict(os.environ, GEODML_INJECT=how, GEODML_INJECT_DC=str(dc), GEODML_INJECT_CALL=str(at_call),
               PYTHONPATH=os.pathsep.join([str(INJECT), str(SRC), os.environ.get("PYTHONPATH", "")]))
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", "from geodml.entry import main; main()", *RUN],
                          capture_output=True, text=True, env=env, timeout=limit_s)
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    return proc.returncode, lines, time.perf_counter() - t0


@pytest.mark.slow
@pytest.mark.parametrize("how, message", [
    ("raise", "geodml: error: a Flower ClientApp failed: injected failure in data center 1"),
    ("exit", "geodml: error: a Flower ClientApp failed: The actor is dead because its worker process has died."),
    ("hang", "geodml: error: no reply from the Flower ClientApp(s) of us-west"),
])
def test_a_dc_failing_mid_run_ends_the_flower_run_with_one_line_and_exit_2(how, message):
    pytest.importorskip("flwr", reason="Flower is not installed (pip install 'geodml[flower]')")
    pytest.importorskip("ray", reason="Flower's simulation engine needs Ray (pip install 'geodml[flower]')")
    code, lines, seconds = _compare_with_failure(how)
    assert code == 2, lines[-5:]
    # Progress lines come first; the failure is the last line, after round 2 (the injection at
    # DC 1's third computation is mid-run), and no traceback.
    assert any("fedavg round 2" in x for x in lines) and not any("fedavg round 3" in x for x in lines)
    assert lines[-1].startswith(message), lines[-1]
    assert not any("Traceback" in x for x in lines)
    if how == "hang":
        assert "within 15 s" in lines[-1]
    assert seconds < 240
