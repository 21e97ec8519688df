"""Command line: ``adares replay``, ``compare``, ``recommend``, ``evaluate``.

Each command declares its options, hands them to ``adares.cli_checks`` (validation: a typed
request or one line and exit 2, before any replay), runs the job and prints through
``adares.render``. Old option spellings stay as hidden aliases for one release."""

from __future__ import annotations

import contextlib
import math
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import typer
from rich.console import Console

from adares.cli_checks import alias, check_out, check_seed
from adares.console import Reporter
from adares.errors import InputError
from adares.files import write_atomic
from adares.items import split_items
from adares.policies import compare_names, policy_names

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Contextual-bandit rightsizing of VMs and containers, against the VPA "
                       "recommender and threshold/predictive policies, on replayed traces.")

TRACE_HELP = ("synthetic[:vms=N,days=D,seed=S], population[:vms=N,days=D,seed=S,calibration=hand|fitted,lifetimes=none|azure], "
              "shaped:SOURCE[,...], "
              "alibaba:USAGE.csv[,meta=META.csv], google2019:USAGE.parquet "
              "or azure:READINGS.csv[,vmtable=VMTABLE.csv]")
PRICE_HELP = ("P or CPU,MEM: money per resize of a VM's CPU / memory allocation "
              "(a vCPU-hour costs 1)")
CAP_HELP = "resizes allowed per VM-hour (a resize sooner is refused); 0: no cap"
#: --seed and --quiet mean the same in every command (and in the workspace's four tools).
SEED_HELP = ("seed of what the command draws at random: the bandit's exploration (replay, compare, "
             "recommend), the doubly robust model's folds (evaluate); >= 0")
QUIET_HELP = "no progress lines or bars on stderr (errors still print)"
KNOB_HELP = ("POLICY.KNOB=VALUE, repeatable: set a policy's knob (e.g. vpa.safety_margin=0.3; "
             "each knob's range is checked; the policy must be in --policies)")


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


def _write(path: str, flag: str, write: Callable[[Path], None]) -> None:
    """Run ``write(Path(path))``; an OSError (full disk, a folder that refuses new files even
    to root, such as /proc) becomes one line and exit 2."""
    try:
        write(Path(path))
    except OSError as exc:
        raise InputError(f"{flag} {path}: cannot write ({exc.strerror or type(exc).__name__})") from None


def _run_replay(req, say: Reporter):
    """Load the trace, replay the fleet, write the report and log; returns (trace, fleet,
    results). Raises InputError for what only the loaded trace can tell."""
    from adares import fleet as fl
    from adares import replay as rp
    from adares.cli_checks import check_save_log, load_warm_start
    from adares.policies.bandit import save_log as write_log
    from adares.report import sample_vms, write_report

    _, n_steps = rp.planned_size(req.trace)
    if n_steps is not None:
        check_save_log(req.save_log, n_steps)
    warm = load_warm_start(req.transfer_from, req.knobs.get("adares"))
    t0 = time.perf_counter()
    tr = rp.load_trace(req.trace)
    load_s = time.perf_counter() - t0
    flt = fl.split(tr, req.clusters, req.cluster)
    check_save_log(req.save_log, tr.n_steps)
    if warm is not None:
        say.line(f"warm start: {len(warm.action)} logged decisions from {req.transfer_from}")
    say.line(f"trace {req.trace}: {tr.n_vms} VMs x {tr.n_steps} steps of {tr.step_s} s "
             f"({load_s:.1f} s)")
    if req.clusters > 1:
        say.line(f"{req.clusters} clusters of {min(len(b) for b in flt.blocks)}-"
                 f"{max(len(b) for b in flt.blocks)} VMs")
    cl = flt.nodes[0]
    if cl is not None:
        used = sum(len(set(c.node_of.tolist())) for c in flt.nodes)
        say.line(f"cluster: {cl.n_nodes} nodes{' per cluster' if req.clusters > 1 else ''}, "
                 f"{used} used")
    vms = sample_vms(tr) if req.out else ()
    t0 = time.perf_counter()
    with say.bars() as bars:
        results, logs = fl.replay_fleet(
            flt, req.names, seed=req.seed, costs=req.costs, warm_start=warm, keep_log=bool(req.save_log),
            record_vms=vms, resize_mode=req.resize, bandit=req.bandit, margin=req.margins,
            backend=req.backend, workers=req.jobs or None, progress=bars, knobs=req.knobs,
            on_done=lambda r: say.line(f"{r.policy}: reward {r.reward:.4f}, {r.seconds:.1f} s"))
    if req.backend == "ray":
        say.line(f"ray: {len(req.names) * req.clusters} (cluster, policy) pairs in "
                 f"{time.perf_counter() - t0:.1f} s wall")
    if req.out:
        _write(req.out, "--out", lambda p: write_report(p, tr, req.trace, results, vms))
        say.line(f"report: {req.out}")
    if req.save_log:
        log = next(iter(logs.values()))
        if not log.action:
            raise InputError("--save-log: the bandit made no decision on this trace (too "
                             "short); nothing written")
        _write(req.save_log, "--save-log", lambda p: write_log(log, p))
        say.line(f"decision log: {req.save_log} ({len(log.action)} decisions)")
    return tr, flt, results


