"""Command line: ``adares replay``."""

from __future__ import annotations

import contextlib
import json
import math
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from adares.errors import InputError
from adares.files import write_atomic
from adares.policies import POLICY_NAMES

DEFAULT_POLICIES = POLICY_NAMES

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Contextual-bandit rightsizing of VMs and containers, against the VPA "
                       "recommender and threshold/predictive policies, on replayed traces.")


@app.callback()
def _root() -> None:
    """adares: rightsizing policies replayed on traces."""


def _fail(msg: str) -> None:
    typer.echo(f"adares: error: {msg}", err=True)
    raise typer.Exit(2)


def _interrupted() -> None:
    # Typer turns Ctrl-C into a silent exit 130; say why the output is missing. Outputs are
    # written through a temporary file and a rename, so nothing half-written is left behind.
    typer.echo("adares: interrupted", err=True)
    raise typer.Exit(130)


@contextlib.contextmanager
def _guarded() -> Iterator[None]:
    """Bad input or a trace too big for memory: one line, exit 2; Ctrl-C: exit 130."""
    try:
        yield
    except InputError as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        _interrupted()
    except MemoryError:
        _fail("not enough memory for this trace; give fewer vms or days")


def _check_out(path: str, flag: str) -> None:
    """Refuse an output path that cannot be written before minutes of replay, not after."""
    if not path:
        return
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{flag} {path}: is a folder, give a file name")
    parent = p.parent.resolve()
    if not parent.is_dir():
        raise InputError(f"{flag} {path}: folder does not exist")
    # A probe file rather than os.access: root passes access() on folders that refuse new
    # files anyway (a read-only mount, /proc).
    try:
        with tempfile.TemporaryFile(dir=parent, prefix=".adares-probe."):
            pass
    except OSError as exc:
        raise InputError(f"{flag} {path}: cannot write in that folder "
                         f"({exc.strerror or type(exc).__name__})") from None


def _write(path: str, flag: str, write: Callable[[Path], None]) -> None:
    """Run ``write(Path(path))``; an OSError (full disk, a folder that refuses new files even
    to root, such as /proc) becomes one line and exit 2."""
    try:
        write(Path(path))
    except OSError as exc:
        raise InputError(f"{flag} {path}: cannot write ({exc.strerror or type(exc).__name__})") from None


@contextlib.contextmanager
def _progress_bars(err: Console) -> Iterator[Callable[[str, int, int], None]]:
    """A rich progress bar per replay (steps done, ETA) on a terminal; nothing in logs, which
    get the one line per replay that the callers print."""
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=err,
                  transient=True, disable=not err.is_terminal) as prog:
        tasks: dict[str, object] = {}

        def update(name: str, done: int, total: int) -> None:
            if name not in tasks or done == 0:
                if name in tasks:
                    prog.remove_task(tasks[name])
                tasks[name] = prog.add_task(f"{name} (steps)", total=total)
            prog.update(tasks[name], completed=done)

        yield update


def _check_seed(seed: int) -> None:
    if seed < 0:
        raise InputError(f"--seed must be >= 0, got {seed}")


@app.command(short_help="Replay a trace under each policy and compare costs, violations "
                        "and savings.")
