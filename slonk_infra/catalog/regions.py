"""Regions and zones (``data/regions.yaml``): where each cloud is, and where its accelerators are offered.

Two different strengths of fact, used two ways by the plan:

- a region's zones change rarely and a wrong one always fails a deploy, so a misspelt region or a zone
  outside its region is refused;
- which zones offer a GPU or TPU type changes every few months, and the catalog's copy goes stale, so a
  zone the copy does not list for the pool's accelerator is a warning (``--strict`` refuses it in CI),
  never a hard stop for a zone the cloud has added since.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

# How each cloud NAMES its locations (the shape, which does not go stale, unlike the lists):
# GCP regions "us-central1", zones "<region>-a" and AI zones "<region>-ai1a"
# (cloud.google.com/compute/docs/regions-zones, .../regions-zones/ai-zones); AWS regions "us-east-1",
# Availability Zones "<region>a", Local Zones "<region>-bos-1a", AZ IDs "use1-az4"
# (docs.aws.amazon.com/global-infrastructure/latest/regions/aws-availability-zones.html, .../az-ids.html).
GCP_REGION = re.compile(r"^[a-z]+-[a-z]+\d+$")
GCP_ZONE_SUFFIX = re.compile(r"^(?:[a-z]|ai\d+[a-z])$")
AWS_REGION = re.compile(r"^[a-z]{2}(?:-gov|-iso[a-z]?)?-[a-z]+-\d+$")
AWS_AZ_ID = re.compile(r"^[a-z]{2,5}\d+-az\d+$")
# An AZ ID's prefix is its region's name shortened: "us-east-1" -> "use1", "ap-southeast-2" -> "apse2".
_DIRECTIONS = {"north": "n", "south": "s", "east": "e", "west": "w", "central": "c"}


def az_id_prefix(region: str) -> str:
    """The AZ ID prefix of an AWS region (``use1`` for us-east-1, ``apne1`` for ap-northeast-1)."""
    geo, *words, number = region.split("-")
    short = ""
    for word in words:
        for direction in ("north", "south", "east", "west", "central"):
            word = word.replace(direction, _DIRECTIONS[direction])
        short += word
    return f"{geo}{short}{number}"


# Partitions whose ARNs are not "arn:aws:" (the AWS adapter's IAM policy ARNs are written for "aws").
AWS_OTHER_PARTITIONS = {"us-gov-": "aws-us-gov (GovCloud)", "cn-": "aws-cn (China)", "us-iso": "aws-iso"}


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ZoneOffering(_Frozen):
    """The zones (GCP) where the documentation lists one accelerator or machine series."""

    source: str = Field(description="Where the list comes from.")
    zones: tuple[str, ...] = Field(description="Full zone names, e.g. us-central1-a.")
    covers: tuple[str, ...] = Field(
        default=(), description="Zone name prefixes the list covers (empty: everywhere); elsewhere nothing is checked."
    )
    note: str | None = Field(default=None, description="What the source leaves unclear.")

    def covers_zone(self, zone: str) -> bool:
        """Whether the list speaks for ``zone`` at all."""
        return not self.covers or zone.startswith(self.covers)


class RegionOffering(_Frozen):
    """The regions (AWS) where the documentation lists one instance type or family."""

    source: str = Field(description="Where the list comes from.")
    regions: tuple[str, ...] = Field(description="Region names, e.g. us-east-1.")
    note: str | None = Field(default=None, description="What the source leaves unclear.")


class GcpLocations(_Frozen):
    """GCP regions with their zone suffixes, and the zones offering each accelerator."""

    regions_source: str = Field(description="Where the region list comes from.")
    regions: dict[str, tuple[str, ...]] = Field(description="Region -> zone suffixes (a, b, c, f).")
    zones_offering: dict[str, ZoneOffering] = Field(
        default_factory=dict, description="Accelerator type or machine type -> zones offering it."
    )


class AwsLocations(_Frozen):
    """AWS regions with their Availability Zone letters, and the regions offering each instance type."""

    regions_source: str = Field(description="Where the region list comes from.")
    regions: dict[str, tuple[str, ...]] = Field(description="Region -> AZ letters (a, b, c).")
    regions_offering: dict[str, RegionOffering] = Field(
        default_factory=dict, description="Instance type or family (g6e) -> regions offering it."
    )


class Locations(_Frozen):
    """Both clouds' locations, as of one date."""

    as_of: str = Field(description="The newest documentation date the lists were taken from.")
    gcp: GcpLocations
    aws: AwsLocations
    notes: tuple[str, ...] = Field(default=(), description="What the sources leave unclear.")

    def regions(self, cloud: str) -> dict[str, tuple[str, ...]]:
        """Region -> zone suffixes of ``cloud`` (empty for a cloud without regions, such as local)."""
        if cloud == "gcp":
            return self.gcp.regions
        if cloud == "aws":
            return self.aws.regions
        return {}

    def zones(self, cloud: str, region: str) -> list[str]:
        """Full zone names of ``region`` (``us-central1-a``, ``us-east-1a``)."""
        joiner = "-" if cloud == "gcp" else ""
        return [f"{region}{joiner}{suffix}" for suffix in self.regions(cloud).get(region, ())]

    def offering(
        self, cloud: str, machine: str, accelerator: str | None, where: str | None = None
    ) -> tuple[str, tuple[str, ...]] | None:
        """Where ``machine`` (with ``accelerator``) is offered: (source, zones on GCP / regions on AWS), or
        None when the catalog does not know, or its list does not cover ``where`` (then nothing is checked).

        A machine-type entry wins over an accelerator entry (GCP's two H100 series differ in zones); on
        AWS an instance type wins over its family (``g6e.xlarge`` over ``g6e``).
        """
        if cloud == "gcp":
            found = self.gcp.zones_offering.get(machine) or (
                self.gcp.zones_offering.get(accelerator) if accelerator else None
            )
            return (found.source, found.zones) if found and (where is None or found.covers_zone(where)) else None
        if cloud == "aws":
            found_aws = self.aws.regions_offering.get(machine) or self.aws.regions_offering.get(machine.split(".")[0])
            return (found_aws.source, found_aws.regions) if found_aws else None
        return None
