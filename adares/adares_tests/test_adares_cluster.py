"""Nodes, overcommit admission and CPU contention on a 2-node scenario computed by hand."""

import numpy as np
import pytest

from adares.cluster import Cluster, admit, parse_cluster
from adares.errors import InputError
from adares.policies.baselines import Static
from adares.simulator import CostModel, Observation, TraceInfo, simulate
from adares.trace import GIB, Trace


class Scripted:
    """Proposes the allocations of a fixed table (step -> (cores, GiB)) and records what it
    observes in force."""

    name = "scripted"

    def __init__(self, cpu, mem_gib):
        self.cpu, self.mem = np.asarray(cpu, float), np.asarray(mem_gib, float) * GIB
        self.seen: list[tuple[np.ndarray, np.ndarray]] = []

    def reset(self, info: TraceInfo) -> None:
        self.seen = []

    def allocate(self, t):
        return self.cpu[t].copy(), self.mem[t].copy()

    def observe(self, obs: Observation) -> None:
        self.seen.append((obs.cpu_alloc.copy(), obs.mem_alloc.copy()))


def _scenario():
    # Node 0: 2 cores / 4 GiB, node 1: 4 cores / 8 GiB, overcommit 1.5 (allocatable 3 / 6 and
    # 6 / 12). VMs 0, 1 on node 0; VMs 2, 3 on node 1. Two steps of one hour.
    tr = Trace(np.array([[2.0, 1.5, 1.0, 1.0], [0.5, 2.0, 3.0, 3.0]]),
               np.array([[1.0, 1.0, 2.0, 2.0], [1.0, 1.0, 7.0, 3.0]]) * GIB,
               np.array([1.0, 1.0, 2.0, 2.0]), np.array([2.0, 2.0, 4.0, 4.0]) * GIB,
               ("a", "b", "c", "d"), 3600, 0.0).validate()
    cl = Cluster(np.array([0, 0, 1, 1]), np.array([2.0, 4.0]), np.array([4.0, 8.0]) * GIB,
                 1.5, 1.5)
    pol = Scripted([[2.0, 1.5, 2.0, 2.0], [0.5, 2.0, 3.0, 3.5]],
                   [[2.0, 2.0, 4.0, 4.0], [2.0, 2.0, 8.0, 4.0]])
    return tr, cl, pol


def test_two_nodes_by_hand():
    tr, cl, pol = _scenario()
    r = simulate(tr, pol, CostModel(), cluster=cl)
    # Step 0, node 0 (room 3 - 2 = 1 core): VM a's growth 1 -> 2 fits, VM b's 1 -> 1.5 is
    # refused. Step 1, node 0: a shrinks to 0.5 first, so b's growth to 2 fits (2.5 <= 3);
    # node 1 (room 6 - 4 = 2): c's growth 2 -> 3 fits, d's 2 -> 3.5 is refused; c's memory
    # 4 -> 8 GiB fits 12 GiB exactly.
    assert [s[0].tolist() for s in pol.seen] == [[2, 1, 2, 2], [0.5, 2, 3, 2]]
    assert [(s[1] / GIB).tolist() for s in pol.seen] == [[2, 2, 4, 4], [2, 2, 8, 4]]
    assert r.extra["refused_resizes"] == 2
    assert r.resizes == 1 + 3
    assert r.vcpu_hours == pytest.approx(7 + 7.5) and r.gb_hours == pytest.approx(12 + 16)
    # Contention: step 0 node 0 would use 2 + 1 = 3 cores of 2 (each gets 2/3: 4/3 and 2/3);
    # step 1 node 0 uses 0.5 + 2 of 2 and node 1 uses 3 + 2 of 4 (each gets 0.8).
    # Throttled: step 0 (2 - 4/3) + (1.5 - 2/3) = 1.5; step 1 0.1 + 0.4 + 0.6 + 1.4 = 2.5.
    assert r.cpu_throttled_share == pytest.approx(4.0 / 14.0)
    assert r.extra["cpu_contention_share"] == pytest.approx(2.5 / 14.0)
    assert r.oom_events == 0
    # Resizes at their default prices: CPU changes a (step 0), a, b, c (step 1); memory c.
    assert r.extra["cpu_resizes"] == 4 and r.extra["mem_resizes"] == 1
    assert r.cost == pytest.approx(14.5 * 1.0 + 28 * 0.125 + 4.0 * 10.0 + 4 * 0.01 + 1 * 0.05)
    # Per node, means over the two steps: served / cores, used / bytes, allocated / capacity.
    np.testing.assert_allclose(r.node_stats, [[1.0, 0.5, 1.375, 1.0], [0.75, 0.875, 1.125, 1.25]])
    assert r.extra["node_cpu_utilization"] == pytest.approx(0.875)
    assert r.extra["node_mem_utilization"] == pytest.approx(0.6875)
    assert r.extra["node_cpu_allocated"] == pytest.approx(1.25)
    assert r.extra["node_mem_allocated"] == pytest.approx(1.125)