def replay(
    trace: str = typer.Option("synthetic:vms=500,days=8,seed=0", "--trace",
                              help="synthetic[:vms=N,days=D,seed=S], shaped:SOURCE[,...], "
                                   "alibaba:USAGE.csv[,meta=META.csv], google2019:USAGE.parquet "
                                   "or azure:READINGS.csv[,vmtable=VMTABLE.csv]"),
    policies: str = typer.Option(",".join(DEFAULT_POLICIES), "--policies",
                                 help=f"comma-separated, of: {', '.join(POLICY_NAMES)}"),
    seed: int = typer.Option(0, "--seed", help="bandit exploration seed"),
    transfer_from: str = typer.Option("", "--transfer-from",
                                      help="warm-start the bandit from a decision log (.npz)"),
    save_log: str = typer.Option("", "--save-log", help="write the bandit's decision log (.npz)"),
    report: str = typer.Option("", "--report", help="write an HTML report with plots here"),
    bandit: str = typer.Option("numpy", "--bandit",
                               help="ADARES learner: numpy (fast) or vw (Vowpal Wabbit cb_explore_adf)"),
    resize: str = typer.Option("in-place", "--resize",
                               help="in-place, or restart-to-shrink (lowering memory restarts the VM)"),
    cluster: str = typer.Option("", "--cluster",
                                help="nodes=K,cpu=CORES,mem=GIB[,overcommit=R]: place VMs on "
                                     "nodes (first fit); refuse resizes beyond capacity x R"),
    margin: str = typer.Option("0", "--margin",
                               help="M or CPU,MEM: add this fraction to every policy's "
                                    "allocations (0.15 = +15%; not the clairvoyant's)"),
    clusters: int = typer.Option(1, "--clusters",
                                 help="split the VMs into this many clusters, each replayed on "
                                      "its own (own bandit; own nodes with --cluster)"),
    backend: str = typer.Option("local", "--backend",
                                help="local (in this process) or ray (the (cluster, policy) "
                                     "pairs in parallel; pip install 'adares\\[ray]')"),
    workers: int = typer.Option(0, "--workers",
                                help="CPUs of the Ray instance started for --backend ray "
                                     "(0: every core)"),
    as_json: bool = typer.Option(False, "--json", help="print JSON for machines"),
) -> None:
    """Replay a trace under each policy; print vCPU-hours, GB-hours, throttled share, OOM
    kills, resizes, reward, and savings against the threshold and predictive baselines."""
    err = Console(stderr=True)
    with _guarded():
        from adares.policies import parse_policies

        names = parse_policies(policies)
        from adares import replay as rp

        from adares.policies.bandit import CONTEXT_DIM, MULTIPLIERS, load_log, logs_a_decision
        from adares.policies.bandit import save_log as write_log

        from adares.simulator import RESIZE_MODES

        if bandit not in ("numpy", "vw"):
            raise InputError(f"unknown bandit backend {bandit!r} (numpy, vw)")
        if resize not in RESIZE_MODES:
            raise InputError(f"unknown resize mode {resize!r} ({', '.join(RESIZE_MODES)})")
        _check_seed(seed)
        margins = rp.parse_margin(margin)
        from adares.fleet import BACKENDS

        if backend not in BACKENDS:
            raise InputError(f"unknown backend {backend!r} ({', '.join(BACKENDS)})")
        if workers < 0:
            raise InputError(f"--workers must be >= 0, got {workers}")
        if workers and backend != "ray":  # the local backend runs in this one process
            raise InputError("--workers sets the CPUs of the Ray instance: add --backend ray")
        if clusters < 1:
            raise InputError(f"--clusters must be >= 1, got {clusters}")
        if backend == "ray":
            try:
                import ray  # noqa: F401 - checked here, before the trace is loaded
            except ImportError:
                raise InputError("--backend ray: Ray is not installed "
                                 "(pip install 'adares[ray]')") from None
        if cluster:
            from adares.cluster import parse_node_spec

            parse_node_spec(cluster)
        _check_out(save_log, "--save-log")
        _check_out(report, "--report")
        if (save_log or transfer_from) and "adares" not in names:
            raise InputError("--save-log and --transfer-from need the adares policy")
        # What the spec alone tells is checked now; what needs the trace's file, after loading
        # it but before the first line of output (a refusal is then the only line).
        n_vms, n_steps = rp.planned_size(trace)
        if n_vms is not None and n_vms >= 1 and clusters > n_vms:
            raise InputError(f"--clusters must be in 1..{n_vms} (the VMs), got {clusters}")

        def check_save_log(steps: int) -> None:
            if save_log and steps >= 2 and not logs_a_decision(steps):
                raise InputError(f"--save-log: the bandit makes no decision in {steps} steps "
                                 "(too short); nothing written")

        if n_steps is not None:
            check_save_log(n_steps)
        warm = load_log(transfer_from, CONTEXT_DIM) if transfer_from else None
        if warm is not None and len(warm.allowed[0]) != len(MULTIPLIERS):
            raise InputError(f"--transfer-from {transfer_from}: {len(warm.allowed[0])} actions, "
                             f"this version has {len(MULTIPLIERS)}")
        t0 = time.perf_counter()
        tr = rp.load_trace(trace)
        load_s = time.perf_counter() - t0
        from adares import fleet as fl

        flt = fl.split(tr, clusters, cluster)
        check_save_log(tr.n_steps)
        if warm is not None:
            err.log(f"warm start: {len(warm.action)} logged decisions from {transfer_from}")
        err.log(f"trace {trace}: {tr.n_vms} VMs x {tr.n_steps} steps of {tr.step_s} s "
                f"({load_s:.1f} s)")
        cl = flt.nodes[0]
        if clusters > 1:
            err.log(f"{clusters} clusters of {min(len(b) for b in flt.blocks)}-"
                    f"{max(len(b) for b in flt.blocks)} VMs")
        if cl is not None:
            used = sum(len(set(c.node_of.tolist())) for c in flt.nodes)
            err.log(f"cluster: {cl.n_nodes} nodes"
                    f"{' per cluster' if clusters > 1 else ''}, {used} used")
        from adares.report import sample_vms, write_report

        vms = sample_vms(tr) if report else ()
        t0 = time.perf_counter()
        with _progress_bars(err) as bars:
            results, logs = fl.replay_fleet(
                flt, names, seed=seed, warm_start=warm, keep_log=bool(save_log), record_vms=vms,
                resize_mode=resize, bandit=bandit, margin=margins, backend=backend,
                workers=workers or None, progress=bars,
                on_done=lambda r: err.log(f"{r.policy}: reward {r.reward:.4f}, {r.seconds:.1f} s"))
        if backend == "ray":
            err.log(f"ray: {len(names) * clusters} (cluster, policy) pairs in "
                    f"{time.perf_counter() - t0:.1f} s wall")
        if report:
            _write(report, "--report", lambda p: write_report(p, tr, trace, results, vms))
            err.log(f"report: {report}")
        if save_log:
            if not logs["adares"].action:
                raise InputError("--save-log: the bandit made no decision on this trace (too "
                                 "short); nothing written")
            _write(save_log, "--save-log", lambda p: write_log(logs["adares"], p))
            err.log(f"decision log: {save_log} ({len(logs['adares'].action)} decisions)")
    sav = rp.savings(results)
    if as_json:
        doc = {"trace": {"spec": trace, "vms": tr.n_vms, "steps": tr.n_steps, "step_s": tr.step_s},
               "policies": {n: r.as_dict() for n, r in results.items()},
               "savings": sav}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return
    from rich import box

    caption = ("vs thr./pred.: vCPU-hours/GB-hours saved, % (1 - policy/baseline); "
               "reward: -cost per VM-hour")
    missing = [b for b in ("threshold", "predictive") if b not in results]
    if missing:
        # Without this the empty columns read as "no savings".
        caption += (f"; -: add {' and '.join(missing)} to --policies for savings against "
                    f"{'them' if len(missing) > 1 else 'it'}")
    table = Table(caption=caption, box=box.SIMPLE, pad_edge=False,
                  title=f"replay: {tr.n_vms} VMs x {tr.n_steps * tr.step_s / 86400:.1f} days")
    for col in ("policy", "vCPU-h", "GB-h", "thr.", "OOMs", "resizes", "reward", "vs thr.",
                "vs pred."):
        table.add_column(col, justify="right", no_wrap=True)
    for n, r in results.items():
        s = sav[n]

        def pct(key: str, s: dict = s) -> str:
            v = s.get(key)
            return "-" if v is None else f"{100 * v['vcpu_hours']:+.0f}/{100 * v['gb_hours']:+.0f}"

        table.add_row(n, f"{r.vcpu_hours:.0f}", f"{r.gb_hours:.0f}",
                      f"{100 * r.cpu_throttled_share:.2f}%", f"{r.oom_events}", f"{r.resizes}",
                      f"{r.reward:.3f}", pct("vs_threshold"), pct("vs_predictive"))
    # Pipes get 80 columns from rich by default, two short of the table: give them 100.
    out = Console(width=None if sys.stdout.isatty() else 100)
    out.print(table)
    if cl is not None:
        n_nodes = sum(c.n_nodes for c in flt.nodes)
        nodes = Table(title=f"nodes: {n_nodes} (means over nodes and steps)", box=box.SIMPLE,
                      pad_edge=False, caption="util: used / physical; alloc: allocated / physical")
        for col in ("policy", "refused resizes", "contention thr.", "CPU util", "mem util",
                    "CPU alloc", "mem alloc"):
            nodes.add_column(col, justify="right", no_wrap=True)
        for n, r in results.items():
            e = r.extra
            nodes.add_row(n, f"{e['refused_resizes']}", f"{100 * e['cpu_contention_share']:.2f}%",
                          *(f"{e[k]:.2f}" for k in ("node_cpu_utilization", "node_mem_utilization",
                                                     "node_cpu_allocated", "node_mem_allocated")))
        out.print(nodes)


