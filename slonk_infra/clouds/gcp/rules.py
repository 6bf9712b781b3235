"""GCP's rules for a declaration: Filestore tiers and sizes, and what a GKE deployment needs declared."""

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
    kinds=frozenset({"filestore"}) | KUBERNETES_STORAGE,
    tiers={
        "filestore": (
            "BASIC_HDD",
            "BASIC_SSD",
            "HIGH_SCALE_SSD",
            "ZONAL",
            "REGIONAL",
            "ENTERPRISE",
            "STANDARD",
            "PREMIUM",
        )
    },
    limits={"filestore": StorageLimits(1024, 102400, source="https://cloud.google.com/filestore/docs/service-tiers")},
    default_tiers={"filestore": "ZONAL"},
)


class GcpRules:
    """Rules and deployer of ``cloud: gcp``."""

    cloud = "gcp"

    @property
    def storage_kinds(self) -> frozenset[str]:
        """Filestore plus the Kubernetes-provisioned kinds."""
        return STORAGE.kinds

    def storage_problems(self, index: int, volume: StorageSpec) -> list[Problem]:
        """Filestore tier names and capacity ranges."""
        return STORAGE.problems(index, volume)

    def declaration_problems(self, declaration: ClusterDeclaration) -> list[Problem]:
        """Region, the gcp block, and a zone wherever there is GPU or TPU capacity."""
        d = declaration
        out: list[Problem] = []
        if not d.region:
            out.append(Problem("region", "required on gcp"))
        if d.gcp is None:
            out.append(Problem("gcp", "required when cloud is gcp (at least project)"))
        if d.aws is not None:
            out.append(Problem("aws", "given but cloud is gcp"))
        if not d.zone and (d.pools or d.tpu_slices):
            out.append(Problem("zone", "required on gcp: GPU and TPU capacity is zonal"))
        return out

    def deploy(self, name: str, plan: ClusterPlan, opts: pulumi.ResourceOptions | None) -> CloudComponent:
        """A :class:`~slonk_infra.clouds.gcp.GcpInfrastructure`."""
        from slonk_infra.clouds.gcp.infrastructure import GcpInfrastructure

        return GcpInfrastructure(name, plan, opts)


RULES = GcpRules()
