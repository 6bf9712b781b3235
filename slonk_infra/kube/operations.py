"""The controller's Kubernetes objects as plain dicts: :func:`operations_objects` is the only entry point.

Least privilege, by what the code calls (:mod:`slonk_infra.ops.kube_api`):

* ClusterRole (nodes are cluster-scoped): ``nodes`` ``list`` and ``patch`` (annotations and
  cordons). No get, watch, create or delete; nothing on ``nodes/status``.
* Role in the Slurm namespace: ``pods`` ``list``, ``patch`` (annotations) and ``delete`` (a
  restart-pod remediation); where the controller sizes cloud pools (gcp/aws, ``cloudActions``, a
  GPU or CPU group), ``statefulsets`` ``list`` (the worker replicas). No secrets: the JWT key arrives
  as a mounted Secret volume, which kubelet reads, not the controller.

Cloud: on gcp/aws the config carries a ``cloud`` section built from the plan (:func:`cloud_section`;
plain strings, no cloud ids beyond names), and the ServiceAccount carries the cloud layer's
annotations (GKE Workload Identity: ``iam.gke.io/gcp-service-account``; EKS Pod Identity needs none).
The Deployment runs on the system pool where the cloud has one, and a NetworkPolicy admits the
metrics port from ``metricsNamespaces`` (the namespace's default-deny policy blocks it otherwise).

One replica with the Recreate strategy: two controllers would act on the same nodes, and the state
volume is ReadWriteOnce. The state volume (PersistentVolumeClaim) holds the remediation memory and
the job hardware record; the component that declares it should retain it on delete.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import yaml

from slonk_infra import vocab
from slonk_infra.kube.inputs import KubeInputs
from slonk_infra.ops.config import CloudSection, OperationsSpec, default_slurmrestd_url
from slonk_infra.plan import ClusterPlan, naming

Obj = dict[str, Any]

NAME = "slonk-ops"
CONFIG_FILE = "/etc/slonk-ops/config.yaml"
JWT_DIR = "/etc/slonk-ops/jwt"
RUN_AS = 65534  # nobody: the controller needs no identity inside the image
# The control plane sets this immutable label, the namespace's name, on every namespace (Kubernetes docs,
# "Network Policies", targeting a namespace by its name; GA in 1.22).
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def _labels() -> dict[str, str]:
    # The standard labels, with the controller's own name where the Slurm layer's objects say slurm.
    return {vocab.NAME_LABEL: NAME, vocab.PART_OF_LABEL: vocab.PART_OF, vocab.COMPONENT: vocab.OPERATIONS_COMPONENT}


def _meta(name: str, namespace: str | None) -> Obj:
    out: Obj = {"name": name, "labels": _labels()}
    if namespace is not None:
        out["namespace"] = namespace
    return out


def cloud_section(plan: ClusterPlan) -> CloudSection | None:
    """The controller's ``cloud`` section for a gcp/aws plan (None for local): the cluster, its location, each
    GPU/CPU group's node pool / node group (TPU slices keep their size), EKS Capacity Blocks, and the machine
    types whose bad hosts GCP takes as reportHostAsFaulty (catalog ``faulty_host_report``).

    Names follow the adapters: the GKE cluster (regional) and the EKS cluster are named after the
    declaration (``name``), a group's node pool / node group after the group
    (:func:`slonk_infra.plan.naming.node_pool`). A Capacity Block id given as a Pulumi Output is left out
    (the config holds plain strings); the controller then grows that pool without waiting for the block.
    """
    decl = plan.declaration
    if decl.cloud not in ("gcp", "aws"):
        return None
    if not decl.region:
        raise ValueError(f"region: required on {decl.cloud} (got none): the controller addresses the cluster by it")
    groups = [g for g in plan.groups if g.kind in ("gpu", "cpu")]
    blocks = {
        g.name: g.reservation.name
        for g in groups
        if decl.cloud == "aws"
        and g.reservation is not None
        and g.reservation.capacity_block
        and g.reservation.name not in plan.pulumi_inputs
    }
    # reportHostAsFaulty takes only VMs bound to a reservation (spot and flex-start VMs get
    # INSTANCES_WITHOUT_RESERVATION_NOT_SUPPORTED; AI Hypercomputer "Report faulty host"). A machine type
    # that also runs unreserved is left to recreateInstances, which works for every VM.
    reserved = {g.machine.name for g in groups if g.machine.faulty_host_report and g.reservation is not None}
    unreserved = {g.machine.name for g in groups if g.reservation is None}
    faulty = sorted(reserved - unreserved) if decl.operations.report_faulty_hosts else []
    return CloudSection(
        kind=decl.cloud,
        cluster=decl.name,
        location=decl.region,
        node_pools={g.name: naming.node_pool(g.name) for g in groups},
        capacity_blocks=blocks,
        faulty_host_machine_types=faulty if decl.cloud == "gcp" else [],
    )


def sizes_pools(spec: OperationsSpec, cloud: CloudSection | None) -> bool:
    """Whether the controller lists the worker StatefulSets to size cloud pools (what its RBAC then allows)."""
    return spec.cloud_actions and cloud is not None and bool(cloud.node_pools)


def controller_config(spec: OperationsSpec, namespace: str, cloud: CloudSection | None = None) -> str:
    """The config.yaml the controller reads: the spec with its defaults and the slurmrestd address filled in,
    and the cloud section on gcp/aws."""
    data = spec.model_dump(by_alias=True, mode="json")
    data["slurmrestdUrl"] = spec.slurmrestd_url or default_slurmrestd_url(namespace)
    data["jwtKeyFile"] = f"{JWT_DIR}/{vocab.JWT_FILE}"
    if cloud is not None:
        data["cloud"] = cloud.model_dump(by_alias=True, mode="json")
    return yaml.safe_dump(data, sort_keys=True)


def rbac(
    namespace: str, *, statefulsets: bool = False, account_annotations: Mapping[str, Any] | None = None
) -> list[Obj]:
    """ServiceAccount, ClusterRole + binding (nodes), Role + binding (pods, and with ``statefulsets`` the
    worker StatefulSets, in ``namespace``); the ServiceAccount carries the cloud identity's annotations."""
    cluster_name = f"{namespace}-{NAME}"  # cluster-scoped names are shared by every namespace
    subject = {"kind": "ServiceAccount", "name": NAME, "namespace": namespace}
    account: Obj = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(NAME, namespace)}
    if account_annotations:
        account["metadata"]["annotations"] = dict(account_annotations)
    rules: list[Obj] = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "patch", "delete"]}]
    if statefulsets:
        rules.append({"apiGroups": ["apps"], "resources": ["statefulsets"], "verbs": ["list"]})
    return [
        account,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": _meta(cluster_name, None),
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "patch"]}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": _meta(cluster_name, None),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_name},
            "subjects": [subject],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": _meta(NAME, namespace),
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": _meta(NAME, namespace),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME},
            "subjects": [subject],
        },
    ]