@app.command(short_help="Savings at equal violation rate: bisect each policy's margins to "
                        "target violations; the frontier.")
def compare(
    trace: str = typer.Option("synthetic:vms=500,days=8,seed=0", "--trace",
                              help="synthetic[:vms=N,days=D,seed=S], shaped:SOURCE[,...], "
                                   "alibaba:USAGE.csv[,meta=META.csv], google2019:USAGE.parquet "
                                   "or azure:READINGS.csv[,vmtable=VMTABLE.csv]"),
    policies: str = typer.Option("threshold,predictive,vpa,autopilot,adares", "--policies",
                                 help="comma-separated (not clairvoyant)"),
    target_throttle: float = typer.Option(0.01, "--target-throttle",
                                          help="CPU throttled share to reach (fraction)"),
    target_oom: float = typer.Option(0.01, "--target-oom", help="OOM kills per VM-day to reach"),
    margin_range: str = typer.Option("-0.5,1.5", "--range", help="LO,HI margins to bisect in"),
    iters: int = typer.Option(7, "--iters", help="bisection steps (one replay each, plus one)"),
    sweep_margin: str = typer.Option("", "--sweep-margin",
                                     help="also replay each policy at these margins "
                                          "(e.g. 0,0.05,0.1,0.2) for the frontier"),
    seed: int = typer.Option(0, "--seed", help="bandit exploration seed"),
    bandit: str = typer.Option("numpy", "--bandit", help="ADARES learner: numpy or vw"),
    cluster: str = typer.Option("", "--cluster", help="nodes=K,cpu=CORES,mem=GIB[,overcommit=R]"),
    report: str = typer.Option("", "--report", help="write an HTML report with the frontier here"),
    as_json: bool = typer.Option(False, "--json", help="print JSON for machines"),
) -> None:
    """For each policy, bisect a CPU and a memory margin on top of its allocations until its CPU
    throttled share and OOM kills per VM-day meet the targets; compare vCPU-hours and GB-hours
    there (savings at equal violation rate) and plot the savings-versus-violations frontier."""
    err = Console(stderr=True)
    with _guarded():
        from adares import frontier as fr
        from adares import replay as rp

        names = rp.parse_policies(policies)
        if "clairvoyant" in names:
            raise InputError("compare: clairvoyant has no margin to set (it is the lower bound)")
        if bandit not in ("numpy", "vw"):
            raise InputError(f"unknown bandit backend {bandit!r} (numpy, vw)")
        _check_seed(seed)
        for v, flag in ((target_throttle, "--target-throttle"), (target_oom, "--target-oom")):
            if not (math.isfinite(v) and v >= 0):
                raise InputError(f"{flag} must be a finite number >= 0, got {v}")
        lo, hi = rp.parse_margin(margin_range, "--range")
        if not lo < hi:
            raise InputError(f"--range {margin_range!r}: LO must be below HI")
        if not 0 <= iters <= 30:
            raise InputError(f"--iters must be in 0..30, got {iters}")
        sweep_ms = []
        if sweep_margin:
            try:
                sweep_ms = [float(v) for v in sweep_margin.split(",") if v.strip()]
            except ValueError:
                raise InputError(f"--sweep-margin {sweep_margin!r}: not numbers") from None
            if not all(math.isfinite(m) and m > -1 for m in sweep_ms):
                raise InputError("--sweep-margin: margins must be finite and > -1")
        if cluster:
            from adares.cluster import parse_node_spec

            parse_node_spec(cluster)
        _check_out(report, "--report")
        tr = rp.load_trace(trace)
        err.log(f"trace {trace}: {tr.n_vms} VMs x {tr.n_steps} steps of {tr.step_s} s")
        cl = None
        if cluster:
            from adares.cluster import parse_cluster

            cl = parse_cluster(cluster, tr)
        res: dict = {}
        extra: dict = {}
        for n in names:
            def make(n: str = n):
                return rp.make_policy(n, tr, seed, bandit=bandit)

            def log(p, n: str = n) -> None:
                err.log(f"{n} at margins {p.cpu_margin:+.3f}/{p.mem_margin:+.3f}: throttled "
                        f"{100 * p.cpu_throttled_share:.2f}%, {p.oom_per_vm_day:.4f} OOM/VM-day, "
                        f"{p.vcpu_hours:.0f} vCPU-h, {p.gb_hours:.0f} GB-h")

            with _progress_bars(err) as bars:
                res[n] = fr.equal_violation(tr, make, target_throttle, target_oom, lo, hi,
                                            iters, cluster=cl, on_point=log, progress=bars)
                if sweep_ms:
                    extra[n] = fr.sweep(tr, make, sweep_ms, cluster=cl, on_point=log,
                                        progress=bars)
        sav = fr.savings_at_equal_violation(res)
        if report:
            from adares.report import write_compare_report

            _write(report, "--report", lambda p: write_compare_report(
                p, trace, tr, res, sav, target_throttle, target_oom, extra))
            err.log(f"report: {report}")
    if as_json:
        from dataclasses import asdict

        doc = {"trace": {"spec": trace, "vms": tr.n_vms, "steps": tr.n_steps, "step_s": tr.step_s},
               "targets": {"cpu_throttled_share": target_throttle, "oom_per_vm_day": target_oom},
               "policies": {n: asdict(ev.at) | {"reached_cpu": ev.reached_cpu,
                                                "reached_mem": ev.reached_mem,
                                                "points": [asdict(p) for p in ev.points + extra.get(n, [])]}
                            for n, ev in res.items()},
               "savings": sav}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return
    from rich import box

    base = [b for b in ("threshold", "predictive", "vpa", "autopilot") if b in res]
    table = Table(title=f"at equal violation: <= {100 * target_throttle:g}% CPU throttled, "
                        f"<= {target_oom:g} OOM kills / VM-day", box=box.SIMPLE, pad_edge=False,
                  caption="margins: CPU/mem fractions added; vs: vCPU-hours/GB-hours saved, % "
                          "(1 - policy/baseline); * target not reached in --range")
    for col in ("policy", "margins", "vCPU-h", "GB-h", "thr.", "OOM/VM-d",
                *(f"vs {b[:5]}" for b in base)):
        table.add_column(col, justify="right", no_wrap=True)
    for n, ev in res.items():
        a = ev.at
        cells = [f"{100 * sav[n][f'vs_{b}']['vcpu_hours']:+.0f}/{100 * sav[n][f'vs_{b}']['gb_hours']:+.0f}"
                 if f"vs_{b}" in sav[n] else "-" for b in base]
        star = "" if ev.reached_cpu and ev.reached_mem else "*"
        table.add_row(n + star, f"{a.cpu_margin:+.2f}/{a.mem_margin:+.2f}", f"{a.vcpu_hours:.0f}",
                      f"{a.gb_hours:.0f}", f"{100 * a.cpu_throttled_share:.2f}%",
                      f"{a.oom_per_vm_day:.4f}", *cells)
    Console(width=None if sys.stdout.isatty() else 110).print(table)


