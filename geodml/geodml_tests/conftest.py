"""Shared small fixtures: a 4-region WAN and small federations built from real data."""

import subprocess
import sys

import pytest

from geodml.data import load_dataset, make_ctr
from geodml.network import build_dcs
from geodml.partition import partition
from geodml.wan import load_wan


@pytest.fixture(scope="session")
def wan():
    return load_wan()


@pytest.fixture(scope="session")
def cancer():
    return load_dataset("sklearn:breast_cancer", seed=0)


@pytest.fixture()
def cancer_dcs(cancer, wan):
    parts = partition("dirichlet:1.0", cancer.X_train, cancer.y_train, 4, seed=1)
    return build_dcs(cancer.X_train, cancer.y_train, parts, wan)


@pytest.fixture(scope="session")
def small_ctr():
    return make_ctr(4000, features=2048, fields=8, seed=3)


@pytest.fixture()
def ctr_dcs(small_ctr, wan):
    X, y = small_ctr
    parts = partition("unequal:1,2,3,4", X, y, 4, seed=2)
    return build_dcs(X, y, parts, wan)


@pytest.fixture(scope="session", autouse=True)
def single_threaded_blas():
    """Single-threaded BLAS, as compare runs (compare.compare): on a busy machine BLAS threads
    spin-wait for milliseconds per call on model-sized vectors (a 12 s FADL test took 2 s)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


@pytest.fixture()
def geodml(capsys, monkeypatch):
    """Run the CLI's main() in this process (a subprocess per case costs seconds of imports)."""
    from geodml.cli import main

    def call(*args):
        monkeypatch.setattr(sys, "argv", ["geodml", *args])
        code = 0
        try:
            main()
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out, err)
    return call
