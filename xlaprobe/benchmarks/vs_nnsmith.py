"""xlaprobe's fuzzer against NNSmith's, on XLA:CPU, side by side and each alone.

NNSmith 0.1.0 (Liu et al., "NNSmith: Generating Diverse and Valid Test Cases for Deep Learning
Compilers", ASPLOS 2023) runs in its own environment (Python 3.11, nnsmith 0.1.0,
tensorflow-cpu 2.15.1: XLA:CPU through ``jit_compile``), made once with uv under
``$XLAPROBE_CACHE`` (default ``~/.cache/xlaprobe``) as ``nnsmith-0.1.0/``; its entry point is the
``nnsmith.fuzz`` script with ``model.type=tensorflow backend.type=xla``. xlaprobe runs ``xlaprobe
fuzz --jobs 1`` with its default schedule and configurations.

Printed per side: programs, programs/s and operations/s over each fuzzer's own fuzzing time
(xlaprobe: the summary's elapsed seconds, equations summed over the stored programs; NNSmith: its
``fuzz.time``, testcases counted in its log, operations = testcases x ``mgen.max_nodes``, which
its default generator, symbolic-cinit, fills exactly), and reports (xlaprobe: findings and
distinct fingerprints; NNSmith: bug directories). Start-up (imports, NNSmith's one-off operator
dtype test) is outside both windows. The ratio xlaprobe/NNSmith is of figures from one run. The
load average is sampled every 15 s while the sides run (min, mean, max printed): on a shared
machine the rates are only comparable within one run.

Where xlaprobe's time goes (`stages`): its workers' time by configuration from the store
(`runs.seconds`: compile plus run in the worker; the reference with its error-budget runs), the
rest of the workers' capacity (start-up, transfers, idle); then, on a sample of the campaign's
programs replayed in this process one at a time, generation, XLA compile, XLA run, the NumPy
reference (float64 and the native-dtype honest run) and judging, as shares of their sum.

NNSmith's reports re-judged by xlaprobe's oracle (`rejudge`, after the side-by-side run, or
``--rejudge ROOT`` alone): ``nnsmith_dump.py`` replays each report in NNSmith's environment and
writes its arrays; each output is then judged by `xlaprobe.oracle.judge_leaf` (per-dtype
absolute AND relative bounds, ULPs) with TensorFlow's non-XLA run as the reference and, as the
honest error budget, TensorFlow's graph-mode runs on the inputs moved one ULP either way. A
report stays a report when some output is beyond that budget; else it is a false alarm.
NNSmith's models have no float64 twin, so this reference is an honest float32/float16 run, not
float64: an ill-conditioned model whose inputs' rounding alone moves the output passes.

    python benchmarks/vs_nnsmith.py                       # 10 min side by side, 5 min each alone
    python benchmarks/vs_nnsmith.py --side 120 --alone 60 # shorter
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

NNSMITH = ("nnsmith==0.1.0", "tensorflow-cpu==2.15.1")
#: NNSmith's default operators per generated model (``mgen.max_nodes``).
MAX_NODES = 5
#: Seconds a side may take beyond its fuzzing time (imports; NNSmith's first dtype test: minutes).
GRACE_S = 900


def nnsmith_env() -> Path:
    """NNSmith's environment, made on first use (needs uv and python3.11)."""
    root = Path(os.environ.get("XLAPROBE_CACHE", Path.home() / ".cache" / "xlaprobe"))
    env = root / "nnsmith-0.1.0"
    if not (env / "bin" / "nnsmith.fuzz").exists():
        print(f"making NNSmith's environment in {env} (once; about 2 GB)", file=sys.stderr)
        subprocess.run(["uv", "venv", "-q", "-p", "3.11", str(env)], check=True)
        subprocess.run(["uv", "pip", "install", "-q", *NNSMITH], check=True,
                       env=dict(os.environ, VIRTUAL_ENV=str(env)))
    return env


