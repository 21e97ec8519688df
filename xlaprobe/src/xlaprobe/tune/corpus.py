"""The kernel corpus: each kernel of a program's optimized HLO timed on its own, under the tuning
space's configurations, with its features; stored in the store (tables ``kernel_programs`` and
``kernels``) for the kernel-level cost model (`xlaprobe.tune.kernelmodel`).

One *entry* is one program compiled under one configuration, in one worker process
(`profile_in_worker`): the whole program and every distinct kernel (`xlaprobe.tune.kernels`),
compiled alone with the same XLA options and fed random inputs of its parameter shapes, are timed
in interleaved rounds (each round one sample of each, so all see the same machine conditions) and
each keeps its minimum over the rounds (the least disturbed run on a shared machine). A trivial
module is timed in the same rounds: the floor of calling an executable at all. The 1-minute load
average is recorded before and after.

Sources (`corpus_programs`): the zoo, the third-party zoo (``ecosystem``), captured programs
(artifact directories) and fuzz programs (``fuzz:SEED``, `xlaprobe.sources.generator`).
"""

from __future__ import annotations

import collections
import dataclasses
import math
import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import jax

from xlaprobe.errors import InvalidArgument
from xlaprobe.tune import space as space_mod
from xlaprobe.tune.features import cost_dict
from xlaprobe.tune.space import Candidate, SearchSpace
from xlaprobe import jaxcompat
from xlaprobe.configs.xla import compiler_options
from xlaprobe.sources import generator, models
from xlaprobe.sources.ecosystem import ECOSYSTEM
from xlaprobe.tune.kernels import kernels, random_args, with_module
from xlaprobe.tune.search import TuneTarget, tune_target

#: Worker isolation group of corpus profiling (kept apart from checking and tuning runs).
GROUP = "tune:corpus"
#: The trivial module whose time is the floor of one executable call.
FLOOR_MODULE = """HloModule floor, entry_computation_layout={(f32[])->f32[]}

ENTRY %floor (p: f32[]) -> f32[] {
  %p = f32[] parameter(0)
  ROOT %n = f32[] negate(%p)
}
"""


@dataclasses.dataclass(frozen=True)
class CorpusProgram:
    """A program of the corpus and where it came from.

    Attributes:
        name: its name (zoo name, ``fuzz:3``, the artifact directory's name).
        source: ``zoo``, ``ecosystem``, ``capture`` or ``fuzz``.
        target: the tuning target (`xlaprobe.tune.search.TuneTarget`): knobs and build.
    """

    name: str
    source: str
    target: Any


#: Seeds in one ``fuzz:A-B`` range at most (each entry is minutes of timing; more is a typo).
MAX_FUZZ_PROGRAMS = 10_000


def corpus_programs(names: Sequence[str], *, seed: int = 0) -> list[CorpusProgram]:
    """Resolve corpus program names: zoo and third-party zoo models, ``fuzz:SEED`` (or
    ``fuzz:A-B`` for seeds A..B), and captured artifact directories.

    Raises:
        InvalidArgument: an unknown name or malformed fuzz range.
    """
    out = []
    for name in names:
        if name.startswith("fuzz:"):
            first, _, last = name[5:].partition("-")
            if not first.isdigit() or (last and not last.isdigit()) \
                    or int(last or first) < int(first):
                raise InvalidArgument(f"malformed fuzz programs '{name}': use fuzz:SEED or "
                                      "fuzz:FIRST-LAST with FIRST <= LAST")
            if int(last or first) - int(first) >= MAX_FUZZ_PROGRAMS:
                raise InvalidArgument(f"fuzz programs '{name}': at most {MAX_FUZZ_PROGRAMS:,} "
                                      "seeds in one range")
            for s in range(int(first), int(last or first) + 1):
                # generated when its entry is measured: a wide range starts at once, and every
                # name is checked before any work
                out.append(CorpusProgram(f"fuzz:{s}", "fuzz", TuneTarget(
                    f"fuzz:{s}", {}, lambda k, s=s: generator.generate(s))))
        elif name in models.MODELS:
            out.append(CorpusProgram(name, "zoo", tune_target(name, seed=seed)))
        elif name in ECOSYSTEM:
            out.append(CorpusProgram(name, "ecosystem", tune_target(name, seed=seed)))
        elif Path(name).is_dir():
            out.append(CorpusProgram(Path(name).name, "capture", tune_target(name, seed=seed)))
        else:
            raise InvalidArgument(f"unknown corpus program '{name}': a zoo or third-party zoo "
                                  "model (xlaprobe models), fuzz:SEED or a captured artifact "
                                  "directory")
    return out


