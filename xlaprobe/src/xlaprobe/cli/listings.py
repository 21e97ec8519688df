"""``xlaprobe models``, ``mutants`` and ``configs``: the registries a user picks targets and
configurations from, as tables (or JSON)."""

from __future__ import annotations

import json

from rich.markup import escape
from rich.table import Table

from xlaprobe.cli.app import app
from xlaprobe.cli.console import out
from xlaprobe.cli.options import JsonOption


@app.command()
def models(as_json: JsonOption = False) -> None:
    """List the model zoo: our own models and the third-party zoo (library != xlaprobe)."""
    from xlaprobe.sources.models import zoo  # imports jax: not for `xlaprobe --help`

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
    from xlaprobe.configs.mutants import MUTANTS  # imports numpy: not for `xlaprobe --help`

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
    from xlaprobe.configs.registry import get_kind, kinds  # imports numpy: not for --help

    table = Table(caption=escape("spec: KIND[:VARIANT][[option=value,...]], e.g. xla:O0, "
                                 "xla[xla_cpu_enable_fast_math=true]"))
    table.add_column("kind")
    table.add_column("description")
    for name in kinds():
        table.add_row(name, escape(get_kind(name).description))
    out.print(table)
