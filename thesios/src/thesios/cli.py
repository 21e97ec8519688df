"""Command line: ``thesios validate``, ``thesios whatif``, ``thesios synth``, ``thesios convert``, ``thesios sample``.

Bad input prints one line on stderr and exits with code 2 (never a traceback). Every command
shares one vocabulary: ``--out``/``-o``, ``--json``, ``--seed``, ``--quiet``, ``--backend local|ray``
and ``--jobs``; ``--output`` and ``--report`` are kept as hidden aliases of ``--out`` for one release.
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import sys
from pathlib import Path
from typing import Annotated

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import typer
from rich.console import Console
from rich.table import Table

from thesios.errors import ThesiosInputError
from thesios.fleet import MAX_DAYS, MAX_SEED, check_number
from thesios.load import overload_note
from thesios.readers import ReadReport, check_distinct, format_names, get_format, read_trace, recognized_format, sniff_format
from thesios.requests import Requests
from thesios.samplers import PAPER_RATE, QUICK_RATE, parse_rate, rate_label
from thesios.validate import METRICS, PAPER_BANDS, auto_fleet, validate
from thesios.writers import check_writable, write_parquet

app = typer.Typer(add_completion=False, help=__doc__)
#: Most rows ``thesios sample`` draws (~60 bytes each in memory, more while writing).
MAX_SAMPLE_ROWS = 20_000_000
FLEET_HELP = "fleet spec (JSON); default: the embedded fleet sized to 1/p disk-days per class"
BACKEND_HELP = "where the (class, day) partitions run: local (this machine) or ray (pip install 'thesios\\[ray]'; RAY_ADDRESS or a local Ray)"
JOBS_HELP = "worker processes of the local backend (1: in this process), CPUs of a Ray started here"
QUIET_HELP = "no progress lines on stderr"
#: The shared vocabulary, declared once and used by every command that takes it.
JsonOpt = Annotated[bool, typer.Option("--json", help="print one JSON document on stdout")]
QuietOpt = Annotated[bool, typer.Option("--quiet", help=QUIET_HELP)]
BackendOpt = Annotated[str, typer.Option(help=BACKEND_HELP)]
JobsOpt = Annotated[int, typer.Option(help=JOBS_HELP)]
FleetOpt = Annotated[Path | None, typer.Option(help=FLEET_HELP)]
def _integer_in(low: int, high: int):
    """An option callback refusing an integer outside [low, high] in the tool's own one line, the
    words of a fleet file's fields (``--seed must be an integer in [0, 4294967295], got -1``), not
    the option parser's, before any work."""
    def check(param: typer.CallbackParam, value: int) -> int:
        check_number(value, int, low, high, "[]", param.opts[0])
        return value
    return check


#: numpy's and scikit-learn's seeds are 32-bit: one range for every command (and a fleet file's "seed").
SeedOpt = Annotated[int, typer.Option(callback=_integer_in(0, MAX_SEED), help=f"seed of the fleet and of the sampler, 0 to {MAX_SEED}")]
#: --days of validate, whatif, synth and sample (and a fleet file's "days").
_DAYS = _integer_in(1, MAX_DAYS)
#: Old spellings of options, kept working (not shown in --help) for one release.
HIDDEN_ALIASES = {"--output": "--out", "--report": "--out"}


@contextlib.contextmanager
def _progress(quiet: bool, title: str):
    """A ``say(line)`` for the length of a command: a spinner and log lines on a terminal, one plain
    ``thesios: line`` per step elsewhere (never wrapped, no source locations), nothing if quiet."""
    if quiet:
        yield lambda _msg: None
    elif sys.stderr.isatty():
        err = Console(stderr=True, log_path=False)
        with err.status(title) as status:
            yield lambda msg: (status.update(msg), err.log(msg))
    else:
        yield lambda msg: print(f"thesios: {msg}", file=sys.stderr, flush=True)


