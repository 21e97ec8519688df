"""The geodml command line: ``geodml compare`` (main job) and ``geodml plan``.

Bad input (unknown algorithm or region, malformed spec or WAN file, empty data center, bad
option) prints one line on stderr and exits 2.
"""

from __future__ import annotations

import errno
import json
import math
import sys
import time

import typer


def _exception_types(name: str) -> tuple[type, ...]:
    """The class `name` from typer's vendored click (typer >= 0.2x) and from click itself, where
    each exists: which one typer raises depends on its version, and click may be installed by
    another package (ray) beside a typer that vendors its own."""
    found = []
    for module in ("typer._click.exceptions", "typer.exceptions", "click.exceptions"):
        try:
            mod = __import__(module, fromlist=[name])
        except ImportError:
            continue
        cls = getattr(mod, name, None)
        if isinstance(cls, type) and cls not in found:
            found.append(cls)
    return tuple(found)


Abort = _exception_types("Abort")
UsageError = _exception_types("UsageError")
ClickException = _exception_types("ClickException")
from rich.console import Console
from rich.table import Table

from geodml import registry
from geodml.algorithms import Settings
from geodml.errors import GeodmlError

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None,
                  help="Geo-distributed training: move models instead of data; exact bytes, time and dollars; when centralizing wins.")


def _split_names(s: str, option: str) -> tuple[str, ...]:
    """The names of a comma-separated option (--algos, --sovereign), blanks stripped; "" is no
    names. Raises GeodmlError for an empty item ("a,,b", "a,") or a name given twice: either is
    a typo that would otherwise run something other than what was asked, silently."""
    if not s.strip():
        return ()
    names = tuple(x.strip() for x in s.split(","))
    if "" in names:
        raise GeodmlError(f"{option} {s!r} has an empty item: separate names with single commas")
    twice = sorted({x for x in names if names.count(x) > 1})
    if twice:
        raise GeodmlError(f"{option} {s!r} names {', '.join(twice)} twice")
    return names


def _algo_names(s: str) -> tuple[str, ...]:
    names = _split_names(s, "--algos")
    if not names:
        raise GeodmlError("--algos is empty: name at least one algorithm")
    return names


def _finite(param: typer.CallbackParam, value: float | None) -> float | None:
    """Option callback of every float option: refuses inf and nan (float() accepts "inf", "nan"
    and "1e309"), which no option means and which otherwise ran with a RuntimeWarning and a
    meaningless result. Raises GeodmlError naming the option."""
    if value is not None and not math.isfinite(value):
        raise GeodmlError(f"{param.opts[0]} must be a finite number, got {value}")
    return value


MAX_ITERATIONS = 100_000


def _settings(l2, rounds, local_steps, batch_size, lr, seed, compress="none", inner="sgd", compress_down="none",
              model="logreg", weight_decay=0.1) -> Settings:
    from geodml.compression import parse
    from geodml.models import get as get_model
    from geodml.settings import INNER_OPTIMIZERS

    parse(compress)
    parse(compress_down)
    get_model(model)
    if inner not in INNER_OPTIMIZERS:
        raise GeodmlError(f"unknown inner optimizer {inner!r} (use {', '.join(INNER_OPTIMIZERS)})")
    if not l2 > 0:
        raise GeodmlError(f"--l2 must be > 0, got {l2}")
    if not 0 <= lr < float("inf"):
        raise GeodmlError(f"--lr must be >= 0 and finite (0: automatic), got {lr}")
    if not 0 <= weight_decay < float("inf"):
        raise GeodmlError(f"--weight-decay must be >= 0 and finite, got {weight_decay}")
    for name, v in (("--rounds", rounds), ("--local-steps", local_steps)):
        # The cap stops a mistyped count from running for days with no output; no study here needs more.
        if not 1 <= v <= MAX_ITERATIONS:
            raise GeodmlError(f"{name} must be between 1 and {MAX_ITERATIONS:,}, got {v}")
    if batch_size < 0:
        raise GeodmlError(f"--batch-size must be >= 0 (0: full batch), got {batch_size}")
    # numpy's generators take only non-negative seeds; checked here so it is one line, not a traceback
    if seed < 0:
        raise GeodmlError(f"--seed must be >= 0, got {seed}")
    return Settings(lam=l2, rounds=rounds, local_steps=local_steps, batch_size=batch_size, lr=lr, seed=seed, compress=compress, inner=inner,
                    compress_down=compress_down, model=model, weight_decay=weight_decay)


