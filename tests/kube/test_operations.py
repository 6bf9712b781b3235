"""The controller's Kubernetes objects: schema-valid, least-privilege RBAC, and agreeing with the Slurm layer."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import kubernetes_validate
import pytest
import yaml

from slonk_infra.clouds import build_plan
from slonk_infra.declaration.stacks import load_declaration
from slonk_infra.kube.inputs import KubeInputs
from slonk_infra.kube.manifests import build_manifests
from slonk_infra.kube.operations import NAMESPACE_NAME_LABEL, cloud_section, operations_for, operations_objects
from slonk_infra.ops.config import CloudSection, OperationsSpec, load_config, load_spec
from slonk_infra.ops.kube_api import KubeApi
from slonk_infra.plan import ClusterPlan
from slonk_infra.slurm import render_slurm_files
from slonk_infra.vocab import CONFIG_HASH, GROUP_LABEL, SYSTEM_ROLE, SYSTEM_ROLE_LABEL
from testing.fakekube import selector_matches

KUBE_VERSIONS = ["1.31.0", "1.33.0"]
IMAGE = "registry.example/slonk/slurm@sha256:" + "a" * 64


def objects(**spec: Any) -> list[dict[str, Any]]:
    return operations_objects(OperationsSpec.model_validate({"enabled": True, **spec}), "slurm", IMAGE, rest_api=True)


def by_kind(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["kind"]: o for o in objs}


def plan_of(stack: str, **operations: Any) -> ClusterPlan:
    raw = copy.deepcopy(load_declaration(stack))
    raw["operations"] = {**raw.get("operations", {}), "enabled": True, **operations}
    raw["slurm"] = {**raw.get("slurm", {}), "restApi": True}
    return build_plan(raw)


def gcp_plan(**operations: Any) -> ClusterPlan:
    return plan_of("gcp", **operations)


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
            "NetworkPolicy",
            "ServiceMonitor",
        ]
    )
    on_gcp = operations_for(gcp_plan(), KubeInputs(system_selector={SYSTEM_ROLE_LABEL: SYSTEM_ROLE}))
    for obj in [*objs, *on_gcp]:
        if obj["kind"] != "ServiceMonitor":  # a CRD of the Prometheus operator, not in the core schema
            kubernetes_validate.validate(obj, version, strict=True)


def test_rbac_grants_exactly_what_the_client_calls() -> None:
    kinds = by_kind(objects())
    pods = {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "patch", "delete"]}
    assert kinds["ClusterRole"]["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "patch"]}]
    assert kinds["Role"]["rules"] == [pods]  # no cloud: no StatefulSet list
    assert kinds["Role"]["metadata"]["namespace"] == "slurm"
    # Every API method the adapter has maps onto one of those verbs; nothing reads secrets.
    methods = {m for m in vars(KubeApi) if not m.startswith("_") and m not in ("in_cluster", "connect")}
    assert methods == {"list_nodes", "list_pods", "list_statefulsets", "patch_node", "patch_pod", "delete_pod"}
    rules = kinds["ClusterRole"]["rules"] + kinds["Role"]["rules"]
    assert all("secrets" not in r["resources"] and "*" not in r["verbs"] for r in rules)
    # Sizing cloud pools adds exactly statefulsets list in the namespace, nothing cluster-wide.
    sized = by_kind(operations_for(gcp_plan(), KubeInputs()))
    assert sized["Role"]["rules"] == [pods, {"apiGroups": ["apps"], "resources": ["statefulsets"], "verbs": ["list"]}]
    assert sized["ClusterRole"]["rules"] == kinds["ClusterRole"]["rules"]
    off = by_kind(operations_for(gcp_plan(cloudActions=False), KubeInputs()))
    assert off["Role"]["rules"] == [pods]


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


def test_the_cloud_section_names_what_the_adapters_create() -> None:
    gcp = gcp_plan()
    section = cloud_section(gcp)
    assert section is not None and section.kind == "gcp"
    assert section.cluster == gcp.declaration.name and section.location == gcp.declaration.region
    # GPU and CPU groups, named as their node pools; TPU slices keep their size and are left out.
    assert section.node_pools == {g.name: g.name for g in gcp.groups if g.kind != "tpu"}
    assert any(g.kind == "tpu" for g in gcp.groups)
    # A3 (h100 on GCP) takes reportHostAsFaulty (catalog faulty_host_report), but only for VMs bound to a
    # reservation: the shipped stack also runs the same machine on spot, so its bad hosts are recreated.
    assert section.faulty_host_machine_types == []
    raw = copy.deepcopy(load_declaration("gcp"))
    raw["operations"] = {"enabled": True, "reportFaultyHosts": True}
    raw["slurm"] = {**raw.get("slurm", {}), "restApi": True}
    raw["pools"][1].pop("spot")
    raw["pools"][1]["reservation"] = {"name": "h100-reservation-b"}
    reserved = cloud_section(build_plan(raw))
    assert reserved is not None
    assert reserved.faulty_host_machine_types == sorted({g.machine.name for g in gcp.groups if g.kind == "gpu"})
    assert all(t.startswith(("a3-", "a4")) for t in reserved.faulty_host_machine_types)
    # Off by default: GKE nodes have their own faulty-host procedure (not verified here), so recreate.
    raw["operations"] = {"enabled": True}
    unset = cloud_section(build_plan(raw))
    assert unset is not None and unset.faulty_host_machine_types == []
    aws = cloud_section(plan_of("aws"))
    assert aws is not None and aws.kind == "aws" and aws.location == "us-east-1"
    assert aws.capacity_blocks == {"h100-a": "cr-0123456789abcdef0"} and aws.faulty_host_machine_types == []
    assert cloud_section(plan_of("local")) is None


def test_the_config_carries_the_cloud_section_the_controller_reads(tmp_path: Path) -> None:
    cm = by_kind(operations_for(gcp_plan(), KubeInputs()))["ConfigMap"]
    path = tmp_path / "config.yaml"
    path.write_text(cm["data"]["config.yaml"])
    config = load_config(path)
    assert config.cloud is not None and config.cloud == cloud_section(gcp_plan()) and config.spec.cloud_actions
    assert all(isinstance(v, str) for v in config.cloud.node_pools.values())
    local = by_kind(operations_for(plan_of("local"), KubeInputs()))["ConfigMap"]
    assert "cloud" not in yaml.safe_load(local["data"]["config.yaml"])
    bad = tmp_path / "bad.yaml"
    bad.write_text("cloud: {kind: azure, cluster: c, location: l}\n")
    with pytest.raises(ValueError, match=r"cloud\.kind: Input should be 'gcp' or 'aws'"):
        load_config(bad)


@dataclass(frozen=True)
class CloudInputs(KubeInputs):
    """KubeInputs as the Slurm layer hands them once they carry the cloud identity's annotations."""

    operations_account_annotations: dict[str, str] = field(default_factory=dict)


