"""Kernel times taken inside the whole program by XLA's profiler, against kernels timed alone, as
the kernel model's training target: held out by program and by source on the kernel corpus.

The corpus (`xlaprobe.tune.corpus`) times each kernel cut out and run on its own; composed, even
those *measured* times rank a program's configurations only a little better than the roofline.
Here each corpus entry's program is compiled again under its configuration and run under
``jax.profiler``: XLA:CPU's thunk executor records one trace event per top-level kernel (its
name is the kernel's instruction name), so each kernel gets its time inside the program (the
median over the profiled runs), with the caches, threads and neighbours the program gives it.
Then, on the entries so profiled (the same entries for every variant), held out:

* ``alone``: the shipped model (`xlaprobe.tune.kernelmodel.ProgramModel`, kernels timed alone,
  composed with the executable-call floor and per-kernel overhead);
* ``inprog``: the same model and composition trained on the in-program kernel times (floor 0:
  inside the program no kernel pays the call of an executable);
* ``inprog-measured``: the held-out entries' own in-program kernel times composed (a diagnostic,
  not a predictor);
* the roofline of ``cost_analysis()``;
* test-retest: tau between the corpus's program times and the profiled runs' own (the same
  configurations measured twice), the bound any predictor's tau against either truth meets.

The truth is the corpus's stored program time (the same for every variant); the profiled runs'
own program time (``fresh``) is printed beside it as a second truth. Profiles go to a JSON file
(one object per corpus entry id, rewritten whole after each entry, so an interrupted run keeps
what it finished and a rerun skips it). Profiling runs in this process: start it under ``nice``
on a shared machine.

    nice -n 15 python benchmarks/tune_profile.py --corpus c.db --profiles p.json
    python benchmarks/tune_profile.py --corpus c.db --profiles p.json --evaluate-only
"""

from __future__ import annotations

import argparse
import collections
import copy
import functools
import gzip
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any


from xlaprobe.store import Store
from xlaprobe.tune.costmodel import kendall_tau, roofline_scores
from xlaprobe.tune.kernelmodel import ProgramModel, held_out, mean_defined


def trace_kernel_times(trace: dict | list, names: set[str], runs: int,
                       reduce: Any = statistics.median) -> dict[str, float]:
    """Per kernel, its seconds per program run from a perfetto trace of `runs` runs.

    Args:
        trace: the decoded ``perfetto_trace.json`` (``traceEvents`` list or the list itself).
        names: the kernels' instruction names (XLA:CPU names each thunk's event after its
            instruction).
        runs: how many program runs the trace holds.
        reduce: list of seconds -> one figure (``statistics.median``, ``min``).

    Returns:
        name -> seconds per run: `reduce` of its event durations when it ran once per run,
        else the total over the runs / `runs` (a kernel the trace lacks is absent).
    """
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    durations: dict[str, list[float]] = collections.defaultdict(list)
    for event in events:
        if event.get("ph") == "X" and event.get("name") in names:
            durations[event["name"]].append(float(event.get("dur", 0.0)) * 1e-6)  # us -> s
    return {name: (reduce(d) if len(d) == runs else sum(d) / runs)
            for name, d in durations.items()}


def profile_entry(entry: dict[str, Any], runs: int) -> dict[str, Any]:
    """Compile one corpus entry's program under its configuration, run it `runs` times under
    XLA's profiler and return the in-program kernel times.

    Returns:
        ``kernel_s`` (name -> seconds per run, median over the runs), ``program_s`` (median
        seconds of `runs` unprofiled runs), ``kernel_min_s`` and ``program_min_s`` (the same,
        minimum over the runs), ``matched`` (kernels of the stored entry found in the trace),
        ``kernels`` (of the stored entry), ``same_hlo`` (the recompiled module has the stored
        kernel names), ``load`` (1-minute load before, after), ``seconds`` (wall).

    Raises:
        Exception: the program does not build or compile.
    """
    import jax

    from xlaprobe import jaxcompat
    from xlaprobe.configs.xla import compiler_options
    from xlaprobe.tune import space as space_mod
    from xlaprobe.tune.corpus import corpus_programs
    from xlaprobe.tune.kernels import kernels

    load_before, started = os.getloadavg()[0], time.perf_counter()
    target = corpus_programs([entry["name"]])[0].target
    program = target.build(space_mod.knob_values(entry["candidate"]))
    options = compiler_options(space_mod.configuration(entry["candidate"]))
    compiled = jax.jit(jaxcompat.jaxpr_as_fun(program.jaxpr)).lower(*program.inputs).compile(
        compiler_options=dict(options))
    args = [jax.device_put(x) for x in program.inputs]
    stored = [k["name"] for k in entry["kernels"]]
    found = {k.name for k in kernels(compiled.as_text())}
    for _ in range(3):
        jax.block_until_ready(compiled(*args))
    wall = []
    for _ in range(runs):
        t0 = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        wall.append(time.perf_counter() - t0)
    with tempfile.TemporaryDirectory(prefix="xlaprobe-prof-") as folder:
        jax.profiler.start_trace(folder, create_perfetto_trace=True)
        for _ in range(runs):
            jax.block_until_ready(compiled(*args))
        jax.profiler.stop_trace()
        path = next(Path(folder).rglob("perfetto_trace.json.gz"))
        with gzip.open(path) as f:
            trace = json.load(f)
    kernel_s = trace_kernel_times(trace, set(stored), runs)
    return {"kernel_s": kernel_s, "program_s": statistics.median(wall),
            "kernel_min_s": trace_kernel_times(trace, set(stored), runs, min),
            "program_min_s": min(wall),
            "matched": len(kernel_s), "kernels": len(stored), "same_hlo": found == set(stored),
            "load": (load_before, os.getloadavg()[0]), "seconds": time.perf_counter() - started}


