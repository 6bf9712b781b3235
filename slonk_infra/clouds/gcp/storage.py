"""One Filestore instance as a component: the shared filesystem GKE pods mount through the Filestore CSI
driver. Stateful: ``protect``, ``retain_on_delete`` and Filestore's own deletion protection."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_gcp as gcp

from slonk_infra import tokens
from slonk_infra.binding import VolumeSource
from slonk_infra.declaration.model import StorageSpec

FILESTORE_DEFAULT_TIER = "ZONAL"
# Tiers whose instance is regional; every other tier lives in one zone.
FILESTORE_REGIONAL_TIERS = frozenset({"REGIONAL", "ENTERPRISE"})
# Tiers served over NFSv4.1 here (the SDK allows it for these and HIGH_SCALE_SSD).
FILESTORE_NFS41_TIERS = frozenset({"ZONAL", "REGIONAL", "ENTERPRISE"})
FILESTORE_CSI_DRIVER = "filestore.csi.storage.gke.io"


def filestore_share(volume: str) -> str:
    """Filestore file share name of a volume: letters, digits and underscores, at most 16 characters."""
    return volume.replace("-", "_")[:16]


def filestore_location(tier: str, region: str, zone: str | None) -> str:
    """Zone of a zonal Filestore tier, region of a regional one."""
    if tier in FILESTORE_REGIONAL_TIERS:
        return region
    if zone is None:
        raise ValueError(f"Filestore tier {tier} is zonal: set the declaration's zone")
    return zone


@dataclass(frozen=True)
class GcpSharedStorageArgs:
    """Inputs of one Filestore volume."""

    volume: StorageSpec
    """The declared volume (kind ``filestore``, capacity, tier)."""
    cluster_name: str
    """Cluster name; the instance is called ``<cluster>-<volume>``."""
    project: pulumi.Input[str]
    """GCP project."""
    region: str
    """Region (regional tiers live there)."""
    zone: str | None
    """Zone (zonal tiers live there)."""
    network: pulumi.Input[str]
    """VPC network the instance serves."""
    child_prefix: str = ""
    """Prefix of the children's logical names (default: the component's name)."""


class GcpSharedStorage(pulumi.ComponentResource):
    """A Filestore instance; ``source`` is the PersistentVolume source the Slurm layer binds."""

    instance: gcp.filestore.Instance
    source: VolumeSource

    def __init__(self, name: str, args: GcpSharedStorageArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(tokens.GCP_SHARED_STORAGE, name, None, opts)
        self._args = args
        self._prefix = args.child_prefix or name
        self.source = self._filestore()
        self.register_outputs({"instanceName": self.instance.name})

    def _filestore(self) -> VolumeSource:
        vol = self._args.volume
        tier = (vol.tier or FILESTORE_DEFAULT_TIER).upper()
        location = filestore_location(tier, self._args.region, self._args.zone)
        share = filestore_share(vol.name)
        nfs41 = tier in FILESTORE_NFS41_TIERS
        instance = gcp.filestore.Instance(
            f"{self._prefix}-filestore-{vol.name}",
            gcp.filestore.InstanceArgs(
                name=f"{self._args.cluster_name}-{vol.name}",
                project=self._args.project,
                location=location,
                tier=tier,
                protocol="NFS_V4_1" if nfs41 else None,
                file_shares=gcp.filestore.InstanceFileSharesArgs(name=share, capacity_gb=vol.capacity_gib),
                networks=[gcp.filestore.InstanceNetworkArgs(network=self._args.network, modes=["MODE_IPV4"])],
                deletion_protection_enabled=True,
                deletion_protection_reason="Shared Slurm filesystem; managed by slonk-infra",
            ),
            opts=pulumi.ResourceOptions(parent=self, protect=True, retain_on_delete=True),
        )
        self.instance = instance
        attributes: dict[str, pulumi.Input[str]] = {
            "ip": instance.networks.apply(_first_ip),
            "volume": share,
        }
        if nfs41:
            # The CSI driver mounts NFSv3 unless the volume says otherwise.
            attributes["fileProtocol"] = "NFS_V4_1"
        pv_source = {
            "csi": {
                "driver": FILESTORE_CSI_DRIVER,
                "volumeHandle": pulumi.Output.concat("modeInstance/", location, "/", instance.name, "/", share),
                "volumeAttributes": attributes,
            }
        }
        return VolumeSource(name=vol.name, pv_source=pv_source, depends_on=(instance,))


def field_of(value: Any, name: str, wire: str) -> Any:
    """A field of an SDK output object, or of the plain dict a mock or older SDK hands back."""
    if hasattr(type(value), name):
        return getattr(value, name)
    return value.get(name, value.get(wire))


def _first_ip(networks: Sequence[Any] | None) -> str:
    """First IPv4 address of a Filestore instance (its only one, with one network)."""
    if not networks:
        raise ValueError("Filestore instance has no network")
    addresses = field_of(networks[0], "ip_addresses", "ipAddresses")
    if not addresses:
        raise ValueError("Filestore instance has no IP address")
    return str(addresses[0])
