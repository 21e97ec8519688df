"""Virtual environments of other jax/jaxlib releases, made on demand in a cache folder.

Each release lives in ``<cache>/jaxlib-<version>/`` (default cache: ``$XLAPROBE_CACHE`` or
``~/.cache/xlaprobe/releases``) with jax, jaxlib and the numpy/scipy/ml_dtypes pins it needs, and a
marker file ``xlaprobe-env.json`` written last: a folder without it is an interrupted install and
is made again. Environments are made with ``uv`` (seconds; pip takes minutes) when it is installed,
else with pip, under a file lock so two workers never build the same one at once.

Facts measured on Python 3.12 (x86-64): every jaxlib from 0.4.17 on has Python 3.12 wheels; older
ones need Python 3.11 (tried next). jaxlib 0.4.x before 0.4.26 needs numpy < 2 and, before 0.4.24,
scipy < 1.13. An environment costs about 0.5-0.6 GB.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from xlaprobe.errors import InvalidArgument, XlaprobeError

#: A release version as the registry spells it: 0.4.33, 0.9.0.1.
_VERSION = re.compile(r"^\d+(\.\d+){2,3}$")
MARKER = "xlaprobe-env.json"
#: Seconds an environment install may take before it is abandoned.
INSTALL_TIMEOUT_S = 1800.0
#: Interpreters tried, in order, for a release without wheels for the running Python.
FALLBACK_PYTHONS = ("3.12", "3.11", "3.10")


class EnvironmentUnavailable(XlaprobeError):
    """A release environment cannot be made (no registry, no wheel for any Python here)."""


def version_key(version: str) -> tuple[int, ...]:
    """Sort key of a release version.

    >>> sorted(["0.10.2", "0.4.33", "0.9.0.1"], key=version_key)
    ['0.4.33', '0.9.0.1', '0.10.2']
    """
    return tuple(int(part) for part in version.split("."))


def check_version(version: str) -> str:
    """`version` if it looks like a release version.

    Raises:
        InvalidArgument: it does not (e.g. ``0.5`` or ``latest``).
    """
    if not _VERSION.match(version):
        raise InvalidArgument(f"'{version}' is not a jaxlib release version; expected e.g. 0.4.33 "
                              "or 0.9.0.1 (`xlaprobe envs list --available` lists them)")
    return version


def cache_dir() -> Path:
    """Folder holding the release environments (``$XLAPROBE_CACHE`` or ~/.cache/xlaprobe/releases)."""
    root = os.environ.get("XLAPROBE_CACHE")
    if root:
        return Path(root).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "xlaprobe" / "releases"


def installed_version() -> str:
    """The jaxlib version xlaprobe itself runs on."""
    import jaxlib.version  # jaxlib loads its native extension: only when the version is asked for
    return jaxlib.version.__version__


def pins(version: str) -> list[str]:
    """Requirements of a release environment (jax and jaxlib pinned, and what old releases need).

    >>> pins("0.4.20")
    ['jax==0.4.20', 'jaxlib==0.4.20', 'numpy<2', 'scipy<1.13', 'ml_dtypes<0.5']
    >>> pins("0.10.2")
    ['jax==0.10.2', 'jaxlib==0.10.2']
    """
    key = version_key(version)
    requirements = [f"jax=={version}", f"jaxlib=={version}"]
    if key < (0, 4, 26):
        requirements.append("numpy<2")
    if key < (0, 4, 24):
        requirements += ["scipy<1.13", "ml_dtypes<0.5"]
    return requirements


@dataclasses.dataclass(frozen=True, slots=True)
class ReleaseEnv:
    """One release environment.

    Attributes:
        version: the jaxlib release, e.g. ``"0.5.3"``.
        path: its folder.
        python: its interpreter.
        python_version: e.g. ``"3.12.1"``.
        size_bytes: disk use (bytes).
        created: when it was made (Unix s).
    """

    version: str
    path: Path
    python: Path
    python_version: str
    size_bytes: int
    created: float

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict."""
        return {"version": self.version, "path": str(self.path), "python": str(self.python),
                "python_version": self.python_version, "size_bytes": self.size_bytes,
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.created))}


