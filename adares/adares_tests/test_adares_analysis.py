"""analysis/throttle_by_kind.py: the hour after a rise from idle, on a series with a known
answer."""

import importlib.util
from pathlib import Path

import numpy as np

_PATH = Path(__file__).resolve().parents[1] / "analysis" / "throttle_by_kind.py"


def _module():
    spec = importlib.util.spec_from_file_location("throttle_by_kind", _PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_hour_after_a_rise_from_idle():
    cpu = np.full((60, 2), 0.01)
    cpu[20:40, 0] = 0.8            # VM 0: a job from idle at step 20
    cpu[:, 1] = 0.5                # VM 1: busy all along, never a rise
    after = _module()._after_rise(cpu, np.array([1.0, 1.0]))
    assert np.flatnonzero(after[:, 0]).tolist() == list(range(20, 32))
    assert not after[:, 1].any()