def configurations(space: SearchSpace, count: int, rng: np.random.Generator) -> list[Candidate]:
    """The default and `count - 1` distinct uniform samples of `space` (fewer when it is
    smaller)."""
    out, seen = [space.default()], {space.key(space.default())}
    for _ in range(50 * count):
        if len(out) >= min(count, space.size):
            break
        candidate = space.sample(rng)
        if space.key(candidate) not in seen:
            seen.add(space.key(candidate))
            out.append(candidate)
    return out


def _sample(run: Callable[[], Any], repeats: int) -> float:
    started = time.perf_counter()
    for _ in range(repeats):
        jax.block_until_ready(run())
    return (time.perf_counter() - started) / repeats


def timed_rounds(runs: Sequence[Callable[[], Any]], rounds: int, sample_s: float) -> list[float]:
    """Min seconds per call of each of `runs` over `rounds` interleaved rounds (one sample of
    each per round, the order rotating each round; a sample repeats a call until it lasts
    `sample_s`)."""
    repeats = []
    for run in runs:
        for _ in range(2):
            _sample(run, 1)
        repeats.append(max(1, math.ceil(sample_s / max(_sample(run, 1), 1e-7))))
    best = [math.inf] * len(runs)
    for r in range(rounds):
        shift = r % len(runs)
        for k in list(range(shift, len(runs))) + list(range(shift)):
            best[k] = min(best[k], _sample(runs[k], repeats[k]))
    return best


def _executable_run(executable: Any, args: list[Any]) -> Callable[[], Any]:
    return lambda: executable.execute(args)


def profile_in_worker(closed_jaxpr: Any, inputs: tuple[np.ndarray, ...], *,
                      options: dict[str, Any], rounds: int = 5, sample_s: float = 0.002,
                      max_kernels: int = 400, seed: int = 0, kernel_limit_s: float = 30.0,
                      budget_s: float = math.inf) -> dict[str, Any]:
    """Worker function (`WorkerPool.call`): compile the program with XLA `options`, cut out its
    kernels, compile each alone with the same options and time everything interleaved.

    Args:
        closed_jaxpr, inputs: the program.
        options: typed XLA compiler options.
        rounds: interleaved timing rounds (each time keeps its minimum).
        sample_s: least duration of one sample (s): short kernels repeat inside it.
        max_kernels: distinct kernels timed at most (the rest keep no time).
        seed: of the kernels' random inputs.
        kernel_limit_s: a kernel whose compile plus its timing (``rounds + 3`` runs, estimated
            from the first) would exceed this (s) keeps no time (``error`` says so), so one
            huge kernel cannot eat the entry's time.
        budget_s: once cutting and compiling kernels has taken this long (s), the remaining
            kernels keep no time: the entry still finishes with the program's time and the
            kernels timed so far (a large program no longer hits the entry's timeout).

    Returns:
        ``program_s`` (s per run), ``floor_s`` (a trivial executable's), ``cost`` (the
        program's ``cost_analysis()``), ``text`` (its optimized HLO), ``kernels``: per kernel
        ``name``, ``opcode``, ``kind``, ``key``, ``features``, ``time_s`` (None when it did not
        compile or run alone; then ``error``), ``compile_s`` and ``load`` (before, after),
        ``threads``, ``pid``.

    Raises:
        Exception: the program itself does not compile (a COMPILE_ERROR outcome).
    """
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    compiled = jax.jit(jaxcompat.jaxpr_as_fun(closed_jaxpr)).lower(*inputs).compile(
        compiler_options=dict(options))
    text = compiled.as_text()
    program_args = [jax.device_put(x) for x in inputs]
    found = kernels(text)
    rng = np.random.default_rng(seed)
    runs = [lambda: compiled(*program_args),
            _executable_run(jaxcompat.compile_hlo_text(FLOOR_MODULE, {}),
                            [jax.device_put(np.float32(1))])]
    timed: dict[str, int] = {}
    errors: dict[str, str] = {}
    for kernel in found:
        if kernel.key in timed or kernel.key in errors or len(timed) >= max_kernels:
            continue
        if time.perf_counter() - started > budget_s:
            errors[kernel.key] = f"the entry's kernel budget ({budget_s:.0f} s) was spent"
            continue
        kernel_started = time.perf_counter()
        try:
            cut = with_module(text, kernel)
            args = [jax.device_put(a) for a in random_args(cut.params, rng)]
            run = _executable_run(jaxcompat.compile_hlo_text(cut.module, dict(options)), args)
            first = _sample(run, 1)
        except Exception as exc:  # a kernel XLA will not take alone keeps no time
            errors[kernel.key] = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
            continue
        if time.perf_counter() - kernel_started + first * (rounds + 3) > kernel_limit_s:
            errors[kernel.key] = f"over the per-kernel limit ({kernel_limit_s:g} s)"
            continue
        runs.append(run)
        timed[kernel.key] = len(runs) - 1
    compile_s = time.perf_counter() - started
    times = timed_rounds(runs, rounds, sample_s)
    return {"program_s": times[0], "floor_s": times[1],
            "cost": cost_dict(compiled.cost_analysis()), "text": text,
            "kernels": [{"name": k.name, "opcode": k.opcode, "kind": k.kind, "key": k.key,
                         "features": k.features,
                         "time_s": times[timed[k.key]] if k.key in timed else None,
                         "error": errors.get(k.key, "")} for k in found],
            "compile_s": compile_s, "load": (load_before, os.getloadavg()[0]),
            "threads": len(os.sched_getaffinity(0)), "pid": os.getpid()}