@app.command(short_help="Replay a trace under each policy and compare costs, violations "
                        "and savings.")
def replay(
    trace: str = typer.Option("synthetic:vms=500,days=8,seed=0", "--trace", help=TRACE_HELP),
    policies: str = typer.Option(",".join(policy_names()), "--policies",
                                 help=f"comma-separated, of: {', '.join(policy_names())}"),
    seed: int = typer.Option(0, "--seed", help=SEED_HELP),
    knob: list[str] = typer.Option([], "--knob", help=KNOB_HELP),
    transfer_from: str = typer.Option("", "--transfer-from",
                                      help="warm-start the bandit from a decision log (.npz)"),
    save_log: str = typer.Option("", "--save-log", help="write the bandit's decision log (.npz)"),
    out: str = typer.Option("", "--out", help="write an HTML report with plots here"),
    report: str = typer.Option("", "--report", hidden=True, help="old spelling of --out"),
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
    jobs: int = typer.Option(0, "--jobs",
                             help="CPUs of the Ray instance started for --backend ray "
                                  "(0: every core)"),
    workers: int = typer.Option(0, "--workers", hidden=True, help="old spelling of --jobs"),
    resize_price: str = typer.Option("0.01,0.05", "--resize-price", help=PRICE_HELP),
    resize_cap: float = typer.Option(0.0, "--resize-cap", help=CAP_HELP),
    as_json: bool = typer.Option(False, "--json", help="print JSON for machines"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help=QUIET_HELP),
) -> None:
    """Replay a trace under each policy; print vCPU-hours, GB-hours, throttled share, OOM
    kills, resizes, reward, and savings against the threshold and predictive baselines."""
    from adares import render
    from adares.cli_checks import check_replay
    from adares.replay import savings

    say = Reporter(quiet)
    with _guarded():
        req = check_replay(trace, policies, seed, bandit, resize, cluster, margin, clusters,
                           backend, alias(jobs, workers, 0, "--jobs", "--workers"),
                           alias(out, report, "", "--out", "--report"), save_log,
                           transfer_from, knob, resize_price, resize_cap)
        tr, flt, results = _run_replay(req, say)
    sav = savings(results)
    if as_json:
        sys.stdout.write(render.replay_json(trace, tr, results, sav))
        return
    n_nodes = None if flt.nodes[0] is None else sum(c.n_nodes for c in flt.nodes)
    render.print_replay(tr, results, sav, n_nodes)


