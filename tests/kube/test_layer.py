"""The Kubernetes (Slurm) layer: schema-valid manifests, parented and named resources, counts that do not grow
with nodes, accelerator limits equal to GRES, no config hash on workers, the munge key only in a Secret."""

from __future__ import annotations

import copy
import re
from typing import Any

import kubernetes_validate
import pytest

from slonk_infra.binding import CloudResult
from slonk_infra.clouds import build_plan
from slonk_infra.declaration.stacks import load_declaration, load_stack_config
from slonk_infra.kube.manifests import CONFIG_HASH, build_manifests
from slonk_infra.offline.render import run_program
from slonk_infra.offline.runner import FAKE_RANDOM_B64, SECRET_PLACEHOLDER, run_offline
from slonk_infra.plan import ClusterPlan, naming
from slonk_infra.slurm import render_slurm_files
from slonk_infra.slurm_layer.slurm_cluster import SlurmCluster

STACKS = ["local", "gcp", "aws"]
# Two supported Kubernetes minors: the stacks' default and the oldest one GKE/EKS still support.
KUBE_VERSIONS = ["1.31.0", "1.33.0"]


def plan_for(stack: str) -> ClusterPlan:
    return build_plan(load_declaration(stack))


def manifests(stack: str) -> list[dict[str, Any]]:
    plan = plan_for(stack)
    return build_manifests(plan, render_slurm_files(plan))


@pytest.mark.parametrize("version", KUBE_VERSIONS)
@pytest.mark.parametrize("stack", STACKS)
def test_every_manifest_validates_against_the_kubernetes_schema(stack: str, version: str) -> None:
    objs = manifests(stack)
    assert objs
    for obj in objs:
        kubernetes_validate.validate(obj, version, strict=True)


@pytest.mark.parametrize("stack", STACKS)
def test_rendered_program_manifests_also_validate(stack: str) -> None:
    run = run_program(stack, load_stack_config(stack))
    objs = run.kubernetes_objects()
    # The Slurm layer's objects are exactly what the builders give; the cloud layer may add its own
    # (EKS: a StorageClass; GKE: GPU fabric DaemonSets and its multi-network objects), which must validate
    # too where Kubernetes itself defines their kind.
    program = {(o["kind"], o["metadata"]["name"]) for o in objs}
    built = {(o["kind"], o["metadata"]["name"]) for o in manifests(stack)}
    assert built <= program
    assert {kind for kind, _ in program - built} <= {"StorageClass", "DaemonSet", "Network", "GKENetworkParamSet"}
    for obj in objs:
        if _built_in(obj["apiVersion"]):
            kubernetes_validate.validate(obj, KUBE_VERSIONS[-1], strict=True)


def _built_in(api_version: str) -> bool:
    """A Kubernetes API group (core, apps, *.k8s.io), not a custom resource a cloud defines."""
    group = api_version.rpartition("/")[0]
    return "." not in group or group.endswith(".k8s.io")


def _with_nodes(stack: str, nodes: int) -> ClusterPlan:
    raw: dict[str, Any] = copy.deepcopy(load_declaration(stack))
    for pool in raw["pools"]:
        pool["nodes"] = nodes
        pool["maxNodes"] = nodes
    return build_plan(raw)


@pytest.mark.parametrize("stack", STACKS)
def test_resource_count_is_independent_of_node_count(stack: str) -> None:
    counts = []
    for nodes in (4, 4096):
        plan = _with_nodes(stack, nodes)
        run = run_offline(lambda plan=plan: SlurmCluster(plan.name, plan, CloudResult(provider=None)))  # type: ignore[misc]
        counts.append(sorted((r.type, r.name) for r in run.registrations))
    assert counts[0] == counts[1]


