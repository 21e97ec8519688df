"""The VPA port against the Go unit tests' vectors (kubernetes/autoscaler,
vertical-pod-autoscaler/pkg/recommender). Vectors reproduced here:

util/histogram_options_test.go: TestLinearHistogramOptions, TestExponentialHistogramOptions
util/histogram_test.go: TestPercentilesEmptyHistogram, TestPercentiles, TestPercentileOutOfBounds,
    TestEmptyHistogram, TestNonEmptyOnEpsilonAddition, TestHistogramMerge
util/decaying_histogram_test.go: TestPercentilesEmptyDecayingHistogram, TestSimpleDecay,
    TestLongtermDecay, TestDecayingHistogramPercentiles, TestNoDecay, TestDecayingHistogramMerge
logic/estimator_test.go: TestPercentileEstimator, TestConfidenceMultiplier (907.46 cores,
    9.0746e11 bytes, confidence 0.00625), TestConfidenceMultiplierWithCustomInterval (4.521 cores,
    4.5216e9 bytes, confidence 0.5), TestConfidenceMultiplierNoHistory, TestMarginEstimator,
    TestMinResourcesEstimator
model/container_test.go: TestAggregateContainerUsageSamples, TestRecordOOMIncreasedByBumpUp,
    TestRecordOOMDontRunAway, TestRecordOOMIncreasedByMin, TestRecordOOMMaxedWithKnownSample,
    TestRecordOOMDiscardsOldSample, TestRecordOOMInNewWindow
"""

import math

import pytest

from adares.vpa.histogram import (
    CPU_HISTOGRAM_OPTIONS,
    MEMORY_HISTOGRAM_OPTIONS,
    DecayingHistogram,
    ExponentialHistogramOptions,
    Histogram,
    LinearHistogramOptions,
)
from adares.vpa.recommender import (
    MIB,
    AggregateState,
    ConfidenceMultiplier,
    Const,
    ContainerAggregate,
    CPUPercentile,
    Margin,
    MemoryPercentile,
    MinResource,
    confidence,
    cores_from_cpu_amount,
    cpu_amount_from_cores,
    memory_amount_from_bytes,
    recommend,
)

WEIGHT_EPS = 1e-15
OPTS = LinearHistogramOptions(10.0, 1.0, WEIGHT_EPS)
START = 1234567890.0
HOUR = 3600.0
DAY = 24 * HOUR


def close(expected: float, actual: float, rel: float = 1e-15) -> bool:
    return math.isclose(actual, expected, rel_tol=rel)


def test_linear_options():
    o = LinearHistogramOptions(5.0, 0.3, 0.001)
    assert o.num_buckets == 18
    assert o.bucket_start(0) == 0.0 and o.bucket_start(17) == 5.1
    assert [o.find_bucket(v) for v in (-1.0, 0.0, 1.3, 100.0)] == [0, 0, 4, 17]


def test_exponential_options():
    o = ExponentialHistogramOptions(500.0, 40.0, 1.5, 0.001)
    assert o.num_buckets == 6
    assert [o.bucket_start(b) for b in range(6)] == [0.0, 40.0, 100.0, 190.0, 325.0, 527.5]
    assert [o.find_bucket(v) for v in (-1.0, 39.99, 40.0, 100.0, 900.0)] == [0, 0, 1, 2, 5]
    with pytest.raises(IndexError):
        o.bucket_start(6)
    with pytest.raises(ValueError):
        ExponentialHistogramOptions(500.0, 40.0, 1.0, 0.001)


@pytest.mark.parametrize("make", [lambda: Histogram(OPTS), lambda: DecayingHistogram(OPTS, HOUR)])
def test_empty_percentiles(make):
    h = make()
    assert [h.percentile(p) for p in (-0.5, 0.0, 0.5, 1.0, 1.5)] == [0.0] * 5


PCT_1234 = {0.0: 2, 0.1: 2, 0.2: 3, 0.3: 3, 0.4: 4, 0.5: 4, 0.6: 4, 0.7: 5, 0.8: 5, 0.9: 5, 1.0: 5}


def test_percentiles():
    h = Histogram(OPTS)
    for i in range(1, 5):
        h.add_sample(float(i), float(i))
    for p, v in PCT_1234.items():
        assert close(v, h.percentile(p)), p


def test_no_decay_is_plain_histogram():
    h = DecayingHistogram(OPTS, HOUR)
    for i in range(1, 5):
        h.add_sample(float(i), float(i), START)
    for p, v in PCT_1234.items():
        assert close(v, h.percentile(p)), p


def test_percentile_out_of_bounds():
    h = Histogram(LinearHistogramOptions(1.0, 0.1, WEIGHT_EPS))
    h.add_sample(0.1, 0.1)
    h.add_sample(0.2, 0.2)
    assert close(0.2, h.percentile(-0.1)) and close(0.3, h.percentile(1.1))
    h.add_sample(0.0, 0.1)
    h.add_sample(1.0, 0.2)
    assert close(0.1, h.percentile(-0.1)) and close(1.0, h.percentile(1.1))


