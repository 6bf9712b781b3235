"""The ``local`` target (an existing kind / k3d / minikube cluster): only Kubernetes-provisioned storage,
no cluster creation, no cloud resources for the policy pack to know."""

from __future__ import annotations

from typing import TYPE_CHECKING

from slonk_infra.clouds.rules import KUBERNETES_STORAGE, StorageRules, dropped_placement
from slonk_infra.clouds.target import CloudTarget, PolicyTypes
from slonk_infra.declaration.errors import Problem

if TYPE_CHECKING:
    from slonk_infra.declaration.model import ClusterDeclaration

STORAGE = StorageRules(kinds=KUBERNETES_STORAGE)
# Why a local cluster cannot honour an explicit compactPlacement: true (see rules.dropped_placement).
DROPPED_PLACEMENT = {"any": "a local cluster's nodes are already where they are"}


def declaration_problems(declaration: ClusterDeclaration) -> list[Problem]:
    """No cluster creation, no placement."""
    out: list[Problem] = []
    if declaration.kubernetes.create:
        out.append(Problem("kubernetes.create", "a local stack uses an existing cluster; set create: false"))
    out += dropped_placement(declaration, DROPPED_PLACEMENT)
    return out


TARGET = CloudTarget(
    cloud="local",
    deployer="slonk_infra.clouds.local.infrastructure:LocalInfrastructure",
    storage_kinds=STORAGE.offered,
    # NFS kinds have no tiers.
    storage_problems=STORAGE.problems,
    declaration_problems=declaration_problems,
    # No cloud load balancer here that could face the internet.
    restrict_load_balancers=False,
    policy_types=PolicyTypes(),
)
