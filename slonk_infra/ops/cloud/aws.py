"""The controller's cloud calls on EKS: boto3 (EKS, EC2 Auto Scaling, EC2).

A worker group's EKS managed node group runs on one Auto Scaling group (ASG) that EKS made for it
(``describe_nodegroup`` -> ``nodegroup.resources.autoScalingGroups[0].name``).

Calls (boto3 / API references):

- pool_size: ``eks.describe_nodegroup`` then ``autoscaling.describe_auto_scaling_groups`` ->
  ``DesiredCapacity`` (https://docs.aws.amazon.com/eks/latest/APIReference/API_DescribeNodegroup.html,
  https://docs.aws.amazon.com/autoscaling/ec2/APIReference/API_DescribeAutoScalingGroups.html).
- grow: the same, then ``eks.update_nodegroup_config(scalingConfig={minSize: 0, desiredSize: S,
  maxSize: max(S, current maxSize)})`` (https://docs.aws.amazon.com/eks/latest/APIReference/API_UpdateNodegroupConfig.html),
  only when S is above the desired capacity (lowering it would let the ASG pick which machines go).
- pool_ready: ``ec2.describe_capacity_reservations`` -> ``State == "active"`` for a Capacity Block pool
  (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeCapacityReservations.html).
- pool_change: ``eks.describe_nodegroup`` -> ``nodegroup.status``: the pool is stable only when it is
  ``ACTIVE`` (the API's values: CREATING, ACTIVE, UPDATING, DELETING, CREATE_FAILED, DELETE_FAILED,
  DEGRADED; https://docs.aws.amazon.com/eks/latest/APIReference/API_Nodegroup.html, and botocore's
  ``NodegroupStatus`` enum). A managed node group update (version, AMI or launch template) is UPDATING
  while EKS raises the ASG's desired and max size by up to twice the number of Availability Zones,
  drains and ends the old instances, then lowers them again
  (https://docs.aws.amazon.com/eks/latest/userguide/managed-node-update-behavior.html): its new
  instances may sit empty for the whole update, and removing them with a decrement would leave the ASG
  below the replicas when EKS lowers the desired size, the ASG then picking which machines end.
- remove: ``autoscaling.terminate_instance_in_auto_scaling_group(InstanceId, ShouldDecrementDesiredCapacity=True)``
  (https://docs.aws.amazon.com/autoscaling/ec2/APIReference/API_TerminateInstanceInAutoScalingGroup.html):
  that instance goes and the desired capacity drops by one, so no other instance is started or stopped.
- replace: ``autoscaling.set_instance_health(InstanceId, HealthStatus="Unhealthy", ShouldRespectGracePeriod=False)``
  (https://docs.aws.amazon.com/autoscaling/ec2/APIReference/API_SetInstanceHealth.html): the ASG replaces
  that instance. There is no faulty-host report on EC2; ``faulty_host`` changes nothing here.

The region of a pool call is ``CloudPools.location``; of a machine call, the machine's availability zone
minus its letter. Clients: ``connect_timeout`` and ``read_timeout`` of
:data:`~slonk_infra.ops.cloud.machines.TIMEOUT_SECONDS`, ``retries={"total_max_attempts": 1}`` (one attempt: no
retries inside; https://boto3.amazonaws.com/v1/documentation/api/latest/guide/retries.html).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from slonk_infra.ops.cloud.machines import TIMEOUT_SECONDS, CloudCallError, CloudPools, MachineRef, ReplaceCall

ClientFactory = Callable[[str, str], Any]
"""(service, region) -> a boto3 client."""

NODEGROUP_STABLE = "ACTIVE"
"""The only node group status in which the controller grows the pool or removes a machine of it (see the
module docstring: DEGRADED, a health issue such as failed launches, holds too; the decision says so)."""

CAPACITY_BLOCK_ACTIVE = "active"
# EKS scales a Capacity Block's node group to 0 forty minutes before the block ends (its scheduled action
# "Amazon EKS Node Group Capacity Scaledown Before Reservation End"; EKS user guide, "Capacity Blocks for
# ML"): growing the group back then would fight EKS for instances the block is about to reclaim.
BLOCK_END_MARGIN_SECONDS = 40 * 60
"""A Capacity Block's reservation state once its instances can launch (``scheduled`` before; see
https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-using.html)."""

# Error codes that mean the instance / node group / reservation does not exist. Auto Scaling answers an
# unknown instance id with a ValidationError ("Instance Id not found"): its message decides (unverified
# against a live account; moto answers the same way).
_NOT_FOUND_CODES = {"ResourceNotFoundException", "InvalidCapacityReservationId.NotFound", "InvalidInstanceID.NotFound"}


def boto3_clients(timeout: float = TIMEOUT_SECONDS) -> ClientFactory:
    """A factory of boto3 clients with the pod's default credential chain (EKS Pod Identity in the pod),
    ``timeout`` seconds to connect and to read, and one attempt per call."""
    import boto3  # type: ignore[import-untyped]
    from botocore.config import Config  # type: ignore[import-untyped]

    config = Config(
        connect_timeout=timeout, read_timeout=timeout, retries={"mode": "standard", "total_max_attempts": 1}
    )
    session = boto3.session.Session()

    def client(service: str, region: str) -> Any:
        return session.client(service, region_name=region, config=config)

    return client


class AwsMachines:
    """:class:`~slonk_infra.ops.cloud.CloudMachines` on EKS. ``clients`` defaults to :func:`boto3_clients`
    (made on first use); one client per (service, region) is kept."""

    def __init__(
        self,
        pools: CloudPools,
        clients: ClientFactory | None = None,
        *,
        timeout: float = TIMEOUT_SECONDS,
        now: Callable[[], float] = time.time,
    ) -> None:
        if pools.cloud != "aws":
            raise ValueError(f"AwsMachines: pools.cloud is {pools.cloud!r}, expected 'aws'")
        self.pools = pools
        self.timeout = timeout
        self._now = now
        self._factory = clients
        self._clients: dict[tuple[str, str], Any] = {}
        self._asg: dict[str, str] = {}  # worker group -> its node group's ASG name (fixed for the group's life)

    # ------------------------------------------------------------------ plumbing
    def client(self, service: str, region: str) -> Any:
        """The (cached) client of ``service`` in ``region``."""
        key = (service, region)
        if key not in self._clients:
            with self._calling("boto3.client", f"{service} in {region}"):
                if self._factory is None:
                    self._factory = boto3_clients(self.timeout)
                self._clients[key] = self._factory(service, region)
        return self._clients[key]

    @contextmanager
    def _calling(self, call: str, target: str) -> Iterator[None]:
        try:
            yield
        except CloudCallError:
            raise
        except Exception as exc:  # botocore's ClientError, BotoCoreError (timeouts, credentials) and the rest
            code, message = _error(exc)
            not_found = code in _NOT_FOUND_CODES or (code == "ValidationError" and "not found" in message.lower())
            raise CloudCallError(call, target, f"{code}: {message}" if code else message, not_found=not_found) from exc

    def _nodegroup(self, pool: str) -> str:
        name = self.pools.node_pools.get(pool)
        if not name:
            raise CloudCallError(
                "DescribeNodegroup",
                pool,
                f"no node group is configured for worker group {pool!r} (cloud.nodePools: {sorted(self.pools.node_pools)})",
            )
        return name

    def _describe_nodegroup(self, pool: str) -> dict[str, Any]:
        name = self._nodegroup(pool)
        with self._calling("DescribeNodegroup", f"{self.pools.cluster}/{name}"):
            found: dict[str, Any] = self.client("eks", self.pools.location).describe_nodegroup(
                clusterName=self.pools.cluster, nodegroupName=name
            )["nodegroup"]
        groups = found.get("resources", {}).get("autoScalingGroups", [])
        if not groups:
            status = found.get("status", "?")
            raise CloudCallError(
                "DescribeNodegroup", name, f"the node group has no Auto Scaling group yet (status {status})"
            )
        self._asg[pool] = groups[0]["name"]
        return found

    def _desired(self, pool: str) -> int:
        asg = self._asg[pool]
        with self._calling("DescribeAutoScalingGroups", asg):
            found = self.client("autoscaling", self.pools.location).describe_auto_scaling_groups(
                AutoScalingGroupNames=[asg]
            )["AutoScalingGroups"]
        if not found:
            self._asg.pop(pool, None)
            raise CloudCallError("DescribeAutoScalingGroups", asg, "no such Auto Scaling group", not_found=True)
        return int(found[0]["DesiredCapacity"])

    # ------------------------------------------------------------------ pools
    def pool_size(self, pool: str) -> int:
        if pool not in self._asg:
            self._describe_nodegroup(pool)
        return self._desired(pool)

    def grow(self, pool: str, size: int) -> None:
        nodegroup = self._describe_nodegroup(pool)  # always fresh: its maxSize is needed
        if size <= self._desired(pool):
            return  # never lowered here: the ASG would choose which machines to end
        scaling = nodegroup.get("scalingConfig", {})
        config = {"minSize": 0, "desiredSize": size, "maxSize": max(size, int(scaling.get("maxSize", 0)))}
        name = self._nodegroup(pool)
        with self._calling("UpdateNodegroupConfig", f"{self.pools.cluster}/{name}"):
            self.client("eks", self.pools.location).update_nodegroup_config(
                clusterName=self.pools.cluster, nodegroupName=name, scalingConfig=config
            )

    def pool_ready(self, pool: str) -> bool:
        reservation = self.pools.capacity_blocks.get(pool)
        if not reservation:
            return True
        with self._calling("DescribeCapacityReservations", reservation):
            found = self.client("ec2", self.pools.location).describe_capacity_reservations(
                CapacityReservationIds=[reservation]
            )["CapacityReservations"]
        if not found:
            raise CloudCallError("DescribeCapacityReservations", reservation, "no such reservation", not_found=True)
        if found[0].get("State") != CAPACITY_BLOCK_ACTIVE:
            return False
        end = found[0].get("EndDate")  # a datetime (botocore parses the timestamp)
        return end is None or end.timestamp() - self._now() > BLOCK_END_MARGIN_SECONDS

    def pool_change(self, pool: str) -> str:
        nodegroup = self._describe_nodegroup(pool)
        status = str(nodegroup.get("status") or "")
        if status == NODEGROUP_STABLE:
            return ""
        issues = [str(i.get("code", "")) for i in nodegroup.get("health", {}).get("issues", []) if i.get("code")]
        detail = f" ({', '.join(sorted(set(issues)))})" if issues else ""
        return f"node group {self._nodegroup(pool)} is {status or 'of no status'}{detail}"

    # ------------------------------------------------------------------ machines
    def remove(self, machine: MachineRef) -> None:
        with self._calling("TerminateInstanceInAutoScalingGroup", machine.instance):
            self.client("autoscaling", machine.region).terminate_instance_in_auto_scaling_group(
                InstanceId=machine.instance, ShouldDecrementDesiredCapacity=True
            )

    def replace(self, machine: MachineRef, faulty_host: bool) -> ReplaceCall:
        with self._calling("SetInstanceHealth", machine.instance):
            self.client("autoscaling", machine.region).set_instance_health(
                InstanceId=machine.instance, HealthStatus="Unhealthy", ShouldRespectGracePeriod=False
            )
        return "SetInstanceHealth"


def _error(exc: BaseException) -> tuple[str, str]:
    """(code, message) of a botocore ClientError (its documented ``response["Error"]``), else ("", text)."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        error = response.get("Error", {})
        return str(error.get("Code", "")), str(error.get("Message", "")) or str(exc)
    return "", str(exc) or type(exc).__name__