def test_empty_and_epsilon():
    h = Histogram(LinearHistogramOptions(1.0, 0.1, WEIGHT_EPS))
    assert h.is_empty()
    h.add_sample(0.1, WEIGHT_EPS * 2.5)
    assert not h.is_empty()
    h.subtract_sample(0.1, WEIGHT_EPS)
    assert not h.is_empty()
    h.subtract_sample(0.1, WEIGHT_EPS)
    assert h.is_empty()
    h = Histogram(LinearHistogramOptions(1.0, 0.1, WEIGHT_EPS))
    h.add_sample(9.9, WEIGHT_EPS * 3)
    h.add_sample(0.1, WEIGHT_EPS * 0.3)
    h.add_sample(999.9, WEIGHT_EPS * 0.3)
    assert not h.is_empty()


def test_merge():
    h1, h2, exp = Histogram(OPTS), Histogram(OPTS), Histogram(OPTS)
    for v in (1, 2):
        h1.add_sample(v, 1)
    for v in (2, 3):
        h2.add_sample(v, 1)
    for v in (1, 2, 2, 3):
        exp.add_sample(v, 1)
    h1.merge(h2)
    assert h1.equals(exp)


def test_simple_decay():
    h = DecayingHistogram(OPTS, HOUR)
    h.add_sample(2, 1000, START)
    h.add_sample(1, 1, START + 20 * HOUR)
    assert close(2, h.percentile(0.999)) and close(3, h.percentile(1.0))


def test_longterm_decay():
    h = DecayingHistogram(OPTS, HOUR)
    h.add_sample(2, 1, START)
    h.add_sample(1, 1, START + 101 * HOUR)
    assert close(2, h.percentile(1.0))


def test_decaying_percentiles():
    h = DecayingHistogram(OPTS, HOUR)
    for i in range(1, 5):
        h.add_sample(float(i), float(i), START + (i - 1) * HOUR)
    expected = {0.0: 2, 0.02: 2, 0.03: 3, 0.10: 3, 0.11: 4, 0.34: 4, 0.35: 5, 1.0: 5}
    for p, v in expected.items():
        assert close(v, h.percentile(p)), p


def test_decaying_merge():
    h1, h2, exp = (DecayingHistogram(OPTS, HOUR) for _ in range(3))
    h1.add_sample(1, 1, START)
    h1.add_sample(2, 1, START + HOUR)
    h2.add_sample(2, 1, START + 2 * HOUR)
    h2.add_sample(3, 1, START + HOUR)
    exp.add_sample(2, 1, START + 2 * HOUR)
    exp.add_sample(2, 1, START + HOUR)
    exp.add_sample(3, 1, START + HOUR)
    exp.add_sample(1, 1, START)
    h1.merge(h2)
    assert h1.equals(exp)


def test_percentile_estimator():
    s = AggregateState(Histogram(CPU_HISTOGRAM_OPTIONS), Histogram(MEMORY_HISTOGRAM_OPTIONS))
    for v in (1.0, 2.0, 3.0):
        s.cpu.add_sample(v, 1.0)
        s.memory_peaks.add_sample(v * 1e9, 1.0)
    assert close(1.0, cores_from_cpu_amount(CPUPercentile(0.2).estimate(s)), 0.05)
    assert close(2e9, MemoryPercentile(0.5).estimate(s), 0.05)


def _nine_cpu_samples() -> ContainerAggregate:
    c = ContainerAggregate(cpu_weight_by_request=False)
    for i in range(9):
        assert c.add_cpu_sample(i * 120.0, cpu_amount_from_cores(1.0))
    return c


def test_confidence_multiplier():
    cpu, mem = Const(cpu_amount_from_cores(3.14)), Const(memory_amount_from_bytes(3.14e9))
    empty = AggregateState.new()
    assert ConfidenceMultiplier(1.0, 1.0, cpu).estimate(empty) == int(1e14)
    assert ConfidenceMultiplier(1.0, -1.0, cpu).estimate(empty) == 0
    s = _nine_cpu_samples().state
    assert confidence(s, DAY) == 0.00625
    assert cores_from_cpu_amount(ConfidenceMultiplier(0.1, 2.0, cpu).estimate(s)) == 907.46
    assert ConfidenceMultiplier(0.1, 2.0, mem).estimate(s) == 9.0746e11
    # Custom 18-minute interval: confidence 9/18.
    assert confidence(s, 18 * 60.0) == 0.5
    assert cores_from_cpu_amount(ConfidenceMultiplier(0.1, 2.0, cpu, 18 * 60.0).estimate(s)) == 4.521
    assert ConfidenceMultiplier(0.1, 2.0, mem, 18 * 60.0).estimate(s) == 4.5216e9
    assert ConfidenceMultiplier(0.1, 2.0, cpu).estimate(empty) == int(1e14)


