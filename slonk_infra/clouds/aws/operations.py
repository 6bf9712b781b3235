"""The AWS identity of the operations controller (slonk-ops): an IAM role it assumes through EKS Pod Identity.

The controller sizes the worker node groups (grows them with ``eks:UpdateNodegroupConfig``, shrinks them
one named, idle machine at a time with ``autoscaling:TerminateInstanceInAutoScalingGroup``), asks for a bad
machine to be replaced (``autoscaling:SetInstanceHealth``) and waits for Capacity Blocks to become active
(``ec2:DescribeCapacityReservations``); it finds a machine from its Node's ``spec.providerID``
(``aws:///AZ/i-...``). This module holds exactly those permissions:

- the describe calls, which IAM cannot scope to a resource (``Resource: "*"``);
- the two mutating Auto Scaling calls, only on groups tagged ``eks:cluster-name = <cluster>`` (EKS tags
  its managed node groups' resources with the cluster and node group names);
- the node group calls, only on this cluster's node groups
  (``arn:aws:eks:REGION:*:nodegroup/CLUSTER/*/*``: the account is the role's own, a role cannot act in
  another account without that account's trust, so the wildcard widens nothing; the ``aws`` partition is
  the only one the plan accepts).

The role trusts ``pods.eks.amazonaws.com`` (``sts:AssumeRole``, ``sts:TagSession``) and is associated with
the ``slonk-ops`` ServiceAccount of the Slurm namespace (EKS user guide, "Learn how EKS Pod Identity grants
pods access to AWS services", pod-id-association / pod-id-role). Credentials come from the
``eks-pod-identity-agent`` add-on, which the adapter installs on a cluster it creates.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pulumi

# The controller's ServiceAccount: slonk_infra.kube.operations.NAME (tests hold the two equal; the cloud
# layer does not import the Kubernetes layer).
SERVICE_ACCOUNT = "slonk-ops"
POD_IDENTITY_PRINCIPAL = "pods.eks.amazonaws.com"
# Actions that take no resource-level permissions (Service Authorization Reference: Amazon EC2 Auto Scaling,
# Amazon EC2): allowed on "*".
DESCRIBE_ACTIONS = ("autoscaling:DescribeAutoScalingGroups",)
CAPACITY_BLOCK_ACTIONS = ("ec2:DescribeCapacityReservations",)
# Scoped to Auto Scaling groups by their tag (condition key autoscaling:ResourceTag/<key>).
MACHINE_ACTIONS = (
    "autoscaling:SetInstanceHealth",
    "autoscaling:TerminateInstanceInAutoScalingGroup",
)
CLUSTER_TAG = "eks:cluster-name"
# Scoped to this cluster's node groups.
NODEGROUP_ACTIONS = ("eks:DescribeNodegroup", "eks:UpdateNodegroupConfig")


def nodegroups_arn(region: str, cluster: str) -> str:
    """Every node group of the cluster (EKS node group ARNs are
    ``arn:aws:eks:REGION:ACCOUNT:nodegroup/CLUSTER/NODEGROUP/UUID``; Service Authorization Reference, Amazon EKS)."""
    return f"arn:aws:eks:{region}:*:nodegroup/{cluster}/*/*"


def policy_document(cluster: str, region: str, capacity_blocks: bool) -> str:
    """The controller's inline policy (JSON): exactly the calls it makes, scoped as far as IAM allows."""
    describe = [*DESCRIBE_ACTIONS, *(CAPACITY_BLOCK_ACTIONS if capacity_blocks else ())]
    statements: list[Mapping[str, Any]] = [
        {"Sid": "Describe", "Effect": "Allow", "Action": sorted(describe), "Resource": "*"},
        {
            "Sid": "ClusterMachines",
            "Effect": "Allow",
            "Action": list(MACHINE_ACTIONS),
            "Resource": "*",
            "Condition": {"StringEquals": {f"autoscaling:ResourceTag/{CLUSTER_TAG}": cluster}},
        },
        {
            "Sid": "ClusterNodegroups",
            "Effect": "Allow",
            "Action": list(NODEGROUP_ACTIONS),
            "Resource": nodegroups_arn(region, cluster),
        },
    ]
    return json.dumps({"Version": "2012-10-17", "Statement": statements}, sort_keys=True)


def policy_output(cluster: pulumi.Input[str], region: str, capacity_blocks: bool) -> pulumi.Output[str]:
    """:func:`policy_document` of the cluster's name, which may be known only after deploy."""
    return pulumi.Output.from_input(cluster).apply(lambda name: policy_document(str(name), region, capacity_blocks))
