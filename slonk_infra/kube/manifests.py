"""Every Kubernetes object of the Slurm layer, as plain dicts built from the plan.

Pure and cloud-agnostic: the cloud layer's contribution arrives as :class:`KubeInputs` (PersistentVolume
sources of the shared filesystems, whether workers are pinned one per node, the munge key). Values in
those inputs may be Pulumi Outputs; nothing here inspects them. The object count depends on worker
groups and storage volumes, never on node count.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from slonk_infra import naming
from slonk_infra.declaration import StorageSpec
from slonk_infra.plan import ClusterPlan, WorkerGroup
from slonk_infra.slurm import SlurmFiles, paths

Obj = dict[str, Any]

APP = "slurm"
COMPONENT = "app.kubernetes.io/component"
GROUP_LABEL = "slonk.dev/group"
CONFIG_HASH = "slonk.dev/config-hash"
SCRIPTS_MOUNT = "/opt/slonk/scripts"
MUNGE_UID = 400
SLURM_UID = 401
# slurmrestd refuses to run as root or as SlurmUser; the image has a user of its own for it.
SLURMRESTD_UID = 402
JWT_FILE = "jwt_hs256.key"
# A TPU VM's runtime talks to the other hosts of its slice on these ports (GKE multi-host TPU examples).
TPU_HOST_PORTS = (8471, 8431)
WORKER_GRACE_SECONDS = 300
TPU_SLICE_LABELS = ("cloud.google.com/gke-tpu-accelerator", "cloud.google.com/gke-tpu-topology")


class ClusterIPOf(str):
    """Placeholder for the ClusterIP of a Service of this layer (an in-cluster NFS server's address).

    Kubelet mounts NFS on the node, where cluster DNS names do not resolve, so the PersistentVolume
    needs the Service's IP. As text it is a marked placeholder; the Pulumi component replaces it with
    the Service's output.
    """

    service: str

    def __new__(cls, service: str) -> ClusterIPOf:
        obj = super().__new__(cls, f"<known after deploy: ClusterIP of Service {service}>")
        obj.service = service
        return obj


@dataclass(frozen=True)
class KubeInputs:
    """What the Slurm layer needs from outside the plan."""

    munge_key_b64: Any = "<munge-key>"
    jwt_key_b64: Any = "<jwt-key>"
    pin_to_pools: bool = True
    # storage name -> PersistentVolume source keys (csi / nfs, mountOptions); managed filesystems only
    volume_sources: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    system_selector: Mapping[str, str] = field(default_factory=dict)
    # node labels carrying the cloud's physical topology (GKE block/subblock/host, EKS network layers)
    topology_labels: tuple[str, ...] = ()


def labels(component: str, **extra: str) -> dict[str, str]:
    """Standard labels of every Slurm object."""
    return {"app.kubernetes.io/name": APP, "app.kubernetes.io/part-of": "slonk-infra", COMPONENT: component, **extra}


def meta(name: str, namespace: str | None, component: str, **extra: str) -> Obj:
    """ObjectMeta; namespace None for cluster-scoped objects."""
    out: Obj = {"name": name, "labels": labels(component, **extra)}
    if namespace is not None:
        out["namespace"] = namespace
    return out


def config_hash(files: SlurmFiles) -> str:
    """Hash of the Slurm config the controller and login pods mount (rolls them when it changes)."""
    digest = hashlib.sha256()
    for name, text in sorted(files.all().items()):
        digest.update(name.encode() + b"\0" + text.encode() + b"\0")
    return digest.hexdigest()[:16]


# ------------------------------------------------------------------------------------------ pieces
def _restricted(run_as: int | None = None, caps: tuple[str, ...] = ()) -> Obj:
    ctx: Obj = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"], **({"add": list(caps)} if caps else {})},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    if run_as is not None:
        ctx.update({"runAsUser": run_as, "runAsGroup": run_as, "runAsNonRoot": True})
    return ctx


def munged_sidecar(image: str) -> Obj:
    """munged as a native sidecar (an init container that keeps running), shared socket in /run/munge."""
    return {
        "name": "munged",
        "image": image,
        "restartPolicy": "Always",
        "command": [f"{SCRIPTS_MOUNT}/munged.sh"],
        # Starts as root only to hand the key to the munge user, then runs as munge (runuser).
        "securityContext": _restricted(caps=("CHOWN", "FOWNER", "DAC_OVERRIDE", "SETUID", "SETGID")),
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
        "startupProbe": {
            "exec": {"command": ["sh", "-c", "munge -n | unmunge >/dev/null"]},
            "periodSeconds": 2,
            "failureThreshold": 30,
        },
        "volumeMounts": [
            {"name": "munge-socket", "mountPath": "/run/munge"},
            {"name": "munge-key", "mountPath": "/etc/munge-secret", "readOnly": True},
            {"name": "munge-private", "mountPath": "/run/munge-key"},
            {"name": "scripts", "mountPath": SCRIPTS_MOUNT, "readOnly": True},
        ],
    }


def _common_volumes() -> list[Obj]:
    return [
        {"name": "munge-socket", "emptyDir": {"medium": "Memory"}},
        {"name": "munge-private", "emptyDir": {"medium": "Memory"}},
        {"name": "munge-key", "secret": {"secretName": "munge-key", "defaultMode": 0o400}},
        {"name": "scripts", "configMap": {"name": "slurm-scripts", "defaultMode": 0o755}},
        {"name": "run-slurm", "emptyDir": {}},
    ]


def _config_volume(jwt_key: bool = False) -> Obj:
    # Projected so the topology ConfigMap lands beside slurm.conf, where Slurm looks for it, and the
    # controller's JWT key at the path slurm.conf names, readable by the slurm group only.
    sources: list[Obj] = [{"configMap": {"name": "slurm-config"}}, {"configMap": {"name": "slurm-topology"}}]
    if jwt_key:
        item = {"key": JWT_FILE, "path": f"jwt/{JWT_FILE}", "mode": 0o440}
        sources.append({"secret": {"name": "slurm-jwt", "items": [item]}})
    return {"name": "slurm-config", "projected": {"sources": sources}}


def _shared_mounts(plan: ClusterPlan) -> tuple[list[Obj], list[Obj]]:
    volumes = [
        {"name": f"shared-{s.name}", "persistentVolumeClaim": {"claimName": claim_name(s)}}
        for s in plan.declaration.storage
    ]
    mounts = [{"name": f"shared-{s.name}", "mountPath": s.mount_path} for s in plan.declaration.storage]
    return volumes, mounts


def _common_mounts() -> list[Obj]:
    return [
        {"name": "munge-socket", "mountPath": "/run/munge"},
        {"name": "scripts", "mountPath": SCRIPTS_MOUNT, "readOnly": True},
        {"name": "run-slurm", "mountPath": "/run/slurm"},
    ]


def claim_name(storage: StorageSpec) -> str:
    """PersistentVolumeClaim of a shared filesystem."""
    return f"shared-{storage.name}"


def tolerations(group: WorkerGroup) -> list[Obj]:
    """Tolerations matching exactly the taints the group's nodes carry."""
    return [{"key": t.key, "operator": "Equal", "value": t.value, "effect": t.effect} for t in group.taints]


# ------------------------------------------------------------------------------------------ objects
def namespace(plan: ClusterPlan) -> Obj:
    """The namespace; workers need privileged pods (see worker_statefulset), so PSA enforces privileged."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": plan.namespace,
            "labels": {
                **labels("namespace"),
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
            "metadata": meta("slurm", ns, "rbac"),
            "automountServiceAccountToken": False,
        },
        # Read-only view of the cluster's pods for operators' tooling (sinfo vs kubectl), bound to nobody
        # by default: an explicit, minimal Role to bind instead of handing out cluster-admin.
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": meta("slurm-viewer", ns, "rbac"),
            "rules": [{"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list", "watch"]}],
        },
    ]


TOPOLOGY_LABELS = "slonk.dev/node-topology-labels"


def config_maps(plan: ClusterPlan, files: SlurmFiles, inputs: KubeInputs) -> list[Obj]:
    """Slurm config, topology and scripts. The munge key is never in a ConfigMap."""
    topo = {k: v for k, v in files.config.items() if k.startswith("topology")}
    rest = {k: v for k, v in files.config.items() if k not in topo}
    ns = plan.namespace
    topo_meta = meta("slurm-topology", ns, "config")
    if inputs.topology_labels:
        # Recorded beside the static topology for tools that refine it from the nodes' physical placement.
        topo_meta["annotations"] = {TOPOLOGY_LABELS: ",".join(inputs.topology_labels)}
    return [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("slurm-config", ns, "config"), "data": rest},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": topo_meta, "data": topo},
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": meta("slurm-scripts", ns, "config"),
            "data": dict(files.scripts),
        },
    ]


def secrets(plan: ClusterPlan, inputs: KubeInputs) -> list[Obj]:
    """The munge key (and the JWT key with slurmrestd), only as Secrets."""
    ns = plan.namespace
    out = [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": meta("munge-key", ns, "auth"),
            "type": "Opaque",
            "data": {"munge.key": inputs.munge_key_b64},
        }
    ]
    if plan.declaration.slurm.rest_api:
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": meta("slurm-jwt", ns, "auth"),
                "type": "Opaque",
                "data": {JWT_FILE: inputs.jwt_key_b64},
            }
        )
    return out


def services(plan: ClusterPlan) -> list[Obj]:
    """Three Services whatever the size: controller and workers headless (stable pod DNS), login SSH."""
    ns = plan.namespace
    login_type = plan.declaration.login.service_type
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta(naming.CONTROLLER, ns, "controller"),
            "spec": {
                "clusterIP": "None",
                "publishNotReadyAddresses": True,
                "selector": {COMPONENT: "controller", "app.kubernetes.io/name": APP},
                "ports": [{"name": "slurmctld", "port": paths.SLURMCTLD_PORT, "targetPort": paths.SLURMCTLD_PORT}],
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            # One headless Service for every worker StatefulSet: DNS for all nodes, one object.
            "metadata": meta(naming.WORKERS_SERVICE, ns, "worker"),
            "spec": {
                "clusterIP": "None",
                "publishNotReadyAddresses": True,
                "selector": {COMPONENT: "worker", "app.kubernetes.io/name": APP},
                "ports": [{"name": "slurmd", "port": paths.SLURMD_PORT, "targetPort": paths.SLURMD_PORT}],
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta(naming.LOGIN, ns, "login"),
            "spec": {
                "type": login_type,
                "selector": {COMPONENT: "login", "app.kubernetes.io/name": APP},
                "ports": [{"name": "ssh", "port": 22, "targetPort": 22}],
            },
        },
    ]


def priority_classes(plan: ClusterPlan) -> list[Obj]:
    """Workers sit below production workloads, so Kubernetes inference pods can take their nodes."""
    ns = plan.namespace
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": meta(f"{ns}-slurm-worker", None, "scheduling"),
            "value": 1000,
            "preemptionPolicy": "Never",
            "globalDefault": False,
            "description": "Slurm worker pods: preemptible by production workloads.",
        },
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": meta(f"{ns}-slurm-control", None, "scheduling"),
            "value": 1000000,
            "globalDefault": False,
            "description": "Slurm controller and login pods.",
        },
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": meta(f"{ns}-production", None, "scheduling"),
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
            "metadata": meta("default-deny-ingress", ns, "network"),
            "spec": {"podSelector": {}, "policyTypes": ["Ingress"]},
        },
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            # slurmctld, slurmd and srun's ephemeral I/O ports: reachable from this namespace's pods only.
            "metadata": meta("slurm-internal", ns, "network"),
            "spec": {
                "podSelector": {"matchLabels": {"app.kubernetes.io/name": APP}},
                "policyTypes": ["Ingress"],
                "ingress": [{"from": [{"podSelector": {}}]}],
            },
        },
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": meta("login-ssh", ns, "network"),
            "spec": {
                "podSelector": {"matchLabels": {COMPONENT: "login"}},
                "policyTypes": ["Ingress"],
                "ingress": [{"ports": [{"protocol": "TCP", "port": 22}]}],
            },
        },
    ]


def controller_state_claim(plan: ClusterPlan) -> Obj:
    """slurmctld's state volume: a claim of its own so deleting the StatefulSet never deletes it."""
    spec: Obj = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": f"{plan.declaration.controller.state_gib}Gi"}},
    }
    if plan.declaration.controller.storage_class:
        spec["storageClassName"] = plan.declaration.controller.storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": meta("slurmctld-state", plan.namespace, "controller"),
        "spec": spec,
    }


