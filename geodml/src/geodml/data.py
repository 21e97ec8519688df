"""Datasets: scikit-learn's bundled sets, a synthetic sparse CTR-like generator, LIBSVM files.

Every dataset is a binary classification problem with labels in {0, 1} (float64) and features as a
dense float64 array or a scipy.sparse CSR matrix (float32 values, int32 indices, like hashed CTR
logs). Nothing is downloaded.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from geodml.errors import GeodmlError
from geodml.paths import existing_file

Matrix = np.ndarray | sp.csr_matrix

_SKLEARN_SETS = ("breast_cancer", "digits", "wine", "iris")


@dataclass(frozen=True)
class Dataset:
    """A train/test split.

    X_train: (n_train, d) dense float64 or CSR; y_train: (n_train,) float64 in {0, 1};
    X_test, y_test likewise. ``name`` is the spec it was loaded from. Tables with a place column
    (``dataset:``, ``csv:``, ``parquet:``) also carry the fields below (see realdata.split_table).
    """

    name: str
    X_train: Matrix
    y_train: np.ndarray
    X_test: Matrix
    y_test: np.ndarray
    # A table with a place column (realdata.py): the training rows in source form (a pyarrow
    # Table, what centralizing ships, encoding.py), each training row's place group (int index
    # into places), the groups' names, the place values in each group, the WAN region of each group
    # (None: the WAN's regions in order) and the packaged WAN to use (None: the default).
    source_train: object = None
    place_train: np.ndarray | None = None
    places: tuple[str, ...] = ()
    place_values: tuple[str, ...] = ()
    regions: tuple[str, ...] | None = None
    wan: str | None = None

    @property
    def n_features(self) -> int:
        """Number of features d (the model has d + 1 parameters with the intercept)."""
        return int(self.X_train.shape[1])


def raw_nbytes(X: Matrix, y: np.ndarray) -> int:
    """Bytes of the raw rows as stored (what centralizing must move).

    Dense: X.nbytes + y.nbytes. CSR: data + indices + indptr + labels, the standard compressed
    sparse row layout (a row pointer per row plus one). Returns an int (bytes).
    """
    if sp.issparse(X):
        return int(X.data.nbytes + X.indices.nbytes + X.indptr.nbytes + y.nbytes)
    return int(np.asarray(X).nbytes + y.nbytes)


_INT32_MAX = 2**31 - 1
# The algorithms keep about this many float64 vectors of the model's size at once (L-BFGS
# history, per-DC copies, Adam moments, compression residuals).
_MODEL_VECTORS = 64


def check_model_fits(d: int, what: str) -> None:
    """Raise GeodmlError if _MODEL_VECTORS float64 vectors of d + 1 entries exceed this machine's
    physical memory: one huge feature index in a 20-byte file would otherwise exhaust it."""
    try:
        mem = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return
    need = _MODEL_VECTORS * 8 * (d + 1)
    if need > mem:
        raise GeodmlError(f"{what}: {d} features need about {need / 1e9:.3g} GB of model vectors; this machine has {mem / 1e9:.3g} GB")


def make_ctr(
    rows: int,
    features: int = 2**16,
    fields: int = 20,
    zipf: float = 1.1,
    positive_rate: float = 0.25,
    seed: int = 0,
) -> tuple[sp.csr_matrix, np.ndarray]:
    """Synthetic click-through-rate-like data: one-hot hashed categorical fields, power-law values.

    Each row has exactly ``fields`` non-zeros (value 1.0), one per field; field f owns the feature
    slice [f*V, (f+1)*V) with V = features // fields, and draws its value with probability
    proportional to rank**-zipf (heavy-tailed like real ad logs). Labels follow a logistic model
    with sparse Gaussian true weights, the intercept set so that about ``positive_rate`` of rows
    are positive. Returns (X: CSR (rows, features) float32 / int32 indices, y: (rows,) float64).

    Raises GeodmlError if rows < 1, fields < 1, features < fields, features or rows * fields
    beyond int32 (the CSR indices), zipf < 0, positive_rate outside (0, 1), or seed < 0.
    """
    if rows < 1 or fields < 1 or features < fields:
        raise GeodmlError(f"ctr: need rows >= 1, fields >= 1, features >= fields (got rows={rows}, fields={fields}, features={features})")
    if features > _INT32_MAX or rows * fields > _INT32_MAX:
        raise GeodmlError(f"ctr: features and rows * fields must be <= {_INT32_MAX} (int32 CSR indices); "
                          f"got features={features}, rows * fields={rows * fields}")
    if not (np.isfinite(zipf) and zipf >= 0):
        raise GeodmlError(f"ctr: zipf must be >= 0 and finite, got {zipf}")
    if not 0 < positive_rate < 1:
        raise GeodmlError(f"ctr: positive_rate must be in (0, 1), got {positive_rate}")
    if seed < 0:
        raise GeodmlError(f"ctr: seed must be >= 0, got {seed}")
    check_model_fits(features, "ctr")
    rng = np.random.default_rng(seed)
    vocab = features // fields
    ranks = np.arange(1, vocab + 1, dtype=np.float64)
    p = ranks**-zipf
    p /= p.sum()
    cdf = np.cumsum(p)
    # A random value->slot map per field, so that popular values are spread over the slice.
    u = rng.random((rows, fields))
    local = np.minimum(np.searchsorted(cdf, u), vocab - 1)
    perms = np.stack([rng.permutation(vocab) for _ in range(fields)], axis=1)
    cols = perms[local, np.arange(fields)[None, :]] + (np.arange(fields) * vocab)[None, :]
    cols.sort(axis=1)
    indices = cols.astype(np.int32).ravel()
    indptr = np.arange(0, rows * fields + 1, fields, dtype=np.int64 if rows * fields >= 2**31 else np.int32)
    X = sp.csr_matrix((np.ones(rows * fields, dtype=np.float32), indices, indptr), shape=(rows, features))
    w = rng.normal(0.0, 1.0, features) * (rng.random(features) < 0.3)
    z = X @ w
    b = np.quantile(z, 1.0 - positive_rate)
    y = (rng.random(rows) < 1.0 / (1.0 + np.exp(-(z - b) * 1.5))).astype(np.float64)
    return X, y


def _parse_kv(body: str, allowed: dict[str, type], spec: str) -> dict:
    out: dict = {}
    if not body:
        return out
    for item in body.split(","):
        if "=" not in item:
            raise GeodmlError(f"malformed data spec {spec!r}: expected key=value, got {item!r}")
        k, v = item.split("=", 1)
        k = k.strip()
        if k not in allowed:
            raise GeodmlError(f"malformed data spec {spec!r}: unknown key {k!r} (known: {', '.join(allowed)})")
        try:
            out[k] = allowed[k](float(v)) if allowed[k] is int else allowed[k](v)
        except (ValueError, OverflowError):  # OverflowError: int(float("inf"))
            raise GeodmlError(f"malformed data spec {spec!r}: bad value {v!r} for {k}") from None
    return out


def split_rows(n: int, test_fraction: float, seed: int, name: str) -> tuple[np.ndarray, np.ndarray]:
    """The seeded train/test split of ``n`` rows: (train, test) row indices, each sorted int64.

    ``round(n * test_fraction)`` rows (at least 1) go to test. Raises GeodmlError when fewer than
    2 rows would be left to train on (``name`` is the data spec the message names).
    """
    perm = np.random.default_rng(seed + 7919).permutation(n)
    n_test = max(1, int(round(n * test_fraction)))
    if n - n_test < 2:
        raise GeodmlError(f"data {name!r}: too few rows ({n}) to split into train and test")
    return np.sort(perm[n_test:]), np.sort(perm[:n_test])


def _split(X: Matrix, y: np.ndarray, test_fraction: float, seed: int, name: str) -> Dataset:
    tr, te = split_rows(X.shape[0], test_fraction, seed, name)
    return Dataset(name, X[tr], y[tr], X[te], y[te])


def load_dataset(spec: str, seed: int = 0, test_fraction: float = 0.2) -> Dataset:
    """Load a dataset from a spec string and split it into train and test (seeded, no download).

    Specs:
      ``sklearn:NAME`` - a set bundled with scikit-learn: breast_cancer (binary), digits (label:
      digit >= 5), wine and iris (label: class 0 vs rest); features standardized with the training
      split's mean and standard deviation.
      ``ctr[:rows=R,features=D,fields=F,zipf=A,positive_rate=P]`` - make_ctr (defaults rows=200000,
      features=65536, fields=20).
      ``libsvm:PATH`` - a LIBSVM/SVMlight file (sklearn.datasets.load_svmlight_file); labels > 0
      (or the larger of two values) become 1, others 0.
      ``dataset:NAME[,sample=N]`` - a real dataset a package ships (realdata.DATASETS), with its
      place column.
      ``csv:FILE,label=COL,region=COL[,positive=VALUE][,sample=N]`` (or ``parquet:``) - a user's
      table; every other column a feature (realdata.read_user_table).

    Returns a Dataset. Raises GeodmlError on an unknown or malformed spec, an unreadable file, or
    labels that are not two classes.
    """
    kind, _, body = spec.partition(":")
    kind = kind.strip().lower()
    if kind in ("dataset", "csv", "parquet"):
        return _load_table(kind, body, seed, test_fraction, spec)
    if kind == "sklearn":
        return _load_sklearn(body.strip(), seed, test_fraction, spec)
    if kind == "ctr":
        kw = _parse_kv(body, {"rows": int, "features": int, "fields": int, "zipf": float, "positive_rate": float, "seed": int}, spec)
        rows = kw.pop("rows", 200_000)
        kw.setdefault("seed", seed)
        X, y = make_ctr(rows, **kw)
        return _split(X, y, test_fraction, seed, spec)
    if kind == "libsvm":
        return _load_libsvm(body, seed, test_fraction, spec)
    raise GeodmlError(f"unknown data spec {spec!r} (use sklearn:NAME, ctr[:k=v,...], libsvm:PATH, dataset:NAME, "
                      "csv:FILE,label=COL,region=COL or parquet:FILE,label=COL,region=COL)")


def _load_table(kind: str, body: str, seed: int, test_fraction: float, spec: str) -> Dataset:
    """``dataset:NAME``, ``csv:FILE,label=COL,region=COL[,positive=V]`` or ``parquet:...``, each
    with an optional ``,sample=N`` (a seeded sample of N rows, before the split)."""
    from geodml import realdata

    items = [x for x in body.split(",")]
    sample = None
    for x in list(items):
        if x.strip().startswith("sample="):
            try:
                sample = int(x.strip()[7:])
            except ValueError:
                raise GeodmlError(f"malformed data spec {spec!r}: sample must be a row count") from None
            items.remove(x)
    body = ",".join(items)
    tab = realdata.dataset_table(body.strip()) if kind == "dataset" else realdata.read_user_table(kind, body, spec)
    return realdata.split_table(tab, spec, seed, test_fraction, sample)


def _load_sklearn(name: str, seed: int, test_fraction: float, spec: str) -> Dataset:
    from sklearn import datasets

    from geodml.encoding import matrix_table

    if name not in _SKLEARN_SETS:
        raise GeodmlError(f"unknown scikit-learn dataset {name!r} (known: {', '.join(_SKLEARN_SETS)})")
    X, t = getattr(datasets, f"load_{name}")(return_X_y=True)
    if name == "breast_cancer":
        y = t.astype(np.float64)
    elif name == "digits":
        y = (t >= 5).astype(np.float64)
    else:
        y = (t == 0).astype(np.float64)
    ds = _split(np.asarray(X, dtype=np.float64), y, test_fraction, seed, spec)
    mu = ds.X_train.mean(axis=0)
    sd = ds.X_train.std(axis=0)
    sd[sd == 0] = 1.0
    # what centralizing ships: the values as published; the hub standardizes them
    source = matrix_table(ds.X_train, ds.y_train)
    return Dataset(spec, (ds.X_train - mu) / sd, ds.y_train, (ds.X_test - mu) / sd, ds.y_test, source_train=source)


def _load_libsvm(path: str, seed: int, test_fraction: float, spec: str) -> Dataset:
    from sklearn.datasets import load_svmlight_file

    p = existing_file(path, "libsvm")
    try:
        X, t = load_svmlight_file(str(p), dtype=np.float32)
    except (ValueError, OSError, UnicodeDecodeError, OverflowError) as e:  # OverflowError: an index beyond int64
        raise GeodmlError(f"malformed libsvm file {path!r}: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
    if not np.all(np.isfinite(X.data)) or not np.all(np.isfinite(t)):
        raise GeodmlError(f"malformed libsvm file {path!r}: a value or label is nan or infinite")
    values = np.unique(t)
    if len(values) != 2:
        raise GeodmlError(f"libsvm file {path!r}: need two label values, found {len(values)}")
    y = (t == values[1]).astype(np.float64)
    if X.shape[1] > _INT32_MAX:
        raise GeodmlError(f"libsvm file {path!r}: feature index {X.shape[1]} is beyond int32 (the CSR indices)")
    check_model_fits(X.shape[1], f"libsvm file {path!r}")
    X = sp.csr_matrix(X)
    X.indices = X.indices.astype(np.int32)
    return _split(X, y, test_fraction, seed, spec)
