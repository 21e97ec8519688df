"""The pytest plugin (entry point ``pytest11``): check JAX functions inside an existing test suite.

    def test_attention(xlaprobe_check):
        xlaprobe_check(attention, q, k, v)        # fails the test on any finding

    @pytest.mark.xlaprobe(configs="xla,xla:fastmath")
    def test_loss(xlaprobe_check):
        xlaprobe_check(loss_fn, params, batch)

The fixture runs `xlaprobe.check` under the configurations of the ``xlaprobe`` marker, else
``--xlaprobe-configs``, else the ``xlaprobe_configs`` ini option, else the command line's default,
in one worker pool shared by the session, records the check in the store (``--xlaprobe-db``,
default ``<rootdir>/.xlaprobe/xlaprobe.db``; ``none`` records nothing), and fails the test with
the verdict table, the artifact directories and the replay commands. A check the float64
reference could not judge passes with an `XlaprobeIncompleteWarning`.

Importing this module imports neither jax nor the rest of xlaprobe: the plugin loads in every
pytest run of the environment, most of which never use it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from xlaprobe.errors import XlaprobeError

#: The configurations checked when nothing else is given (`xlaprobe.checking.DEFAULT_CONFIGS`).
DEFAULT_CONFIGS = "xla,xla:O0,eager,reference"


class XlaprobeIncompleteWarning(UserWarning):
    """A check passed without every configuration judged: the float64 reference (or one of
    xlaprobe's interpreters) could not run the program."""


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register ``--xlaprobe-configs``, ``--xlaprobe-db``, ``--xlaprobe-jobs``,
    ``--xlaprobe-timeout`` and the ``xlaprobe_configs`` ini option."""
    group = parser.getgroup("xlaprobe", "differential checks of JAX functions (xlaprobe)")
    group.addoption("--xlaprobe-configs", default=None, metavar="SPECS",
                    help=f"configurations the xlaprobe_check fixture runs (default "
                         f"{DEFAULT_CONFIGS}; reference is always added)")
    group.addoption("--xlaprobe-db", default=None, metavar="PATH",
                    help="store the checks and their findings' artifacts are recorded in "
                         "(default <rootdir>/.xlaprobe/xlaprobe.db; 'none' records nothing)")
    group.addoption("--xlaprobe-jobs", type=int, default=1, metavar="N",
                    help="worker processes of the session's pool (default 1)")
    group.addoption("--xlaprobe-timeout", type=float, default=600.0, metavar="SECONDS",
                    help="per-configuration limit in seconds (default 600)")
    parser.addini("xlaprobe_configs", "configurations the xlaprobe_check fixture runs",
                  default="")


def pytest_configure(config: pytest.Config) -> None:
    """Declare the ``xlaprobe`` marker; refuse a malformed ``--xlaprobe-configs`` or
    ``--xlaprobe-jobs`` before any test runs (one usage error, not one failure per test)."""
    config.addinivalue_line("markers", "xlaprobe(configs=SPECS): the configurations the "
                                       "xlaprobe_check fixture runs in this test")
    jobs = config.getoption("--xlaprobe-jobs", 1)
    if jobs is not None and jobs < 1:
        raise pytest.UsageError(f"--xlaprobe-jobs must be at least 1, not {jobs}")
    timeout = config.getoption("--xlaprobe-timeout", 600.0)
    if timeout is not None and not timeout > 0:
        raise pytest.UsageError(f"--xlaprobe-timeout must be a positive number of seconds, "
                                f"not {timeout}")
    given = config.getoption("--xlaprobe-configs", None)
    if given:
        # The plugin loads in every pytest session: numpy and jax only once xlaprobe is used.
        from xlaprobe.configs.registry import parse_configs
        try:
            parse_configs(given)
        except XlaprobeError as exc:
            raise pytest.UsageError(f"--xlaprobe-configs: {exc}") from None


def _store(config: pytest.Config) -> Path | None:
    given = config.getoption("--xlaprobe-db")
    if given is None:
        return config.rootpath / ".xlaprobe" / "xlaprobe.db"
    return None if given.lower() == "none" else Path(given)


@pytest.fixture(scope="session")
def xlaprobe_pool(pytestconfig: pytest.Config) -> Iterator[Any]:
    """The session's `xlaprobe.workers.WorkerPool` (started on first use; ~2 s per worker)."""
    from xlaprobe.workers import WorkerPool  # imports jax: as above

    jobs = pytestconfig.getoption("--xlaprobe-jobs")
    with WorkerPool(size=jobs, timeout_s=pytestconfig.getoption("--xlaprobe-timeout")) as pool:
        yield pool


def failure_message(checked: Any) -> str:
    """The text a failed test shows: a summary line, the verdict table (with each finding's id,
    artifact and replay command) and where the store is."""
    findings = checked.findings
    names = ", ".join(f"{f.config} ({f.kind.value})" for f in findings)
    where = f"\nstore: {checked.db}" if checked.db is not None else ""
    return (f"xlaprobe: {len(findings)} finding{'s' if len(findings) != 1 else ''} on "
            f"{checked.program.provenance.name}: {names}\n{checked.table()}{where}")


@pytest.fixture
def xlaprobe_check(request: pytest.FixtureRequest, xlaprobe_pool: Any) -> Callable[..., Any]:
    """A function ``xlaprobe_check(fn, *args, configs=None, **options)`` that checks `fn(*args)`
    (see `xlaprobe.check`; also a target string such as a zoo model name) and fails the test on
    any finding.

    Returns:
        The callable; it returns the `xlaprobe.api.Checked` result when the check passes.
    """
    from xlaprobe import api  # imports jax: as above

    marker = request.node.get_closest_marker("xlaprobe")
    options = request.config
    if marker is not None and (marker.args or set(marker.kwargs) - {"configs"}):
        # A typo (config=) or a positional spec would silently check the defaults instead.
        pytest.fail("xlaprobe: the xlaprobe marker takes configs= only, e.g. "
                    "@pytest.mark.xlaprobe(configs='xla,xla:fastmath')", pytrace=False)

    def run(target: Any, *args: Any, configs: str | None = None, **kwargs: Any) -> Any:
        chosen = (configs or (marker.kwargs.get("configs") if marker else None)
                  or options.getoption("--xlaprobe-configs") or options.getini("xlaprobe_configs")
                  or DEFAULT_CONFIGS)
        kwargs.setdefault("name", request.node.nodeid if callable(target) else None)
        try:
            checked = api.check(target, *args, configs=chosen, db=_store(options),
                                pool=xlaprobe_pool, **kwargs)
        except XlaprobeError as exc:  # bad input (a configuration, a target): one line
            pytest.fail(f"xlaprobe: {exc}", pytrace=False)
        if not checked.ok:
            pytest.fail(failure_message(checked), pytrace=False)
        if checked.incomplete:
            why = "; ".join(f"{c}: {w}" for c, w in checked.incomplete.items())
            warnings.warn(XlaprobeIncompleteWarning(
                f"xlaprobe could not judge everything on {checked.program.provenance.name}: {why}"),
                stacklevel=2)
        return checked

    return run
