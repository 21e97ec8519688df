"""User functions and case modules as Programs.

A target is ``path/to/file.py:fn`` or ``package.module:fn``; its inputs come from an input spec
(``f32[8,128],i32[8]``, random and seeded) or from an input factory in the same module
(``fn_inputs()`` or ``inputs()``, returning a tuple of arrays). A *case module* (the format of
``shared/cases/xla_cpu_bugs``) defines ``program``, ``inputs`` and optionally ``expected``,
``KIND`` and ``FAULTY_CONFIG``; it is checked as ``path/to/case.py``.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.util
import inspect
import os
import re
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import jax

from xlaprobe.errors import InvalidArgument, user_error
from xlaprobe.program import Program, Provenance
from xlaprobe.configs.registry import Configuration
from xlaprobe.knobs import declared_knobs, resolve_knobs
from xlaprobe.releases.envs import check_version, version_key
from xlaprobe.releases.kind import release_config, release_options

#: Short dtype names of input specs, as in HLO text.
DTYPES: dict[str, np.dtype] = {
    "pred": np.dtype(bool), "bool": np.dtype(bool),
    "i8": np.dtype(np.int8), "i16": np.dtype(np.int16), "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64), "u8": np.dtype(np.uint8), "u16": np.dtype(np.uint16),
    "u32": np.dtype(np.uint32), "u64": np.dtype(np.uint64),
    "f16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16),
    "f32": np.dtype(np.float32), "f64": np.dtype(np.float64),
}
#: Largest total size of random inputs from a spec (bytes).
MAX_INPUT_BYTES = 4 * 2 ** 30
_ONE_SPEC = re.compile(r"^\s*([a-z]+[0-9]*)\[\s*([0-9,\s]*)\]\s*$")


@dataclasses.dataclass(frozen=True, slots=True)
class InputSpec:
    """Shape and dtype of one input. `shape`: tuple of ints; `dtype`: NumPy dtype."""

    shape: tuple[int, ...]
    dtype: np.dtype


def parse_input_spec(text: str) -> list[InputSpec]:
    """Parse ``f32[8,128],i32[8],bool[]`` into input specs.

    >>> [(s.shape, s.dtype.name) for s in parse_input_spec("f32[8,128], i32[8], bf16[]")]
    [((8, 128), 'float32'), ((8,), 'int32'), ((), 'bfloat16')]

    Raises:
        InvalidArgument: malformed item or unknown dtype (the message lists the dtypes).
    """
    items = re.findall(r"[^,\[\]]+\[[^\]]*\]|[^,\s][^,]*", text)
    leftover = re.sub(r"[^,\[\]]+\[[^\]]*\]|[^,\s][^,]*", "", text).replace(" ", "")
    if leftover != "," * max(len(items) - 1, 0):
        raise InvalidArgument(f"malformed input spec '{text}': expected items like f32[8,128] "
                              "separated by single commas")
    if not text.strip() or not items:
        raise InvalidArgument(f"empty input spec '{text}'; e.g. --inputs 'f32[8,128],i32[8]'")
    specs = []
    for item in items:
        match = _ONE_SPEC.match(item)
        if not match:
            raise InvalidArgument(f"malformed input '{item.strip()}' in spec '{text}': expected "
                                  "DTYPE[d0,d1,...], e.g. f32[8,128] or i32[] for a scalar")
        name, dims = match.groups()
        if name not in DTYPES:
            raise InvalidArgument(f"unknown dtype '{name}' in input spec '{text}'; known: "
                                  f"{', '.join(DTYPES)}")
        parts = dims.replace(" ", "").split(",") if dims.strip() else []
        if any(not part.isdigit() for part in parts):
            raise InvalidArgument(f"malformed dimensions '[{dims}]' in input spec '{text}': "
                                  "expected non-negative integers separated by commas")
        shape = tuple(int(d) for d in parts)
        specs.append(InputSpec(shape, DTYPES[name]))
    return specs


def random_inputs(specs: list[InputSpec], seed: int) -> tuple[np.ndarray, ...]:
    """Seeded random arrays for `specs`: floats ~ N(0, 1), signed ints in [-10, 10], unsigned in
    [0, 20], bools fair. Deterministic in `seed`."""
    total = sum(int(np.prod(s.shape, dtype=np.float64)) * s.dtype.itemsize for s in specs)
    if total > MAX_INPUT_BYTES:
        raise InvalidArgument(f"the input spec asks for {total / 2 ** 30:.1f} GiB of inputs; the limit "
                              f"is {MAX_INPUT_BYTES / 2 ** 30:.0f} GiB")
    rng = np.random.default_rng(seed)
    arrays = []
    for spec in specs:
        if spec.dtype == np.bool_:
            arrays.append(rng.random(spec.shape) < 0.5)
        elif np.issubdtype(spec.dtype, np.signedinteger):
            arrays.append(rng.integers(-10, 11, spec.shape).astype(spec.dtype))
        elif np.issubdtype(spec.dtype, np.unsignedinteger):
            arrays.append(rng.integers(0, 21, spec.shape).astype(spec.dtype))
        else:
            arrays.append(rng.standard_normal(spec.shape).astype(spec.dtype))
    return tuple(np.asarray(a) for a in arrays)


def load_module(path_or_name: str) -> types.ModuleType:
    """Import ``path/to/file.py`` (by path, under a private name) or ``package.module``.

    Raises:
        InvalidArgument: missing file, or the module fails to import (with the reason).
    """
    try:
        if path_or_name.endswith(".py") or "/" in path_or_name:
            path = Path(path_or_name)
            if not path.is_file():
                raise InvalidArgument(f"no such file: {path_or_name}")
            # Import under the file's own name with its directory on sys.path, as `python file.py`
            # would: worker processes (spawned with this sys.path) then unpickle callbacks defined
            # in it by reference.
            name, folder = path.stem, str(path.resolve().parent)
            existing = sys.modules.get(name)
            if existing is not None and getattr(existing, "__file__", None) != str(path.resolve()):
                name = f"xlaprobe_user_{abs(hash(str(path.resolve())))}"
            if folder not in sys.path:
                sys.path.insert(0, folder)
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:  # no loader for its suffix
                raise InvalidArgument(f"cannot import {path_or_name}: not a Python source file "
                                      "(give path/to/file.py)")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[name]
                raise
            return module
        if "" not in sys.path and os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())  # as `python -m` does: modules beside the user resolve
        return importlib.import_module(path_or_name)
    except InvalidArgument:
        raise
    except SystemExit as exc:
        raise InvalidArgument(f"importing '{path_or_name}' called sys.exit({exc.code}); a module to "
                              "check must not exit on import") from exc
    except ModuleNotFoundError as exc:
        raise InvalidArgument(f"cannot import '{path_or_name}': {exc}") from exc
    except Exception as exc:
        raise InvalidArgument(user_error(exc, f"importing {path_or_name}")) from exc


def _call_factory(factory: Callable[[], Any], where: str) -> tuple[Any, ...]:
    try:
        args = factory()
    except SystemExit as exc:
        raise InvalidArgument(f"input factory {where} called sys.exit({exc.code!r})") from exc
    except Exception as exc:
        raise InvalidArgument(user_error(exc, f"calling the input factory {where}")) from exc
    return tuple(args) if isinstance(args, (tuple, list)) else (args,)


def user_function(target: str) -> tuple[types.ModuleType, Callable[..., Any]]:
    """The module and function of a ``file.py:fn`` or ``module:fn`` target.

    Raises:
        InvalidArgument: malformed target, missing module or function.
    """
    location, sep, fn_name = target.rpartition(":")
    if not sep or not location or not fn_name.isidentifier():
        raise InvalidArgument(f"malformed target '{target}': expected path/to/file.py:fn or "
                              "package.module:fn")
    module = load_module(location)
    fn = getattr(module, fn_name, None)
    if not callable(fn):
        raise InvalidArgument(f"'{location}' has no function '{fn_name}'")
    return module, fn


def user_program(target: str, *, input_spec: str = "", seed: int = 0,
                 knobs: dict[str, Any] | None = None) -> Program:
    """A Program from ``file.py:fn`` or ``module:fn``.

    Args:
        target: where the function is.
        input_spec: e.g. ``"f32[8,128],i32[8]"``; when empty, the module's ``<fn>_inputs()`` or
            ``inputs()`` factory gives the inputs.
        seed: seed of random inputs from the spec.
        knobs: values of the function's knobs (`xlaprobe.knob` defaults of keyword-only
            parameters); the rest take their defaults.

    Raises:
        InvalidArgument: malformed target, missing module/function/factory, bad spec, unknown
            knob or value, or a function that does not trace with those inputs.
    """
    module, fn = user_function(target)
    location, _, fn_name = target.rpartition(":")
    declared = declared_knobs(fn)
    if declared or knobs:
        fn = functools.partial(fn, **resolve_knobs(declared, knobs))
    if input_spec:
        args = random_inputs(parse_input_spec(input_spec), seed)
    else:
        factory = getattr(module, f"{fn_name}_inputs", None) or getattr(module, "inputs", None)
        if not callable(factory) and _takes_no_arguments(fn):
            factory = tuple
        if not callable(factory):
            raise InvalidArgument(f"no inputs for '{target}': pass --inputs 'f32[8,128],...' or "
                                  f"define {fn_name}_inputs() or inputs() in {location}")
        args = _call_factory(factory, f"{location}:{getattr(factory, '__name__', 'inputs')}")
    provenance = Provenance("user", target, seed if input_spec else None, input_spec)
    return Program.from_function(fn, args, provenance)


def _check_expected(path: str, program: Program) -> None:
    """expected() must match the program's outputs in count and shape, with numeric values."""
    avals = [v.aval for v in program.jaxpr.jaxpr.outvars]
    assert program.expected is not None
    if len(program.expected) != len(avals):
        raise InvalidArgument(f"{path}: expected() gives {len(program.expected)} arrays, the program "
                              f"has {len(avals)} outputs")
    for name, want, aval in zip(program.output_names, program.expected, avals):
        if want.dtype.kind not in "biufc" and want.dtype.name != "bfloat16":
            raise InvalidArgument(f"{path}: expected() output {name} has dtype {want.dtype}, "
                                  "not a number")
        if tuple(want.shape) != tuple(aval.shape):
            raise InvalidArgument(f"{path}: expected() output {name} has shape {want.shape}, the "
                                  f"program's is {tuple(aval.shape)}")


