"""The xlaprobe command line (typer + rich): the commands and their options; each command's work
and printing is in its own module of this package (`check`, `findings`, `fuzz`, `merge`, `localize`,
`reduce`, `bisect`, `tune`, `report`), imported when the command runs so ``xlaprobe --help`` stays
quick.

Exit codes: 0 all ok, 1 findings, 2 bad input (one line on stderr, never a traceback), 3 an internal
error of xlaprobe itself (a bug: one line on stderr, the traceback in a file it names), 4 (check) no
finding but the check is incomplete (the float64 reference or one of xlaprobe's interpreters could
not run the program), 130 on Ctrl-C (everything stored so far is kept).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from xlaprobe.cli.console import err, out, set_quiet, set_wide
from xlaprobe.errors import InvalidArgument, XlaprobeError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Differential checking of XLA (from JAX): finds miscompilations.")


def _version(value: bool) -> None:
    if value:
        import jax
        from xlaprobe.version import __version__
        print(f"xlaprobe {__version__} (jax {jax.__version__}, jaxlib {jax.lib.__version__})")
        raise typer.Exit(0)


#: Set by the global --traceback option: an error prints its whole traceback, not one line.
_SHOW_TRACEBACK = {"on": False}


@app.callback()
def _options(version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True,
        help="print the versions of xlaprobe, jax and jaxlib and exit")] = False,
             quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress on stderr "
                                                 "(results and errors still print)")] = False,
             traceback: Annotated[bool, typer.Option(
                 "--traceback", help="on an error print the whole traceback (your code's "
                 "frames included), not one line")] = False) -> None:
    """Differential checking of XLA (from JAX): finds miscompilations."""
    set_quiet(quiet)
    _SHOW_TRACEBACK["on"] = traceback
    if os.environ.get("XLAPROBE_EXTENSIONS"):
        from xlaprobe.extend import load_extensions  # imports jax: only when extensions are named
        load_extensions()


# Arguments and options several commands share.
# The store's default path (`xlaprobe.store.DEFAULT_DB`), spelled here so --help needs no store import.
DEFAULT_DB = Path(".xlaprobe/xlaprobe.db")
def _store_path(value: Path) -> Path:
    # `none` keeps nothing in pytest's --xlaprobe-db and is None in Python: here every command
    # records, so a file called "none" would surprise.
    if str(value).strip().lower() in ("none", "null", ""):
        raise typer.BadParameter("the command line always records its results: give a file "
                                 "path (db=None in Python and --xlaprobe-db none in pytest "
                                 "keep nothing)")
    return value


DbOption = Annotated[Path, typer.Option(help="SQLite store", callback=_store_path)]
JobsOption = Annotated[int, typer.Option("--jobs", "-j", min=1, help="worker processes")]
JsonOption = Annotated[bool, typer.Option("--json", help="print JSON to stdout")]
FindingTarget = Annotated[str, typer.Argument(help="finding id, artifact directory, case module, "
                                                   "zoo MODEL, FILE.py:FN or module:fn")]
RunTimeoutOption = Annotated[float, typer.Option(help="per-run limit (s)", min=0.1,
                                                max=7 * 24 * 3600.0)]
InputsOption = Annotated[str, typer.Option("--inputs", help="input spec for FILE:FN, e.g. "
                                           "'f32[8,128],i32[8]'")]
QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="no progress on stderr "
                                          "(results and errors still print)")]
WideOption = Annotated[bool, typer.Option("--wide", help="tables as wide as their content: names "
                                         "and paths never folded")]
AddressOption = Annotated[str | None, typer.Option(
    "--address", help="Ray cluster HOST:PORT or auto [default: a new local one]",
    show_default=False)]
FaultyConfig = Annotated[str, typer.Argument(help="the faulty configuration (default: the "
                                                  "finding's or the case's FAULTY_CONFIG)")]


def _display(quiet: bool, wide: bool = False) -> None:
    """Apply a command's --quiet (on top of the global one) and --wide."""
    if quiet:
        set_quiet(True)
    if wide:
        set_wide()


