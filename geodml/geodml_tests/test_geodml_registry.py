"""The extension points: one Algorithm record is all a new algorithm needs (registry.py), every
pool is a declared dcside.Pool, and no function grows past 80 lines."""

import ast
import inspect
import json
from pathlib import Path

import numpy as np
import pytest

from geodml import registry
from geodml.costs import Prediction, predict_lbfgs
from geodml.dcside import DC_OPERATIONS, DCOperations, DCWorker, InProcessPool, Pool
from geodml.network import Network


def _run_gradient_descent(net: Network, s, pool) -> np.ndarray:
    """A toy algorithm: s.rounds steps of full-batch gradient descent at rate 1, one gradient
    round each (the statistical-query round of distributed L-BFGS)."""
    from geodml.algorithms import distributed_loss_grad

    theta = np.zeros(net.dcs[0].X.shape[1] + 1)
    for _ in range(s.rounds):
        _, g = distributed_loss_grad(net, theta, s.lam, pool)
        theta = theta - g
    net.notes["lbfgs_rounds"] = net.rounds  # its cost model is L-BFGS's per round
    return theta


def _predict_gradient_descent(sizes, d, wan, s, hub, counts, hierarchical) -> Prediction:
    from dataclasses import replace

    return predict_lbfgs(sizes, d, wan, s, hub, replace(counts, lbfgs_rounds=s.rounds), hierarchical)


@pytest.fixture()
def toy():
    algo = registry.register(registry.Algorithm("toygd", _run_gradient_descent, _predict_gradient_descent, ("lam", "rounds"),
                                                summary="toy: distributed gradient descent"))
    yield algo
    registry.unregister("toygd")


def test_a_toy_algorithm_registered_in_one_place_runs_end_to_end_through_the_cli(toy, geodml):
    r = geodml("compare", "--data", "sklearn:breast_cancer", "--algos", "centralize,toygd", "--rounds", "7", "--json", "-q")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    row = res["algorithms"]["toygd"]
    K, d = len(res["dcs"]), res["data"]["features"]
    assert row["rounds"] == 7
    # (K-1) remote DCs per round, theta down (d+1 float64) and the gradient sums up (d+2)
    assert row["bytes"] == 7 * (K - 1) * 8 * ((d + 1) + (d + 2))
    assert row["predicted"]["bytes"] == row["bytes"]
    assert row["settings"] == {"lam": 1e-4, "rounds": 7}
    assert row["test_accuracy"] > 0.9  # standardized breast_cancer: seven gradient steps already separate it
    assert res["crossover"]["toygd"]["rounds_bytes"] is not None
    # plan and the default list know it too, with nothing else changed
    p = geodml("plan", "--data", "sklearn:breast_cancer", "--json")
    assert "toygd" in json.loads(p.stdout)["predictions"]


def test_unknown_and_duplicate_algorithms_are_refused(toy, geodml):
    with pytest.raises(Exception, match="already registered"):
        registry.register(toy)
    r = geodml("compare", "--data", "sklearn:breast_cancer", "--algos", "nosuch")
    assert r.returncode == 2 and "unknown algorithm 'nosuch'" in r.stderr and "toygd" in r.stderr


def test_every_dc_operation_is_a_dcworker_method_with_the_same_parameters():
    assert set(DC_OPERATIONS) == {"reset", "loss_grad", "local_train", "local_train_down", "solve_local", "fadl_solve", "line_losses"}
    for op in DC_OPERATIONS:
        mine = list(inspect.signature(getattr(DCOperations, op)).parameters)
        # Ray, once it has made DCWorker an actor in this process, adds a _ray_trace_ctx parameter
        theirs = [p for p in inspect.signature(getattr(DCWorker, op)).parameters if not p.startswith("_ray")]
        assert mine == theirs, op


def test_the_in_process_pool_is_a_declared_pool(cancer_dcs):
    pool = InProcessPool(cancer_dcs)
    assert isinstance(pool, Pool)
    g = pool.loss_grad(np.zeros(cancer_dcs[0].X.shape[1] + 1))
    assert list(g) == [dc.name for dc in cancer_dcs]


def test_no_function_is_longer_than_80_lines():
    src = Path(__file__).resolve().parents[1] / "src" / "geodml"
    long = []
    for f in sorted(src.rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > 80:
                    long.append(f"{f.name}:{node.name} {n}")
    assert not long, long
