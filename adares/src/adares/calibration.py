"""The population generator fitted to published per-VM statistics of a real cloud (Azure).

Targets (``data/azure_vm_targets.json``, with their source): Resource Central's (Cortez et al.,
SOSP 2017) distributions of per-VM average and P95 CPU utilization, VM core counts, VM memory
and the interactive share of core-hours, as plotted in the Azure Public Dataset's analysis
notebook. ``fit`` chooses the generator's free numbers (the mix of kinds, each kind's median CPU
level, the spread of levels, batch jobs' rate and intensity, GiB per core) by least squares
(``scipy.optimize``) between the targets and the statistics of a generated population
(``statistics``), with common random numbers so that the objective is deterministic.
The result is frozen in ``data/population_fitted.json`` (``fitted()``), written once by
``python -m adares.calibration`` and committed before any policy ran on it.

What cannot be matched: the dataset's P95 is of 5-minute maxima, the generator's of 5-minute
means (a little lower for the same VM). VM lifetimes are not part of the fit: they are a
separate published input (``adares.lifetimes``, ``population:...,lifetimes=azure``); the fit's
statistics are of VMs that live the whole day.
"""

from __future__ import annotations

import copy
import json
import sys
from importlib import resources
from pathlib import Path

import numpy as np

from adares.files import write_atomic
from adares.population import CALIBRATION, KINDS, generate_population, population_kinds
from adares.trace import GIB

FITTED_FILE = "population_fitted.json"
TARGETS_FILE = "azure_vm_targets.json"
#: Tolerances of ``test_adares_calibration``, absolute, on CDF values and shares, as reached on
#: seeds the fit never saw (1000 VMs x 1 day): the flavors within 0.03-0.04, the CPU CDFs
#: only within 0.15-0.16 (the generator's kinds cannot put 37% of VMs under 5% average CPU
#: and 28% over 90% P95 at once with 5-minute means; the fit's loss fell from 0.68 for the
#: hand-chosen numbers to 0.053), the interactive share within 0.07.
TOLERANCE = {"avg_cpu_cdf": 0.15, "p95_cpu_cdf": 0.16, "cores_share": 0.03,
             "memory_share": 0.04, "interactive_core_hour_share": 0.07}


def _data(name: str) -> dict:
    return json.loads(resources.files("adares").joinpath("data", name).read_text())


def targets() -> dict:
    """The published statistics (``data/azure_vm_targets.json``), with their source."""
    return _data(TARGETS_FILE)


def fitted() -> dict:
    """The frozen fitted calibration (a ``CALIBRATION``-shaped dict; lists for tuples)."""
    return _data(FITTED_FILE)["calibration"]


def statistics(n_vms: int = 1500, days: float = 2.0, seed: int = 0,
               calibration: dict | None = None, tg: dict | None = None) -> dict:
    """The targets' statistics of ``generate_population(n_vms, days, seed, calibration)``:
    the CDFs at the targets' x (fractions), shares of cores and memory buckets, and the
    interactive share of core-hours. Same keys and shapes as the targets' values."""
    tg = targets() if tg is None else tg
    tr = generate_population(n_vms, days, seed, calibration=calibration)
    kind = population_kinds(n_vms, seed, calibration)
    util = tr.cpu / tr.cpu_request[None, :]
    avg, p95 = 100 * util.mean(axis=0), 100 * np.quantile(util, 0.95, axis=0)
    mem = tr.mem_request / GIB
    edges = tg["memory_share"]["edges_gib"]
    cores = tr.cpu_request
    return {
        "avg_cpu_cdf": [float((avg <= x).mean()) for x in tg["avg_cpu_cdf"]["x_percent"]],
        "p95_cpu_cdf": [float((p95 <= x).mean()) for x in tg["p95_cpu_cdf"]["x_percent"]],
        "cores_share": [float((cores == c).mean()) for c in tg["cores_share"]["cores"]],
        "memory_share": [float(((mem > lo) & (mem <= hi)).mean())
                         for lo, hi in zip(edges[:-1], edges[1:])],
        "interactive_core_hour_share": float(cores[kind == "interactive"].sum() / cores.sum()),
    }


def target_values(tg: dict) -> dict:
    """The targets' values in ``statistics``'s shape."""
    return {"avg_cpu_cdf": tg["avg_cpu_cdf"]["cdf"], "p95_cpu_cdf": tg["p95_cpu_cdf"]["cdf"],
            "cores_share": tg["cores_share"]["share"], "memory_share": tg["memory_share"]["share"],
            "interactive_core_hour_share": tg["interactive_core_hour_share"]["share"]}


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max())
    return e / e.sum()