@app.command()
def check(
    target: Annotated[str, typer.Argument(help="zoo MODEL, path/to/case.py, FILE.py:FN, module:fn, "
                                               "or an artifact directory")],
    configs: Annotated[str, typer.Option("--configs", "-c", help="comma-separated configuration "
                                         "specs")] = "xla,xla:O0,eager,reference",
    inputs: InputsOption = "",
    seed: Annotated[int, typer.Option(help="seed of random weights and inputs", min=0,
                                      max=2 ** 63 - 1)] = 0,
    db: DbOption = DEFAULT_DB,
    jobs: JobsOption = 1,
    timeout: Annotated[float, typer.Option(help="per-run limit (s); the reference's error-budget "
                                           "runs get it too", min=0.1, max=7 * 24 * 3600.0)] = 600.0,
    as_json: JsonOption = False,
    all_outputs: Annotated[bool, typer.Option("--all-outputs", help="list every output leaf")] = False,
    accept: Annotated[str | None, typer.Option(
        "--accept", help="freedoms XLA may take, ok with their label: comma-separated "
        "excess-range, fma, ftz, or all, none [default: ftz]", show_default=False)] = None,
    quiet: QuietOption = False,
    wide: WideOption = False,
) -> None:
    """Check TARGET under several configurations against the float64 reference (always added);
    exit 0 all ok, 1 findings, 2 bad input, 4 no finding but incomplete."""
    from xlaprobe.cli.check import check_command

    from xlaprobe.freedoms import parse_accept

    _display(quiet, wide)
    accepted = parse_accept(accept)  # a bad name: one line, exit 2, before any run
    raise typer.Exit(check_command(target, configs, input_spec=inputs, seed=seed, db=db,
                                   jobs=jobs, timeout_s=timeout, json_output=as_json,
                                   all_outputs=all_outputs, accept=accepted))