def test_components_parent_and_name_every_object_by_the_naming_chain() -> None:
    plan = plan_for("gcp")
    run = run_offline(lambda: SlurmCluster(plan.name, plan, CloudResult(provider=None)))
    [component] = [r for r in run.registrations if r.type == "slonk-infra:slurm:SlurmCluster"]
    children = [r for r in run.registrations if r is not component]
    assert children and all(r.parent == component.urn for r in children)
    assert not run.duplicate_urns()
    assert not run.output_leaks()
    sts = {r.inputs["metadata"]["name"]: r for r in run.of_type("kubernetes:apps/v1:StatefulSet")}
    for g in plan.groups:
        s = sts[naming.statefulset(g.name)]
        assert s.name == f"{plan.name}-statefulset-{g.name}"
        assert s.inputs["spec"]["replicas"] == g.replicas
        assert s.inputs["spec"]["serviceName"] == naming.WORKERS_SERVICE
        assert s.inputs["spec"]["updateStrategy"] == {"type": "OnDelete"}
        assert s.inputs["spec"]["podManagementPolicy"] == "Parallel"
    services = [r.inputs["metadata"]["name"] for r in run.of_type("kubernetes:core/v1:Service")]
    assert sorted(services) == sorted(o["metadata"]["name"] for o in manifests("gcp") if o["kind"] == "Service")
    assert {naming.CONTROLLER, naming.WORKERS_SERVICE, naming.LOGIN} <= set(services)


def _slurm_gres(files: dict[str, str]) -> dict[str, tuple[str, int]]:
    out: dict[str, tuple[str, int]] = {}
    for line in files["slurm.conf"].splitlines():
        m = re.match(r"NodeName=(\S+) .*Gres=(\w+):[\w-]+:(\d+)", line)
        if m:
            for node in naming.expand(m.group(1)):
                out[node] = (m.group(2), int(m.group(3)))
    return out


@pytest.mark.parametrize("stack", STACKS)
def test_accelerator_limits_equal_slurm_gres_and_workers_never_carry_a_config_hash(stack: str) -> None:
    plan = plan_for(stack)
    files = render_slurm_files(plan)
    gres = _slurm_gres(files.config)
    resource = {"gpu": "nvidia.com/gpu", "tpu": "google.com/tpu"}
    for obj in build_manifests(plan, files):
        if obj["kind"] != "StatefulSet" or obj["metadata"]["labels"].get("app.kubernetes.io/component") != "worker":
            continue
        group = plan.group(obj["metadata"]["name"])
        template = obj["spec"]["template"]
        assert CONFIG_HASH not in template["metadata"].get("annotations", {})
        slurmd = next(c for c in template["spec"]["containers"] if c["name"] == "slurmd")
        limits = slurmd["resources"].get("limits", {})
        # EFA interfaces are the fabric's, not Slurm GRES (tests/clouds/test_first_deploy.py checks them).
        limits = {k: v for k, v in limits.items() if k != "vpc.amazonaws.com/efa"}
        for node in group.node_names:
            if node in gres:
                kind, count = gres[node]
                assert limits == {resource[kind]: str(count)}
            else:
                assert limits == {}
        assert {t["key"] for t in template["spec"]["tolerations"]} == {t.key for t in group.taints}


