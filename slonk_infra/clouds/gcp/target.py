"""The ``gcp`` target: Filestore tiers and sizes, what a GKE deployment needs declared, and its defaults.

Filestore sizes are checked per tier against the bands in the catalog (``data/storage.yaml``, from
Filestore's service-tier table): each tier has its own minimum, maximum and step. The GPU NIC range
and the maintenance window are checked here too (see :func:`gpu_network_problems`,
:func:`maintenance_problems`), and the login Service of a private LoadBalancer is made internal
(:meth:`GcpTarget.login_service_annotations`).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import TYPE_CHECKING

from slonk_infra.catalog import load_catalog
from slonk_infra.clouds.rules import KUBERNETES_STORAGE, StorageRules, dropped_placement
from slonk_infra.clouds.target import CloudTarget, PolicyTypes
from slonk_infra.declaration.errors import Problem

if TYPE_CHECKING:
    from slonk_infra.declaration.model import ClusterDeclaration, GcpSpec, StorageSpec

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
# GKE: an internal passthrough Network Load Balancer is requested with this Service annotation
# (https://cloud.google.com/kubernetes-engine/docs/how-to/internal-load-balancing).
INTERNAL_LB_ANNOTATION = "networking.gke.io/load-balancer-type"
# Subnets of an auto mode VPC ("default") are carved from 10.128.0.0/9
# (https://cloud.google.com/vpc/docs/subnets#ip-ranges); the GPU NIC subnets must stay out of it.
AUTO_MODE_RANGE = ipaddress.ip_network("10.128.0.0/9")
# The GPU NIC subnets are /(prefix + 5) slots of gcp.gpuNetworkRange (docs/clouds.md, "GPU networks"):
# /19 leaves /24 subnets, 254 nodes per GPU NIC subnet.
GPU_RANGE_PREFIXES = (8, 19)
# GKE: "at least 48 hours of maintenance availability in a 32-day rolling window", counted only in
# windows of four hours or more (https://cloud.google.com/kubernetes-engine/docs/how-to/maintenance-windows-and-exclusions).
MIN_MAINTENANCE_HOURS = 48
FULL_WEEKS_IN_32_DAYS = 4
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


def gpu_network_problems(spec: GcpSpec) -> list[Problem]:
    """``gcp.gpuNetworkRange``: a private IPv4 range from /8 to /19, clear of an auto mode VPC's subnets."""
    field = "gcp.gpuNetworkRange"
    net = ipaddress.ip_network(spec.gpu_network_range)  # a CIDR already (the field's validator)
    low, high = GPU_RANGE_PREFIXES
    if not isinstance(net, ipaddress.IPv4Network) or not net.is_private:
        return [
            Problem(field, f"{spec.gpu_network_range!r} is not a private IPv4 range (RFC 1918), e.g. 192.168.0.0/16")
        ]
    if not low <= net.prefixlen <= high:
        return [
            Problem(
                field,
                f"{spec.gpu_network_range!r} is a /{net.prefixlen}; give /{low} to /{high}: the GPU NIC subnets are its "
                f"/{net.prefixlen + 5} slots, at least /24 each",
            )
        ]
    if isinstance(spec.network, str) and spec.network == "default" and net.overlaps(AUTO_MODE_RANGE):
        return [
            Problem(
                field,
                f"{spec.gpu_network_range!r} overlaps {AUTO_MODE_RANGE}, where the auto mode network 'default' has its "
                "subnets (https://cloud.google.com/vpc/docs/subnets#ip-ranges); use e.g. 192.168.0.0/16",
            )
        ]
    return []


def maintenance_problems(spec: GcpSpec) -> list[Problem]:
    """``gcp.maintenance``: GKE's 48 hours of availability in 32 days (4-hour windows or longer)."""
    m = spec.maintenance
    hours = m.window_hours * len(set(m.days)) * FULL_WEEKS_IN_32_DAYS
    if hours >= MIN_MAINTENANCE_HOURS:
        return []
    return [
        Problem(
            "gcp.maintenance",
            f"windowHours {m.window_hours} on {len(set(m.days))} day(s) a week gives {hours} hours in 32 days; GKE "
            f"needs at least {MIN_MAINTENANCE_HOURS} (https://cloud.google.com/kubernetes-engine/docs/how-to/"
            "maintenance-windows-and-exclusions): add days or hours",
        )
    ]


def declaration_problems(declaration: ClusterDeclaration) -> list[Problem]:
    """Region, and a zone wherever there is GPU or TPU capacity (the tagged declaration requires the ``gcp`` block);
    the GPU NIC range and the maintenance window."""
    d = declaration
    out: list[Problem] = []
    if not d.region:
        out.append(Problem("region", "required on gcp"))
    if not d.zone and (d.pools or d.tpu_slices):
        out.append(Problem("zone", "required on gcp: GPU and TPU capacity is zonal"))
    out += dropped_placement(d, DROPPED_PLACEMENT)
    if d.gcp is not None:
        out += gpu_network_problems(d.gcp)
        out += maintenance_problems(d.gcp)
    return out


@dataclass(frozen=True)
class GcpTarget(CloudTarget):
    """The gcp descriptor: GKE's own login Service annotations."""

    def login_service_annotations(self, internal: bool) -> dict[str, str]:
        """An internal passthrough Network Load Balancer when the login Service admits only private ranges."""
        return {INTERNAL_LB_ANNOTATION: "Internal"} if internal else {}


TARGET = GcpTarget(
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
        stateful={
            "gcp:filestore/instance:Instance": "Filestore instance",
            # slurmdbd's database (slurm.accounting.database.kind: cloud) and the database in it.
            "gcp:sql/databaseInstance:DatabaseInstance": "Cloud SQL instance",
            "gcp:sql/database:Database": "Cloud SQL database",
        },
        accelerator_pools={NODE_POOL: "gke-node-pool", CLUSTER: "gke-cluster"},
        tpu_slice_pools=(NODE_POOL,),
    ),
)
