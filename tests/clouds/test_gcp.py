"""The GKE adapter under Pulumi mocks (preview=False, so every apply runs)."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

from slonk_infra.binding import CloudResult
from slonk_infra.catalog import load_catalog, topology_chips
from slonk_infra.clouds import build_plan
from slonk_infra.clouds.common import SYSTEM_POOL
from slonk_infra.clouds.gcp import TOPOLOGY_LABELS, GcpInfrastructure, filestore_share
from slonk_infra.clouds.gcp.infrastructure import node_account_id
from slonk_infra.declaration.stacks import load_declaration
from slonk_infra.offline.runner import OfflineRun, run_offline
from slonk_infra.plan import ClusterPlan
from slonk_infra.vocab import SYSTEM_ROLE, SYSTEM_ROLE_LABEL
from tests.support import declaration, deploy

NODE_POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"
FILESTORE = "gcp:filestore/instance:Instance"
RESOURCE_POLICY = "gcp:compute/resourcePolicy:ResourcePolicy"
IAM_MEMBER = "gcp:projects/iAMMember:IAMMember"

# Importing pulumi_gcp.compute warns about deprecated resources this adapter does not use.
pytestmark = pytest.mark.filterwarnings("ignore:.*has been deprecated in favor of:DeprecationWarning")


def raw_gcp() -> dict[str, Any]:
    return declaration("gcp")


def pool(run: OfflineRun[Any], group: str) -> dict[str, Any]:
    found = [r for r in run.of_type(NODE_POOL) if r.inputs.get("name") == group]
    assert len(found) == 1, f"{len(found)} node pools named {group}"
    return found[0].inputs


def nodes_account(run: OfflineRun[Any]) -> Any:
    """The nodes' IAM service account (the operations controller has its own)."""
    [account] = [a for a in run.of_type("gcp:serviceaccount/account:Account") if a.name.endswith("-nodes")]
    return account


def node_bindings(run: OfflineRun[Any]) -> list[Any]:
    """The nodes' project role bindings."""
    return [m for m in run.of_type(IAM_MEMBER) if "-nodes-" in m.name]


@pytest.fixture(scope="module")
def plan() -> ClusterPlan:
    return build_plan(raw_gcp())


@pytest.fixture(scope="module")
def run(plan: ClusterPlan) -> OfflineRun[CloudResult]:
    return deploy(plan)


def test_one_node_pool_per_group_plus_system(run: OfflineRun[CloudResult], plan: ClusterPlan) -> None:
    names = sorted(r.inputs["name"] for r in run.of_type(NODE_POOL))
    assert names == sorted([g.name for g in plan.groups] + [SYSTEM_POOL])