@app.command("validate")
def validate_cmd(
    ctx: typer.Context,
    rate: Annotated[str, typer.Option(help="sampling rate p, e.g. 1e-4 or 1/10000 (the paper's)")] = PAPER_RATE,
    days: Annotated[int, typer.Option(callback=_DAYS, help=f"days of samples per disk (disk-days merged across days) (1 to {MAX_DAYS})")] = 4,
    seed: SeedOpt = 0,
    held_out: Annotated[int, typer.Option(help="held-out disks per class (per group with --traces)")] = 2,
    fleet: FleetOpt = None,
    traces: Annotated[list[Path] | None, typer.Option(help="validate on these full-rate traces (files or folders; repeat the option) instead of the embedded fleet")] = None,
    fmt: Annotated[str, typer.Option("--format", help="format of the --traces files: " + ", ".join(format_names()))] = "auto",
    group_by: Annotated[str | None, typer.Option(help="--traces: group disks by this column (e.g. workload); default: thesios's identification")] = None,
    identify_groups: Annotated[bool, typer.Option("--identify", help="--traces: group by thesios's identification (purity against --group-by when given)")] = False,
    window: Annotated[float | None, typer.Option(help="--traces: window of the metrics, s (default: an hour, or a tenth of a shorter trace)")] = None,
    report: Annotated[Path | None, typer.Option("--out", help="also write an HTML report with plots here")] = None,
    as_json: JsonOpt = False,
    backend: BackendOpt = "local",
    jobs: JobsOpt = 1,
    quiet: QuietOpt = False,
) -> None:
    """Synthesize held-out disks from samples of the others; compare with their real traces."""
    p = parse_rate(rate)
    _check_backend(backend, jobs)
    if traces:
        source = ctx.get_parameter_source("rate")
        rate_given = source is not None and source.name != "DEFAULT"
        return _validate_traces(traces, fmt, p, group_by, identify_groups, window, held_out, seed, as_json, report, quiet,
                                rate_given)
    if group_by is not None or window is not None or fmt != "auto" or identify_groups:
        raise ThesiosInputError("--format, --group-by, --identify and --window describe --traces; none was given")
    if report is not None:
        check_writable(report)  # before minutes of work, not after
    spec = _fleet_spec(fleet, p, days, seed, held_out)
    with _backend(backend, jobs) as be, _progress(quiet, "validating") as say:
        result = validate(spec, rate=p, seed=seed, held_out_per_class=held_out, progress=say, backend=be)
    _maybe_report(result, report)
    if as_json:
        print(json.dumps(result.to_json() | {"backend": backend}, indent=2))
        return
    _print_accuracy(f"thesios validate: p={p:g}, {result.disks} sampled disks x {result.days} days, "
                    f"{result.sampled_requests} samples, {result.seconds:.1f} s", result.accuracy)
    Console().print(f"groups found: {result.groups}, purity vs generator classes: {result.purity:.1%}; "
                    f"disk-days merged per synthesized disk: {result.coverage:.2f}/p")
    if report is not None:
        Console(stderr=True).print(f"report -> {report}")
    if result.coverage < 0.999:
        Console(stderr=True).print(f"warning: the fleet has too few disk-days for 1/p per group (coverage {result.coverage:.2f})")


def _print_accuracy(title: str, accuracy: dict[str, float]) -> None:
    """Our accuracy per metric beside the paper's band, as a table on stdout."""
    table = Table(title=title)
    table.add_column("metric")
    table.add_column("ours", justify="right")
    table.add_column("paper band", justify="right")
    table.add_column("at/above paper's lower bound")
    for m in METRICS:
        lo, hi = PAPER_BANDS[m]
        ours = accuracy.get(m, float("nan"))
        table.add_row(m, "n/a" if math.isnan(ours) else f"{ours:.1%}", f"{lo:.1%}-{hi:.1%}",
                      "n/a" if math.isnan(ours) else ("yes" if ours >= lo else "NO"))
    Console().print(table)


