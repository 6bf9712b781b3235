"""The naming chain: every name derived from a pool or TPU slice, in one place.

A worker group (a pool, or one TPU slice) named ``g`` gives: Kubernetes node pool / node group ``g``,
StatefulSet ``g``, pods ``g-0 .. g-(n-1)``, Slurm node names equal to the pod hostnames, hostlist
``g-[0-(n-1)]``, topology switch ``sw-g`` and block ``bl-g``. The pod hostname is the Slurm node
name, so Slurm and Kubernetes agree on identity without any mapping table.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import hostlist

from slonk_infra.declaration.model import DNS_LABEL

CONTROLLER = "slurmctld"
# The backup controller's StatefulSet (controller.replicas: 2), rolled after the primary's: see
# slonk_infra.kube.controller.statefulsets.
CONTROLLER_STANDBY = f"{CONTROLLER}-standby"
LOGIN = "login"
WORKERS_SERVICE = "slurm-workers"
ROOT_SWITCH = "root"
SYSTEM_POOL = "slonk-system"  # the node pool / group the cloud layers create for controller and login
# Names the Slurm layer uses for itself; a pool may not take them.
RESERVED = frozenset(
    {CONTROLLER, CONTROLLER_STANDBY, LOGIN, WORKERS_SERVICE, SYSTEM_POOL, "slurmrestd", "slurmdbd", "default", "all"}
)
# StatefulSet pods carry controller-revision-hash=<sts>-<10 chars>, a 63-char label value.
MAX_STATEFULSET = 52
SLURM_FEATURE = re.compile(r"^[A-Za-z0-9_.-]+$")


def slice_group(base: str, index: int) -> str:
    """Worker group name of the ``index``-th slice of a TPU slice declaration."""
    return f"{base}-{index}"


def statefulset(group: str) -> str:
    """Worker StatefulSet name."""
    return group


def node_pool(group: str) -> str:
    """GKE node pool / EKS node group name."""
    return group


def pod(group: str, ordinal: int) -> str:
    """Pod name (and hostname, and Slurm node name) of one worker."""
    return f"{statefulset(group)}-{ordinal}"


def slurm_nodes(group: str, count: int) -> list[str]:
    """Slurm node names of a group, in ordinal order."""
    return [pod(group, i) for i in range(count)]


def node_hostlist(group: str, count: int) -> str:
    """Compressed Slurm hostlist of a group's nodes, e.g. ``gpu-[0-7]``.

    A group's ordinals are always 0..count-1, so the expression is written directly rather than by
    expanding and compressing thousands of names (what ``compress`` would return, verified in tests).
    """
    return pod(group, 0) if count == 1 else f"{statefulset(group)}-[0-{count - 1}]"


def compress(names: Sequence[str]) -> str:
    """Slurm hostlist expression for node names (python-hostlist, same syntax as Slurm)."""
    return str(hostlist.collect_hostlist(list(names)))


def expand(expression: str) -> list[str]:
    """Node names of a Slurm hostlist expression."""
    return list(hostlist.expand_hostlist(expression))


def switch(group: str) -> str:
    """Leaf switch of a group in topology/tree."""
    return f"sw-{group}"


def block(group: str, index: int = 0) -> str:
    """Block name of a group (or of its ``index``-th NVLink domain) in topology/block."""
    return f"bl-{group}" if index == 0 else f"bl-{group}-{index}"


def controller_hosts(namespace: str, replicas: int) -> list[str]:
    """Addresses of every controller, primary first (slurm.conf's SlurmctldHost order): each pod's own
    ClusterIP Service (:func:`controller_service`), whose name and address stay while the pod is replaced.

    A pod's own DNS name (``slurmctld-0.slurmctld...``, the headless Service) leads to a new address each
    time the pod is made again, and is gone from DNS between the pod object's deletion and its
    replacement's address (for good while no node can take it). A Slurm client resolves the controller
    once per command and then retries that address every second for ``MessageTimeout`` (30 s), so a
    command started as the pod went kept trying the gone address for 30 s, and a cluster DNS that caches
    answers (CoreDNS's default Corefile: ``ttl 30``, ``cache 30``) hands out the old address for as long.
    Before 23.11.2 a client whose primary's name does not resolve gives up instead of trying the backup.
    A Service's name always resolves to the same address, and the client's next try after the new pod is
    up reaches it (with two controllers, a client meanwhile goes on to the backup). With no pod behind the
    Service the connection is refused at once where the dataplane rejects it (kube-proxy's iptables and
    IPVS modes; Cilium answers with ICMP unreachable on kernels from 5.2, cilium/cilium#28157); where it
    is dropped instead, each try waits ``TCPTimeout`` (2 s) first.

    The controller's own probes do not go through its Service (a pod reaching itself through its own
    Service is hairpin traffic, which each network plugin and its NetworkPolicy handle their own way):
    slurmctld.sh writes a copy of slurm.conf naming the pod itself at 127.0.0.1 (``vocab.SELF_CONF``).

    These are absolute names (a trailing dot): with the pods' ``ndots:5`` a four-dot name is otherwise first
    tried under every search domain, and each client RPC, slurmd message and the backup's ping of the
    primary would wait on those lookups; a slow answer to one of them delays a takeover.
    """
    return [f"{controller_service(i)}.{namespace}.svc.cluster.local." for i in range(replicas)]


def controller_pod(index: int) -> str:
    """Pod (and host) name of controller ``index`` in slurm.conf's SlurmctldHost order: the primary is
    ``slurmctld-0``, the backup the one pod of its own StatefulSet, ``slurmctld-standby-0``."""
    return f"{CONTROLLER}-0" if index == 0 else f"{CONTROLLER_STANDBY}-{index - 1}"


def controller_service(index: int) -> str:
    """Name of the ClusterIP Service of controller ``index`` (``slurmctld-0``, ``slurmctld-1``).

    The backup's keeps the name it had when both controllers were one StatefulSet (its pod was
    ``slurmctld-1``): running workers keep the slurm.conf they fetched (before 25.11 nothing pushes a new
    one to a running slurmd on 23.11-25.05), and the address it names must still lead to the backup.
    """
    return f"{CONTROLLER}-{index}"


def state_subpath(cluster: str) -> str:
    """Where a cluster's controller state lives on a shared filesystem (controller.stateStorage)."""
    return f".slurm/{cluster}/state"


def backups_subpath(cluster: str) -> str:
    """Where a cluster's controller state archives go on a shared filesystem (controller.backup.storage)."""
    return f".slurm/{cluster}/backups"


def workers_domain(namespace: str) -> str:
    """DNS search domain under which every worker pod's hostname resolves."""
    return f"{WORKERS_SERVICE}.{namespace}.svc.cluster.local"


def is_dns_label(name: str, max_len: int = 63) -> bool:
    """True when ``name`` is a DNS-1123 label of at most ``max_len`` characters."""
    return len(name) <= max_len and bool(DNS_LABEL.match(name))
