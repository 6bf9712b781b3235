"""Warnings: what deploys but is probably a mistake, each naming its field.

Errors (:mod:`slonk_infra.plan.checks`) stop a deploy that would fail; these do not, because the
declaration may be right (a user who only runs batch jobs needs no SSH key) or because the fact behind
them goes stale (which zones offer a GPU type). The CLI prints them on their own channel and
``--strict`` turns them into errors for CI; ``Cluster`` logs them as Pulumi warnings.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from slonk_infra.catalog import Catalog
from slonk_infra.declaration.errors import Problem
from slonk_infra.declaration.model import ClusterDeclaration
from slonk_infra.plan.checks import nearest
from slonk_infra.plan.model import Partition, WorkerGroup

# An image tag that names its contents. A Slurm release is read from an explicit "slurm" token
# ("slurm-24.11.5-cuda12.6", "ubuntu-24.04-slurm-25.05"), or, in a repository whose name says slurm
# ("slonk/slurm-cuda", "slinkyproject/slurmd"), from a leading YY.MM whose month is one Slurm releases in
# (this project's "25.05.3-cuda12.8.1"). Anything else is not read: NGC's monthly "25.01-py3", an OS's
# "ubuntu-22.04" look the same and say nothing about Slurm.
TAG_CUDA = re.compile(r"cuda[-_]?v?(\d+\.\d+)(?:\.\d+)?", re.IGNORECASE)
TAG_SLURM = re.compile(r"slurm[-_]?v?(\d{2}\.\d{2})(?:\.\d+)?(?=$|[-_])", re.IGNORECASE)
TAG_LEADING = re.compile(r"^v?(\d{2})\.(\d{2})(?:\.\d+)?(?=$|[-_])")
SLURM_RELEASE_MONTHS = frozenset({"02", "05", "08", "11"})


def image_tag(reference: str) -> str:
    """The tag of an image reference (``repo:tag@sha256:...`` -> ``tag``), empty without one."""
    name = reference.split("@", 1)[0].rsplit("/", 1)[-1]
    return name.split(":", 1)[1] if ":" in name else ""


def tag_versions(reference: str) -> tuple[str | None, str | None]:
    """The (Slurm, CUDA) major.minor versions the image's tag names, each None where it names none."""
    tag = image_tag(reference)
    repository = reference.split("@", 1)[0].removesuffix(f":{tag}") if tag else reference
    cuda = TAG_CUDA.search(tag)
    slurm = TAG_SLURM.search(tag)
    version = slurm.group(1) if slurm else None
    if version is None and "slurm" in repository.rsplit("/", 1)[-1].lower():
        leading = TAG_LEADING.match(tag)
        if leading and leading.group(2) in SLURM_RELEASE_MONTHS:
            version = f"{leading.group(1)}.{leading.group(2)}"
    return (version, cuda.group(1) if cuda else None)


def _major_minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def image_warnings(decl: ClusterDeclaration) -> list[Problem]:
    """The image's tag names another Slurm or CUDA release than ``image.slurmVersion`` / ``cudaVersion``.

    What is rendered follows ``slurmVersion`` (config keys, plugins); an image carrying another release
    makes slurmctld refuse keys or workers run a mismatched slurmd, so the two must agree. Only a tag that
    names versions is compared: a digest alone says nothing.
    """
    image = decl.image
    slurm, cuda = tag_versions(image.reference)
    out = []
    if slurm is not None and slurm != _major_minor(image.slurm_version):
        out.append(
            Problem(
                "image.slurmVersion",
                f"{image.slurm_version!r} but the image tag {image_tag(image.reference)!r} looks like Slurm {slurm}: "
                "what is rendered follows slurmVersion, so set it to the image's release (or use the image "
                "built for it)",
            )
        )
    if cuda is not None and cuda != _major_minor(image.cuda_version):
        out.append(
            Problem(
                "image.cudaVersion",
                f"{image.cuda_version!r} but the image tag {image_tag(image.reference)!r} looks like CUDA {cuda}; "
                "set cudaVersion to the image's CUDA release",
            )
        )
    return out


def user_warnings(decl: ClusterDeclaration) -> list[Problem]:
    """A declared user without an SSH key cannot log in to the login pods (sshd takes keys only)."""
    return [
        Problem(
            f"users[{i}].sshAuthorizedKeys",
            f"user {user.name!r} has no SSH key and cannot log in (the login pods take keys only); add the "
            "contents of their id_ed25519.pub",
        )
        for i, user in enumerate(decl.users)
        if not user.ssh_authorized_keys
    ]