def _validate_traces(paths: list[Path], fmt: str, rate: float, group_by: str | None, identify_groups: bool,
                     window: float | None, held_out: int, seed: int, as_json: bool, report: Path | None, quiet: bool,
                     rate_given: bool = True) -> None:
    """``validate --traces``: the held-out disks of real traces against syntheses from the others."""
    from thesios.trace_validation import load_disks, validate_traces

    if report is not None:
        raise ThesiosInputError("--out (the HTML report) is for the embedded fleet; with --traces use --json")
    if window is not None and not (math.isfinite(window) and window > 0):
        raise ThesiosInputError(f"--window must be a positive number of seconds, got {window}")
    with _progress(quiet, "validating on traces") as say:
        disks = load_disks(paths, fmt, group_by)
        result = validate_traces(disks, rate, held_out=held_out, seed=seed, window_s=window,
                                 identify_groups=identify_groups or group_by is None, progress=say, rate_given=rate_given)
    if as_json:
        print(json.dumps(result, indent=2))
        return
    _print_accuracy(f"thesios validate --traces: {result['disks']} disks in {len(result['groups'])} groups, "
                    f"p asked {rate_label(rate)}{'' if rate_given else ' (default)'}, {result['seconds']:.1f} s",
                    result["accuracy"])
    for name, g in result["groups"].items():
        if "accuracy" not in g:  # a group too small to hold disks out: its note says so
            Console().print(f"{name}: {g['disks']} disks: {g['note']}", highlight=False, soft_wrap=True)
            continue
        acc = ", ".join(f"{m} {v:.1%}" for m, v in g["accuracy"].items() if v == v)
        Console().print(f"{name}: {g['disks']} disks, p = {rate_label(g['p'])}{' (' + g['note'] + ')' if g.get('note') else ''}: {acc}",
                        highlight=False, soft_wrap=True)


def _check_backend(name: str, jobs: int = 1) -> None:
    from thesios.partitions import BACKENDS

    if name not in BACKENDS:
        raise ThesiosInputError(f"--backend must be one of {', '.join(BACKENDS)}, got {name!r}")
    if jobs < 1:
        raise ThesiosInputError(f"--jobs must be >= 1, got {jobs}")


@contextlib.contextmanager
def _backend(name: str, jobs: int = 1):
    """The named backend for the length of a command; a Ray instance started here is shut down."""
    from thesios.partitions import make_backend

    be = make_backend(name, jobs=jobs)
    try:
        yield be
    finally:
        be.close()