def test_identity_annotations_and_system_pool_placement() -> None:
    email = "slonk-gcp-ops@proj.iam.gserviceaccount.com"
    inputs = CloudInputs(
        system_selector={SYSTEM_ROLE_LABEL: SYSTEM_ROLE},
        operations_account_annotations={"iam.gke.io/gcp-service-account": email},
    )
    kinds = by_kind(operations_for(gcp_plan(), cast(KubeInputs, inputs)))
    assert kinds["ServiceAccount"]["metadata"]["annotations"] == {"iam.gke.io/gcp-service-account": email}
    pod = kinds["Deployment"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {SYSTEM_ROLE_LABEL: SYSTEM_ROLE} and pod["serviceAccountName"] == "slonk-ops"
    local = by_kind(operations_for(plan_of("local"), KubeInputs(system_selector={})))
    assert "nodeSelector" not in local["Deployment"]["spec"]["template"]["spec"]
    assert "annotations" not in local["ServiceAccount"]["metadata"]


def test_the_metrics_port_is_open_to_the_monitoring_namespaces_only() -> None:
    kinds = by_kind(objects(metricsPort=9100))
    policy = kinds["NetworkPolicy"]["spec"]
    labels = kinds["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert policy["podSelector"]["matchLabels"] == labels and policy["policyTypes"] == ["Ingress"]
    (rule,) = policy["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 9100}]
    assert kinds["Deployment"]["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] == 9100
    (source,) = rule["from"]
    assert set(source) == {"namespaceSelector"}  # every pod of those namespaces, no other namespace
    (expr,) = source["namespaceSelector"]["matchExpressions"]
    assert expr == {"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": ["gmp-system", "monitoring"]}
    assert NAMESPACE_NAME_LABEL == "kubernetes.io/metadata.name"
    custom = by_kind(objects(metricsNamespaces=["observability"]))["NetworkPolicy"]["spec"]["ingress"][0]
    assert custom["from"][0]["namespaceSelector"]["matchExpressions"][0]["values"] == ["observability"]
    assert "NetworkPolicy" not in by_kind(objects(metricsNamespaces=[]))
    with pytest.raises(ValueError, match="metricsNamespaces"):
        OperationsSpec.model_validate({"metricsNamespaces": ["Not A Namespace"]})


def test_cloud_section_is_a_plain_model() -> None:
    assert CloudSection.__doc__ and all(f.description for f in CloudSection.model_fields.values())