def _run_compare(req, say: Reporter) -> tuple:
    """Load the trace and bisect every policy's margins (one job per policy, on
    ``req.backend``; with ``req.equal_resizes`` a second round bisects each policy's resize cap
    to the fewest resizes any policy made); returns (trace, results, sweeps, savings, caps)
    and writes the report."""
    from adares import replay as rp

    tr = rp.load_trace(req.trace)
    say.line(f"trace {req.trace}: {tr.n_vms} VMs x {tr.n_steps} steps of {tr.step_s} s")
    cl = None
    if req.cluster:
        from adares.cluster import parse_cluster

        cl = parse_cluster(req.cluster, tr)
    if req.tune:
        return tr, *_tune_all(req, tr, say), {}
    done = _compare_round(req, tr, cl, _compare_jobs(req), {}, say)
    if req.equal_resizes:
        target = min(j.result.at.resizes for j in done.values())
        say.line(f"holding resizes equal: every policy to at most {target} resizes")
        jobs = _compare_jobs(req, target)
        busy = {n: job for n, job in jobs.items() if done[n].result.at.resizes > target}
        done |= _compare_round(req, tr, cl, busy, {n: done[n].result for n in busy}, say)
    res = {n: done[n].result for n in req.names}
    extra = {n: done[n].sweep for n in req.names if done[n].sweep}
    caps = {n: done[n].resize_cap for n in req.names}
    return tr, res, extra, _finish_compare(req, tr, res, extra, say), caps


def _compare_jobs(req, target_resizes: int | None = None) -> dict:
    from adares.compare_jobs import CompareJob
    from adares.policies import PolicyOptions

    return {n: CompareJob(n, PolicyOptions(req.seed, req.costs, req.knobs.get(n, {}),
                                           bandit=req.bandit),
                          req.target_throttle, req.target_oom, req.lo, req.hi, req.iters,
                          tuple(req.sweep), req.costs, target_resizes) for n in req.names}


def _compare_round(req, tr, cl, jobs: dict, free: dict, say: Reporter) -> dict:
    """Run the jobs (policy -> CompareJob) on req.backend; returns policy -> JobResult."""
    from adares.backends import map_jobs
    from adares.compare_jobs import run_job

    names = list(jobs)

    def log(n: str):
        def line(p) -> None:
            say.line(f"{n} at margins {p.cpu_margin:+.3f}/{p.mem_margin:+.3f}: throttled "
                     f"{100 * p.cpu_throttled_share:.2f}%, {p.oom_per_vm_day:.4f} OOM/VM-day, "
                     f"{p.vcpu_hours:.0f} vCPU-h, {p.gb_hours:.0f} GB-h, {p.resizes} resizes")
        return line

    def finished(i: int, r) -> None:
        say.line(f"{names[i]} done: {r.result.at.vcpu_hours:.0f} vCPU-h, "
                 f"{r.result.at.gb_hours:.0f} GB-h, {r.result.at.resizes} resizes")

    with say.bars() as bars:
        local = req.backend == "local"
        args = [(tr, jobs[n], cl, free.get(n), log(n) if local else None,
                 bars if local else None) for n in names]
        out = map_jobs(run_job, args, req.backend, req.jobs or None, on_result=finished)
    return dict(zip(names, out))


def _tune_all(req, tr, say: Reporter) -> tuple:
    """``compare --tune N``: each policy's knobs searched (``adares.tuning``); returns
    (results, sweeps (none), savings) with each policy's best knobs in ``req.knobs``."""
    from adares.tuning import tune

    res: dict = {}
    for n in req.names:
        def log(knobs: dict, s: float, n: str = n) -> None:
            shown = ", ".join(f"{k}={v:.3g}" for k, v in knobs.items()) or "no knobs"
            say.line(f"{n} tuning: {shown}: {s:.0f} money at the targets")

        best = tune(tr, n, req.tune, req.target_throttle, req.target_oom, req.lo, req.hi,
                    req.iters, req.costs, req.seed, req.bandit, on_trial=log)
        res[n] = best.result
        req.knobs[n] = best.knobs
    return res, {}, _finish_compare(req, tr, res, {}, say)


def _finish_compare(req, tr, res: dict, extra: dict, say: Reporter) -> dict:
    """Savings at equal violation; the report when ``--out`` is given."""
    from adares import frontier as fr

    sav = fr.savings_at_equal_violation(res)
    if req.out:
        from adares.report import write_compare_report

        _write(req.out, "--out", lambda p: write_compare_report(
            p, req.trace, tr, res, sav, req.target_throttle, req.target_oom, extra))
        say.line(f"report: {req.out}")
    return sav


@app.command(short_help="Savings at equal violation rate: bisect each policy's margins to "
                        "target violations; the frontier.")