def _fleet_spec(fleet: Path | None, rate: float, days: int, seed: int, held_out: int, scale: float = 1.0):
    """The fleet of a command: a JSON spec file when given, else the default sized to the rate."""
    if fleet is None:
        return auto_fleet(rate, days=days, seed=seed, held_out_per_class=held_out, scale=scale)
    from thesios.fleet import fleet_from_json

    if fleet.is_dir():
        raise ThesiosInputError(f"{fleet}: is a folder, not a fleet spec file")
    if not fleet.exists():
        raise ThesiosInputError(f"{fleet}: no such file")
    try:
        text = fleet.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ThesiosInputError(f"{fleet}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    return fleet_from_json(text, str(fleet))


def _maybe_report(result, report: Path | None) -> None:
    if report is not None:
        from thesios.report import write_report

        write_report(result, report)


@app.command("whatif")
def whatif_cmd(
    ctx: typer.Context,
    scenario: Annotated[list[str], typer.Option("--scenario", "-s", help="capacity:x2, rpm:5400, spin-down:zone=COLD,timeout=300s, cache:x2")],
    trace: Annotated[Path | None, typer.Argument(help="a one-disk trace (.parquet, Thesios .csv[.gz], blkparse text, or --format); default: the embedded fleet")] = None,
    fmt: Annotated[str, typer.Option("--format", help="TRACE's format: " + ", ".join(format_names()) + " (auto: sniffed; else a Thesios shard)")] = "auto",
    device: Annotated[str | None, typer.Option(help="the device of a block TRACE to use (filename column, e.g. 8,0 for blkparse), or the disk_id of a many-disk Parquet TRACE")] = None,
    rpm: Annotated[float, typer.Option(help="the TRACE's disk RPM")] = 7200.0,
    rate: Annotated[str, typer.Option(help="sampling rate p (1/1000: one synthesized disk per group; see README)")] = QUICK_RATE,
    days: Annotated[int, typer.Option(callback=_DAYS, help=f"days of samples per disk (1 to {MAX_DAYS})")] = 4,
    seed: SeedOpt = 0,
    fleet: FleetOpt = None,
    report: Annotated[Path | None, typer.Option("--out", help="also write an HTML report with a section and plot per what-if")] = None,
    as_json: JsonOpt = False,
    backend: BackendOpt = "local",
    jobs: JobsOpt = 1,
    quiet: QuietOpt = False,
) -> None:
    """What-ifs on a TRACE, or on one synthesized disk per group of the embedded fleet, beside the baseline."""
    from thesios.scenarios import parse_scenario, run_scenarios, run_trace_scenarios

    p = parse_rate(rate)
    _check_backend(backend, jobs)
    scenarios = [parse_scenario(s) for s in scenario]
    if report is not None:
        check_writable(report)  # before minutes of work, not after
    if trace is None and (fmt != "auto" or device is not None):
        raise ThesiosInputError("--format and --device describe a TRACE; none was given")
    if trace is not None:
        # These shape the embedded fleet; with a TRACE they would be ignored without a word.
        fleet_only = [f"--{n}" for n in ("rate", "days", "fleet", "backend", "jobs")
                      if ctx.get_parameter_source(n) is not None and ctx.get_parameter_source(n).name != "DEFAULT"]
        if fleet_only:
            raise ThesiosInputError(f"{', '.join(fleet_only)}: only for the embedded fleet, not with a TRACE")
        if not 0 < rpm <= 30000:
            raise ThesiosInputError("--rpm must be in (0, 30000]")
        result = {"trace": str(trace)} | run_trace_scenarios(_load_served_trace(trace, fmt, device), scenarios, rpm=rpm, seed=seed,
                                                              source=str(trace))
        _maybe_whatif_report({"trace": str(trace), "groups": [{"group": str(trace), "disks": 1} | result]}, report)
        if as_json:
            print(json.dumps(result, indent=2))
        else:
            _print_whatif_groups([{"group": str(trace), "disks": 1} | result])
            if report is not None:
                Console(stderr=True).print(f"report -> {report}")
        return
    scale = max([sc.factor for sc in scenarios if sc.kind == "capacity"], default=1.0)
    spec = _fleet_spec(fleet, p, days, seed, 1, scale)
    with _backend(backend, jobs) as be, _progress(quiet, "sampling, grouping, synthesizing") as say:
        result = run_scenarios(spec, p, scenarios, seed=seed, progress=say, backend=be)
    _maybe_whatif_report(result, report)
    if as_json:
        print(json.dumps(result, indent=2))
        return
    _print_whatif_groups(result["groups"])
    if report is not None:
        Console(stderr=True).print(f"report -> {report}")


def _maybe_whatif_report(result: dict, report: Path | None) -> None:
    if report is not None:
        from thesios.report import write_whatif_report

        write_whatif_report(result, report)


def _load_trace(path: Path, fmt: str = "auto", device: str | None = None) -> Requests:
    """A one-disk trace: read with the registry's reader for ``fmt`` (``auto``: sniffed), one
    device kept.

    Raises:
        ThesiosInputError: an unknown format, an unreadable or malformed file, a trace of several
            disks (without ``device``) or an unknown ``device``.
    """
    from thesios.readers import FORMATS

    spec = get_format(sniff_format(path) if fmt == "auto" else fmt)
    if device is not None and not spec.block and spec.name != "parquet":
        blocks = ", ".join(f.name for f in FORMATS.values() if f.block)
        raise ThesiosInputError(f"--device picks a device of a block trace ({blocks}) or a disk_id of a Parquet trace, not of a {spec.name} trace")
    table, spec = _read_hinted(path, spec.name, explicit=fmt != "auto")
    # A many-disk trace (`thesios sample` output) would be served as one disk, silently.
    if "disk_id" in table.column_names and not spec.block:
        table = _one_disk_id(table, path, device)
    elif device is not None and not spec.block:
        raise ThesiosInputError(f"{path}: has no disk_id column for --device to pick from")
    if spec.block:
        table = _one_device(table, path, device)
    return Requests.from_table(table)[0]


def _read_hinted(path: Path, fmt: str, explicit: bool = True, lenient: bool = False,
                 report: ReadReport | None = None) -> tuple[pa.Table, object]:
    """:func:`thesios.readers.read_trace` with a next step in its error: when the file does not
    follow an ``explicit`` format that a sniffer tells it is not, which format it looks like and
    --format auto; when it was read as a Thesios shard and its header is wrong, the formats no
    sniffer recognizes (most likely one of them)."""
    from thesios.readers import FORMATS

    try:
        return read_trace(path, fmt, lenient=lenient, report=report)
    except ThesiosInputError as err:
        looks = recognized_format(path) if explicit and fmt != "auto" else None
        if looks is not None and looks != fmt and "--format" not in str(err):
            raise ThesiosInputError(f"{err}; the file looks like a {looks} trace: give --format auto (or --format {looks})") from None
        if (sniff_format(path) if fmt == "auto" else fmt) == "thesios" and ": header " in str(err):
            headerless = "|".join(f.name for f in FORMATS.values() if f.sniffer is None)
            raise ThesiosInputError(f"{err}; for other trace formats give --format {headerless}") from None
        raise


def _load_served_trace(path: Path, fmt: str = "auto", device: str | None = None) -> Requests:
    """:func:`_load_trace` for what-ifs, which re-serve reads: refuses a trace without service times."""
    requests = _load_trace(path, fmt, device)
    miss = requests.is_miss_read
    if miss.any() and not (requests.disk_time[miss] > 0).any():
        raise ThesiosInputError(f"{path}: no read has a service time (disk_time or latency); whatif re-serves reads on a disk")
    return requests


def _one_disk_id(table: pa.Table, path: Path, device: str | None) -> pa.Table:
    """The rows of disk ``device`` (a disk_id) of a many-disk Parquet trace; refuses several without one."""
    ids = pc.unique(table.column("disk_id")).to_pylist()
    if device is None:
        if len(ids) > 1:
            raise ThesiosInputError(f"{path}: holds {len(ids)} disks (column disk_id); pick one with --device DISK_ID")
        return table
    if not device.lstrip("-").isdigit() or int(device) not in ids:
        shown = ", ".join(map(str, sorted(ids)[:5])) + (", ..." if len(ids) > 5 else "")
        raise ThesiosInputError(f"{path}: no disk_id {device!r} (disk_ids: {shown})")
    return table.filter(pc.equal(table.column("disk_id"), int(device)))


def _one_device(table: pa.Table, path: Path, device: str | None) -> pa.Table:
    """The rows of ``device`` of a block trace; refuses a trace of several devices without one."""
    devices = pc.unique(table.column("filename")).to_pylist()
    if device is not None:
        if device not in devices:
            raise ThesiosInputError(f"{path}: no device {device!r} (devices: {', '.join(map(str, devices[:5]))})")
        return table.filter(pc.equal(table.column("filename"), device))
    if len(devices) > 1:
        shown = ", ".join(map(str, devices[:3])) + (", ..." if len(devices) > 3 else "")
        raise ThesiosInputError(f"{path}: holds {len(devices)} devices ({shown}); pick one with --device")
    return table


def _pct(x: float) -> str:
    """A fraction as a percentage that stays readable for the tiny utilizations of short traces."""
    return f"{x:.2%}" if x == 0 or x >= 1e-4 else f"{x * 100:.2g}%"


def _of_zone(m: dict) -> str:
    """Which disk a spin-down note's latencies are of: the zone's (not the table's baseline)."""
    return f" of the {m['zone']}-only disk (always spinning -> spun down)" if m.get("zone") else " (always spinning -> spun down)"


def _print_whatif_groups(groups: list[dict]) -> None:
    console = Console()
    for g in groups:
        # Service metrics in a table; spin-down and cache results as lines under it, because a
        # sixth column of prose wraps to one word per line on an 80-column terminal.
        table = Table(title=f"group {g['group']} ({g['disks']} disk{'s' if g['disks'] != 1 else ''})")
        table.add_column("scenario", no_wrap=True)
        for col in ("utilization", "peak hour", "read p50 ms", "read p99 ms"):
            table.add_column(col, justify="right")
        notes = []
        for name, m in [("baseline", g["baseline"])] + list(g["scenarios"].items()):
            if "utilization" in m:
                table.add_row(name, _pct(m["utilization"]), _pct(m["peak_hour_utilization"]),
                              f"{m['read_latency_p50_s'] * 1e3:.1f}", f"{m['read_latency_p99_s'] * 1e3:.1f}")
                if overload_note(m):
                    notes.append(f"{name}: {overload_note(m)}")
                if "spin_ups" in m:
                    notes.append(f"{name}: energy saving {m['saving']:.1%}, {m['spin_ups']} spin-ups "
                                 f"(break-even idle gap {m['break_even_s']:.1f} s)")
            elif "saving" in m:
                notes.append(f"{name}: energy saving {m['saving']:.1%}, {m['spin_ups']} spin-ups, "
                             f"mean idle gap {m['mean_idle_gap_s']:.1f} s vs break-even {m['break_even_s']:.1f} s; "
                             f"{m['requests_delayed']} requests delayed, {m['added_latency_s']:.1f} s added "
                             f"(max {m['added_latency_max_s']:.1f} s), read p99{_of_zone(m)} {m['baseline_read_latency_p99_s'] * 1e3:.1f} -> "
                             f"{m['read_latency_p99_s'] * 1e3:.1f} ms")
            else:
                check = (f"; a member's full disk-day: {m['full_trace_lru_miss_ratio']:.1%} -> "
                         f"{m['full_trace_lru_miss_ratio_scaled']:.1%}" if "full_trace_lru_miss_ratio" in m else "")
                notes.append(f"{name}: LRU miss ratio {m['lru_miss_ratio']:.1%} -> {m['lru_miss_ratio_scaled']:.1%} "
                             f"(Belady {m['belady_miss_ratio_scaled']:.1%}){check}")
        overlap = g.get("recorded_overlap", 0.0)
        if overlap > 0 and any(n.split(": ", 1)[1].startswith("overloaded") for n in notes if ": " in n):
            notes.append(f"the trace's own reads overlap ({overlap:.0%} began while an earlier one was in service): its "
                         "device served several at once, which a disk serving one request at a time cannot")
        console.print(table)
        for note in notes:  # one line each (a terminal wraps it; a pipe or grep keeps it whole)
            console.print(note, highlight=False, soft_wrap=True)


OUT_HELP = "the file to write (atomically)"


@app.command("synth")
def synth_cmd(
    out: Annotated[Path, typer.Option("--out", "-o", help="trace to write: .parquet, .csv (Thesios shard) or .iolog (fio replay log v3)")],
    rate: Annotated[str, typer.Option(help="sampling rate p (1/1000: one synthesized disk; see README)")] = QUICK_RATE,
    disk: Annotated[int, typer.Option(help="synthesize a disk like this one (its group, itself excluded)")] = 0,
    days: Annotated[int, typer.Option(callback=_DAYS, help=f"days of samples per disk (1 to {MAX_DAYS})")] = 4,
    seed: SeedOpt = 0,
    discipline: Annotated[str, typer.Option(help="queue of the reorganizer: fifo or priority")] = "fifo",
    fio_device: Annotated[str, typer.Option(help="device named in a .iolog output")] = "/dev/sdX",
    fleet: FleetOpt = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Synthesize one day of a full-rate disk trace from samples of the embedded fleet."""
    from thesios.fleet import FleetGenerator
    from thesios.synth import synth
    from thesios.writers import write_thesios_csv

    p = parse_rate(rate)
    if discipline not in ("fifo", "priority"):
        raise ThesiosInputError(f"--discipline must be fifo or priority, got {discipline!r}")
    if out.suffix not in (".parquet", ".csv", ".iolog"):
        raise ThesiosInputError(f"{out}: the output must end in .parquet, .csv or .iolog")
    if not fio_device or any(c.isspace() for c in fio_device):
        raise ThesiosInputError("--fio-device must be a name without spaces")
    check_writable(out)
    spec = _fleet_spec(fleet, p, days, seed, 1)
    if not 0 <= disk < spec.n_disks:
        raise ThesiosInputError(f"--disk must be in [0, {spec.n_disks})")
    FleetGenerator(spec)  # checks the spec before the work starts
    with _progress(quiet, "sampling") as say:
        table, result = synth(spec, p, disk=disk, seed=seed, discipline=discipline, progress=say)
        say(f"writing {out}")
    if out.suffix == ".csv":
        write_thesios_csv(table, out)
    elif out.suffix == ".iolog":
        from thesios.writers import write_fio_iolog

        tr = result.trace
        write_fio_iolog(tr.start_time, tr.is_read, tr.disk_id.astype(np.int64) * 1_000_003 + tr.file_id,
                        tr.file_offset, tr.size, out, device=fio_device)
    else:
        write_parquet(table, out)
    summary = {"out": str(out), "requests": table.num_rows, "disk_days": len(result.disk_days), "coverage": result.coverage}
    if as_json:
        print(json.dumps(summary, indent=2))
    elif not quiet:
        Console(stderr=True).print(f"{table.num_rows} requests from {len(result.disk_days)} disk-days (coverage {result.coverage:.2f}/p) -> {out}")


@app.command("convert")
def convert_cmd(
    inputs: Annotated[list[Path], typer.Argument(help="trace files (each file's format sniffed by default: --format auto)")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Parquet file to write (atomically)")],
    lenient: Annotated[bool, typer.Option(help="skip and count malformed rows instead of failing")] = False,
    fmt: Annotated[str, typer.Option("--format", help="input format: " + ", ".join(format_names()) + " (auto: sniffed per file)")] = "auto",
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Convert trace files (Thesios CSV shards, block traces, blkparse or strace text) into one Parquet trace."""
    if fmt != "auto":
        get_format(fmt)
    _require_parquet(out)
    check_writable(out)
    check_distinct(inputs)
    report = ReadReport()
    read = [_read_hinted(path, fmt, lenient=lenient, report=report) for path in inputs]
    write_parquet(_concat_shards([table for table, _ in read]), out)
    formats = sorted({spec.name for _, spec in read})
    msg = f"{report.rows} rows -> {out}"
    if "thesios" in formats:
        msg += f"; {report.header_repeats} repeated headers dropped"
    if report.unpaired:
        msg += f"; {report.unpaired} issue/complete events without their partner dropped"
    if report.skipped:
        msg += f"; {report.skipped} malformed rows skipped (first: {report.examples[0] if report.examples else 'failed calls'})"
    if as_json:
        print(json.dumps({"out": str(out), "rows": report.rows, "formats": formats, "skipped": report.skipped,
                          "header_repeats": report.header_repeats, "unpaired": report.unpaired}, indent=2))
    elif not quiet:
        Console(stderr=True).print(msg)


def _require_parquet(output: Path) -> None:
    """Parquet is the only output of convert and sample: refuse a name that says otherwise."""
    if output.suffix != ".parquet":
        raise ThesiosInputError(f"{output}: the output is Parquet, its name must end in .parquet")


def _concat_shards(tables: list[pa.Table]) -> pa.Table:
    """One table of shards; shards without the optional ``latency`` column get it as nulls."""
    from thesios.schema import EXTRA_LATENCY

    if any(EXTRA_LATENCY in t.column_names for t in tables):
        tables = [t if EXTRA_LATENCY in t.column_names else t.append_column(EXTRA_LATENCY, pa.nulls(t.num_rows, pa.float64()))
                  for t in tables]
    return pa.concat_tables(tables)


@app.command("sample")
def sample_cmd(
    out: Annotated[Path, typer.Option("--out", "-o", help="Parquet file of samples (+ disk_id)")],
    rate: Annotated[str, typer.Option(help="sampling rate p (the paper's 1/10000)")] = PAPER_RATE,
    disks_per_class: Annotated[int, typer.Option(help="disks per class of the default fleet")] = 100,
    days: Annotated[int, typer.Option(callback=_DAYS, help=f"days (1 to {MAX_DAYS})")] = 1,
    seed: SeedOpt = 0,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Write Bernoulli samples of the embedded default fleet as a Parquet trace with ``disk_id``."""
    from thesios.fleet import FleetGenerator, default_fleet
    from thesios.partitions import sample_fleet

    p = parse_rate(rate)
    if disks_per_class < 1 or days < 1:
        raise ThesiosInputError("--disks-per-class and --days must be >= 1")
    _require_parquet(out)
    check_writable(out)
    gen = FleetGenerator(default_fleet(disks_per_class=disks_per_class, days=days, seed=seed))
    # p = 1 of the default 400 disks is ~350 M requests: refuse before memory runs out, not after.
    disks = np.arange(gen.spec.n_disks)
    expected = p * sum(float(gen.expected_requests(disks, d).sum()) for d in range(days))
    if expected > MAX_SAMPLE_ROWS:
        raise ThesiosInputError(f"p={p:g} of {gen.spec.n_disks} disks x {days} days is about {expected:,.0f} samples "
                                f"(limit {MAX_SAMPLE_ROWS:,}); lower --rate, --disks-per-class or --days")
    samples = sample_fleet(gen.spec, p, seed).sorted_by_time()
    write_parquet(samples.to_table(gen.applications), out)
    if as_json:
        print(json.dumps({"out": str(out), "samples": len(samples), "disks": gen.spec.n_disks, "days": days, "rate": p}, indent=2))
    elif not quiet:
        Console(stderr=True).print(f"{len(samples)} samples of {gen.spec.n_disks} disks x {days} days -> {out}")


@app.command("replay")
def replay_cmd(
    trace: Annotated[Path, typer.Argument(help="a one-disk trace (any --format of the registry)")],
    target: Annotated[Path, typer.Option(help="file to replay on (laid out with data first when smaller than --size-mib)")],
    fmt: Annotated[str, typer.Option("--format", help="TRACE's format: " + ", ".join(format_names()))] = "auto",
    device: Annotated[str | None, typer.Option(help="the device of a block TRACE, or the disk_id of a many-disk Parquet TRACE, to replay")] = None,
    size_mib: Annotated[int, typer.Option(help="size of the target file, MiB (each file of the trace gets a 64 MiB region)")] = 1024,
    seconds: Annotated[float | None, typer.Option(help="replay only the first SECONDS of the trace")] = None,
    jobs: Annotated[int, typer.Option(help="fio jobs replaying side by side: the most requests in flight (at most 256)")] = 4,
    overwrite: Annotated[bool, typer.Option(help="allow replaying onto an existing regular file (its data is overwritten)")] = False,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Replay a trace on a real device with fio (direct I/O) and report the latencies it measured."""
    from thesios.replay import MAX_JOBS, check_target, replay

    if size_mib < 64:
        raise ThesiosInputError(f"--size-mib must be >= 64, got {size_mib}")
    if not 1 <= jobs <= MAX_JOBS:
        raise ThesiosInputError(f"--jobs must be in [1, {MAX_JOBS}], got {jobs}")
    if seconds is not None and not (math.isfinite(seconds) and seconds > 0):
        raise ThesiosInputError(f"--seconds must be a positive number, got {seconds}")
    check_target(target, size_mib << 20, overwrite)
    if shutil.which("fio") is None:
        raise ThesiosInputError("replay needs fio on PATH (Debian: apt-get install fio)")
    req = _load_trace(trace, fmt, device).sorted_by_time()
    if seconds is not None:
        req = req.take(req.start_time < req.start_time[0] + seconds) if len(req) else req
    with _progress(quiet, "replaying") as say:
        say(f"replaying {len(req)} requests of {trace} on {target} with fio ({jobs} jobs, direct I/O)")
        result = replay(req.start_time, req.is_read, req.file_id, req.file_offset, req.size, target,
                        target_bytes=size_mib << 20, jobs=jobs, overwrite=overwrite)
    summary = {"trace": str(trace), "target": str(target)} | result.summary()
    if as_json:
        print(json.dumps(summary, indent=2))
        return
    Console().print(", ".join(f"{k} {v * 1e3:.3f} ms" if k.endswith("_s") and k != "seconds" else f"{k} {v}"
                              for k, v in summary.items()), highlight=False, soft_wrap=True)


def _with_aliases(args: list[str]) -> list[str]:
    """``args`` with the old spellings of :data:`HIDDEN_ALIASES` (``--output``, ``--output=X``) renamed."""
    out = []
    for a in args:
        name, eq, value = a.partition("=")
        out.append(HIDDEN_ALIASES.get(name, name) + eq + value if name in HIDDEN_ALIASES else a)
    return out


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app; bad input becomes one line on stderr and exit code 2."""
    args = _with_aliases(list(sys.argv[1:] if argv is None else argv)) or ["--help"]
    try:
        code = app(args=args, standalone_mode=False)
    except KeyboardInterrupt:
        code = 130
    except ThesiosInputError as err:
        print(f"thesios: error: {err}", file=sys.stderr)
        sys.exit(2)
    except OSError as err:
        print(f"thesios: error: {err.filename or ''}: {err.strerror or err}", file=sys.stderr)
        sys.exit(2)
    except Exception as err:
        # Usage errors of typer's bundled click (not importable as `click`): one line, exit 2.
        if hasattr(err, "format_message") and hasattr(err, "exit_code"):
            print(f"thesios: error: {err.format_message()}", file=sys.stderr)
            sys.exit(2)
        if type(err).__name__ == "Abort":
            code = 130
        else:
            raise
    # Without standalone mode typer turns Ctrl-C into a *returned* 130, not an exception.
    if code == 130:
        print("thesios: interrupted", file=sys.stderr)
        sys.exit(130)
    if isinstance(code, int) and code:
        sys.exit(code)


if __name__ == "__main__":
    main()
