"""The EKS cloud calls through boto3 against moto (EKS node groups, EC2 Auto Scaling, EC2).

moto 5.2.5 implements DescribeNodegroup, UpdateNodegroupConfig, DescribeAutoScalingGroups,
TerminateInstanceInAutoScalingGroup and SetInstanceHealth; it does not implement
DescribeCapacityReservations, which is tested with botocore's Stubber and the documented response shape
(tests/data/cloud/aws/capacity_reservation_*.json). moto's EKS names an Auto Scaling group for a node
group but does not create it: the fixture creates that group in moto's Auto Scaling, as EKS would.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped]
import pytest
from botocore.stub import Stubber  # type: ignore[import-untyped]
from moto import mock_aws

from slonk_infra.ops.cloud import TIMEOUT_SECONDS, CloudCallError, CloudPools, connect, machine_of
from slonk_infra.ops.cloud.aws import AwsMachines, boto3_clients

DATA = Path(__file__).resolve().parent.parent / "data" / "cloud" / "aws"
REGION = "us-east-1"
CLUSTER = "slonk"
NODEGROUP = "slonk-gpu-p5"
RESERVATION = "cr-0123456789abcdef0"
POOLS = CloudPools(
    cloud="aws",
    cluster=CLUSTER,
    location=REGION,
    node_pools={"gpu": NODEGROUP},
    capacity_blocks={"gpu": RESERVATION},
)


class World:
    """The moto account: one EKS cluster with one node group whose ASG runs three instances."""

    def __init__(self) -> None:
        self.ec2 = boto3.client("ec2", region_name=REGION)
        self.eks = boto3.client("eks", region_name=REGION)
        self.asg = boto3.client("autoscaling", region_name=REGION)
        vpc = self.ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        subnet = self.ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/24", AvailabilityZone=f"{REGION}a")
        self.subnet = subnet["Subnet"]["SubnetId"]
        role = "arn:aws:iam::123456789012:role/slonk"
        self.eks.create_cluster(name=CLUSTER, roleArn=role, resourcesVpcConfig={"subnetIds": [self.subnet]})
        self.eks.create_nodegroup(
            clusterName=CLUSTER,
            nodegroupName=NODEGROUP,
            nodeRole=role,
            subnets=[self.subnet],
            scalingConfig={"minSize": 0, "maxSize": 4, "desiredSize": 3},
        )
        nodegroup = self.eks.describe_nodegroup(clusterName=CLUSTER, nodegroupName=NODEGROUP)["nodegroup"]
        self.asg_name = nodegroup["resources"]["autoScalingGroups"][0]["name"]
        template = self.ec2.create_launch_template(
            LaunchTemplateName="slonk-gpu",
            LaunchTemplateData={"ImageId": "ami-12c6146b", "InstanceType": "p5.48xlarge"},
        )["LaunchTemplate"]["LaunchTemplateId"]
        self.asg.create_auto_scaling_group(
            AutoScalingGroupName=self.asg_name,
            LaunchTemplate={"LaunchTemplateId": template},
            MinSize=0,
            MaxSize=4,
            DesiredCapacity=3,
            VPCZoneIdentifier=self.subnet,
            Tags=[{"Key": "eks:cluster-name", "Value": CLUSTER, "PropagateAtLaunch": True}],
        )

    def group(self) -> dict[str, Any]:
        group: dict[str, Any] = self.asg.describe_auto_scaling_groups(AutoScalingGroupNames=[self.asg_name])[
            "AutoScalingGroups"
        ][0]
        return group

    def instances(self) -> list[str]:
        return sorted(i["InstanceId"] for i in self.group()["Instances"])

    def state(self, instance: str) -> str:
        reservations = self.ec2.describe_instances(InstanceIds=[instance])["Reservations"]
        return str(reservations[0]["Instances"][0]["State"]["Name"])

    def scaling(self) -> dict[str, int]:
        nodegroup = self.eks.describe_nodegroup(clusterName=CLUSTER, nodegroupName=NODEGROUP)["nodegroup"]
        return dict(nodegroup["scalingConfig"])


class Recording:
    """A client factory that notes every (service, region) asked for."""

    def __init__(self, stubbed: dict[str, Any] | None = None) -> None:
        self.asked: list[tuple[str, str]] = []
        self.stubbed = stubbed or {}

    def __call__(self, service: str, region: str) -> Any:
        self.asked.append((service, region))
        return self.stubbed.get(service) or boto3.client(service, region_name=region)


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(key, value)
    with mock_aws():
        yield World()


def machine(instance: str, zone: str = f"{REGION}a") -> Any:
    found = machine_of(f"aws:///{zone}/{instance}")
    assert found is not None
    return found


def test_pool_size_is_the_node_groups_asg_desired_capacity(world: World) -> None:
    aws = AwsMachines(POOLS, Recording())
    assert aws.pool_size("gpu") == 3
    world.asg.set_desired_capacity(AutoScalingGroupName=world.asg_name, DesiredCapacity=1)
    assert aws.pool_size("gpu") == 1


def test_grow_raises_desired_and_max_together_with_min_zero(world: World) -> None:
    AwsMachines(POOLS, Recording()).grow("gpu", 6)
    assert world.scaling() == {"minSize": 0, "maxSize": 6, "desiredSize": 6}


def test_grow_keeps_a_higher_max(world: World) -> None:
    world.eks.update_nodegroup_config(
        clusterName=CLUSTER, nodegroupName=NODEGROUP, scalingConfig={"minSize": 0, "maxSize": 10, "desiredSize": 3}
    )
    AwsMachines(POOLS, Recording()).grow("gpu", 4)
    assert world.scaling() == {"minSize": 0, "maxSize": 10, "desiredSize": 4}


@pytest.mark.parametrize("size", [2, 3])
def test_grow_never_lowers_the_size(world: World, size: int) -> None:
    before = world.scaling()
    AwsMachines(POOLS, Recording()).grow("gpu", size)
    assert world.scaling() == before


def test_remove_ends_exactly_that_instance_and_lowers_desired_by_one(world: World) -> None:
    first, second, third = world.instances()
    recording = Recording()
    AwsMachines(POOLS, recording).remove(machine(second))
    assert world.group()["DesiredCapacity"] == 2
    assert world.instances() == sorted([first, third])  # no replacement was started
    assert world.state(second) == "terminated"
    assert [world.state(first), world.state(third)] == ["running", "running"]
    assert recording.asked == [("autoscaling", REGION)]


def test_replace_marks_exactly_that_instance_unhealthy(world: World) -> None:
    first, second, third = world.instances()
    assert AwsMachines(POOLS, Recording()).replace(machine(third), faulty_host=True) == "SetInstanceHealth"
    health = {i["InstanceId"]: i["HealthStatus"] for i in world.group()["Instances"]}
    assert health == {first: "Healthy", second: "Healthy", third: "Unhealthy"}


@pytest.mark.filterwarnings("ignore:Exception\\(InvalidInstanceIdError\\):UserWarning")
def test_machine_calls_go_to_the_machines_region(world: World) -> None:
    recording = Recording()
    aws = AwsMachines(POOLS, recording)
    with pytest.raises(CloudCallError):  # no such instance in moto's us-west-2
        aws.replace(machine("i-0123456789abcdef0", zone="us-west-2b"), faulty_host=False)
    assert recording.asked == [("autoscaling", "us-west-2")]


def test_a_missing_node_group_is_a_not_found_cloud_call_error(world: World) -> None:
    pools = CloudPools(cloud="aws", cluster=CLUSTER, location=REGION, node_pools={"cpu": "slonk-cpu"})
    with pytest.raises(CloudCallError) as info:
        AwsMachines(pools, Recording()).pool_size("cpu")
    error = info.value
    assert (error.call, error.target, error.not_found) == ("DescribeNodegroup", f"{CLUSTER}/slonk-cpu", True)
    assert error.message.startswith("ResourceNotFoundException: ")


def test_an_unknown_worker_group_is_a_clear_error() -> None:
    with pytest.raises(CloudCallError, match=r"no node group is configured for worker group 'tpu'.*\['gpu'\]"):
        AwsMachines(POOLS, Recording()).grow("tpu", 2)


def _stubbed_ec2(recording: str) -> tuple[Any, Stubber]:
    ec2 = boto3.client("ec2", region_name=REGION)
    stubber = Stubber(ec2)
    response = json.loads((DATA / f"{recording}.json").read_text(encoding="utf-8"))["response"]
    stubber.add_response("describe_capacity_reservations", response, {"CapacityReservationIds": [RESERVATION]})
    stubber.activate()
    return ec2, stubber


@pytest.mark.parametrize(
    ("recording", "ready"), [("capacity_reservation_scheduled", False), ("capacity_reservation_active", True)]
)
def test_pool_ready_follows_the_capacity_block_state(recording: str, ready: bool) -> None:
    ec2, stubber = _stubbed_ec2(recording)
    assert AwsMachines(POOLS, Recording({"ec2": ec2})).pool_ready("gpu") is ready
    stubber.assert_no_pending_responses()


@pytest.mark.parametrize(("minutes_left", "ready"), [(39, False), (41, True)])
def test_a_capacity_block_in_its_last_40_minutes_is_not_grown(minutes_left: int, ready: bool) -> None:
    # EKS scales the group to 0 forty minutes before the block ends; growing it back would fight EKS.
    ec2 = boto3.client("ec2", region_name=REGION)
    stubber = Stubber(ec2)
    response = json.loads((DATA / "capacity_reservation_active.json").read_text(encoding="utf-8"))["response"]
    now = 1_900_000_000.0
    response["CapacityReservations"][0]["EndDate"] = datetime.fromtimestamp(now + minutes_left * 60, tz=UTC)
    stubber.add_response("describe_capacity_reservations", response, {"CapacityReservationIds": [RESERVATION]})
    stubber.activate()
    assert AwsMachines(POOLS, Recording({"ec2": ec2}), now=lambda: now).pool_ready("gpu") is ready


def test_pool_ready_without_a_capacity_block_makes_no_call() -> None:
    recording = Recording()
    pools = CloudPools(cloud="aws", cluster=CLUSTER, location=REGION, node_pools={"cpu": "slonk-cpu"})
    assert AwsMachines(pools, recording).pool_ready("cpu") is True
    assert recording.asked == []


def test_pool_change_is_empty_for_an_active_node_group(world: World) -> None:
    # moto's DescribeNodegroup answers status ACTIVE for a node group it created.
    recording = Recording()
    assert world.eks.describe_nodegroup(clusterName=CLUSTER, nodegroupName=NODEGROUP)["nodegroup"]["status"] == "ACTIVE"
    assert AwsMachines(POOLS, recording).pool_change("gpu") == ""
    assert recording.asked == [("eks", REGION)]


def _stubbed_eks(**changes: Any) -> tuple[Any, Stubber]:
    # moto has no way to put a node group in UPDATING: botocore's Stubber answers with the documented
    # shape (tests/data/cloud/aws/nodegroup_updating.json), checked against the EKS service model.
    eks = boto3.client("eks", region_name=REGION)
    stubber = Stubber(eks)
    response = json.loads((DATA / "nodegroup_updating.json").read_text(encoding="utf-8"))["response"]
    response["nodegroup"].update(changes)
    stubber.add_response("describe_nodegroup", response, {"clusterName": CLUSTER, "nodegroupName": NODEGROUP})
    stubber.activate()
    return eks, stubber


def test_pool_change_names_a_node_group_being_updated() -> None:
    eks, stubber = _stubbed_eks()
    assert AwsMachines(POOLS, Recording({"eks": eks})).pool_change("gpu") == f"node group {NODEGROUP} is UPDATING"
    stubber.assert_no_pending_responses()


def test_pool_change_holds_a_degraded_node_group_and_names_its_issues() -> None:
    issues = {"issues": [{"code": "AsgInstanceLaunchFailures", "message": "Insufficient capacity", "resourceIds": []}]}
    eks, _ = _stubbed_eks(status="DEGRADED", health=issues)
    change = AwsMachines(POOLS, Recording({"eks": eks})).pool_change("gpu")
    assert change == f"node group {NODEGROUP} is DEGRADED (AsgInstanceLaunchFailures)"


def test_the_stable_status_is_one_of_the_apis_values() -> None:
    from slonk_infra.ops.cloud.aws import NODEGROUP_STABLE

    statuses = boto3.client("eks", region_name=REGION).meta.service_model.shape_for("NodegroupStatus").enum
    assert NODEGROUP_STABLE in statuses and "UPDATING" in statuses


def test_a_client_error_becomes_a_cloud_call_error() -> None:
    ec2 = boto3.client("ec2", region_name=REGION)
    stubber = Stubber(ec2)
    stubber.add_client_error(
        "describe_capacity_reservations",
        service_error_code="InvalidCapacityReservationId.NotFound",
        service_message=f"The capacity reservation ID '{RESERVATION}' does not exist",
        http_status_code=400,
    )
    with stubber, pytest.raises(CloudCallError, match="does not exist") as info:
        AwsMachines(POOLS, Recording({"ec2": ec2})).pool_ready("gpu")
    assert (info.value.call, info.value.target, info.value.not_found) == (
        "DescribeCapacityReservations",
        RESERVATION,
        True,
    )


def test_clients_have_timeouts_and_no_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(key, "testing")
    config = boto3_clients(7.0)("eks", REGION).meta.config
    assert (config.connect_timeout, config.read_timeout) == (7.0, 7.0)
    assert config.retries == {"mode": "standard", "total_max_attempts": 1}
    # That configuration sends a throttled request once: botocore's standard mode would retry a 503.
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            body = json.dumps({"message": "Rate exceeded"}).encode()
            self.send_response(503)
            self.send_header("x-amzn-ErrorType", "ServiceUnavailableException")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        eks = boto3.session.Session().client("eks", region_name=REGION, endpoint_url=url, config=config)
        aws = AwsMachines(POOLS, lambda service, region: eks)
        with pytest.raises(CloudCallError, match="ServiceUnavailable"):
            aws.pool_size("gpu")
        assert seen == [f"/clusters/{CLUSTER}/node-groups/{NODEGROUP}"]
    finally:
        server.shutdown()
        server.server_close()


def test_connect_makes_no_call_until_used() -> None:
    made = connect(POOLS)
    assert isinstance(made, AwsMachines)
    assert made.timeout == TIMEOUT_SECONDS
    with pytest.raises(ValueError, match="'aws'"):
        AwsMachines(CloudPools(cloud="gcp", cluster="c", location="us-central1"))
