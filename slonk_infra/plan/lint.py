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
from slonk_infra.plan.model import Partition, WorkerGroup

# An image tag that names its contents, as this project's images are tagged (``25.05.3-cuda12.8.1``):
# a Slurm release (YY.MM, two digits each) at the start or after a dash, and a CUDA version after "cuda".
TAG_CUDA = re.compile(r"cuda[-_]?(\d+\.\d+)(?:\.\d+)?", re.IGNORECASE)
TAG_SLURM = re.compile(r"(?:^|[-_])(?:slurm[-_]?)?v?(\d{2}\.\d{2})(?:\.\d+)?(?=$|[-_])", re.IGNORECASE)


def image_tag(reference: str) -> str:
    """The tag of an image reference (``repo:tag@sha256:...`` -> ``tag``), empty without one."""
    name = reference.split("@", 1)[0].rsplit("/", 1)[-1]
    return name.split(":", 1)[1] if ":" in name else ""


def tag_versions(reference: str) -> tuple[str | None, str | None]:
    """The (Slurm, CUDA) major.minor versions the image's tag names, each None where it names none."""
    tag = image_tag(reference)
    cuda = TAG_CUDA.search(tag)
    slurm = TAG_SLURM.search(TAG_CUDA.sub("", tag))
    return (slurm.group(1) if slurm else None, cuda.group(1) if cuda else None)


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
                f"{image.slurm_version!r} but the image tag {image_tag(image.reference)!r} names Slurm {slurm}: "
                "what is rendered follows slurmVersion, so set it to the image's release (or use the image "
                "built for it)",
            )
        )
    if cuda is not None and cuda != _major_minor(image.cuda_version):
        out.append(
            Problem(
                "image.cudaVersion",
                f"{image.cuda_version!r} but the image tag {image_tag(image.reference)!r} names CUDA {cuda}; "
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


def location_warnings(decl: ClusterDeclaration, groups: Sequence[WorkerGroup], catalog: Catalog) -> list[Problem]:
    """The declared zone (GCP) or region (AWS) is not where the documentation lists a group's GPU or TPU.

    A warning, not an error: the lists in ``regions.yaml`` are a dated copy and clouds add zones.
    """
    locations = catalog.locations
    where = decl.zone if decl.cloud == "gcp" else decl.region
    if not where:
        return []
    field = "zone" if decl.cloud == "gcp" else "region"
    out = []
    seen: set[str] = set()
    for g in groups:
        accelerator = g.machine.accelerator.type if g.machine.accelerator else None
        if accelerator is None or g.machine.name in seen:
            continue
        seen.add(g.machine.name)
        offered = locations.offering(decl.cloud, g.machine.name, accelerator)
        if offered is None:
            continue
        source, places = offered
        if where not in places:
            shown = ", ".join(sorted(places)) or "(none)"
            out.append(
                Problem(
                    field,
                    f"{where!r} is not where {g.machine.name} ({accelerator}, pool {g.base!r}) is offered as of "
                    f"{locations.as_of}: {shown} (source: {source}); node pools there fail to get machines",
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


def declaration_warnings(
    decl: ClusterDeclaration, groups: Sequence[WorkerGroup], partitions: Sequence[Partition], catalog: Catalog
) -> tuple[Problem, ...]:
    """Every warning of a valid declaration, in field order of the checks (the same order every run)."""
    return (
        *location_warnings(decl, groups, catalog),
        *image_warnings(decl),
        *partition_warnings(decl, groups, partitions),
        *user_warnings(decl),
        *directory_warnings(decl),
        *aws_warnings(decl),
    )