def test_gpu_pools_carry_machine_accelerators_taints_labels_counts(
    run: OfflineRun[CloudResult], plan: ClusterPlan
) -> None:
    gpu_groups = [g for g in plan.groups if g.kind == "gpu"]
    assert gpu_groups
    for group in gpu_groups:
        inputs = pool(run, group.name)
        config = inputs["nodeConfig"]
        assert group.machine.accelerator is not None and group.machine.label is not None
        assert config["machineType"] == group.machine.name == "a3-megagpu-8g"
        assert config["guestAccelerators"] == [
            {
                "type": group.machine.label.value,
                "count": group.machine.accelerator.count,
                "gpuDriverInstallationConfig": {"gpuDriverVersion": "LATEST"},
            }
        ]
        assert config["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}]
        assert config["labels"] == group.node_labels
        assert config["spot"] is group.spot
        assert config["gvnic"] == {"enabled": True}
        assert config["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
        assert inputs["nodeCount"] == group.replicas
        assert inputs["nodeLocations"] == [plan.declaration.zone]
        assert group.machine.gpu_nics > 0
        # The GPU NICs attach to the networks the adapter created, named as the pods name them.
        assert inputs["networkConfig"] == {
            "additionalNodeNetworkConfigs": [
                {"network": f"slonk-gcp-vpc{i}", "subnetwork": f"slonk-gcp-vpc{i}"} for i in range(1, 9)
            ]
        }
        assert inputs["upgradeSettings"] == {"strategy": "SURGE", "maxSurge": 0, "maxUnavailable": 1}


def test_reserved_pool_uses_reservation_and_unreserved_pool_is_compact(run: OfflineRun[CloudResult]) -> None:
    reserved = pool(run, "h100-a")
    assert reserved["nodeConfig"]["reservationAffinity"] == {
        "consumeReservationType": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name",
        "values": ["h100-reservation-a"],
    }
    assert "placementPolicy" not in reserved
    spot = pool(run, "h100-b")
    assert "reservationAffinity" not in spot["nodeConfig"]
    assert spot["placementPolicy"] == {"type": "COMPACT"}


def test_cpu_pool_has_no_accelerator_or_placement(run: OfflineRun[CloudResult]) -> None:
    cpu = pool(run, "cpu")
    assert cpu["nodeConfig"]["machineType"] == "n2-standard-16"
    assert "guestAccelerators" not in cpu["nodeConfig"]
    assert "placementPolicy" not in cpu
    assert "networkConfig" not in cpu
    assert cpu["nodeCount"] == 2


def test_tpu_slices_are_pools_of_chips_over_four_with_topology(run: OfflineRun[CloudResult], plan: ClusterPlan) -> None:
    slices = [g for g in plan.groups if g.kind == "tpu"]
    assert [g.name for g in slices] == ["v5p-0", "v5p-1"]
    for group in slices:
        assert group.tpu_topology is not None
        inputs = pool(run, group.name)
        assert inputs["nodeCount"] == topology_chips(group.tpu_topology) // 4 == 16
        assert inputs["placementPolicy"] == {"type": "COMPACT", "tpuTopology": "4x4x4"}
        config = inputs["nodeConfig"]
        assert config["machineType"] == "ct5p-hightpu-4t"
        assert {"key": "google.com/tpu", "value": "present", "effect": "NO_SCHEDULE"} in config["taints"]
        assert "guestAccelerators" not in config
        assert "upgradeSettings" not in inputs


def test_single_host_slice_has_no_placement_and_tpu7x_gets_a_workload_policy() -> None:
    raw = raw_gcp()
    raw["tpuSlices"] = [
        {"name": "v5e", "generation": "v5e", "topology": "2x2"},
        {"name": "ir", "generation": "tpu7x", "topology": "4x4x4"},
    ]
    plan = build_plan(raw)
    assert load_catalog().tpus["tpu7x"].workload_policy
    run = deploy(plan)
    single = pool(run, "v5e-0")
    assert single["nodeCount"] == 1
    assert "placementPolicy" not in single
    [policy] = run.of_type(RESOURCE_POLICY)
    assert policy.inputs["workloadPolicy"] == {"type": "HIGH_THROUGHPUT", "acceleratorTopology": "4x4x4"}
    assert policy.inputs["region"] == plan.declaration.region
    ironwood = pool(run, "ir-0")
    assert ironwood["nodeCount"] == 16
    assert ironwood["placementPolicy"]["policyName"] == policy.name  # the mock names it after the resource
    assert ironwood["placementPolicy"]["tpuTopology"] == "4x4x4"
    assert ironwood["nodeConfig"]["diskType"] == "hyperdisk-balanced"


def test_machines_the_catalog_marks_hyperdisk_only_boot_from_hyperdisk() -> None:
    # GKE: "For A3 Ultra node pools, you must set the disk type to hyperdisk-balanced" (catalog
    # storage.yaml); other machines keep GKE's default boot disk.
    raw = declaration("gcp")
    raw["pools"][0] = {"name": "h200", "kind": "gpu", "machineType": "a3-ultragpu-8g", "nodes": 2}
    plan = build_plan(raw)
    assert plan.group("h200").machine.hyperdisk_only and not plan.group("h100-b").machine.hyperdisk_only
    run = deploy(plan)
    assert pool(run, "h200")["nodeConfig"]["diskType"] == "hyperdisk-balanced"
    assert "diskType" not in pool(run, "h100-b")["nodeConfig"]
    assert "diskType" not in pool(run, "cpu")["nodeConfig"]


def test_system_pool_is_labelled_for_controller_and_login(run: OfflineRun[CloudResult]) -> None:
    system = pool(run, SYSTEM_POOL)
    assert system["nodeCount"] == 2
    assert system["nodeConfig"]["machineType"] == "n2-standard-8"
    assert system["nodeConfig"]["labels"] == {SYSTEM_ROLE_LABEL: SYSTEM_ROLE}
    assert "taints" not in system["nodeConfig"]


def test_cluster_is_ai_ready_and_protected(run: OfflineRun[CloudResult], plan: ClusterPlan) -> None:
    [cluster] = run.of_type(CLUSTER)
    inputs = cluster.inputs
    assert inputs["removeDefaultNodePool"] is True
    assert inputs["deletionProtection"] is True
    assert inputs["workloadIdentityConfig"] == {"workloadPool": "my-ml-project.svc.id.goog"}
    assert inputs["datapathProvider"] == "ADVANCED_DATAPATH"
    assert inputs["releaseChannel"] == {"channel": "REGULAR"}
    assert inputs["addonsConfig"]["gcpFilestoreCsiDriverConfig"] == {"enabled": True}
    assert inputs["addonsConfig"]["gcePersistentDiskCsiDriverConfig"] == {"enabled": True}
    assert inputs["enableMultiNetworking"] is True
    assert inputs["location"] == plan.declaration.region


def test_kubeconfig_uses_the_gke_auth_plugin(run: OfflineRun[CloudResult]) -> None:
    [provider] = run.of_type("pulumi:providers:kubernetes")
    kubeconfig = provider.inputs["kubeconfig"]
    assert '"command": "gke-gcloud-auth-plugin"' in kubeconfig
    assert '"server": "https://<known after deploy: slonk-gcp-cluster.endpoint>"' in kubeconfig


def test_filestore_is_protected_and_becomes_a_csi_volume(run: OfflineRun[CloudResult]) -> None:
    [instance] = run.of_type(FILESTORE)
    assert instance.protect and instance.retain_on_delete
    inputs = instance.inputs
    assert inputs["deletionProtectionEnabled"] is True
    assert inputs["tier"] == "ZONAL"
    assert inputs["protocol"] == "NFS_V4_1"
    assert inputs["location"] == "us-central1-a"
    assert inputs["fileShares"] == {"name": "home", "capacityGb": 10240}
    assert inputs["networks"][0]["network"] == "default"
    ip_placeholder = f"<known after deploy: {instance.name}.networks[0].ipAddresses[0]>"
    assert run.resolved["home"] == {
        "csi": {
            "driver": "filestore.csi.storage.gke.io",
            "volumeHandle": "modeInstance/us-central1-a/slonk-gcp-home/home",
            "volumeAttributes": {"ip": ip_placeholder, "volume": "home", "fileProtocol": "NFS_V4_1"},
        }
    }
    assert filestore_share("scratch-data") == "scratch_data"


def test_result_for_the_slurm_layer(run: OfflineRun[CloudResult], plan: ClusterPlan) -> None:
    result = run.value
    assert isinstance(result.provider, pulumi.ProviderResource)
    assert result.pin_to_pools is True
    assert result.topology_labels == TOPOLOGY_LABELS
    assert sorted(result.node_pools) == sorted(g.name for g in plan.groups)
    assert sorted(result.volumes) == ["home"]
    assert result.volumes["home"].depends_on


def test_existing_cluster_gets_pools_but_no_cluster() -> None:
    raw = raw_gcp()
    raw["kubernetes"] = {"create": False, "context": "gke_prod", "namespace": "slurm"}
    plan = build_plan(raw)
    run = run_offline(lambda: GcpInfrastructure("existing", plan).result)
    assert not run.of_type(CLUSTER)
    assert pool(run, "h100-a")["cluster"] == "projects/my-ml-project/locations/us-central1/clusters/slonk-gcp"
    [provider] = run.of_type("pulumi:providers:kubernetes")
    assert provider.inputs["context"] == "gke_prod"


def test_pools_and_storage_do_not_wait_for_each_other(run: OfflineRun[CloudResult]) -> None:
    [cluster] = run.of_type(CLUSTER)
    # Pools wait for the cluster and for their identity's role bindings (a node that boots before
    # it may write logs or pull images never becomes Ready), GPU pools for their GPU NIC networks,
    # and for nothing else.
    bindings = {r.urn for r in node_bindings(run)}
    account = nodes_account(run)
    gpu_nets = {
        r.urn for t in ("gcp:compute/network:Network", "gcp:compute/subnetwork:Subnetwork") for r in run.of_type(t)
    }
    for node_pool in run.of_type(NODE_POOL):
        assert set(node_pool.dependencies) <= {cluster.urn, account.urn} | bindings | gpu_nets, node_pool.name
        assert bindings <= set(node_pool.dependencies), node_pool.name
    for instance in run.of_type(FILESTORE):
        assert instance.dependencies == (), instance.name


def test_nodes_run_as_a_least_privilege_service_account(run: OfflineRun[CloudResult]) -> None:
    account = nodes_account(run)
    assert account.inputs["accountId"] == "slonk-gcp-nodes"
    roles = sorted(m.inputs["role"] for m in node_bindings(run))
    assert roles == sorted(load_catalog().platform.clouds["gcp"].node_service_account_roles)
    assert "roles/container.defaultNodeServiceAccount" in roles
    assert all(m.inputs["member"].startswith("serviceAccount:") for m in run.of_type(IAM_MEMBER))
    for node_pool in run.of_type(NODE_POOL):
        # Every pool, the system pool included: never the project's Compute Engine default account.
        assert (
            node_pool.inputs["nodeConfig"]["serviceAccount"] == "slonk-gcp-nodes@my-ml-project.iam.gserviceaccount.com"
        )


@pytest.mark.parametrize(
    ("cluster", "account"),
    [("a", "a-nodes"), ("x" * 30, "x" * 24 + "-nodes"), ("ab-" * 10, "ab-ab-ab-ab-ab-ab-ab-ab-nodes")],
)
def test_node_account_id_fits_iam_limits(cluster: str, account: str) -> None:
    got = node_account_id(cluster.rstrip("-"))
    assert got == account and 6 <= len(got) <= 30 and "--" not in got


def test_plan_for_another_cloud_is_rejected() -> None:
    plan = build_plan(load_declaration("local"))
    with pytest.raises(AssertionError, match="not a gcp plan: local"):
        run_offline(lambda: GcpInfrastructure("wrong", plan))


def test_claims_on_the_system_pool_can_use_gkes_pd_balanced_class() -> None:
    # slurmctld's state claim (and an in-cluster NFS server's) lands on the system pool and names
    # GKE's standard-rwo class (pd-balanced); a Hyperdisk-only system machine would need a hyperdisk
    # class instead (A3 Ultra, A4, A4X and tpu7x cannot attach pd-balanced).
    from slonk_infra.clouds.gcp.infrastructure import SYSTEM_MACHINE

    catalog = load_catalog()
    assert not catalog.machines[SYSTEM_MACHINE].hyperdisk_only
    assert catalog.storage.block_classes["gcp"].name == "standard-rwo"
    assert catalog.storage.block_classes["gcp"].disk_type == "pd-balanced"
