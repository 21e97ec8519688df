"""Examples per second of geodml's local steps versus scikit-learn's centralized fit, same data.

Measured side by side in one run on one CTR-like dataset:
  - sklearn: LogisticRegression(lbfgs).fit on all rows; examples/s = rows * n_iter_ / seconds
    (each L-BFGS iteration is about one pass over the rows);
  - local full pass: one DC's loss+gradient sum over its rows (the work of one distributed
    L-BFGS / FADL gradient round); examples/s = rows / seconds;
  - local SGD: FedAvg/DiLoCo mini-batch steps (batch 256); examples/s = steps * 256 / seconds.
Prints each rate and its ratio to scikit-learn's. Usage: python benchmarks/bench_local_steps.py [rows]
"""

from __future__ import annotations

import sys
import time

import numpy as np
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

from geodml.dcside import local_lr, local_sgd
from geodml.data import make_ctr
from geodml.objective import loss_grad_sum


def main(rows: int = 200_000) -> None:
    X, y = make_ctr(rows, features=16384, fields=20, seed=0)
    lam = 1e-4
    t = time.perf_counter()
    clf = LogisticRegression(C=1 / (lam * rows), tol=1e-6, max_iter=1000).fit(X, y)
    sk = time.perf_counter() - t
    sk_rate = rows * int(clf.n_iter_[0]) / sk
    with threadpool_limits(limits=1, user_api="blas"):
        w = np.zeros(X.shape[1])
        reps = 5
        t = time.perf_counter()
        for _ in range(reps):
            loss_grad_sum(X, y, w, 0.0)
        full_rate = rows * reps / (time.perf_counter() - t)
        rng = np.random.default_rng(0)
        lr = local_lr(X, lam)
        steps = 2000
        t = time.perf_counter()
        local_sgd(X, y, np.zeros(X.shape[1] + 1), lam, lr, steps, 256, rng)
        sgd_rate = steps * 256 / (time.perf_counter() - t)
    print(f"rows {rows}, features 16384, 20 non-zeros per row")
    print(f"sklearn lbfgs fit      {sk_rate:12.0f} examples/s ({int(clf.n_iter_[0])} iterations, {sk:.2f} s)")
    print(f"local full pass        {full_rate:12.0f} examples/s  ratio to sklearn {full_rate / sk_rate:.2f}")
    print(f"local SGD (batch 256)  {sgd_rate:12.0f} examples/s  ratio to sklearn {sgd_rate / sk_rate:.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200_000)
