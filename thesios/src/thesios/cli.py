"""Command line: ``thesios validate``, ``thesios whatif``, ``thesios synth``, ``thesios convert``, ``thesios sample``.

Bad input prints one line on stderr and exits with code 2 (never a traceback).
"""

from __future__ import annotations

import contextlib
import json
import math
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
from thesios.readers import ReadReport, read_thesios_csv
from thesios.requests import Requests
from thesios.validate import METRICS, PAPER_BANDS, auto_fleet, validate
from thesios.writers import check_writable, write_parquet

app = typer.Typer(add_completion=False, help=__doc__)
#: Most rows ``thesios sample`` draws (~60 bytes each in memory, more while writing).
MAX_SAMPLE_ROWS = 20_000_000
FLEET_HELP = "fleet spec (JSON); default: the embedded fleet sized to 1/p disk-days per class"
BACKEND_HELP = "where the (class, day) partitions run: local (this process) or ray (pip install 'thesios\\[ray]'; RAY_ADDRESS or a local Ray)"


def _parse_rate(rate: str) -> float:
    try:
        value = float(rate.split("/")[0]) / float(rate.split("/")[1]) if "/" in rate else float(rate)
    except (ValueError, ZeroDivisionError):
        raise ThesiosInputError(f"--rate: {rate!r} is not a number or a fraction like 1/10000") from None
    if not (math.isfinite(value) and 0.0 < value <= 1.0):
        raise ThesiosInputError(f"--rate must be in (0, 1], got {rate}")
    return value


