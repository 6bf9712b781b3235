"""Remediation bookkeeping and limits: what is under repair, what machines failed before, what is allowed now.

Everything here is pure: :class:`RemediationState` is the controller's memory (saved as JSON in its
state volume), and the functions decide from it and the clock.

What each verdict action does, once the Slurm node is drained by the controller and idle:

* ``restart-pod``: the worker pod is deleted; its StatefulSet creates it again on the same machine.
  Done when a new pod runs and its slurmd answers.
* ``replace-machine``: the Kubernetes node is cordoned (``slonk.dev/cordoned-by``), annotated
  ``slonk.dev/replace-machine`` (reason, fingerprint, providerID) and the pod is deleted; then, on
  gcp/aws with ``cloudActions``, the controller asks the cloud once for a new machine in that slot
  (:mod:`slonk_infra.ops.replace`): GKE ``instances.reportHostAsFaulty`` for machine types the
  catalog marks ``faulty_host_report`` (A3/A4), else ``instanceGroupManagers.recreateInstances``;
  EKS ``autoscaling:SetInstanceHealth`` Unhealthy. The call, its attempts and its outcome are kept
  in the remediation record. The old machine stays cordoned while the new pod waits, until its Node
  shows another machine (a new Node object or a new boot ID: :func:`machine_changed`); then the
  cordon is lifted and the pod returns. Done when the pod runs again on another machine: a new node
  object, a new boot ID or a new fingerprint. Without a cloud (local, ``cloudActions: false``) the
  machine stays cordoned and annotated for the cloud's own repair or a person (GKE auto-repair acts
  only on NotReady nodes, not on cordons; EKS node auto repair on the node monitoring agent's
  conditions).
* ``needs-person``: nothing is done but keeping the node drained and its machine cordoned.

Limits: at most ``maxActionsPerWindow`` actions per ``windowSeconds`` cluster-wide, and at most
``maxPoolFraction`` of a pool (at least one node) under remediation at once. A machine whose
fingerprint was remediated within ``repeatWindowSeconds`` and fails again is kept out: drained,
cordoned, reason "repeat offender", until the window has passed since its last failure.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from slonk_infra.ops.config import RemediationSpec
from slonk_infra.ops.model import KubeNode, KubePod, SlurmNode


@dataclass
class Remediation:
    """One node under repair."""

    node: str
    action: str  # restart-pod | replace-machine
    fingerprint: str
    reason: str
    started: float
    pool: str = ""
    pod_uid: str = ""
    kube_node: str = ""
    kube_node_uid: str = ""
    boot_id: str = ""
    timed_out: bool = False
    provider_id: str = ""  # the machine as its Node named it when the repair started
    machine_type: str = ""  # its node.kubernetes.io/instance-type
    verdict_time: float = 0.0  # when the failing verdict was made (its time, else first seen)
    # The cloud call of a replace-machine: made once per remediation, after the cordon and the drain.
    cloud_call: str = ""  # the call the cloud accepted (reportHostAsFaulty, recreateInstances, SetInstanceHealth)
    cloud_at: float = 0.0  # when it was accepted
    cloud_attempts: int = 0  # calls tried, failed ones included
    cloud_next: float = 0.0  # no call before this time (backoff after a failure)
    cloud_error: str = ""  # the last failure


@dataclass
class KeptOut:
    """A machine that failed again soon after a remediation."""

    fingerprint: str
    node: str
    reason: str
    since: float


@dataclass
class RemediationState:
    """The controller's memory between ticks and restarts."""

    active: dict[str, Remediation] = field(default_factory=dict)  # Slurm node -> repair in progress
    history: dict[str, list[float]] = field(default_factory=dict)  # fingerprint -> remediation times
    # fingerprint -> the pod its last remediation acted on: a failure seen on any other pod is "again"
    # (timestamps alone cannot tell: Kubernetes keeps creation times to the second).
    pods: dict[str, str] = field(default_factory=dict)
    kept_out: dict[str, KeptOut] = field(default_factory=dict)  # fingerprint -> hold
    actions: list[float] = field(default_factory=list)  # times of actions taken (rate limit)
    # Pool sizing (slonk_infra.ops.pools): the Slurm nodes last seen on each Kubernetes node, so a machine
    # whose pod is gone is still known to have run them; and machines handed to the cloud for removal.
    hosts: dict[str, list[str]] = field(default_factory=dict)  # kube node -> Slurm nodes last on it
    removals: dict[str, float] = field(default_factory=dict)  # kube node -> when remove() was accepted

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form (state.json)."""
        return {
            "active": {k: asdict(v) for k, v in sorted(self.active.items())},
            "history": {k: list(v) for k, v in sorted(self.history.items())},
            "pods": dict(sorted(self.pods.items())),
            "keptOut": {k: asdict(v) for k, v in sorted(self.kept_out.items())},
            "actions": list(self.actions),
            "hosts": {k: list(v) for k, v in sorted(self.hosts.items())},
            "removals": dict(sorted(self.removals.items())),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RemediationState:
        """Inverse of :meth:`to_json`; unknown keys are ignored so old files still load."""
        return cls(
            active={k: Remediation(**v) for k, v in (data.get("active") or {}).items()},
            history={k: [float(t) for t in v] for k, v in (data.get("history") or {}).items()},
            pods={str(k): str(v) for k, v in (data.get("pods") or {}).items()},
            kept_out={k: KeptOut(**v) for k, v in (data.get("keptOut") or {}).items()},
            actions=[float(t) for t in data.get("actions") or []],
            hosts={str(k): [str(n) for n in v] for k, v in (data.get("hosts") or {}).items()},
            removals={str(k): float(v) for k, v in (data.get("removals") or {}).items()},
        )

    def prune(self, now: float, spec: RemediationSpec) -> None:
        """Forgets what no limit looks at any more."""
        self.actions = [t for t in self.actions if now - t < spec.window_seconds]
        self.history = {
            fp: kept
            for fp, times in self.history.items()
            if (kept := [t for t in times if now - t < spec.repeat_window_seconds])
        }
        self.pods = {fp: uid for fp, uid in self.pods.items() if fp in self.history}
        self.kept_out = {
            fp: k
            for fp, k in self.kept_out.items()
            if now - last_failure(self, fp, k.since) < spec.repeat_window_seconds
        }


def last_failure(state: RemediationState, fingerprint: str, default: float) -> float:
    """Time of the latest recorded failure of a machine."""
    return max([default, *state.history.get(fingerprint, [])])


def repeat_offender(state: RemediationState, fingerprint: str, pod_uid: str, now: float, spec: RemediationSpec) -> bool:
    """The machine was remediated within the repeat window, and this failure is on a later pod."""
    recent = any(now - t < spec.repeat_window_seconds for t in state.history.get(fingerprint, []))
    return recent and state.pods.get(fingerprint) != pod_uid


def pool_limit(pool_size: int, spec: RemediationSpec) -> int:
    """Nodes of a pool that may be under remediation at once: the fraction rounded down, at least one."""
    return max(1, math.floor(spec.max_pool_fraction * pool_size + 1e-9))


def blocked_by(
    state: RemediationState, pool: str, pool_size: int, now: float, spec: RemediationSpec
) -> tuple[str, str] | None:
    """(limit name, explanation) of the limit that forbids one more action now, or None."""
    recent = [t for t in state.actions if now - t < spec.window_seconds]
    if len(recent) >= spec.max_actions_per_window:
        return "rate", f"{len(recent)} actions in the last {spec.window_seconds}s (max {spec.max_actions_per_window})"
    busy = sum(1 for r in state.active.values() if r.pool == pool and not r.timed_out)
    limit = pool_limit(pool_size, spec)
    if busy >= limit:
        return "pool", f"pool {pool or '?'}: {busy} of {pool_size} nodes under remediation (max {limit})"
    return None


def start(state: RemediationState, rem: Remediation) -> None:
    """Records an action taken now."""
    state.active[rem.node] = rem
    state.history.setdefault(rem.fingerprint, []).append(rem.started)
    state.pods[rem.fingerprint] = rem.pod_uid
    state.actions.append(rem.started)


def machine_changed(rem: Remediation, node: KubeNode | None) -> bool:
    """The Kubernetes node the repair started on now stands for another machine: a new Node object under
    the same name (a recreated VM) or a new boot (a VM moved to a new host). False while it is unknown."""
    if node is None or node.name != rem.kube_node:
        return False
    return (bool(rem.kube_node_uid) and node.uid != rem.kube_node_uid) or (
        bool(rem.boot_id) and bool(node.boot_id) and node.boot_id != rem.boot_id
    )


def finished(rem: Remediation, pod: KubePod | None, node: KubeNode | None, slurm: SlurmNode | None, fp: str) -> bool:
    """The repair is over: a new pod runs, its slurmd registered since and, for a new machine, the machine changed."""
    if pod is None or pod.uid == rem.pod_uid or pod.deleting or pod.phase != "Running":
        return False
    # slurmctld notices a dead slurmd only after SlurmdTimeout: "responding" alone may describe the old pod.
    if slurm is None or not slurm.responding or slurm.slurmd_start < math.floor(rem.started):
        return False
    if rem.action != "replace-machine":
        return True
    if node is None:
        return False
    return (
        pod.node_name != rem.kube_node
        or node.uid != rem.kube_node_uid
        or (bool(node.boot_id) and node.boot_id != rem.boot_id)
        or (bool(fp) and fp != rem.fingerprint)
    )