def _sigmoid(z: float) -> float:
    return float(1.0 / (1.0 + np.exp(-z)))


def calibration_of(theta: np.ndarray, tg: dict) -> dict:
    """The calibration dict of a parameter vector: 13 CPU numbers (4 mix logits against
    idle, 5 log median levels, the log spread of levels, batch jobs' utilization range as 2
    logits, log jobs per day), then 3 GiB-per-core logits against 14 GiB per core."""
    c = copy.deepcopy(CALIBRATION)
    c["mix"] = dict(zip(KINDS, _softmax(np.r_[theta[0:4], 0.0]).tolist()))
    c["cpu_level"] = dict(zip(KINDS, np.exp(theta[4:9]).clip(1e-3, 0.9).tolist()))
    c["cpu_level_sigma"] = float(np.exp(theta[9]).clip(0.05, 2.0))
    lo = 0.2 + 0.8 * _sigmoid(theta[10])
    c["batch_on_utilization"] = [lo, lo + (1.0 - lo) * _sigmoid(theta[11])]
    c["batch_jobs_per_day"] = float(np.exp(theta[12]).clip(0.2, 24.0))
    c["cores"] = [list(tg["cores_share"]["cores"]), list(tg["cores_share"]["share"])]
    c["gib_per_core"] = [[1.75, 3.5, 7.0, 14.0], _softmax(np.r_[theta[13:16], 0.0]).tolist()]
    c["cores"][1] = (np.asarray(c["cores"][1]) / np.sum(c["cores"][1])).tolist()
    return c


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return float(np.log(p / (1 - p)))


def theta_of(c: dict) -> np.ndarray:
    """The parameter vector of a calibration (``calibration_of``'s inverse where it is one;
    hand-chosen calibrations without a fitted field take its neutral value)."""
    mix = np.log(np.array([c["mix"][k] for k in KINDS]))
    lo, hi = c["batch_on_utilization"]
    gib = c["gib_per_core"]
    g = np.log(np.asarray(gib[1])) if len(gib[1]) == 4 else np.zeros(4)
    return np.r_[mix[:4] - mix[4], np.log([c["cpu_level"][k] for k in KINDS]),
                 np.log(c.get("cpu_level_sigma", 0.5)), _logit((lo - 0.2) / 0.8),
                 _logit((hi - lo) / (1 - lo)), np.log(c["batch_jobs_per_day"]),
                 g[:3] - g[3]]


def _theta0() -> np.ndarray:
    return theta_of(CALIBRATION)


def loss(theta: np.ndarray, tg: dict, n_vms: int, days: float, seed: int) -> float:
    """Sum of squared differences between the targets and the statistics of the population
    that ``theta`` generates (the same random numbers for every theta)."""
    got = statistics(n_vms, days, seed, calibration_of(theta, tg), tg)
    want = target_values(tg)
    return float(sum(np.sum((np.asarray(got[k]) - np.asarray(want[k])) ** 2) for k in want))


def fit(n_vms: int = 1000, days: float = 1.0, seed: int = 0, maxfev: int = 500,
        log=print, start: dict | None = None) -> tuple[dict, float]:
    """Fit the calibration to ``targets()`` (Nelder-Mead from ``start``, default the
    hand-chosen calibration, ``maxfev`` evaluations, then Powell, half as many). Returns
    (calibration, final loss)."""
    from scipy.optimize import minimize

    tg = targets()
    calls = [0]

    def f(theta: np.ndarray) -> float:
        calls[0] += 1
        v = loss(theta, tg, n_vms, days, seed)
        if calls[0] % 50 == 0:
            log(f"fit: {calls[0]} evaluations, loss {v:.5f}")
        return v

    theta0 = _theta0() if start is None else theta_of(start)
    res = minimize(f, theta0, method="Nelder-Mead",
                   options={"maxfev": maxfev, "xatol": 1e-3, "fatol": 1e-6, "adaptive": True})
    res = minimize(f, res.x, method="Powell", options={"maxfev": maxfev // 2, "xtol": 1e-3})
    return calibration_of(res.x, tg), float(res.fun)


def main(argv: list[str]) -> int:
    """``python -m adares.calibration OUT.json``: fit and write the frozen calibration."""
    out = Path(argv[0]) if argv else Path(__file__).parent / "data" / FITTED_FILE
    cal, fun = fit()
    doc = {"about": "population calibration fitted by adares.calibration.fit to "
                    f"{TARGETS_FILE} (1000 VMs x 1 day, seed 0); frozen",
           "loss": fun, "calibration": cal}
    write_atomic(out, (json.dumps(doc, indent=1) + "\n").encode())
    print(f"wrote {out} (loss {fun:.5f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