def controller_statefulset(plan: ClusterPlan, files: SlurmFiles, inputs: KubeInputs) -> Obj:
    """slurmctld: one replica, state on its claim, rolled (state kept) when the config changes."""
    image = plan.declaration.image.reference
    shared_volumes, shared_mounts = _shared_mounts(plan)
    sel = {COMPONENT: "controller", "app.kubernetes.io/name": APP}
    ping = ["sh", "-c", "scontrol ping | grep -q 'is UP'"]
    pod_spec: Obj = {
        "serviceAccountName": "slurm",
        "automountServiceAccountToken": False,
        "priorityClassName": f"{plan.namespace}-slurm-control",
        "securityContext": {"fsGroup": SLURM_UID, "seccompProfile": {"type": "RuntimeDefault"}},
        "dnsConfig": {"searches": [naming.workers_domain(plan.namespace)]},
        "initContainers": [munged_sidecar(image)],
        "containers": [
            {
                "name": "slurmctld",
                "image": image,
                "command": [f"{SCRIPTS_MOUNT}/slurmctld.sh"],
                "ports": [{"name": "slurmctld", "containerPort": paths.SLURMCTLD_PORT}],
                "securityContext": _restricted(run_as=SLURM_UID),
                "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "8Gi"}},
                "startupProbe": {"exec": {"command": ping}, "periodSeconds": 5, "failureThreshold": 60},
                "livenessProbe": {
                    "exec": {"command": ping},
                    "periodSeconds": 30,
                    "timeoutSeconds": 10,
                    "failureThreshold": 4,
                },
                "readinessProbe": {"exec": {"command": ping}, "periodSeconds": 10, "timeoutSeconds": 10},
                "volumeMounts": [
                    *_common_mounts(),
                    {"name": "slurm-config", "mountPath": paths.CONF_DIR, "readOnly": True},
                    {"name": "state", "mountPath": paths.STATE_DIR},
                    *shared_mounts,
                ],
            }
        ],
        "volumes": [
            *_common_volumes(),
            _config_volume(jwt_key=plan.declaration.slurm.rest_api),
            {"name": "state", "persistentVolumeClaim": {"claimName": "slurmctld-state"}},
            *shared_volumes,
        ],
    }
    if inputs.system_selector:
        pod_spec["nodeSelector"] = dict(inputs.system_selector)
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": meta(naming.CONTROLLER, plan.namespace, "controller"),
        "spec": {
            "serviceName": naming.CONTROLLER,
            "replicas": 1,
            "selector": {"matchLabels": sel},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": labels("controller"), "annotations": {CONFIG_HASH: config_hash(files)}},
                "spec": pod_spec,
            },
        },
    }


