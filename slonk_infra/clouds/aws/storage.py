"""One shared filesystem on AWS as a component: EFS (with a mount target per subnet) or FSx for Lustre.

Both are stateful: declared with ``protect`` and ``retain_on_delete``, so no update replaces them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from slonk_infra import tokens
from slonk_infra.binding import VolumeSource
from slonk_infra.declaration.model import StorageSpec

FSX_DEFAULT_DEPLOYMENT = "PERSISTENT_2"
# MB/s per TiB; PERSISTENT_1 SSD accepts 50/100/200, PERSISTENT_2 125/250/500/1000.
FSX_THROUGHPUT = {"PERSISTENT_1": 200, "PERSISTENT_2": 250}
EFS_CSI_DRIVER = "efs.csi.aws.com"
FSX_CSI_DRIVER = "fsx.csi.aws.com"


def fsx_storage_capacity(deployment: str, gib: int) -> int:
    """Smallest FSx for Lustre SSD capacity of at least ``gib`` that the deployment type accepts.

    1,200 and 2,400 GiB, then multiples of 3,600 GiB (SCRATCH_1) or 2,400 GiB (the others).
    """
    if gib <= 1200:
        return 1200
    if gib <= 2400:
        return 2400
    step = 3600 if deployment == "SCRATCH_1" else 2400
    return math.ceil(gib / step) * step


def mount_target_suffix(index: int, subnet: pulumi.Input[str]) -> str:
    """The end of an EFS mount target's logical name: its subnet id, or ``subnet<index>`` when the id is a
    Pulumi Output (a subnet the same program creates), whose value a resource name cannot wait for."""
    return subnet if isinstance(subnet, str) else f"subnet{index}"


@dataclass(frozen=True)
class AwsSharedStorageArgs:
    """Inputs of one AWS shared filesystem."""

    volume: StorageSpec
    """The declared volume (kind ``efs`` or ``fsx-lustre``, capacity, tier = FSx deployment type)."""
    subnet_ids: Sequence[pulumi.Input[str]]
    """EFS: one mount target per subnet (one subnet per AZ)."""
    security_group: pulumi.Input[str]
    """Security group admitting NFS / Lustre from the VPC."""
    tag_prefix: str = ""
    """Prefix of the ``Name`` tag (the cluster name)."""
    child_prefix: str = ""
    """Prefix of the children's logical names (default: the component's name)."""
    zone_subnet_id: pulumi.Input[str] | None = None
    """FSx: the subnet in the declared zone, the GPU groups' (None: the first of ``subnet_ids``)."""


class AwsSharedStorage(pulumi.ComponentResource):
    """An EFS or FSx for Lustre filesystem; ``source`` is the PersistentVolume source the Slurm layer binds."""

    filesystem: pulumi.CustomResource
    source: VolumeSource

    def __init__(self, name: str, args: AwsSharedStorageArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(tokens.AWS_SHARED_STORAGE, name, None, opts)
        self._args = args
        self._prefix = args.child_prefix or name
        vol = args.volume
        if vol.kind == "efs":
            self.source = self._efs()
        elif vol.kind == "fsx-lustre":
            self.source = self._fsx()
        else:
            raise ValueError(f"storage {vol.name!r}: kind {vol.kind!r} is not an AWS filesystem (efs, fsx-lustre)")
        self.register_outputs({"filesystemId": self.filesystem.id})

    def _tag(self) -> str:
        vol = self._args.volume.name
        return f"{self._args.tag_prefix}-{vol}" if self._args.tag_prefix else vol

    def _stateful(self) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(parent=self, protect=True, retain_on_delete=True)

    def _efs(self) -> VolumeSource:
        vol = self._args.volume
        fs = aws.efs.FileSystem(
            f"{self._prefix}-efs-{vol.name}",
            aws.efs.FileSystemArgs(
                encrypted=True,
                performance_mode="generalPurpose",
                throughput_mode="elastic",
                tags={"Name": self._tag()},
            ),
            opts=self._stateful(),
        )
        self.filesystem = fs
        # EFS allows one mount target per AZ; the declaration's subnets are one per AZ.
        targets = [
            aws.efs.MountTarget(
                f"{self._prefix}-efs-{vol.name}-{mount_target_suffix(i, subnet)}",
                aws.efs.MountTargetArgs(
                    file_system_id=fs.id, subnet_id=subnet, security_groups=[self._args.security_group]
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
            for i, subnet in enumerate(self._args.subnet_ids)
        ]
        pv_source = {"csi": {"driver": EFS_CSI_DRIVER, "volumeHandle": fs.id}}
        return VolumeSource(name=vol.name, pv_source=pv_source, depends_on=(fs, *targets))

    def _fsx(self) -> VolumeSource:
        vol = self._args.volume
        deployment = (vol.tier or FSX_DEFAULT_DEPLOYMENT).upper()
        persistent = deployment.startswith("PERSISTENT")
        fs = aws.fsx.LustreFileSystem(
            f"{self._prefix}-fsx-{vol.name}",
            aws.fsx.LustreFileSystemArgs(
                # One subnet (a string in this SDK): the GPU groups' subnet, so I/O stays in one AZ.
                subnet_ids=(
                    self._args.zone_subnet_id if self._args.zone_subnet_id is not None else self._args.subnet_ids[0]
                ),
                security_group_ids=[self._args.security_group],
                deployment_type=deployment,
                storage_capacity=fsx_storage_capacity(deployment, vol.capacity_gib),
                per_unit_storage_throughput=FSX_THROUGHPUT.get(deployment),
                metadata_configuration=(
                    aws.fsx.LustreFileSystemMetadataConfigurationArgs(mode="AUTOMATIC")
                    if deployment == "PERSISTENT_2"
                    else None
                ),
                file_system_type_version="2.15",
                data_compression_type="LZ4",
                # FSx has no deletion protection; a final backup is the cloud-side safety net.
                skip_final_backup=False if persistent else None,
                tags={"Name": self._tag()},
            ),
            opts=self._stateful(),
        )
        self.filesystem = fs
        pv_source = {
            "csi": {
                "driver": FSX_CSI_DRIVER,
                "volumeHandle": fs.id,
                "volumeAttributes": {"dnsname": fs.dns_name, "mountname": fs.mount_name},
            },
            "mountOptions": ["flock"],
        }
        return VolumeSource(name=vol.name, pv_source=pv_source, depends_on=(fs,))
