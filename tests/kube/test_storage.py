"""The storage builder: a retained PersistentVolume pre-bound to its claim per shared filesystem, and an
in-cluster NFS server where declared."""

from __future__ import annotations

from typing import Any

import pytest

from slonk_infra import vocab
from slonk_infra.kube import storage
from slonk_infra.kube.inputs import ClusterIPOf, KubeInputs
from tests.kube_support import find, plan_for


@pytest.mark.parametrize("stack", ["local", "gcp", "aws"])
def test_each_volume_is_a_retained_pv_bound_to_its_claim(stack: str) -> None:
    plan = plan_for(stack)
    objs = storage.storage_objects(plan, KubeInputs())
    for vol in plan.declaration.storage:
        claim = find(objs, "PersistentVolumeClaim", vocab.claim_name(vol.name))
        pv = find(objs, "PersistentVolume", claim["spec"]["volumeName"])
        assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
        assert pv["spec"]["claimRef"] == {"namespace": plan.namespace, "name": claim["metadata"]["name"]}
        assert "namespace" not in pv["metadata"]
        assert pv["spec"]["capacity"]["storage"] == claim["spec"]["resources"]["requests"]["storage"]
        assert claim["spec"]["resources"]["requests"]["storage"] == f"{vol.capacity_gib}Gi"
        # An empty class: no provisioner may create a second, empty volume for the claim.
        assert pv["spec"]["storageClassName"] == claim["spec"]["storageClassName"] == ""
        assert pv["spec"]["accessModes"] == claim["spec"]["accessModes"] == ["ReadWriteMany"]


def test_managed_filesystems_take_their_source_from_the_cloud_layer() -> None:
    plan = plan_for("gcp")
    sources = {
        v.name: {"csi": {"driver": "filestore.csi.storage.gke.io", "volumeHandle": f"h-{v.name}"}}
        for v in plan.declaration.storage
    }
    objs = storage.storage_objects(plan, KubeInputs(volume_sources=sources))
    for vol in plan.declaration.storage:
        pv = find(objs, "PersistentVolume", storage.pv_name(plan, vol))
        assert pv["spec"]["csi"] == sources[vol.name]["csi"]


def test_in_cluster_nfs_server_keeps_its_data_and_feeds_the_pv_its_cluster_ip() -> None:
    plan = plan_for("local")
    [vol] = [v for v in plan.declaration.storage if v.kind == "nfs-server"]
    objs = storage.storage_objects(plan, KubeInputs())
    name = vocab.nfs_server(vol.name)
    svc, sts = find(objs, "Service", name), find(objs, "StatefulSet", name)
    assert sts["spec"]["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}
    assert sts["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] == f"{vol.capacity_gib}Gi"
    labels = sts["spec"]["template"]["metadata"]["labels"]
    assert all(labels.get(k) == v for k, v in svc["spec"]["selector"].items())
    assert {p["port"] for p in svc["spec"]["ports"]} == {2049, 20048, 111}
    server = find(objs, "PersistentVolume", storage.pv_name(plan, vol))["spec"]["nfs"]["server"]
    assert isinstance(server, ClusterIPOf) and server.service == name
    nfs = sts["spec"]["template"]["spec"]["containers"][0]
    assert {m["mountPath"] for m in nfs["volumeMounts"]} >= {vocab.NFS_EXPORT_DIR}
    # The server comes before the volume that points at it (apply order).
    kinds = [(o["kind"], o["metadata"]["name"]) for o in objs]
    assert kinds.index(("Service", name)) < kinds.index(("PersistentVolume", storage.pv_name(plan, vol)))


def test_existing_nfs_exports_are_used_as_they_are() -> None:
    def export(raw: dict[str, Any]) -> None:
        raw["storage"] = [
            {
                "name": "home",
                "kind": "nfs-export",
                "capacityGib": 100,
                "mountPath": "/home",
                "server": "10.0.0.5",
                "exportPath": "/srv/home",
            }
        ]

    plan = plan_for("local", export)
    objs = storage.storage_objects(plan, KubeInputs())
    assert [o["kind"] for o in objs] == ["PersistentVolume", "PersistentVolumeClaim"]
    assert objs[0]["spec"]["nfs"] == {"server": "10.0.0.5", "path": "/srv/home"}