def test_controller_rolls_on_config_change_and_keeps_state() -> None:
    plan = plan_for("gcp")
    objs = {(o["kind"], o["metadata"]["name"]): o for o in manifests("gcp")}
    ctld = objs[("StatefulSet", naming.CONTROLLER)]
    assert CONFIG_HASH in ctld["spec"]["template"]["metadata"]["annotations"]
    claim = ctld["spec"]["template"]["spec"]["volumes"]
    assert {"name": "state", "persistentVolumeClaim": {"claimName": "slurmctld-state"}} in claim
    probe = ctld["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["exec"]["command"]
    assert "scontrol ping" in " ".join(probe)
    raw: dict[str, Any] = copy.deepcopy(load_declaration("gcp"))
    raw["slurm"]["preemptMode"] = "CANCEL"
    changed = build_plan(raw)
    other = build_manifests(changed, render_slurm_files(changed))
    new_ctld = next(o for o in other if o["kind"] == "StatefulSet" and o["metadata"]["name"] == naming.CONTROLLER)
    old_hash = ctld["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH]
    assert new_ctld["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH] != old_hash
    workers_before = [o for o in manifests("gcp") if o["metadata"]["name"] == "h100-a"]
    workers_after = [o for o in other if o["metadata"]["name"] == "h100-a"]
    assert workers_before == workers_after, "a Slurm config change must not touch worker pod templates"
    assert plan.name == changed.name


def test_munge_key_only_in_a_secret_and_never_in_plain_output() -> None:
    run = run_program("gcp", load_stack_config("gcp"))
    holders = [r for r in run.registrations if FAKE_RANDOM_B64 in repr(r.inputs)]
    # The offline mock gives every RandomBytes the same bytes: the munge key and the JWT key.
    assert sorted((r.type, r.inputs["metadata"]["name"]) for r in holders) == [
        ("kubernetes:core/v1:Secret", "munge-key"),
        ("kubernetes:core/v1:Secret", "slurm-jwt"),
    ]
    for obj in run.kubernetes_objects():
        assert FAKE_RANDOM_B64 not in repr(obj)
        if obj["kind"] == "Secret":
            assert set(obj["data"].values()) == {SECRET_PLACEHOLDER}
    keys = [r for r in run.registrations if r.type == "random:index/randomBytes:RandomBytes"]
    assert sorted(r.name for r in keys) == ["slonk-gcp-jwt-key", "slonk-gcp-munge-key"]
    assert all(r.protect for r in keys)


def test_privileged_only_where_needed_and_seccomp_everywhere() -> None:
    for obj in manifests("local"):
        if obj["kind"] != "StatefulSet":
            continue
        spec = obj["spec"]["template"]["spec"]
        for c in [*spec.get("initContainers", []), *spec["containers"]]:
            ctx = c.get("securityContext", {})
            assert ctx.get("seccompProfile") == {"type": "RuntimeDefault"}, (obj["metadata"]["name"], c["name"])
            if ctx.get("privileged"):
                assert c["name"] in ("slurmd", "nfs"), c["name"]
            else:
                assert ctx["capabilities"]["drop"] == ["ALL"]


def test_stateful_objects_are_protected() -> None:
    run = run_program("gcp", load_stack_config("gcp"))
    for r in run.registrations:
        if r.type in ("kubernetes:core/v1:PersistentVolume", "kubernetes:core/v1:PersistentVolumeClaim"):
            assert r.protect and r.retain_on_delete, r.name
        if r.type == "kubernetes:core/v1:PersistentVolume":
            assert r.inputs["spec"]["persistentVolumeReclaimPolicy"] == "Retain"


def test_tpu_workers_get_host_ports_and_gpu_workers_do_not() -> None:
    objs = {o["metadata"]["name"]: o for o in manifests("gcp") if o["kind"] == "StatefulSet"}
    tpu_ports = objs["v5p-0"]["spec"]["template"]["spec"]["containers"][0]["ports"]
    gpu_ports = objs["h100-a"]["spec"]["template"]["spec"]["containers"][0]["ports"]
    assert any("hostPort" in p for p in tpu_ports)
    assert not any("hostPort" in p for p in gpu_ports)
    selector = objs["v5p-0"]["spec"]["template"]["spec"]["nodeSelector"]
    assert selector["cloud.google.com/gke-tpu-topology"] == "4x4x4"


def test_rest_api_adds_slurmrestd_and_gives_the_controller_its_jwt_key() -> None:
    raw: dict[str, Any] = copy.deepcopy(load_declaration("gcp"))
    raw["slurm"]["restApi"] = True
    plan = build_plan(raw)
    files = render_slurm_files(plan)
    objs = {(o["kind"], o["metadata"]["name"]): o for o in build_manifests(plan, files)}
    assert ("Deployment", "slurmrestd") in objs and ("Service", "slurmrestd") in objs
    assert ("Secret", "slurm-jwt") in objs
    for obj in objs.values():
        kubernetes_validate.validate(obj, KUBE_VERSIONS[-1], strict=True)
    assert "AuthAltParameters=jwt_key=/etc/slurm/jwt/jwt_hs256.key" in files.config["slurm.conf"]
    ctld_volumes = objs[("StatefulSet", naming.CONTROLLER)]["spec"]["template"]["spec"]["volumes"]
    sources = next(v for v in ctld_volumes if v["name"] == "slurm-config")["projected"]["sources"]
    assert {
        "secret": {"name": "slurm-jwt", "items": [{"key": "jwt_hs256.key", "path": "jwt/jwt_hs256.key", "mode": 0o440}]}
    } in sources
    rest = objs[("Deployment", "slurmrestd")]["spec"]["template"]["spec"]["containers"][0]
    assert rest["securityContext"]["runAsNonRoot"] is True
