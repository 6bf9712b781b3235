"""One EKS worker group as a component: a managed node group, and for GPU groups its launch template
(EFA interfaces from the catalog) and, when compact placement is wanted, a cluster placement group."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from slonk_infra import tokens
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
    if group.reservation is not None and group.reservation.capacity_block:
        return "CAPACITY_BLOCK"
    return "ON_DEMAND"


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
    """Subnets; a GPU group uses only the first (one AZ for its placement group and reservation)."""
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
        template = None
        if gpu:
            lt = self._launch_template()
            template = aws.eks.NodeGroupLaunchTemplateArgs(id=lt.id, version=lt.latest_version.apply(str))
        self.node_group = aws.eks.NodeGroup(
            f"{self._prefix}-nodegroup-{group.name}",
            aws.eks.NodeGroupArgs(
                cluster_name=args.cluster_name,
                node_group_name=group.name,
                node_role_arn=args.node_role_arn,
                # One subnet (one AZ) for GPU groups: the placement group, the reservation and the
                # FSx filesystem sit in it.
                subnet_ids=list(args.subnet_ids[:1] if gpu else args.subnet_ids),
                instance_types=[group.machine.name],
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
                # min 0 so a group can be emptied (Capacity Block ending, upgrade of a block group)
                # without a change here; desired = max = the declared nodes, which is what the
                # worker StatefulSet expects.
                scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                    min_size=0, desired_size=group.replicas, max_size=group.replicas
                ),
                update_config=aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=1),
            ),
            # The node group keeps the group's name, so a replacement must remove the old one first.
            opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True, depends_on=list(args.depends_on)),
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
                metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                    http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=2
                ),
                tags={"Name": tag},
            ),
            opts=child,
        )
        return self.launch_template
