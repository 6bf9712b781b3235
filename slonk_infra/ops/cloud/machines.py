"""What the controller and the cloud implementations share: a machine's and the pools' references, the
calls (:class:`CloudMachines`) and their one error type. Re-exported by :mod:`slonk_infra.ops.cloud`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

CloudKind = Literal["gcp", "aws"]

TIMEOUT_SECONDS = 30.0
# What the calls of this package need of the controller's cloud identity (the table in the package
# docstring, with sources). The adapters grant exactly these; tests/clouds/test_operations_identity.py
# holds the two equal, so a new call cannot ship without its permission.
GCP_PERMISSIONS = frozenset(
    {
        "container.clusters.get",
        "compute.instanceGroupManagers.get",
        "compute.instanceGroupManagers.update",
        "compute.instances.get",
        "compute.instances.update",
    }
)
AWS_ACTIONS = frozenset(
    {
        "eks:DescribeNodegroup",
        "eks:UpdateNodegroupConfig",
        "autoscaling:DescribeAutoScalingGroups",
        "autoscaling:TerminateInstanceInAutoScalingGroup",
        "autoscaling:SetInstanceHealth",
        "ec2:DescribeCapacityReservations",
    }
)
"""Seconds one cloud request may take (connect and read): a tick never hangs on the cloud."""


class CloudCallError(RuntimeError):
    """A cloud call failed: ``call`` (the API method, e.g. ``instanceGroupManagers.deleteInstances``),
    ``target`` (the pool or machine it was for) and the cloud's own message. ``not_found`` is True when
    the cloud said the machine or pool does not exist (for remove(): it is already gone)."""

    def __init__(self, call: str, target: str, message: str, *, not_found: bool = False) -> None:
        super().__init__(f"{call} for {target}: {message}")
        self.call = call
        self.target = target
        self.message = message
        self.not_found = not_found


@dataclass(frozen=True)
class MachineRef:
    """One cloud machine, as its Kubernetes Node's providerID names it."""

    cloud: CloudKind
    zone: str
    """GCP zone or AWS availability zone."""
    instance: str
    """GCE instance name or EC2 instance id."""
    project: str = ""
    """GCP project (empty on AWS)."""

    @property
    def region(self) -> str:
        """The zone's region (``us-central1-a`` -> ``us-central1``; ``us-east-1a`` -> ``us-east-1``)."""
        if self.cloud == "gcp":
            return self.zone.rsplit("-", 1)[0]
        return self.zone.rstrip("abcdefghijklmnopqrstuvwxyz")


@dataclass(frozen=True)
class CloudPools:
    """What the controller's config says about the cloud side of the worker pools (rendered from the plan)."""

    cloud: CloudKind
    cluster: str
    """The GKE / EKS cluster name."""
    location: str
    """GKE cluster location (region) or AWS region."""
    node_pools: Mapping[str, str] = field(default_factory=dict)
    """Worker group name -> GKE node pool / EKS node group name (GPU and CPU groups; TPU slices are never resized)."""
    capacity_blocks: Mapping[str, str] = field(default_factory=dict)
    """EKS worker group name -> Capacity Block reservation id: grown only once the block is active."""


ReplaceCall = Literal["reportHostAsFaulty", "recreateInstances", "SetInstanceHealth"]


class CloudMachines(Protocol):
    """The cloud calls the controller makes. Implementations: :mod:`slonk_infra.ops.cloud.gcp`
    (the REST APIs through google-auth) and :mod:`slonk_infra.ops.cloud.aws` (boto3); tests
    use fakes or emulators. Every method raises :class:`CloudCallError` when the cloud call fails."""

    def pool_size(self, pool: str) -> int:
        """The cloud's target size of a worker group's pool (MIG target size / ASG desired capacity)."""
        ...

    def grow(self, pool: str, size: int) -> None:
        """Raise a worker group's pool to ``size`` machines (never used to shrink)."""
        ...

    def pool_ready(self, pool: str) -> bool:
        """Whether the pool can launch machines now (False for an EKS Capacity Block not yet active)."""
        ...

    def pool_change(self, pool: str) -> str:
        """What the cloud itself is changing in the pool now, in its own words (e.g. ``node group
        slonk-gpu is UPDATING``), or ``""`` when the pool is stable. A pool the cloud is changing (a
        node version upgrade, a launch template change, an auto-repair: the cloud surges machines and
        ends others on its own) is neither grown nor has any machine removed by the controller until
        this is ``""`` again. Separate from :meth:`pool_ready`, which only says whether machines can
        launch at all (an EKS Capacity Block)."""
        ...

    def remove(self, machine: MachineRef) -> None:
        """Delete exactly this machine and lower its pool's target size by one."""
        ...

    def replace(self, machine: MachineRef, faulty_host: bool) -> ReplaceCall:
        """Have the cloud give this machine's slot a new machine; ``faulty_host`` asks for the host to be
        reported as faulty where the machine family supports it. Returns the call made."""
        ...


def machine_of(provider_id: str) -> MachineRef | None:
    """The machine a Kubernetes Node's ``spec.providerID`` names, or None for another provider (local, kind)."""
    if provider_id.startswith("gce://"):
        parts = provider_id[len("gce://") :].split("/")
        if len(parts) == 3 and all(parts):
            return MachineRef(cloud="gcp", project=parts[0], zone=parts[1], instance=parts[2])
        return None
    if provider_id.startswith("aws://"):
        parts = provider_id[len("aws://") :].strip("/").split("/")
        if len(parts) == 2 and all(parts) and parts[1].startswith("i-"):
            return MachineRef(cloud="aws", zone=parts[0], instance=parts[1])
        return None
    return None
