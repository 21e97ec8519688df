"""Shared fixtures: one worker pool per test session (worker start-up costs ~2 s)."""

import os
import sys

import pytest

# Spawned workers import test helper modules (tests.worker_kinds): keep the repo root importable.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH", "")]))


@pytest.fixture(scope="session")
def pool():
    from xlaprobe.workers import WorkerPool
    with WorkerPool(size=1, timeout_s=300) as shared:
        yield shared
