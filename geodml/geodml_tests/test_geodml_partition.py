import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from geodml.errors import GeodmlError
from geodml.partition import partition


def _covers(parts, n):
    allidx = np.concatenate(parts)
    assert len(allidx) == n
    assert np.array_equal(np.sort(allidx), np.arange(n))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(40, 400), k=st.integers(1, 5), seed=st.integers(0, 1000),
       spec=st.sampled_from(["iid", "dirichlet:5", "covariate:0.5", "covariate:1", "covariate:0"]))
def test_every_row_in_exactly_one_dc(n, k, seed, spec):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = (rng.random(n) < 0.5).astype(float)
    y[:2] = [0, 1]
    try:
        parts = partition(spec, X, y, k, seed=seed)
    except GeodmlError as e:
        assert "empty" in str(e)
        return
    assert len(parts) == k
    _covers(parts, n)


def test_dirichlet_small_alpha_skews_labels():
    rng = np.random.default_rng(0)
    y = (rng.random(20000) < 0.5).astype(float)
    X = np.zeros((20000, 1))
    iid = [y[p].mean() for p in partition("iid", X, y, 4, seed=0)]
    skew = [y[p].mean() for p in partition("dirichlet:0.3", X, y, 4, seed=0)]
    assert np.ptp(iid) < 0.05
    assert np.ptp(skew) > 0.3


def test_covariate_shift_separates_feature_means():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(8000, 5))
    y = np.zeros(8000)
    parts = partition("covariate:1", X, y, 4, seed=0)
    means = np.array([X[p].mean(axis=0) for p in parts])
    assert np.abs(means).max() > 0.5
    parts0 = partition("covariate:0", X, y, 4, seed=0)
    assert np.abs(np.array([X[p].mean(axis=0) for p in parts0])).max() < 0.15


def test_unequal_sizes_follow_weights():
    y = np.zeros(1000)
    parts = partition("unequal:1,2,3,4", np.zeros((1000, 1)), y, 4)
    assert [len(p) for p in parts] == [100, 200, 300, 400]


@pytest.mark.parametrize("spec,k", [("dirichlet:abc", 3), ("dirichlet:-1", 3), ("covariate:2", 3), ("unequal:1,2", 3),
                                    ("unequal:1,0,1", 3), ("zipf", 3), ("iid", 0), ("iid:3", 2)])
def test_malformed_specs(spec, k):
    with pytest.raises(GeodmlError):
        partition(spec, np.zeros((50, 1)), np.zeros(50), k)


def test_empty_partition_is_an_error():
    with pytest.raises(GeodmlError, match="empty"):
        partition("iid", np.zeros((3, 1)), np.zeros(3), 5)
    with pytest.raises(GeodmlError, match="empty"):
        partition("unequal:1,1000", np.zeros((100, 1)), np.zeros(100), 2)


def test_dirichlet_redraws_until_no_data_center_is_empty():
    # breast_cancer's 455 training rows, 2 classes, alpha 0.3, 4 DCs, seed 0: the first draw
    # leaves a DC empty (the README's own example failed on it); a redraw gives a valid split.
    from geodml.data import load_dataset

    ds = load_dataset("sklearn:breast_cancer", seed=0)
    parts = partition("dirichlet:0.3", ds.X_train, ds.y_train, 4, seed=0)
    assert all(len(p) > 0 for p in parts)
    assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(len(ds.y_train)))
    # alpha so small that every class lands on one DC: 2 classes cannot fill 4 DCs, ever.
    with pytest.raises(GeodmlError, match="empty in each of 100 draws"):
        partition("dirichlet:1e-6", np.zeros((40, 1)), np.repeat([0, 1], 20), 4)


def test_unequal_zero_weight_says_what_is_wrong():
    with pytest.raises(GeodmlError, match="positive and finite"):
        partition("unequal:1,0,1,1", np.zeros((50, 1)), np.zeros(50), 4)


def test_huge_unequal_weights_and_infinite_alpha():
    parts = partition("unequal:1e308,1e308", np.zeros((10, 1)), np.zeros(10), 2)
    assert [len(p) for p in parts] == [5, 5]
    with pytest.raises(GeodmlError, match="malformed"):
        partition("dirichlet:inf", np.zeros((10, 1)), np.zeros(10), 2)
