"""Jaxpr segments: a contiguous run of top-level equations compiled alone, as its own Program.

A *segment* ``[start, stop)`` is a range of positions in a list of top-level equation indices (the
*cone*: the equations the failing outputs depend on, in program order). Its Program reads the
segment's free variables as inputs, holding their reference values (float64 values rounded to the
variable's dtype; program inputs keep their exact values; closed-over constants stay constants), and
returns every variable it defines that a later equation of the cone reads or that is a failing
program output. Compiled under the faulty configuration and judged against the reference of the
same Program, a segment fails exactly when the equations in it are miscompiled (with the fusion
context the segment gives them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np
from jax import dtypes as jdtypes
from xlaprobe import jaxcompat

from xlaprobe import jaxprs
from xlaprobe.errors import InvalidArgument
from xlaprobe.program import Program, Provenance


def _is_var(atom: Any) -> bool:
    return isinstance(atom, jaxcompat.Var) and not isinstance(atom, jaxcompat.DropVar)


def cone_of_influence(jaxpr: jaxprs.Jaxpr, outputs: Sequence[int]) -> list[int]:
    """Indices of the top-level equations that the given outputs depend on, in program order.

    Args:
        jaxpr: an open jaxpr.
        outputs: positions in ``jaxpr.outvars``.

    Returns:
        Sorted equation indices (an output that is an input or a literal adds none).

    >>> import jax, jax.numpy as jnp
    >>> closed = jax.make_jaxpr(lambda x, y: (jnp.sin(x), jnp.cos(y) * 2.0))(1.0, 2.0)
    >>> cone_of_influence(closed.jaxpr, [1])
    [1, 2]
    """
    producer = {v: k for k, eqn in enumerate(jaxpr.eqns) for v in eqn.outvars if _is_var(v)}
    needed: set[int] = set()
    stack = [jaxpr.outvars[i] for i in outputs]
    while stack:
        atom = stack.pop()
        if not _is_var(atom) or atom not in producer:
            continue
        k = producer[atom]
        if k in needed:
            continue
        needed.add(k)
        stack.extend(jaxpr.eqns[k].invars)
    return sorted(needed)


def _as_dtype(value: np.ndarray, aval: Any) -> np.ndarray:
    """A recorded reference value (float64 for floats) as an input of the variable's dtype."""
    dtype = np.dtype(aval.dtype)
    value = np.asarray(value)
    if value.dtype != dtype:
        if dtype == np.dtype(ml_dtypes.bfloat16) or np.issubdtype(dtype, np.floating) \
                or np.issubdtype(dtype, np.complexfloating):
            value = value.astype(dtype)
        else:
            value = value.astype(dtype, casting="unsafe")
    return np.ascontiguousarray(value).reshape(aval.shape)


@dataclasses.dataclass(frozen=True)
class SegmentProgram:
    """One segment as a runnable Program.

    Attributes:
        start: first position in the cone (inclusive).
        stop: last position in the cone (exclusive).
        equations: the top-level equation indices of the segment, in order.
        program: the Program (empty `outputs` means the segment has nothing to judge).
        outputs: per output of `program`, the top-level equation index that defines it.
    """

    start: int
    stop: int
    equations: tuple[int, ...]
    program: Program
    outputs: tuple[int, ...]


