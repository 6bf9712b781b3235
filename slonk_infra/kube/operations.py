"""The controller's Kubernetes objects as plain dicts: :func:`operations_objects` is the only entry point.

Least privilege, by what the code calls (:mod:`slonk_infra.ops.kube_api`):

* ClusterRole (nodes are cluster-scoped): ``nodes`` ``list`` and ``patch`` (annotations and
  cordons). No get, watch, create or delete; nothing on ``nodes/status``.
* Role in the Slurm namespace: ``pods`` ``list``, ``patch`` (annotations) and ``delete`` (a
  restart-pod remediation). No secrets: the JWT key arrives as a mounted Secret volume, which
  kubelet reads, not the controller.

One replica with the Recreate strategy: two controllers would act on the same nodes, and the state
volume is ReadWriteOnce. The state volume (PersistentVolumeClaim) holds the remediation memory and
the job hardware record; the component that declares it should retain it on delete.
"""

from __future__ import annotations

import hashlib
from typing import Any

import yaml

from slonk_infra import vocab
from slonk_infra.ops.config import OperationsSpec, default_slurmrestd_url

Obj = dict[str, Any]

NAME = "slonk-ops"
CONFIG_FILE = "/etc/slonk-ops/config.yaml"
JWT_DIR = "/etc/slonk-ops/jwt"
RUN_AS = 65534  # nobody: the controller needs no identity inside the image


def _labels() -> dict[str, str]:
    # The standard labels, with the controller's own name where the Slurm layer's objects say slurm.
    return {vocab.NAME_LABEL: NAME, vocab.PART_OF_LABEL: vocab.PART_OF, vocab.COMPONENT: vocab.OPERATIONS_COMPONENT}


def _meta(name: str, namespace: str | None) -> Obj:
    out: Obj = {"name": name, "labels": _labels()}
    if namespace is not None:
        out["namespace"] = namespace
    return out


def controller_config(spec: OperationsSpec, namespace: str) -> str:
    """The config.yaml the controller reads: the spec with its defaults and the slurmrestd address filled in."""
    data = spec.model_dump(by_alias=True, mode="json")
    data["slurmrestdUrl"] = spec.slurmrestd_url or default_slurmrestd_url(namespace)
    data["jwtKeyFile"] = f"{JWT_DIR}/{vocab.JWT_FILE}"
    return yaml.safe_dump(data, sort_keys=True)


def rbac(namespace: str) -> list[Obj]:
    """ServiceAccount, ClusterRole + binding (nodes), Role + binding (pods in ``namespace``)."""
    cluster_name = f"{namespace}-{NAME}"  # cluster-scoped names are shared by every namespace
    subject = {"kind": "ServiceAccount", "name": NAME, "namespace": namespace}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(NAME, namespace)},
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
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "patch", "delete"]}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": _meta(NAME, namespace),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME},
            "subjects": [subject],
        },
    ]


def deployment(spec: OperationsSpec, namespace: str, image: str) -> Obj:
    """The controller Deployment."""
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
                        vocab.CONFIG_HASH: hashlib.sha256(controller_config(spec, namespace).encode()).hexdigest()
                    },
                },
                "spec": {
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


def operations_objects(
    spec: OperationsSpec, namespace: str, image: str, *, rest_api: bool, storage_class: str | None = None
) -> list[Obj]:
    """Every object of the controller; ``[]`` when ``spec.enabled`` is false.

    ``namespace`` is the Slurm namespace, ``image`` the cluster's one image (``spec.image``
    overrides it), ``rest_api`` the declaration's ``slurm.restApi`` (the controller needs slurmrestd
    and the slurm-jwt Secret that comes with it), ``storage_class`` the state volume's class
    (None: the cluster default).
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
        *rbac(namespace),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _meta(f"{NAME}-config", namespace),
            "data": {"config.yaml": controller_config(spec, namespace)},
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": _meta(f"{NAME}-state", namespace),
            "spec": pvc_spec,
        },
        deployment(spec, namespace, image),
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