@app.command()
def fuzz(
    time: Annotated[str, typer.Option("--time", help="wall-time budget: 90s, 10m, 1h")] = "5m",
    configs: Annotated[str | None, typer.Option(
        "--configs", "-c", help="comma-separated configuration specs; the float64 reference is "
        "always added [default: xla,xla:O0,eager,reference]", show_default=False)] = None,
    jobs: JobsOption = 1,
    seed: Annotated[int | None, typer.Option(help="first generator seed [default: 0]", min=0,
                                             max=2 ** 62, show_default=False)] = None,
    db: DbOption = DEFAULT_DB,
    resume: Annotated[bool, typer.Option("--resume", help="continue the newest campaign with "
                                         "these configurations")] = False,
    campaign: Annotated[int | None, typer.Option(
        "--campaign", min=1, help="continue campaign ID, with its configurations (xlaprobe "
        "campaigns lists them)")] = None,
    schedule: Annotated[str | None, typer.Option(
        "--schedule", help="adaptive: the reference and every compiler under test (xla, mutants, "
        "releases, xla variants) on every program, eager and xla:O0 where a finding, dead code or "
        "an audit asks for them; all: every "
        "configuration on every program [default: adaptive; a resumed campaign keeps its own]",
        show_default=False)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
    quiet: QuietOption = False,
    backend: Annotated[str, typer.Option(
        "--backend", help="where configurations run: local (worker processes) or ray (--jobs "
        "Ray actors, each hosting an isolated worker; pip install 'xlaprobe\\[ray]')")] = "local",
    address: AddressOption = None,
    shard: Annotated[str | None, typer.Option(
        "--shard", help="I/N: check only every N-th seed from --seed, offset I (reruns alone "
        "with the same programs)", show_default=False)] = None,
    steer: Annotated[str, typer.Option(
        "--steer", help="none: the plain generator; coverage: steer to XLA passes and rewrites "
        "that rarely fire (pass patterns, mutations of seeds that hit rare ones)")] = "none",
) -> None:
    """Fuzz: generate random valid programs and check each; findings are stored and deduplicated.

    Exit 0 no findings, 1 findings or no program checked within --time, 130 interrupted."""
    from xlaprobe.campaign import parse_duration, parse_shard
    from xlaprobe.cli.fuzz import fuzz_command

    _display(quiet)
    if campaign is not None and (configs is not None or seed is not None or resume
                                 or shard is not None):
        # The campaign's own configurations and seeds go on: another value would be ignored.
        raise InvalidArgument(f"--campaign {campaign} continues with its own configurations and "
                              "seeds: drop --configs, --seed, --shard and --resume")
    if resume and shard is not None:
        raise InvalidArgument("--resume continues a campaign with its own shard: drop --shard")
    raise typer.Exit(fuzz_command(time_s=parse_duration(time),
                                  configs=configs or "xla,xla:O0,eager,reference", jobs=jobs,
                                  seed=seed or 0, db=db, resume=resume, campaign=campaign,
                                  json_output=as_json, backend=backend, address=address,
                                  shard=parse_shard(shard) if shard is not None else (0, 1),
                                  schedule=schedule, steer=steer))


@app.command()
def campaigns(db: DbOption = DEFAULT_DB,
              as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List the fuzz campaigns of the store: programs, seeds, rate, coverage, findings."""
    from xlaprobe.cli.campaigns import campaigns_command

    campaigns_command(db=db, json_output=as_json)


@app.command()
def coverage(db: DbOption = DEFAULT_DB,
             campaign: Annotated[int | None, typer.Option(
                 help="only this fuzz campaign's checks (xlaprobe campaigns lists them)")] = None,
             as_json: JsonOption = False) -> None:
    """Optimization coverage: per campaign and program source, the XLA passes that changed a
    module, the rewrites that fired, and the passes never seen changing anything."""
    from xlaprobe.cli.coverage import coverage_command

    coverage_command(db=db, campaign=campaign, json_output=as_json)


@app.command()
def merge(sources: Annotated[list[Path], typer.Argument(
              help="stores to copy from (e.g. seed shards' shard0.db shard1.db); never written")],
          db: DbOption = DEFAULT_DB,
          as_json: JsonOption = False) -> None:
    """Merge stores into --db (created if missing): campaigns, checks, findings and their
    artifact directories; merging a store again adds only what is new."""
    from xlaprobe.cli.merge import merge_command

    raise typer.Exit(merge_command(sources, db=db, json_output=as_json))


@app.command()
def localize(
    target: FindingTarget,
    config: FaultyConfig = "",
    db: DbOption = DEFAULT_DB,
    jobs: JobsOption = 1,
    timeout: RunTimeoutOption = 600.0,
    as_json: JsonOption = False,
    inputs: InputsOption = "",
    quiet: QuietOption = False,
    backend: Annotated[str, typer.Option(
        "--backend", help="where compiles run: local (--jobs worker processes) or ray (--jobs "
        "Ray actors); the compiler-pass search tests --jobs candidates at once "
        "(pip install 'xlaprobe\\[ray]')")] = "local",
    address: AddressOption = None,
) -> None:
    """Localize a finding: failing outputs, smallest failing jaxpr segment, equation, fusion."""
    from xlaprobe.cli.localize import localize_command

    _display(quiet)
    raise typer.Exit(localize_command(target, config, db=db, json_output=as_json, jobs=jobs,
                                      timeout_s=timeout, input_spec=inputs, backend=backend,
                                      address=address))


@app.command()
def reduce(
    target: FindingTarget,
    config: FaultyConfig = "",
    db: DbOption = DEFAULT_DB,
    out_dir: Annotated[Path | None, typer.Option("--out", help="output directory (default: "
                                                 "reductions/ beside the store)")] = None,
    jobs: JobsOption = 1,
    timeout: RunTimeoutOption = 600.0,
    max_tests: Annotated[int, typer.Option("--max-tests", min=1, max=100_000,
                                           help="interestingness test budget")] = 400,
    as_json: JsonOption = False,
    inputs: InputsOption = "",
    quiet: QuietOption = False,
) -> None:
    """Reduce a finding (ddmin over equations, then shapes and values) to a standalone repro.py."""
    from xlaprobe.cli.reduce import reduce_command

    _display(quiet)
    raise typer.Exit(reduce_command(target, config, db=db, out=out_dir, json_output=as_json,
                                    jobs=jobs, timeout_s=timeout, max_tests=max_tests,
                                    input_spec=inputs))


@app.command()
def bisect(
    target: FindingTarget,
    config: Annotated[str, typer.Argument(help="the failing XLA configuration: xla, xla:fastmath, "
                                               "xla\\[option=value], jaxlib==V[...] or spmd\\[...] "
                                               "(default: the finding's or the case's)")] = "",
    releases: Annotated[str | None, typer.Option(help="comma-separated jaxlib releases "
                                                      "(default: the newest of each minor line "
                                                      "from 0.4.33 on the registry)")] = None,
    db: DbOption = DEFAULT_DB,
    timeout: RunTimeoutOption = 600.0,
    as_json: JsonOption = False,
    inputs: InputsOption = "",
    quiet: QuietOption = False,
) -> None:
    """Find the first bad (and first fixed) jaxlib release of a failure by bisection.

    Exit 0 when a boundary is found or no release in the range fails ("not found in this
    range"), 1 when every release tried fails or a failure was flaky."""
    from xlaprobe.cli.bisect import bisect_command

    _display(quiet)
    raise typer.Exit(bisect_command(target, config, releases=releases, db=db,
                                    json_output=as_json, timeout_s=timeout, input_spec=inputs))


@app.command()
def upstream(
    finding_id: Annotated[int, typer.Argument(help="finding id (xlaprobe findings lists them)")],
    out: Annotated[Path | None, typer.Option("--out", help="write the Markdown here")] = None,
    db: DbOption = DEFAULT_DB,
    run: Annotated[bool, typer.Option(help="run the reproducer once and include its "
                                           "output")] = True,
    as_json: JsonOption = False,
) -> None:
    """Draft a ready-to-file upstream issue (openxla/xla or jax-ml/jax) for a finding.

    Exit 0 when drafted and its reproducer shows the fault (or was not run), 1 when it did not."""
    from xlaprobe.cli.upstream import upstream_command

    raise typer.Exit(upstream_command(finding_id, out=out, db=db, run=run, json_output=as_json))


@app.command()
def mcp(db: DbOption = DEFAULT_DB) -> None:
    """Serve xlaprobe to agents over the Model Context Protocol (stdio): tools check, fuzz,
    findings, localize, reduce, bisect and upstream, each returning its command's --json."""
    from xlaprobe.cli.agent import mcp_command

    raise typer.Exit(mcp_command(db))


envs_app = typer.Typer(no_args_is_help=True, help="Environments of other jax/jaxlib releases "
                                                  "(configurations jaxlib==VERSION).")
app.add_typer(envs_app, name="envs")


@envs_app.command("list")
def envs_list(
    available: Annotated[bool, typer.Option("--available", help="list the registry's releases "
                                                                "(needs the network)")] = False,
    as_json: JsonOption = False,
) -> None:
    """List the release environments made (or, with --available, the releases there are)."""
    from xlaprobe.cli.bisect import envs_rows as rows_of
    from xlaprobe.releases import envs

    rows = rows_of(available=available)
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    table = Table(caption=f"cache: {envs.cache_dir()}")
    keys = list(rows[0]) if rows else ["version", "path", "python_version", "size_bytes"]
    for key in keys:
        table.add_column({"size_bytes": "size", "python_version": "python version"}.get(key, key))
    for row in rows:
        table.add_row(*(escape(_env_cell(k, row[k])) for k in keys))
    out.print(table)


def _env_cell(key: str, value: Any) -> str:
    """A cell of ``envs list``'s table: sizes in GB, times local (the JSON keeps bytes and UTC)."""
    import calendar
    import time as time_module

    from xlaprobe.cli.console import local_time
    if key == "size_bytes" and isinstance(value, int):
        return f"{value / 1e9:.2f} GB"
    if key == "created" and isinstance(value, str) and value.endswith("Z"):
        try:
            return local_time(calendar.timegm(time_module.strptime(value, "%Y-%m-%dT%H:%M:%SZ")))
        except ValueError:
            return value
    return str(value)


@envs_app.command("add")
def envs_add(versions: Annotated[list[str], typer.Argument(help="jaxlib releases, e.g. 0.5.3")]) -> None:
    """Make the environments of some releases now (else they are made on first use)."""
    from xlaprobe.releases import envs

    for version in versions:
        env = envs.ensure_env(version, log=lambda line: err.print(escape(line)))
        out.print(f"jaxlib=={env.version}: {env.path} (Python {env.python_version}, "
                  f"{env.size_bytes / 1e9:.2f} GB)")


@envs_app.command("remove")
def envs_remove(versions: Annotated[list[str], typer.Argument(help="jaxlib releases")]) -> None:
    """Delete the environments of some releases."""
    from xlaprobe.releases import envs

    for version in versions:
        removed = envs.remove_env(version)
        out.print(f"jaxlib=={version}: {'removed' if removed else 'no environment'}")


@app.command()
def tune(
    target: Annotated[str, typer.Argument(help="zoo MODEL, FILE.py:FN, module:fn, case module or "
                                               "artifact directory")],
    budget: Annotated[int, typer.Option(min=1, max=100000, help="measurements to spend")] = 20,
    strategy: Annotated[str, typer.Option(help="model (cost-model guided), kernel (screened by "
                                               "the kernel corpus's model), tpe (Optuna) or "
                                               "random")] = "model",
    seed: Annotated[int, typer.Option(min=0, max=2**31 - 1, help="seed of the search and of "
                                                                 "random weights/inputs")] = 0,
    db: DbOption = DEFAULT_DB,
    name: Annotated[str, typer.Option(help="name of the stored result (default: TARGET)")] = "",
    only: Annotated[str, typer.Option(help="comma-separated dimensions to search, e.g. "
                                           "pass:algsimp,knob:layout (default: all)")] = "",
    max_rounds: Annotated[int, typer.Option(min=2, max=1000, help="timing rounds per "
                                                                 "measurement at most")] = 25,
    timeout: Annotated[float, typer.Option(help="per-measurement limit (s)", min=0.1,
                                           max=7 * 24 * 3600.0)] = 600.0,
    plot: Annotated[Path | None, typer.Option(help="write the search plot (.svg, .png or "
                                                   ".pdf)")] = None,
    inputs: Annotated[str, typer.Option(help="input spec for FILE.py:FN, e.g. "
                                             "'f32[8,128],i32[8]'")] = "",
    as_json: JsonOption = False,
    quiet: QuietOption = False,
    backend: Annotated[str, typer.Option(
        "--backend", help="where measurements run: local (a worker process) or ray (a Ray "
        "actor hosting one; pip install 'xlaprobe\\[ray]')")] = "local",
    address: AddressOption = None,
) -> None:
    """Tune XLA compiler options, pass toggles and program knobs for speed, numerics guarded.

    Exit 0 when a result (accepted or not) is stored; rejected candidates are findings
    (xlaprobe findings)."""
    from xlaprobe.cli.tune import tune_command

    _display(quiet)
    raise typer.Exit(tune_command(target, budget=budget, strategy=strategy, seed=seed, db=db,
                                  name=name, only=only, max_rounds=max_rounds, timeout_s=timeout,
                                  json_output=as_json, plot=plot, input_spec=inputs,
                                  backend=backend, address=address))


@app.command("tune-corpus")
def tune_corpus(
    programs: Annotated[str, typer.Argument(help="comma-separated: zoo or third-party zoo "
                                                 "MODEL, fuzz:SEED or fuzz:FIRST-LAST, captured "
                                                 "artifact directory")],
    configs: Annotated[int, typer.Option(min=1, max=1000, help="configurations per program "
                                                               "(the default first)")] = 6,
    seed: Annotated[int, typer.Option(min=0, max=2**31 - 1, help="seed of the configurations "
                                                                 "and inputs")] = 0,
    rounds: Annotated[int, typer.Option(min=1, max=100, help="interleaved timing rounds "
                                                             "(min of them is kept)")] = 5,
    timeout: Annotated[float, typer.Option(help="per-entry limit (s)", min=1.0,
                                           max=7 * 24 * 3600.0)] = 900.0,
    max_kernels: Annotated[int, typer.Option(min=1, max=100000, help="distinct kernels timed "
                                                                    "per entry at most")] = 400,
    kernel_limit: Annotated[float, typer.Option(min=0.1, max=3600.0, help="per-kernel limit "
                                                "on compile and timing (s)")] = 30.0,
    db: DbOption = DEFAULT_DB,
    quiet: QuietOption = False,
) -> None:
    """Grow the tuner's kernel corpus: each kernel of each program, under sampled
    configurations, timed alone with its features (the kernel strategy's training data)."""
    from xlaprobe.cli.tune import corpus_command

    _display(quiet)
    raise typer.Exit(corpus_command(programs, configs=configs, seed=seed, db=db, rounds=rounds,
                                    timeout_s=timeout, max_kernels=max_kernels,
                                    kernel_limit_s=kernel_limit))


@app.command()
def models(as_json: JsonOption = False) -> None:
    """List the model zoo: our own models and the third-party zoo (library != xlaprobe)."""
    from xlaprobe.sources.models import zoo

    if as_json:
        print(json.dumps([{"name": m.name, "library": m.library, "kind": m.kind,
                           "description": m.description} for m in zoo().values()], indent=2))
        return
    table = Table(caption="third-party workloads need the ecosystem extra (see the README)")
    for column in ("name", "library", "kind", "description"):
        table.add_column(column)
    for m in zoo().values():
        table.add_row(m.name, m.library, m.kind, m.description)
    out.print(table)


@app.command()
def mutants(as_json: JsonOption = False) -> None:
    """List the mutant compilers (planted miscompilations: configuration mutant:<name>)."""
    from xlaprobe.configs.mutants import MUTANTS

    if as_json:
        print(json.dumps([{"name": m.name, "stage": m.stage, "description": m.description,
                           "below_tolerance": m.below_tolerance, "crashes": m.crashes}
                          for m in MUTANTS.values()], indent=2))
        return
    table = Table(caption="use as a configuration: --configs xla,reference,mutant:<name>")
    for column in ("name", "stage", "description"):
        table.add_column(column)
    for m in MUTANTS.values():
        table.add_row(m.name, m.stage, escape(m.description))
    out.print(table)


@app.command()
def configs() -> None:
    """List the configuration kinds and the spec syntax."""
    from xlaprobe.configs.registry import get_kind, kinds

    table = Table(caption=escape("spec: KIND[:VARIANT][[option=value,...]], e.g. xla:O0, "
                                 "xla[xla_cpu_enable_fast_math=true]"))
    table.add_column("kind")
    table.add_column("description")
    for name in kinds():
        table.add_row(name, escape(get_kind(name).description))
    out.print(table)


@app.command()
def findings(finding_id: Annotated[int | None, typer.Argument(
                 help="show this finding with its localization, reduction and release window")] = None,
             db: DbOption = DEFAULT_DB,
             as_json: Annotated[bool, typer.Option("--json")] = False,
             wide: WideOption = False) -> None:
    """List stored findings, newest first, and how many distinct bugs they are; or show one."""
    from xlaprobe.cli.findings import findings_command

    _display(False, wide)
    findings_command(finding_id, db=db, json_output=as_json)


@app.command()
def report(db: DbOption = DEFAULT_DB,
           out: Annotated[Path, typer.Option("--out", "-o", help="HTML file to write")] =
           Path("report.html")) -> None:
    """Write the store as one self-contained HTML page (findings, error maps, localizations,
    reduced repros, release windows, campaigns, tuning searches); opens offline."""
    from xlaprobe.cli.report import report_command

    report_command(db=db, out=out)


# Everything after the script is the script's (its own --out included), with or without "--".
@app.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
def capture(
    command: Annotated[list[str], typer.Argument(
        help="the script and its arguments after --: train.py --steps 5, or -m package.module")],
    out: Annotated[Path, typer.Option("--out", "-o", help="directory for the artifacts")] =
    Path("captured"),
    min_equations: Annotated[int, typer.Option(
        min=1, help="leave out programs with fewer equations (op-by-op dispatch)")] = 2,
) -> None:
    """Run a script and save every program it compiles with jax.jit, with the arrays of its
    first call, as artifacts to check later (deduplicated by structure)."""
    from xlaprobe.cli.capture import capture_command

    raise typer.Exit(capture_command(command, out_dir=out, min_equations=min_equations))


#: Exit code of an internal error of xlaprobe (never 1, which means "findings").
EXIT_INTERNAL_ERROR = 3


def _internal_error(exc: BaseException) -> None:
    """Report a bug of xlaprobe in one line, its traceback in a file, and exit 3."""
    import tempfile
    import traceback
    with tempfile.NamedTemporaryFile("w", prefix="xlaprobe-traceback-", suffix=".txt",
                                     delete=False) as handle:
        traceback.print_exception(exc, file=handle)
    err.print(f"[red]xlaprobe: internal error:[/] {escape(type(exc).__name__)}: "
              f"{escape(str(exc).strip().splitlines()[0] if str(exc).strip() else '')} "
              f"(a bug, not a finding; traceback in {handle.name}: please report it)",
              highlight=False, soft_wrap=True)
    sys.exit(EXIT_INTERNAL_ERROR)


def main() -> None:
    """Entry point: run the app; XlaprobeError -> one line and exit 2; Ctrl-C -> exit 130; any
    other exception (a bug of xlaprobe) -> one line and exit 3."""
    try:
        code = app(standalone_mode=False)
    except typer.Exit as exc:
        code = exc.exit_code
    except XlaprobeError as exc:
        if _SHOW_TRACEBACK["on"]:
            import traceback
            traceback.print_exception(exc, file=sys.stderr)
        else:
            err.print(f"[red]xlaprobe: error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
        err.print("interrupted: results stored so far are kept")
        sys.exit(130)
    except Exception as exc:
        # typer vendors click: match its usage errors and Abort by shape, not by import path.
        if type(exc).__name__ == "Abort":
            err.print("interrupted: results stored so far are kept")
            sys.exit(130)
        if type(exc).__name__ == "NoArgsIsHelpError":  # a bare command: its help was printed
            sys.exit(0)
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):
            err.print(f"[red]xlaprobe: error:[/] {escape(exc.format_message())} (see xlaprobe --help)",
                      highlight=False, soft_wrap=True)
            sys.exit(2)
        _internal_error(exc)
    if code == 130:  # typer turns Ctrl-C into Exit(130)
        err.print("interrupted: results stored so far are kept")
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