def metrics_policy(spec: OperationsSpec, namespace: str) -> list[Obj]:
    """A NetworkPolicy admitting the metrics port from the pods of ``metricsNamespaces`` (none when empty):
    the namespace's default-deny-ingress policy otherwise blocks every scraper."""
    if not spec.metrics_namespaces:
        return []
    source = {
        "namespaceSelector": {
            "matchExpressions": [
                {"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": sorted(set(spec.metrics_namespaces))}
            ]
        }
    }
    return [
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": _meta(f"{NAME}-metrics", namespace),
            "spec": {
                "podSelector": {"matchLabels": _labels()},
                "policyTypes": ["Ingress"],
                "ingress": [{"from": [source], "ports": [{"protocol": "TCP", "port": spec.metrics_port}]}],
            },
        }
    ]


def deployment(
    spec: OperationsSpec,
    namespace: str,
    image: str,
    cloud: CloudSection | None = None,
    system_selector: Mapping[str, str] | None = None,
) -> Obj:
    """The controller Deployment; on the system pool where ``system_selector`` names one."""
    probe = {"httpGet": {"path": "/healthz", "port": "metrics"}, "periodSeconds": 30, "failureThreshold": 3}
    container: Obj = {
        "name": NAME,
        "image": spec.image or image,
        "command": ["slonk-ops", "--config", CONFIG_FILE],
        "env": [{"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}],
        "ports": [{"name": "metrics", "containerPort": spec.metrics_port}],
        "resources": {
            "requests": {"cpu": spec.cpu_request, "memory": spec.memory_request},
            "limits": {"memory": spec.memory_limit},
        },
        "livenessProbe": {**probe, "initialDelaySeconds": 30},
        "readinessProbe": probe,
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "runAsUser": RUN_AS,
            "runAsGroup": RUN_AS,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [
            {"name": "config", "mountPath": CONFIG_FILE, "subPath": "config.yaml", "readOnly": True},
            {"name": "jwt", "mountPath": JWT_DIR, "readOnly": True},
            {"name": "state", "mountPath": spec.state_dir},
            # slurm.conf, for the scontrol fallback on Slurm versions whose REST API cannot drain.
            {"name": "slurm-config", "mountPath": vocab.CONF_DIR, "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(NAME, namespace),
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": _labels()},
            "template": {
                # config.yaml is mounted by subPath, which the kubelet never refreshes: a changed setting
                # rolls the pod through this hash instead.
                "metadata": {
                    "labels": _labels(),
                    "annotations": {
                        vocab.CONFIG_HASH: hashlib.sha256(
                            controller_config(spec, namespace, cloud).encode()
                        ).hexdigest()
                    },
                },
                "spec": {
                    **({"nodeSelector": dict(system_selector)} if system_selector else {}),
                    "serviceAccountName": NAME,
                    "securityContext": {"fsGroup": RUN_AS, "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [container],
                    "volumes": [
                        {"name": "config", "configMap": {"name": f"{NAME}-config"}},
                        {
                            "name": "jwt",
                            "secret": {
                                "secretName": vocab.JWT_SECRET,
                                "items": [{"key": vocab.JWT_FILE, "path": vocab.JWT_FILE}],
                                "defaultMode": 0o440,
                            },
                        },
                        {"name": "state", "persistentVolumeClaim": {"claimName": f"{NAME}-state"}},
                        {"name": "slurm-config", "configMap": {"name": vocab.CONFIG_MAP}},
                        {"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}},
                    ],
                },
            },
        },
    }


def operations_for(plan: ClusterPlan, inputs: KubeInputs) -> list[Obj]:
    """Every object of the controller for a plan and the cloud layer's inputs (what the Slurm layer calls):
    the cloud section from the plan, the system pool's selector and the ServiceAccount's cloud identity
    annotations (``operations_account_annotations``, where the inputs carry them) from the inputs."""
    decl = plan.declaration
    return operations_objects(
        decl.operations,
        plan.namespace,
        decl.image.reference,
        rest_api=decl.slurm.rest_api,
        storage_class=plan.claim_storage_class,
        cloud=cloud_section(plan) if decl.operations.enabled else None,
        account_annotations=inputs.operations_account_annotations,
        system_selector=inputs.system_selector,
    )


def operations_objects(
    spec: OperationsSpec,
    namespace: str,
    image: str,
    *,
    rest_api: bool,
    storage_class: str | None = None,
    cloud: CloudSection | None = None,
    account_annotations: Mapping[str, Any] | None = None,
    system_selector: Mapping[str, str] | None = None,
) -> list[Obj]:
    """Every object of the controller; ``[]`` when ``spec.enabled`` is false.

    ``namespace`` is the Slurm namespace, ``image`` the cluster's one image (``spec.image``
    overrides it), ``rest_api`` the declaration's ``slurm.restApi`` (the controller needs slurmrestd
    and the slurm-jwt Secret that comes with it), ``storage_class`` the state volume's class
    (None: the cluster default), ``cloud`` the config's cloud section (None: local, no cloud calls),
    ``account_annotations`` the ServiceAccount's (values may be Pulumi Outputs), ``system_selector``
    the system pool's node labels (empty: no pinning).
    """
    if not spec.enabled:
        return []
    if not rest_api and spec.slurmrestd_url is None:
        raise ValueError(
            "operations.enabled needs slurm.restApi: true (got false): the controller reads Slurm through "
            "slurmrestd with tokens signed by the slurm-jwt key"
        )
    pvc_spec: Obj = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": f"{spec.state_volume_gib}Gi"}},
    }
    if storage_class:
        pvc_spec["storageClassName"] = storage_class
    objects: list[Obj] = [
        *rbac(namespace, statefulsets=sizes_pools(spec, cloud), account_annotations=account_annotations),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _meta(f"{NAME}-config", namespace),
            "data": {"config.yaml": controller_config(spec, namespace, cloud)},
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": _meta(f"{NAME}-state", namespace),
            "spec": pvc_spec,
        },
        deployment(spec, namespace, image, cloud, system_selector),
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": _meta(f"{NAME}-metrics", namespace),
            "spec": {
                "selector": _labels(),
                "ports": [{"name": "metrics", "port": spec.metrics_port, "targetPort": "metrics"}],
            },
        },
    ]
    objects += metrics_policy(spec, namespace)
    if spec.service_monitor:
        objects.append(
            {
                "apiVersion": "monitoring.coreos.com/v1",
                "kind": "ServiceMonitor",
                "metadata": _meta(NAME, namespace),
                "spec": {
                    "selector": {"matchLabels": _labels()},
                    "endpoints": [{"port": "metrics", "interval": spec.scrape_interval, "path": "/metrics"}],
                },
            }
        )
    return objects
