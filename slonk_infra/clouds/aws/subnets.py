"""Which declared subnet is in the declared zone, and the load-balancer role tags of the subnets.

The declaration names subnets, not where they are: a subnet's Availability Zone is known only to EC2. The
adapter asks at deploy time (``ec2:DescribeSubnets`` through ``aws.ec2.get_subnets_output``, filtered to
the declared subnets and the zone), so GPU node groups and FSx land in the zone the declaration names
(where their reservation is) instead of wherever ``subnetIds[0]`` happens to be. The answer is the first
declared subnet, in declaration order, that is in the zone: adding a subnet later never moves a node group
or a filesystem (EKS cannot change a node group's subnets in place; FSx is protected).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_aws as aws

from slonk_infra.clouds.aws.target import INTERNAL_ELB_TAG, PUBLIC_ELB_TAG
from slonk_infra.declaration.errors import DeclarationError, Problem

# An Availability Zone ID (use1-az4), as opposed to a zone name (us-east-1a, or a Local Zone
# us-east-1-bos-1a); AWS docs "AZ IDs for your AWS resources".
AZ_ID = re.compile(r"^[a-z]{2,4}[0-9]-az[0-9]+$")


def zone_filter(zone: str) -> str:
    """The DescribeSubnets filter matching ``zone``: ``availability-zone-id`` for an AZ ID, else
    ``availability-zone`` (EC2 API reference, DescribeSubnets, Filter.N)."""
    return "availability-zone-id" if AZ_ID.match(zone) else "availability-zone"


def first_in_zone(zone: str, declared: Sequence[str], found: Sequence[str] | None) -> str:
    """The first declared subnet that EC2 says is in ``zone``; a deploy-time error naming the field when none is."""
    present = set(found or ())
    for subnet in declared:
        if subnet in present:
            return subnet
    listed = " ".join(declared)
    kind = "AvailabilityZoneId" if zone_filter(zone) == "availability-zone-id" else "AvailabilityZone"
    raise DeclarationError(
        [
            Problem(
                "zone",
                f"{zone!r}: none of aws.subnetIds ({', '.join(declared)}) is in it, so its GPU node groups and FSx "
                "have no subnet; add a subnet of that zone to aws.subnetIds or set zone to one of theirs "
                f"(aws ec2 describe-subnets --subnet-ids {listed} --query 'Subnets[].[SubnetId,{kind}]')",
            )
        ]
    )


def zone_subnet(
    zone: str, subnets: Sequence[pulumi.Input[str]], opts: pulumi.InvokeOutputOptions
) -> pulumi.Output[str]:
    """The first of ``subnets`` in ``zone`` (an AZ name or ID), looked up when the program runs."""
    filters = pulumi.Output.all(*subnets).apply(
        lambda ids: [
            aws.ec2.GetSubnetsFilterArgs(name="subnet-id", values=[str(i) for i in ids]),
            aws.ec2.GetSubnetsFilterArgs(name=zone_filter(zone), values=[zone]),
        ]
    )
    found = aws.ec2.get_subnets_output(filters=filters, opts=opts)

    def pick(args: list[Any]) -> str:
        ids, *declared = args
        return first_in_zone(zone, [str(s) for s in declared], ids)

    return pulumi.Output.all(found.ids, *subnets).apply(pick)


def role_tags(
    owner_name: str,
    private: Sequence[pulumi.Input[str]],
    public: Sequence[pulumi.Input[str]],
    opts: pulumi.ResourceOptions,
) -> list[aws.ec2.Tag]:
    """``kubernetes.io/role/internal-elb=1`` on the private subnets and ``kubernetes.io/role/elb=1`` on the
    public ones, so the login Service's load balancer finds subnets of its scheme.

    Kept on delete: the tags are harmless, and a subnet the VPC's owner had tagged already must not lose
    its tag when this stack goes.
    """
    out: list[aws.ec2.Tag] = []
    for role, tag, subnets in (("internal-elb", INTERNAL_ELB_TAG, private), ("elb", PUBLIC_ELB_TAG, public)):
        for i, subnet in enumerate(subnets):
            suffix = subnet if isinstance(subnet, str) else f"subnet{i}"
            out.append(
                aws.ec2.Tag(
                    f"{owner_name}-{role}-{suffix}",
                    aws.ec2.TagArgs(resource_id=subnet, key=tag, value="1"),
                    opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(retain_on_delete=True)),
                )
            )
    return out
