"""Capture of real runs: every program a script compiles with ``jax.jit``, with the arrays it was
first called with, saved as artifacts to check, localize, reduce and bisect later.

    with xlaprobe.capture("captured") as captured:
        train(steps=5)
    print(captured.table())              # one row per distinct program, with its call count

    xlaprobe capture --out captured -- train.py --steps 5

Programs are deduplicated by structure (the canonical jaxpr's text: the same train step called
with new batches is one program, saved with its first call's arguments). Single-primitive
programs, and op-by-op (eager) execution's dispatch of one primitive (a jit named after the
primitive that binds only it), are left out (`MIN_EQUATIONS`); a user's function that only
shares a primitive's name is kept. A program
that cannot be saved (a host callback, say) is counted with the reason; nothing here ever changes
what the script computes. Typed PRNG keys (``jax.random.key``) have no NumPy form: a program that
takes or returns them is saved over their key data instead (`keys_as_data`), with the
``random_wrap`` / ``random_unwrap`` equations that convert, so it computes the same values.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from xlaprobe.errors import InvalidArgument

#: Programs with fewer equations (nested ones included) are not captured: op-by-op dispatch.
MIN_EQUATIONS = 2
#: Equations op-by-op dispatch puts around the primitive it runs (operand conversions).
_DISPATCH_CONVERSIONS = frozenset({"convert_element_type", "broadcast_in_dim", "random_wrap",
                                   "random_unwrap"})


@dataclasses.dataclass
class Captured:
    """One distinct program a run compiled.

    Attributes:
        name: the jitted function's name.
        key: its structural key (hex, 16 chars: SHA-256 of the canonical jaxpr's text).
        equations: equations, nested jaxprs included.
        inputs: flat input arrays (count).
        calls: compiling calls seen with this structure (first included).
        artifact: the artifact directory, or "" when it could not be saved.
        error: why it could not be saved ("" when it was).
    """

    name: str
    key: str
    equations: int
    inputs: int
    calls: int = 1
    artifact: str = ""
    error: str = ""


def keys_as_data(closed: Any, args: tuple[Any, ...]) -> tuple[Any, tuple[Any, ...]]:
    """`closed` over raw key data where its inputs or outputs are typed PRNG keys.

    A typed key array (dtype ``key<impl>``, shape S) has no NumPy form; its key data
    (``jax.random.key_data``: uint32, shape S + the implementation's key shape, e.g. (2,) for
    threefry2x32) does. Each key input becomes its key data followed by ``random_wrap`` with the
    key's implementation; each key output is followed by ``random_unwrap``. Other inputs and
    outputs, and every value computed, are unchanged.

    Args:
        closed: a closed jaxpr with one invar per argument.
        args: the arguments of its first call (arrays, keys or Python scalars).

    Returns:
        (the closed jaxpr, the arguments with keys replaced by their key data); `closed` and
        `args` themselves when no input or output is a key.

    Raises:
        Exception: whatever JAX raises tracing the wrapped function (a key of an implementation
            it cannot wrap).
    """
    # jax loads when a capture starts: `import xlaprobe` and `xlaprobe --help` stay light.
    import jax

    from xlaprobe import jaxcompat

    def is_key(aval: Any) -> bool:
        return jax.dtypes.issubdtype(getattr(aval, "dtype", None), jax.dtypes.prng_key)

    keys = {i: jax.random.key_impl(a) for i, (a, v) in enumerate(zip(args, closed.jaxpr.invars))
            if is_key(v.aval)}
    if not keys and not any(is_key(v.aval) for v in closed.jaxpr.outvars):
        return closed, args
    function = jaxcompat.jaxpr_as_fun(closed)

    def over_data(*flat: Any) -> list[Any]:
        outputs = function(*[jax.random.wrap_key_data(x, impl=keys[i]) if i in keys else x
                             for i, x in enumerate(flat)])
        return [jax.random.key_data(o) if is_key(o.aval if hasattr(o, "aval") else o)
                else o for o in outputs]

    data = tuple(jax.random.key_data(a) if i in keys else a for i, a in enumerate(args))
    return jax.make_jaxpr(over_data)(*data), data


@dataclasses.dataclass
class Capture:
    """What a `capture` block saw (filled while it runs).

    Attributes:
        directory: where artifacts go (``<directory>/<name>-<key>/``).
        programs: structural key -> `Captured`, in first-seen order.
        skipped: compiling calls left out as op-by-op dispatch (fewer than `MIN_EQUATIONS`).
    """

    directory: Path
    min_equations: int = MIN_EQUATIONS
    #: Names op-by-op dispatch gives its one-primitive jits (the primitives jax defines).
    dispatch_names: frozenset[str] = frozenset()
    programs: dict[str, Captured] = dataclasses.field(default_factory=dict)
    skipped: int = 0

    def record(self, jaxpr: Any, args: tuple[Any, ...], name: str) -> None:
        """Save the program `jaxpr` called with `args` unless its structure was seen (then
        count the call). Never raises: a program that cannot be saved keeps its reason."""
        # These import jax: loaded at the first capture, as above.
        from xlaprobe import jaxcompat, jaxprs
        from xlaprobe.artifact import save_artifact
        from xlaprobe.program import Program, Provenance

        try:
            closed, args = keys_as_data(jaxcompat.as_closed(jaxpr), args)
            closed = jaxprs.canonicalize(closed)
            count = jaxprs.count_equations(closed)
        except Exception as exc:  # a jaxpr xlaprobe cannot canonicalize: not its business
            self.programs.setdefault(f"error:{name}", Captured(name, "", 0, len(args), 0, "",
                                                                f"{type(exc).__name__}: {exc}"))
            return
        if count < self.min_equations or self._dispatched(closed, name):
            self.skipped += 1
            return
        key = hashlib.sha256(str(closed).encode()).hexdigest()[:16]
        seen = self.programs.get(key)
        if seen is not None:
            seen.calls += 1
            return
        entry = Captured(name, key, count, len(args))
        self.programs[key] = entry
        try:
            # Python scalars come as ints and floats: give them the invar's (weak) dtype.
            inputs = tuple(np.asarray(a, dtype=v.aval.dtype)
                           for a, v in zip(args, closed.jaxpr.invars))
            program = Program(closed, inputs, Provenance("capture", name),
                              tuple(f"[{i}]" for i in range(len(closed.jaxpr.outvars))))
            safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:60]
            entry.artifact = str(save_artifact(program, self.directory / f"{safe}-{key}",
                                               note=f"captured: first call of {name}"))
        except Exception as exc:  # the user's run must go on whatever the program holds
            entry.error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"

    def _dispatched(self, closed: Any, name: str) -> bool:
        """Whether `closed` is op-by-op (eager) dispatch of one primitive: a jit named after the
        primitive that binds only it, besides the operand conversions dispatch adds (weak-typed
        scalars converted and broadcast, keys wrapped). A user's function that merely shares a
        primitive's name (``split``, ``sin``) computes more and is kept."""
        if name not in self.dispatch_names:
            return False
        core = [e.primitive.name for e in closed.jaxpr.eqns
                if e.primitive.name not in _DISPATCH_CONVERSIONS]
        return core == [name]

    def table(self) -> str:
        """One line per captured program: name, equations, inputs, calls, artifact or why not."""
        lines = [f"{len(self.programs)} program(s) captured in {self.directory}"
                 + (f"; {self.skipped} single-op dispatches left out" if self.skipped else "")]
        for p in self.programs.values():
            where = p.artifact or f"not saved: {p.error}"
            lines.append(f"  {p.name}: {p.equations} equations, {p.inputs} inputs, "
                         f"compiled {p.calls} time{'s' if p.calls != 1 else ''} -> {where}")
        return "\n".join(lines)


_active = threading.local()


@contextmanager
def capture(directory: str | Path = "captured", *,
            min_equations: int = MIN_EQUATIONS) -> Iterator[Capture]:
    """Record every program ``jax.jit`` compiles inside the block (see the module docstring).

    Args:
        directory: where the artifacts go (created).
        min_equations: programs with fewer equations are left out (op-by-op dispatch).

    Yields:
        The `Capture`, filled as the block runs.

    Raises:
        InvalidArgument: `directory` cannot be created, or this jax has no hook for it.
    """
    from xlaprobe import jaxcompat  # imports jax: loaded when a capture starts

    root = Path(directory)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidArgument(f"cannot create the capture directory {root}: {exc}") from exc
    captured = Capture(root, min_equations, jaxcompat.primitive_names())

    def on_call(jaxpr: Any, args: tuple[Any, ...], name: str) -> None:
        # Saving an artifact runs jax itself (jax.export): those calls are not the script's.
        if getattr(_active, "busy", False):
            return
        _active.busy = True
        try:
            captured.record(jaxpr, args, name)
        finally:
            _active.busy = False

    try:
        remove = jaxcompat.hook_jit_calls(on_call)
    except RuntimeError as exc:
        raise InvalidArgument(f"capture is unavailable: {exc}") from exc
    try:
        yield captured
    finally:
        remove()
