"""Shared filesystems: a retained PersistentVolume and its claim per volume, and in-cluster NFS servers
where the declaration asks for them (local clusters)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slonk_infra import vocab
from slonk_infra.declaration.model import StorageSpec
from slonk_infra.kube.inputs import ClusterIPOf, KubeInputs
from slonk_infra.kube.pod import Obj, meta, privileged, scripts_mount, scripts_volume
from slonk_infra.plan import ClusterPlan

NFS_PORTS = (("nfs", 2049), ("mountd", 20048), ("rpcbind", 111))


def block_claim(plan: ClusterPlan, gib: int) -> tuple[Obj, dict[str, str]]:
    """Spec and annotations of a single-writer claim (controller state, an NFS server's export).

    The claim names its StorageClass (:attr:`ClusterPlan.claim_storage_class`) on every cloud: EKS
    from 1.30 marks none as default, so a claim without one stays Pending there. On a local cluster
    the class is left to the cluster's default, and the claim says so.
    """
    spec: Obj = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": f"{gib}Gi"}}}
    storage_class = plan.claim_storage_class
    if storage_class is not None:
        spec["storageClassName"] = storage_class
        return spec, {}
    return spec, {vocab.STORAGE_CLASS_NOTE: vocab.DEFAULT_CLASS_NOTE}


def claim_name(storage: StorageSpec) -> str:
    """PersistentVolumeClaim of a shared filesystem."""
    return vocab.claim_name(storage.name)


def pv_name(plan: ClusterPlan, storage: StorageSpec) -> str:
    """PersistentVolume of a shared filesystem (cluster-scoped, so prefixed with the namespace)."""
    return f"{plan.namespace}-{storage.name}"


def volume_source(vol: StorageSpec, inputs: KubeInputs) -> Mapping[str, Any]:
    """Where a volume's data is, as PersistentVolume spec keys."""
    if vol.kind == "nfs-server":
        return {"nfs": {"server": ClusterIPOf(vocab.nfs_server(vol.name)), "path": "/"}}
    if vol.kind == "nfs-export":
        return {"nfs": {"server": vol.server, "path": vol.export_path}}
    return inputs.volume_sources.get(vol.name, {"csi": {"driver": f"<{vol.kind}>", "volumeHandle": "<id>"}})


def volume_and_claim(plan: ClusterPlan, vol: StorageSpec, inputs: KubeInputs) -> list[Obj]:
    """A Retain PersistentVolume pre-bound to its claim, so the data outlives any object of the layer."""
    ns = plan.namespace
    pv = pv_name(plan, vol)
    return [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": meta(pv, None, vocab.STORAGE_COMPONENT),
            "spec": {
                "capacity": {"storage": f"{vol.capacity_gib}Gi"},
                "accessModes": ["ReadWriteMany"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "",
                "volumeMode": "Filesystem",
                "claimRef": {"namespace": ns, "name": claim_name(vol)},
                **volume_source(vol, inputs),
            },
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": meta(claim_name(vol), ns, vocab.STORAGE_COMPONENT),
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "storageClassName": "",
                "volumeName": pv,
                "resources": {"requests": {"storage": f"{vol.capacity_gib}Gi"}},
            },
        },
    ]


def storage_objects(plan: ClusterPlan, inputs: KubeInputs) -> list[Obj]:
    """PersistentVolume + claim per shared filesystem (Retain), and in-cluster NFS servers where declared."""
    out: list[Obj] = []
    for vol in plan.declaration.storage:
        if vol.kind == "nfs-server":
            out += nfs_server(plan, vol, plan.declaration.image.reference, inputs.system_selector)
        out += volume_and_claim(plan, vol, inputs)
    return out


def _export_claim(plan: ClusterPlan, vol: StorageSpec) -> Obj:
    spec, notes = block_claim(plan, vol.capacity_gib)
    meta_: Obj = {"name": "export", **({"annotations": notes} if notes else {})}
    return {"metadata": meta_, "spec": spec}


def nfs_server(plan: ClusterPlan, vol: StorageSpec, image: str, selector: Mapping[str, str] | None = None) -> list[Obj]:
    """An NFS server StatefulSet + Service exporting its own retained volume (local clusters)."""
    ns = plan.namespace
    name = vocab.nfs_server(vol.name)
    sel = vocab.selector(vocab.NFS_COMPONENT, **{vocab.VOLUME_LABEL: vol.name})
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta(name, ns, vocab.NFS_COMPONENT),
            "spec": {
                "selector": sel,
                "ports": [{"name": port_name, "port": port, "targetPort": port} for port_name, port in NFS_PORTS],
            },
        },
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": meta(name, ns, vocab.NFS_COMPONENT),
            "spec": {
                "serviceName": name,
                "replicas": 1,
                "selector": {"matchLabels": sel},
                "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
                "volumeClaimTemplates": [_export_claim(plan, vol)],
                "template": {
                    "metadata": {"labels": {**vocab.labels(vocab.NFS_COMPONENT), vocab.VOLUME_LABEL: vol.name}},
                    "spec": {
                        "automountServiceAccountToken": False,
                        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                        # On the system pool, like the controller: its claim's class suits that
                        # machine (GKE's pd-balanced is refused by Hyperdisk-only machines).
                        **({"nodeSelector": dict(selector)} if selector else {}),
                        "containers": [
                            {
                                "name": "nfs",
                                "image": image,
                                "command": [f"{vocab.SCRIPTS_DIR}/nfs-server.sh"],
                                "ports": [{"containerPort": port} for _, port in NFS_PORTS],
                                # Privileged because the kernel NFS server (nfsd) is configured through
                                # /proc/fs/nfsd, which only a privileged container may mount and write.
                                "securityContext": privileged(),
                                "resources": {
                                    "requests": {"cpu": "250m", "memory": "512Mi"},
                                    "limits": {"cpu": "2", "memory": "2Gi"},
                                },
                                "readinessProbe": {"tcpSocket": {"port": 2049}, "periodSeconds": 10},
                                "livenessProbe": {"tcpSocket": {"port": 2049}, "periodSeconds": 30},
                                "volumeMounts": [
                                    {"name": "export", "mountPath": vocab.NFS_EXPORT_DIR},
                                    scripts_mount(),
                                ],
                            }
                        ],
                        "volumes": [scripts_volume()],
                    },
                },
            },
        },
    ]
