"""The ``gcp`` target: Filestore tiers and sizes, what a GKE deployment needs declared, and its defaults.

Filestore sizes are checked per tier against the bands in the catalog (``data/storage.yaml``, from
Filestore's service-tier table): each tier has its own minimum, maximum and step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from slonk_infra.catalog import load_catalog
from slonk_infra.clouds.rules import KUBERNETES_STORAGE, StorageRules, dropped_placement
from slonk_infra.clouds.target import CloudTarget, PolicyTypes
from slonk_infra.declaration.errors import Problem

if TYPE_CHECKING:
    from slonk_infra.declaration.model import ClusterDeclaration, StorageSpec

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
CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"


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


def storage_problems(index: int, volume: StorageSpec) -> list[Problem]:
    """Filestore tier names, then the tier's capacity bands."""
    return STORAGE.problems(index, volume) or filestore_problems(index, volume)


def declaration_problems(declaration: ClusterDeclaration) -> list[Problem]:
    """Region, and a zone wherever there is GPU or TPU capacity (the tagged declaration requires the ``gcp`` block)."""
    d = declaration
    out: list[Problem] = []
    if not d.region:
        out.append(Problem("region", "required on gcp"))
    if not d.zone and (d.pools or d.tpu_slices):
        out.append(Problem("zone", "required on gcp: GPU and TPU capacity is zonal"))
    out += dropped_placement(d, DROPPED_PLACEMENT)
    return out


TARGET = CloudTarget(
    cloud="gcp",
    sdk_modules=("pulumi_gcp",),
    extra="gcp",
    deployer="slonk_infra.clouds.gcp.infrastructure:GcpInfrastructure",
    storage_kinds=STORAGE.offered,
    storage_problems=storage_problems,
    declaration_problems=declaration_problems,
    # A cloud load balancer may be given a public address: SSH stays private unless ranges are declared.
    restrict_load_balancers=True,
    policy_types=PolicyTypes(
        managed_clusters=(CLUSTER, NODE_POOL),
        stateful={"gcp:filestore/instance:Instance": "Filestore instance"},
        accelerator_pools={NODE_POOL: "gke-node-pool", CLUSTER: "gke-cluster"},
        tpu_slice_pools=(NODE_POOL,),
    ),
)