def partition_warnings(
    decl: ClusterDeclaration, groups: Sequence[WorkerGroup], partitions: Sequence[Partition]
) -> list[Problem]:
    """A pool or TPU slice no partition names: its machines are paid for and no job can reach them."""
    if decl.slurm.partitions is None:
        return []  # the default partitions hold every node
    used = {name for p in partitions for name in p.groups}
    out = []
    sources = [(f"pools[{i}]", p.name) for i, p in enumerate(decl.pools)]
    sources += [(f"tpuSlices[{i}]", s.name) for i, s in enumerate(decl.tpu_slices)]
    for path, base in sources:
        members = [g.name for g in groups if g.base == base]
        if members and not used.intersection(members):
            out.append(
                Problem(
                    path,
                    f"{base!r} is in no partition of slurm.partitions: its nodes are billed but no job can run on "
                    "them; name it in a partition's pools (or use '*')",
                )
            )
    return out


# How to ask the cloud itself, printed with a location warning (the catalog's lists are a dated copy).
ASK_GCP_GPU = "gcloud compute machine-types list --filter='name={machine}' --format='value(zone)'"
ASK_GCP_TPU = "gcloud compute tpus accelerator-types list --zone={zone}"
ASK_AWS = (
    "aws ec2 describe-instance-type-offerings --location-type availability-zone-id "
    "--filters Name=instance-type,Values={machine} --region {region}"
)


def unlisted_location_warnings(decl: ClusterDeclaration, catalog: Catalog) -> list[Problem]:
    """A well-formed region or zone the catalog's list does not have (a typo, or opened since), and an AI zone.

    The names that cannot be right are errors (:func:`slonk_infra.plan.checks.check_location`); these may be.
    """
    locations = catalog.locations
    known = locations.regions(decl.cloud)
    if not known or not decl.region:
        return []
    out = []
    if decl.region not in known:
        hint = nearest(decl.region, known)
        out.append(
            Problem(
                "region",
                f"{decl.region!r} is not in the catalog's {decl.cloud} regions (as of {locations.as_of}){hint} "
                "(a region opened since is fine)",
            )
        )
    elif _unlisted_zone(decl, locations.zones(decl.cloud, decl.region)):
        listed = ", ".join(locations.zones(decl.cloud, decl.region))
        out.append(
            Problem(
                "zone",
                f"{decl.zone!r} is not in the catalog's zones of {decl.region} (as of {locations.as_of}): {listed}",
            )
        )
    if decl.cloud == "gcp" and decl.zone and "-ai" in decl.zone:
        out.append(
            Problem(
                "zone",
                f"{decl.zone!r} is an AI zone: the cluster's system pool and node locations, and a zonal Filestore, "
                "go there too, and Google advises other workloads run in the region's standard zones",
            )
        )
    return out


def _unlisted_zone(decl: ClusterDeclaration, listed: list[str]) -> bool:
    """A zone named like one of the region's (GCP zones, AWS Availability Zone names) that the list lacks;
    AWS Local Zones and AZ IDs are not in the lists, so not judged."""
    zone, region = decl.zone or "", decl.region or ""
    if not zone.startswith(region) or zone in listed:
        return False
    return decl.cloud == "gcp" or len(zone) == len(region) + 1


def location_warnings(decl: ClusterDeclaration, groups: Sequence[WorkerGroup], catalog: Catalog) -> list[Problem]:
    """The declared zone (GCP) or region (AWS) is not where the catalog lists a group's GPU or TPU.

    A warning, not an error: the lists in ``regions.yaml`` are a dated copy and clouds add zones. Silent for a
    pool consuming a reservation (the reservation is the proof) and where a list does not cover the zone.
    """
    locations = catalog.locations
    where = decl.zone if decl.cloud == "gcp" else decl.region
    if not where or not decl.region or decl.region not in locations.regions(decl.cloud):
        return []  # an unknown region has its own warning; the lists say nothing about it
    if decl.cloud == "gcp" and where not in locations.zones("gcp", decl.region):
        return []  # an unlisted zone has its own warning
    field = "zone" if decl.cloud == "gcp" else "region"
    by_machine: dict[str, list[WorkerGroup]] = {}
    for g in groups:
        if g.machine.accelerator is not None and g.reservation is None:
            by_machine.setdefault(g.machine.name, []).append(g)
    out = []
    for machine, members in by_machine.items():
        accelerator = members[0].machine.accelerator.type if members[0].machine.accelerator else None
        offered = locations.offering(decl.cloud, machine, accelerator, where)
        if offered is None or where in offered[1]:
            continue
        source, places = offered
        pools = ", ".join(sorted({repr(g.base) for g in members}))
        if decl.cloud == "gcp":
            nearby = sorted(z for z in places if z.startswith(f"{decl.region}-"))
            listed = f"in {decl.region}: {', '.join(nearby)}" if nearby else f"none in {decl.region}"
            ask = (ASK_GCP_TPU if members[0].kind == "tpu" else ASK_GCP_GPU).format(machine=machine, zone=where)
        else:
            listed = f"{len(places)} regions, not {decl.region}"
            ask = ASK_AWS.format(machine=machine, region=decl.region)
        out.append(
            Problem(
                field,
                f"{where!r} is not where the catalog (as of {locations.as_of}) lists {machine} ({accelerator}, "
                f"pool {pools}): {listed}; the node pool may get no machines there. Ask the cloud: {ask} "
                f"(source: {source})",
            )
        )
    return out


