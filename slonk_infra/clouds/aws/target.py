"""The ``aws`` target: EFS and FSx for Lustre, what an EKS deployment needs declared, and its defaults.

FSx for Lustre sizes are checked against the deployment type's accepted capacities in the catalog
(``data/storage.yaml``): a size FSx would not accept is refused with the nearest one it would,
rather than rounded silently.

The login Service's load balancer (the in-tree AWS cloud provider of EKS) is internal when every range
it admits is private; an internet-facing one needs public subnets, which ``aws.publicSubnetIds`` names
and which a public range without them is refused for. Capacity Block groups start empty: with the
operations controller off, the operator scales them up, and :func:`aws_warnings` says how.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from slonk_infra.catalog import load_catalog
from slonk_infra.clouds.rules import KUBERNETES_STORAGE, StorageRules, dropped_placement
from slonk_infra.clouds.target import CloudTarget, PolicyTypes
from slonk_infra.declaration.errors import Problem
from slonk_infra.declaration.networks import is_private_range

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
# The in-tree AWS load balancer controller (the one EKS runs for a Service of type LoadBalancer) makes an
# internal load balancer for any value but "false". Kubernetes docs, Service, "Internal load balancer"
# (kubernetes.io/docs/concepts/services-networking/service/#internal-load-balancer; kubernetes/website
# #15771 changed the example to "true"); cloud-provider-aws pkg/providers/v1/aws.go ServiceAnnotationLoadBalancerInternal.
INTERNAL_LB_ANNOTATION = "service.beta.kubernetes.io/aws-load-balancer-internal"
# Subnet discovery of load balancers: internal ones go to subnets tagged internal-elb, internet-facing ones
# to subnets tagged elb (EKS user guide, "Route TCP and UDP traffic with Network Load Balancers" /
# network-reqs "Subnet requirements"; docs.aws.amazon.com/eks/latest/userguide/network-load-balancing.html).
INTERNAL_ELB_TAG = "kubernetes.io/role/internal-elb"
PUBLIC_ELB_TAG = "kubernetes.io/role/elb"


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


def public_ranges(ranges: list[str] | None) -> list[str]:
    """The ranges that are not private networks (:func:`slonk_infra.declaration.networks.is_private_range`, the plan's
    rule for making the login load balancer internal)."""
    return [r for r in ranges or () if not is_private_range(r)]


def login_problems(declaration: ClusterDeclaration) -> list[Problem]:
    """A LoadBalancer login Service admitting a public range, with no public subnets to put it in.

    Such a load balancer is internet-facing; the in-tree controller places it in the subnets tagged
    ``kubernetes.io/role/elb``, and the declared private subnets never are. Without public subnets the
    Service never gets an address and its await fails the deploy.
    """
    d = declaration
    if d.aws is None or d.login.service_type != "LoadBalancer" or d.aws.public_subnet_ids:
        return []
    public = public_ranges(d.login.load_balancer_source_ranges)
    if not public:
        return []
    return [
        Problem(
            "login.loadBalancerSourceRanges",
            f"{', '.join(repr(r) for r in public)} {'is a public range' if len(public) == 1 else 'are public ranges'}: "
            "an internet-facing load balancer needs public subnets on EKS; set aws.publicSubnetIds (subnets of "
            "the VPC routed to an internet gateway), or admit only private ranges for an internal load balancer",
        )
    ]


def declaration_problems(declaration: ClusterDeclaration) -> list[Problem]:
    """Region, placement EKS cannot honour, and a public login without public subnets (the tagged
    declaration requires the ``aws`` block)."""
    d = declaration
    out: list[Problem] = []
    if not d.region:
        out.append(Problem("region", "required on aws"))
    out += dropped_placement(d, DROPPED_PLACEMENT)
    out += login_problems(d)
    return out


def aws_warnings(declaration: ClusterDeclaration) -> list[Problem]:
    """What deploys on EKS but needs a person (warnings, :mod:`slonk_infra.plan.lint` style).

    - A Capacity Block pool with the operations controller off: its node group is created with desired
      size 0 (EKS: before the block is active its instances cannot launch), so someone must scale it up
      once the block is active; the message gives the command.
    - GPU pools and no ``zone``: they go to the Availability Zone of the first subnet, which must hold
      their reservation.
    """
    d = declaration
    out: list[Problem] = []
    if d.aws is None:
        return out
    for i, pool in enumerate(d.pools):
        if pool.reservation is not None and pool.reservation.capacity_block and not d.operations.owns_pool_sizes:
            out.append(
                Problem(
                    f"pools[{i}].reservation",
                    f"Capacity Block {pool.reservation.name!r}: node group {pool.name!r} is created with 0 nodes "
                    "and nothing scales it up (operations.enabled is false); once the block is active run "
                    f"`aws eks update-nodegroup-config --region {d.region} --cluster-name {d.name} "
                    f"--nodegroup-name {pool.name} --scaling-config desiredSize={pool.nodes}` (EKS ends it "
                    "40 minutes before the block does)",
                )
            )
    if d.zone is None and any(p.kind == "gpu" for p in d.pools):
        out.append(
            Problem(
                "zone",
                "unset: GPU node groups and FSx go to the Availability Zone of aws.subnetIds[0], which must be "
                "where their reservations are; set zone to say which",
            )
        )
    return out


@dataclass(frozen=True)
class AwsTarget(CloudTarget):
    """The EKS target: the shared descriptor, plus how the login load balancer is made internal."""

    def login_service_annotations(self, internal: bool) -> dict[str, str]:
        """``service.beta.kubernetes.io/aws-load-balancer-internal: "true"`` for a login admitting only private
        ranges; none for an internet-facing one (which needs ``aws.publicSubnetIds``, see :func:`login_problems`)."""
        return {INTERNAL_LB_ANNOTATION: "true"} if internal else {}


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


TARGET = AwsTarget(
    cloud="aws",
    sdk_modules=("pulumi_aws",),
    extra="aws",
    deployer="slonk_infra.clouds.aws.infrastructure:AwsInfrastructure",
    storage_kinds=STORAGE.offered,
    storage_problems=storage_problems,
    declaration_problems=declaration_problems,
    stack_config_problems=provider_region_problems,
    declaration_warnings=aws_warnings,
    # A cloud load balancer may be given a public address: SSH stays private unless ranges are declared.
    restrict_load_balancers=True,
    policy_types=PolicyTypes(
        managed_clusters=("aws:eks/cluster:Cluster", NODE_GROUP),
        stateful={
            "aws:efs/fileSystem:FileSystem": "EFS file system",
            "aws:fsx/lustreFileSystem:LustreFileSystem": "FSx for Lustre file system",
            "aws:fsx/openZfsFileSystem:OpenZfsFileSystem": "FSx for OpenZFS file system",
            # slurmdbd's database (slurm.accounting.database.kind: cloud); an Aurora cluster where a user's
            # program makes one.
            "aws:rds/instance:Instance": "RDS DB instance",
            "aws:rds/cluster:Cluster": "Aurora DB cluster",
        },
        accelerator_pools={NODE_GROUP: "eks-node-group"},
    ),
)