class Segmenter:
    """Cuts segments of a Program's cone into Programs of their own.

    Args:
        program: the failing Program.
        cone: top-level equation indices to cut from, in program order (`cone_of_influence`).
        failing_outputs: positions in the program's outvars that must stay outputs.
        values: the reference value of every variable a segment may read that is defined by a
            cone equation (`recording_program` + the reference run gives them).

    Raises:
        InvalidArgument: `cone` is not in program order.
    """

    def __init__(self, program: Program, cone: Sequence[int], failing_outputs: Sequence[int],
                 values: dict[Any, np.ndarray]):
        if list(cone) != sorted(set(cone)):
            raise InvalidArgument("the equations of a cone must be distinct and in program order")
        self.program = program
        self.cone = tuple(cone)
        self.values = values
        jaxpr = program.jaxpr.jaxpr
        self._const = {v: c for v, c in zip(jaxpr.constvars, program.jaxpr.consts)}
        self._input = {v: x for v, x in zip(jaxpr.invars, program.inputs)}
        self._producer = {v: k for k, eqn in enumerate(jaxpr.eqns) for v in eqn.outvars
                          if _is_var(v)}
        # last cone position that reads a variable; failing outputs are read "at the end".
        self._last_use: dict[Any, float] = {}
        for p, k in enumerate(self.cone):
            for atom in jaxpr.eqns[k].invars:
                if _is_var(atom):
                    self._last_use[atom] = max(self._last_use.get(atom, -1), p)
        for i in failing_outputs:
            atom = jaxpr.outvars[i]
            if _is_var(atom):
                self._last_use[atom] = float("inf")

    @property
    def size(self) -> int:
        """Number of equations in the cone."""
        return len(self.cone)

    def equation(self, position: int) -> jaxprs.JaxprEqn:
        """The equation at a cone position."""
        return self.program.jaxpr.jaxpr.eqns[self.cone[position]]

    def segment(self, start: int, stop: int, *, expose_all: bool = False,
                sinks: bool = False) -> SegmentProgram:
        """The Program of cone positions ``[start, stop)``.

        Args:
            start, stop: ``0 <= start < stop <= size``.
            expose_all: also return every variable the segment defines (its intermediates), so
                the first wrong value names its equation.
            sinks: also return every variable the segment defines that no equation of the
                segment reads (what would otherwise be computed for nothing: reduction keeps a
                cut-off consumer's operands observable this way); PRNG keys excepted.

        Raises:
            InvalidArgument: an empty or out-of-range segment, or a free variable without a
                recorded value (a PRNG key array, which cannot be an input).
        """
        if not 0 <= start < stop <= self.size:
            raise InvalidArgument(f"segment [{start}, {stop}) outside the cone of {self.size} "
                                  "equations")
        jaxpr = self.program.jaxpr.jaxpr
        indices = self.cone[start:stop]
        eqns = [jaxpr.eqns[k] for k in indices]
        defined: list[Any] = []
        defined_set: set[Any] = set()
        free: list[Any] = []
        free_set: set[Any] = set()
        for eqn in eqns:
            for atom in eqn.invars:
                if _is_var(atom) and atom not in defined_set and atom not in free_set:
                    free.append(atom)
                    free_set.add(atom)
            for var in eqn.outvars:
                if _is_var(var):
                    defined.append(var)
                    defined_set.add(var)
        constvars, consts, invars, inputs = [], [], [], []
        for var in free:
            if var in self._const:
                constvars.append(var)
                consts.append(self._const[var])
            elif var in self._input:
                invars.append(var)
                inputs.append(np.asarray(self._input[var]))
            else:
                if var not in self.values or jdtypes.issubdtype(var.aval.dtype, jdtypes.prng_key):
                    raise InvalidArgument(
                        f"segment [{start}, {stop}) reads {var} ({var.aval}) of equation "
                        f"{self._producer.get(var, '?')}, which has no reference value to feed it")
                invars.append(var)
                inputs.append(_as_dtype(self.values[var], var.aval))
        read = {a for eqn in eqns for a in eqn.invars if _is_var(a)} if sinks else set()
        outvars = [v for v in defined
                   if expose_all or self._last_use.get(v, -1) >= stop
                   or (sinks and v not in read
                       and not jdtypes.issubdtype(v.aval.dtype, jdtypes.prng_key))]
        closed = jaxcompat.new_closed_jaxpr(constvars, invars, outvars, eqns, consts,
                                            f"segment [{start}, {stop})")
        defining = tuple(self._producer[v] for v in outvars)
        names = tuple(f"eqn{k}:{v}" for k, v in zip(defining, outvars))
        base = self.program.provenance
        provenance = Provenance("segment", f"{base.name}[eqn{indices[0]}..eqn{indices[-1]}]",
                                base.seed, base.input_spec)
        program = Program(closed, tuple(inputs), provenance, names, self.program.tolerance)
        return SegmentProgram(start, stop, tuple(indices), program, defining)


    def exposed_at(self, cut: int) -> list[Any]:
        """Variables defined before cone position `cut` that are read from `cut` on (or are
        failing outputs): everything the rest of the program gets from the first `cut` equations.
        """
        jaxpr = self.program.jaxpr.jaxpr
        return [v for k in self.cone[:cut] for v in jaxpr.eqns[k].outvars
                if _is_var(v) and self._last_use.get(v, -1) >= cut]

    def probe(self, cut: int) -> tuple[Program, list[int], list[Any]]:
        """The whole program, also returning `exposed_at(cut)`: compiled under the faulty
        configuration, it shows whether a value computed before the cut is already wrong, in the
        context of the whole program (as XLA compiles it, plus a few outputs).

        Returns:
            (the Program, positions of the exposed variables among its outputs, the variables).
        """
        jaxpr = self.program.jaxpr.jaxpr
        exposed = self.exposed_at(cut)
        outvars = list(jaxpr.outvars)
        positions = []
        for var in exposed:
            if var in outvars:
                positions.append(outvars.index(var))
            else:
                positions.append(len(outvars))
                outvars.append(var)
        closed = jaxcompat.new_closed_jaxpr(jaxpr.constvars, jaxpr.invars, outvars, jaxpr.eqns,
                                            self.program.jaxpr.consts,
                                            f"cut at cone position {cut}", jaxpr.effects)
        names = tuple(self.program.output_names) + tuple(
            f"eqn{self._producer[v]}:{v}" for v in outvars[len(jaxpr.outvars):])
        base = self.program.provenance
        provenance = Provenance("segment", f"{base.name}[probe before cone position {cut}]",
                                base.seed, base.input_spec)
        program = Program(closed, self.program.inputs, provenance, names, self.program.tolerance)
        return program, positions, exposed

    def producer(self, var: Any) -> int:
        """The top-level equation index that defines `var`."""
        return self._producer[var]


def recording_program(program: Program, cone: Sequence[int]) -> tuple[Program, list[Any]]:
    """The program with every variable the cone's equations define as an output.

    Running it under ``reference`` records the float64 value of every intermediate a segment may
    read, in one run.

    Returns:
        (the Program, the recorded variables in output order).
    """
    jaxpr = program.jaxpr.jaxpr
    recorded = [v for k in cone for v in jaxpr.eqns[k].outvars if _is_var(v)
                and not jdtypes.issubdtype(v.aval.dtype, jdtypes.prng_key)]
    closed = jaxcompat.new_closed_jaxpr(jaxpr.constvars, jaxpr.invars, recorded, jaxpr.eqns,
                                        program.jaxpr.consts, "recording", jaxpr.effects)
    base = program.provenance
    names = tuple(str(v) for v in recorded)
    return Program(closed, program.inputs, Provenance("segment", f"{base.name}[recording]",
                                                      base.seed, base.input_spec),
                   names, program.tolerance), recorded