def aws_warnings(decl: ClusterDeclaration) -> list[Problem]:
    """A created EKS cluster with no admin principal: nobody, this program included, reaches its API."""
    aws = getattr(decl, "aws", None)
    if aws is None or not decl.kubernetes.create or aws.admin_role_arns:
        return []
    return [
        Problem(
            "aws.adminRoleArns",
            "empty, and the cluster creator gets no admin access (EKS API authentication mode): nobody, "
            "including this program's Kubernetes provider, can reach the cluster API; name your role's ARN",
        )
    ]


def directory_warnings(decl: ClusterDeclaration) -> list[Problem]:
    """``directory`` is validated and rendered to sssd.conf, but the pods run no SSSD yet."""
    if decl.directory is None:
        return []
    return [
        Problem(
            "directory",
            "accepted but not deployed yet: the pods run no SSSD, so directory users cannot log in or run "
            "jobs; declare the people under users",
        )
    ]


def scale_in_warnings(decl: ClusterDeclaration) -> list[Problem]:
    """GPU/CPU pools on a cloud without the operations controller: lowering ``nodes`` resizes the cloud's
    pool directly, and GKE's managed instance group or EKS's Auto Scaling group removes machines of its own
    choosing, busy ones included. With operations enabled the controller removes only machines whose node
    runs no worker pod and whose Slurm node runs no job (docs/node-lifecycle.md, "Scale down")."""
    if decl.cloud not in ("gcp", "aws") or decl.operations.owns_pool_sizes or not decl.pools:
        return []
    field = "operations.enabled" if not decl.operations.enabled else "operations.cloudActions"
    return [
        Problem(
            field,
            f"false with GPU/CPU pools on {decl.cloud}: lowering nodes removes arbitrary machines (busy ones "
            "included); enable operations (with cloudActions) for safe scale-in",
        )
    ]


# The GKE cluster settings GPUDirect pods need, which the library sets only on a cluster it creates.
GKE_GPUDIRECT_FABRICS = ("gpudirect-tcpxo", "gpudirect-rdma")


def gpudirect_warnings(decl: ClusterDeclaration, groups: Sequence[WorkerGroup]) -> list[Problem]:
    """GPUDirect pools on a GKE cluster the library did not create: multi-networking, Dataplane V2 and
    Workload Identity are cluster settings it cannot turn on there, and without multi-networking the
    pods' GPU NICs never attach (GKE "Set up multi-network support for Pods")."""
    if decl.cloud != "gcp" or decl.kubernetes.create:
        return []
    wired = sorted(g.name for g in groups if g.machine.fabric in GKE_GPUDIRECT_FABRICS)
    if not wired:
        return []
    return [
        Problem(
            "kubernetes.create",
            f"false with GPUDirect pools ({', '.join(wired)}): the existing cluster must already have "
            "multi-networking, Dataplane V2 and Workload Identity enabled, or the pods' GPU NICs never attach",
        )
    ]


def declaration_warnings(
    decl: ClusterDeclaration, groups: Sequence[WorkerGroup], partitions: Sequence[Partition], catalog: Catalog
) -> tuple[Problem, ...]:
    """Every warning of a valid declaration, in field order of the checks (the same order every run)."""
    return (
        *unlisted_location_warnings(decl, catalog),
        *location_warnings(decl, groups, catalog),
        *image_warnings(decl),
        *partition_warnings(decl, groups, partitions),
        *user_warnings(decl),
        *directory_warnings(decl),
        *aws_warnings(decl),
        *scale_in_warnings(decl),
        *gpudirect_warnings(decl, groups),
    )