def _takes_no_arguments(fn: Callable[..., Any]) -> bool:
    try:
        return all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
                   for p in inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # builtins without a signature
        return False


@dataclasses.dataclass(frozen=True)
class Case:
    """A case module: a Program with known right outputs.

    Attributes:
        program: traced from the module's ``program(*inputs())``, with ``expected`` set when the
            module defines ``expected()``.
        kind: the op kind where the fault lies (``KIND``), or "".
        faulty_config: the configuration that computes it wrongly (``FAULTY_CONFIG``), or "".
        fails_on: the jaxlib releases measured to compute it wrongly (``FAILS_ON``), oldest
            first; empty when the module does not say.
    """

    program: Program
    kind: str
    faulty_config: str
    fails_on: tuple[str, ...] = ()

    def config_with_bug(self, installed: str) -> str:
        """The configuration to flag this case with on jaxlib `installed`: ``FAULTY_CONFIG``
        when the installed release has the bug (or FAILS_ON is not given), else the same options
        under the newest release in FAILS_ON (``jaxlib==V[...]``); "" without FAULTY_CONFIG."""
        if not self.faulty_config or not self.fails_on or installed in self.fails_on:
            return self.faulty_config
        options = release_options(Configuration.parse(self.faulty_config))
        return str(release_config(self.fails_on[-1], options))


