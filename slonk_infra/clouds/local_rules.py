"""Rules of ``cloud: local`` (an existing kind / k3d / minikube cluster): only Kubernetes-provisioned
storage, and no cluster creation."""

from __future__ import annotations

from typing import TYPE_CHECKING

from slonk_infra.clouds.rules import KUBERNETES_STORAGE, StorageRules, dropped_placement
from slonk_infra.declaration.errors import Problem

if TYPE_CHECKING:
    import pulumi

    from slonk_infra.clouds.common import CloudComponent
    from slonk_infra.declaration.model import ClusterDeclaration, StorageSpec
    from slonk_infra.plan import ClusterPlan

STORAGE = StorageRules(kinds=KUBERNETES_STORAGE)
# Why a local cluster cannot honour an explicit compactPlacement: true (see rules.dropped_placement).
DROPPED_PLACEMENT = {"any": "a local cluster's nodes are already where they are"}


class LocalRules:
    """Rules and deployer of ``cloud: local``."""

    cloud = "local"

    @property
    def storage_kinds(self) -> frozenset[str]:
        """Only the Kubernetes-provisioned kinds (nfs-server, nfs-export)."""
        return STORAGE.kinds

    def storage_problems(self, index: int, volume: StorageSpec) -> list[Problem]:
        """NFS kinds have no tiers."""
        return STORAGE.problems(index, volume)

    def declaration_problems(self, declaration: ClusterDeclaration) -> list[Problem]:
        """No cloud blocks, no cluster creation."""
        d = declaration
        out: list[Problem] = []
        for block, given in (("gcp", d.gcp), ("aws", d.aws)):
            if given is not None:
                out.append(Problem(block, "given but cloud is local"))
        if d.kubernetes.create:
            out.append(Problem("kubernetes.create", "a local stack uses an existing cluster; set create: false"))
        out += dropped_placement(d, DROPPED_PLACEMENT)
        return out

    def deploy(self, name: str, plan: ClusterPlan, opts: pulumi.ResourceOptions | None) -> CloudComponent:
        """A :class:`~slonk_infra.clouds.local.LocalInfrastructure`."""
        from slonk_infra.clouds.local import LocalInfrastructure

        return LocalInfrastructure(name, plan, opts)


RULES = LocalRules()
