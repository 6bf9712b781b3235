"""GKE pieces for running and repairing the cluster: the operations controller's identity, who owns a
pool's size, local SSD and host maintenance, the cluster's maintenance policy and control-plane access,
and the internal login load balancer."""

from __future__ import annotations

import dataclasses
from typing import Any

import pulumi
import pytest

from slonk_infra.binding import CloudResult
from slonk_infra.clouds import build_plan, deploy_cloud
from slonk_infra.clouds.gcp.operations import PERMISSIONS, SERVICE_ACCOUNT, ops_account_id, ops_role_id
from slonk_infra.clouds.gcp.target import TARGET
from slonk_infra.kube import operations as kube_operations
from slonk_infra.offline.runner import OfflineRun, run_offline
from slonk_infra.plan import ClusterPlan
from tests.declaration.test_errors import Raw, edit, gcp
from tests.support import deploy, resolve_result

NODE_POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"
ACCOUNT = "gcp:serviceaccount/account:Account"
CUSTOM_ROLE = "gcp:projects/iAMCustomRole:IAMCustomRole"
PROJECT_MEMBER = "gcp:projects/iAMMember:IAMMember"
ACCOUNT_MEMBER = "gcp:serviceaccount/iAMMember:IAMMember"

pytestmark = pytest.mark.filterwarnings("ignore:.*has been deprecated in favor of:DeprecationWarning")


def operations_off(raw: Raw) -> None:
    raw["operations"] = {"enabled": False}


def node_pool(run: OfflineRun[Any], name: str) -> dict[str, Any]:
    [found] = [r.inputs for r in run.of_type(NODE_POOL) if r.inputs.get("name") == name]
    return found


def cluster(run: OfflineRun[Any]) -> dict[str, Any]:
    [found] = run.of_type(CLUSTER)
    return found.inputs


@pytest.fixture(scope="module")
def plan() -> ClusterPlan:
    plan = build_plan(gcp())
    assert plan.declaration.operations.enabled  # the shipped gcp stack runs the controller
    return plan


@pytest.fixture(scope="module")
def run(plan: ClusterPlan) -> OfflineRun[CloudResult]:
    return deploy(plan)


def ignored_by_resource(plan: ClusterPlan) -> dict[str, list[str]]:
    """``ignore_changes`` of every resource, as the engine receives it (read by a stack transform)."""
    seen: dict[str, list[str]] = {}

    def record(args: pulumi.ResourceTransformArgs) -> None:
        seen[args.name] = list(args.opts.ignore_changes or [])

    def program() -> CloudResult:
        pulumi.runtime.register_resource_transform(record)
        return deploy_cloud(plan).result

    run_offline(program, resolve_result)
    return seen


# ------------------------------------------------------------------------------- operations identity
def test_operations_get_a_google_account_with_exactly_the_machine_permissions(run: OfflineRun[CloudResult]) -> None:
    accounts = {a.inputs["accountId"] for a in run.of_type(ACCOUNT)}
    assert accounts == {"slonk-gcp-nodes", "slonk-gcp-ops"}
    [role] = run.of_type(CUSTOM_ROLE)
    assert role.inputs["roleId"] == "slonkGcpOpsMachines"
    # reportHostAsFaulty needs compute.instances.update ("Report faulty host", Required permissions);
    # the MIG's resize, deleteInstances and recreateInstances need instanceGroupManagers.update.
    assert (
        sorted(role.inputs["permissions"])
        == sorted(PERMISSIONS)
        == [
            "compute.instanceGroupManagers.get",
            "compute.instanceGroupManagers.update",
            "compute.instances.get",
            "compute.instances.update",
            "container.clusters.get",
        ]
    )
    [grant] = [m for m in run.of_type(PROJECT_MEMBER) if m.name.endswith("-ops-machines")]
    assert grant.inputs["member"] == "serviceAccount:slonk-gcp-ops@my-ml-project.iam.gserviceaccount.com"
    assert grant.inputs["role"] == role.name  # the mock's name of the role resource
    [workload] = run.of_type(ACCOUNT_MEMBER)
    assert workload.inputs["role"] == "roles/iam.workloadIdentityUser"
    assert workload.inputs["member"] == "serviceAccount:my-ml-project.svc.id.goog[slurm/slonk-ops]"