def env_path(version: str) -> Path:
    """Folder of the environment of `version` (whether or not it exists)."""
    return cache_dir() / f"jaxlib-{check_version(version)}"


def _python_of(path: Path) -> Path:
    return path / "bin" / "python"


def _du(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def get_env(version: str) -> ReleaseEnv | None:
    """The complete environment of `version`, or None when there is none."""
    path = env_path(version)
    try:
        meta = json.loads((path / MARKER).read_text())
    except (OSError, ValueError):
        return None
    if not _python_of(path).exists():
        return None
    return ReleaseEnv(version, path, _python_of(path), str(meta.get("python_version", "")),
                      int(meta.get("size_bytes", 0)), float(meta.get("created", 0.0)))


def list_envs() -> list[ReleaseEnv]:
    """Complete environments in the cache, oldest release first."""
    root = cache_dir()
    found = []
    if root.is_dir():
        for child in root.iterdir():
            version = child.name.removeprefix("jaxlib-")
            if child.name.startswith("jaxlib-") and _VERSION.match(version):
                env = get_env(version)
                if env is not None:
                    found.append(env)
    return sorted(found, key=lambda e: version_key(e.version))


def remove_env(version: str) -> bool:
    """Delete the environment of `version`; False when there was none."""
    path = env_path(version)
    if not path.exists():
        return False
    shutil.rmtree(path)
    return True


def _uv() -> str | None:
    try:
        import uv  # optional: pip's uv package, else a uv on PATH
        return uv.find_uv_bin()
    except (ImportError, FileNotFoundError):
        return shutil.which("uv")


def _interpreters() -> list[str]:
    """Interpreters to try, the running one's base first (as paths or uv version requests)."""
    current = getattr(sys, "_base_executable", sys.executable) or sys.executable
    found = [current]
    for version in FALLBACK_PYTHONS:
        if sys.version.startswith(version + "."):
            continue
        for candidate in (shutil.which(f"python{version}"),
                          *sorted(Path.home().glob(f".pyenv/versions/{version}.*/bin/python{version}"))):
            if candidate and _runs(str(candidate)):
                found.append(str(candidate))
                break
    return found


def _runs(python: str) -> bool:
    try:
        return subprocess.run([python, "-c", "pass"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip() and "WARNING" not in ln]
    return lines[-1] if lines else "no output"


def _install(path: Path, python: str, requirements: list[str]) -> tuple[bool, str]:
    """Make a venv at `path` with `python` and install `requirements`: (ok, last error line)."""
    uv = _uv()
    if uv:
        steps = [[uv, "venv", "-q", "--python", python, str(path)],
                 [uv, "pip", "install", "-q", "--python", str(_python_of(path)), *requirements]]
    else:
        steps = [[python, "-m", "venv", str(path)],
                 [str(_python_of(path)), "-m", "pip", "install", "-q", *requirements]]
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    for step in steps:
        try:
            done = subprocess.run(step, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S,
                                  env=env)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return False, f"{type(exc).__name__}: {exc}"
        if done.returncode != 0:
            return False, _last_line(done.stderr + done.stdout)
    return True, ""


def ensure_env(version: str, *, log: Callable[[str], None] | None = None) -> ReleaseEnv:
    """The environment of `version`, made now when missing (seconds with uv, minutes with pip).

    Args:
        version: a jaxlib release, e.g. ``"0.5.3"``.
        log: takes one line of progress; None: stderr.

    Raises:
        InvalidArgument: `version` is malformed.
        EnvironmentUnavailable: no interpreter here can install it (no wheel, no registry
            reachable); the message gives the installer's last line.
    """
    existing = get_env(version)
    if existing is not None:
        return existing
    path = env_path(version)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = open(path.parent / f".lock-{version}", "w")
    except OSError as exc:
        raise EnvironmentUnavailable(f"cannot use the release cache {path.parent} ({exc}); set "
                                     "XLAPROBE_CACHE to a writable folder") from exc
    if log is None:  # the caller's terminal or CI log: a first install takes a while
        log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker may be making the same environment
        existing = get_env(version)
        if existing is not None:
            return existing
        errors = []
        started = time.time()
        for python in _interpreters():
            if path.exists():
                shutil.rmtree(path)
            log(f"making the environment of jaxlib=={version} with {Path(python).name} in {path} "
                "(once; about 0.5 GB)")
            ok, error = _install(path, python, pins(version))
            if ok:
                break
            errors.append((Path(python).name, error))
        else:
            if path.exists():
                shutil.rmtree(path)
            # No environment: its lock would only be clutter in the cache (a waiter that holds
            # the unlinked file fails or builds alone, as it would have).
            Path(lock.name).unlink(missing_ok=True)
            raise EnvironmentUnavailable(
                f"cannot make an environment for jaxlib=={version}: {_tried(errors)} "
                "(is the package registry reachable, and does the release exist? "
                "`xlaprobe envs list --available` lists releases)")
        probe = subprocess.run([str(_python_of(path)), "-c",
                                "import sys, jaxlib.version as v; print(sys.version.split()[0])"],
                               capture_output=True, text=True, timeout=300)
        if probe.returncode != 0:
            shutil.rmtree(path, ignore_errors=True)
            raise EnvironmentUnavailable(f"the environment of jaxlib=={version} does not import "
                                         f"jaxlib: {_last_line(probe.stderr)}")
        meta = {"version": version, "python_version": probe.stdout.strip(),
                "size_bytes": _du(path), "created": time.time(),
                "seconds": round(time.time() - started, 1), "requirements": pins(version)}
        (path / MARKER).write_text(json.dumps(meta))
    env = get_env(version)
    assert env is not None
    return env


def _tried(errors: list[tuple[str, str]]) -> str:
    """Every interpreter tried and the first one's error (the newest Python's, which the others
    repeat), e.g. ``tried python3.12 and python3.11; python3.12 said: ...``.

    >>> _tried([("python3.12", "no wheel"), ("python3.11", "no wheel")])
    'tried python3.12 and python3.11; python3.12 said: no wheel'
    """
    if not errors:
        return "no Python found"
    names = [name for name, _ in errors]
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    return f"tried {listed}; {errors[0][0]} said: {errors[0][1]}"


def available_releases(timeout_s: float = 120.0) -> list[str]:
    """jaxlib releases the package registry offers for this Python, oldest first.

    Raises:
        EnvironmentUnavailable: the registry cannot be asked (offline, no pip).
    """
    try:
        done = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "jaxlib"],
                              capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvironmentUnavailable(f"cannot ask the package registry for jaxlib releases: "
                                     f"{exc}") from exc
    match = re.search(r"Available versions:\s*(.+)", done.stdout)
    if done.returncode != 0 or not match:
        raise EnvironmentUnavailable("cannot ask the package registry for jaxlib releases: "
                                     f"{_last_line(done.stderr + done.stdout)}")
    versions = [v.strip() for v in match.group(1).split(",") if _VERSION.match(v.strip())]
    return sorted(set(versions), key=version_key)


#: Oldest release of the default bisection range (the oldest whose StableHLO reader takes today's
#: modules once locations and Shardy attributes are stripped).
OLDEST_DEFAULT = "0.4.33"


def default_releases(available: list[str]) -> list[str]:
    """One release per minor line (its newest) from `OLDEST_DEFAULT` to the newest; the 0.4 line
    is represented by `OLDEST_DEFAULT` itself.

    >>> default_releases(["0.4.30", "0.4.33", "0.4.38", "0.5.0", "0.5.3", "0.12.0", "0.12.0.1"])
    ['0.4.33', '0.5.3', '0.12.0.1']
    """
    floor = version_key(OLDEST_DEFAULT)
    newest: dict[tuple[int, ...], str] = {}
    for version in sorted(available, key=version_key):
        key = version_key(version)
        if key >= floor:
            newest[key[:2]] = version
    chosen = [OLDEST_DEFAULT] if OLDEST_DEFAULT in available else []
    chosen += [v for line, v in sorted(newest.items()) if line != floor[:2]]
    return chosen
