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
dtype test) is outside both windows. The ratio xlaprobe/NNSmith is of figures from one run.

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


def run(sides: list[str], seconds: int, env: Path) -> dict[str, dict]:
    """Run the given sides at once for `seconds`; their figures by name."""
    works = {side: Path(tempfile.mkdtemp(prefix=f"vs-nnsmith-{side}-")) for side in sides}
    procs = {side: (start_xlaprobe if side == "xlaprobe" else
                    lambda s, w: start_nnsmith(env, s, w))(seconds, works[side])
             for side in sides}
    for side, proc in procs.items():
        try:
            proc.wait(timeout=seconds + GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return {side: xlaprobe_figures(works[side]) if side == "xlaprobe"
            else nnsmith_figures(works[side], seconds) for side in sides}


def show(title: str, figures: dict[str, dict]) -> None:
    """Print one table: per side programs/s, operations/s, reports; and the ratio."""
    print(title)
    rates = {}
    for side, f in figures.items():
        rates[side] = (f["programs"] / f["seconds"], f["operations"] / f["seconds"])
        print(f"  {side:<9} {f['programs']:>6} programs in {f['seconds']:.0f} s: "
              f"{rates[side][0]:.2f} programs/s, {rates[side][1]:.1f} operations/s; "
              f"{f['reports']} reports ({f['distinct']} distinct)")
    if len(rates) == 2 and rates["nnsmith"][1] > 0:
        print(f"  ratio xlaprobe/NNSmith: programs/s {rates['xlaprobe'][0] / rates['nnsmith'][0]:.2f}x,"
              f" operations/s {rates['xlaprobe'][1] / rates['nnsmith'][1]:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", type=int, default=600, help="seconds side by side")
    parser.add_argument("--alone", type=int, default=300, help="seconds each alone (0: skip)")
    args = parser.parse_args()
    env = nnsmith_env()
    load = os.getloadavg()
    print(f"load average before: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores")
    show(f"side by side, {args.side} s:", run(["xlaprobe", "nnsmith"], args.side, env))
    if args.alone:
        show(f"alone, {args.alone} s each:", {
            **run(["xlaprobe"], args.alone, env), **run(["nnsmith"], args.alone, env)})


if __name__ == "__main__":
    main()