def login_statefulset(plan: ClusterPlan, files: SlurmFiles, inputs: KubeInputs) -> Obj:
    """Login pods: sshd with the Slurm client config and the shared home."""
    image = plan.declaration.image.reference
    shared_volumes, shared_mounts = _shared_mounts(plan)
    sel = {COMPONENT: "login", "app.kubernetes.io/name": APP}
    ssh_probe = {"tcpSocket": {"port": 22}, "periodSeconds": 10}
    pod_spec: Obj = {
        "serviceAccountName": "slurm",
        "automountServiceAccountToken": False,
        "priorityClassName": f"{plan.namespace}-slurm-control",
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "dnsConfig": {"searches": [naming.workers_domain(plan.namespace)]},
        "initContainers": [munged_sidecar(image)],
        "containers": [
            {
                "name": "login",
                "image": image,
                "command": [f"{SCRIPTS_MOUNT}/login.sh"],
                "ports": [{"name": "ssh", "containerPort": 22}],
                # sshd starts as root to switch to each user; only the capabilities it needs for that.
                "securityContext": _restricted(
                    caps=("CHOWN", "SETUID", "SETGID", "SYS_CHROOT", "AUDIT_WRITE", "NET_BIND_SERVICE", "KILL")
                ),
                "resources": {"requests": {"cpu": "1", "memory": "2Gi"}},
                "livenessProbe": ssh_probe,
                "readinessProbe": ssh_probe,
                "volumeMounts": [
                    *_common_mounts(),
                    {"name": "slurm-config", "mountPath": paths.CONF_DIR, "readOnly": True},
                    *shared_mounts,
                ],
            }
        ],
        "volumes": [*_common_volumes(), _config_volume(), *shared_volumes],
    }
    if inputs.system_selector:
        pod_spec["nodeSelector"] = dict(inputs.system_selector)
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": meta(naming.LOGIN, plan.namespace, "login"),
        "spec": {
            "serviceName": naming.LOGIN,
            "replicas": plan.declaration.login.replicas,
            "selector": {"matchLabels": sel},
            "template": {
                "metadata": {"labels": labels("login"), "annotations": {CONFIG_HASH: config_hash(files)}},
                "spec": pod_spec,
            },
        },
    }


