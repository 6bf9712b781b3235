"""The ``aws`` target: EFS and FSx for Lustre, what an EKS deployment needs declared, and its defaults.

FSx for Lustre sizes are checked against the deployment type's accepted capacities in the catalog
(``data/storage.yaml``): a size FSx would not accept is refused with the nearest one it would,
rather than rounded silently.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from slonk_infra.catalog import load_catalog
from slonk_infra.clouds.rules import KUBERNETES_STORAGE, StorageRules, dropped_placement
from slonk_infra.clouds.target import CloudTarget, PolicyTypes
from slonk_infra.declaration.errors import Problem

if TYPE_CHECKING:
    from slonk_infra.declaration.model import ClusterDeclaration, StorageSpec

STORAGE = StorageRules(
    kinds=frozenset({"efs", "fsx-lustre"}) | KUBERNETES_STORAGE,
    tiers={"fsx-lustre": ("SCRATCH_1", "SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2")},
    default_tiers={"fsx-lustre": "PERSISTENT_2"},
)
# Why EKS cannot honour an explicit compactPlacement: true (see rules.dropped_placement).
DROPPED_PLACEMENT = {
    "reservation": (
        "a capacity reservation or Capacity Block already fixes where its instances run, and a cluster "
        "placement group it was not made in makes launches fail"
    ),
    "cpu": "CPU node groups get no launch template, so no cluster placement group",
}
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"


def fsx_problems(index: int, volume: StorageSpec) -> list[Problem]:
    """Capacity of an FSx for Lustre volume against its deployment type (catalog ``storage.yaml``)."""
    if volume.kind != "fsx-lustre":
        return []
    name = (volume.tier or STORAGE.default_tiers["fsx-lustre"]).upper()
    deployment = load_catalog().storage.fsx_lustre.deployment_types.get(name)
    if deployment is None or deployment.accepts(volume.capacity_gib):
        return []
    sizes = ", ".join(str(s) for s in deployment.sizes_gib)
    return [
        Problem(
            f"storage[{index}].capacityGib",
            f"{volume.capacity_gib} GiB is not an FSx for Lustre {name} capacity: {sizes} or a multiple of "
            f"{deployment.step_gib} GiB; nearest: {deployment.round_up(volume.capacity_gib)} GiB",
        )
    ]


def storage_problems(index: int, volume: StorageSpec) -> list[Problem]:
    """FSx deployment types, then the capacities the type accepts."""
    return STORAGE.problems(index, volume) or fsx_problems(index, volume)


def declaration_problems(declaration: ClusterDeclaration) -> list[Problem]:
    """Region, and placement EKS cannot honour (the tagged declaration requires the ``aws`` block)."""
    d = declaration
    out: list[Problem] = []
    if not d.region:
        out.append(Problem("region", "required on aws"))
    out += dropped_placement(d, DROPPED_PLACEMENT)
    return out


def provider_region_problems(declaration: ClusterDeclaration, config: Mapping[str, Any]) -> list[Problem]:
    """The stack's ``aws:region`` (where the default AWS provider creates everything) is the declared region.

    The adapter makes no provider of its own, so a stack whose ``aws:region`` says otherwise would build the
    cluster there while the kubeconfig and the checks speak of the declared one. Unset (the environment's
    AWS_REGION decides) is not checked.
    """
    configured = config.get("aws:region")
    if configured and configured != declaration.region:
        return [
            Problem(
                "region",
                f"{declaration.region!r} but the stack's aws:region is {configured!r}, where the AWS provider "
                "would create everything; make the two the same",
            )
        ]
    return []


TARGET = CloudTarget(
    cloud="aws",
    sdk_modules=("pulumi_aws",),
    extra="aws",
    deployer="slonk_infra.clouds.aws.infrastructure:AwsInfrastructure",
    storage_kinds=STORAGE.offered,
    storage_problems=storage_problems,
    declaration_problems=declaration_problems,
    stack_config_problems=provider_region_problems,
    # A cloud load balancer may be given a public address: SSH stays private unless ranges are declared.
    restrict_load_balancers=True,
    policy_types=PolicyTypes(
        managed_clusters=("aws:eks/cluster:Cluster", NODE_GROUP),
        stateful={
            "aws:efs/fileSystem:FileSystem": "EFS file system",
            "aws:fsx/lustreFileSystem:LustreFileSystem": "FSx for Lustre file system",
            "aws:fsx/openZfsFileSystem:OpenZfsFileSystem": "FSx for OpenZFS file system",
        },
        accelerator_pools={NODE_GROUP: "eks-node-group"},
    ),
)