def test_the_controllers_service_account_is_told_its_google_account(plan: ClusterPlan) -> None:
    resolved = run_offline(lambda: deploy_cloud(plan).result, lambda r: dict(r.operations_account_annotations)).resolved
    assert resolved == {"iam.gke.io/gcp-service-account": "slonk-gcp-ops@my-ml-project.iam.gserviceaccount.com"}
    # The Workload Identity member names the ServiceAccount the Kubernetes layer creates.
    assert SERVICE_ACCOUNT == kube_operations.NAME


def test_no_operations_no_identity_and_pulumi_keeps_the_pool_sizes() -> None:
    plan = build_plan(edit(gcp, operations_off))
    run = deploy(plan)
    assert {a.inputs["accountId"] for a in run.of_type(ACCOUNT)} == {"slonk-gcp-nodes"}
    assert not run.of_type(CUSTOM_ROLE) and not run.of_type(ACCOUNT_MEMBER)
    assert run.value.operations_account_annotations == {}
    assert not any(ignored_by_resource(plan).values())


@pytest.mark.parametrize(
    ("cluster_name", "account", "role"),
    [
        ("slonk-gcp", "slonk-gcp-ops", "slonkGcpOpsMachines"),
        ("a" * 30, "a" * 26 + "-ops", "a" * 30 + "OpsMachines"),
        ("research-cluster-number-one-xy", "research-cluster-number-on-ops", "researchClusterNumberOneXyOpsMachines"),
    ],
)
def test_ops_names_fit_iam_limits(cluster_name: str, account: str, role: str) -> None:
    assert ops_account_id(cluster_name) == account and 6 <= len(account) <= 30
    assert ops_role_id(cluster_name) == role and len(role) <= 64


# ------------------------------------------------------------------------------------------ pool size
def test_with_operations_the_controller_owns_gpu_and_cpu_pool_sizes_not_tpu_slices(plan: ClusterPlan) -> None:
    ignored = ignored_by_resource(plan)
    for group in plan.groups:
        [name] = [n for n in ignored if n.endswith(f"-pool-{group.name}")]
        assert ignored[name] == ([] if group.kind == "tpu" else ["nodeCount"]), group.name
    assert ignored["slonk-gcp-system"] == []


def test_pools_are_still_created_at_their_declared_size(run: OfflineRun[CloudResult], plan: ClusterPlan) -> None:
    for group in plan.groups:
        assert node_pool(run, group.name)["nodeCount"] == group.replicas


# ------------------------------------------------------------------------------- local SSD, maintenance
@pytest.mark.parametrize(
    ("machine", "ssds", "interval"), [("a3-megagpu-8g", 16, "PERIODIC"), ("a3-ultragpu-8g", 32, None)]
)
def test_gpu_pools_put_ephemeral_storage_on_local_ssd(machine: str, ssds: int, interval: str | None) -> None:
    raw = gcp()
    raw["pools"] = [{"name": "g", "kind": "gpu", "machineType": machine, "nodes": 2}]
    config = node_pool(deploy(build_plan(raw)), "g")["nodeConfig"]
    assert config["ephemeralStorageLocalSsdConfig"] == {"localSsdCount": ssds}
    assert config.get("hostMaintenancePolicy") == ({"maintenanceInterval": interval} if interval else None)


def test_periodic_host_maintenance_can_be_turned_off() -> None:
    raw = gcp()
    raw["gcp"]["periodicHostMaintenance"] = False
    config = node_pool(deploy(build_plan(raw)), "h100-a")["nodeConfig"]
    assert "hostMaintenancePolicy" not in config
    assert config["ephemeralStorageLocalSsdConfig"] == {"localSsdCount": 16}


