"""One EKS worker group as a component: a managed node group, and for GPU groups its launch template
(EFA interfaces from the catalog, the instance store as ephemeral storage) and, when compact placement is
wanted, a cluster placement group.

Sizes. The node group is created with ``desired = max = nodes`` (min 0), except a Capacity Block group,
which starts at desired 0: its instances cannot launch before the block is active (EKS user guide, "Create
a managed node group with Capacity Blocks for ML"). When the operations controller runs, it owns the sizes
after creation (it grows a group through ``eks:UpdateNodegroupConfig`` and removes only idle, named
machines), so ``scalingConfig.desiredSize`` and ``maxSize`` are left out of Pulumi's updates. Without it, a
Capacity Block group's desired size is still left out: the operator scales it up when the block starts and
EKS scales it down before the block ends, neither of which a later ``pulumi up`` may undo.

Repair. GPU groups turn on EKS node auto repair, which replaces (or reboots) a node whose
``AcceleratedHardwareReady``/``KernelReady``/... condition, set by the node monitoring agent add-on, stays
false (EKS user guide, "Automatically repair nodes in EKS clusters").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from slonk_infra import tokens
from slonk_infra.clouds.aws import local_storage
from slonk_infra.clouds.common import cloud_effect
from slonk_infra.plan import WorkerGroup

GPU_AMI = "AL2023_x86_64_NVIDIA"
CPU_AMI = "AL2023_x86_64_STANDARD"
ROOT_VOLUME_GIB = 512  # CUDA images are tens of GiB; the EKS default root volume is 20 GiB
CPU_DISK_GIB = 200

# What EKS rejects in a node group's launch template, by normalised key (lower case, no "_").
_FORBIDDEN_LT_KEYS = {
    "subnetid": "SubnetId (EKS places instances in the node group's subnets)",
    "iaminstanceprofile": "IamInstanceProfile (EKS uses the node group's role)",
    "requestspotinstances": "RequestSpotInstances (use capacity_type SPOT)",
    "spotoptions": "spot options (use capacity_type SPOT)",
    "hibernationoptions": "HibernationOptions",
    "terminateinstances": "TerminateInstances",
    "instanceinitiatedshutdownbehavior": "instance-initiated shutdown behaviour (TerminateInstances)",
}


def launch_template_violations(inputs: Mapping[str, Any]) -> list[str]:
    """What in a launch template's inputs (snake_case or wire camelCase) EKS managed node groups reject.

    EKS's ``LaunchTemplateSpecification`` says the template cannot include SubnetId,
    IamInstanceProfile, RequestSpotInstances, HibernationOptions or TerminateInstances; such a
    template fails only at deploy time, so this check runs in tests and can run in policies.
    """
    found: list[str] = []

    def walk(value: Any, path: str) -> None:
        if isinstance(value, Mapping):
            for key, item in value.items():
                norm = str(key).replace("_", "").lower()
                where = f"{path}.{key}" if path else str(key)
                if norm in _FORBIDDEN_LT_KEYS and item not in (None, [], {}):
                    found.append(f"{where}: {_FORBIDDEN_LT_KEYS[norm]}")
                elif norm == "markettype" and str(item).lower() == "spot":
                    found.append(f"{where}: spot market (use capacity_type SPOT)")
                walk(item, where)
        elif isinstance(value, list | tuple):
            for i, item in enumerate(value):
                walk(item, f"{path}[{i}]")

    walk(inputs, "")
    return found


def efa_interfaces(group: WorkerGroup) -> int:
    """EFA interfaces a node of the group gets: one per network card, as far as the machine has EFAs."""
    machine = group.machine
    return min(machine.network_cards, machine.efa_interfaces)


def capacity_type(group: WorkerGroup) -> str:
    """EKS node group capacity type: SPOT, CAPACITY_BLOCK or ON_DEMAND."""
    if group.spot:
        return "SPOT"
    if is_capacity_block(group):
        return "CAPACITY_BLOCK"
    return "ON_DEMAND"


def is_capacity_block(group: WorkerGroup) -> bool:
    """Whether the group consumes an EC2 Capacity Block for ML."""
    return group.reservation is not None and group.reservation.capacity_block


# The scaling fields the operations controller sets after creation (wire names: ignore_changes paths).
CONTROLLER_SIZES = ("scalingConfig.desiredSize", "scalingConfig.maxSize")
BLOCK_SIZES = ("scalingConfig.desiredSize",)
# Node auto repair's default for these XIDs is a reboot after 10 minutes (EKS user guide node-health-nma,
# "NVIDIA XID error codes"), but NVIDIA lists both as usually caused by the application (XID 13 graphics
# engine exception, XID 31 GPU memory page fault: docs.nvidia.com/deploy/xid-errors): one job's bug would
# reboot the node under every job on it. The EKS node-repair page's own example turns XID 31 to NoAction.
# Slurm's health checks (slonk-health) still see a GPU that stays broken.
NO_REPAIR_XIDS = (13, 31)


def scaling(group: WorkerGroup) -> tuple[int, int]:
    """(desired, max) the node group is created with: ``nodes`` each, but desired 0 for a Capacity Block,
    which cannot launch instances before it is active."""
    return (0 if is_capacity_block(group) else group.replicas, group.replicas)


def ignored_sizes(group: WorkerGroup, operations: bool) -> list[str]:
    """The scaling fields a later ``pulumi up`` must leave alone (see the module's notes)."""
    if operations:
        return list(CONTROLLER_SIZES)
    return list(BLOCK_SIZES) if is_capacity_block(group) else []


def node_repair() -> aws.eks.NodeGroupNodeRepairConfigArgs:
    """Node auto repair on, with no action for the XIDs applications cause (:data:`NO_REPAIR_XIDS`)."""
    return aws.eks.NodeGroupNodeRepairConfigArgs(
        enabled=True,
        node_repair_config_overrides=[
            aws.eks.NodeGroupNodeRepairConfigNodeRepairConfigOverrideArgs(
                node_monitoring_condition="AcceleratedHardwareReady",
                node_unhealthy_reason=f"NvidiaXID{xid}Error",
                min_repair_wait_time_mins=10,
                repair_action="NoAction",
            )
            for xid in NO_REPAIR_XIDS
        ],
    )


@dataclass(frozen=True)
class AwsWorkerGroupArgs:
    """Inputs of one EKS worker group."""

    group: WorkerGroup
    """The planned group (machine, replicas, labels, taints, reservation, placement)."""
    cluster_name: pulumi.Input[str]
    """EKS cluster the node group joins."""
    node_role_arn: pulumi.Input[str]
    """IAM role of the nodes."""
    subnet_ids: Sequence[pulumi.Input[str]]
    """Subnets; a CPU group spans them all."""
    cluster_security_group: pulumi.Input[str]
    """The cluster's security group (EKS stops adding it once the template has interfaces)."""
    efa_security_group: pulumi.Input[str] | None = None
    """Security group admitting EFA traffic between GPU nodes (None: no EFA)."""
    tag_prefix: str = ""
    """Prefix of the ``Name`` tags (the cluster name)."""
    child_prefix: str = ""
    """Prefix of the children's logical names (default: the component's name)."""
    depends_on: Sequence[pulumi.Resource] = ()
    """What the node group waits for (the node role's policy attachments: nodes that boot before
    their role can pull images never become Ready)."""
    reservation_name: pulumi.Input[str] | None = None
    """The capacity reservation to consume when the program gave its id as a Pulumi Output (None: the
    planned group's ``reservation.name``)."""
    zone_subnet_id: pulumi.Input[str] | None = None
    """The subnet of a GPU group: in the declared zone, where its placement group and reservation are (None:
    the first of ``subnet_ids``)."""
    operations: bool = False
    """The operations controller owns the group's size after creation (see the module's notes)."""


class AwsWorkerGroup(pulumi.ComponentResource):
    """A GPU or CPU worker group on EKS: NodeGroup (+ LaunchTemplate, + PlacementGroup)."""

    node_group: aws.eks.NodeGroup
    launch_template: aws.ec2.LaunchTemplate | None
    placement_group: aws.ec2.PlacementGroup | None
    node_group_name: pulumi.Output[str]

    def __init__(self, name: str, args: AwsWorkerGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(tokens.AWS_WORKER_GROUP, name, None, opts)
        self._args = args
        self._prefix = args.child_prefix or name
        group = args.group
        self.launch_template = None
        self.placement_group = None
        gpu = group.kind == "gpu"
        block = is_capacity_block(group)
        template = None
        if gpu:
            lt = self._launch_template()
            template = aws.eks.NodeGroupLaunchTemplateArgs(id=lt.id, version=lt.latest_version.apply(str))
        desired, most = scaling(group)
        zone_subnet = args.zone_subnet_id if args.zone_subnet_id is not None else args.subnet_ids[0]
        self.node_group = aws.eks.NodeGroup(
            f"{self._prefix}-nodegroup-{group.name}",
            aws.eks.NodeGroupArgs(
                cluster_name=args.cluster_name,
                node_group_name=group.name,
                node_role_arn=args.node_role_arn,
                # One subnet (one AZ) for GPU groups: the declared zone's, where the placement group, the
                # reservation and the FSx filesystem are.
                subnet_ids=[zone_subnet] if gpu else list(args.subnet_ids),
                # A Capacity Block's instance type is in its launch template, and EKS refuses a node group
                # naming instance types as well (API reference CreateNodegroup, instanceTypes).
                instance_types=None if block else [group.machine.name],
                ami_type=GPU_AMI if gpu else CPU_AMI,
                capacity_type=capacity_type(group),
                disk_size=None if template else CPU_DISK_GIB,
                launch_template=template,
                labels=dict(group.node_labels),
                taints=[
                    aws.eks.NodeGroupTaintArgs(key=t.key, value=t.value or None, effect=cloud_effect(t))
                    for t in group.taints
                ]
                or None,
                # min 0 so a group can be emptied (Capacity Block ending, upgrade of a block group, the
                # controller removing idle machines) without a change here; desired = max = the declared
                # nodes, which is what the worker StatefulSet expects (desired 0 for a Capacity Block).
                scaling_config=aws.eks.NodeGroupScalingConfigArgs(min_size=0, desired_size=desired, max_size=most),
                update_config=aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=1),
                node_repair_config=node_repair() if gpu else None,
            ),
            # The node group keeps the group's name, so a replacement must remove the old one first.
            opts=pulumi.ResourceOptions(
                parent=self,
                delete_before_replace=True,
                depends_on=list(args.depends_on),
                ignore_changes=ignored_sizes(group, args.operations) or None,
            ),
        )
        self.node_group_name = self.node_group.node_group_name
        self.register_outputs({"nodeGroupName": self.node_group_name})

    def _launch_template(self) -> aws.ec2.LaunchTemplate:
        args, group = self._args, self._args.group
        reservation = group.reservation
        child = pulumi.ResourceOptions(parent=self)
        tag = f"{args.tag_prefix}-{group.name}" if args.tag_prefix else group.name
        placement = None
        # A reservation (ODCR or Capacity Block) already decides where its instances go; a cluster
        # placement group the reservation was not made in would make launches fail.
        if group.compact_placement and reservation is None:
            self.placement_group = aws.ec2.PlacementGroup(
                f"{self._prefix}-placement-{group.name}",
                aws.ec2.PlacementGroupArgs(strategy="cluster", tags={"Name": tag}),
                opts=child,
            )
            placement = aws.ec2.LaunchTemplatePlacementArgs(group_name=self.placement_group.name)
        interfaces = None
        count = efa_interfaces(group)
        if count and args.efa_security_group is not None:
            # With interfaces in the template EKS no longer adds the cluster security group itself.
            groups = [args.cluster_security_group, args.efa_security_group]
            interfaces = [
                aws.ec2.LaunchTemplateNetworkInterfaceArgs(
                    network_card_index=card,
                    device_index=0 if card == 0 else 1,
                    interface_type="efa" if card == 0 else "efa-only",
                    security_groups=groups,
                    delete_on_termination="true",
                )
                for card in range(count)
            ]
        self.launch_template = aws.ec2.LaunchTemplate(
            f"{self._prefix}-lt-{group.name}",
            aws.ec2.LaunchTemplateArgs(
                description=f"slonk-infra {args.tag_prefix}: {group.name}",
                update_default_version=True,
                block_device_mappings=[
                    aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                        device_name="/dev/xvda",
                        ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                            volume_size=ROOT_VOLUME_GIB,
                            volume_type="gp3",
                            encrypted="true",
                            delete_on_termination="true",
                        ),
                    )
                ],
                network_interfaces=interfaces,
                placement=placement,
                capacity_reservation_specification=(
                    aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs(
                        capacity_reservation_target=(
                            aws.ec2.LaunchTemplateCapacityReservationSpecificationCapacityReservationTargetArgs(
                                capacity_reservation_id=(
                                    args.reservation_name if args.reservation_name is not None else reservation.name
                                )
                            )
                        )
                    )
                    if reservation is not None
                    else None
                ),
                instance_market_options=(
                    aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(market_type="capacity-block")
                    if reservation is not None and reservation.capacity_block
                    else None
                ),
                # EKS requires the instance type in a Capacity Block group's template ("Create a managed node
                # group with Capacity Blocks for ML": InstanceType in LaunchTemplateData).
                instance_type=group.machine.name if reservation is not None and reservation.capacity_block else None,
                # The instance-store NVMe as the node's ephemeral storage (local_storage), where it has any.
                user_data=local_storage.user_data(group.machine.name),
                metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                    http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=2
                ),
                tags={"Name": tag},
            ),
            opts=child,
        )
        return self.launch_template
