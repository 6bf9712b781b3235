"""AWS's rules for a declaration: EFS and FSx for Lustre, and what an EKS deployment needs declared."""

from __future__ import annotations

from typing import TYPE_CHECKING

from slonk_infra.clouds.rules import KUBERNETES_STORAGE, StorageLimits, StorageRules
from slonk_infra.errors import Problem

if TYPE_CHECKING:
    import pulumi

    from slonk_infra.clouds.common import CloudComponent
    from slonk_infra.declaration import ClusterDeclaration, StorageSpec
    from slonk_infra.plan import ClusterPlan

STORAGE = StorageRules(
    kinds=frozenset({"efs", "fsx-lustre"}) | KUBERNETES_STORAGE,
    tiers={"fsx-lustre": ("SCRATCH_1", "SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2")},
    limits={
        "fsx-lustre": StorageLimits(
            1200, 2_000_000, source="https://docs.aws.amazon.com/fsx/latest/LustreGuide/managing-storage-capacity.html"
        )
    },
    default_tiers={"fsx-lustre": "PERSISTENT_2"},
)


class AwsRules:
    """Rules and deployer of ``cloud: aws``."""

    cloud = "aws"

    @property
    def storage_kinds(self) -> frozenset[str]:
        """EFS, FSx for Lustre, plus the Kubernetes-provisioned kinds."""
        return STORAGE.kinds

    def storage_problems(self, index: int, volume: StorageSpec) -> list[Problem]:
        """FSx deployment types and capacity ranges."""
        return STORAGE.problems(index, volume)

    def declaration_problems(self, declaration: ClusterDeclaration) -> list[Problem]:
        """Region and the aws block."""
        d = declaration
        out: list[Problem] = []
        if not d.region:
            out.append(Problem("region", "required on aws"))
        if d.aws is None:
            out.append(Problem("aws", "required when cloud is aws (at least vpcId and subnetIds)"))
        if d.gcp is not None:
            out.append(Problem("gcp", "given but cloud is aws"))
        return out

    def deploy(self, name: str, plan: ClusterPlan, opts: pulumi.ResourceOptions | None) -> CloudComponent:
        """An :class:`~slonk_infra.clouds.aws.AwsInfrastructure`."""
        from slonk_infra.clouds.aws.infrastructure import AwsInfrastructure

        return AwsInfrastructure(name, plan, opts)


RULES = AwsRules()