@dataclasses.dataclass(frozen=True)
class CorpusEvent:
    """One corpus entry done (or failed): what `grow` reports per step.

    Attributes:
        program: the corpus program's name; source: its source.
        config: the configuration's key ("" for the defaults).
        kernels: kernels found; timed: those with a time; seconds: the entry's wall time.
        program_s: the program's time (s per run), or None when it failed (then `error`).
        load: 1-minute load average after it.
        untimed: why kernels kept no time, reason -> count (`untimed_reasons`).
    """

    program: str
    source: str
    config: str
    kernels: int
    timed: int
    seconds: float
    program_s: float | None
    load: float
    error: str = ""
    untimed: dict[str, int] = dataclasses.field(default_factory=dict)


def untimed_reasons(kernels: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Why the kernels of one entry (`profile_in_worker`'s ``kernels``) kept no time: reason ->
    count, most frequent first (a kernel past ``--max-kernels`` has no error of its own)."""
    reasons = collections.Counter(k.get("error") or "past --max-kernels"
                                  for k in kernels if k["time_s"] is None)
    return dict(reasons.most_common())


def grow(programs: Sequence[CorpusProgram], pool: Any, store: Any, *, configs: int = 6,
         seed: int = 0, rounds: int = 5, timeout_s: float = 600.0, max_kernels: int = 400,
         kernel_limit_s: float = 30.0,
         on_event: Callable[[CorpusEvent], None] | None = None) -> Iterator[CorpusEvent]:
    """Add each program under `configs` configurations (the default first, then uniform samples
    of its search space) to the corpus; entries already stored are skipped. Each entry is
    stored in one transaction as it finishes (a Ctrl-C keeps the finished ones).

    Args:
        programs: from `corpus_programs`.
        pool: a `xlaprobe.workers.WorkerPool`.
        store: a `xlaprobe.store.Store`.
        configs: configurations per program, the default included.
        seed: of the configurations' sample and the kernels' inputs.
        rounds: interleaved timing rounds per entry.
        timeout_s: limit on one entry (s).
        max_kernels: distinct kernels timed per entry at most (the rest are stored untimed).
        kernel_limit_s: limit on one kernel's compile and timing (s); kernels stop being cut
            once half of `timeout_s` is spent, so an entry finishes with what it timed.
        on_event: called with each `CorpusEvent` (also yielded).

    Yields:
        One `CorpusEvent` per entry tried.
    """
    for number, item in enumerate(programs):
        space = SearchSpace.for_program(item.target.knobs)
        rng = np.random.default_rng([seed, number])
        done = store.corpus_configs(item.target.build({}).fingerprint)
        for candidate in configurations(space, configs, rng):
            key = space.key(candidate)
            if key in done:
                continue
            program = item.target.build(space_mod.knob_values(candidate))
            options = compiler_options(space_mod.configuration(candidate))
            started = time.perf_counter()
            outcome = pool.call(program, f"{__name__}:profile_in_worker",
                                {"options": options, "rounds": rounds, "seed": seed,
                                 "max_kernels": max_kernels, "kernel_limit_s": kernel_limit_s,
                                 "budget_s": timeout_s / 2},
                                group=GROUP, timeout_s=timeout_s)
            seconds = time.perf_counter() - started
            if not outcome.ran:
                event = CorpusEvent(item.name, item.source, key, 0, 0, seconds, None,
                                    os.getloadavg()[0], outcome.last_line[:200])
            else:
                # `untimed` goes into the entry's data: the kernels table keeps times only.
                value = dict(outcome.value, seconds=seconds,
                             untimed=untimed_reasons(outcome.value["kernels"]))
                baseline_id = item.target.build({}).fingerprint
                store.record_corpus_entry(baseline_id, item.name, item.source, key, candidate,
                                          value)
                event = CorpusEvent(item.name, item.source, key, len(value["kernels"]),
                                    sum(k["time_s"] is not None for k in value["kernels"]),
                                    seconds, value["program_s"], value["load"][1],
                                    untimed=value["untimed"])
            if on_event is not None:
                on_event(event)
            yield event
