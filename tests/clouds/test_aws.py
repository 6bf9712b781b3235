"""The EKS adapter under Pulumi mocks (preview=False, so every apply runs)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slonk_infra.binding import CloudResult
from slonk_infra.catalog import load_catalog
from slonk_infra.clouds import build_plan
from slonk_infra.clouds.aws import (
    TOPOLOGY_LABELS,
    AwsInfrastructure,
    fsx_storage_capacity,
)
from slonk_infra.clouds.aws.worker_group import launch_template_violations
from slonk_infra.clouds.common import SYSTEM_POOL
from slonk_infra.offline import fake_clouds
from slonk_infra.offline.runner import FAKE_VPC_CIDR, OfflineRun, run_offline
from slonk_infra.plan import ClusterPlan
from slonk_infra.vocab import SYSTEM_ROLE, SYSTEM_ROLE_LABEL
from tests.support import declaration, deploy

ROOT = Path(__file__).resolve().parents[2]
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
PLACEMENT_GROUP = "aws:ec2/placementGroup:PlacementGroup"
SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"
EFS = "aws:efs/fileSystem:FileSystem"
MOUNT_TARGET = "aws:efs/mountTarget:MountTarget"
FSX = "aws:fsx/lustreFileSystem:LustreFileSystem"
ADDON = "aws:eks/addon:Addon"
RELEASE = "kubernetes:helm.sh/v3:Release"
STORAGE_CLASS = "kubernetes:storage.k8s.io/v1:StorageClass"
# Importing pulumi_aws.ec2 warns about deprecated resources this adapter does not use.
pytestmark = pytest.mark.filterwarnings("ignore:.*has been deprecated in favor of:DeprecationWarning")
ADMINS = ["arn:aws:iam::123456789012:role/platform-admins", "arn:aws:iam::123456789012:role/ci-deployer"]


GET_SUBNETS = "aws:ec2/getSubnets:getSubnets"


def subnets_by_position(args: dict[str, Any]) -> dict[str, Any]:
    """A fake EC2 that puts the i-th subnet of the ``subnet-id`` filter in zone letter i (``us-east-1a``, ``b``...)
    and AZ ID ``...-az<i+1>``, and answers the subnets in the asked zone (DescribeSubnets filters)."""
    filters = {f["name"]: list(f.get("values", [])) for f in args.get("filters", [])}
    ids = filters.get("subnet-id", [])
    if "availability-zone-id" in filters:
        [zone] = filters["availability-zone-id"]
        return {"id": "subnets", "ids": [s for i, s in enumerate(ids) if zone.endswith(f"-az{i + 1}")]}
    [zone] = filters.get("availability-zone", [""])
    return {"id": "subnets", "ids": [s for i, s in enumerate(ids) if zone.endswith(chr(ord("a") + i))]}


@pytest.fixture(scope="module", autouse=True)
def fake_subnets() -> Iterator[None]:
    """EC2's answer to the adapter's subnet lookup (until slonk_infra.offline.fake_clouds answers it itself)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(fake_clouds.FAKE_CALLS, GET_SUBNETS, subnets_by_position)
        yield


def raw_aws() -> dict[str, Any]:
    return declaration("aws")


def node_group(run: OfflineRun[Any], group: str) -> dict[str, Any]:
    found = [r for r in run.of_type(NODE_GROUP) if r.inputs.get("nodeGroupName") == group]
    assert len(found) == 1, f"{len(found)} node groups named {group}"
    return found[0].inputs


def launch_template(run: OfflineRun[Any], group: str) -> dict[str, Any]:
    return run.named(f"slonk-aws-lt-{group}").inputs


@pytest.fixture(scope="module")
def plan() -> ClusterPlan:
    raw = raw_aws()
    raw["aws"]["adminRoleArns"] = ADMINS
    return build_plan(raw)


@pytest.fixture(scope="module")
def run(plan: ClusterPlan) -> OfflineRun[CloudResult]:
    return deploy(plan)


