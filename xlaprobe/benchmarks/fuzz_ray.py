"""The Ray backend against the local pool: programs/s of one campaign on each, side by side, and
the costs a scaling estimate needs (docs/scaling.md).

Starts a local Ray cluster with ``--jobs`` CPUs and one pool per backend, warms both (a short
campaign on other seeds starts every worker and actor), all outside the timing; then runs campaigns
on the same seeds, on those warm pools, in the order local, ray, ray, local (``--rounds 2``: a load
that drifts during the run weighs on both alike), each for ``--seconds``. Prints per backend:

* programs/s over the whole sessions, and in steady state (from the end of the first
  ``jobs + 1`` programs to the last);
* the ratio ray / local of both;

and, for the estimate: worker seconds per program (compile and run, summed over the program's
runs, measured in the workers), the driver's seconds per program (generation, judging, recording,
each timed in the driver), and the store's throughput: `Store.record_check` of checks collected
here into a fresh store, in checks/s and rows/s.

    python benchmarks/fuzz_ray.py                          # 2 jobs, 2 rounds of 60 s per backend (+ warm-up)
    python benchmarks/fuzz_ray.py --seconds 120 --json out.json
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import tempfile
import threading
import time
from pathlib import Path

from xlaprobe import checking
from xlaprobe.backends import make_pool
from xlaprobe.campaign import RUN_TIMEOUT_S, Campaign
from xlaprobe.checking import DEFAULT_CONFIGS
from xlaprobe.store import Store

_TIMED = {"generate": 0.0, "judge": 0.0, "record": 0.0}
_LOCK = threading.Lock()


def _timed(name, function):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            with _LOCK:
                _TIMED[name] += time.perf_counter() - start
    return wrapper


class _KeptOpen:
    """A pool whose `close` does nothing, so several sessions share its warm workers."""

    def __init__(self, pool):
        self.pool = pool

    def __getattr__(self, name):
        return getattr(self.pool, name)

    def close(self):
        pass


class _TimedCampaign(Campaign):
    """A campaign that also times the driver's generation and recording, on a given pool."""

    warm_pool = None

    def _pool(self):
        return _KeptOpen(self.warm_pool)

    def _generate(self, seed):
        return _timed("generate", super()._generate)(seed)

    def _record(self, seed, program, result):
        return _timed("record", super()._record)(seed, program, result)


def _session(backend: str, pool, seconds: float, jobs: int, seed: int, configs: list[str],
             results: list, max_programs: int | None = None) -> dict:
    stamps: list[float] = []
    worker_s: list[float] = []

    def on_program(_seed, program, result):
        if result is None:
            return
        stamps.append(time.monotonic())
        worker_s.append(sum(o.seconds for o in (*result.outcomes, *result.budget,
                                                 *((result.flushed,) if result.flushed else ()))))
        if len(results) < 50:
            results.append(result)

    before = dict(_TIMED)
    with tempfile.TemporaryDirectory() as tmp:
        campaign = _TimedCampaign(Path(tmp) / "fuzz.db", configs, seed=seed, jobs=jobs,
                                  backend=backend)
        campaign.warm_pool = pool
        start = time.monotonic()
        try:
            summary = campaign.run(seconds, on_program=on_program, max_programs=max_programs)
        finally:
            campaign.close()
    warm = jobs + 1
    steady = (len(stamps) - warm) / (stamps[-1] - stamps[warm - 1]) \
        if len(stamps) > warm + 1 else float("nan")
    programs = summary.session_programs
    return {"backend": backend, "programs": programs, "elapsed_s": summary.elapsed_s,
            "programs_per_s": programs / summary.elapsed_s, "steady_programs_per_s": steady,
            "worker_s_per_program": statistics.fmean(worker_s) if worker_s else float("nan"),
            "driver_s_per_program": {k: (_TIMED[k] - before[k]) / max(programs, 1)
                                     for k in _TIMED},
            "first_program_s": stamps[0] - start if stamps else float("nan"),
            "findings": summary.findings}


def _store_throughput(results: list, repeats: int) -> dict:
    """`Store.record_check` of `results` (cycled `repeats` times) into a fresh store."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "store.db"
        with Store(db) as store:
            start = time.perf_counter()
            for i in range(repeats):
                store.record_check(results[i % len(results)], campaign=1)
            seconds = time.perf_counter() - start
        with sqlite3.connect(db) as conn:
            tables = [n for (n,) in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%'")]
            rows = sum(conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in tables)
    return {"checks": repeats, "rows": rows, "seconds": seconds,
            "checks_per_s": repeats / seconds, "rows_per_s": rows / seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="per backend and round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--configs", default=DEFAULT_CONFIGS)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    import ray
    checking.judge = _timed("judge", checking.judge)  # check_program looks it up at call time
    started = time.monotonic()
    ray.init(num_cpus=args.jobs, include_dashboard=False, logging_level="ERROR",
             log_to_driver=False)
    ray_start_s = time.monotonic() - started
    configs = args.configs.split(",")
    results: list = []
    order = ["local", "ray", "ray", "local"] * (args.rounds // 2) + ["local", "ray"] * (args.rounds % 2)
    pools = {b: make_pool(b, args.jobs, RUN_TIMEOUT_S) for b in ("local", "ray")}
    started = time.monotonic()
    for backend, pool in pools.items():  # every worker started: sessions time steady work
        _session(backend, pool, 600.0, args.jobs, 10 ** 6, configs, [], 2 * (args.jobs + 1))
    warm_s = time.monotonic() - started
    sessions = [_session(b, pools[b], args.seconds, args.jobs, args.seed, configs, results)
                for b in order]
    for pool in pools.values():
        pool.close()
    ray.shutdown()
    store = _store_throughput(results, 300)

    def total(backend: str, key: str) -> float:
        picked = [s for s in sessions if s["backend"] == backend]
        if key == "programs_per_s":
            return sum(s["programs"] for s in picked) / sum(s["elapsed_s"] for s in picked)
        return statistics.fmean(s[key] for s in picked)

    rates = {b: {k: total(b, k) for k in ("programs_per_s", "steady_programs_per_s",
                                           "worker_s_per_program", "first_program_s")}
             for b in ("local", "ray")}
    print(f"configs {args.configs}; jobs {args.jobs}; {len(order)} sessions of {args.seconds:g} s "
          f"({' '.join(order)}); local Ray cluster started in {ray_start_s:.1f} s; warm-up of both pools "
          f"{warm_s:.0f} s")
    for s in sessions:
        driver = ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in s["driver_s_per_program"].items())
        print(f"  {s['backend']:5}: {s['programs']:4d} programs, {s['programs_per_s']:.3f}/s "
              f"(steady {s['steady_programs_per_s']:.3f}/s, first after {s['first_program_s']:.1f} "
              f"s), worker {s['worker_s_per_program']:.2f} s/program; driver per program: {driver}")
    for key, label in (("programs_per_s", "whole sessions"), ("steady_programs_per_s", "steady")):
        print(f"programs/s, {label}: local {rates['local'][key]:.3f}, ray {rates['ray'][key]:.3f}, "
              f"ray/local {rates['ray'][key] / rates['local'][key]:.3f}")
    print(f"store: record_check {store['checks_per_s']:.0f} checks/s, {store['rows_per_s']:.0f} "
          f"rows/s ({store['rows'] / store['checks']:.0f} rows per check, {store['checks']} checks)")
    if args.json:
        args.json.write_text(json.dumps({"sessions": sessions, "rates": rates, "store": store,
                                         "ray_start_s": ray_start_s, "order": order}, indent=2))


if __name__ == "__main__":
    main()