def rest_api(plan: ClusterPlan) -> list[Obj]:
    """slurmrestd (when the declaration asks for it): clients authenticate with JWTs slurmctld issues."""
    if not plan.declaration.slurm.rest_api:
        return []
    ns = plan.namespace
    image = plan.declaration.image.reference
    sel = {COMPONENT: "restapi", "app.kubernetes.io/name": APP}
    probe = {"tcpSocket": {"port": paths.SLURMRESTD_PORT}, "periodSeconds": 10}
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta("slurmrestd", ns, "restapi"),
            "spec": {
                "selector": sel,
                "ports": [{"name": "http", "port": paths.SLURMRESTD_PORT, "targetPort": paths.SLURMRESTD_PORT}],
            },
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta("slurmrestd", ns, "restapi"),
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": sel},
                "template": {
                    "metadata": {"labels": labels("restapi")},
                    "spec": {
                        "serviceAccountName": "slurm",
                        "automountServiceAccountToken": False,
                        "priorityClassName": f"{ns}-slurm-control",
                        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                        "dnsConfig": {"searches": [naming.workers_domain(ns)]},
                        "containers": [
                            {
                                "name": "slurmrestd",
                                "image": image,
                                "command": ["slurmrestd", f"0.0.0.0:{paths.SLURMRESTD_PORT}"],
                                # daemon mode: each request carries the user's JWT, checked by slurmctld.
                                "env": [{"name": "SLURM_JWT", "value": "daemon"}],
                                "ports": [{"name": "http", "containerPort": paths.SLURMRESTD_PORT}],
                                "securityContext": _restricted(run_as=SLURMRESTD_UID),
                                "resources": {
                                    "requests": {"cpu": "250m", "memory": "256Mi"},
                                    "limits": {"memory": "1Gi"},
                                },
                                "readinessProbe": probe,
                                "livenessProbe": probe,
                                "volumeMounts": [
                                    {"name": "slurm-config", "mountPath": paths.CONF_DIR, "readOnly": True}
                                ],
                            }
                        ],
                        "volumes": [_config_volume()],
                    },
                },
            },
        },
    ]