def compare(
    trace: str = typer.Option("synthetic:vms=500,days=8,seed=0", "--trace", help=TRACE_HELP),
    policies: str = typer.Option(",".join(compare_names()), "--policies",
                                 help="comma-separated (not clairvoyant)"),
    target_throttle: float = typer.Option(0.01, "--target-throttle",
                                          help="CPU throttled share to reach (fraction)"),
    target_oom: float = typer.Option(0.01, "--target-oom", help="OOM kills per VM-day to reach"),
    margin_range: str = typer.Option("-0.5,1.5", "--range", help="LO,HI margins to bisect in"),
    iters: int = typer.Option(7, "--iters", help="bisection steps (one replay each, plus one)"),
    sweep_margin: str = typer.Option("", "--sweep-margin",
                                     help="also replay each policy at these margins "
                                          "(e.g. 0,0.05,0.1,0.2) for the frontier"),
    seed: int = typer.Option(0, "--seed", help=SEED_HELP),
    knob: list[str] = typer.Option([], "--knob", help=KNOB_HELP),
    bandit: str = typer.Option("numpy", "--bandit", help="ADARES learner: numpy or vw"),
    cluster: str = typer.Option("", "--cluster", help="nodes=K,cpu=CORES,mem=GIB[,overcommit=R]"),
    out: str = typer.Option("", "--out", help="write an HTML report with the frontier here"),
    report: str = typer.Option("", "--report", hidden=True, help="old spelling of --out"),
    resize_price: str = typer.Option("0.01,0.05", "--resize-price", help=PRICE_HELP),
    resize_cap: float = typer.Option(0.0, "--resize-cap", help=CAP_HELP),
    tune: int = typer.Option(0, "--tune",
                             help="search each policy's own knobs with this many trials "
                                  "(Optuna TPE; each trial one bisection); 0: defaults"),
    equal_resizes: bool = typer.Option(False, "--equal-resizes",
                                       help="hold resizes equal too: bisect each policy's "
                                            "resize cap to the fewest resizes any policy made"),
    backend: str = typer.Option("local", "--backend",
                                help="local (one policy after another, here) or ray (one Ray "
                                     "task per policy)"),
    jobs: int = typer.Option(0, "--jobs", help="CPUs of the Ray instance started for "
                                               "--backend ray (0: every core)"),
    as_json: bool = typer.Option(False, "--json", help="print JSON for machines"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help=QUIET_HELP),
) -> None:
    """For each policy, bisect a CPU and a memory margin on top of its allocations until its CPU
    throttled share and OOM kills per VM-day meet the targets; compare vCPU-hours and GB-hours
    there (savings at equal violation rate) and plot the savings-versus-violations frontier."""
    from adares import render
    from adares.cli_checks import check_compare

    say = Reporter(quiet)
    with _guarded():
        req = check_compare(trace, policies, seed, bandit, target_throttle, target_oom,
                            margin_range, iters, sweep_margin, cluster,
                            alias(out, report, "", "--out", "--report"), knob, resize_price,
                            resize_cap, tune, equal_resizes, backend, jobs)
        tr, res, extra, sav, caps = _run_compare(req, say)
    if as_json:
        sys.stdout.write(render.compare_json(trace, tr, res, sav, target_throttle, target_oom,
                                             extra, req.knobs, caps))
        return
    render.print_compare(res, sav, target_throttle, target_oom)


