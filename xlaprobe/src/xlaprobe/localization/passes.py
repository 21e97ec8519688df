"""Tier 5: the HLO pass that introduces a fault, by delta debugging ``xla_disable_hlo_passes``.

The candidates are the passes (and nested pipelines) that *changed* the module when the faulty
configuration compiled this very program: the compile is redone in a worker with
``xla_dump_to`` and ``xla_dump_hlo_pass_re=.*``, and XLA writes one file per pass that changed
the module (``<module>.<n>.<pipeline>.after_<pass>.before_<next>.txt``), in pipeline order. A
pass that changed nothing cannot have introduced the fault. Names XLA would silently ignore in
``xla_disable_hlo_passes`` (dump stage names that are no pass, such as copy insertion's
sub-steps) are dropped by checking them against the pass list (`xla_options.is_known_pass`).

A test compiles the program under the faulty configuration with a subset of the candidates
disabled and judges it against the finding's reference (no new reference run): it *fixes* the
fault when it runs and no output leaf is a finding. `ddmin` (Zeller and Hildebrandt 2002) over
the candidates, latest pass first, finds a 1-minimal set whose disabling fixes the fault; a
single pass is named. The tests of one ddmin round are independent: a pool of N workers (local, or
Ray actors) runs N of them at once, and the search takes the first failing subset in order, so the
answer does not depend on N. The latest-first order matters when several passes each fix it alone: an
early pass (algebraic simplification, reshape decomposition) often only builds the pattern a later
one (fusion) gets wrong, so the search tries the later passes' half first. When disabling every
candidate does not fix the fault (an op computed wrongly however it is compiled, or an emitter
bug no HLO pass controls), the answer is ``"none"``; when it crashes or fails to compile (some
passes are needed to compile at all), each candidate is tried alone, latest first.

An ``spmd`` configuration's dump compile is the partitioned one (`xlaprobe.configs.spmd`), so
the candidates include the partitioner's passes (Shardy's ``shardy-xla`` pipeline or GSPMD's
``spmd-partitioning``, sharding propagation) and the collective passes after it (combiners,
decomposers), and each test is the partitioned compile with those passes disabled; the
partitioner's entry passes (`PARTITIONING`) are candidates never disabled (disabling one
un-partitions the program: a fault that goes away then is no evidence against it), so an answer
of ``"none"`` there means the partitioner itself, or a collective's runtime, computes wrongly.

Planted faults (``mutant:<name>``, ``spmd[...,mutant=<name>]``) are introduced by the mutant's own pass, run as a
PRE_SCHEDULER or POST_SCHEDULER hook that ``xla_disable_hlo_passes`` does not reach: the known
answer is reported without bisecting.

The dump compile runs in a worker through `WorkerPool.call` of the worker function
`dumped_passes`, in the configuration's isolation group.

Source: A. Zeller and R. Hildebrandt, "Simplifying and Isolating Failure-Inducing Input",
IEEE TSE 28(2), 2002 (ddmin); LLVM's ``opt-bisect`` and XLA's ``xla_disable_hlo_passes`` (pass
bisection by disabling).
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from xlaprobe import freedoms
from xlaprobe.checker import Checker
from xlaprobe.checking import REFERENCE, judge
from xlaprobe.configs import spmd, xla_options
from xlaprobe.configs.mutants import get_mutant
from xlaprobe.configs.spmd_mutants import get_spmd_mutant
from xlaprobe.configs.registry import Configuration
from xlaprobe.configs.xla import compiler_options, scoped_function
from xlaprobe.errors import InvalidArgument
from xlaprobe.search import ddmin, scan_first

#: Option whose value lists the disabled passes.
DISABLE = "xla_disable_hlo_passes"
#: Candidates tried one by one when disabling them all does not even compile.
MAX_SINGLES = 24
#: The partitioner's own entry passes: disabling one leaves the program unpartitioned (or
#: partitioned otherwise, every intermediate replicated), which "fixes" any partitioning fault
#: without saying where it is, so tier 5 of an ``spmd`` finding never disables them.
PARTITIONING = frozenset({"shardy-xla", "sharding-propagation", "spmd-partitioning"})
#: Least per-test limit (s); a test may also take 10 times the dump compile.
TEST_TIMEOUT_S = 10.0
_DUMP_FILE = re.compile(r"^module_\d+\.[^.]+\.\d+\.(?P<pipeline>[^.]+)\.after_(?P<pass>[^.]+)\.")
_PSEUDO = frozenset({"pipeline-start", "pipeline-end"})


def changed_passes(dump_dir: str) -> list[str]:
    """Pass (and nested pipeline) names that changed the module, in pipeline order, from an
    ``xla_dump_to`` directory written with ``xla_dump_hlo_pass_re=.*``. Dump file names spell
    spaces as underscores; a name is returned as the pass list spells it when it is there."""
    known = {name.replace(" ", "_"): name for name in xla_options.pass_names()}
    names: list[str] = []
    for entry in sorted(os.listdir(dump_dir)):
        match = _DUMP_FILE.match(entry)
        if not match or match.group("pass") in _PSEUDO:
            continue
        name = known.get(match.group("pass"), match.group("pass"))
        if name not in names:
            names.append(name)
    return names


def dumped_passes(closed_jaxpr: Any, inputs: Sequence[np.ndarray], *, config: str) -> list[str]:
    """Worker function (`WorkerPool.call`): compile the program as ``xla`` configuration `config`
    with HLO dumps into a temporary directory (removed after) and list the passes that changed
    the module (`changed_passes`)."""
    parsed = Configuration.parse(config)
    directory = tempfile.mkdtemp(prefix="xlaprobe-passes-")
    dumps = {"xla_dump_to": directory, "xla_dump_hlo_pass_re": ".*"}
    try:
        if parsed.kind == "spmd":  # partitioned: the partitioner's passes are candidates too
            spmd.planted_hlo(parsed, closed_jaxpr, inputs, dumps)
        else:
            options = {**compiler_options(parsed), **dumps}
            jax.jit(scoped_function(closed_jaxpr)).lower(*inputs).compile(compiler_options=options)
        return changed_passes(directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def dump_compile(pool: Any, program: Any, config: Configuration | str, *,
                 timeout_s: float | None = None) -> Any:
    """Run `dumped_passes` for `program` under `config` in a worker of its isolation group.

    Returns:
        The call's `xlaprobe.outcome.Outcome`: RAN with ``value`` the pass names, else
        COMPILE_ERROR, CRASH or TIMEOUT.

    Raises:
        InvalidArgument: `config` is not an ``xla`` configuration.
    """
    config = Configuration.parse(config) if isinstance(config, str) else config
    if config.kind not in ("xla", "spmd"):
        raise InvalidArgument(f"configuration '{config}' is not an xla or spmd configuration: "
                              "only XLA compiles take xla_disable_hlo_passes")
    return pool.call(program, f"{__name__}:dumped_passes", {"config": str(config)},
                     group=config.isolation_group, timeout_s=timeout_s)


def with_disabled(config: Configuration, names: Sequence[str]) -> Configuration:
    """`config` with `names` added to its ``xla_disable_hlo_passes``.

    >>> str(with_disabled(Configuration.parse("xla:fastmath"), ["fusion", "algsimp"]))
    'xla:fastmath[xla_disable_hlo_passes=fusion+algsimp]'
    """
    options = [(k, v) for k, v in config.options if k != DISABLE]
    already = [v for k, v in config.options if k == DISABLE]
    value = xla_options.LIST_SEPARATOR.join([*already, *names])
    return Configuration(config.kind, config.variant, (*options, (DISABLE, value)))


@dataclasses.dataclass(frozen=True, slots=True)
class PassBlame:
    """Which HLO pass introduces a fault (tier 5).

    Attributes:
        compiler_pass: the pass (or nested pipeline) name; ``"none"`` when disabling no subset of
            the candidates fixes the fault; ``""`` when it could not be decided.
        disabled: a 1-minimal set of candidates whose disabling fixes the fault (the pass alone
            when one is named).
        candidates: the passes that changed the module, in pipeline order.
        evidence: why (one line).
        cycles: compiles of the program (the dump compile and every test).
        seconds: wall time (s).
    """

    compiler_pass: str
    disabled: tuple[str, ...]
    candidates: tuple[str, ...]
    evidence: str
    cycles: int
    seconds: float

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        data = dataclasses.asdict(self)
        data.update(disabled=list(self.disabled), candidates=list(self.candidates),
                    seconds=round(self.seconds, 3))
        return data


def blame_pass(program: Any, config: Configuration, pool: Any, check: Any, *,
               timeout_s: float | None = None,
               on_test: Callable[[tuple[str, ...], bool, str, float], None] | None = None
               ) -> PassBlame:
    """Name the HLO pass whose disabling makes `config`'s failure on `program` go away.

    Args:
        program: the failing `xlaprobe.program.Program`.
        config: the faulty configuration: ``xla...`` or ``spmd[...]`` (bisected; for ``spmd``
            over the partitioned compile's passes, never disabling `PARTITIONING`) or
            ``mutant:<name>`` / ``spmd[...,mutant=<name>]`` (the planted pass, known); any other
            kind gives an undecided result.
        pool: a `xlaprobe.workers.WorkerPool` or `xlaprobe.ray_pool.RayPool`
            (`xlaprobe.backends.make_pool`); with ``size`` > 1 each ddmin round tests that many
            subsets at once (the answer is the sequential search's).
        check: a `xlaprobe.checking.CheckResult` of `program` that ran ``reference``: its reference
            and honest runs judge every test.
        timeout_s: per-run limit (s).
        on_test: called after each test with (disabled passes, fixed?, verdict kind, seconds).

    Returns:
        The `PassBlame`.
    """
    started = time.perf_counter()
    if config.kind == "mutant" or (config.kind == "spmd" and spmd.settings(config).mutant):
        return _planted(config, started)
    if config.kind == "jaxlib":
        return PassBlame("", (), (), f"configuration '{config}' compiles in another release's "
                         "environment: its passes are not disabled from here (bisect the release, "
                         "or localize where it is installed)", 0, time.perf_counter() - started)
    if config.kind not in ("xla", "spmd"):
        return PassBlame("", (), (), f"configuration '{config}' is not an XLA compile: no HLO "
                         "pass to disable", 0, time.perf_counter() - started)
    failure = check.failure(str(config))
    if failure is None:
        return PassBlame("", (), (), f"the check shows no failure of '{config}' against the "
                         "float64 reference: no fault to blame", 0, time.perf_counter() - started)
    reference = check.outcomes[check.configs.index(REFERENCE)]
    outcome = dump_compile(pool, program, config, timeout_s=timeout_s)
    if not outcome.ran:
        return PassBlame("", (), (), f"the dump compile failed: {outcome.kind.value} "
                         f"{outcome.last_line[:200]}", 1, time.perf_counter() - started)
    # Disabling passes can make XLA loop or the program hang: a test may take a few times the
    # dump compile, not the pool's limit.
    limit = max(TEST_TIMEOUT_S, 10 * outcome.seconds)
    if timeout_s is not None:
        limit = min(limit, timeout_s)
    candidates = [n for n in outcome.value if n and xla_options.is_known_pass(n)]
    held = [n for n in candidates if n in PARTITIONING] if config.kind == "spmd" else []
    tests = _Tests(program, config, pool, check, reference, limit, on_test, Checker(failure))
    spec = str(config)
    labels = freedoms.finding_labels(check.verdicts[check.configs.index(spec)]) \
        if spec in check.configs else ""
    blame = _bisect(tests, [n for n in candidates if n not in held], started, labels)
    if not held:
        return blame
    tested = len(candidates) - len(held)
    # The candidates the dump showed, the partitioner's among them.
    blame = dataclasses.replace(blame, candidates=tuple(candidates))
    if blame.compiler_pass == "none":
        blame = dataclasses.replace(blame, evidence=(
            f"disabling no subset of the {tested} other passes that changed the "
            f"module fixes the fault: the partitioner itself ({', '.join(held)}, never disabled: "
            "that un-partitions the program) or a collective's runtime computes wrongly"))
    else:
        blame = dataclasses.replace(blame, evidence=f"{blame.evidence}; never disabled: "
                                    f"{', '.join(held)} (that un-partitions the program)")
    return blame


def _planted(config: Configuration, started: float) -> PassBlame:
    """The known answer for a ``mutant:<name>`` (or ``spmd[...,mutant=<name>]``) configuration:
    the mutant's own pass."""
    mutant = (get_spmd_mutant(spmd.settings(config).mutant or "") if config.kind == "spmd"
              else get_mutant(config.variant or ""))
    name = f"xlaprobe-mutant-{mutant.name}"
    return PassBlame(name, (name,), (name,), f"the planted fault's own pass, run as a "
                     f"{mutant.stage} hook (known, not bisected: xla_disable_hlo_passes does "
                     "not reach hooks)", 0, time.perf_counter() - started)


class _Tests:
    """The tests of one bisection: `program` compiled under `config` with some passes disabled,
    judged against the finding's `reference` run; each set of names is tested once. Whether a
    test fixed the fault is `checker`'s answer (the finding's `xlaprobe.checker.Checker`, as in
    XLA's hlo_bisect every test asks one BugChecker).

    Attributes:
        cycles: compiles of the program so far (the dump compile and every test).
        ran: sorted names -> whether the test's compile ran.
    """

    def __init__(self, program: Any, config: Configuration, pool: Any, check: Any,
                 reference: Any, limit: float,
                 on_test: Callable[[tuple[str, ...], bool, str, float], None] | None,
                 checker: Checker):
        self.program, self.config, self.pool, self.check = program, config, pool, check
        self.checker = checker
        self.reference, self.limit, self.on_test = reference, limit, on_test
        self.cycles = 1
        self.cache: dict[tuple[str, ...], bool] = {}
        self.ran: dict[tuple[str, ...], bool] = {}

    def fixes(self, names: Sequence[str]) -> bool:
        """Whether disabling `names` fixes the fault: it runs and no output leaf is a finding."""
        return self.fixes_many([names])[0]

    def fixes_many(self, sets: Sequence[Sequence[str]]) -> list[bool]:
        """`fixes` of each of `sets`, their untested compiles run at the same time
        (``pool.run_many``: as many at once as the pool has workers)."""
        keys = [tuple(sorted(names)) for names in sets]
        todo = list(dict.fromkeys(k for k in keys if k not in self.cache))
        names_of = {k: tuple(names) for k, names in zip(keys, sets)}
        specs = [with_disabled(self.config, names_of[k]) for k in todo]
        begun = time.perf_counter()
        for index, run in self.pool.run_many([(self.program, s) for s in specs],
                                             timeout_s=self.limit):
            self._judged(todo[index], names_of[todo[index]], specs[index], run, begun)
        return [self.cache[k] for k in keys]

    def _judged(self, key: tuple[str, ...], names: tuple[str, ...], spec: Configuration,
                run: Any, begun: float) -> None:
        self.cycles += 1
        result = judge(self.program, [str(spec), REFERENCE], [run, self.reference],
                       self.check.budget, self.check.flushed)
        fixed = self.checker.fixed(run.ran, result.failure(str(spec)))
        self.cache[key] = fixed
        self.ran[key] = run.ran
        if self.on_test is not None:
            worst = next((v.kind.value for v in result.verdicts[0] if v.kind.is_finding), "ok")
            self.on_test(names, fixed, worst, time.perf_counter() - begun)


def _bisect(tests: _Tests, candidates: list[str], started: float, labels: str = "") -> PassBlame:
    """ddmin over `candidates`, latest first; each one alone where disabling them all does not
    compile or run (see the module docstring). `labels`: the finding's freedoms when it is a
    labelled freedom (`freedoms.finding_labels`), which the evidence calls a legal liberty
    removed, not a fault fixed."""
    # A labelled freedom is no fault: the pass that takes it is named as such.
    fixes = f"removes {freedoms.taken(labels)}, not a fault" if labels else "fixes the fault"
    order = list(reversed(candidates))  # latest pass first (see module docstring)
    if not order:
        return PassBlame("none", (), (), "no HLO pass changed the module", tests.cycles,
                         time.perf_counter() - started)
    width = getattr(tests.pool, "size", 1)
    if tests.fixes(order):
        minimal = ddmin(order, tests.fixes, test_many=tests.fixes_many, width=width)
        name = minimal[0] if len(minimal) == 1 else ""
        evidence = (f"disabling it alone {fixes}" if name else
                    f"only disabling these {len(minimal)} passes together {fixes}")
        return PassBlame(name, tuple(minimal), tuple(candidates), evidence, tests.cycles,
                         time.perf_counter() - started)
    if not tests.ran[tuple(sorted(order))]:
        singles = [[name] for name in order[:MAX_SINGLES]]
        found = scan_first(singles, tests.fixes, test_many=tests.fixes_many, width=width)
        if found is not None:
            name = singles[found][0]
            return PassBlame(name, (name,), tuple(candidates), f"disabling it alone {fixes} "
                             "(disabling every changed pass did not compile or run)",
                             tests.cycles, time.perf_counter() - started)
        return PassBlame("", (), tuple(candidates), "disabling every changed pass does not "
                         f"compile or run, and disabling none of the latest {MAX_SINGLES} alone "
                         f"{fixes}: undecided", tests.cycles, time.perf_counter() - started)
    if labels:
        why = (f"removes {freedoms.taken(labels)}: no HLO pass takes this liberty (e.g. the "
               "emitter or the runtime does); not a fault")
    else:
        why = ("fixes the fault: it does not come from an HLO pass (e.g. op-by-op or in the "
               "emitter)")
    return PassBlame("none", (), tuple(candidates),
                     f"disabling no subset of the {len(candidates)} passes that changed the module "
                     f"{why}", tests.cycles, time.perf_counter() - started)