@app.command(short_help="Emit one policy's final recommendations: VPA objects and a resize plan.")
def recommend(
    trace: str = typer.Option("synthetic:vms=20,days=8,seed=0", "--trace",
                              help="synthetic[:vms=N,days=D,seed=S], shaped:SOURCE[,...], "
                                   "alibaba:USAGE.csv[,meta=META.csv], google2019:USAGE.parquet "
                                   "or azure:READINGS.csv[,vmtable=VMTABLE.csv]"),
    policy: str = typer.Option("vpa", "--policy", help=f"one of: {', '.join(POLICY_NAMES)}"),
    yaml_out: str = typer.Option("", "--yaml",
                                 help="write VPA objects here (default: stdout, unless --plan is given)"),
    plan_out: str = typer.Option("", "--plan", help="write a per-VM resize plan here"),
    plan_format: str = typer.Option("csv", "--format", help="plan format: csv or json"),
    seed: int = typer.Option(0, "--seed", help="bandit exploration seed"),
) -> None:
    """Replay a trace under one policy and emit its final recommendations: VPA
    status.recommendation objects (YAML) and a resize plan (CSV/JSON)."""
    with _guarded():
        from adares import recommend as rc
        from adares import replay as rp

        if plan_format not in ("csv", "json"):
            raise InputError(f"unknown plan format {plan_format!r} (csv, json)")
        names = rp.parse_policies(policy)
        if len(names) != 1:
            raise InputError("--policy takes one policy name")
        name = names[0]
        if name == "clairvoyant":  # before the trace is loaded and replayed, not after
            raise InputError("clairvoyant knows each step's demand and has no recommendation past "
                             "the trace; pick another --policy")
        _check_seed(seed)
        _check_out(yaml_out, "--yaml")
        _check_out(plan_out, "--plan")
        tr = rp.load_trace(trace)
        rec = rc.recommend(tr, name, seed)
        text = rc.vpa_yaml(rec)
        if yaml_out:
            _write(yaml_out, "--yaml", lambda p: write_atomic(p, text))
        elif not plan_out:
            sys.stdout.write(text)
        if plan_out:
            plan = rc.plan_text(rc.resize_plan(rec), plan_format)
            _write(plan_out, "--plan", lambda p: write_atomic(p, plan))
        for out, what in ((yaml_out, "VPA objects"), (plan_out, "resize plan")):
            if out:
                typer.echo(f"adares: {what} for {len(rec.vm_ids)} VMs: {out}", err=True)