def test_cpu_and_tpu_pools_keep_the_boot_disk(run: OfflineRun[CloudResult]) -> None:
    for name in ("cpu", "v5p-0"):
        config = node_pool(run, name)["nodeConfig"]
        assert "ephemeralStorageLocalSsdConfig" not in config and "hostMaintenancePolicy" not in config


def test_cluster_has_a_weekly_window_and_holds_node_upgrades(run: OfflineRun[CloudResult]) -> None:
    policy = cluster(run)["maintenancePolicy"]
    assert policy["recurringWindow"] == {
        "startTime": "2026-01-03T03:00:00Z",
        "endTime": "2026-01-03T11:00:00Z",
        "recurrence": "FREQ=WEEKLY;BYDAY=SA,SU",
    }
    assert policy["maintenanceExclusions"] == [
        {
            "exclusionName": "slonk-hold-node-upgrades",
            "startTime": "2026-01-01T00:00:00Z",
            "exclusionOptions": {"scope": "NO_MINOR_OR_NODE_UPGRADES", "endTimeBehavior": "UNTIL_END_OF_SUPPORT"},
        }
    ]


def test_a_window_may_cross_midnight_and_the_hold_may_be_lifted() -> None:
    raw = gcp()
    raw["gcp"]["maintenance"] = {
        "windowStart": "22:30",
        "windowHours": 6,
        "days": ["MO", "WE", "FR"],
        "holdNodeUpgrades": False,
    }
    policy = cluster(deploy(build_plan(raw)))["maintenancePolicy"]
    assert policy["recurringWindow"] == {
        "startTime": "2026-01-03T22:30:00Z",
        "endTime": "2026-01-04T04:30:00Z",
        "recurrence": "FREQ=WEEKLY;BYDAY=MO,WE,FR",
    }
    assert "maintenanceExclusions" not in policy


# -------------------------------------------------------------------------------------- control plane
def test_control_plane_admits_only_the_authorized_networks(run: OfflineRun[CloudResult], plan: ClusterPlan) -> None:
    cidrs = plan.declaration.kubernetes.authorized_networks
    assert cidrs
    blocks = cluster(run)["masterAuthorizedNetworksConfig"]["cidrBlocks"]
    assert [b["cidrBlock"] for b in blocks] == cidrs


def test_no_authorized_networks_renders_no_restriction(plan: ClusterPlan) -> None:
    # The plan checks require the field when the library creates the cluster; the adapter still renders
    # no restriction for None rather than an empty list (which would lock everyone out).
    decl = plan.declaration
    kubernetes = decl.kubernetes.model_copy(update={"authorized_networks": None})
    open_plan = dataclasses.replace(plan, declaration=decl.model_copy(update={"kubernetes": kubernetes}))
    assert "masterAuthorizedNetworksConfig" not in cluster(deploy(open_plan))


# ------------------------------------------------------------------------------------------- login
def test_private_login_load_balancer_is_internal_on_gke() -> None:
    assert TARGET.login_service_annotations(True) == {"networking.gke.io/load-balancer-type": "Internal"}
    assert TARGET.login_service_annotations(False) == {}


def test_the_workload_identity_binding_waits_for_the_cluster_that_creates_the_pool(run: OfflineRun[Any]) -> None:
    # <project>.svc.id.goog exists only once a Workload Identity cluster does: a binding made alongside the
    # first cluster of a project is refused ("Identity Pool does not exist"), so it must depend on the cluster.
    [cluster_reg] = run.of_type(CLUSTER)
    checked = 0
    for reg in [
        *run.of_type(ACCOUNT_MEMBER),
        *run.of_type(PROJECT_MEMBER),
        *run.of_type(CUSTOM_ROLE),
        *run.of_type(ACCOUNT),
    ]:
        if "-ops" in reg.name:
            assert cluster_reg.urn in reg.dependencies, reg.name
            checked += 1
    assert checked == 4  # the account, the role, its grant and the workload identity binding
