"""The EKS adapter's first-deploy behaviour, against the values the EKS and EC2 docs give (docs/clouds.md, AWS).

Capacity Block groups start empty, GPU groups and FSx go to the declared zone's subnet, GPU groups repair
themselves, the p5's NVMe becomes ephemeral storage, the control plane admits only the declared networks,
the operations controller gets a Pod Identity role only when it runs and owns the pool sizes, and the
login load balancer finds subnets.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from typing import Any

import pulumi
import pytest

from slonk_infra.binding import CloudResult
from slonk_infra.clouds import build_plan
from slonk_infra.clouds.aws import AwsInfrastructure, local_storage, operations
from slonk_infra.clouds.aws.subnets import zone_filter
from slonk_infra.clouds.aws.target import TARGET, aws_warnings
from slonk_infra.clouds.aws.worker_group import launch_template_violations
from slonk_infra.kube import operations as kube_operations
from slonk_infra.offline import fake_clouds
from slonk_infra.offline.runner import OfflineRun, run_offline
from tests.clouds.test_aws import GET_SUBNETS, subnets_by_position
from tests.support import count_by_type, declaration, with_nodes

pytestmark = pytest.mark.filterwarnings("ignore:.*has been deprecated in favor of:DeprecationWarning")
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
ADDON = "aws:eks/addon:Addon"
TAG = "aws:ec2/tag:Tag"
ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
POD_IDENTITY = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
FSX = "aws:fsx/lustreFileSystem:LustreFileSystem"
SUBNET_A, SUBNET_B = "subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb"
Raw = dict[str, Any]


@pytest.fixture(autouse=True)
def fake_subnets(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Raw]]:
    """The fake EC2 of test_aws (subnet i in zone letter i), recording each lookup."""
    asked: list[Raw] = []

    def answer(args: Raw) -> Raw:
        asked.append(args)
        return subnets_by_position(args)

    monkeypatch.setitem(fake_clouds.FAKE_CALLS, GET_SUBNETS, answer)
    yield asked


def edited(fn: Callable[[Raw], object]) -> Raw:
    raw = declaration("aws")
    fn(raw)
    return raw


def deployed(raw: Raw) -> tuple[OfflineRun[CloudResult], dict[str, list[str]]]:
    """The adapter's registrations, and the ignore_changes each resource was registered with (by name)."""
    ignored: dict[str, list[str]] = {}

    def record(args: pulumi.ResourceTransformArgs) -> None:
        ignored[args.name] = list(args.opts.ignore_changes or [])

    def program() -> CloudResult:
        pulumi.runtime.register_resource_transform(record)
        return AwsInfrastructure("slonk-aws", build_plan(raw)).result

    return run_offline(program), ignored


def group(run: OfflineRun[CloudResult], name: str) -> Raw:
    [found] = [r.inputs for r in run.of_type(NODE_GROUP) if r.inputs.get("nodeGroupName") == name]
    return found