@app.command(short_help="Off-policy evaluation (IPS, SNIPS, DR) of fixed sizes from a decision log.")
def evaluate(
    log: str = typer.Argument(..., help="a decision log written by adares replay --save-log"),
    targets: str = typer.Option("1.0,1.25,1.5,2.0", "--targets",
                                help="fixed size multipliers to evaluate off-policy"),
    as_json: bool = typer.Option(False, "--json", help="print JSON for machines"),
) -> None:
    """Off-policy evaluation (IPS, SNIPS, doubly robust) of fixed-size policies from a bandit
    decision log: the mean cost per decision each would have had, with 95% intervals."""
    try:
        import numpy as np

        try:
            ms = [float(v) for v in targets.split(",") if v.strip()]
        except ValueError:
            raise InputError(f"--targets: not numbers: {targets!r}") from None
        if not ms or min(ms) <= 0 or not all(map(math.isfinite, ms)):
            raise InputError("--targets: give positive, finite multipliers")
        from adares.ope import evaluate_log
        from adares.policies.bandit import MULTIPLIERS, load_log

        lg = load_log(log)
        if len(lg.allowed[0]) != len(MULTIPLIERS):
            raise InputError(f"{log}: {len(lg.allowed[0])} actions, this version has {len(MULTIPLIERS)}")
        res = evaluate_log(lg, np.asarray(MULTIPLIERS), ms)
    except InputError as exc:
        _fail(str(exc))
        return
    except KeyboardInterrupt:
        _interrupted()
        return
    if as_json:
        sys.stdout.write(json.dumps(res, indent=2) + "\n")
        return
    table = Table(title=f"off-policy cost estimates from {log} (lower is better)")
    for col in ("resource", "policy", "IPS", "SNIPS", "DR [95% CI]", "ESS"):
        table.add_column(col, justify="right")
    for r, per in res.items():
        table.add_row(r, "logged", f"{per['logged']['mean']:.3f}", "", "", "")
        for name, v in per.items():
            if name != "logged":
                table.add_row(r, name, f"{v['ips']:.3f}", f"{v['snips']:.3f}",
                              f"{v['dr']:.3f} [{v['dr_low']:.3f}, {v['dr_high']:.3f}]", f"{v['ess']:.0f}")
    Console().print(table)


def main() -> None:
    """Entry point of the ``adares`` console script. A usage error (a value of the wrong type,
    an unknown option) gets one line on stderr and exit code 2, like bad input, instead of
    click's boxed usage text; no arguments print the help."""
    # Typer >= 0.20 raises its own copy of click's exceptions (typer._click); older ones raise
    # click's: find the base class through the public typer.BadParameter either way.
    click_exc = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
    no_args = getattr(sys.modules[click_exc.__module__], "NoArgsIsHelpError", ())
    try:
        rc = app(standalone_mode=False, prog_name="adares")
    except no_args as exc:
        exc.show()
        raise SystemExit(exc.exit_code) from None
    except click_exc as exc:
        where = f" (see {exc.ctx.command_path} --help)" if getattr(exc, "ctx", None) else ""
        msg = " ".join(exc.format_message().split())
        typer.echo(f"adares: error: {msg}{where}", err=True)
        raise SystemExit(exc.exit_code) from None
    except typer.Abort:
        typer.echo("adares: interrupted", err=True)
        raise SystemExit(130) from None
    raise SystemExit(rc if isinstance(rc, int) else 0)


if __name__ == "__main__":
    main()
