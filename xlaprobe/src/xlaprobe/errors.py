"""Errors of xlaprobe: each says what happened, why it matters, and what to do next.

The command line turns every `XlaprobeError` into one line on stderr and exit code 2; anything else
is a bug in xlaprobe.
"""


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
