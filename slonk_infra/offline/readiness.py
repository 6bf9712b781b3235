"""Whether a deployed Slurm cluster is really ready: what ``slonk-infra status`` reads and prints.

``pulumi up`` does not wait for the worker StatefulSets (they carry ``pulumi.com/skipAwait``: a GPU pool
may take 40 minutes, a reservation may not be active yet), so a finished deploy says only that every
object exists. This module asks the Kubernetes API, read-only, what is running: each workload of the
layer (workers per group, controller, login, slurmrestd, an NFS server, the operations controller) with
its ready and desired pods, the login Service's address, and, where the operations controller runs,
the Slurm state it copies onto each worker pod (``slonk.dev/slurm-state``, absent while the node is
usable). No ``kubectl exec``, no Slurm client: a person or a CI job needs only read access to the
namespace.

The functions take the official client's API objects (``kubernetes.client.AppsV1Api`` and
``CoreV1Api``) or anything with the same list/read methods, so tests hand them fakes.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from slonk_infra import vocab
from slonk_infra.plan import naming

# Every object of the layer, the operations controller's included (its name label is its own).
PART_OF_SELECTOR = f"{vocab.PART_OF_LABEL}={vocab.PART_OF}"
WORKER_SELECTOR = f"{vocab.COMPONENT}={vocab.WORKER_COMPONENT},{vocab.NAME_LABEL}={vocab.APP}"
# What a worker pod without the Slurm state annotation is, where the operations controller runs.
USABLE = "usable"
# Order of the roles in the report: what users reach first, workers last.
ROLE_ORDER = (
    vocab.CONTROLLER_COMPONENT,
    vocab.LOGIN_COMPONENT,
    vocab.RESTAPI_COMPONENT,
    vocab.NFS_COMPONENT,
    vocab.OPERATIONS_COMPONENT,
    vocab.WORKER_COMPONENT,
)


@dataclass(frozen=True)
class Workload:
    """One StatefulSet or Deployment of the layer and how many of its pods are ready."""

    kind: str
    """StatefulSet or Deployment."""
    name: str
    """Its name (a worker StatefulSet is named for its group)."""
    role: str
    """Its ``app.kubernetes.io/component`` label: controller, login, worker, ..."""
    desired: int
    """``spec.replicas``."""
    ready: int
    """``status.readyReplicas`` (0 while none is)."""

    @property
    def is_ready(self) -> bool:
        """Every desired pod is ready."""
        return self.ready >= self.desired


@dataclass(frozen=True)
class ClusterStatus:
    """What is running in the Slurm namespace, read from the Kubernetes API."""

    namespace: str
    """The namespace read."""
    workloads: tuple[Workload, ...]
    """The layer's StatefulSets and Deployments, controller first, workers last."""
    login_type: str | None
    """The login Service's type (LoadBalancer, ClusterIP), None when there is no login Service."""
    login_address: str | None
    """The login load balancer's hostname or IP once the cloud gave one; the ClusterIP of a ClusterIP
    Service; None while a load balancer has no address yet."""
    slurm_states: dict[str, Counter[str]] = field(default_factory=dict)
    """Per worker group, how many worker pods carry each Slurm state (``usable`` where the operations
    controller wrote none); empty when not asked for."""

    @property
    def workers(self) -> tuple[Workload, ...]:
        """The worker StatefulSets."""
        return tuple(w for w in self.workloads if w.role == vocab.WORKER_COMPONENT)

    @property
    def is_ready(self) -> bool:
        """Every workload has all its pods ready, there is a controller, and login has an address."""
        has_controller = any(w.role == vocab.CONTROLLER_COMPONENT for w in self.workloads)
        login_ok = self.login_type is None or self.login_address is not None
        return has_controller and login_ok and all(w.is_ready for w in self.workloads)


def _get(obj: Any, *names: str) -> Any:
    """A nested attribute of a client object (``None`` part way stops there)."""
    for name in names:
        if obj is None:
            return None
        obj = getattr(obj, name, None)
    return obj


def _workload(kind: str, item: Any) -> Workload:
    labels = _get(item, "metadata", "labels") or {}
    return Workload(
        kind=kind,
        name=str(_get(item, "metadata", "name")),
        role=str(labels.get(vocab.COMPONENT, "")),
        desired=int(_get(item, "spec", "replicas") or 0),
        ready=int(_get(item, "status", "ready_replicas") or 0),
    )