def collect(entries: list[dict], path: Path, runs: int, max_kernels: int) -> dict[str, dict]:
    """Profile every entry not yet in the JSON at `path` (entries with more than `max_kernels`
    kernels are skipped), rewriting the file after each; one progress line per entry."""
    done: dict[str, dict] = json.loads(path.read_text()) if path.exists() else {}
    for number, entry in enumerate(entries):
        key = str(entry["id"])
        if key in done or len(entry["kernels"]) > max_kernels:
            continue
        try:
            done[key] = profile_entry(entry, runs)
            line = (f"{done[key]['matched']}/{done[key]['kernels']} kernels in the trace, "
                    f"same HLO {done[key]['same_hlo']}, program {done[key]['program_s'] * 1e3:.3f}"
                    f" ms (corpus {entry['program_s'] * 1e3:.3f}), "
                    f"{done[key]['seconds']:.0f} s")
        except Exception as exc:  # one entry that will not rebuild must not end the run
            done[key] = {"error": (str(exc).splitlines() or [type(exc).__name__])[0][:200]}
            line = f"error: {done[key]['error']}"
        print(f"[{number + 1}/{len(entries)}] {entry['name']} entry {key}: {line}, "
              f"load {os.getloadavg()[0]:.1f}", flush=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(done))
        tmp.replace(path)  # never half-written
    return done


def in_program(entries: list[dict], profiles: dict[str, dict], stat: str = "") -> list[dict]:
    """The profiled entries with each kernel's time replaced by its in-program time (None where
    the trace lacks it) and a floor of 0; `stat` "" takes the median over the profiled runs,
    "min" the minimum (the corpus's own statistic for kernels timed alone)."""
    out = []
    for entry in entries:
        profile = profiles.get(str(entry["id"]), {})
        if f"kernel{stat and '_' + stat}_s" not in profile:
            continue
        entry = copy.deepcopy(entry)
        for kernel in entry["kernels"]:
            t = profile[f"kernel{stat and '_' + stat}_s"].get(kernel["name"])
            kernel["time_s"] = t if t and t > 0 else None
        entry["data"]["floor_s"] = 0.0
        entry["data"]["fresh_s"] = profile[f"program{stat and '_' + stat}_s"]
        out.append(entry)
    return out


def _fresh_tau(entries: list[dict], make: Any, by: str) -> tuple[float, float]:
    """Mean over held-out programs of tau against the profiled runs' own program times: of the
    model `make` builds (trained as `held_out` trains it) and of the roofline."""
    key = "name" if by == "program" else "source"
    taus, roofs = [], []
    for group in sorted({e[key] for e in entries}):
        model = make(0).fit([e for e in entries if e[key] != group])
        by_program: dict[str, list] = collections.defaultdict(list)
        for e in entries:
            if e[key] == group:
                by_program[e["name"]].append(e)
        for members in (m for m in by_program.values() if len(m) >= 2):
            fresh = [e["data"]["fresh_s"] for e in members]
            taus.append(kendall_tau([model.predict(e["kernels"], e["candidate"])
                                     for e in members], fresh))
            roofs.append(kendall_tau(-roofline_scores([e["data"].get("cost", {})
                                                       for e in members]), fresh))
    return mean_defined(taus), mean_defined(roofs)


