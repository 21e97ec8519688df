"""Where a ``xlaprobe fuzz --jobs 1`` worker's time goes beyond compile and run.

Runs a default campaign (xla, xla:O0, eager, reference; adaptive schedule) for ``--time``
seconds in this process with the worker pool's task exchange timed: per configuration (a batch of
the reference and its honest runs counts as one), the tasks, their wall time in the parent (send
to reply) and the seconds the worker reports (compile plus run); the difference is the per-task
overhead (transfer, pickling, the coverage log's parse, the parent's threads waiting for the GIL).
Also the worker start-ups and the time no task was in flight (idle). Figures depend on the load:
the load average is printed.

    python benchmarks/worker_overhead.py --time 150
"""

from __future__ import annotations

import argparse
import collections
import os
import tempfile
import threading
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time", type=float, default=150.0, help="campaign seconds")
    args = parser.parse_args()
    from xlaprobe import workers
    from xlaprobe.campaign import Campaign

    lock, tasks, starts = threading.Lock(), [], []
    execute, start = workers.WorkerPool._execute, workers.WorkerPool._start

    def timed_execute(self, worker, program, config, timeout_s, settings):
        begun = time.monotonic()
        outcome = execute(self, worker, program, config, timeout_s, settings)
        spec = "reference batch" if isinstance(config, list) else str(config)
        reported = sum(o.seconds for o in outcome.value) if isinstance(config, list) and \
            isinstance(outcome.value, list) else outcome.seconds
        with lock:
            tasks.append((spec, time.monotonic() - begun, reported))
        return outcome

    def timed_start(self, worker):
        begun = time.monotonic()
        start(self, worker)
        starts.append(time.monotonic() - begun)

    workers.WorkerPool._execute, workers.WorkerPool._start = timed_execute, timed_start
    with tempfile.TemporaryDirectory() as tmp:
        campaign = Campaign(Path(tmp) / "fuzz.db", ["xla", "xla:O0", "eager", "reference"], jobs=1)
        begun = time.monotonic()
        summary = campaign.run(args.time)
        elapsed = time.monotonic() - begun
    by = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for spec, wall, reported in tasks:
        by[spec][0] += 1
        by[spec][1] += wall
        by[spec][2] += reported
    wall = sum(w for _, w, _ in tasks)
    reported = sum(r for *_, r in tasks)
    started = sum(starts)
    print(f"{summary.programs} programs in {elapsed:.1f} s, {len(tasks)} tasks; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for spec, (n, w, r) in sorted(by.items(), key=lambda kv: -kv[1][1]):
        print(f"  {spec:<24} {n:>5} tasks  wall {w:7.1f} s  in the worker {r:7.1f} s  "
              f"overhead {(w - r) / n * 1000:6.1f} ms a task")
    print(f"  worker time: compile+run {reported / elapsed:.1%}, start-ups {started / elapsed:.1%} "
          f"({len(starts)}), task overhead {(wall - reported - started) / elapsed:.1%}, idle "
          f"{(elapsed - wall) / elapsed:.1%}")


if __name__ == "__main__":
    main()
