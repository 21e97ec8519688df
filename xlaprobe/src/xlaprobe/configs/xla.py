"""The ``xla`` configuration kind: jit-compile the whole program with XLA and run it.

Specs::

    xla                                   jit with XLA's default options
    xla:O0                                xla_backend_optimization_level=0
    xla:fastmath                          xla_cpu_enable_fast_math=true
    xla[name=value,...]                   any XLA compiler option, e.g. xla[xla_cpu_enable_fast_math=true]
    xla:O0[xla_disable_hlo_passes=algsimp+fusion]
                                          a variant plus options; options override the variant's

Options are checked in the parent process without compiling (see `xlaprobe.configs.xla_options`):
names against XLA's DebugOptions descriptor, values against the field types, HLO pass names
against the shipped pass list. Repeated options join their values with ``+``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from xlaprobe import jaxprs
from xlaprobe.configs import xla_options
from xlaprobe.configs.registry import Configuration
from xlaprobe.errors import InvalidArgument, Unsupported

#: Named presets: variant -> compiler options (value text as in a spec).
VARIANTS: dict[str, tuple[tuple[str, str], ...]] = {
    "O0": (("xla_backend_optimization_level", "0"),),
    "fastmath": (("xla_cpu_enable_fast_math", "true"),),
}


#: Options XLA:CPU reads from the process's ``XLA_FLAGS`` when its backend starts, and ignores
#: per compile (measured on jaxlib 0.12: ``xla_cpu_max_isa=AVX`` as a compile option leaves FMA
#: instructions in the code; in ``XLA_FLAGS`` it removes them).
PROCESS_OPTIONS = frozenset({"xla_cpu_max_isa"})


def compiler_options(config: Configuration) -> dict[str, Any]:
    """The typed ``compile(compiler_options=...)`` dict of an ``xla`` configuration.

    The variant's options come first; the spec's options override them by name.

    >>> compiler_options(Configuration("xla", "O0", (("xla_cpu_enable_fast_math", "true"),)))
    {'xla_backend_optimization_level': 0, 'xla_cpu_enable_fast_math': True}

    Raises:
        InvalidArgument: unknown variant, or an option `xla_options.compiler_options` rejects.
    """
    return xla_options.compiler_options(list(option_texts(config)))


def option_texts(config: Configuration) -> tuple[tuple[str, str], ...]:
    """An ``xla`` configuration's options as spec texts: the variant's, overridden by name by the
    spec's own, sorted by name.

    >>> option_texts(Configuration("xla", "fastmath"))
    (('xla_cpu_enable_fast_math', 'true'),)

    Raises:
        InvalidArgument: not an ``xla`` configuration, or an unknown variant.
    """
    if config.kind != KIND.name:
        raise InvalidArgument(f"configuration '{config}' is not of kind 'xla'")
    if config.variant is not None and config.variant not in VARIANTS:
        raise InvalidArgument(f"unknown variant 'xla:{config.variant}'; known variants: "
                              f"{', '.join('xla:' + v for v in VARIANTS)}")
    merged = dict(VARIANTS.get(config.variant, ()) if config.variant else ())
    merged.update(config.options)
    return tuple(sorted(merged.items()))


def compile_program(config: Configuration, closed_jaxpr: jaxprs.ClosedJaxpr,
                    inputs: Sequence[np.ndarray]) -> jax.stages.Compiled:
    """Lower the jaxpr with `jax.jit` and compile it with the configuration's XLA options.

    Args:
        config: an ``xla`` configuration.
        closed_jaxpr: a closed jaxpr (canonical or not) with one invar per input.
        inputs: one array per invar, of the invar's shape and dtype.

    Returns:
        The compiled executable; ``.as_text()`` gives the optimized HLO, ``.cost_analysis()``
        flops and bytes accessed. Call it on `inputs`.

    Raises:
        InvalidArgument: the configuration is invalid (see `compiler_options`).
        Unsupported: the program has a ``shard_map`` over more devices than this process has.
        jax.errors.JaxRuntimeError: XLA rejected an option value or failed to compile.
    """
    options = compiler_options(config)
    needed = shard_map_devices(closed_jaxpr)
    if needed > jax.device_count():
        raise Unsupported(f"the program's shard_map runs on a mesh of {needed} devices and this "
                          f"process has {jax.device_count()}: check it with spmd[mesh=...]")
    return jax.jit(scoped_function(closed_jaxpr)).lower(*inputs).compile(compiler_options=options)


def shard_map_devices(closed_jaxpr: jaxprs.ClosedJaxpr) -> int:
    """The most devices a top-level ``shard_map`` of the program runs on (1 without one)."""
    return max((int(np.prod(e.params["mesh"].axis_sizes)) for e in closed_jaxpr.jaxpr.eqns
                if e.primitive.name == "shard_map"), default=1)


#: Prefix of the named scope each top-level equation is traced in (``eqn12``).
EQUATION_SCOPE = "eqn"


def scoped_function(closed_jaxpr: jaxprs.ClosedJaxpr) -> Any:
    """A function evaluating `closed_jaxpr` with each top-level equation k in
    ``jax.named_scope(f"eqn{k}")``.

    The scopes only add ``op_name`` metadata (``jit(program)/eqn12/...``), so the compiled code is
    the same, while every HLO instruction names the jaxpr equation it came from exactly
    (``op_name`` alone names only the primitive).
    """
    jaxpr, consts = closed_jaxpr.jaxpr, closed_jaxpr.consts
    index = {id(eqn): k for k, eqn in enumerate(jaxpr.eqns)}

    def apply(eqn: Any, invals: list[Any]) -> Any:
        with jax.named_scope(f"{EQUATION_SCOPE}{index[id(eqn)]}"):
            return jaxprs.bind_eqn(eqn, invals)

    def program(*args: Any) -> list[Any]:
        return jaxprs.eval_jaxpr_with(jaxpr, consts, args, apply)

    return program


class XlaKind:
    """`ConfigKind` for whole-program XLA compilation (see module docstring)."""

    name = "xla"
    description = "jit-compile the program with XLA (variants O0, fastmath; any [option=value])"

    def validate(self, config: Configuration) -> None:
        """Check variant and options without compiling (safe in the parent process).

        Raises:
            InvalidArgument: unknown variant, unknown option name (with close matches), a value of
                the wrong type, an unknown HLO pass name, or options XLA cannot combine.
        """
        compiler_options(config)

    def compiler_options(self, config: Configuration) -> dict[str, Any]:
        """`compiler_options` of `config` (a reproducer compiles with them)."""
        return compiler_options(config)

    def isolation_group(self, config: Configuration) -> str:
        """``xla`` configurations share workers (options apply per compile), except those with
        an option XLA:CPU reads once per process (`PROCESS_OPTIONS`): their workers start with
        it in ``XLA_FLAGS`` (``xla-flags:--xla_cpu_max_isa=AVX``)."""
        flags = [f"--{name}={value}" for name, value in option_texts(config)
                 if name in PROCESS_OPTIONS]
        return "xla-flags:" + " ".join(flags) if flags else "default"

    def run(self, config: Configuration, jaxpr: jaxprs.ClosedJaxpr,
            inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Compile with `compile_program` and run once.

        Returns:
            The flat outputs as NumPy arrays, one per jaxpr outvar.

        Raises:
            InvalidArgument, jax.errors.JaxRuntimeError: as `compile_program`.
        """
        compiled = compile_program(config, jaxpr, inputs)
        return [np.asarray(out) for out in compiled(*inputs)]


KIND = XlaKind()