def start_nnsmith(env: Path, seconds: int, work: Path) -> subprocess.Popen:
    """Start NNSmith's fuzzer for `seconds` in `work` (its reports in work/root)."""
    return subprocess.Popen(
        [str(env / "bin" / "nnsmith.fuzz"), f"fuzz.time={seconds}s", "model.type=tensorflow",
         "backend.type=xla", f"fuzz.root={work / 'root'}", f"hydra.run.dir={work / 'hydra'}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=work)


def nnsmith_figures(work: Path, seconds: int) -> dict:
    """NNSmith's programs, operations and reports of a finished run in `work`."""
    log = (work / "hydra" / "fuzz.log").read_text(errors="replace")
    programs = len(re.findall(r"\] - Timing: gen", log))
    reports = len(list((work / "root").glob("bug-*"))) if (work / "root").exists() else 0
    return {"programs": programs, "seconds": seconds, "operations": programs * MAX_NODES,
            "reports": reports, "distinct": reports}


def start_xlaprobe(seconds: int, work: Path) -> subprocess.Popen:
    """Start ``xlaprobe fuzz --jobs 1`` for `seconds`, its store in `work`."""
    return subprocess.Popen(
        [sys.executable, "-m", "xlaprobe.cli", "fuzz", "--time", f"{seconds}s", "--jobs", "1",
         "--json", "-q", "--db", str(work / "fuzz.db")],
        stdout=open(work / "summary.json", "w"), stderr=subprocess.DEVNULL)


def xlaprobe_figures(work: Path) -> dict:
    """xlaprobe's programs, equations and reports of a finished run in `work`."""
    summary = json.loads((work / "summary.json").read_text())
    with sqlite3.connect(work / "fuzz.db") as db:
        (equations,) = db.execute("SELECT COALESCE(SUM(num_equations), 0) FROM programs").fetchone()
    return {"programs": summary["programs"], "seconds": summary["elapsed_s"],
            "operations": int(equations), "reports": summary["findings"],
            "distinct": summary["unique_findings"]}


def worker_shares(work: Path) -> dict[str, float]:
    """xlaprobe's worker capacity (elapsed s x 1 job) by configuration (compile plus run inside
    the worker, from the store), the reference with its error-budget runs as one, and the rest."""
    summary = json.loads((work / "summary.json").read_text())
    capacity = summary["elapsed_s"]
    with sqlite3.connect(work / "fuzz.db") as db:
        seconds = dict(db.execute("SELECT config, SUM(seconds) FROM runs GROUP BY config"))
    shares = {c: s / capacity for c, s in seconds.items() if not c.startswith("reference")}
    shares["reference (with its error budget)"] = sum(
        s for c, s in seconds.items() if c.startswith("reference")) / capacity
    shares["other (start-up, transfers, idle)"] = 1 - sum(seconds.values()) / capacity
    return shares


def stage_profile(work: Path, sample: int) -> dict[str, float]:
    """Seconds per program by stage, replaying `sample` of the campaign's programs in this
    process one at a time: generation, XLA compile, XLA run, the NumPy reference (float64 and the
    native-dtype honest run) and judging the outputs."""
    import jax
    import numpy as np
    from xlaprobe import jaxcompat
    from xlaprobe.configs.reference import evaluate
    from xlaprobe.oracle import judge_leaf
    from xlaprobe.sources.generator import generate

    with sqlite3.connect(work / "fuzz.db") as db:
        seeds = [s for (s,) in db.execute(
            "SELECT seed FROM programs WHERE seed IS NOT NULL ORDER BY seed LIMIT ?", (sample,))]
    totals = dict.fromkeys(("generate", "compile", "run", "reference", "judge"), 0.0)
    for seed in seeds:
        clock = [time.perf_counter()]
        program = generate(seed)
        clock.append(time.perf_counter())
        compiled = jax.jit(jaxcompat.jaxpr_as_fun(program.jaxpr)).lower(*program.inputs).compile()
        clock.append(time.perf_counter())
        outputs = [np.asarray(o) for o in jax.block_until_ready(compiled(*program.inputs))]
        clock.append(time.perf_counter())
        reference = evaluate(program.jaxpr, program.inputs)
        native = evaluate(program.jaxpr, program.inputs, round_each_op=True)
        clock.append(time.perf_counter())
        for out, ref, honest in zip(outputs, reference, native):
            judge_leaf(out, np.asarray(ref), budget=np.asarray(honest, np.float64)
                       if np.asarray(ref).dtype.kind == "f" else None)
        clock.append(time.perf_counter())
        for stage, (a, b) in zip(totals, zip(clock, clock[1:])):
            totals[stage] += b - a
    return {stage: t / max(len(seeds), 1) for stage, t in totals.items()}


def show_stages(work: Path, sample: int) -> None:
    """Print where xlaprobe's time went in the run kept in `work`."""
    shares = worker_shares(work)
    print("  xlaprobe worker time: " + ", ".join(f"{c} {s:.1%}" for c, s in shares.items()))
    if sample:
        profile = stage_profile(work, sample)
        total = sum(profile.values())
        print(f"  xlaprobe per program ({sample} of its programs replayed one at a time, "
              f"{total * 1000:.0f} ms): " + ", ".join(
                  f"{stage} {t * 1000:.0f} ms ({t / total:.0%})" for stage, t in profile.items()))


def rejudge(root: Path, env: Path) -> list[tuple[str, str, str]]:
    """Each NNSmith report under `root` judged by xlaprobe's oracle: (report, verdict, detail),
    verdict ``mismatch`` (beyond the budget), ``ok`` (a false alarm) or ``not replayed``."""
    import numpy as np
    from xlaprobe.oracle import judge_leaf

    subprocess.run([str(env / "bin" / "python"), str(Path(__file__).with_name("nnsmith_dump.py")),
                    str(root)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    rows = []
    for report in sorted(root.glob("bug-*")):
        if not (report / "arrays.npz").exists():
            error = report / "error.txt"
            rows.append((report.name, "not replayed", error.read_text().strip()[:120]
                         if error.exists() else "no arrays"))
            continue
        arrays = np.load(report / "arrays.npz", allow_pickle=False)
        worst = None
        for key in (k for k in arrays.files if k.startswith("xla/")):
            name = key.split("/", 1)[1]
            reference = arrays[f"graph/{name}"]
            verdict = judge_leaf(arrays[key], reference.astype(np.float64) if reference.dtype.kind
                                 == "f" else reference, dtype=reference.dtype, budget=[
                                     arrays[f"{h}/{name}"].astype(np.float64)
                                     for h in ("honest1", "honest2")]
                                 if reference.dtype.kind == "f" else None)
            rank = (verdict.kind.is_finding, verdict.frac_over, verdict.max_rel)
            if worst is None or rank > worst[0]:
                worst = (rank, name, reference.dtype, verdict)
        _, name, dtype, verdict = worst
        rows.append((report.name, "mismatch" if verdict.kind.is_finding else "ok",
                     f"{name} {dtype}: max rel {verdict.max_rel:.3g}, allowed rel "
                     f"{verdict.allowed_rel:.3g}, {verdict.frac_over:.2%} over"))
    return rows


def show_rejudged(root: Path, env: Path) -> None:
    """Print NNSmith's reports re-judged by xlaprobe's oracle, and how many are false alarms."""
    rows = rejudge(root, env)
    for report, verdict, detail in rows:
        print(f"  {report}: {verdict} ({detail})")
    kept = sum(v == "mismatch" for _, v, _ in rows)
    print(f"  NNSmith reports re-judged by xlaprobe's oracle: {kept} of {len(rows)} beyond the "
          f"honest budget, {sum(v == 'ok' for _, v, _ in rows)} false alarms")


def run(sides: list[str], seconds: int, env: Path) -> dict[str, dict]:
    """Run the given sides at once for `seconds`; their figures by name (and ``load``: the load
    averages sampled meanwhile)."""
    works = {side: Path(tempfile.mkdtemp(prefix=f"vs-nnsmith-{side}-")) for side in sides}
    procs = {side: (start_xlaprobe if side == "xlaprobe" else
                    lambda s, w: start_nnsmith(env, s, w))(seconds, works[side])
             for side in sides}
    loads: list[float] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(15):
            loads.append(os.getloadavg()[0])

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    for side, proc in procs.items():
        try:
            proc.wait(timeout=seconds + GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    done.set()
    figures = {side: xlaprobe_figures(works[side]) if side == "xlaprobe"
               else nnsmith_figures(works[side], seconds) for side in sides}
    for side, work in works.items():
        figures[side]["work"] = str(work)
    figures["load"] = loads
    return figures


def show(title: str, figures: dict[str, dict]) -> None:
    """Print one table: per side programs/s, operations/s, reports; and the ratio."""
    loads = figures.pop("load", [])
    print(title + (f" (load average 1 min while running: min {min(loads):.1f}, mean "
                   f"{sum(loads) / len(loads):.1f}, max {max(loads):.1f}; "
                   f"{os.cpu_count()} cores)" if loads else ""))
    rates = {}
    for side, f in figures.items():
        rates[side] = (f["programs"] / f["seconds"], f["operations"] / f["seconds"])
        print(f"  {side:<9} {f['programs']:>6} programs in {f['seconds']:.0f} s: "
              f"{rates[side][0]:.2f} programs/s, {rates[side][1]:.1f} operations/s; "
              f"{f['reports']} reports ({f['distinct']} distinct); in {f['work']}")
    if len(rates) == 2 and rates["nnsmith"][1] > 0:
        print(f"  ratio xlaprobe/NNSmith: programs/s {rates['xlaprobe'][0] / rates['nnsmith'][0]:.2f}x,"
              f" operations/s {rates['xlaprobe'][1] / rates['nnsmith'][1]:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", type=int, default=600, help="seconds side by side")
    parser.add_argument("--alone", type=int, default=300, help="seconds each alone (0: skip)")
    parser.add_argument("--profile", type=int, default=30,
                        help="programs replayed for the per-stage profile (0: skip)")
    parser.add_argument("--rejudge", help="only re-judge the NNSmith reports under this root")
    args = parser.parse_args()
    env = nnsmith_env()
    if args.rejudge:
        show_rejudged(Path(args.rejudge), env)
        return
    load = os.getloadavg()
    print(f"load average before: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores")
    side = run(["xlaprobe", "nnsmith"], args.side, env)
    show(f"side by side, {args.side} s:", side)
    show_stages(Path(side["xlaprobe"]["work"]), args.profile)
    show_rejudged(Path(side["nnsmith"]["work"]) / "root", env)
    if args.alone:
        show(f"alone, {args.alone} s each:", {
            **run(["xlaprobe"], args.alone, env), **run(["nnsmith"], args.alone, env)})


if __name__ == "__main__":
    main()
