"""Sizing the worker pools' machines to their StatefulSets (gcp/aws), pure: which pools to look at, which
machines may go.

Pulumi creates each GPU/CPU pool at ``nodes`` machines and then leaves its size to the controller
(the adapters ignore later size changes). Each tick the controller compares, per worker group, the
StatefulSet's ``spec.replicas`` with the group's Kubernetes nodes (``slonk.dev/pool=<group>``, not
counting machines already handed to the cloud for removal); only where they differ does it ask the
cloud anything:

* **Grow at once**: the cloud's target size is below the replicas -> ``grow`` to the replicas, when
  the pool can launch machines (an EKS Capacity Block not yet active cannot).
* **Shrink only by emptied machines**: the StatefulSet removes its highest ordinals first, each pod
  draining its Slurm node in its preStop; a machine is removed (one named machine per call, the
  cloud lowering its target by one) only when, on this tick's records:

  - no worker pod is on it (terminating ones included) and no pod of its group waits for a machine;
  - the Slurm nodes last seen on it (:attr:`RemediationState.hosts`) run no job, unless their pod now
    runs on another machine;
  - it is older than ``scaleInGraceSeconds`` (a machine that just joined has no pod yet);
  - it is not under a remediation, nor cordoned by someone else (a person's machine);
  - never more than the cloud's target above the replicas, nor more than the listed machines above
    them, nor more than ``maxRemovalsPerTick`` in the tick.

* **Never while the cloud changes the pool**: right before a grow or a removal the cloud is asked
  whether it is changing the pool itself (``pool_change``: an EKS managed node group UPDATING, a GKE
  node pool not RUNNING or one of its MIGs not stable). An update surges machines that stay empty while
  the old ones drain, then lowers the target again; removing them would leave the pool below the
  replicas, the cloud picking the victims. Such a pool is left alone for the tick (decision
  :data:`POOL_CHANGING`); once the update is over and its surge gone the counts agree again.

So the order is always: StatefulSet scaled, pods of the highest ordinals gone, then their machines.
A machine handed over for removal is remembered (:attr:`RemediationState.removals`) until its Node
leaves, or for :data:`REMOVAL_TIMEOUT` seconds, after which it counts again.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from slonk_infra.ops.cloud import CloudKind, MachineRef, machine_of
from slonk_infra.ops.config import OperationsSpec
from slonk_infra.ops.model import KubeNode, KubePod, SlurmJob, SlurmNode, WorkerSet
from slonk_infra.ops.remediation import RemediationState
from slonk_infra.vocab import POOL_LABEL

# A removal the cloud accepted but whose Node is still listed this long after is counted again (a VM
# deletion takes minutes; an hour means it did not happen).
REMOVAL_TIMEOUT = 3600.0
POOL_CHANGING = "pool-changing"
"""The decision recorded for a pool the cloud is changing itself: no grow, no removal that tick."""
# Job states that hold nodes (squeue(1) JOB STATE CODES).
ACTIVE_JOB_STATES = frozenset(
    {"RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT", "RESIZING"}
)


@dataclass(frozen=True)
class PoolView:
    """A worker group whose machines and replicas differ this tick."""

    group: str
    pool: str  # the cloud's node pool / node group name
    replicas: int  # the StatefulSet's spec.replicas
    nodes: tuple[KubeNode, ...]  # the group's Kubernetes nodes, less those handed over for removal

    @property
    def listed(self) -> int:
        """Machines that count."""
        return len(self.nodes)


@dataclass(frozen=True)
class Candidate:
    """A machine that may be removed."""

    node: KubeNode
    machine: MachineRef


def remember_hosts(state: RemediationState, pods: Iterable[KubePod], kube_nodes: Collection[str]) -> None:
    """Records which Slurm nodes each Kubernetes node carries now; keeps the last record of a node whose
    pods are gone; forgets nodes no longer listed (and removals whose node has left)."""
    now_on: dict[str, list[str]] = {}
    for p in pods:
        if p.node_name:
            now_on.setdefault(p.node_name, []).append(p.name)
    # New dicts, never edits: the reconcile step shares these with the previous tick's memory.
    hosts = {k: v for k, v in state.hosts.items() if k in kube_nodes}
    hosts.update((k, sorted(v)) for k, v in now_on.items())
    state.hosts = hosts
    state.removals = {k: t for k, t in state.removals.items() if k in kube_nodes}


def survey(
    node_pools: Mapping[str, str],
    sets: Sequence[WorkerSet],
    kube_nodes: Mapping[str, KubeNode],
    state: RemediationState,
    now: float,
) -> list[PoolView]:
    """The groups (of ``node_pools``, with a StatefulSet) whose counted machines differ from their replicas."""
    state.removals = {k: t for k, t in state.removals.items() if now - t < REMOVAL_TIMEOUT}
    by_group: dict[str, list[KubeNode]] = {}
    for n in kube_nodes.values():
        group = n.labels.get(POOL_LABEL, "")
        if group in node_pools and n.name not in state.removals:
            by_group.setdefault(group, []).append(n)
    views = []
    for ws in sorted(sets, key=lambda s: s.group):
        if ws.group not in node_pools:
            continue
        nodes = tuple(sorted(by_group.get(ws.group, []), key=lambda n: n.name))
        if len(nodes) != ws.replicas:
            views.append(PoolView(ws.group, node_pools[ws.group], ws.replicas, nodes))
    return views


def busy_slurm_nodes(slurm_nodes: Iterable[SlurmNode], jobs: Iterable[SlurmJob]) -> frozenset[str]:
    """Slurm nodes that hold a job: allocated in their own record, or named by an active job."""
    busy = {n.name for n in slurm_nodes if n.busy}
    for j in jobs:
        if j.state in ACTIVE_JOB_STATES:
            busy.update(j.nodes)
    return frozenset(busy)


def candidates(
    view: PoolView,
    cloud: CloudKind,
    pods: Iterable[KubePod],
    busy: Collection[str],
    state: RemediationState,
    spec: OperationsSpec,
    now: float,
) -> tuple[list[Candidate], dict[str, str]]:
    """The machines of ``view`` that may be removed now, preferred first; and why each other one may not."""
    pods = list(pods)
    on_node: dict[str, list[str]] = {}
    for p in pods:
        if p.node_name:
            on_node.setdefault(p.node_name, []).append(p.name)
    where = {p.name: p.node_name for p in pods if not p.deleting}
    waiting = sorted(p.name for p in pods if p.pool == view.group and not p.node_name and not p.deleting)
    repairing = {r.kube_node for r in state.active.values()}
    out: list[Candidate] = []
    held: dict[str, str] = {}
    for n in view.nodes:
        if waiting:
            held[n.name] = f"worker pod {waiting[0]} waits for a machine"
        elif n.name in on_node:
            held[n.name] = f"worker pod {', '.join(sorted(on_node[n.name]))} on it"
        elif n.name in repairing:
            held[n.name] = "under remediation"
        elif n.unschedulable and not n.cordoned_by_us:
            held[n.name] = "cordoned by someone else"
        elif not n.created or now - n.created < spec.scale_in_grace_seconds:
            held[n.name] = f"joined less than {spec.scale_in_grace_seconds}s ago"
        elif jobs := [s for s in state.hosts.get(n.name, []) if s in busy and where.get(s, n.name) == n.name]:
            held[n.name] = f"Slurm node {', '.join(jobs)} runs a job"
        elif (machine := machine_of(n.provider_id)) is None or machine.cloud != cloud:
            held[n.name] = f"providerID {n.provider_id!r} names no {cloud} machine"
        else:
            out.append(Candidate(n, machine))
    # Machines the controller cordoned (drained, probably bad) go first; then by name, for a stable order.
    out.sort(key=lambda c: (not c.node.cordoned_by_us, c.node.name))
    return out, held


def removals_allowed(view: PoolView, cloud_size: int, budget: int) -> int:
    """How many machines of ``view`` may go: never below the replicas, on the cloud's count or ours."""
    return max(0, min(cloud_size - view.replicas, view.listed - view.replicas, budget))
