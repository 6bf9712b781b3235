"""The worker builder: one StatefulSet per group, sized to what slurm.conf gives its nodes, never restarted
by a config change, drained before it stops."""

from __future__ import annotations

import re

import pytest

from slonk_infra import vocab
from slonk_infra.kube import worker
from slonk_infra.kube.fabric import fabric_pod_parts
from slonk_infra.kube.inputs import KubeInputs
from slonk_infra.plan import ClusterPlan, WorkerGroup, naming
from tests.kube_support import container, files_for, matches, mounts, plan_for

STACKS = ["local", "gcp", "aws"]


def _groups(stack: str) -> list[tuple[ClusterPlan, WorkerGroup]]:
    plan = plan_for(stack)
    return [(plan, g) for g in plan.groups]


def _node_record(plan: ClusterPlan, group: WorkerGroup) -> dict[str, str]:
    conf = files_for(plan).config["slurm.conf"]
    [line] = [ln for ln in conf.splitlines() if ln.startswith(f"NodeName={group.hostlist} ")]
    return dict(item.split("=", 1) for item in line.split())


@pytest.mark.parametrize("stack", STACKS)
def test_accelerator_limit_equals_the_groups_gres_count(stack: str) -> None:
    for plan, group in _groups(stack):
        slurmd = container(worker.statefulset(plan, group, KubeInputs())["spec"]["template"]["spec"], "slurmd")
        record = _node_record(plan, group)
        if group.kind == "cpu":
            assert "limits" not in slurmd["resources"] and "Gres" not in record
            continue
        resource = {"gpu": vocab.GPU_RESOURCE, "tpu": vocab.TPU_RESOURCE}[group.kind]
        count = int(record["Gres"].rsplit(":", 1)[1])
        assert count == group.gres_count > 0
        # Besides the accelerators, the fabric's devices (EFA interfaces on EKS) from the catalog.
        fabric = fabric_pod_parts(group.machine).resources
        assert slurmd["resources"]["limits"] == {resource: str(count), **fabric}
        assert slurmd["resources"]["requests"][resource] == str(count)


@pytest.mark.parametrize("stack", STACKS)
def test_requests_equal_what_slurm_schedules_on_the_node(stack: str) -> None:
    for plan, group in _groups(stack):
        req = container(worker.statefulset(plan, group, KubeInputs())["spec"]["template"]["spec"], "slurmd")[
            "resources"
        ]["requests"]
        record = _node_record(plan, group)
        cores = int(record["Sockets"]) * int(record["CoresPerSocket"]) - int(record.get("CoreSpecCount", "0"))
        assert int(req["cpu"]) == cores * int(record["ThreadsPerCore"])
        assert req["memory"] == f"{record['RealMemory']}Mi"


def test_on_delete_parallel_and_no_config_hash() -> None:
    for plan, group in _groups("gcp"):
        sts = worker.statefulset(plan, group, KubeInputs())
        assert sts["spec"]["updateStrategy"] == {"type": "OnDelete"}
        assert sts["spec"]["podManagementPolicy"] == "Parallel"
        assert sts["spec"]["replicas"] == group.replicas
        assert sts["metadata"]["name"] == naming.statefulset(group.name)
        assert vocab.CONFIG_HASH not in sts["spec"]["template"]["metadata"].get("annotations", {})
        assert sts["spec"]["template"]["metadata"]["labels"][vocab.GROUP_LABEL] == group.name
        assert matches(sts["spec"]["selector"]["matchLabels"], sts["spec"]["template"]["metadata"]["labels"])


def test_prestop_drains_within_the_grace_period() -> None:
    plan, group = _groups("aws")[0]
    spec = worker.statefulset(plan, group, KubeInputs())["spec"]["template"]["spec"]
    slurmd = container(spec, "slurmd")
    assert slurmd["lifecycle"]["preStop"]["exec"]["command"] == [f"{vocab.SCRIPTS_DIR}/drain.sh"]
    assert "drain.sh" in files_for(plan).scripts
    env = {e["name"]: e.get("value") for e in slurmd["env"]}
    assert 0 < int(env["SLONK_DRAIN_SECONDS"]) < spec["terminationGracePeriodSeconds"] == worker.WORKER_GRACE_SECONDS
    assert env["SLONK_CONTROLLER"] == f"slurmctld-0.{plan.namespace}.svc.cluster.local."


