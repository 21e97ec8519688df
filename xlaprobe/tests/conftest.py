"""Shared fixtures: one worker pool per test session (worker start-up costs ~2 s)."""

import os
import sys

import pytest

# Spawned workers import test helper modules (tests.worker_kinds): keep the repo root importable.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
# Subprocesses (the CLI, pytest runs of the plugin) import the xlaprobe under test, whatever
# checkout an editable install of the environment points at.
SRC = os.path.join(ROOT, "src")
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [SRC, ROOT,
                                                         os.environ.get("PYTHONPATH", "")]))


@pytest.fixture(scope="session")
def pool():
    from xlaprobe.workers import WorkerPool
    with WorkerPool(size=1, timeout_s=300) as shared:
        yield shared


@pytest.fixture(autouse=True)
def _x64_restored():
    """Programs with float64 inputs switch jax's process-wide x64 flag on (`enable_x64_for`);
    each test leaves it as it found it, so later tests' float32 programs stay float32."""
    import jax
    before = jax.config.jax_enable_x64
    yield
    if jax.config.jax_enable_x64 != before:
        jax.config.update("jax_enable_x64", before)