def worker_resources(group: WorkerGroup) -> Obj:
    """Requests equal to what Slurm schedules on the node; accelerator limit equal to the node's GRES."""
    shape = group.shape
    out: Obj = {"requests": {"cpu": str(shape.cpus), "memory": f"{shape.real_memory_mib}Mi"}}
    if group.kube_resource:
        count = str(group.gres_count)
        out["requests"][group.kube_resource] = count
        out["limits"] = {group.kube_resource: count}
    return out


def worker_statefulset(plan: ClusterPlan, group: WorkerGroup, inputs: KubeInputs) -> Obj:
    """One StatefulSet per worker group: pod N is Slurm node ``<group>-N``; never restarted by config."""
    image = plan.declaration.image.reference
    shared_volumes, shared_mounts = _shared_mounts(plan)
    sel = {COMPONENT: "worker", "app.kubernetes.io/name": APP, GROUP_LABEL: group.name}
    container: Obj = {
        "name": "slurmd",
        "image": image,
        "command": [f"{SCRIPTS_MOUNT}/slurmd.sh"],
        "env": [
            {"name": "SLONK_CONTROLLER", "value": naming.controller_host(plan.namespace)},
            {"name": "SLONK_EXPECTED_GPUS", "value": str(group.gres_count if group.kind == "gpu" else 0)},
            {"name": "SLONK_DRAIN_SECONDS", "value": str(WORKER_GRACE_SECONDS - 60)},
        ],
        "ports": [{"name": "slurmd", "containerPort": paths.SLURMD_PORT}],
        # Privileged because slurmd creates a cgroup per job under /sys/fs/cgroup and confines each job
        # to its GPUs with a device eBPF program; Kubernetes mounts cgroupfs read-only and forbids BPF
        # for any unprivileged container, and no capability set short of this grants both.
        "securityContext": {"privileged": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "resources": worker_resources(group),
        "lifecycle": {"preStop": {"exec": {"command": [f"{SCRIPTS_MOUNT}/drain.sh"]}}},
        "startupProbe": {
            "exec": {"command": ["scontrol", "show", "slurmd"]},
            "periodSeconds": 5,
            "failureThreshold": 60,
        },
        "livenessProbe": {
            "exec": {"command": ["scontrol", "show", "slurmd"]},
            "periodSeconds": 30,
            "timeoutSeconds": 10,
            "failureThreshold": 4,
        },
        "readinessProbe": {
            "exec": {"command": ["sh", "-c", "sinfo -h -n \"$(hostname)\" -o %t | grep -qvE 'down|fail|futr|unk'"]},
            "periodSeconds": 15,
            "timeoutSeconds": 10,
        },
        "volumeMounts": [
            *_common_mounts(),
            {"name": "spool", "mountPath": paths.SLURMD_SPOOL},
            {"name": "dshm", "mountPath": "/dev/shm"},
            *shared_mounts,
        ],
    }
    if group.kind == "tpu" and group.replicas > 1:
        container["ports"] += [{"name": f"tpu-{p}", "containerPort": p, "hostPort": p} for p in TPU_HOST_PORTS]
    pod_spec: Obj = {
        "serviceAccountName": "slurm",
        "automountServiceAccountToken": False,
        "priorityClassName": f"{plan.namespace}-slurm-worker",
        "terminationGracePeriodSeconds": WORKER_GRACE_SECONDS,
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "dnsConfig": {"searches": [naming.workers_domain(plan.namespace)]},
        "tolerations": tolerations(group),
        "initContainers": [munged_sidecar(image)],
        "containers": [container],
        "volumes": [
            *_common_volumes(),
            {"name": "spool", "emptyDir": {}},
            {"name": "dshm", "emptyDir": {"medium": "Memory"}},
            *shared_volumes,
        ],
    }
    if inputs.pin_to_pools:
        pod_spec["nodeSelector"] = group.node_selector
        pod_spec["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {COMPONENT: "worker", "app.kubernetes.io/name": APP}},
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            }
        }
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": meta(naming.statefulset(group.name), plan.namespace, "worker", **{GROUP_LABEL: group.name}),
        "spec": {
            "serviceName": naming.WORKERS_SERVICE,
            "replicas": group.replicas,
            "podManagementPolicy": "Parallel",
            # OnDelete: no config or image change restarts a pod that may be running jobs.
            "updateStrategy": {"type": "OnDelete"},
            "selector": {"matchLabels": sel},
            "template": {"metadata": {"labels": labels("worker", **{GROUP_LABEL: group.name})}, "spec": pod_spec},
        },
    }


