"""The login builder: sshd pods with the Slurm client config and shared home, and their SSH Service."""

from __future__ import annotations

from slonk_infra import vocab
from slonk_infra.kube import cluster_wide, login
from slonk_infra.kube.inputs import KubeInputs
from slonk_infra.kube.pod import config_hash
from slonk_infra.plan import naming
from tests.kube_support import container, files_for, matches, mounts, plan_for


def test_service_type_and_replicas_come_from_the_declaration() -> None:
    for stack, kind in (("local", "ClusterIP"), ("gcp", "LoadBalancer"), ("aws", "LoadBalancer")):
        plan = plan_for(stack)
        svc = login.service(plan)
        sts = login.statefulset(plan, files_for(plan), KubeInputs())
        assert svc["spec"]["type"] == kind == plan.declaration.login.service_type
        assert svc["spec"]["ports"] == [{"name": "ssh", "port": 22, "targetPort": 22}]
        assert sts["spec"]["replicas"] == plan.declaration.login.replicas
        assert sts["metadata"]["name"] == naming.LOGIN
        assert matches(svc["spec"]["selector"], sts["spec"]["template"]["metadata"]["labels"])


def test_sshd_gets_only_the_capabilities_it_needs_and_is_not_privileged() -> None:
    plan = plan_for("aws")
    sts = login.statefulset(plan, files_for(plan), KubeInputs())
    ctx = container(sts["spec"]["template"]["spec"], "login")["securityContext"]
    assert "privileged" not in ctx
    assert ctx["capabilities"]["drop"] == ["ALL"]
    assert set(ctx["capabilities"]["add"]) == set(login.SSHD_CAPABILITIES)
    assert "SYS_ADMIN" not in ctx["capabilities"]["add"]


def test_login_mounts_the_config_munge_and_every_shared_filesystem() -> None:
    plan = plan_for("gcp")
    files = files_for(plan)
    sts = login.statefulset(plan, files, KubeInputs())
    spec = sts["spec"]["template"]["spec"]
    found = mounts(container(spec, "login"))
    assert found[vocab.CONF_DIR] == "slurm-config"
    assert found[vocab.MUNGE_SOCKET_DIR] == "munge-socket"
    for vol in plan.declaration.storage:
        assert found[vol.mount_path] == f"shared-{vol.name}"
    assert "/home" in found
    assert [c["name"] for c in spec["initContainers"]] == ["munged"]
    assert spec["priorityClassName"] == vocab.control_priority(plan.namespace)
    assert sts["spec"]["template"]["metadata"]["annotations"] == {vocab.CONFIG_HASH: config_hash(files)}


def test_only_the_login_pods_take_ssh_from_outside_the_namespace() -> None:
    plan = plan_for("gcp")
    [ssh] = [p for p in cluster_wide.network_policies(plan) if p["metadata"]["name"] == "login-ssh"]
    labels = login.statefulset(plan, files_for(plan), KubeInputs())["spec"]["template"]["metadata"]["labels"]
    assert matches(ssh["spec"]["podSelector"]["matchLabels"], labels)
    assert ssh["spec"]["ingress"] == [{"ports": [{"protocol": "TCP", "port": 22}]}]