def test_node_groups_per_worker_group(run: OfflineRun[CloudResult], plan: ClusterPlan) -> None:
    names = sorted(r.inputs["nodeGroupName"] for r in run.of_type(NODE_GROUP))
    assert names == sorted([g.name for g in plan.groups] + [SYSTEM_POOL])
    subnets = plan.declaration.aws.subnet_ids if plan.declaration.aws else []
    for group in plan.groups:
        inputs = node_group(run, group.name)
        block = group.reservation is not None and group.reservation.capacity_block
        # A Capacity Block's instance type is in its launch template (EKS refuses it in both places), and its
        # group starts empty: instances cannot launch before the block is active.
        assert inputs.get("instanceTypes") == (None if block else [group.machine.name])
        assert inputs["labels"] == group.node_labels
        desired = 0 if block else group.replicas
        assert inputs["scalingConfig"] == {"minSize": 0, "desiredSize": desired, "maxSize": group.replicas}
        if group.kind == "gpu":
            assert inputs["amiType"] == "AL2023_x86_64_NVIDIA"
            assert inputs["subnetIds"] == subnets[:1]
            assert inputs["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}]
            assert "launchTemplate" in inputs and "diskSize" not in inputs
        else:
            assert inputs["amiType"] == "AL2023_x86_64_STANDARD"
            assert inputs["subnetIds"] == subnets
            assert "taints" not in inputs and "launchTemplate" not in inputs


def test_capacity_types(run: OfflineRun[CloudResult]) -> None:
    assert node_group(run, "h100-a")["capacityType"] == "CAPACITY_BLOCK"
    assert node_group(run, "h100-b")["capacityType"] == "SPOT"
    assert node_group(run, "cpu")["capacityType"] == "ON_DEMAND"


def test_system_node_group(run: OfflineRun[CloudResult]) -> None:
    system = node_group(run, SYSTEM_POOL)
    assert system["instanceTypes"] == ["m7i.2xlarge"]
    assert system["labels"] == {SYSTEM_ROLE_LABEL: SYSTEM_ROLE}
    assert system["scalingConfig"]["desiredSize"] == 2


def test_launch_templates_have_one_efa_per_network_card(run: OfflineRun[CloudResult]) -> None:
    p5 = load_catalog().machines["p5.48xlarge"]
    assert p5.network_cards == p5.efa_interfaces == 32
    [efa_sg] = [r for r in run.of_type(SECURITY_GROUP) if r.name == "slonk-aws-efa"]
    for group in ("h100-a", "h100-b"):
        nics = launch_template(run, group)["networkInterfaces"]
        assert len(nics) == p5.network_cards
        assert [n["networkCardIndex"] for n in nics] == list(range(32))
        assert (nics[0]["deviceIndex"], nics[0]["interfaceType"]) == (0, "efa")
        assert {(n["deviceIndex"], n["interfaceType"]) for n in nics[1:]} == {(1, "efa-only")}
        groups = {tuple(n["securityGroups"]) for n in nics}
        assert len(groups) == 1
        [(cluster_sg, efa_sg_id)] = groups
        assert cluster_sg == "sg-0cluster" and efa_sg_id.startswith("sg-")
        assert all("subnetId" not in n for n in nics)
    ingress = efa_sg.inputs["ingress"]
    assert ingress == [{"fromPort": 0, "toPort": 0, "protocol": "-1", "self": True, "description": "EFA from itself"}]
    egress = efa_sg.inputs["egress"]
    assert {"fromPort": 0, "toPort": 0, "protocol": "-1", "self": True, "description": "EFA to itself"} in egress


def test_launch_templates_are_free_of_what_eks_rejects(run: OfflineRun[CloudResult]) -> None:
    templates = run.of_type(LAUNCH_TEMPLATE)
    assert len(templates) == 2
    for template in templates:
        assert launch_template_violations(template.inputs) == [], template.name
        assert template.inputs["metadataOptions"]["httpTokens"] == "required"


def test_violation_check_catches_forbidden_keys() -> None:
    bad = {
        "iamInstanceProfile": {"name": "x"},
        "instanceMarketOptions": {"marketType": "spot", "spotOptions": {"maxPrice": "1"}},
        "hibernationOptions": {"configured": True},
        "networkInterfaces": [{"subnet_id": "subnet-1", "deviceIndex": 0}],
        "instance_initiated_shutdown_behavior": "terminate",
    }
    found = " ".join(launch_template_violations(bad))
    for key in ("iamInstanceProfile", "marketType", "spotOptions", "hibernationOptions", "subnet_id", "shutdown"):
        assert key in found, key


def test_reservations_and_placement_groups(run: OfflineRun[CloudResult]) -> None:
    block = launch_template(run, "h100-a")
    assert block["capacityReservationSpecification"] == {
        "capacityReservationTarget": {"capacityReservationId": "cr-0123456789abcdef0"}
    }
    assert block["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert "placement" not in block  # the Capacity Block decides placement
    [pg] = run.of_type(PLACEMENT_GROUP)
    assert pg.name == "slonk-aws-placement-h100-b"
    assert pg.inputs["strategy"] == "cluster"
    spot = launch_template(run, "h100-b")
    assert spot["placement"] == {"groupName": pg.name}  # the mock names it after the resource
    assert "instanceMarketOptions" not in spot and "capacityReservationSpecification" not in spot


def test_cluster_access_addons_and_plugins(run: OfflineRun[CloudResult]) -> None:
    [cluster] = run.of_type("aws:eks/cluster:Cluster")
    assert cluster.inputs["accessConfig"] == {
        "authenticationMode": "API",
        "bootstrapClusterCreatorAdminPermissions": False,
    }
    assert cluster.inputs["version"] == "1.33"
    assert cluster.inputs["deletionProtection"] is True
    entries = run.of_type("aws:eks/accessEntry:AccessEntry")
    associations = run.of_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")
    assert sorted(e.inputs["principalArn"] for e in entries) == sorted(ADMINS)
    assert len(associations) == len(ADMINS)
    [provider] = run.of_type("pulumi:providers:kubernetes")
    assert set(provider.dependencies) >= {a.urn for a in associations}
    assert '"command": "aws"' in provider.inputs["kubeconfig"]
    assert sorted(a.inputs["addonName"] for a in run.of_type(ADDON)) == sorted(
        [
            "vpc-cni",
            "coredns",
            "kube-proxy",
            "eks-pod-identity-agent",
            "aws-ebs-csi-driver",
            "aws-efs-csi-driver",
            "aws-fsx-csi-driver",
            "eks-node-monitoring-agent",
        ]
    )
    releases = {r.inputs["chart"]: r.inputs for r in run.of_type(RELEASE)}
    assert sorted(releases) == ["aws-efa-k8s-device-plugin", "nvidia-device-plugin"]
    efa = releases["aws-efa-k8s-device-plugin"]["values"]["supportedInstanceLabels"]
    assert efa["values"] == ["p5.48xlarge"]


def test_efs_and_fsx_are_protected_and_become_csi_volumes(run: OfflineRun[CloudResult], plan: ClusterPlan) -> None:
    [efs] = run.of_type(EFS)
    [fsx] = run.of_type(FSX)
    for fs in (efs, fsx):
        assert fs.protect and fs.retain_on_delete, fs.name
    assert efs.inputs["encrypted"] is True and efs.inputs["throughputMode"] == "elastic"
    assert len(run.of_type(MOUNT_TARGET)) == len(plan.declaration.aws.subnet_ids if plan.declaration.aws else [])
    assert fsx.inputs["subnetIds"] == "subnet-0aaaaaaaaaaaaaaaa"
    assert fsx.inputs["deploymentType"] == "PERSISTENT_2"
    assert fsx.inputs["storageCapacity"] == 38400
    assert fsx.inputs["metadataConfiguration"] == {"mode": "AUTOMATIC"}
    # The figures FSx and EFS accept, from the catalog: a throughput the deployment type offers, and
    # the performance mode elastic throughput requires.
    facts = load_catalog().storage
    assert fsx.inputs["perUnitStorageThroughput"] in facts.fsx_lustre.deployment_types["PERSISTENT_2"].throughputs
    assert facts.fsx_lustre.deployment_types["PERSISTENT_2"].accepts(fsx.inputs["storageCapacity"])
    mode = facts.efs.throughput_modes[efs.inputs["throughputMode"]]
    assert mode.needs_performance_mode in (None, efs.inputs["performanceMode"])
    [storage_sg] = [r for r in run.of_type(SECURITY_GROUP) if r.name == "slonk-aws-storage"]
    ports = {(rule["fromPort"], rule["toPort"]) for rule in storage_sg.inputs["ingress"]}
    assert ports == {(2049, 2049), (988, 988), (1018, 1023)}
    assert all(rule["cidrBlocks"] == [FAKE_VPC_CIDR] for rule in storage_sg.inputs["ingress"])
    home, scratch = run.resolved["home"], run.resolved["scratch"]
    assert home == {"csi": {"driver": "efs.csi.aws.com", "volumeHandle": home["csi"]["volumeHandle"]}}
    assert home["csi"]["volumeHandle"].startswith("fs-")
    assert scratch["csi"]["driver"] == "fsx.csi.aws.com"
    assert scratch["csi"]["volumeAttributes"]["dnsname"].startswith("<known after deploy: ")
    assert scratch["csi"]["volumeAttributes"]["mountname"].startswith("<known after deploy: ")
    assert len(run.value.volumes["home"].depends_on) == 1 + len(run.of_type(MOUNT_TARGET))


@pytest.mark.parametrize(
    ("deployment", "asked", "expected"),
    [
        ("PERSISTENT_2", 100, 1200),
        ("PERSISTENT_2", 2000, 2400),
        ("PERSISTENT_2", 2401, 4800),
        ("PERSISTENT_2", 38400, 38400),
        ("SCRATCH_1", 2401, 3600),
        ("SCRATCH_1", 3601, 7200),
    ],
)
def test_fsx_capacity_rounds_up_to_what_fsx_accepts(deployment: str, asked: int, expected: int) -> None:
    assert fsx_storage_capacity(deployment, asked) == expected


def test_result_for_the_slurm_layer(run: OfflineRun[CloudResult], plan: ClusterPlan) -> None:
    result = run.value
    assert result.pin_to_pools is True
    assert result.topology_labels == TOPOLOGY_LABELS
    assert sorted(result.node_pools) == sorted(g.name for g in plan.groups)
    assert sorted(result.volumes) == ["home", "scratch"]


def test_existing_cluster_gets_node_groups_only() -> None:
    raw = raw_aws()
    raw["kubernetes"] = {"create": False, "kubeconfig": "kubeconfig.yaml", "namespace": "slurm"}
    raw["aws"]["nodeRoleArn"] = "arn:aws:iam::123456789012:role/eks-nodes"
    plan = build_plan(raw)
    run = run_offline(lambda: AwsInfrastructure("existing", plan).result)
    assert not run.of_type("aws:eks/cluster:Cluster")
    assert not run.of_type(ADDON) and not run.of_type(RELEASE)
    # No IAM for the cluster or its add-ons; only the operations controller's own role (operations on).
    assert [r.name for r in run.of_type("aws:iam/role:Role")] == ["existing-ops-role"]
    inputs = run.named("existing-nodegroup-h100-b").inputs
    assert inputs["clusterName"] == "slonk-aws"
    assert inputs["nodeRoleArn"] == "arn:aws:iam::123456789012:role/eks-nodes"
    nics = run.named("existing-lt-h100-b").inputs["networkInterfaces"]
    assert nics[0]["securityGroups"][0] == "sg-0existing"


def test_node_groups_and_storage_do_not_wait_for_each_other(run: OfflineRun[CloudResult]) -> None:
    groups = {r.urn for r in run.of_type(NODE_GROUP)}
    storage = {r.urn for r in run.of_type(EFS) + run.of_type(FSX) + run.of_type(MOUNT_TARGET)}
    for reg in run.of_type(NODE_GROUP):
        assert not set(reg.dependencies) & (groups | storage), reg.name
    for reg in run.of_type(EFS) + run.of_type(FSX):
        assert not set(reg.dependencies) & (groups | storage), reg.name


def test_network_policies_are_enforced_by_the_vpc_cni_agent(run: OfflineRun[CloudResult]) -> None:
    [cni] = [a for a in run.of_type(ADDON) if a.inputs["addonName"] == "vpc-cni"]
    # Off by default on EKS: without it every NetworkPolicy the Slurm layer renders is ignored.
    assert json.loads(cni.inputs["configurationValues"]) == {"enableNetworkPolicy": "true"}


def test_claims_get_an_ebs_class_served_by_the_add_on(run: OfflineRun[CloudResult]) -> None:
    [ebs] = [a for a in run.of_type(ADDON) if a.inputs["addonName"] == "aws-ebs-csi-driver"]
    [association] = ebs.inputs["podIdentityAssociations"]
    assert association["serviceAccount"] == "ebs-csi-controller-sa"
    [role] = [r for r in run.of_type("aws:iam/role:Role") if r.name.endswith("-ebs-csi-role")]
    trust = json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]
    assert trust["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert "sts:TagSession" in trust["Action"]
    policies = {a.inputs["policyArn"] for a in run.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")}
    assert "arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy" in policies
    [sc] = run.of_type(STORAGE_CLASS)
    spec = load_catalog().storage.block_classes["aws"]
    assert sc.inputs["metadata"]["name"] == spec.name == "slonk-gp3"
    assert sc.inputs["provisioner"] == "ebs.csi.aws.com"
    assert sc.inputs["parameters"] == {"type": "gp3", "encrypted": "true"}
    assert sc.inputs["volumeBindingMode"] == "WaitForFirstConsumer"
    assert sc.inputs["reclaimPolicy"] == "Retain"
    assert ebs.urn in sc.dependencies


def test_existing_cluster_still_gets_the_storage_class() -> None:
    raw = raw_aws()
    raw["kubernetes"] = {"create": False, "kubeconfig": "kubeconfig.yaml", "namespace": "slurm"}
    raw["aws"]["nodeRoleArn"] = "arn:aws:iam::123456789012:role/eks-nodes"
    run = run_offline(lambda: AwsInfrastructure("existing", build_plan(raw)).result)
    [sc] = run.of_type(STORAGE_CLASS)
    assert sc.inputs["metadata"]["name"] == "slonk-gp3"


def test_a_stack_whose_aws_region_differs_from_the_declared_one_is_refused(tmp_path: Path) -> None:
    """The default AWS provider creates everything in aws:region: a different declared region is refused."""
    from click.testing import CliRunner

    from slonk_infra.cli import main

    text = (ROOT / "stacks" / "Pulumi.aws.yaml").read_text(encoding="utf-8")
    stack = tmp_path / "Pulumi.aws.yaml"
    stack.write_text(text.replace("config:\n", "config:\n  aws:region: us-west-2\n", 1), encoding="utf-8")
    result = CliRunner().invoke(main, ["render", str(stack), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert "aws:region is 'us-west-2'" in result.output
    # validate reads the same stack file: a CI job gating on it sees the mismatch too.
    checked = CliRunner().invoke(main, ["validate", str(stack)])
    assert checked.exit_code == 2 and "aws:region is 'us-west-2'" in checked.output
    same = tmp_path / "same" / "Pulumi.aws.yaml"
    same.parent.mkdir()
    same.write_text(text.replace("config:\n", "config:\n  aws:region: us-east-1\n", 1), encoding="utf-8")
    assert CliRunner().invoke(main, ["render", str(same), "-o", str(tmp_path / "out2")]).exit_code == 0