def test_probes_ask_only_the_local_slurmd() -> None:
    plan, group = _groups("local")[0]
    slurmd = container(worker.statefulset(plan, group, KubeInputs())["spec"]["template"]["spec"], "slurmd")
    assert slurmd["startupProbe"]["exec"]["command"] == ["scontrol", "show", "slurmd"]
    assert slurmd["livenessProbe"]["exec"]["command"] == ["scontrol", "show", "slurmd"]
    # readiness too: no RPC to slurmctld from every worker every period (sinfo was a full node table)
    assert slurmd["readinessProbe"]["exec"]["command"] == ["scontrol", "show", "slurmd"]
    # The startup probe allows 5 minutes: a node's health check and registration fit in it.
    assert slurmd["startupProbe"]["periodSeconds"] * slurmd["startupProbe"]["failureThreshold"] == 300


@pytest.mark.parametrize("stack", STACKS)
def test_every_shared_filesystem_is_mounted_through_its_claim(stack: str) -> None:
    for plan, group in _groups(stack):
        spec = worker.statefulset(plan, group, KubeInputs())["spec"]["template"]["spec"]
        found = mounts(container(spec, "slurmd"))
        claims = {
            v["name"]: v["persistentVolumeClaim"]["claimName"] for v in spec["volumes"] if "persistentVolumeClaim" in v
        }
        for vol in plan.declaration.storage:
            assert claims[found[vol.mount_path]] == vocab.claim_name(vol.name)
        assert found[vocab.SLURMD_SPOOL] == "spool"


def test_health_check_counts_come_from_files_not_the_pod_environment() -> None:
    """slurmd runs the health check without the pod's environment: the counts ship beside the script."""
    for plan, group in _groups("gcp"):
        slurmd = container(worker.statefulset(plan, group, KubeInputs())["spec"]["template"]["spec"], "slurmd")
        assert not [e for e in slurmd["env"] if e["name"].startswith("SLONK_EXPECTED")]
        lines = files_for(plan).scripts["health-groups.txt"].splitlines()
        gpus = group.gres_count if group.kind == "gpu" else 0
        chips = group.gres_count if group.kind == "tpu" else 0
        assert f"{group.name} {gpus} {chips}" in lines


def test_pinned_to_the_pool_one_per_node_and_tolerating_exactly_its_taints() -> None:
    for plan, group in _groups("gcp"):
        spec = worker.statefulset(plan, group, KubeInputs())["spec"]["template"]["spec"]
        assert spec["nodeSelector"][vocab.POOL_LABEL] == group.name
        assert spec["nodeSelector"] == group.node_selector
        [term] = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert term["topologyKey"] == "kubernetes.io/hostname"
        assert [(t["key"], t["value"], t["effect"]) for t in spec["tolerations"]] == [
            (t.key, t.value, t.effect) for t in group.taints
        ]
        if group.kind == "gpu":
            assert (vocab.GPU_RESOURCE, "NoSchedule") in {(t["key"], t["effect"]) for t in spec["tolerations"]}
        assert spec["priorityClassName"] == vocab.worker_priority(plan.namespace)


def test_local_clusters_do_not_pin_workers() -> None:
    plan, group = _groups("local")[0]
    spec = worker.statefulset(plan, group, KubeInputs(pin_to_pools=False))["spec"]["template"]["spec"]
    assert "nodeSelector" not in spec and "affinity" not in spec


def test_multi_host_tpu_slices_open_the_tpu_runtime_ports() -> None:
    plan = plan_for("gcp")
    tpus = [g for g in plan.groups if g.kind == "tpu"]
    assert tpus
    for group in tpus:
        slurmd = container(worker.statefulset(plan, group, KubeInputs())["spec"]["template"]["spec"], "slurmd")
        host_ports = sorted(p["hostPort"] for p in slurmd["ports"] if "hostPort" in p)
        assert host_ports == (sorted(worker.TPU_HOST_PORTS) if group.replicas > 1 else [])
        assert group.node_selector[vocab.TPU_TOPOLOGY_LABEL] == group.tpu_topology


def test_workers_service_is_headless_and_selects_every_group() -> None:
    plan = plan_for("gcp")
    svc = worker.service(plan)
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"] is True
    assert svc["metadata"]["name"] == naming.WORKERS_SERVICE
    assert svc["spec"]["ports"][0]["port"] == vocab.SLURMD_PORT
    for group in plan.groups:
        sts = worker.statefulset(plan, group, KubeInputs())
        assert sts["spec"]["serviceName"] == naming.WORKERS_SERVICE
        assert matches(svc["spec"]["selector"], sts["spec"]["template"]["metadata"]["labels"])
    assert re.search(rf"\b{naming.workers_domain(plan.namespace)}\b", str(sts["spec"]["template"]["spec"]["dnsConfig"]))
