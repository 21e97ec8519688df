"""Program: a canonical closed jaxpr, its concrete inputs and where it came from.

A Program is the unit every configuration runs and every finding points to. Its artifact (see
`xlaprobe.artifact`) reruns without the code that made it.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from xlaprobe import jaxcompat, jaxprs
from xlaprobe.errors import InvalidArgument, user_error


def enable_x64_for(arrays: Sequence[np.ndarray]) -> None:
    """Turn on `jax_enable_x64` when any array is 64-bit, so JAX does not silently narrow it.

    JAX traces float64/int64/uint64 inputs as 32-bit unless x64 is on; a differential check of
    a float64 program must run it in float64. Worker processes copy the setting per task.
    """
    if any(np.asarray(a).dtype.itemsize == 8 and np.asarray(a).dtype.kind in "fiuc"
           for a in arrays) and not jax.config.jax_enable_x64:
        jax.config.update("jax_enable_x64", True)


@dataclasses.dataclass(frozen=True, slots=True)
class Provenance:
    """Where a Program came from.

    Attributes:
        source: ``"model"`` (zoo), ``"user"`` (FILE:FN or module:fn), ``"case"`` (a case module),
            ``"artifact"``, ``"fuzz"``.
        name: the model name, ``path/to/file.py:fn``, ``package.module:fn`` or the case path.
        seed: seed of random weights and inputs, or ``None`` where the inputs are fixed.
        input_spec: the input spec string (``f32[8,128],i32[8]``) where one was given, else ``""``.
    """

    source: str
    name: str
    seed: int | None = None
    input_spec: str = ""

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict; `from_json` inverts it."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Provenance:
        """Inverse of `to_json`."""
        return cls(**data)


@dataclasses.dataclass(frozen=True, slots=True)
class Tolerance:
    """Per-dtype tolerance overrides for the oracle (absent fields keep the oracle's defaults).

    Attributes:
        atol: absolute bound per dtype name, e.g. ``{"float32": 1e-5}`` (units of the value).
        rtol: relative bound per dtype name, e.g. ``{"float32": 1e-4}`` (dimensionless).
        reason: why the defaults are overridden (shown in reports).
    """

    atol: tuple[tuple[str, float], ...] = ()
    rtol: tuple[tuple[str, float], ...] = ()
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict; `from_json` inverts it."""
        return {"atol": dict(self.atol), "rtol": dict(self.rtol), "reason": self.reason}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Tolerance:
        """Inverse of `to_json`.

        Raises:
            TypeError: `data` is not a dict of the shape `to_json` writes.
        """
        if not isinstance(data, dict):
            raise TypeError(f"tolerance must be an object, not {type(data).__name__}")
        tolerance = cls(tuple(sorted(dict(data.get("atol", {})).items())),
                        tuple(sorted(dict(data.get("rtol", {})).items())),
                        str(data.get("reason", "")))
        tolerance.validate()
        return tolerance

    def validate(self) -> None:
        """Raise TypeError unless every bound is a non-negative number keyed by a dtype name."""
        for kind, bounds in (("atol", self.atol), ("rtol", self.rtol)):
            for dtype, bound in bounds:
                if not isinstance(dtype, str) or isinstance(bound, bool) or \
                        not isinstance(bound, (int, float)) or not bound >= 0:
                    raise TypeError(f"tolerance {kind} {dtype!r}: {bound!r} is not a "
                                    "non-negative number")


@dataclasses.dataclass(frozen=True, eq=False)
class Program:
    """A closed jaxpr in canonical form (see `xlaprobe.jaxprs`) with concrete inputs.

    Attributes:
        jaxpr: canonical `ClosedJaxpr`; its invars are the flattened inputs.
        inputs: one NumPy array per jaxpr invar, of exactly the invar's shape and dtype.
        provenance: where the program came from.
        output_names: one readable name per flat output (pytree key paths, e.g. ``"[0]['loss']"``).
        tolerance: oracle overrides for this program.
        expected: known right outputs (flat), e.g. from a case's ``expected()``, or ``None``.
        origin: the artifact directory it was loaded from (`xlaprobe.artifact.load_artifact`),
            else "": a check of it never rewrites that directory, its input.
    """

    jaxpr: jaxprs.ClosedJaxpr
    inputs: tuple[np.ndarray, ...]
    provenance: Provenance
    output_names: tuple[str, ...]
    tolerance: Tolerance = Tolerance()
    expected: tuple[np.ndarray, ...] | None = None
    origin: str = ""

    @classmethod
    def from_function(cls, fn: Callable[..., Any], args: Sequence[Any], provenance: Provenance, *,
                      tolerance: Tolerance = Tolerance(),
                      expected: Any = None) -> Program:
        """Trace `fn(*args)` to a canonical jaxpr over the flattened leaves of `args`.

        Args:
            fn: a JAX-traceable function of pytrees of arrays.
            args: concrete arguments (pytrees of arrays or scalars).
            provenance: recorded as is.
            tolerance: oracle overrides.
            expected: pytree of known right outputs with the structure of ``fn(*args)``, or None.

        Raises:
            InvalidArgument: `fn` does not trace (the message carries JAX's reason).
        """
        leaves, treedef = jax.tree_util.tree_flatten(tuple(args))
        inputs = tuple(np.asarray(leaf) for leaf in leaves)
        enable_x64_for(inputs)

        def flat_fn(*flat: Any) -> list[Any]:
            return jax.tree_util.tree_leaves(fn(*jax.tree_util.tree_unflatten(treedef, flat)))

        try:
            closed = jax.make_jaxpr(flat_fn)(*inputs)
            out_shape = jax.eval_shape(lambda *a: fn(*jax.tree_util.tree_unflatten(treedef, a)), *inputs)
        except SystemExit as exc:  # the function, not the user, asked to stop
            raise InvalidArgument(f"cannot trace {provenance.name}: it called sys.exit"
                                  f"({exc.code!r}) while being traced") from exc
        except Exception as exc:  # JAX raises many types for untraceable code
            raise InvalidArgument(user_error(exc, f"tracing {provenance.name}")) from exc
        paths = jax.tree_util.tree_flatten_with_path(out_shape)[0]
        names = tuple(jax.tree_util.keystr(path) or "out" for path, _ in paths)
        flat_expected = None
        if expected is not None:
            flat_expected = tuple(np.asarray(x) for x in jax.tree_util.tree_leaves(expected))
        return cls(jaxprs.canonicalize(closed), inputs, provenance, names, tolerance, flat_expected)

    @property
    def fingerprint(self) -> str:
        """SHA-256 (hex, 16 chars) of the jaxpr text and the input bytes: equal programs, equal keys."""
        digest = hashlib.sha256(str(self.jaxpr).encode())
        for x in self.inputs:
            digest.update(str((x.dtype, x.shape)).encode())
            digest.update(np.ascontiguousarray(x).tobytes())
        return digest.hexdigest()[:16]

    @property
    def num_equations(self) -> int:
        """Equation count, nested jaxprs included."""
        return jaxprs.count_equations(self.jaxpr)


def export_module(program: Program) -> bytes:
    """The program serialized with `jax.export` (StableHLO plus calling convention).

    Raises:
        Exception: whatever ``jax.export`` raises on a program it cannot serialize (host
            callbacks, say).
    """
    closed = program.jaxpr

    def fn(*args: Any) -> list[Any]:
        return jaxcompat.jaxpr_as_fun(closed)(*args)

    specs = [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in program.inputs]
    return bytes(jax.export.export(jax.jit(fn))(*specs).serialize())
