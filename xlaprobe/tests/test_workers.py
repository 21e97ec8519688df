"""Worker pool: isolation of crashes and hangs, reuse, isolation groups. Real processes throughout."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from xlaprobe.errors import InvalidArgument
from xlaprobe.outcome import Outcome, OutcomeKind
from xlaprobe.program import Program, Provenance
from xlaprobe.workers import STDERR_TAIL_CHARS, WorkerPool, crash_excerpt

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
if TESTS_DIR not in sys.path:  # spawned workers inherit sys.path, so they find the helpers too
    sys.path.insert(0, TESTS_DIR)
import worker_kinds  # noqa: E402  (test-only kind "wtest" and crashing host callbacks)

worker_kinds.unregister()  # registered again only while this module's tests run (fixture below)
PRELOAD = ("worker_kinds",)


def _program(fn, *args) -> Program:
    return Program.from_function(fn, args, Provenance("user", fn.__name__))


def _mlp(x, w):
    return {"y": jnp.tanh(x @ w).sum(0), "z": jnp.exp(x).mean()}


def _mlp_program(seed: int = 0) -> Program:
    rng = np.random.default_rng(seed)
    return _program(_mlp, rng.standard_normal((16, 32), np.float32),
                    rng.standard_normal((32, 8), np.float32))


def _callback_program(callback) -> Program:
    def calls_back(x):
        return jax.pure_callback(callback, jax.ShapeDtypeStruct(x.shape, x.dtype), x) + 1

    return _program(calls_back, np.ones(4, np.float32))


def _is_running(pid: int) -> bool:
    """True if `pid` exists and is not a zombie (an orphan's zombie may linger in a container)."""
    try:
        with open(f"/proc/{pid}/stat") as file:
            return file.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def _wait_gone(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not _is_running(pid):
            return True
        time.sleep(0.1)
    return False


@pytest.fixture(scope="module", autouse=True)
def _wtest_kind():
    worker_kinds.register()  # in this process only for this module's tests; workers preload it
    yield
    worker_kinds.unregister()


@pytest.fixture(scope="module")
def pool():
    with WorkerPool(size=1, timeout_s=60.0, preload=PRELOAD) as shared:
        yield shared


def _only_pid(pool: WorkerPool, group: str = "default") -> int:
    pids = pool.worker_pids()[group]
    assert len(pids) == 1
    return pids[0]


def test_outputs_bit_identical_to_in_process_jit(pool):
    program = _mlp_program()
    outcome = pool.run(program, "wtest")
    assert outcome.kind is OutcomeKind.RAN, outcome.error
    assert outcome.config == "wtest" and outcome.seconds > 0
    expected = worker_kinds.run_jit(program.jaxpr, program.inputs)
    assert len(outcome.outputs) == len(expected) == 2
    for got, want in zip(outcome.outputs, expected):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()


def test_worker_reused_and_program_sent_once(pool):
    pool.run(_mlp_program(), "wtest")  # warm
    program = _mlp_program(seed=1)
    before = pool.stats
    first = pool.run(program, "wtest:pid")
    second = pool.run(program, "wtest:pid")
    third = pool.run(program, "wtest")
    assert first.ran and second.ran and third.ran
    assert int(first.outputs[0]) == int(second.outputs[0]) == _only_pid(pool)
    after = pool.stats
    assert after.programs_sent - before.programs_sent == 1
    assert after.workers_started == before.workers_started
    assert after.tasks - before.tasks == 3


def test_reference_runs_of_one_program_travel_as_one_task(pool):
    program, other = _mlp_program(seed=2), _mlp_program(seed=3)
    items = [(program, "reference"), (program, "reference:native"), (program, "wtest"),
             (program, "reference:ftz"), (other, "reference:ftz")]
    before = pool.stats
    outcomes = dict(pool.run_many(items))
    # [reference, reference:native] one task, wtest, then reference:ftz of each program alone.
    assert pool.stats.tasks - before.tasks == 4
    assert [outcomes[i].config for i in range(5)] == [spec for _, spec in items]
    assert all(o.ran for o in outcomes.values())
    for index in (0, 1, 4):  # each as a run of its own gives
        alone = pool.run(*items[index])
        np.testing.assert_array_equal(outcomes[index].outputs[0], alone.outputs[0])
    assert not np.array_equal(outcomes[0].outputs[0], outcomes[4].outputs[0])


def test_exception_is_one_line_compile_error(pool):
    pool.run(_mlp_program(), "wtest")  # warm
    pid = _only_pid(pool)
    outcome = pool.run(_mlp_program(), "wtest:raise")
    assert outcome.kind is OutcomeKind.COMPILE_ERROR
    assert outcome.error == "ValueError: boom"
    assert outcome.outputs == () and outcome.signal is None
    assert _only_pid(pool) == pid  # the worker survived


def test_abort_is_crash_with_sigabrt_and_pool_recovers(pool):
    pool.run(_mlp_program(), "wtest")
    pid = _only_pid(pool)
    outcome = pool.run(_callback_program(worker_kinds.abort_cb), "wtest")
    assert outcome.kind is OutcomeKind.CRASH
    assert outcome.signal == signal.SIGABRT
    assert worker_kinds.STDERR_MARKER in outcome.error  # fd 2 of the worker was captured
    assert len(outcome.error) <= 2000
    assert not _is_running(pid)
    again = pool.run(_mlp_program(), "wtest")
    assert again.ran
    assert _only_pid(pool) != pid


def test_crash_keeps_the_glog_fatal_line_before_a_long_trace(pool):
    # The fatal line is ~8 kB before the end of stderr: a plain 2000-character tail would lose it.
    outcome = pool.run(_callback_program(worker_kinds.glog_abort_cb), "wtest")
    assert outcome.kind is OutcomeKind.CRASH and outcome.signal == signal.SIGABRT
    assert outcome.error.splitlines()[0] == worker_kinds.GLOG_FATAL_LINE
    assert "HloPassPipeline::Run" in outcome.error.splitlines()[-1]  # the tail is still there
    assert len(outcome.error) <= STDERR_TAIL_CHARS
    assert pool.run(_mlp_program(), "wtest").ran


def test_crash_excerpt_known_answers():
    fatal = "F0000 00:00:1.0 1 x.cc:2] Check failed: a (1 vs. 2)"
    long_trace = "".join(f"  @ frame {k}\n" for k in range(500))
    assert crash_excerpt("short\n") == "short"
    assert crash_excerpt("x" * 3000).startswith("x") and len(crash_excerpt("x" * 3000)) == 2000
    out = crash_excerpt(f"{fatal}\n{long_trace}")
    assert out.startswith(fatal + "\n...\n") and out.endswith("frame 499") and len(out) <= 2000
    # Without an F line, the last 'Check failed' line leads.
    out = crash_excerpt(f"E1 Check failed: first\nRuntimeError: Check failed: second\n{long_trace}")
    assert out.startswith("RuntimeError: Check failed: second\n...\n")
    # Already in the tail: not repeated.
    out = crash_excerpt(f"{long_trace}{fatal}\n  @ last")
    assert out.count(fatal) == 1 and out.endswith("@ last")


def test_segfault_is_crash_with_sigsegv(pool):
    outcome = pool.run(_callback_program(worker_kinds.segv_cb), "wtest")
    assert outcome.kind is OutcomeKind.CRASH
    assert outcome.signal == signal.SIGSEGV
    assert outcome.error  # the tail, or a line saying the worker wrote nothing
    assert pool.run(_mlp_program(), "wtest").ran


def test_plain_exit_is_crash_without_signal(pool):
    outcome = pool.run(_mlp_program(), "wtest:exit")
    assert outcome.kind is OutcomeKind.CRASH
    assert outcome.signal is None
    assert "exited with code 3" in outcome.error


def test_hang_times_out_and_pool_recovers(pool):
    pool.run(_mlp_program(), "wtest")  # a warm worker: the limit covers the run, not the start-up
    pid = _only_pid(pool)
    started = time.monotonic()
    outcome = pool.run(_callback_program(worker_kinds.hang_cb), "wtest", timeout_s=3)
    elapsed = time.monotonic() - started
    assert outcome.kind is OutcomeKind.TIMEOUT
    assert outcome.seconds == 3
    assert 3 <= elapsed < 10
    assert not _is_running(pid)
    assert pool.run(_mlp_program(), "wtest").ran


def test_isolation_groups_never_share_a_process(pool):
    program = _mlp_program()
    specs = ["wtest:pid", "wtest:pid[group=a]", "wtest:pid[group=b]"] * 2 + ["wtest", "wtest[group=a]"]
    seen: dict[int, Outcome] = {}
    for index, outcome in pool.run_many([(program, spec) for spec in specs]):
        assert index not in seen
        seen[index] = outcome
    assert sorted(seen) == list(range(len(specs)))
    assert all(outcome.ran for outcome in seen.values())
    pids_by_group: dict[str, set[int]] = {}
    for index, spec in enumerate(specs):
        if ":pid" in spec:
            group = spec.partition("group=")[2].rstrip("]") or "default"
            pids_by_group.setdefault(group, set()).add(int(seen[index].outputs[0]))
    assert all(len(pids) == 1 for pids in pids_by_group.values())  # size=1: one worker per group
    all_pids = [pid for pids in pids_by_group.values() for pid in pids]
    assert len(set(all_pids)) == 3
    assert {g: set(p) for g, p in pool.worker_pids().items()} == pids_by_group
    want = worker_kinds.run_jit(program.jaxpr, program.inputs)
    for index in (6, 7):
        assert [x.tobytes() for x in seen[index].outputs] == [x.tobytes() for x in want]


def test_run_many_in_parallel_workers():
    programs = [_mlp_program(seed) for seed in range(4)]
    with WorkerPool(size=2, timeout_s=60.0, preload=PRELOAD) as two:
        results = dict(two.run_many([(p, "wtest") for p in programs] + [(programs[0], "wtest:pid")] * 4))
        assert len(two.worker_pids()["default"]) == 2
        assert sorted(results) == list(range(8))
        for index, program in enumerate(programs):
            want = worker_kinds.run_jit(program.jaxpr, program.inputs)
            assert [x.tobytes() for x in results[index].outputs] == [x.tobytes() for x in want]
        assert {int(results[i].outputs[0]) for i in range(4, 8)} <= set(two.worker_pids()["default"])
        pids = two.worker_pids()["default"]
    assert not any(_is_running(pid) for pid in pids)  # close() killed them


def test_large_outputs_come_back_intact(pool):
    x = np.random.default_rng(0).standard_normal((4096, 2048), np.float32)  # 32 MiB

    def double(v):
        return v * 2, v[::2]

    program = _program(double, x)
    started = time.monotonic()
    outcome = pool.run(program, "wtest")
    assert outcome.ran, outcome.error
    assert np.array_equal(outcome.outputs[0], x * 2) and np.array_equal(outcome.outputs[1], x[::2])
    assert time.monotonic() - started < 30


def test_x64_setting_follows_the_caller(pool):
    with jax.enable_x64(True):
        program = _program(lambda v: v * 3, np.arange(4, dtype=np.float64))
        outcome = pool.run(program, "wtest")
    assert outcome.ran, outcome.error
    assert outcome.outputs[0].dtype == np.float64


def test_bad_spec_raises_in_the_caller(pool):
    with pytest.raises(InvalidArgument):
        pool.run(_mlp_program(), "wtest:nope")
    with pytest.raises(InvalidArgument):
        WorkerPool(size=0)


def test_closed_pool_refuses_work():
    closed = WorkerPool(preload=PRELOAD)
    closed.close()
    with pytest.raises(RuntimeError):
        closed.run(_mlp_program(), "wtest")


_CHILD = textwrap.dedent("""
    import os, signal, sys, time
    # Ctrl-C as a terminal delivers it to a fresh shell's command, whatever this test process
    # inherited (a process that starts with SIGINT ignored keeps it ignored).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import jax, numpy as np
    import worker_kinds
    from xlaprobe.program import Program, Provenance
    from xlaprobe.workers import WorkerPool

    def calls_back(x):
        return jax.pure_callback(worker_kinds.hang_cb, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

    pool = WorkerPool(timeout_s=120, preload=("worker_kinds",))
    program = Program.from_function(lambda x: x + 1, (np.ones(3, np.float32),), Provenance("user", "f"))
    assert pool.run(program, "wtest").ran
    print(pool.worker_pids()["default"][0], flush=True)
    if sys.argv[1] == "sigkill":
        os.kill(os.getpid(), 9)
    hang = Program.from_function(calls_back, (np.ones(3, np.float32),), Provenance("user", "g"))
    print("hanging", flush=True)
    pool.run(hang, "wtest")
""")


@pytest.mark.parametrize("how", ["sigint", "sigkill"])
def test_no_orphans_when_the_parent_is_interrupted_or_killed(how, tmp_path):
    marker = tmp_path / "hanging"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([TESTS_DIR, os.environ.get("PYTHONPATH", "")]),
               XLAPROBE_TEST_HANGING=str(marker))
    child = subprocess.Popen([sys.executable, "-c", _CHILD, how], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
    try:
        worker_pid = int(child.stdout.readline())
        assert _is_running(worker_pid)
        if how == "sigint":
            assert child.stdout.readline().strip() == "hanging"
            # Interrupt only once the worker runs the hanging callback: the parent is then
            # waiting for its reply (on a loaded machine a fixed sleep could land the signal
            # while jax still serialized the program, inside native code).
            deadline = time.monotonic() + 120
            while not marker.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert marker.exists(), "the worker never reached the hanging callback"
            time.sleep(0.2)
            child.send_signal(signal.SIGINT)  # what Ctrl-C in a terminal delivers
            _, stderr = child.communicate(timeout=120)
            assert "KeyboardInterrupt" in stderr
        else:
            child.wait(timeout=120)
        assert _wait_gone(worker_pid, within_s=5)
    finally:
        child.kill()
        child.wait()


def test_an_interpreters_own_exception_is_a_tool_error_and_xlas_is_not():
    from xlaprobe.errors import UnsupportedPrimitive
    from xlaprobe.workers import tool_error

    class Interpreter:
        interpreter = True

    class XlaRuntimeError(RuntimeError):  # named as jaxlib's: the compiler's own error
        pass

    def raise_in_xlaprobe():
        raise ValueError("bad params\nsecond line")

    try:
        raise_in_xlaprobe()
    except ValueError as exc:
        why = tool_error(exc, Interpreter())
        assert why.startswith("ValueError: bad params (at test_workers.py:")
        assert tool_error(exc, object()) == ""          # a compiler kind: its compile error
    try:
        try:
            raise XlaRuntimeError("INTERNAL: rejected")
        except XlaRuntimeError as inner:
            raise TypeError("wrapped") from inner
    except TypeError as exc:
        assert tool_error(exc, Interpreter()) == ""     # XLA raised it: a finding
    missing = UnsupportedPrimitive("cholesky", "xlaprobe/configs/reference.py")
    assert "cholesky" in tool_error(missing, object())  # no rule: always xlaprobe's gap


def test_a_failed_setup_fails_again_at_once_without_retrying(monkeypatch):
    # A release whose environment cannot be made (here: PyPI has no such jax) is asked about
    # once per pool; every later run of that configuration fails with the same error at once
    # (a campaign keeps jobs + 1 programs in flight: each used to try again).
    from xlaprobe.releases import kind as release
    from xlaprobe.releases.envs import EnvironmentUnavailable
    calls = []

    def prepare(config):
        calls.append(str(config))
        raise EnvironmentUnavailable("cannot make an environment for jaxlib==9.9.9: no version")

    monkeypatch.setattr(release.KIND, "prepare", prepare)
    program = _mlp_program()
    with WorkerPool(size=1, timeout_s=60) as pool:
        for _ in range(3):
            with pytest.raises(EnvironmentUnavailable, match="jaxlib==9.9.9"):
                pool.run(program, "jaxlib==9.9.9")
        with pytest.raises(EnvironmentUnavailable):
            list(pool.run_many([(program, "jaxlib==9.9.9"), (program, "jaxlib==9.9.9")]))
    assert calls == ["jaxlib==9.9.9"]