class _Stdout(Console):
    """A rich Console on stdout that leaves a closed pipe (``| head -1``) to the one handler in
    main(): rich's own handler exits 1 itself."""

    def on_broken_pipe(self) -> None:
        """Stop printing and raise BrokenPipeError (click then exits 1 and main() makes it 0).

        Raises:
            BrokenPipeError: always.
        """
        self.quiet = True
        raise BrokenPipeError(errno.EPIPE, "stdout closed")


def _fmt_bytes(b: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(b) < 1000 or unit == "TB":
            return f"{b:.3g} {unit}"
        b /= 1000
    return str(b)


_DATA_HELP = ("sklearn:NAME, ctr[:rows=..,features=..,fields=..], libsvm:PATH, dataset:NAME, csv:FILE,label=COL,region=COL "
              "or parquet:FILE,label=COL,region=COL (default: ctr:rows=200000,features=16384,fields=20)")
_PARTITION_HELP = ("iid, dirichlet:ALPHA, covariate:S, unequal:W1,..,WK or place (by the data's place column; "
                   "the default for --dataset, csv: and parquet: data, else iid)")


def _data_spec(data: str | None, dataset: str | None, sample: int | None) -> str:
    """The data spec from --data, --dataset and --sample. Raises GeodmlError for both or a bad sample."""
    from geodml.compare import DEFAULT_DATA

    if data and dataset:
        raise GeodmlError("--data and --dataset name two data sets: choose one")
    spec = f"dataset:{dataset}" if dataset else (data or DEFAULT_DATA)
    if sample is not None:
        if spec.split(":", 1)[0] not in ("dataset", "csv", "parquet"):
            raise GeodmlError("--sample applies to --dataset, csv: and parquet: data")
        spec += f",sample={sample}"
    return spec


def _algos_help() -> str:
    return f"comma-separated algorithms (default: every registered one: {','.join(registry.names())})"


def _backend(backend: str, ray: bool, flower: bool) -> str:
    """--backend, with the old spellings --ray and --flower (hidden aliases) folded in."""
    if ray and flower:  # a contradiction, whatever is installed
        raise GeodmlError("--ray and --flower are two ways to run the DCs: choose one")
    old = "ray" if ray else "flower" if flower else None
    if old and backend not in ("local", old):
        raise GeodmlError(f"--{old} and --backend {backend} are two ways to run the DCs: choose one")
    return old or backend


def _progress(status, quiet: bool):
    """A progress callback: the spinner's text on a terminal, one line per step on stderr
    otherwise (logs); nothing with --quiet."""
    def progress(msg: str) -> None:
        if quiet:
            return
        status.update(msg)
        if not sys.stderr.isatty():
            print(f"geodml: {msg}", file=sys.stderr, flush=True)
    return progress


@app.command()
def compare(
    data: str = typer.Option(None, help=_DATA_HELP),
    dataset: str = typer.Option(None, "--dataset", help="a real dataset a package ships (geodml datasets lists them), split by its own place column"),
    sample: int = typer.Option(None, "--sample", help="with --dataset or csv:/parquet: data, a seeded sample of this many rows"),
    dcs: int = typer.Option(None, "--dcs", help="number of data centers (default: every region of the WAN, or one per place group)"),
    partition: str = typer.Option(None, help=_PARTITION_HELP),
    wan: str = typer.Option(None, help="WAN YAML file (default: the data's packaged WAN, else the 4-region default)"),
    sovereign: str = typer.Option("", help="comma-separated sovereign regions (raw rows never leave them)"),
    algos: str = typer.Option(None, help=_algos_help()),
    rounds: int = typer.Option(20, help="rounds of FedAvg, FedProx, DiLoCo"),
    local_steps: int = typer.Option(50, help="local SGD steps per round"),
    batch_size: int = typer.Option(256, help="local mini-batch rows (0: full batch)"),
    lr: float = typer.Option(0.0, help="local SGD step size (0: 1/L of each DC's local objective)", callback=_finite),
    l2: float = typer.Option(1e-4, help="L2 strength lam of the objective", callback=_finite),
    flat: bool = typer.Option(False, "--flat", help="no hierarchical aggregation: every worker talks to the hub"),
    compress: str = typer.Option("none", help="uplink of fedavg/fedprox/diloco: none, q8 or topk:FRACTION (error feedback)"),
    compress_down: str = typer.Option("none", help="downlink (the hub's broadcast) of fedavg/fedprox/diloco: none, q8 or topk:FRACTION"),
    inner: str = typer.Option("sgd", help="local optimizer of fedavg/fedprox/diloco: sgd, adam or adamw (decoupled weight decay)"),
    model: str = typer.Option("logreg", help="logreg, or mlp[:HIDDEN] (one hidden ReLU layer, default 32 units; centralize, fedavg, fedprox, diloco)"),
    weight_decay: float = typer.Option(0.1, "--weight-decay", help="AdamW's decoupled weight decay (--inner adamw)", callback=_finite),
    seed: int = typer.Option(0, help="seed of the data, the partition, local sampling and the MLP's initial weights"),
    out: str = typer.Option(None, "--out", help="also write an HTML report with plots to this file"),
    backend: str = typer.Option("local", "--backend", help="where the data centers compute: local (this process), ray (one Ray actor each; "
                                "pip install 'geodml[ray]'), flower (one Flower ClientApp each on Flower's simulation engine; "
                                "pip install 'geodml[flower]') or flower-deployment (a Flower SuperLink and one SuperNode process "
                                "each, bytes counted on the wire); all but local add measured wall time and bytes"),
    jobs: int = typer.Option(None, "--jobs", help="CPUs the ray or flower backend may use (default: Ray's default; Flower: 1)"),
    flower_timeout: float = typer.Option(300.0, "--flower-timeout", help="seconds each data center's ClientApp has to answer one message under --backend flower or flower-deployment; a hung one ends the run with an error", callback=_finite),
    as_json: bool = typer.Option(False, "--json", help="print JSON on stdout"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress on stderr"),
    report: str = typer.Option(None, "--report", hidden=True, help="old spelling of --out"),
    ray: bool = typer.Option(False, "--ray", hidden=True, help="old spelling of --backend ray"),
    flower: bool = typer.Option(False, "--flower", hidden=True, help="old spelling of --backend flower"),
):
    """Train with each algorithm on the same federation; report bytes, rounds, time, dollars, accuracy."""
    from geodml.compare import CompareConfig, compare as run_compare

    cfg = CompareConfig(data=_data_spec(data, dataset, sample), k=dcs, partition=partition, wan=wan, sovereign=_split_names(sovereign, "--sovereign"),
                        algos=None if algos is None else _algo_names(algos),
                        settings=_settings(l2, rounds, local_steps, batch_size, lr, seed, compress, inner, compress_down, model, weight_decay),
                        seed=seed, hierarchical=not flat, backend=_backend(backend, ray, flower), jobs=jobs,
                        flower_timeout=flower_timeout)
    target = out or report
    if target:
        from geodml.report import check_target

        check_target(target)
    t0 = time.perf_counter()
    with Console(stderr=True, quiet=quiet).status("geodml compare") as status:
        res = run_compare(cfg, _progress(status, quiet))
    res["wall_seconds"] = time.perf_counter() - t0
    if target:
        from geodml.report import write

        write(res, target)
    if as_json:
        print(json.dumps(res, indent=2))
        return
    _print_compare(res)


def _wire_line(a: str, r: dict) -> str:
    """What one algorithm's messages cost on a Flower deployment's wire, against the ledger."""
    m, w = r["measured"], r["measured"]["wire"]
    dcs = "; ".join(f"{n} {_fmt_bytes(v['wire'])} (arrays {_fmt_bytes(v['payload'])}, WAN ledger {_fmt_bytes(v['ledger'])})"
                    for n, v in w["by_dc"].items())
    return (f"{a} on a Flower deployment: wall {m['wall_seconds']:.1f} s ({w['seconds_per_round']:.2f} s a message round, "
            f"simulated WAN {r['sim_seconds']:.3g} s), wire {_fmt_bytes(w['wire_bytes'])} = {w['wire_bytes'] / max(w['payload_bytes'], 1):.3g}x "
            f"the arrays' {_fmt_bytes(w['payload_bytes'])}, Flower messages {_fmt_bytes(m['serialized_bytes'])}; per data center: {dcs}")


def _crossover_line(a: str, c: dict) -> str:
    """One line saying where centralizing moves fewer bytes than algorithm a."""
    rb, rr = c["rows_bytes"], c["rounds_bytes"]
    # Either can be None (fixed rounds: no rounds crossover; one data center: nothing crosses the WAN).
    parts = ([f"from {rr} rounds on"] if rr is not None else []) + ([f"below {rb:.3g} total rows"] if rb else [])
    return f"crossover {a}: centralizing moves fewer bytes {', or '.join(parts)}" if parts else f"crossover {a}: none in bytes"


_PLACEMENT = {"by name": "placed by name",
              "in order": "the values are not the WAN's region names: its regions in order"}


def _print_placement(out: Console, placement: str | None, dcs: list[tuple]) -> None:
    """The line that says which WAN region holds which of the data's places (compare and plan):
    ``dcs`` is (region, place, rows, raw bytes) per data center; nothing without places."""
    if placement is None or not any(place for _, place, _, _ in dcs):
        return
    out.print(f"data centers ({_PLACEMENT[placement]}): "
              + ", ".join(f"{name} = {place} ({rows} rows, {_fmt_bytes(raw)})" for name, place, rows, raw in dcs), highlight=False)


def _print_compare(res: dict) -> None:
    """The human-readable compare result: a header, the table, notes, crossovers."""
    out = _Stdout()
    d = res["data"]
    out.print(f"data {d['spec']}: {d['n_train']} train rows, {d['features']} features, raw {_fmt_bytes(d['raw_bytes'])}, model {_fmt_bytes(d['model_bytes'])}; "
              f"partition {res['partition']}; hubs: model {res['hubs']['model']}, centralize {res['hubs']['centralize']}")
    _print_placement(out, res.get("placement"), [(dc["name"], dc.get("place"), dc["rows"], dc["raw_bytes"]) for dc in res["dcs"]])
    # Eight narrow columns fit an 80-column terminal; the planner's predictions are in --json.
    t = Table("algorithm", "WAN", "ratio", "rounds", "sim s", "$", "acc", "logloss")
    t.columns[0].min_width = 10
    for a, r in res["algorithms"].items():
        if "refused" in r:
            t.add_row(a, "refused", "", "", "", "", "", "")
            continue
        ratio = res["bytes_ratio_vs_centralize"].get(a)
        t.add_row(a, _fmt_bytes(r["bytes"]), f"{ratio:.2g}" if ratio is not None else "", str(r["rounds"]), f"{r['sim_seconds']:.3g}",
                  f"{r['dollars']:.2g}", f"{r['test_accuracy']:.4f}", f"{r['test_logloss']:.4f}")
    out.print(t)
    if "refused" in res["algorithms"].get("centralize", {}) and res["bytes_ratio_vs_centralize"]:
        # otherwise "ratio" reads as against a run that did not happen
        out.print(f"ratio: WAN bytes over the {_fmt_bytes(res['centralize_bytes_if_allowed'])} centralizing would move "
                  "if sovereignty allowed it", highlight=False)
    for a, r in res["algorithms"].items():
        if "refused" in r:
            out.print(f"{a} refused: {r['refused']}", highlight=False)
        if "warning" in r:
            out.print(f"{a} warning: {r['warning']}", highlight=False)
        if "measured" in r and "wire" in r["measured"]:
            out.print(_wire_line(a, r), highlight=False)
        elif "measured" in r:
            m = r["measured"]
            lo = "" if m["loopback_bytes"] is None else f", loopback {_fmt_bytes(m['loopback_bytes'])}"
            where, what = ("Flower", "Flower messages") if m["executor"] == "flower" else ("Ray", "serialized")
            out.print(f"{a} on {where}: wall {m['wall_seconds']:.2f} s (simulated {r['sim_seconds']:.3g} s), {what} "
                      f"{_fmt_bytes(m['serialized_bytes'])}, arrays {_fmt_bytes(m['payload_bytes'])} "
                      f"(simulated WAN {_fmt_bytes(r['bytes'])}, intra-DC {_fmt_bytes(r['intra_bytes'])}){lo}", highlight=False)
    if "deployment" in res:
        w = res["deployment"]["wire"]
        out.print(f"Flower deployment (flwr {w['flwr']}, Fleet API over {w['transport']}): {_fmt_bytes(w['total_bytes'])} on the wire in all, {_fmt_bytes(w['control_bytes'])} of it "
                  f"outside the rounds (registration, app download, setup, polls); {res['deployment']['start_seconds']:.1f} s "
                  "from launching the processes to the first round", highlight=False)
    for a, c in res["crossover"].items():
        out.print(_crossover_line(a, c), highlight=False)
    out.print(f"wall {res['wall_seconds']:.1f} s")


def _plan_from_data(spec: str, partition: str | None, k: int | None, wan: str | None, sov: tuple, seed: int,
                    quiet: bool) -> tuple:
    """(sizes, d, WAN, model hub, centralize hub, (each DC's place, placement)) of a real federation
    (compare.build_federation)."""
    from geodml.compare import build_federation
    from geodml.data import load_dataset

    with Console(stderr=True, quiet=quiet).status("geodml plan: loading the data") as status:
        fed = build_federation(load_dataset(spec, seed=seed), partition, k, wan, sov, seed)
        # Said once every input is valid, so bad input stays a single line (as in compare).
        _progress(status, quiet)(fed.loaded_line(spec))
    return fed.sizes, fed.d, fed.wan, fed.hub_m, fed.hub_c, ([dc.place for dc in fed.dcs], fed.placement)


def _plan_from_sizes(rows, features, nnz_per_row, k, partition, wan, sov, seed) -> tuple:
    """(sizes, d, WAN, model hub, centralize hub, (no places, no placement)) of CSR one-hot data given by size alone;
    centralizing is charged the measured encoding of a make_ctr sample per row
    (costs.ctr_encoding). Raises GeodmlError on bad input."""
    from geodml.costs import csr_sizes, ctr_encoding
    from geodml.network import central_hub, model_hub
    from geodml.wan import load_wan

    w = load_wan(wan)
    k = k if k is not None else len(w.regions)
    if k < 1 or k > len(w.regions):
        raise GeodmlError(f"--dcs must be between 1 and {len(w.regions)} (the WAN's regions), got {k}")
    for x in sov:
        if x not in w.names[:k]:
            raise GeodmlError(f"sovereign data center {x!r} is not one of {', '.join(w.names[:k])}")
    if rows < k or features < 1 or not 0 < nnz_per_row <= features:
        raise GeodmlError(f"need --rows >= {k} (the data centers), --features >= 1 and 0 < --nnz-per-row <= --features "
                          f"(got {rows}, {features}, {nnz_per_row})")
    partition = partition or "iid"
    if partition == "iid":
        weights = [1.0] * k
    elif partition.startswith("unequal:"):
        try:
            weights = [float(x) for x in partition[8:].split(",")]
        except ValueError:
            raise GeodmlError(f"malformed partition spec {partition!r}") from None
        if len(weights) != k or not all(0 < x < float("inf") for x in weights):
            raise GeodmlError(f"partition {partition!r}: need {k} positive finite weights")
        weights = [x / max(weights) for x in weights]  # sum() of huge weights overflowed to inf
    else:
        raise GeodmlError("without --data, --partition must be iid or unequal:W1,..,WK (label skew does not change sizes)")
    per = [round(rows * x / sum(weights)) for x in weights]
    if min(per) < 1:
        raise GeodmlError(f"partition {partition!r} leaves a data center empty")
    sizes = csr_sizes(w.names[:k], per, nnz_per_row, sov, ctr_encoding(features, nnz_per_row, min(sum(per), 20_000), seed))
    return sizes, features, w, model_hub(w, w.names[:k]), central_hub(w, sizes), ([None] * k, None)


@app.command()
def plan(
    data: str = typer.Option(None, help="data to size from, as compare's --data (else --rows/--features/--nnz-per-row)"),
    dataset: str = typer.Option(None, "--dataset", help="a real dataset a package ships (geodml datasets), split by its place column"),
    sample: int = typer.Option(None, "--sample", help="with --dataset or csv:/parquet: data, a seeded sample of this many rows"),
    rows: int = typer.Option(10_000_000, help="total training rows (without --data)"),
    features: int = typer.Option(65536, help="features d (without --data)"),
    nnz_per_row: float = typer.Option(20.0, help="non-zeros per row of CSR data (without --data)", callback=_finite),
    dcs: int = typer.Option(None, "--dcs", help="number of data centers (default: every region, or one per place group)"),
    partition: str = typer.Option(None, help="with --data: " + _PARTITION_HELP + "; else iid or unequal:W1,..,WK"),
    wan: str = typer.Option(None, help="WAN YAML file (default: the data's packaged WAN, else the 4-region default)"),
    sovereign: str = typer.Option("", help="comma-separated sovereign regions"),
    objective: str = typer.Option("sim_seconds", help="bytes, sim_seconds or dollars"),
    algos: str = typer.Option(None, help=_algos_help() + "; the planner predicts costs, not accuracy: leave out oneshot where local data are skewed or small"),
    lbfgs_rounds: int = typer.Option(100, help="assumed L-BFGS function evaluations"),
    local_passes: int = typer.Option(100, help="assumed passes of one-shot's local solves and of the centralized fit"),
    rounds: int = typer.Option(20, help="rounds of FedAvg, FedProx, DiLoCo"),
    local_steps: int = typer.Option(50, help="local SGD steps per round"),
    batch_size: int = typer.Option(256, help="local mini-batch rows (0: full batch)"),
    lr: float = typer.Option(0.0, help="local SGD step size (0: automatic)", callback=_finite),
    l2: float = typer.Option(1e-4, help="L2 strength lam of the objective", callback=_finite),
    flat: bool = typer.Option(False, "--flat", help="no hierarchical aggregation: every worker talks to the hub"),
    compress: str = typer.Option("none", help="none, q8 or topk:FRACTION"),
    compress_down: str = typer.Option("none", help="downlink of fedavg/fedprox/diloco: none, q8 or topk:FRACTION"),
    model: str = typer.Option("logreg", help="logreg or mlp[:HIDDEN]: message sizes and compute of the model"),
    seed: int = typer.Option(0, help="seed of the data and the partition (with --data)"),
    as_json: bool = typer.Option(False, "--json", help="print JSON on stdout"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress on stderr"),
):
    """Predict each strategy's bytes, time and dollars without training; recommend one; give the crossover."""
    from geodml.planner import PlanCounts, plan as run_plan

    s = _settings(l2, rounds, local_steps, batch_size, lr, seed, compress, compress_down=compress_down, model=model)
    for name, v in (("--lbfgs-rounds", lbfgs_rounds), ("--local-passes", local_passes)):
        if v < 1:
            raise GeodmlError(f"{name} must be >= 1, got {v}")
    from geodml.models import get as get_model

    kind = get_model(model).name
    cands = tuple(a for a in registry.names() if kind in registry.get(a).models) if algos is None else _algo_names(algos)
    for a in cands:
        if kind not in registry.get(a).models:
            raise GeodmlError(f"{a} trains {' or '.join(registry.get(a).models)} only, not {model}")
    sov = _split_names(sovereign, "--sovereign")
    if data or dataset:
        sizes, d, w, hub_m, hub_c, (places, placement) = _plan_from_data(_data_spec(data, dataset, sample), partition, dcs, wan, sov, seed, quiet)
    else:
        sizes, d, w, hub_m, hub_c, (places, placement) = _plan_from_sizes(rows, features, nnz_per_row, dcs, partition, wan, sov, seed)
    counts = PlanCounts(lbfgs_rounds=lbfgs_rounds, oneshot_passes=local_passes, central_iters=local_passes)
    dm = get_model(model).n_params(d) - 1  # the cost model sees a P-parameter model as d = P - 1
    res = run_plan(sizes, dm, w, s, hub_m, hub_c, strategies=cands, counts=counts, objective=objective, hierarchical=not flat)
    res["sizes"] = {"dcs": [z.__dict__ | {"place": p} for z, p in zip(sizes, places)], "features": d, "model_bytes": 8 * (dm + 1),
                    "raw_bytes": sum(z.raw_nbytes for z in sizes)}
    res["placement"] = placement
    res["hubs"] = {"model": hub_m, "centralize": hub_c}
    if as_json:
        print(json.dumps(res, indent=2))
        return
    _print_plan(res, objective)


def _print_plan(res: dict, objective: str) -> None:
    """The human-readable plan: sizes, the predictions table with crossovers, the recommendation."""
    out = _Stdout()
    sz = res["sizes"]
    out.print(f"{len(sz['dcs'])} data centers, {sum(z['n'] for z in sz['dcs'])} rows, raw {_fmt_bytes(sz['raw_bytes'])}, model {_fmt_bytes(sz['model_bytes'])}")
    _print_placement(out, res.get("placement"), [(z["name"], z["place"], z["n"], z["raw_nbytes"]) for z in sz["dcs"]])
    t = Table("strategy", "WAN bytes", "rounds", "sim s", "dollars", "centralize wins below rows (bytes / s / $)")
    for a, p in res["predictions"].items():
        if p["refused"]:
            t.add_row(a, "refused", "", "", "", p["refused"])
            continue
        c = res["crossover"].get(a)
        cx = " / ".join("never" if c[f"rows_{m}"] is None else f"{c[f'rows_{m}']:.3g}" for m in ("bytes", "sim_seconds", "dollars")) if c else ""
        t.add_row(a, _fmt_bytes(p["bytes"]), str(p["rounds"]), f"{p['sim_seconds']:.3g}", f"{p['dollars']:.4g}", cx)
    out.print(t)
    out.print(f"recommend: {res['recommend']} (least {objective})")


@app.command()
def datasets(as_json: bool = typer.Option(False, "--json", help="print JSON on stdout")):
    """List the real datasets packages ship (rows, features, label, regions, package, licence)."""
    from geodml import realdata

    rows = [realdata.describe(n) for n in realdata.DATASETS]
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    out = _Stdout()
    t = Table("name", "rows", "features", "label (y = 1)", "data centers (region: places)", "package, licence")
    for r in rows:
        where = "; ".join(f"{reg}: {'+'.join(v)}" for reg, v in r["regions"].items())
        t.add_row(r["name"], str(r.get("rows", "not installed")), str(r.get("features", "")), r["label"], where,
                  f"{r['package']}, {r['licence']}")
    out.print(t)
    if not all(r["installed"] for r in rows):
        out.print("not installed: pip install 'geodml[datasets]'", highlight=False)


def _stdout_closed() -> bool:
    """Whether click has met a closed stdout pipe (EPIPE, as under ``geodml plan | head -1``): it
    then wraps stdout in its (_)PacifyFlushWrapper (so the flush at exit stays quiet) and exits 1."""
    return type(sys.stdout).__name__.lstrip("_") == "PacifyFlushWrapper"  # click 8.5 (typer 0.20) names it _PacifyFlushWrapper


def main() -> None:
    """Entry point: run the app; bad input -> one line on stderr, exit 2; a reader that closed
    the pipe early (``| head``) -> exit 0 quietly, as cat and grep end there (click exits 1)."""
    try:
        rc = app(standalone_mode=False)
    except SystemExit as e:
        if e.code == 1 and _stdout_closed():
            sys.exit(0)
        raise
    except KeyboardInterrupt:
        rc = 130
    except GeodmlError as e:
        print(f"geodml: error: {e}", file=sys.stderr)
        sys.exit(2)
    except Abort:
        print("geodml: interrupted", file=sys.stderr)  # click's Abort is its Ctrl-C (or EOF at a prompt)
        sys.exit(130)
    except UsageError as e:
        msg = e.format_message()
        print(f"geodml: error: {msg.splitlines()[0] if msg else type(e).__name__}", file=sys.stderr)
        sys.exit(2)
    except ClickException as e:
        print(f"geodml: error: {e.format_message()}", file=sys.stderr)
        sys.exit(2)
    except MemoryError as e:
        # numpy refuses an allocation it cannot make (e.g. ctr:rows=1e12): a too-large request
        print(f"geodml: error: not enough memory for this input ({str(e).splitlines()[0] if str(e) else 'MemoryError'})", file=sys.stderr)
        sys.exit(2)
    # typer >= 0.2x turns Ctrl-C into Exit(130), which standalone_mode=False returns as a value
    # instead of raising: without this the interrupted run exited 0.
    if rc == 130:
        print("geodml: interrupted", file=sys.stderr)
        sys.exit(130)
    if isinstance(rc, int) and not isinstance(rc, bool) and rc != 0:
        sys.exit(rc)
