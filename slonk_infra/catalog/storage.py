"""Storage limits and classes (``data/storage.yaml``): Filestore tiers, FSx for Lustre, EFS, block StorageClasses.

Each cloud documents what capacity a filesystem accepts; these models answer "is this size
valid, and if not, what is" so the plan can refuse a bad size before any resource is declared.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Band(_Frozen):
    """A capacity range in GiB and the unit it moves in."""

    min_gib: int = Field(gt=0, description="Smallest size.")
    max_gib: int = Field(gt=0, description="Largest size.")
    step_gib: int = Field(gt=0, description="Sizes are min_gib + k * step_gib.")

    def accepts(self, gib: int) -> bool:
        """Whether ``gib`` is a size of this band."""
        return self.min_gib <= gib <= self.max_gib and (gib - self.min_gib) % self.step_gib == 0

    def describe(self) -> str:
        """The band in words, e.g. ``1024..9984 GiB in steps of 256``."""
        step = "" if self.step_gib == 1 else f" in steps of {self.step_gib}"
        return f"{self.min_gib}..{self.max_gib} GiB{step}"


class FilestoreTier(_Frozen):
    """A Filestore service tier's capacity bands."""

    bands: tuple[Band, ...] = Field(description="Capacity bands.")
    note: str = Field(description="The figures as the documentation states them.")

    def accepts(self, gib: int) -> bool:
        """Whether Filestore accepts ``gib`` in this tier."""
        return any(b.accepts(gib) for b in self.bands)

    def nearest(self, gib: int) -> int | None:
        """Smallest accepted size of at least ``gib``, or None above the largest."""
        for band in self.bands:
            if gib <= band.max_gib:
                size = max(gib, band.min_gib)
                steps = -(-(size - band.min_gib) // band.step_gib)
                size = band.min_gib + steps * band.step_gib
                if size <= band.max_gib:
                    return size
        return None


class Filestore(_Frozen):
    """Filestore tiers and aliases."""

    source: str = Field(description="Where the figures come from.")
    tiers: dict[str, FilestoreTier] = Field(description="Tier name -> bands.")
    aliases: dict[str, str] = Field(description="Alias -> tier the API treats it as.")
    aliases_source: str = Field(description="Where the aliases come from.")

    def tier(self, name: str) -> FilestoreTier | None:
        """The tier called ``name`` (or its alias)."""
        key = name.upper()
        return self.tiers.get(self.aliases.get(key, key))


class FsxDeployment(_Frozen):
    """An FSx for Lustre deployment type's capacities and throughputs."""

    sizes_gib: tuple[int, ...] = Field(description="The small sizes accepted.")
    step_gib: int = Field(gt=0, description="Above the small sizes, whole multiples of this.")
    persistent: bool = Field(description="Persistent (replicated, backed up) or scratch.")
    throughputs: tuple[int, ...] = Field(description="PerUnitStorageThroughput values (MB/s/TiB).")

    def accepts(self, gib: int) -> bool:
        """Whether FSx accepts ``gib`` for this deployment type."""
        return gib in self.sizes_gib or (gib > max(self.sizes_gib) and gib % self.step_gib == 0)

    def round_up(self, gib: int) -> int:
        """Smallest accepted capacity of at least ``gib``."""
        for size in self.sizes_gib:
            if gib <= size:
                return size
        return -(-gib // self.step_gib) * self.step_gib


class FsxLustre(_Frozen):
    """FSx for Lustre deployment types."""

    source: str = Field(description="Where the figures come from.")
    deployment_types: dict[str, FsxDeployment] = Field(description="Deployment type -> limits.")


class EfsMode(_Frozen):
    """What an EFS throughput mode needs."""

    needs_performance_mode: str | None = Field(description="Performance mode it requires, if any.")
    needs_provisioned_mibps: bool = Field(description="Whether it needs provisioned_throughput_in_mibps.")


class Efs(_Frozen):
    """EFS throughput modes."""

    source: str = Field(description="Where the modes come from.")
    throughput_modes: dict[str, EfsMode] = Field(description="Mode -> requirements.")
    capacity_note: str = Field(description="What a declared capacity means for EFS.")


class BlockClass(_Frozen):
    """The StorageClass single-writer claims name on one cloud."""

    name: str | None = Field(description="StorageClass name; None = the cluster default (local).")
    builtin: bool = Field(description="True when the cluster ships it; False when the adapter must create it.")
    provisioner: str | None = Field(default=None, description="CSI provisioner.")
    disk_type: str | None = Field(default=None, description="Disk type parameter.")
    addon: str | None = Field(default=None, description="AWS: EKS add-on that serves the provisioner.")
    source: str = Field(description="Where this comes from.")


class StorageFacts(_Frozen):
    """Everything in storage.yaml."""

    filestore: Filestore = Field(description="Filestore tiers.")
    fsx_lustre: FsxLustre = Field(description="FSx for Lustre.")
    efs: Efs = Field(description="EFS.")
    block_classes: dict[str, BlockClass] = Field(description="cloud -> block StorageClass.")
