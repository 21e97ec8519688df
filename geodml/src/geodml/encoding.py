"""Fair bytes for centralizing: the rows a data center would ship, encoded as a real bulk transfer
would encode them (Apache Parquet, zstd level 3, dictionary encoding on), and measured: the byte
count is the length of the Parquet file pyarrow writes, not a per-row constant.

What is encoded:
- a real table (realdata.py, ``csv:``/``parquet:`` data) ships its own columns: categorical columns
  as dictionary codes, numbers in their source types, the label as int8 (Dataset.source);
- one-hot field data (every CSR row holds the same number of non-zeros, all 1.0, as make_ctr and
  hashed CTR logs) ships one int32 column per field, the feature index of its one value
  (categorical columns as codes);
- other sparse rows ship two list columns, the row's indices (int32) and values (as stored);
- other dense rows ship one fixed-size list column of the features as stored (float64 or float32);
  scikit-learn's bundled sets ship their values before standardization (Dataset.source_train).
Model exchanges are counted as today (float64 arrays, or compression.py's encodings).
"""

from __future__ import annotations

import io

import numpy as np
import scipy.sparse as sp

PARQUET_CODEC = "zstd"
PARQUET_LEVEL = 3
ENCODING_NAME = "Parquet (pyarrow), zstd level 3, dictionary encoding, no column statistics"


def parquet_nbytes(table) -> int:
    """Bytes of ``table`` (a pyarrow.Table) written as one Parquet file with zstd: an int (bytes)."""
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    # Column statistics serve query pruning, not a transfer: left out.
    pq.write_table(table, buf, compression=PARQUET_CODEC, compression_level=PARQUET_LEVEL, use_dictionary=True,
                   write_statistics=False)
    return buf.getbuffer().nbytes


def matrix_table(X, y: np.ndarray):
    """The pyarrow.Table that ships rows X (n, d) dense or CSR with labels y (n,) in {0, 1} (see the
    module docstring for the layout chosen)."""
    import pyarrow as pa

    label = pa.array(np.asarray(y, dtype=np.int8))
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        per_row = np.diff(X.indptr)
        m = int(per_row[0]) if len(per_row) else 0
        if m > 0 and np.all(per_row == m) and np.all(X.data == 1):
            cols = np.asarray(X.indices, dtype=np.int32).reshape(-1, m)
            return pa.table({**{f"f{j}": pa.array(cols[:, j]) for j in range(m)}, "label": label})
        offsets = pa.array(np.asarray(X.indptr, dtype=np.int32))
        return pa.table({"indices": pa.ListArray.from_arrays(offsets, pa.array(np.asarray(X.indices, dtype=np.int32))),
                         "values": pa.ListArray.from_arrays(offsets, pa.array(X.data)), "label": label})
    X = np.asarray(X)
    # one fixed-size list column: a column per feature costs Parquet metadata per column and file
    return pa.table({"x": pa.FixedSizeListArray.from_arrays(pa.array(X.ravel()), X.shape[1]), "label": label})


def rows_nbytes(X, y: np.ndarray, source=None) -> int:
    """Measured bytes of shipping these rows: Parquet+zstd of ``source`` (a pyarrow.Table of the
    rows in their source form, labels included) when given, else of matrix_table(X, y). Returns
    an int (bytes); 0 for no rows."""
    if len(y) == 0:
        return 0
    return parquet_nbytes(source if source is not None else matrix_table(X, y))