@app.command("validate")
def validate_cmd(
    rate: Annotated[str, typer.Option(help="sampling rate p, e.g. 1e-4 or 1/10000")] = "1/10000",
    days: Annotated[int, typer.Option(help="days of samples per disk (disk-days merged across days)")] = 4,
    seed: Annotated[int, typer.Option(help="seed of the fleet and of the sampler")] = 0,
    held_out: Annotated[int, typer.Option(help="held-out disks per class (full traces)")] = 2,
    fleet: Annotated[Path | None, typer.Option(help=FLEET_HELP)] = None,
    report: Annotated[Path | None, typer.Option(help="also write an HTML report with plots here")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON document")] = False,
    backend: Annotated[str, typer.Option(help=BACKEND_HELP)] = "local",
) -> None:
    """Synthesize held-out disks of the embedded fleet from samples; compare with their real traces."""
    p = _parse_rate(rate)
    _check_backend(backend)
    if report is not None:
        check_writable(report)  # before minutes of work, not after
    spec = _fleet_spec(fleet, p, days, seed, held_out)
    err = Console(stderr=True, log_path=False)  # the source line of each log is noise to a user
    if as_json:
        with _backend(backend) as be:
            result = validate(spec, rate=p, seed=seed, held_out_per_class=held_out,
                              progress=lambda m: print(m, file=sys.stderr), backend=be)
        _maybe_report(result, report)
        print(json.dumps(result.to_json() | {"backend": backend}, indent=2))
        return
    with _backend(backend) as be, err.status("validating") as status:
        result = validate(spec, rate=p, seed=seed, held_out_per_class=held_out,
                          progress=lambda m: (status.update(m), err.log(m)), backend=be)
    table = Table(title=f"thesios validate: p={p:g}, {result.disks} sampled disks x {result.days} days, "
                        f"{result.sampled_requests} samples, {result.seconds:.1f} s")
    table.add_column("metric")
    table.add_column("ours", justify="right")
    table.add_column("paper band", justify="right")
    table.add_column("at/above paper's lower bound")
    for m in METRICS:
        lo, hi = PAPER_BANDS[m]
        ours = result.accuracy[m]
        table.add_row(m, f"{ours:.1%}", f"{lo:.1%}-{hi:.1%}", "yes" if ours >= lo else "NO")
    Console().print(table)
    Console().print(f"groups found: {result.groups}, purity vs generator classes: {result.purity:.1%}; "
                    f"disk-days merged per synthesized disk: {result.coverage:.2f}/p")
    _maybe_report(result, report)
    if report is not None:
        Console(stderr=True).print(f"report -> {report}")
    if result.coverage < 0.999:
        Console(stderr=True).print(f"warning: the fleet has too few disk-days for 1/p per group (coverage {result.coverage:.2f})")


def _check_backend(name: str) -> None:
    from thesios.partitions import BACKENDS

    if name not in BACKENDS:
        raise ThesiosInputError(f"--backend must be one of {', '.join(BACKENDS)}, got {name!r}")


@contextlib.contextmanager
def _backend(name: str):
    """The named backend for the length of a command; a Ray instance started here is shut down."""
    from thesios.partitions import make_backend

    be = make_backend(name)
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
    fmt: Annotated[str, typer.Option("--format", help="TRACE's format: auto (.parquet, blkparse text, else a Thesios shard), thesios, parquet, blkparse, msr, alibaba, tencent")] = "auto",
    device: Annotated[str | None, typer.Option(help="the device of a block TRACE to use (filename column, e.g. 8,0 for blkparse) when it holds several")] = None,
    rpm: Annotated[float, typer.Option(help="the TRACE's disk RPM")] = 7200.0,
    rate: Annotated[str, typer.Option(help="sampling rate p")] = "1/1000",
    days: Annotated[int, typer.Option(help="days of samples per disk")] = 4,
    seed: Annotated[int, typer.Option(help="seed")] = 0,
    fleet: Annotated[Path | None, typer.Option(help=FLEET_HELP)] = None,
    report: Annotated[Path | None, typer.Option(help="also write an HTML report with a section and plot per what-if")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON document")] = False,
    backend: Annotated[str, typer.Option(help=BACKEND_HELP)] = "local",
) -> None:
    """What-ifs on a TRACE, or on one synthesized disk per group of the embedded fleet, beside the baseline."""
    from thesios.scenarios import parse_scenario, run_scenarios, run_trace_scenarios

    p = _parse_rate(rate)
    _check_backend(backend)
    scenarios = [parse_scenario(s) for s in scenario]
    if report is not None:
        check_writable(report)  # before minutes of work, not after
    if trace is None and (fmt != "auto" or device is not None):
        raise ThesiosInputError("--format and --device describe a TRACE; none was given")
    if trace is not None:
        # These shape the embedded fleet; with a TRACE they would be ignored without a word.
        fleet_only = [f"--{n}" for n in ("rate", "days", "fleet", "backend")
                      if ctx.get_parameter_source(n) is not None and ctx.get_parameter_source(n).name != "DEFAULT"]
        if fleet_only:
            raise ThesiosInputError(f"{', '.join(fleet_only)}: only for the embedded fleet, not with a TRACE")
        if not 0 < rpm <= 30000:
            raise ThesiosInputError("--rpm must be in (0, 30000]")
        result = {"trace": str(trace)} | run_trace_scenarios(_load_trace(trace, fmt, device), scenarios, rpm=rpm, seed=seed)
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
    if as_json:
        with _backend(backend) as be:
            result = run_scenarios(spec, p, scenarios, seed=seed, progress=lambda m: print(m, file=sys.stderr), backend=be)
        _maybe_whatif_report(result, report)
        print(json.dumps(result, indent=2))
        return
    err = Console(stderr=True, log_path=False)  # the source line of each log is noise to a user
    with _backend(backend) as be, err.status("sampling, grouping, synthesizing") as status:
        result = run_scenarios(spec, p, scenarios, seed=seed, progress=lambda m: (status.update(m), err.log(m)), backend=be)
    _maybe_whatif_report(result, report)
    _print_whatif_groups(result["groups"])
    if report is not None:
        err.print(f"report -> {report}")


def _maybe_whatif_report(result: dict, report: Path | None) -> None:
    if report is not None:
        from thesios.report import write_whatif_report

        write_whatif_report(result, report)


#: Formats of a whatif TRACE; the block formats name the device in ``filename``.
TRACE_FORMATS = ("auto", "thesios", "parquet", "blkparse", "msr", "alibaba", "tencent")
_BLOCK_FORMATS = ("blkparse", "msr", "alibaba", "tencent")


def _sniff_format(path: Path) -> str:
    """``parquet`` by name, ``blkparse`` when the first line is a blkparse event, else ``thesios``."""
    import re

    from thesios.readers import _BLK_EVENT

    if path.suffix == ".parquet":
        return "parquet"
    try:
        with pa.input_stream(str(path), compression="detect") as stream:
            raw = stream.read(4096)
    except (OSError, pa.ArrowInvalid):
        return "thesios"  # its reader names the problem in one line
    if raw.startswith(b"PAR1"):
        return "parquet"
    head = raw.decode("utf-8", "replace").lstrip("\n").split("\n", 1)[0]
    return "blkparse" if re.match(_BLK_EVENT, head) else "thesios"


def _load_trace(path: Path, fmt: str = "auto", device: str | None = None) -> Requests:
    """A one-disk trace for whatif: read in ``fmt`` (``auto``: :func:`_sniff_format`), one device kept.

    Raises:
        ThesiosInputError: an unknown format, an unreadable or malformed file, a trace of several
            disks (without ``device``), an unknown ``device``, or no service times at all.
    """
    from thesios.readers import (
        read_alibaba_csv,
        read_blkparse,
        read_msr_csv,
        read_tencent_csv,
    )
    from thesios.schema import THESIOS_COLUMNS
    from thesios.writers import read_parquet

    if fmt not in TRACE_FORMATS:
        raise ThesiosInputError(f"--format must be one of {', '.join(TRACE_FORMATS)}, got {fmt!r}")
    fmt = _sniff_format(path) if fmt == "auto" else fmt
    if device is not None and fmt not in _BLOCK_FORMATS:
        raise ThesiosInputError(f"--device picks a device of a block trace ({', '.join(_BLOCK_FORMATS)}), not of a {fmt} trace")
    if fmt == "parquet":
        try:
            table = read_parquet(path)
        except (OSError, ValueError, pa.ArrowException) as err:  # a corrupt or foreign file
            # pyarrow's message repeats the path ("Could not open Parquet input source '...': ").
            reason = str(err).splitlines()[0].split("': ", 1)[-1].split(". ")[0][:120]
            raise ThesiosInputError(f"{path}: not a readable Parquet trace ({reason})") from None
        missing = [c for c in THESIOS_COLUMNS if c not in table.column_names]
        if missing:
            raise ThesiosInputError(f"{path}: missing trace columns {missing[:4]}")
        # A many-disk trace (`thesios sample` output) would be served as one disk, silently.
        if "disk_id" in table.column_names:
            disks = pc.count_distinct(table.column("disk_id")).as_py()
            if disks > 1:
                raise ThesiosInputError(f"{path}: holds {disks} disks (column disk_id); whatif takes a one-disk trace")
    elif fmt == "thesios":
        try:
            table = read_thesios_csv(path)
        except ThesiosInputError as err:
            if ": header " not in str(err):
                raise
            # Most likely another trace format: say how to bring it in.
            raise ThesiosInputError(f"{err}; for MSR, Alibaba or Tencent traces give --format msr|alibaba|tencent") from None
    else:
        readers = {"blkparse": read_blkparse, "msr": read_msr_csv, "alibaba": read_alibaba_csv, "tencent": read_tencent_csv}
        table = readers[fmt](path)
        devices = pc.unique(table.column("filename")).to_pylist()
        if device is not None:
            if device not in devices:
                raise ThesiosInputError(f"{path}: no device {device!r} (devices: {', '.join(map(str, devices[:5]))})")
            table = table.filter(pc.equal(table.column("filename"), device))
        elif len(devices) > 1:
            shown = ", ".join(map(str, devices[:3])) + (", ..." if len(devices) > 3 else "")
            raise ThesiosInputError(f"{path}: holds {len(devices)} devices ({shown}); pick one with --device")
    requests = Requests.from_table(table)[0]
    miss = requests.is_miss_read
    if miss.any() and not (requests.disk_time[miss] > 0).any():
        raise ThesiosInputError(f"{path}: no read has a service time (disk_time or latency); whatif re-serves reads on a disk")
    return requests


def _pct(x: float) -> str:
    """A fraction as a percentage that stays readable for the tiny utilizations of short traces."""
    return f"{x:.2%}" if x == 0 or x >= 1e-4 else f"{x * 100:.2g}%"


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
            elif "saving" in m:
                notes.append(f"{name}: energy saving {m['saving']:.1%}, {m['spin_ups']} spin-ups, "
                             f"mean idle gap {m['mean_idle_gap_s']:.1f} s vs break-even {m['break_even_s']:.1f} s; "
                             f"{m['requests_delayed']} requests delayed, {m['added_latency_s']:.1f} s added "
                             f"(max {m['added_latency_max_s']:.1f} s), read p99 {m['baseline_read_latency_p99_s'] * 1e3:.1f} -> "
                             f"{m['read_latency_p99_s'] * 1e3:.1f} ms")
            else:
                check = (f"; a member's full disk-day: {m['full_trace_lru_miss_ratio']:.1%} -> "
                         f"{m['full_trace_lru_miss_ratio_scaled']:.1%}" if "full_trace_lru_miss_ratio" in m else "")
                notes.append(f"{name}: LRU miss ratio {m['lru_miss_ratio']:.1%} -> {m['lru_miss_ratio_scaled']:.1%} "
                             f"(Belady {m['belady_miss_ratio_scaled']:.1%}){check}")
        console.print(table)
        for note in notes:
            console.print(note, highlight=False, soft_wrap=False)


@app.command("synth")
def synth_cmd(
    output: Annotated[Path, typer.Option("--output", "-o", help="trace to write: .parquet, .csv (Thesios shard) or .iolog (fio replay log v3)")],
    rate: Annotated[str, typer.Option(help="sampling rate p")] = "1/1000",
    disk: Annotated[int, typer.Option(help="synthesize a disk like this one (its group, itself excluded)")] = 0,
    days: Annotated[int, typer.Option(help="days of samples per disk")] = 4,
    seed: Annotated[int, typer.Option(help="seed")] = 0,
    discipline: Annotated[str, typer.Option(help="queue of the reorganizer: fifo or priority")] = "fifo",
    fio_device: Annotated[str, typer.Option(help="device named in a .iolog output")] = "/dev/sdX",
    fleet: Annotated[Path | None, typer.Option(help=FLEET_HELP)] = None,
) -> None:
    """Synthesize one day of a full-rate disk trace from samples of the embedded fleet."""
    from thesios.fleet import FleetGenerator
    from thesios.identify import disk_features, identify
    from thesios.partitions import sample_fleet
    from thesios.synth import synthesize, trace_table
    from thesios.writers import write_thesios_csv

    p = _parse_rate(rate)
    if discipline not in ("fifo", "priority"):
        raise ThesiosInputError(f"--discipline must be fifo or priority, got {discipline!r}")
    if output.suffix not in (".parquet", ".csv", ".iolog"):
        raise ThesiosInputError(f"{output}: the output must end in .parquet, .csv or .iolog")
    if not fio_device or any(c.isspace() for c in fio_device):
        raise ThesiosInputError("--fio-device must be a name without spaces")
    check_writable(output)
    spec = _fleet_spec(fleet, p, days, seed, 1)
    if not 0 <= disk < spec.n_disks:
        raise ThesiosInputError(f"--disk must be in [0, {spec.n_disks})")
    err = Console(stderr=True, log_path=False)  # the source line of each log is noise to a user
    gen = FleetGenerator(spec)
    with err.status("sampling") as status:
        def step(msg: str) -> None:
            status.update(msg)
            err.log(msg)

        step(f"sampling {spec.n_disks} disks x {spec.days} days at p={p:g}")
        samples = sample_fleet(spec, p, seed)
        step(f"identifying groups from {len(samples)} samples")
        labels = identify(disk_features(samples, spec.n_disks, spec.days), seed=seed).labels
        members = np.flatnonzero(labels == labels[disk])
        step(f"synthesizing a disk like {disk} from its group's {len(members) - 1} other disks")
        result = synthesize(samples, members[members != disk], p, days=spec.days)
        step(f"reorganizing {len(result.trace)} requests ({discipline})")
        table = trace_table(result.trace, gen.applications, discipline)
        step(f"writing {output}")
    if output.suffix == ".csv":
        write_thesios_csv(table, output)
    elif output.suffix == ".iolog":
        from thesios.writers import write_fio_iolog

        tr = result.trace
        write_fio_iolog(tr.start_time, tr.is_read, tr.disk_id.astype(np.int64) * 1_000_003 + tr.file_id,
                        tr.file_offset, tr.size, output, device=fio_device)
    else:
        write_parquet(table, output)
    err.print(f"{table.num_rows} requests from {len(result.disk_days)} disk-days (coverage {result.coverage:.2f}/p) -> {output}")


@app.command("convert")
def convert_cmd(
    inputs: Annotated[list[Path], typer.Argument(help="trace files (Thesios CSV shards .csv, .csv.gz by default)")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Parquet file to write (atomically)")],
    lenient: Annotated[bool, typer.Option(help="skip and count malformed rows instead of failing")] = False,
    fmt: Annotated[str, typer.Option("--format", help="input format: thesios, msr, alibaba, tencent, blkparse")] = "thesios",
) -> None:
    """Convert trace files (Thesios CSV shards by default) into one Parquet trace."""
    from thesios.readers import (
        read_alibaba_csv,
        read_blkparse,
        read_msr_csv,
        read_tencent_csv,
    )

    readers = {"thesios": read_thesios_csv, "msr": read_msr_csv, "alibaba": read_alibaba_csv, "tencent": read_tencent_csv,
               "blkparse": read_blkparse}
    if fmt not in readers:
        raise ThesiosInputError(f"--format must be one of {', '.join(readers)}, got {fmt!r}")
    _require_parquet(output)
    check_writable(output)
    report = ReadReport()
    tables = [readers[fmt](path, lenient=lenient, report=report) for path in inputs]
    write_parquet(_concat_shards(tables), output)
    msg = f"{report.rows} rows -> {output}"
    if fmt == "thesios":
        msg += f"; {report.header_repeats} repeated headers dropped"
    if report.unpaired:
        msg += f"; {report.unpaired} issue/complete events without their partner dropped"
    if report.skipped:
        msg += f"; {report.skipped} malformed rows skipped (first: {report.examples[0]})"
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
    output: Annotated[Path, typer.Option("--output", "-o", help="Parquet file of samples (+ disk_id)")],
    rate: Annotated[str, typer.Option(help="sampling rate p")] = "1/10000",
    disks_per_class: Annotated[int, typer.Option(help="disks per class of the default fleet")] = 100,
    days: Annotated[int, typer.Option(help="days")] = 1,
    seed: Annotated[int, typer.Option(help="seed")] = 0,
) -> None:
    """Write Bernoulli samples of the embedded default fleet as a Parquet trace with ``disk_id``."""
    from thesios.fleet import FleetGenerator, default_fleet
    from thesios.partitions import sample_fleet

    p = _parse_rate(rate)
    if disks_per_class < 1 or days < 1:
        raise ThesiosInputError("--disks-per-class and --days must be >= 1")
    _require_parquet(output)
    check_writable(output)
    gen = FleetGenerator(default_fleet(disks_per_class=disks_per_class, days=days, seed=seed))
    # p = 1 of the default 400 disks is ~350 M requests: refuse before memory runs out, not after.
    disks = np.arange(gen.spec.n_disks)
    expected = p * sum(float(gen.expected_requests(disks, d).sum()) for d in range(days))
    if expected > MAX_SAMPLE_ROWS:
        raise ThesiosInputError(f"p={p:g} of {gen.spec.n_disks} disks x {days} days is about {expected:,.0f} samples "
                                f"(limit {MAX_SAMPLE_ROWS:,}); lower --rate, --disks-per-class or --days")
    samples = sample_fleet(gen.spec, p, seed).sorted_by_time()
    write_parquet(samples.to_table(gen.applications), output)
    Console(stderr=True).print(f"{len(samples)} samples of {gen.spec.n_disks} disks x {days} days -> {output}")


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app; bad input becomes one line on stderr and exit code 2."""
    args = list(sys.argv[1:] if argv is None else argv) or ["--help"]
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
