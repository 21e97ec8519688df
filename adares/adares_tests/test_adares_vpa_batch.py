"""The vectorized VPA histograms and memory peaks equal the scalar port, sample by sample."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from adares.vpa.batch import BatchDecayingHistogram, BatchMemoryPeaks
from adares.vpa.histogram import CPU_HISTOGRAM_OPTIONS, MEMORY_HISTOGRAM_OPTIONS, DecayingHistogram
from adares.vpa.recommender import MIB, ContainerAggregate

DAY = 86400.0
PCTS = (0.0, 0.5, 0.9, 0.95, 1.0)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31), n=st.integers(1, 5), steps=st.integers(1, 60),
       dt=st.sampled_from([300.0, 3600.0, 5 * DAY]))
def test_batch_cpu_histogram_equals_scalar(seed, n, steps, dt):
    rng = np.random.default_rng(seed)
    batch = BatchDecayingHistogram(n, CPU_HISTOGRAM_OPTIONS, DAY)
    ref = [DecayingHistogram(CPU_HISTOGRAM_OPTIONS, DAY) for _ in range(n)]
    t = 1_700_000_000.0
    for _ in range(steps):
        v = rng.lognormal(0.0, 1.5, n) * (rng.random(n) > 0.1)
        w = rng.uniform(0.1, 4.0, n)
        batch.add(v, w, t)
        for i in range(n):
            ref[i].add_sample(v[i], w[i], t)
        t += dt * rng.uniform(0.5, 1.5)
    for p in PCTS:
        got = batch.percentile(p)
        assert got.tolist() == [h.percentile(p) for h in ref]
    assert batch.lo.tolist() == [h.min_bucket for h in ref]
    assert batch.hi.tolist() == [h.max_bucket for h in ref]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31), n=st.integers(1, 4), steps=st.integers(1, 80))
def test_batch_memory_peaks_and_ooms_equal_scalar(seed, n, steps):
    rng = np.random.default_rng(seed)
    hist = BatchDecayingHistogram(n, MEMORY_HISTOGRAM_OPTIONS, DAY)
    peaks = BatchMemoryPeaks(hist)
    ref = [ContainerAggregate() for _ in range(n)]
    t = 1_700_000_000.0
    for _ in range(steps):
        used = np.trunc(rng.uniform(0.1, 8.0, n) * 2**30)
        peaks.add(t, used)
        for i in range(n):
            assert ref[i].add_memory_sample(t, int(used[i]))
        oom = rng.random(n) < 0.2
        req = np.trunc(rng.uniform(0.1, 8.0, n) * 2**30)
        if oom.any():
            peaks.record_oom(t, req, oom)
            for i in np.flatnonzero(oom):
                ref[i].record_oom(t, int(req[i]))
        t += rng.choice([300.0, 3 * 3600.0, 2 * DAY])
    for p in PCTS:
        assert hist.percentile(p).tolist() == [c.state.memory_peaks.percentile(p) for c in ref]
    assert np.allclose(hist.total, [c.state.memory_peaks.total_weight for c in ref], rtol=1e-12)
    assert peaks.oom_peak.tolist() == [float(c.oom_peak) for c in ref]
    assert MIB == 2**20