def retest_tau(entries: list[dict]) -> float:
    """Mean over programs of Kendall tau between two measurements of the same configurations'
    program times: the corpus's and the profiled runs' (``fresh_s``): how far the truth itself
    reproduces, which bounds every predictor's tau against it."""
    by_program: dict[str, list] = collections.defaultdict(list)
    for e in entries:
        by_program[e["name"]].append(e)
    taus = [kendall_tau([e["program_s"] for e in m], [e["data"]["fresh_s"] for e in m])
            for m in by_program.values() if len(m) >= 2]
    return mean_defined(taus)


def evaluate(entries: list[dict], profiles: dict[str, dict], stat: str = "") -> dict[str, Any]:
    """Held out by program and by source on the profiled entries: the variants' and the
    roofline's mean tau; printed as tables; returned (`stat` as `in_program`)."""
    inprog = in_program(entries, profiles, stat)
    fresh_of = {e["id"]: e["data"]["fresh_s"] for e in inprog}
    alone = [copy.deepcopy(e) for e in entries if e["id"] in fresh_of]
    for e in alone:
        e["data"]["fresh_s"] = fresh_of[e["id"]]
    variants = {"alone": (alone, ProgramModel), "inprog": (inprog, ProgramModel),
                "inprog-measured": (inprog, functools.partial(ProgramModel, measured=True)),
                "alone-measured": (alone, functools.partial(ProgramModel, measured=True))}
    out: dict[str, Any] = {"retest": retest_tau(inprog)}
    print(f"test-retest: tau between the corpus's program times and the profiled runs' "
          f"(the same configurations measured again), mean over programs {out['retest']:.3f}")
    for by in ("program", "source"):
        rows = {v: {r["group"]: r for r in held_out(data, by, 0, make)}
                for v, (data, make) in variants.items()}
        groups = sorted(rows["alone"])
        print(f"\nheld out by {by} on the {len(inprog)} profiled entries: Kendall tau vs the "
              "corpus's program time (mean over programs)")
        print(f"{'group':18s} " + " ".join(f"{v:>15s}" for v in variants) + f" {'roofline':>9s}")
        for g in groups:
            print(f"{g[:18]:18s} " + " ".join(f"{rows[v][g]['model_tau']:15.3f}"
                                             for v in variants)
                  + f" {rows['alone'][g]['roofline_tau']:9.3f}")
        means = {v: mean_defined([rows[v][g]["model_tau"] for g in groups])
                 for v in variants}
        roof = mean_defined([rows["alone"][g]["roofline_tau"] for g in groups])
        print(f"{'mean':18s} " + " ".join(f"{means[v]:15.3f}" for v in variants)
              + f" {roof:9.3f}")
        fresh = {v: _fresh_tau(data, make, by)
                 for v, (data, make) in variants.items()}
        print("against the profiled runs' own program time: "
              + ", ".join(f"{v} {t:.3f}" for v, (t, _) in fresh.items())
              + f", roofline {fresh['alone'][1]:.3f}")
        out[by] = {"mean": means, "roofline": roof, "fresh": fresh,
                   "rows": {v: list(r.values()) for v, r in rows.items()}}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", required=True, help="store holding the kernel corpus (read)")
    parser.add_argument("--profiles", required=True, help="JSON of the in-program profiles "
                        "(grown: entries already in it are not profiled again)")
    parser.add_argument("--programs", default="", help="only these corpus programs (names)")
    parser.add_argument("--runs", type=int, default=20, help="profiled program runs per entry")
    parser.add_argument("--max-kernels", type=int, default=1500)
    parser.add_argument("--stat", choices=("median", "min"), default="median",
                        help="in-program kernel and program times: over the profiled runs")
    parser.add_argument("--evaluate-only", action="store_true")
    parser.add_argument("--json", default="", help="also write the held-out figures here")
    args = parser.parse_args()
    started = time.perf_counter()
    print(f"start: load {os.getloadavg()[0]:.1f}", flush=True)
    with Store(args.corpus, readonly=True) as store:
        entries = store.corpus()
    if args.programs:
        entries = [e for e in entries if e["name"] in args.programs.split(",")]
    path = Path(args.profiles)
    profiles = (json.loads(path.read_text()) if args.evaluate_only
                else collect(entries, path, args.runs, args.max_kernels))
    figures = evaluate(entries, profiles, "" if args.stat == "median" else args.stat)
    print(f"\nwall time {time.perf_counter() - started:.0f} s, end load "
          f"{os.getloadavg()[0]:.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1, default=float))


if __name__ == "__main__":
    main()