def test_margin_and_min_resources():
    s = AggregateState.new()
    assert cores_from_cpu_amount(Margin(0.1, Const(cpu_amount_from_cores(3.14))).estimate(s)) == 3.454
    assert Margin(0.1, Const(memory_amount_from_bytes(3.14e9))).estimate(s) == 3.454e9
    assert cores_from_cpu_amount(MinResource(200, Const(3140)).estimate(s)) == 3.14
    assert MinResource(int(2e7), Const(int(4e8))).estimate(s) == 4e8


def _peaks(events) -> DecayingHistogram:
    h = DecayingHistogram(MEMORY_HISTOGRAM_OPTIONS, DAY)
    for op, v, t in events:
        (h.add_sample if op == "add" else h.subtract_sample)(v, 1.0, t)
    return h


def test_container_usage_samples():
    c = ContainerAggregate(cpu_weight_by_request=False)
    step = DAY / 2
    assert c.add_cpu_sample(START, 3140) and c.add_memory_sample(START, 5)
    assert c.add_cpu_sample(START + step, 6280) and c.add_memory_sample(START + step, 10)
    assert c.add_cpu_sample(START + 2 * step, 1570) and c.add_memory_sample(START + 2 * step, 2)
    assert not c.add_cpu_sample(START + 2 * step, 1000)   # out of order
    assert not c.add_cpu_sample(START + 4 * step, -1000)  # negative
    assert not c.add_memory_sample(START + 4 * step, -1000)
    w1, w2 = START + DAY, START + 2 * DAY
    assert c.state.memory_peaks.equals(
        _peaks([("add", 5, w1), ("sub", 5, w1), ("add", 10, w1), ("add", 2, w2)]))
    cpu = DecayingHistogram(CPU_HISTOGRAM_OPTIONS, DAY)
    for v, t in ((3.14, START), (6.28, START + step), (1.57, START + 2 * step)):
        cpu.add_sample(v, 0.1, t)
    assert c.state.cpu.equals(cpu) and c.state.total_samples == 3


MB = float(MIB)


@pytest.mark.parametrize("requested, expected", [(1000, 1200), (1, 101)])
def test_oom_bump(requested, expected):
    c = ContainerAggregate()
    c.record_oom(START, int(requested * MB))
    assert c.state.memory_peaks.equals(_peaks([("add", expected * MB, START + DAY)]))
    assert c.oom_peak == int(expected * MB)


def test_oom_dont_run_away():
    c = ContainerAggregate()
    w = START + DAY
    c.record_oom(START, int(1000 * MB))
    c.record_oom(START, int(999 * MB))
    c.record_oom(START, int(999 * MB))
    assert c.state.memory_peaks.equals(_peaks([("add", 1200 * MB, w)]))
    c.record_oom(START, int(2000 * MB))
    assert c.state.memory_peaks.equals(
        _peaks([("add", 1200 * MB, w), ("sub", 1200 * MB, w), ("add", 2400 * MB, w)]))


def test_oom_maxed_with_known_sample_and_stale_and_new_window():
    c = ContainerAggregate()
    w = START + DAY
    assert c.add_memory_sample(START, int(3000 * MB))
    c.record_oom(START, int(1000 * MB))
    assert c.state.memory_peaks.equals(
        _peaks([("add", 3000 * MB, w), ("sub", 3000 * MB, w), ("add", 3600 * MB, w)]))
    c = ContainerAggregate()
    assert c.add_memory_sample(START, int(1000 * MB))
    with pytest.raises(ValueError):
        c.record_oom(START - 30 * HOUR, int(1000 * MB))
    c = ContainerAggregate()
    assert c.add_memory_sample(START, int(2000 * MB))
    c.record_oom(START + 2 * DAY, int(1000 * MB))
    assert c.state.memory_peaks.equals(
        _peaks([("add", 2000 * MB, w), ("add", 2400 * MB, w + 2 * DAY)]))


def test_recommend_defaults_minimums_and_margin():
    c = ContainerAggregate(request_cpu=1000, request_memory=int(2e9))
    r = recommend(c.state)
    assert (r.target_cpu, r.target_memory) == (25, 250 * MIB)  # minimums on empty history
    for i in range(288 * 3):
        t = START + 300.0 * i
        c.add_cpu_sample(t, 500)
        c.add_memory_sample(t, int(1e9))
    r = recommend(c.state)
    # One bucket holds all samples: p90 is its end; 15% margin on top.
    b = CPU_HISTOGRAM_OPTIONS.find_bucket(0.5)
    end = cpu_amount_from_cores(CPU_HISTOGRAM_OPTIONS.bucket_start(b + 1))
    assert r.target_cpu == end + int(end * 0.15)
    assert r.lower_cpu <= r.target_cpu <= r.upper_cpu
    assert r.lower_memory <= r.target_memory <= r.upper_memory