def disruption_budgets(plan: ClusterPlan) -> list[Obj]:
    """Voluntary evictions never take the controller, and take workers one at a time."""
    ns = plan.namespace
    return [
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": meta("slurmctld", ns, "controller"),
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {COMPONENT: "controller"}}},
        },
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": meta("slurm-workers", ns, "worker"),
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {COMPONENT: "worker"}}},
        },
    ]


def storage_objects(plan: ClusterPlan, inputs: KubeInputs) -> list[Obj]:
    """PersistentVolume + claim per shared filesystem (Retain), and in-cluster NFS servers where declared."""
    out: list[Obj] = []
    ns = plan.namespace
    image = plan.declaration.image.reference
    for vol in plan.declaration.storage:
        if vol.kind == "nfs-server":
            out += nfs_server(plan, vol, image)
            source: Mapping[str, Any] = {"nfs": {"server": ClusterIPOf(f"nfs-{vol.name}"), "path": "/"}}
        elif vol.kind == "nfs-export":
            source = {"nfs": {"server": vol.server, "path": vol.export_path}}
        else:
            source = inputs.volume_sources.get(vol.name, {"csi": {"driver": f"<{vol.kind}>", "volumeHandle": "<id>"}})
        pv_name = f"{ns}-{vol.name}"
        out.append(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": meta(pv_name, None, "storage"),
                "spec": {
                    "capacity": {"storage": f"{vol.capacity_gib}Gi"},
                    "accessModes": ["ReadWriteMany"],
                    "persistentVolumeReclaimPolicy": "Retain",
                    "storageClassName": "",
                    "volumeMode": "Filesystem",
                    "claimRef": {"namespace": ns, "name": claim_name(vol)},
                    **source,
                },
            }
        )
        out.append(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": meta(claim_name(vol), ns, "storage"),
                "spec": {
                    "accessModes": ["ReadWriteMany"],
                    "storageClassName": "",
                    "volumeName": pv_name,
                    "resources": {"requests": {"storage": f"{vol.capacity_gib}Gi"}},
                },
            }
        )
    return out


