"""The controller's Kubernetes objects: schema-valid, least-privilege RBAC, and agreeing with the Slurm layer."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
import yaml

from slonk_infra.clouds import build_plan
from slonk_infra.declaration.stacks import load_declaration
from slonk_infra.kube.manifests import build_manifests
from slonk_infra.kube.operations import operations_objects
from slonk_infra.ops.config import OperationsSpec, load_spec
from slonk_infra.ops.kube_api import KubeApi
from slonk_infra.slurm import render_slurm_files
from slonk_infra.vocab import CONFIG_HASH, GROUP_LABEL
from testing.fakekube import selector_matches

KUBE_VERSIONS = ["1.31.0", "1.33.0"]
IMAGE = "registry.example/slonk/slurm@sha256:" + "a" * 64


def objects(**spec: Any) -> list[dict[str, Any]]:
    return operations_objects(OperationsSpec.model_validate({"enabled": True, **spec}), "slurm", IMAGE, rest_api=True)


def by_kind(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["kind"]: o for o in objs}


@pytest.mark.parametrize("version", KUBE_VERSIONS)
def test_every_object_validates_against_the_kubernetes_schema(version: str) -> None:
    objs = objects(serviceMonitor=True)
    kinds = sorted(o["kind"] for o in objs)
    assert kinds == sorted(
        [
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "ConfigMap",
            "PersistentVolumeClaim",
            "Deployment",
            "Service",
            "ServiceMonitor",
        ]
    )
    for obj in objs:
        if obj["kind"] != "ServiceMonitor":  # a CRD of the Prometheus operator, not in the core schema
            kubernetes_validate.validate(obj, version, strict=True)


def test_rbac_grants_exactly_what_the_client_calls() -> None:
    kinds = by_kind(objects())
    assert kinds["ClusterRole"]["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "patch"]}]
    assert kinds["Role"]["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "patch", "delete"]}]
    assert kinds["Role"]["metadata"]["namespace"] == "slurm"
    # Every API method the adapter has maps onto one of those verbs; nothing reads secrets.
    methods = {m for m in vars(KubeApi) if not m.startswith("_") and m not in ("in_cluster", "connect")}
    assert methods == {"list_nodes", "list_pods", "patch_node", "patch_pod", "delete_pod"}
    rules = kinds["ClusterRole"]["rules"] + kinds["Role"]["rules"]
    assert all("secrets" not in r["resources"] and "*" not in r["verbs"] for r in rules)


def test_off_by_default_and_needs_the_rest_api() -> None:
    assert operations_objects(OperationsSpec(), "slurm", IMAGE, rest_api=True) == []
    with pytest.raises(ValueError, match=r"operations.enabled needs slurm.restApi: true \(got false\)"):
        operations_objects(OperationsSpec(enabled=True), "slurm", IMAGE, rest_api=False)
    assert "ServiceMonitor" not in by_kind(objects())


def test_the_deployment_runs_one_unprivileged_replica_with_its_volumes() -> None:
    dep = by_kind(objects())["Deployment"]
    assert dep["spec"]["replicas"] == 1 and dep["spec"]["strategy"] == {"type": "Recreate"}
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["image"] == IMAGE and c["command"][0] == "slonk-ops"
    assert c["securityContext"]["runAsNonRoot"] and c["securityContext"]["readOnlyRootFilesystem"]
    vols = {v["name"]: v for v in pod["volumes"]}
    assert vols["jwt"]["secret"]["secretName"] == "slurm-jwt"
    assert vols["state"]["persistentVolumeClaim"]["claimName"] == "slonk-ops-state"
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    assert mounts["state"] == OperationsSpec().state_dir


def test_the_config_map_is_what_the_controller_reads(tmp_path: Any) -> None:
    cm = by_kind(objects(intervalSeconds=30, remediation={"maxPoolFraction": 0.25}))["ConfigMap"]
    path = tmp_path / "config.yaml"
    path.write_text(cm["data"]["config.yaml"])
    spec = load_spec(path)
    assert spec.interval_seconds == 30 and spec.remediation.max_pool_fraction == 0.25
    assert spec.slurmrestd_url == "http://slurmrestd.slurm.svc:6820"
    dep = by_kind(objects())["Deployment"]
    jwt_mount = next(m for m in dep["spec"]["template"]["spec"]["containers"][0]["volumeMounts"] if m["name"] == "jwt")
    assert spec.jwt_key_file.startswith(jwt_mount["mountPath"] + "/")
    assert yaml.safe_load(cm["data"]["config.yaml"])["enabled"] is True


def test_a_changed_setting_rolls_the_controller_pod() -> None:
    """config.yaml is mounted by subPath (never refreshed in a running pod): the template carries its hash."""

    def config_hash(**spec: Any) -> str:
        return str(by_kind(objects(**spec))["Deployment"]["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH])

    assert config_hash() == config_hash()
    assert config_hash(intervalSeconds=30) != config_hash()


def test_the_default_selectors_find_the_slurm_layers_worker_pods() -> None:
    plan = build_plan(load_declaration("gcp"))
    workers = [
        o
        for o in build_manifests(plan, render_slurm_files(plan))
        if o["kind"] == "StatefulSet" and GROUP_LABEL in o["spec"]["template"]["metadata"]["labels"]
    ]
    assert workers
    selector = OperationsSpec().worker_selector
    for sts in workers:
        labels = sts["spec"]["template"]["metadata"]["labels"]
        assert selector_matches(selector, labels), (selector, labels)
        group = labels[GROUP_LABEL]
        assert sts["metadata"]["name"] == group  # pod <group>-<i> is Slurm node <group>-<i>
    others = [o for o in build_manifests(plan, render_slurm_files(plan)) if o["kind"] == "StatefulSet"]
    assert not any(
        selector_matches(selector, o["spec"]["template"]["metadata"]["labels"]) for o in others if o not in workers
    )
