"""Objects of the Slurm layer that belong to no single role: namespace, RBAC, priorities, network
policies, disruption budgets, and the ConfigMaps and Secrets every role mounts."""

from __future__ import annotations

import base64

from slonk_infra import vocab
from slonk_infra.declaration.users import user_files
from slonk_infra.kube.inputs import KubeInputs
from slonk_infra.kube.pod import Obj, meta
from slonk_infra.kube.storage import NFS_PORTS
from slonk_infra.plan import ClusterPlan, naming
from slonk_infra.slurm import SlurmFiles

NFS_POLICY = "nfs-server"


def namespace(plan: ClusterPlan) -> Obj:
    """The namespace; workers need privileged pods (see the worker builder), so PSA enforces privileged."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": plan.namespace,
            "labels": {
                **vocab.labels(vocab.NAMESPACE_COMPONENT),
                "pod-security.kubernetes.io/enforce": "privileged",
                "pod-security.kubernetes.io/warn": "baseline",
            },
        },
    }


def rbac(plan: ClusterPlan) -> list[Obj]:
    """Service accounts: none of the Slurm pods talks to the API server, so none gets a token or a Role."""
    ns = plan.namespace
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": meta(vocab.SERVICE_ACCOUNT, ns, vocab.RBAC_COMPONENT),
            "automountServiceAccountToken": False,
        },
        # Read-only view of the cluster's pods for operators' tooling (sinfo vs kubectl), bound to nobody
        # by default: an explicit, minimal Role to bind instead of handing out cluster-admin.
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": meta(vocab.VIEWER_ROLE, ns, vocab.RBAC_COMPONENT),
            "rules": [{"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list", "watch"]}],
        },
    ]


def config_maps(plan: ClusterPlan, files: SlurmFiles, inputs: KubeInputs) -> list[Obj]:
    """Slurm config, topology and scripts. The munge key is never in a ConfigMap."""
    topo = {k: v for k, v in files.config.items() if k.startswith("topology")}
    rest = {k: v for k, v in files.config.items() if k not in topo}
    ns = plan.namespace
    topo_meta = meta(vocab.TOPOLOGY_MAP, ns, vocab.CONFIG_COMPONENT)
    if inputs.topology_labels:
        # Recorded beside the static topology for tools that refine it from the nodes' physical placement.
        topo_meta["annotations"] = {vocab.TOPOLOGY_LABELS: ",".join(inputs.topology_labels)}
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": meta(vocab.CONFIG_MAP, ns, vocab.CONFIG_COMPONENT),
            "data": rest,
        },
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": topo_meta, "data": topo},
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": meta(vocab.SCRIPTS_MAP, ns, vocab.CONFIG_COMPONENT),
            "data": dict(files.scripts),
        },
    ]


def secrets(plan: ClusterPlan, inputs: KubeInputs) -> list[Obj]:
    """The munge key, the declared users, the login host key (and the JWT key with slurmrestd), as Secrets."""
    ns = plan.namespace
    out = [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": meta(vocab.MUNGE_SECRET, ns, vocab.AUTH_COMPONENT),
            "type": "Opaque",
            "data": {vocab.MUNGE_KEY_FILE: inputs.munge_key_b64},
        }
    ]
    # The declared users, identical in every pod; a Secret although little in it is secret, because it
    # decides who gets in.
    users = user_files(plan.declaration.users)
    out.append(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": meta(vocab.USERS_SECRET, ns, vocab.AUTH_COMPONENT),
            "type": "Opaque",
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in users.items()},
        }
    )
    out.append(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": meta(vocab.LOGIN_HOST_KEYS_SECRET, ns, vocab.AUTH_COMPONENT),
            "type": "Opaque",
            "data": {vocab.LOGIN_HOST_KEY_FILE: inputs.login_host_key_b64},
        }
    )
    if plan.declaration.slurm.rest_api:
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": meta(vocab.JWT_SECRET, ns, vocab.AUTH_COMPONENT),
                "type": "Opaque",
                "data": {vocab.JWT_FILE: inputs.jwt_key_b64},
            }
        )
    return out


def priority_classes(plan: ClusterPlan) -> list[Obj]:
    """Workers sit below production workloads, so Kubernetes inference pods can take their nodes."""
    ns = plan.namespace
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": meta(vocab.worker_priority(ns), None, vocab.SCHEDULING_COMPONENT),
            "value": 1000,
            "preemptionPolicy": "Never",
            "globalDefault": False,
            "description": "Slurm worker pods: preemptible by production workloads.",
        },
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": meta(vocab.control_priority(ns), None, vocab.SCHEDULING_COMPONENT),
            "value": 1000000,
            "globalDefault": False,
            "description": "Slurm controller and login pods.",
        },
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": meta(vocab.production_priority(ns), None, vocab.SCHEDULING_COMPONENT),
            "value": 100000,
            "globalDefault": False,
            "description": "Production workloads that may preempt Slurm workers to take their nodes.",
        },
    ]


def network_policies(plan: ClusterPlan) -> list[Obj]:
    """Deny ingress by default; Slurm traffic only between the namespace's pods; SSH to login only; NFS to
    an in-cluster NFS server from anywhere (its clients are the nodes' kubelets)."""
    ns = plan.namespace
    nfs = [nfs_policy(plan)] if any(v.kind == "nfs-server" for v in plan.declaration.storage) else []
    return [
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": meta("default-deny-ingress", ns, vocab.NETWORK_COMPONENT),
            "spec": {"podSelector": {}, "policyTypes": ["Ingress"]},
        },
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            # slurmctld, slurmd and srun's ephemeral I/O ports: reachable from this namespace's pods only.
            "metadata": meta("slurm-internal", ns, vocab.NETWORK_COMPONENT),
            "spec": {
                "podSelector": {"matchLabels": {vocab.NAME_LABEL: vocab.APP}},
                "policyTypes": ["Ingress"],
                "ingress": [{"from": [{"podSelector": {}}]}],
            },
        },
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": meta("login-ssh", ns, vocab.NETWORK_COMPONENT),
            "spec": {
                "podSelector": {"matchLabels": {vocab.COMPONENT: vocab.LOGIN_COMPONENT}},
                "policyTypes": ["Ingress"],
                "ingress": [{"ports": [{"protocol": "TCP", "port": 22}]}],
            },
        },
        *nfs,
    ]