def nfs_server(plan: ClusterPlan, vol: StorageSpec, image: str) -> list[Obj]:
    """An NFS server StatefulSet + Service exporting its own retained volume (local clusters)."""
    ns = plan.namespace
    name = f"nfs-{vol.name}"
    sel = {COMPONENT: "nfs", "app.kubernetes.io/name": APP, "slonk.dev/volume": vol.name}
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta(name, ns, "nfs"),
            "spec": {
                "selector": sel,
                "ports": [
                    {"name": "nfs", "port": 2049, "targetPort": 2049},
                    {"name": "mountd", "port": 20048, "targetPort": 20048},
                    {"name": "rpcbind", "port": 111, "targetPort": 111},
                ],
            },
        },
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": meta(name, ns, "nfs"),
            "spec": {
                "serviceName": name,
                "replicas": 1,
                "selector": {"matchLabels": sel},
                "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
                "volumeClaimTemplates": [
                    {
                        "metadata": {"name": "export"},
                        "spec": {
                            "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": f"{vol.capacity_gib}Gi"}},
                        },
                    }
                ],
                "template": {
                    "metadata": {"labels": {**labels("nfs"), "slonk.dev/volume": vol.name}},
                    "spec": {
                        "automountServiceAccountToken": False,
                        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                        "containers": [
                            {
                                "name": "nfs",
                                "image": image,
                                "command": [f"{SCRIPTS_MOUNT}/nfs-server.sh"],
                                "ports": [{"containerPort": 2049}, {"containerPort": 20048}, {"containerPort": 111}],
                                # Privileged because the kernel NFS server (nfsd) is configured through
                                # /proc/fs/nfsd, which only a privileged container may mount and write.
                                "securityContext": {"privileged": True, "seccompProfile": {"type": "RuntimeDefault"}},
                                "resources": {
                                    "requests": {"cpu": "250m", "memory": "512Mi"},
                                    "limits": {"cpu": "2", "memory": "2Gi"},
                                },
                                "readinessProbe": {"tcpSocket": {"port": 2049}, "periodSeconds": 10},
                                "livenessProbe": {"tcpSocket": {"port": 2049}, "periodSeconds": 30},
                                "volumeMounts": [
                                    {"name": "export", "mountPath": "/exports"},
                                    {"name": "scripts", "mountPath": SCRIPTS_MOUNT, "readOnly": True},
                                ],
                            }
                        ],
                        "volumes": [{"name": "scripts", "configMap": {"name": "slurm-scripts", "defaultMode": 0o755}}],
                    },
                },
            },
        },
    ]


def build_manifests(plan: ClusterPlan, files: SlurmFiles, inputs: KubeInputs | None = None) -> list[Obj]:
    """Every object of the Slurm layer, in apply order (namespace first)."""
    inp = inputs or KubeInputs()
    return [
        namespace(plan),
        *rbac(plan),
        *priority_classes(plan),
        *config_maps(plan, files, inp),
        *secrets(plan, inp),
        *services(plan),
        *network_policies(plan),
        *storage_objects(plan, inp),
        controller_state_claim(plan),
        controller_statefulset(plan, files, inp),
        login_statefulset(plan, files, inp),
        *rest_api(plan),
        *[worker_statefulset(plan, g, inp) for g in plan.groups],
        *disruption_budgets(plan),
    ]
