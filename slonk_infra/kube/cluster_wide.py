"""Objects of the Slurm layer that belong to no single role: namespace, RBAC, priorities, network
policies, disruption budgets, and the ConfigMaps and Secrets every role mounts."""

from __future__ import annotations

import base64

from slonk_infra import vocab
from slonk_infra.declaration.users import user_files
from slonk_infra.kube.inputs import KubeInputs
from slonk_infra.kube.pod import Obj, meta
from slonk_infra.plan import ClusterPlan
from slonk_infra.slurm import SlurmFiles


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
    """Deny ingress by default; Slurm traffic only between the namespace's pods; SSH to login only."""
    ns = plan.namespace
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
    ]


def disruption_budgets(plan: ClusterPlan) -> list[Obj]:
    """Voluntary evictions never take the controller, and take workers one at a time."""
    ns = plan.namespace
    return [
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": meta(vocab.CONTROLLER_BUDGET, ns, vocab.CONTROLLER_COMPONENT),
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {vocab.COMPONENT: vocab.CONTROLLER_COMPONENT}}},
        },
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": meta(vocab.WORKERS_BUDGET, ns, vocab.WORKER_COMPONENT),
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {vocab.COMPONENT: vocab.WORKER_COMPONENT}}},
        },
    ]