def _order(workload: Workload) -> tuple[int, str]:
    role = ROLE_ORDER.index(workload.role) if workload.role in ROLE_ORDER else len(ROLE_ORDER)
    return role, workload.name


def read_workloads(apps: Any, namespace: str) -> tuple[Workload, ...]:
    """The layer's StatefulSets and Deployments in ``namespace``, controller first, workers last."""
    found = [
        _workload("StatefulSet", s)
        for s in apps.list_namespaced_stateful_set(namespace, label_selector=PART_OF_SELECTOR).items
    ]
    found += [
        _workload("Deployment", d)
        for d in apps.list_namespaced_deployment(namespace, label_selector=PART_OF_SELECTOR).items
    ]
    return tuple(sorted(found, key=_order))


def read_login(core: Any, namespace: str) -> tuple[str | None, str | None]:
    """The login Service's type and address (see :attr:`ClusterStatus.login_address`)."""
    from kubernetes.client.exceptions import ApiException

    try:
        service = core.read_namespaced_service(naming.LOGIN, namespace)
    except ApiException as err:
        if err.status == 404:
            return None, None
        raise
    kind = str(_get(service, "spec", "type") or "ClusterIP")
    if kind != "LoadBalancer":
        return kind, _get(service, "spec", "cluster_ip")
    for ingress in _get(service, "status", "load_balancer", "ingress") or []:
        address = _get(ingress, "hostname") or _get(ingress, "ip")
        if address:
            return kind, str(address)
    return kind, None


def read_slurm_states(core: Any, namespace: str) -> dict[str, Counter[str]]:
    """Per worker group, the Slurm states the operations controller wrote on its pods."""
    out: dict[str, Counter[str]] = {}
    for pod in core.list_namespaced_pod(namespace, label_selector=WORKER_SELECTOR).items:
        labels = _get(pod, "metadata", "labels") or {}
        annotations = _get(pod, "metadata", "annotations") or {}
        group = str(labels.get(vocab.GROUP_LABEL, "?"))
        out.setdefault(group, Counter())[str(annotations.get(vocab.SLURM_STATE) or USABLE)] += 1
    return out


def read_status(apps: Any, core: Any, namespace: str, slurm_states: bool = False) -> ClusterStatus:
    """Everything ``slonk-infra status`` shows, read with list/read calls only."""
    login_type, login_address = read_login(core, namespace)
    return ClusterStatus(
        namespace=namespace,
        workloads=read_workloads(apps, namespace),
        login_type=login_type,
        login_address=login_address,
        slurm_states=read_slurm_states(core, namespace) if slurm_states else {},
    )


def format_status(status: ClusterStatus) -> str:
    """The report, one line per workload, then login, then the verdict."""
    lines = [f"namespace {status.namespace}"]
    if not status.workloads:
        lines.append("  no slonk-infra workloads here (wrong namespace, context or kubeconfig?)")
    width = max((len(w.name) for w in status.workloads), default=0)
    for w in status.workloads:
        mark = "ready" if w.is_ready else "NOT READY"
        line = f"  {w.role:10} {w.name:{width}}  {w.ready}/{w.desired} {mark}"
        states = status.slurm_states.get(w.name) if w.role == vocab.WORKER_COMPONENT else None
        if states:
            line += "  slurm: " + ", ".join(f"{n} {s}" for s, n in sorted(states.items()))
        lines.append(line)
    if status.login_type is not None:
        where = status.login_address or "no address yet (the cloud is still creating the load balancer)"
        lines.append(f"  login      {status.login_type} {where}")
    ready = status.is_ready
    lines.append("ready" if ready else "not ready: " + _waiting_for(status))
    return "\n".join(lines)


def _waiting_for(status: ClusterStatus) -> str:
    waiting = [f"{w.name} {w.ready}/{w.desired}" for w in status.workloads if not w.is_ready]
    if not any(w.role == vocab.CONTROLLER_COMPONENT for w in status.workloads):
        waiting.insert(0, "no controller")
    if status.login_type is not None and status.login_address is None:
        waiting.append("login address")
    return ", ".join(waiting)
