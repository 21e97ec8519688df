import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file

from geodml.data import load_dataset, make_ctr, raw_nbytes
from geodml.errors import GeodmlError


@pytest.mark.parametrize("name", ["breast_cancer", "digits", "wine", "iris"])
def test_sklearn_sets_are_binary_standardized_and_split(name):
    ds = load_dataset(f"sklearn:{name}", seed=0)
    assert set(np.unique(ds.y_train)) == {0.0, 1.0}
    np.testing.assert_allclose(ds.X_train.mean(axis=0), 0.0, atol=1e-10)
    n = len(ds.y_train) + len(ds.y_test)
    assert len(ds.y_test) == round(0.2 * n)


def test_ctr_has_one_value_per_field_and_the_requested_click_rate():
    X, y = make_ctr(20000, features=1000, fields=10, positive_rate=0.25, seed=1)
    assert sp.isspmatrix_csr(X) and X.shape == (20000, 1000)
    assert X.dtype == np.float32 and X.indices.dtype == np.int32
    assert np.all(np.diff(X.indptr) == 10)
    # one non-zero per field slice of width 100
    fields = X.indices.reshape(-1, 10) // 100
    assert np.all(fields == np.arange(10))
    assert 0.18 < y.mean() < 0.32
    # heavy tail: the most popular value of field 0 is far above uniform (1/100)
    counts = np.bincount(X.indices.reshape(-1, 10)[:, 0], minlength=100)
    assert counts.max() / 20000 > 0.05


def test_raw_nbytes_is_the_csr_closed_form():
    X, y = make_ctr(500, features=256, fields=4, seed=0)
    assert X.indptr.dtype == np.int32
    assert raw_nbytes(X, y) == X.nnz * (4 + 4) + (500 + 1) * 4 + 500 * 8
    D = np.zeros((7, 3))
    assert raw_nbytes(D, np.zeros(7)) == 7 * 3 * 8 + 7 * 8


def test_libsvm_round_trip(tmp_path):
    X, y = make_ctr(300, features=64, fields=4, seed=0)
    path = tmp_path / "d.svm"
    dump_svmlight_file(X, np.where(y > 0, 1, -1), str(path))
    ds = load_dataset(f"libsvm:{path}", seed=0)
    assert ds.X_train.shape[0] + ds.X_test.shape[0] == 300
    assert ds.y_train.sum() + ds.y_test.sum() == y.sum()


@pytest.mark.parametrize("spec", ["sklearn:mnist", "nope", "ctr:rows=abc", "ctr:bogus=1", "ctr:rows", "libsvm:/no/such/file", "ctr:rows=0",
                                  # each of these was a traceback (numpy) or, for zipf, accepted
                                  "ctr:seed=-1", "ctr:rows=100,positive_rate=2", "ctr:rows=100,positive_rate=nan",
                                  "ctr:rows=100,zipf=-1", "ctr:rows=inf", "ctr:rows=1000000000000",
                                  "ctr:rows=100,features=100000000000"])
def test_bad_specs_raise_geodml_error(spec):
    with pytest.raises(GeodmlError):
        load_dataset(spec)


def test_malformed_libsvm_file(tmp_path):
    p = tmp_path / "bad.svm"
    p.write_text("1 3:x 4:1\nnot a line\n")
    with pytest.raises(GeodmlError, match="malformed libsvm"):
        load_dataset(f"libsvm:{p}")


def test_libsvm_with_nan_or_inf_is_refused(tmp_path):
    p = tmp_path / "nan.svm"
    p.write_text("1 1:nan 2:1\n0 1:1\n1 2:inf\n0 1:2\n")
    with pytest.raises(GeodmlError, match="nan or infinite"):
        load_dataset(f"libsvm:{p}")


@pytest.mark.parametrize("index", ["3000000000", "99999999999999999999999", "2000000000"])
def test_libsvm_with_a_huge_feature_index_is_refused_before_allocating(tmp_path, index):
    # 3e9 and 1e23 overflow the loader or int32; 2e9 fits int32 but its model (16 GB per vector)
    # does not fit in this machine's memory 64 times over
    p = tmp_path / "big.svm"
    p.write_text(f"1 {index}:1\n0 1:1\n1 2:1\n0 1:2\n1 1:1\n")
    with pytest.raises(GeodmlError, match="libsvm file"):
        load_dataset(f"libsvm:{p}")