def test_without_cluster_nothing_refused_or_contended():
    tr, _, pol = _scenario()
    r = simulate(tr, pol, CostModel())
    assert [s[0].tolist() for s in pol.seen] == [[2, 1.5, 2, 2], [0.5, 2, 3, 3.5]]
    # Only demand above allocation is throttled: 0 at step 0, 0 at step 1.
    assert r.cpu_throttled_share == 0 and "refused_resizes" not in r.extra


def test_large_capacity_changes_nothing():
    tr, _, pol = _scenario()
    big = Cluster(np.array([0, 0, 1, 1]), np.array([100.0, 100.0]), np.array([1e3, 1e3]) * GIB)
    a = simulate(tr, pol, CostModel(), cluster=big)
    b = simulate(tr, pol, CostModel())
    assert a.cost == pytest.approx(b.cost) and a.extra["refused_resizes"] == 0
    assert a.extra["cpu_contention_share"] == 0


def test_admit_shrinks_first_then_growths_in_vm_order():
    prev = np.array([1.0, 1.0, 1.0])
    new = np.array([2.0, 0.0, 1.5])
    out, ref = admit(prev, new, np.zeros(3, dtype=np.int64), np.array([3.5]))
    # Base after the shrink: 1 + 0 + 1 = 2; room 1.5: VM 0 (+1) fits, VM 2 (+0.5) fits.
    assert out.tolist() == [2.0, 0.0, 1.5] and not ref.any()
    out, ref = admit(prev, new, np.zeros(3, dtype=np.int64), np.array([3.2]))
    assert out.tolist() == [2.0, 0.0, 1.0] and ref.tolist() == [False, False, True]


def test_place_first_fit_and_bad_specs():
    tr, _, _ = _scenario()
    # Requests 1, 1, 2, 2 cores on nodes of 2 cores x 1.5 = 3: [a, b] on node 0 (2 <= 3),
    # c does not fit there (4 > 3): node 1; d: node 2 (node 1 would hold 4 > 3).
    cl = parse_cluster("nodes=3,cpu=2,mem=64,overcommit=1.5", tr)
    assert cl.node_of.tolist() == [0, 0, 1, 2]
    r = simulate(tr, Static(), cluster=cl)
    assert r.extra["refused_resizes"] == 0
    for bad in ("nodes=2", "nodes=x,cpu=2,mem=4", "nodes=2,cpu=2,mem=4,zone=a",
                "nodes=2,cpu=-1,mem=4", "nodes=0,cpu=2,mem=4", "nodes=2,cpu=2,mem=4,cpu=3",
                "nodes=2,cpu=2,mem=4,overcommit=nan"):
        with pytest.raises(InputError):
            parse_cluster(bad, tr)


def test_cli_cluster_json_and_bad_spec():
    import json

    from typer.testing import CliRunner

    from adares.cli import app

    runner = CliRunner()
    args = ["replay", "--trace", "synthetic:vms=6,days=0.5,seed=1", "--policies", "static,threshold"]
    res = runner.invoke(app, args + ["--cluster", "nodes=2,cpu=4,mem=16,overcommit=1.5", "--json"])
    assert res.exit_code == 0, res.output
    pol = json.loads(res.stdout)["policies"]
    for r in pol.values():
        assert {"refused_resizes", "cpu_contention_share", "node_cpu_utilization",
                "node_mem_utilization", "node_cpu_allocated", "node_mem_allocated"} <= set(r)
    res = runner.invoke(app, args + ["--cluster", "nodes=2,cpu=4"])
    assert res.exit_code == 2 and "adares: error: --cluster" in res.stderr
    # The log lines before it (the trace loaded) and one error line, no traceback.
    assert [ln for ln in res.stderr.splitlines() if "adares" in ln and "error" in ln] == \
        [res.stderr.strip().splitlines()[-1]] and "Traceback" not in res.stderr


def test_progress_reports_steps_to_the_end():
    from adares.synthetic import generate

    tr = generate(3, 1, seed=0)  # 288 steps: a call every 1 step (288 // 200), then the end
    calls = []
    simulate(tr, Static(), progress=lambda done, total: calls.append((done, total)))
    assert calls[0] == (0, 288) and calls[-1] == (288, 288)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls) and len(calls) == 289