@pytest.fixture(scope="module")
def shipped() -> Iterator[tuple[OfflineRun[CloudResult], dict[str, list[str]]]]:
    """The shipped aws stack (operations on; h100-a a Capacity Block, h100-b spot, a CPU group)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(fake_clouds.FAKE_CALLS, GET_SUBNETS, subnets_by_position)
        yield deployed(declaration("aws"))


# -- Capacity Blocks (EKS user guide, "Create a managed node group with Capacity Blocks for ML") ---------------
def test_a_capacity_block_group_starts_empty_with_its_type_in_the_template(shipped: Any) -> None:
    run, _ = shipped
    block = group(run, "h100-a")
    assert block["capacityType"] == "CAPACITY_BLOCK"
    assert block["scalingConfig"] == {"minSize": 0, "desiredSize": 0, "maxSize": 16}
    assert "instanceTypes" not in block
    template = run.named("slonk-aws-lt-h100-a").inputs
    assert template["instanceType"] == "p5.48xlarge"
    assert template["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert template["capacityReservationSpecification"]["capacityReservationTarget"] == {
        "capacityReservationId": "cr-0123456789abcdef0"
    }
    # Other GPU groups keep the type on the node group and nothing in the template.
    assert group(run, "h100-b")["instanceTypes"] == ["p5.48xlarge"]
    assert "instanceType" not in run.named("slonk-aws-lt-h100-b").inputs
    for template in run.of_type(LAUNCH_TEMPLATE):
        assert launch_template_violations(template.inputs) == [], template.name


# -- pool sizes ----------------------------------------------------------------------------------------------------
def test_with_operations_the_controller_owns_every_worker_group_size(shipped: Any) -> None:
    run, ignored = shipped
    for name in ("h100-a", "h100-b", "cpu"):
        assert ignored[f"slonk-aws-nodegroup-{name}"] == ["scalingConfig.desiredSize", "scalingConfig.maxSize"]
    # The system group is Pulumi's: its size is the declaration's.
    assert ignored["slonk-aws-system"] == []
    assert group(run, "h100-b")["scalingConfig"] == {"minSize": 0, "desiredSize": 8, "maxSize": 8}


def test_without_operations_only_a_capacity_blocks_desired_size_is_left_alone() -> None:
    run, ignored = deployed(edited(lambda r: r["operations"].update(enabled=False)))
    assert ignored["slonk-aws-nodegroup-h100-a"] == ["scalingConfig.desiredSize"]
    assert ignored["slonk-aws-nodegroup-h100-b"] == [] and ignored["slonk-aws-nodegroup-cpu"] == []
    assert group(run, "h100-a")["scalingConfig"]["desiredSize"] == 0


# -- zones (EC2 DescribeSubnets; the Capacity Block page: "only specify the subnet in the same Availability Zone")
@pytest.mark.parametrize(
    ("zone", "expected"),
    [("us-east-1a", SUBNET_A), ("us-east-1b", SUBNET_B), ("use1-az2", SUBNET_B)],
)
def test_gpu_groups_and_fsx_go_to_the_subnet_in_the_declared_zone(
    zone: str, expected: str, fake_subnets: list[Raw]
) -> None:
    run, _ = deployed(edited(lambda r: r.update(zone=zone)))
    for name in ("h100-a", "h100-b"):
        assert group(run, name)["subnetIds"] == [expected]
    assert group(run, "cpu")["subnetIds"] == [SUBNET_A, SUBNET_B]
    [fsx] = run.of_type(FSX)
    assert fsx.inputs["subnetIds"] == expected
    # One lookup for the whole declaration, filtered to the declared subnets and the zone.
    [asked] = fake_subnets
    names = {f["name"]: f["values"] for f in asked["filters"]}
    assert names == {"subnet-id": [SUBNET_A, SUBNET_B], zone_filter(zone): [zone]}


def test_a_zone_no_declared_subnet_is_in_stops_the_deploy_naming_the_field() -> None:
    with pytest.raises(Exception, match=r"zone: 'us-east-1c': none of aws.subnetIds"):
        deployed(edited(lambda r: r.update(zone="us-east-1c")))


def test_without_a_zone_gpu_groups_use_the_first_subnet_and_nothing_is_looked_up(fake_subnets: list[Raw]) -> None:
    run, _ = deployed(edited(lambda r: r.pop("zone")))
    assert group(run, "h100-b")["subnetIds"] == [SUBNET_A]
    assert fake_subnets == []


def test_zone_filters_tell_names_from_ids() -> None:
    assert zone_filter("us-east-1a") == "availability-zone"
    assert zone_filter("us-east-1-bos-1a") == "availability-zone"
    assert zone_filter("use1-az4") == "availability-zone-id"
    assert zone_filter("apne1-az1") == "availability-zone-id"


# -- node repair (EKS user guide, node-repair and node-health-nma) ------------------------------------------
def test_gpu_groups_repair_their_nodes_and_the_monitoring_agent_watches_them(shipped: Any) -> None:
    run, _ = shipped
    for name in ("h100-a", "h100-b"):
        repair = group(run, name)["nodeRepairConfig"]
        assert repair["enabled"] is True
        overrides = {o["nodeUnhealthyReason"]: o for o in repair["nodeRepairConfigOverrides"]}
        assert sorted(overrides) == ["NvidiaXID13Error", "NvidiaXID31Error"]
        assert {o["repairAction"] for o in overrides.values()} == {"NoAction"}
        assert {o["nodeMonitoringCondition"] for o in overrides.values()} == {"AcceleratedHardwareReady"}
    assert "nodeRepairConfig" not in group(run, "cpu")
    [agent] = [a for a in run.of_type(ADDON) if a.inputs["addonName"] == "eks-node-monitoring-agent"]
    # The DCGM DaemonSet must reach the tainted GPU nodes, or every one reports DCGMError.
    assert json.loads(agent.inputs["configurationValues"]) == {"dcgmAgent": {"tolerations": [{"operator": "Exists"}]}}
    # A DaemonSet add-on: it does not wait for the system node group.
    [system] = [r for r in run.of_type(NODE_GROUP) if r.name == "slonk-aws-system"]
    assert system.urn not in agent.dependencies


def test_no_monitoring_agent_without_gpu_groups() -> None:
    run, _ = deployed(edited(lambda r: r.update(pools=[p for p in r["pools"] if p["kind"] == "cpu"])))
    assert "eks-node-monitoring-agent" not in {a.inputs["addonName"] for a in run.of_type(ADDON)}


# -- local NVMe (nodeadm LocalStorageOptions) ---------------------------------------------------------------
def test_p5_nodes_stripe_their_instance_store_into_ephemeral_storage(shipped: Any) -> None:
    run, _ = shipped
    for name in ("h100-a", "h100-b"):
        data = base64.b64decode(run.named(f"slonk-aws-lt-{name}").inputs["userData"]).decode()
        # A MIME multi-part document (EKS merges it with its own) with one NodeConfig part.
        assert data.startswith("MIME-Version: 1.0\nContent-Type: multipart/mixed;")
        assert "Content-Type: application/node.eks.aws\n" in data
        assert "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n" in data
        assert "  instance:\n    localStorage:\n      strategy: RAID0\n" in data
        assert data.rstrip().endswith(f"--{local_storage.BOUNDARY}--")


def test_only_types_with_an_instance_store_get_the_user_data() -> None:
    assert local_storage.user_data("p5.48xlarge") is not None
    assert local_storage.user_data("m7i.4xlarge") is None
    assert local_storage.INSTANCE_STORE_GB["p5.48xlarge"] == 30400  # 8 x 3800 GB NVMe


# -- control plane (kubernetes.authorizedNetworks) ------------------------------------------------------------
def test_the_public_endpoint_admits_only_the_authorized_networks() -> None:
    run, _ = deployed(edited(lambda r: r["kubernetes"].update(authorizedNetworks=["198.51.100.0/24"])))
    [cluster] = run.of_type("aws:eks/cluster:Cluster")
    vpc = cluster.inputs["vpcConfig"]
    assert vpc["publicAccessCidrs"] == ["198.51.100.0/24"]
    assert vpc["endpointPrivateAccess"] is True and vpc["endpointPublicAccess"] is True


def test_the_whole_internet_only_when_declared() -> None:
    run, _ = deployed(edited(lambda r: r["kubernetes"].update(authorizedNetworks=["0.0.0.0/0"])))
    [cluster] = run.of_type("aws:eks/cluster:Cluster")
    assert cluster.inputs["vpcConfig"]["publicAccessCidrs"] == ["0.0.0.0/0"]


# -- the operations controller's identity --------------------------------------------------------------
def test_the_operations_controller_gets_a_pod_identity_role_with_only_its_calls(shipped: Any) -> None:
    run, _ = shipped
    [role] = [r for r in run.of_type(ROLE) if r.name == "slonk-aws-ops-role"]
    trust = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    assert trust == [
        {
            "Effect": "Allow",
            "Principal": {"Service": "pods.eks.amazonaws.com"},
            "Action": ["sts:AssumeRole", "sts:TagSession"],
        }
    ]
    [policy] = run.of_type(ROLE_POLICY)
    statements = {s["Sid"]: s for s in json.loads(policy.inputs["policy"])["Statement"]}
    assert statements["Describe"]["Resource"] == "*"
    assert statements["Describe"]["Action"] == [
        "autoscaling:DescribeAutoScalingGroups",
        "ec2:DescribeCapacityReservations",  # the shipped stack has a Capacity Block
    ]
    machines = statements["ClusterMachines"]
    assert machines["Action"] == ["autoscaling:SetInstanceHealth", "autoscaling:TerminateInstanceInAutoScalingGroup"]
    assert machines["Condition"] == {"StringEquals": {"autoscaling:ResourceTag/eks:cluster-name": "slonk-aws"}}
    nodegroups = statements["ClusterNodegroups"]
    assert nodegroups["Action"] == ["eks:DescribeNodegroup", "eks:UpdateNodegroupConfig"]
    assert nodegroups["Resource"] == "arn:aws:eks:us-east-1:*:nodegroup/slonk-aws/*/*"
    assert set(statements) == {"Describe", "ClusterMachines", "ClusterNodegroups"}
    [association] = run.of_type(POD_IDENTITY)
    assert association.inputs["namespace"] == "slurm"
    assert association.inputs["serviceAccount"] == operations.SERVICE_ACCOUNT == kube_operations.NAME
    assert association.inputs["clusterName"] == "slonk-aws"
    assert policy.urn in association.dependencies
    # Pod Identity binds by namespace and ServiceAccount: no annotation for the Kubernetes layer.
    assert dict(run.value.operations_account_annotations) == {}


def test_no_operations_identity_when_operations_are_off() -> None:
    run, _ = deployed(edited(lambda r: r["operations"].update(enabled=False)))
    assert not run.of_type(ROLE_POLICY) and not run.of_type(POD_IDENTITY)
    assert "slonk-aws-ops-role" not in {r.name for r in run.of_type(ROLE)}


def test_no_capacity_reservation_reads_without_a_capacity_block() -> None:
    document = json.loads(operations.policy_document("c", "eu-west-1", capacity_blocks=False))
    actions = [a for s in document["Statement"] for a in s["Action"]]
    assert "ec2:DescribeCapacityReservations" not in actions


# -- login load balancer ----------------------------------------------------------------------------
def test_a_private_login_is_an_internal_load_balancer() -> None:
    assert TARGET.login_service_annotations(True) == {"service.beta.kubernetes.io/aws-load-balancer-internal": "true"}
    assert TARGET.login_service_annotations(False) == {}
    plan = build_plan(declaration("aws"))  # LoadBalancer, default (private) ranges
    assert plan.login_service_annotations == {"service.beta.kubernetes.io/aws-load-balancer-internal": "true"}


def test_subnets_are_tagged_for_the_load_balancer_and_kept_on_delete() -> None:
    def public(r: Raw) -> None:
        r["login"]["loadBalancerSourceRanges"] = ["8.8.8.0/24"]
        r["aws"]["publicSubnetIds"] = ["subnet-0ccccccccccccccccc"]

    run, _ = deployed(edited(public))
    tags = {(t.inputs["resourceId"], t.inputs["key"], t.inputs["value"]) for t in run.of_type(TAG)}
    assert tags == {
        (SUBNET_A, "kubernetes.io/role/internal-elb", "1"),
        (SUBNET_B, "kubernetes.io/role/internal-elb", "1"),
        ("subnet-0ccccccccccccccccc", "kubernetes.io/role/elb", "1"),
    }
    assert all(t.retain_on_delete for t in run.of_type(TAG))


def test_no_subnet_tags_for_a_cluster_ip_login() -> None:
    run, _ = deployed(edited(lambda r: r["login"].update(serviceType="ClusterIP")))
    assert not run.of_type(TAG)


# -- warnings for the operator (aws_warnings, the target's declaration_warnings) ---------------------------------
def test_a_capacity_block_without_the_controller_warns_with_the_command_to_run() -> None:
    from slonk_infra.declaration.model import TAGGED

    off = TAGGED.validate_python(edited(lambda r: r["operations"].update(enabled=False)))
    [warning] = aws_warnings(off)
    assert warning.path == "pools[0].reservation"
    assert (
        "aws eks update-nodegroup-config --region us-east-1 --cluster-name slonk-aws --nodegroup-name h100-a "
        "--scaling-config desiredSize=16" in warning.message
    )
    assert aws_warnings(TAGGED.validate_python(declaration("aws"))) == []
    no_zone = TAGGED.validate_python(edited(lambda r: r.pop("zone")))
    assert [w.path for w in aws_warnings(no_zone)] == ["zone"]


# -- scale: resources grow with pools, never with nodes -------------------------------------------------------
def test_resource_counts_do_not_grow_with_nodes() -> None:
    small, _ = deployed(with_nodes(declaration("aws"), 4))
    large, _ = deployed(with_nodes(declaration("aws"), 4096))
    assert count_by_type(small.registrations) == count_by_type(large.registrations)
