"""GCP's rules for a declaration: Filestore tiers and sizes, and what a GKE deployment needs declared.

Filestore sizes are checked per tier against the bands in the catalog (``data/storage.yaml``, from
Filestore's service-tier table): each tier has its own minimum, maximum and step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from slonk_infra.catalog import load_catalog
from slonk_infra.clouds.rules import KUBERNETES_STORAGE, StorageRules, dropped_placement
from slonk_infra.declaration.errors import Problem

if TYPE_CHECKING:
    import pulumi

    from slonk_infra.clouds.common import CloudComponent
    from slonk_infra.declaration.model import ClusterDeclaration, StorageSpec
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
    default_tiers={"filestore": "ZONAL"},
)
# Why GKE cannot honour an explicit compactPlacement: true (see rules.dropped_placement).
DROPPED_PLACEMENT = {
    "reservation": (
        "a specific reservation fixes where its VMs run, and GKE refuses a placement policy the "
        "reservation was not created with (give the reservation a compact placement policy instead)"
    ),
}


def filestore_problems(index: int, volume: StorageSpec) -> list[Problem]:
    """Capacity of a Filestore volume against its tier's bands (catalog ``storage.yaml``)."""
    if volume.kind != "filestore":
        return []
    name = (volume.tier or STORAGE.default_tiers["filestore"]).upper()
    tier = load_catalog().storage.filestore.tier(name)
    if tier is None or tier.accepts(volume.capacity_gib):
        return []
    bands = " or ".join(b.describe() for b in tier.bands)
    nearest = tier.nearest(volume.capacity_gib)
    hint = f"; nearest: {nearest} GiB" if nearest is not None else ""
    return [
        Problem(
            f"storage[{index}].capacityGib",
            f"{volume.capacity_gib} GiB is not a Filestore {name} size: {bands}{hint}",
        )
    ]


class GcpRules:
    """Rules and deployer of ``cloud: gcp``."""

    cloud = "gcp"

    @property
    def storage_kinds(self) -> frozenset[str]:
        """Filestore plus the Kubernetes-provisioned kinds."""
        return STORAGE.kinds

    def storage_problems(self, index: int, volume: StorageSpec) -> list[Problem]:
        """Filestore tier names, then the tier's capacity bands."""
        return STORAGE.problems(index, volume) or filestore_problems(index, volume)

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
        out += dropped_placement(d, DROPPED_PLACEMENT)
        return out

    def deploy(self, name: str, plan: ClusterPlan, opts: pulumi.ResourceOptions | None) -> CloudComponent:
        """A :class:`~slonk_infra.clouds.gcp.GcpInfrastructure`."""
        from slonk_infra.clouds.gcp.infrastructure import GcpInfrastructure

        return GcpInfrastructure(name, plan, opts)


RULES = GcpRules()
