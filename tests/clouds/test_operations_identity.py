"""The cloud identity each adapter gives the operations controller holds exactly what its cloud calls need.

The calls are :mod:`slonk_infra.ops.cloud`'s (their permissions, with sources, in its docstring); the
grants are the adapters' (GKE custom role, EKS inline policy). A call added without its permission, or a
permission granted that no call uses, fails here instead of as AccessDenied on a real cluster.
"""

from __future__ import annotations

import json

from slonk_infra.clouds.aws.operations import policy_document
from slonk_infra.clouds.gcp.operations import PERMISSIONS
from slonk_infra.ops.cloud.machines import AWS_ACTIONS, GCP_PERMISSIONS


def test_the_gke_role_grants_exactly_what_the_controller_calls() -> None:
    assert set(PERMISSIONS) == GCP_PERMISSIONS
    assert len(PERMISSIONS) == len(set(PERMISSIONS))


def test_the_eks_policy_grants_exactly_what_the_controller_calls() -> None:
    statements = json.loads(policy_document("c", "us-east-1", capacity_blocks=True))["Statement"]
    granted = {a for s in statements for a in s["Action"]}
    assert granted == AWS_ACTIONS
    without_blocks = json.loads(policy_document("c", "us-east-1", capacity_blocks=False))["Statement"]
    assert {a for s in without_blocks for a in s["Action"]} == AWS_ACTIONS - {"ec2:DescribeCapacityReservations"}
