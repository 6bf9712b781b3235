"""Test harness that runs a real Slurm cluster on localhost from rendered config files.

See README.md in this directory for the override list and the two flavors.
"""

from .confrewrite import OVERRIDES, ConfigError, Override
from .lab import (
    CHROOT_ENV,
    FLAVORS,
    Flavor,
    SlurmLab,
    SlurmLabError,
    available_flavors,
    check_rejected,
    chroot_path,
    flavor_version,
    leaked_mounts,
    missing_reason,
)
from .pytest_support import require_flavor

__all__ = [
    "CHROOT_ENV",
    "FLAVORS",
    "OVERRIDES",
    "ConfigError",
    "Flavor",
    "Override",
    "SlurmLab",
    "SlurmLabError",
    "available_flavors",
    "check_rejected",
    "chroot_path",
    "flavor_version",
    "leaked_mounts",
    "missing_reason",
    "require_flavor",
]
