"""Recommendations operators can apply: VPA ``status.recommendation`` objects (YAML) per workload
and a per-VM resize plan (CSV or JSON), from a policy replayed over a trace.

The recommendation of a policy is its allocation after the last step of the trace. For the VPA
the lower and upper bounds are its recommender's; other policies give target = bounds. Files are
written atomically (temporary file, then rename).
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass

import numpy as np

from adares.errors import InputError
from adares.policies.vpa import VPA
from adares.simulator import simulate
from adares.trace import Trace


@dataclass(frozen=True)
class Recommendations:
    """Per VM (N,) float64: target / lower / upper CPU in cores and memory in bytes, and the
    requests they replace."""

    vm_ids: tuple[str, ...]
    cpu_request: np.ndarray
    mem_request: np.ndarray
    cpu_target: np.ndarray
    mem_target: np.ndarray
    cpu_lower: np.ndarray
    mem_lower: np.ndarray
    cpu_upper: np.ndarray
    mem_upper: np.ndarray


def recommend(trace: Trace, policy_name: str, seed: int = 0) -> Recommendations:
    """Replay ``trace`` under the named policy and read its final recommendation.
    Raises InputError for unknown policy names and for ``clairvoyant`` (it allocates each
    step's known demand, so it has nothing to recommend past the trace's end)."""
    from adares.policies import PolicyOptions, get, make_policy

    if get(policy_name).bound:
        raise InputError(f"{policy_name} knows each step's demand and has no recommendation past "
                         "the trace; pick another --policy")

    pol = make_policy(policy_name, trace, PolicyOptions(seed))
    simulate(trace, pol)
    c, m = pol.allocate(trace.n_steps)  # the allocation it would set next
    c, m = np.asarray(c, dtype=np.float64), np.asarray(m, dtype=np.float64)
    lo_c, lo_m, hi_c, hi_m = c, m, c, m
    if isinstance(pol, VPA):
        r = pol.recommendation()
        c, m = r["target_cpu"] / 1000.0, r["target_memory"]
        lo_c, lo_m = r["lower_cpu"] / 1000.0, r["lower_memory"]
        hi_c, hi_m = r["upper_cpu"] / 1000.0, r["upper_memory"]
    return Recommendations(trace.vm_ids, trace.cpu_request, trace.mem_request, c, m, lo_c, lo_m,
                           hi_c, hi_m)


def _cpu_q(cores: float) -> str:
    return f"{int(np.ceil(cores * 1000 - 1e-9))}m"


def _mem_q(nbytes: float) -> str:
    return str(int(np.ceil(nbytes - 1e-6)))


def _name(vm: str) -> str:
    # Kubernetes object names: lower-case alphanumerics and '-'; the raw id stays in a label.
    s = "".join(ch if ch.isalnum() else "-" for ch in vm.lower()).strip("-")
    return s or "workload"


def vpa_yaml(rec: Recommendations) -> str:
    """One VerticalPodAutoscaler document per VM with ``status.recommendation`` filled in
    (autoscaling.k8s.io/v1 field names; CPU in millicores, memory in bytes)."""
    docs = []
    for i, vm in enumerate(rec.vm_ids):
        res = {k: (_cpu_q(c[i]), _mem_q(m[i])) for k, c, m in (
            ("lowerBound", rec.cpu_lower, rec.mem_lower), ("target", rec.cpu_target, rec.mem_target),
            ("uncappedTarget", rec.cpu_target, rec.mem_target),
            ("upperBound", rec.cpu_upper, rec.mem_upper))}
        lines = ["apiVersion: autoscaling.k8s.io/v1", "kind: VerticalPodAutoscaler", "metadata:",
                 f"  name: {_name(vm)}", "  labels:", f"    adares/workload: {json.dumps(vm)}",
                 "status:", "  recommendation:", "    containerRecommendations:",
                 f"    - containerName: {_name(vm)}"]
        for key, (cq, mq) in res.items():
            lines += [f"      {key}:", f"        cpu: {cq}", f'        memory: "{mq}"']
        docs.append("\n".join(lines))
    return "---\n" + "\n---\n".join(docs) + "\n"


def resize_plan(rec: Recommendations) -> list[dict[str, str | float]]:
    """Per VM: vm_id, current and recommended cpu (cores) and memory (GiB), and the action per
    resource (grow / shrink / keep, keep within 5%)."""
    rows = []
    for i, vm in enumerate(rec.vm_ids):
        row: dict[str, str | float] = {"vm_id": vm}
        for r, cur, new, unit in (("cpu", rec.cpu_request, rec.cpu_target, 1.0),
                                  ("memory_gib", rec.mem_request, rec.mem_target, float(1 << 30))):
            a, b = float(cur[i]) / unit, float(new[i]) / unit
            row[f"{r}_current"] = round(a, 6)
            row[f"{r}_recommended"] = round(b, 6)
            row[f"{r}_action"] = "keep" if abs(b - a) <= 0.05 * a else ("grow" if b > a else "shrink")
        rows.append(row)
    return rows


def plan_text(rows: list[dict[str, str | float]], fmt: str) -> str:
    """The plan as CSV or JSON text."""
    if fmt == "json":
        return json.dumps(rows, indent=1) + "\n"
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()
