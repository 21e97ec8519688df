"""The ``eager`` configuration kind: true op-by-op execution, no fusion.

Each primitive is bound on its own outside `jax.jit`, so JAX dispatches it as its own tiny XLA
computation: XLA never sees two equations together and cannot fuse, reassociate or contract across
them. `jax.core.eval_jaxpr` is not like this: it binds ``scan``, ``while`` and ``cond`` whole, so XLA
compiles (and fuses) their bodies; `jax.disable_jit` is no dependable substitute either (DESIGN.md).
Here control flow is interpreted in Python instead and call-like wrappers are entered, so that every
equation at every depth runs alone, and `evaluate` can report each equation's outputs to a
``record`` callback (localization uses that).

Equation paths, as passed to ``record``, name an equation by its position at each depth::

    eqn4                        equation 4 of the top-level jaxpr
    eqn4/jit/eqn0               equation 0 inside the jaxpr called by eqn4 (jit, custom_jvp_call,
                                custom_vjp_call, remat2, composite, ...: the primitive's name;
                                `primitives.is_call_like` says which primitives are calls)
    eqn7/scan[2]/eqn1           equation 1 of the scan body, iteration 2 (iterations count 0..length-1
                                in execution order; with reverse=True iteration 0 reads xs[length-1])
    eqn5/while[3]/cond/eqn0     equation 0 of the while condition, its 4th evaluation
    eqn5/while[3]/body/eqn2     equation 2 of the while body, 4th iteration
    eqn9/cond[1]/eqn0           equation 0 of branch 1 of a cond

Nested equations are recorded before the equation that contains them (in execution order).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np

from xlaprobe import jaxprs, primitives
from xlaprobe.configs.registry import Configuration
from xlaprobe.errors import InvalidArgument
from xlaprobe.lax_rules.control import scan_layout

#: ``record(path, eqn, outputs)``: called after each equation with its outputs as NumPy arrays.
Recorder = Callable[[str, jaxprs.JaxprEqn, list[np.ndarray]], None]


def evaluate(closed_jaxpr: jaxprs.ClosedJaxpr, inputs: Sequence[Any], *,
             record: Recorder | None = None) -> list[np.ndarray]:
    """Evaluate a closed jaxpr op by op (see module docstring).

    Args:
        closed_jaxpr: any closed jaxpr (canonical or straight from `jax.make_jaxpr`).
        inputs: one array per invar, of the invar's shape and dtype.
        record: optional callback ``(path, eqn, outputs)`` run after every equation at every
            depth, including each iteration of loop bodies; `outputs` has one NumPy array per outvar.

    Returns:
        The flat outputs as NumPy arrays, one per outvar.

    Raises:
        Whatever binding a primitive raises (e.g. TypeError for a malformed equation).
    """
    args = [jnp.asarray(x) for x in inputs]
    outs = _eval(closed_jaxpr.jaxpr, closed_jaxpr.consts, args, "", record)
    return [np.asarray(out) for out in outs]


def _eval(jaxpr: jaxprs.Jaxpr, consts: Sequence[Any], args: Sequence[Any], prefix: str,
          record: Recorder | None) -> list[Any]:
    index = {id(eqn): k for k, eqn in enumerate(jaxpr.eqns)}

    def apply(eqn: jaxprs.JaxprEqn, invals: list[Any]) -> list[Any]:
        path = f"{prefix}eqn{index[id(eqn)]}"
        outs = _apply_eqn(eqn, invals, path, record)
        if record is not None:
            record(path, eqn, [np.asarray(out) for out in outs])
        return outs

    return jaxprs.eval_jaxpr_with(jaxpr, consts, args, apply)


def _eval_closed(closed: jaxprs.ClosedJaxpr, args: Sequence[Any], prefix: str,
                 record: Recorder | None) -> list[Any]:
    return _eval(closed.jaxpr, closed.consts, args, prefix, record)


def _apply_eqn(eqn: jaxprs.JaxprEqn, invals: list[Any], path: str,
               record: Recorder | None) -> list[Any]:
    """The outputs (one per outvar) of one equation, with nested jaxprs interpreted."""
    name = eqn.primitive.name
    rule = _CONTROL_FLOW.get(name)
    if rule is not None:
        return rule(eqn, invals, path, record)
    if name in _PLACEMENT_ONLY:
        # Sharding annotations say where values live, not what they are: on one device (an
        # eager run) they are the identity, as in the reference.
        return list(invals)
    if primitives.is_call_like(eqn):
        # Call-like wrappers only evaluate their inner jaxpr: enter it, as the reference does.
        return _eval_closed(primitives.call_jaxpr(eqn), invals, f"{path}/{name}/", record)
    # Outside any trace, bind dispatches the primitive as its own XLA computation.
    outs = eqn.primitive.bind(*invals, **eqn.params)
    return list(outs) if eqn.primitive.multiple_results else [outs]


#: Primitives that only place values on devices (identity on the one device eager runs on).
_PLACEMENT_ONLY = frozenset({"sharding_constraint", "reshard"})


def _while(eqn: jaxprs.JaxprEqn, invals: list[Any], path: str, record: Recorder | None) -> list[Any]:
    params = eqn.params
    cond_n, body_n = params["cond_nconsts"], params["body_nconsts"]
    cond_consts, body_consts = invals[:cond_n], invals[cond_n:cond_n + body_n]
    carry = list(invals[cond_n + body_n:])
    iteration = 0
    while True:
        (keep_going,) = _eval_closed(params["cond_jaxpr"], [*cond_consts, *carry],
                                     f"{path}/while[{iteration}]/cond/", record)
        # A batched predicate (vmap of a while loop) means "loop while any", as JAX's lowering of it.
        if not bool(jnp.any(keep_going)):
            return carry
        new = _eval_closed(params["body_jaxpr"], [*body_consts, *carry],
                           f"{path}/while[{iteration}]/body/", record)
        carry = new if jnp.ndim(keep_going) == 0 else [
            _select_leading(keep_going, n, c) for n, c in zip(new, carry)]
        iteration += 1


def _select_leading(pred: Any, new: Any, old: Any) -> Any:
    """``new`` where ``pred`` holds, else ``old``: pred's shape is a prefix of the carry's.

    Source: JAX's ``_while_lowering`` (``_pred_bcast_select_hlo``): under a batched predicate each
    batch element advances only while its own predicate holds.
    """
    mask = jnp.reshape(pred, jnp.shape(pred) + (1,) * (jnp.ndim(new) - jnp.ndim(pred)))
    return jnp.where(mask, new, old)


def _scan(eqn: jaxprs.JaxprEqn, invals: list[Any], path: str, record: Recorder | None) -> list[Any]:
    params = eqn.params
    (num_consts, num_carry), length = scan_layout(params), params["length"]
    consts = invals[:num_consts]
    carry = list(invals[num_consts:num_consts + num_carry])
    xs = invals[num_consts + num_carry:]
    ys_per_step: list[list[Any]] = [[] for _ in range(length)]
    order = range(length - 1, -1, -1) if params["reverse"] else range(length)
    for iteration, i in enumerate(order):
        outs = _eval_closed(params["jaxpr"], [*consts, *carry, *(x[i] for x in xs)],
                            f"{path}/scan[{iteration}]/", record)
        carry, ys_per_step[i] = outs[:num_carry], outs[num_carry:]
    ys = []
    for j, var in enumerate(eqn.outvars[num_carry:]):
        if length:
            ys.append(jnp.stack([step[j] for step in ys_per_step]))
        else:
            ys.append(jnp.zeros(var.aval.shape, var.aval.dtype))
    return [*carry, *ys]


def _cond(eqn: jaxprs.JaxprEqn, invals: list[Any], path: str, record: Recorder | None) -> list[Any]:
    branches = eqn.params["branches"]
    # lax.cond clamps the index into range (out-of-range selects the first or last branch).
    index = int(np.clip(int(invals[0]), 0, len(branches) - 1))
    return _eval_closed(branches[index], invals[1:], f"{path}/cond[{index}]/", record)


_CONTROL_FLOW: dict[str, Callable[[jaxprs.JaxprEqn, list[Any], str, Recorder | None], list[Any]]] = {
    "while": _while,
    "scan": _scan,
    "cond": _cond,
}


class EagerKind:
    """`ConfigKind` for op-by-op execution (see module docstring)."""

    name = "eager"
    #: xlaprobe's own interpreter: a Python exception it raises is a tool error, not a finding.
    interpreter = True
    description = "op by op: each primitive is its own XLA computation, control flow in Python (no fusion)"

    def validate(self, config: Configuration) -> None:
        """Raises:
            InvalidArgument: a variant or options were given; ``eager`` takes neither.
        """
        if config.variant is not None or config.options:
            raise InvalidArgument(f"configuration '{config}': eager takes no variant or options; "
                                  "use plain 'eager' (for XLA options use xla[...])")

    def isolation_group(self, config: Configuration) -> str:
        """Eager changes no process state: ``"default"``."""
        return "default"

    def run(self, config: Configuration, jaxpr: jaxprs.ClosedJaxpr,
            inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Evaluate op by op with `evaluate`; returns the flat outputs as NumPy arrays."""
        self.validate(config)
        return evaluate(jaxpr, inputs)


KIND = EagerKind()