def nfs_policy(plan: ClusterPlan) -> Obj:
    """NFS to the in-cluster NFS server pods, from any source, on the NFS ports only.

    The clients of an ``nfs-server`` volume are not pods: the kubelet mounts the PersistentVolume from the
    node's own network namespace, so on a CNI that enforces NetworkPolicy the default deny drops the
    mount and every pod using ``/home`` sticks in ContainerCreating. A node's address is no pod of any
    namespace, and node CIDRs differ per cluster (kind, k3d, minikube, a cloud's VPC), so the rule admits
    every source on the server's ports (:data:`slonk_infra.kube.storage.NFS_PORTS`: 2049 for NFSv4, and
    rpcbind and mountd for NFSv3, which the server also runs). The server is reached only through its
    ClusterIP Service, so "every source" means the cluster's nodes and pods.
    """
    ports = [{"protocol": proto, "port": port} for _, port in NFS_PORTS for proto in ("TCP", "UDP")]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": meta(NFS_POLICY, plan.namespace, vocab.NETWORK_COMPONENT),
        "spec": {
            "podSelector": {"matchLabels": vocab.selector(vocab.NFS_COMPONENT)},
            "policyTypes": ["Ingress"],
            "ingress": [{"ports": ports}],
        },
    }


def disruption_budgets(plan: ClusterPlan) -> list[Obj]:
    """One budget per worker group, taking its pods one at a time, and, with two controllers, one that
    keeps one of them up.

    Per group, not one across every worker: node upgrades and repairs of different pools then proceed
    side by side instead of one pod of the whole cluster at a time. A multi-host TPU slice is the
    exception: GKE treats a multi-host slice's hosts as one atomic unit and repairs them together
    (https://cloud.google.com/tpu/docs/tpus-in-gke, "Multi-host TPU slice node pool"), and one host gone already
    stops every job on the slice, so its budget admits the whole slice; one at a time would only hold
    the slice's operation, broken, until GKE's PDB timeout (up to an hour).

    The controller: with ``controller.replicas: 1`` there is no budget. ``minAvailable: 1`` over a single
    pod forbids every eviction, so a system node's drain never finishes: an EKS managed node group update
    fails after 15 minutes of undrainable pods (PodEvictionFailure) and GKE holds a node upgrade for up to
    an hour before it drains anyway. Without a budget the drain evicts slurmctld, which restarts on another
    system node with its state claim (running jobs carry on; slurmd and clients retry until it answers). With two
    controllers (never on one node), ``minAvailable: 1`` lets a drain take one while the other serves.
    """
    ns = plan.namespace
    out: list[Obj] = []
    if plan.declaration.controller.replicas > 1:
        out.append(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": meta(vocab.CONTROLLER_BUDGET, ns, vocab.CONTROLLER_COMPONENT),
                "spec": {
                    "minAvailable": 1,
                    "selector": {"matchLabels": {vocab.COMPONENT: vocab.CONTROLLER_COMPONENT}},
                },
            }
        )
    for group in plan.groups:
        group_label = {vocab.GROUP_LABEL: group.name}
        out.append(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                # Named as the group's StatefulSet (another kind, so no clash).
                "metadata": meta(naming.statefulset(group.name), ns, vocab.WORKER_COMPONENT, **group_label),
                "spec": {
                    "maxUnavailable": group.replicas if group.kind == "tpu" and group.replicas > 1 else 1,
                    "selector": {"matchLabels": vocab.selector(vocab.WORKER_COMPONENT, **group_label)},
                },
            }
        )
    return out
