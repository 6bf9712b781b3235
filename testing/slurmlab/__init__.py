"""Test harness that runs a real Slurm cluster on localhost from rendered config files.

The public API is what this module exports; tests and the benchmark use nothing else. See README.md
in this directory for the override list and the two flavors.

* :class:`SlurmLab`: the lab. ``with SlurmLab(files, flavor, workdir) as lab`` starts munged,
  slurmctld and the nodes; ``setup()`` + ``spawn_controller()`` start only what checks of the
  config itself need (``ping()`` says when slurmctld answers); ``stop()`` stops what the lab started.
* :func:`check_config`: whether slurmctld accepts a set of files, as a :class:`ConfigVerdict` with its output.
* Flavors: :data:`FLAVORS`, :func:`available_flavors`, :func:`missing_reason`, :func:`flavor_version`,
  :func:`require_flavor` (pytest: fail under CI, skip otherwise).
* The config rewrite on its own: :func:`render_lab_config` with a :class:`LabContext`, and the
  documented :data:`OVERRIDES`.
* :class:`RestD`: slurmrestd beside a running lab, with JWT auth.
* Accounting: :class:`SlurmDbd` (MariaDB and slurmdbd on this machine), :func:`accounting_lab` /
  :class:`AccountingLab` (a lab whose slurmctld records in it), :func:`require_dbd` (pytest: fail under CI).
* Processes and ports: :func:`leftover_pids`, :func:`leaked_mounts`, :func:`free_ports`.
"""

from .confrewrite import OVERRIDES, ConfigError, LabContext, Override, RenderedLab, render_lab_config
from .dbd import MEMBER, MEMBER_UID, OUTSIDER_UID, AccountingLab, SlurmDbd, accounting_lab, require_dbd
from .health import HEALTHCHECK_STANDIN, stand_in_health_check
from .lab import (
    CHROOT_ENV,
    FLAVORS,
    ConfigVerdict,
    Daemon,
    Flavor,
    SlurmLab,
    SlurmLabError,
    available_flavors,
    check_config,
    chroot_path,
    flavor_version,
    leaked_mounts,
    missing_reason,
)
from .procs import free_ports, leftover_pids
from .pytest_support import require_flavor
from .restd import RestD

__all__ = [
    "CHROOT_ENV",
    "FLAVORS",
    "HEALTHCHECK_STANDIN",
    "MEMBER",
    "MEMBER_UID",
    "OUTSIDER_UID",
    "OVERRIDES",
    "AccountingLab",
    "ConfigError",
    "ConfigVerdict",
    "Daemon",
    "Flavor",
    "LabContext",
    "Override",
    "RenderedLab",
    "RestD",
    "SlurmDbd",
    "SlurmLab",
    "SlurmLabError",
    "accounting_lab",
    "available_flavors",
    "check_config",
    "chroot_path",
    "flavor_version",
    "free_ports",
    "leaked_mounts",
    "leftover_pids",
    "missing_reason",
    "render_lab_config",
    "require_dbd",
    "require_flavor",
    "stand_in_health_check",
]
