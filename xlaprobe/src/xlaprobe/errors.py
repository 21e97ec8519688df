"""Errors of xlaprobe: each says what happened, why it matters, and what to do next.

The command line turns every `XlaprobeError` into one line on stderr and exit code 2; anything else
is a bug in xlaprobe.
"""

import errno
import importlib.util
import os
import sqlite3
import sysconfig
import traceback


class XlaprobeError(Exception):
    """Base class of all errors xlaprobe raises on purpose."""


class InvalidArgument(XlaprobeError):
    """A user-supplied name, spec string, option or file is malformed or unknown."""


class UnsupportedPrimitive(XlaprobeError):
    """An interpreter met a JAX primitive it has no rule for.

    Args:
        primitive: the primitive's name (e.g. ``"cumlogsumexp"``).
        where: the module whose rule table lacks it (e.g. ``"xlaprobe/configs/reference.py"``).
    """

    def __init__(self, primitive: str, where: str):
        self.primitive = primitive
        self.where = where
        super().__init__(
            f"no rule for primitive '{primitive}': add one to {where} "
            f"(or drop the configuration that needs it from --configs)")


class CorruptArtifact(XlaprobeError):
    """A program artifact directory is missing files or holds unreadable data."""


class NotReproducible(XlaprobeError):
    """A stored finding no longer fails when replayed."""


class FlakyFinding(XlaprobeError):
    """A finding fails on some replays and not on others."""


class WorkerCrashed(XlaprobeError):
    """A worker process died while running a task (only raised where a crash cannot be an Outcome)."""


class Unsupported(XlaprobeError):
    """A configuration cannot run this program at all (e.g. an older XLA release cannot load the
    module); an *unsupported* outcome, which is never a finding."""


def disk_full(exc: BaseException) -> bool:
    """Whether `exc` is the disk (or its quota) running out under a write: SQLite's "database or
    disk is full" or an OSError ENOSPC/EDQUOT. That is the machine, neither a bug of xlaprobe nor
    a corrupt file: the command line says so in one line (exit 2).

    >>> disk_full(OSError(errno.ENOSPC, "No space left on device"))
    True
    >>> disk_full(sqlite3.OperationalError("no such table: findings"))
    False
    """
    if isinstance(exc, sqlite3.OperationalError):
        return "disk is full" in str(exc)
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def raised_at(exc: BaseException) -> str:
    """Where `exc` was raised in the user's own code: ``path:line in function`` of the innermost
    traceback frame outside jax, jaxlib, xlaprobe and Python's library (the path relative to the
    working directory when under it), or "" when every frame is inside them.

    >>> raised_at(ValueError("never raised"))
    ''
    """
    def root(module: str) -> str | None:
        spec = importlib.util.find_spec(module)
        origin = spec.origin if spec is not None else None
        return os.path.dirname(origin) + os.sep if origin else None

    library = {sysconfig.get_paths()[k] + os.sep for k in ("stdlib", "platstdlib", "purelib",
                                                            "platlib")}
    library |= {r for r in (root("jax"), root("jaxlib")) if r}
    ours = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not f.filename.startswith("<") and not f.filename.startswith(ours)
              and not any(os.path.abspath(f.filename).startswith(lib) for lib in library)]
    if not frames:
        return ""
    frame = frames[-1]
    path = os.path.abspath(frame.filename)
    here = os.getcwd() + os.sep
    shown = path[len(here):] if path.startswith(here) else path
    return f"{shown}:{frame.lineno} in {frame.name}"


def user_error(exc: BaseException, doing: str) -> str:
    """One line for an exception the user's code raised while xlaprobe was `doing` something
    (``"tracing mymod.py:fn"``): where in the user's code (`raised_at`), the type, the first line
    of the message, and how to see the whole traceback.

    >>> user_error(ValueError("bad size\\nmore"), "tracing m.py:fn")
    'ValueError: bad size (tracing m.py:fn; xlaprobe --traceback ... prints the whole traceback)'
    """
    where = raised_at(exc)
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    return (f"{where + ': ' if where else ''}{type(exc).__name__}: {first} ({doing}; "
            "xlaprobe --traceback ... prints the whole traceback)")
