"""What each Slurm release can do, so renderers never emit a key the declared version does not know."""

from __future__ import annotations

from dataclasses import dataclass

MIN_SUPPORTED = (22, 5)


@dataclass(frozen=True, order=True)
class SlurmVersion:
    """A Slurm release as (major, minor): 22.05 -> (22, 5)."""

    major: int
    minor: int

    @classmethod
    def parse(cls, text: str) -> SlurmVersion:
        """Parse ``25.05`` or ``25.05.3``."""
        major, minor = text.split(".")[:2]
        return cls(int(major), int(minor))

    def __str__(self) -> str:
        return f"{self.major}.{self.minor:02d}"

    def has(self, feature: str) -> bool:
        """True when this release supports ``feature`` (a key of :data:`FEATURES`)."""
        return self >= FEATURES[feature]


# Minimum release for each optional capability the renderers use (Slurm release notes / man pages).
FEATURES: dict[str, SlurmVersion] = {
    "topology/block": SlurmVersion(23, 11),
    "topology.yaml": SlurmVersion(25, 5),
    "partition Topology=": SlurmVersion(25, 5),
    "BlockSizes": SlurmVersion(23, 11),
    "SlurmctldParameters=enable_configless": SlurmVersion(20, 2),
    "cgroup/v2": SlurmVersion(22, 5),
    "AutoDetect=nvml": SlurmVersion(19, 5),
}


def minimum_for(feature: str) -> SlurmVersion:
    """The first release that has ``feature``."""
    return FEATURES[feature]
