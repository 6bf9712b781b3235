"""What Kubernetes says about a worker's machine: termination, maintenance, bad conditions, a cordon, a verdict.

Pure functions over :mod:`slonk_infra.ops.model` records. Each signal becomes a drain reason text;
the first (most urgent) one found names the drain.
"""

from __future__ import annotations

import dataclasses

from slonk_infra.ops.config import SignalsSpec
from slonk_infra.ops.model import KubeNode, KubePod, SlurmNode, Verdict, VerdictError, parse_verdict
from slonk_infra.vocab import HEALTH


def kube_signal(node: KubeNode | None, spec: SignalsSpec, now: float) -> str | None:  # noqa: C901  one branch per signal, first match wins
    """The reason Kubernetes gives to keep this machine out of Slurm, or None.

    Order: termination, maintenance, announced maintenance within the lead time, a failing node
    condition, a cordon set by someone other than the controller.
    """
    if node is None:
        return None
    keys = {t.key for t in node.taints}
    for key in spec.termination_taints:
        if key in keys:
            return f"node terminating ({key})"
    for key in spec.maintenance_taints:
        if key in keys:
            return f"host maintenance ({key})"
    for key, value in spec.maintenance_labels.items():
        if key in node.labels and (not value or node.labels[key] == value):
            return f"host maintenance ({key}={node.labels[key]})"
    label = spec.scheduled_maintenance_label
    if label and spec.scheduled_maintenance_lead_seconds and label in node.labels:
        try:
            start = float(node.labels[label])
        except ValueError:
            start = None
        if start is not None and start - now <= spec.scheduled_maintenance_lead_seconds:
            return f"host maintenance scheduled at {int(start)} ({label})"
    for cond in spec.failing_conditions:
        status = node.conditions.get(cond)
        if status is not None and status != "True":
            return f"node condition {cond}={status}"
    if node.unschedulable and not node.cordoned_by_us:
        return "kubernetes node cordoned"
    return None


def _read(text: str | None, source: str) -> Verdict | None:
    if not text:
        return None
    try:
        return parse_verdict(text, source)
    except VerdictError:
        return None


def current_verdict(pod: KubePod, node: KubeNode | None, slurm: SlurmNode | None) -> Verdict | None:
    """The newest verdict that is about this pod's machine and not older than the pod.

    Read from the pod's ``slonk.dev/health`` annotation (no time needed: it lives and dies with the
    pod), else the Kubernetes node's annotation, else the Slurm node's comment (both need a
    ``time`` at or after the pod's creation: an older one judged an earlier pod). An unreadable
    annotation, or one naming another node, counts as none.
    """
    candidates: list[Verdict] = []
    on_pod = _read(pod.annotations.get(HEALTH), "pod")
    if on_pod is not None:
        candidates.append(on_pod if on_pod.time is not None else _with_time(on_pod, pod.created))
    on_node = _read(node.annotations.get(HEALTH) if node else None, "node")
    if on_node is not None and on_node.time is not None:
        candidates.append(on_node)
    comment = slurm.comment if slurm is not None and slurm.comment.startswith("{") else None
    on_slurm = _read(comment, "slurm")
    if on_slurm is not None and on_slurm.time is not None:
        candidates.append(on_slurm)
    fresh = [v for v in candidates if v.time is not None and v.time >= pod.created and v.node in ("", pod.name)]
    if not fresh:
        return None
    return max(fresh, key=lambda v: v.time or 0.0)


def _with_time(v: Verdict, t: float) -> Verdict:
    return dataclasses.replace(v, time=t)