@app.command(short_help="Emit one policy's final recommendations: VPA objects and a resize plan.")
def recommend(
    trace: str = typer.Option("synthetic:vms=20,days=8,seed=0", "--trace", help=TRACE_HELP),
    policy: str = typer.Option("vpa", "--policy", help=f"one of: {', '.join(policy_names())}"),
    out: str = typer.Option("", "--out",
                            help="write VPA objects here (default: stdout, unless --plan is given)"),
    yaml_old: str = typer.Option("", "--yaml", hidden=True, help="old spelling of --out"),
    plan_out: str = typer.Option("", "--plan", help="write a per-VM resize plan here"),
    plan_format: str = typer.Option("csv", "--format", help="plan format: csv or json"),
    seed: int = typer.Option(0, "--seed", help=SEED_HELP),
    quiet: bool = typer.Option(False, "--quiet", "-q", help=QUIET_HELP),
) -> None:
    """Replay a trace under one policy and emit its final recommendations: VPA
    status.recommendation objects (YAML) and a resize plan (CSV/JSON)."""
    with _guarded():
        from adares import recommend as rc
        from adares import replay as rp
        from adares.policies import get, parse_policies

        if plan_format not in ("csv", "json"):
            raise InputError(f"unknown plan format {plan_format!r} (csv, json)")
        names = parse_policies(policy)
        if len(names) != 1:
            raise InputError("--policy takes one policy name")
        name = names[0]
        if get(name).bound:  # before the trace is loaded and replayed, not after
            raise InputError(f"{name} knows each step's demand and has no recommendation past "
                             "the trace; pick another --policy")
        check_seed(seed)
        given = alias(out, yaml_old, "", "--out", "--yaml")
        yaml_out, yaml_flag = str(given.value), given.flag
        check_out(yaml_out, yaml_flag)
        check_out(plan_out, "--plan")
        tr = rp.load_trace(trace)
        rec = rc.recommend(tr, name, seed)
        text = rc.vpa_yaml(rec)
        if yaml_out:
            _write(yaml_out, yaml_flag, lambda p: write_atomic(p, text))
        elif not plan_out:
            sys.stdout.write(text)
        if plan_out:
            plan = rc.plan_text(rc.resize_plan(rec), plan_format)
            _write(plan_out, "--plan", lambda p: write_atomic(p, plan))
        for path, what in ((yaml_out, "VPA objects"), (plan_out, "resize plan")):
            if path and not quiet:
                typer.echo(f"adares: {what} for {len(rec.vm_ids)} VMs: {path}", err=True)


@app.command(short_help="Off-policy evaluation (IPS, SNIPS, DR) of fixed sizes from a decision log.")
def evaluate(
    log: str = typer.Argument(..., help="a decision log written by adares replay --save-log"),
    targets: str = typer.Option("1.0,1.25,1.5,2.0", "--targets",
                                help="fixed size multipliers to evaluate off-policy"),
    seed: int = typer.Option(0, "--seed", help=SEED_HELP),
    as_json: bool = typer.Option(False, "--json", help="print JSON for machines"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help=QUIET_HELP),
) -> None:
    """Off-policy evaluation (IPS, SNIPS, doubly robust) of fixed-size policies from a bandit
    decision log: the mean cost per decision each would have had, with 95% intervals."""
    say = Reporter(quiet)
    try:
        import numpy as np

        check_seed(seed)
        items = split_items(targets, "--targets")
        try:
            ms = [float(v) for v in items]
        except ValueError:
            raise InputError(f"--targets: not numbers: {targets!r}") from None
        if not ms or min(ms) <= 0 or not all(map(math.isfinite, ms)):
            raise InputError("--targets: give positive, finite multipliers")
        from adares.ope import evaluate_log
        from adares.policies.bandit import MULTIPLIERS, load_log

        lg = load_log(log)
        # A log that records its action set (load_log checked it against the log's actions) is
        # read with its own multipliers; one that does not is read with this version's.
        if lg.multipliers is None and len(lg.allowed[0]) != len(MULTIPLIERS):
            raise InputError(f"{log}: {len(lg.allowed[0])} actions, this version has {len(MULTIPLIERS)}")
        mult = lg.multipliers or MULTIPLIERS
        per = {r: lg.resource.count(r) for r in ("cpu", "mem")}
        whose = "" if lg.multipliers else " (this version's: the log records none)"
        say.line(f"decision log {log}: {len(lg.action)} decisions (cpu {per['cpu']}, mem {per['mem']}), "
                 f"{len(mult)} sizes{whose}")
        res = evaluate_log(lg, np.asarray(mult), ms, seed=seed)
        say.line(f"evaluated {len(ms)} fixed sizes with IPS, SNIPS and DR")
    except InputError as exc:
        _fail(str(exc))
        return
    except KeyboardInterrupt:
        _interrupted()
        return
    from adares import render

    if as_json:
        sys.stdout.write(render.as_json(res))
        return
    Console().print(render.evaluate_table(log, res))


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