def load_case(path: str) -> Case:
    """Load a case module (``program``, ``inputs``, optional ``expected``, ``KIND``,
    ``FAULTY_CONFIG``, ``FAILS_ON``).

    Raises:
        InvalidArgument: missing file, missing ``program``/``inputs``, or an untraceable program.
    """
    module = load_module(path)
    if getattr(module, "X64", False):
        if not jax.config.jax_enable_x64:
            # Workers mirror the caller's setting: tracing float64 here alone would not do.
            raise InvalidArgument(f"{path} is a float64 case (X64 = True): run it with "
                                  "JAX_ENABLE_X64=1 in the environment")
    program_fn, inputs_fn = getattr(module, "program", None), getattr(module, "inputs", None)
    if not callable(program_fn) or not callable(inputs_fn):
        raise InvalidArgument(f"{path} is not a case module: it must define program(*args) and "
                              "inputs(); for another function use FILE.py:FN")
    args = _call_factory(inputs_fn, f"{path}:inputs")
    expected = None
    if callable(getattr(module, "expected", None)):
        expected = _call_factory(module.expected, f"{path}:expected")
    program = Program.from_function(program_fn, args, Provenance("case", path), expected=expected)
    if program.expected is not None:
        _check_expected(path, program)
    return Case(program, str(getattr(module, "KIND", "")), str(getattr(module, "FAULTY_CONFIG", "")),
                _fails_on(path, getattr(module, "FAILS_ON", ())))


def _fails_on(path: str, value: object) -> tuple[str, ...]:
    """A case's ``FAILS_ON``, checked and sorted oldest first.

    Raises:
        InvalidArgument: not a tuple or list of release versions.
    """
    if not isinstance(value, (tuple, list)) or not all(isinstance(v, str) for v in value):
        raise InvalidArgument(f"{path}: FAILS_ON must be a tuple of jaxlib versions, e.g. "
                              "(\"0.5.3\", \"0.6.2\")")
    return tuple(sorted((check_version(v) for v in value), key=version_key))
