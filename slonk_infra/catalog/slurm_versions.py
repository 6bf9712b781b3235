"""Slurm releases and the ones where something the renderers and checks depend on changed.

Every version switch of the library is a named constant here, read where the switch is made, so
the release notes behind a rendered key are found in one place.
"""

from __future__ import annotations

from dataclasses import dataclass


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


# The oldest release the library renders for.
MIN_SUPPORTED = SlurmVersion(22, 5)
# First release with the topology/block plugin (slurm.conf TopologyPlugin=topology/block, BlockSizes).
TOPOLOGY_BLOCK = SlurmVersion(23, 11)
# First release that reads topology.yaml (and a partition's Topology=).
TOPOLOGY_YAML = SlurmVersion(25, 5)
# 23.11 removed CommunicationParameters=NoAddrCache; slurmctld logs an error ("defunct, please
# remove it") when it is still set.
NO_ADDR_CACHE_REMOVED = SlurmVersion(23, 11)
# First release with PrologFlags=ForceRequeueOnFail (CHANGELOG/slurm-23.02.md: "automatically requeue batch
# jobs on Prolog failures regardless of the job --requeue setting"). 22.05.8 refuses to start on it:
# "error: Invalid PrologFlag: ForceRequeueOnFail", "fatal: PrologFlags invalid: Alloc,ForceRequeueOnFail".
FORCE_REQUEUE_ON_FAIL = SlurmVersion(23, 2)
# First release with SlurmctldParameters=reconfig_on_restart (CHANGELOG/slurm-25.11.md: "making a restart
# of slurmctld ... trigger a reconfigure of all slurmd and sackd daemons"). Before it, a configless slurmd
# keeps the files it fetched when it started until someone runs `scontrol reconfigure`.
RECONFIG_ON_RESTART = SlurmVersion(25, 11)
# From 23.11 `scontrol reconfigure` restarts slurmctld in a new process (scontrol(1)). Seen on 24.11.5 in the
# container tier: the restarted process returns idle nodes to their configured FUTURE state and pushes the
# files to none of them, so a reconfigure after a controller restart reaches no configless slurmd.
RECONFIGURE_RESTARTS = SlurmVersion(23, 11)
# How long slurmd lets one HealthCheckProgram run go before stopping it: a fixed 60 s up to 25.11
# (src/slurmd/slurmd/slurmd.c of 25.11.7); from 26.05 slurm.conf's HealthCheckTimeout, 60 s by default
# (src/common/read_config.c, DEFAULT_HEALTH_CHECK_TIMEOUT), which every daemon requires below
# HealthCheckInterval ("error: HealthCheckTimeout (60) must be less than HealthCheckInterval (60), please
# review", seen on 26.05.5 with a 60-s interval). slurm.conf leaves the key out: from 25.11 a restarted
# slurmctld pushes its files to every slurmd, also to a 25.11 one not yet replaced in an upgrade, which
# does not know the key.
HEALTH_CHECK_TIMEOUT_S = 60
# Before 24.05, slurmrestd loads every openapi plugin it ships unless SLURMRESTD_OPENAPI_PLUGINS (or -s) names
# some, and each slurmdbd one (dbv0.0.NN, 23.11's slurmdbd) calls fatal() without AccountingStorageType=
# accounting_storage/slurmdbd: "slurm_openapi_p_init: slurm not configured with slurmdbd" (seen on 22.05.8 in
# the container tier: slurmrestd exited at every start). From 24.05 they log "refusing to load" and step aside
# (src/slurmrestd/plugins/openapi/slurmdbd/api.c).
RESTD_SKIPS_SLURMDBD_PLUGINS = SlurmVersion(24, 5)
# The slurmctld openapi plugins each release before that ships (src/plugins/openapi/ of 22.05 and 23.02,
# src/slurmrestd/plugins/openapi/ of 23.11): what slurmrestd loads where there is no slurmdbd.
_RESTD_SLURMCTLD_PLUGINS = {
    SlurmVersion(22, 5): ("openapi/v0.0.36", "openapi/v0.0.37", "openapi/v0.0.38"),
    SlurmVersion(23, 2): ("openapi/v0.0.37", "openapi/v0.0.38", "openapi/v0.0.39"),
    SlurmVersion(23, 11): ("openapi/v0.0.38", "openapi/v0.0.39", "openapi/slurmctld"),
}


def restd_slurmctld_plugins(version: SlurmVersion) -> tuple[str, ...] | None:
    """The openapi plugins slurmrestd must be limited to without slurmdbd, or None where it needs no limit.

    A release between two listed ones (not a Slurm release name) takes the older one's list.
    """
    if version >= RESTD_SKIPS_SLURMDBD_PLUGINS:
        return None
    known = [v for v in _RESTD_SLURMCTLD_PLUGINS if v <= version]
    return _RESTD_SLURMCTLD_PLUGINS[max(known)] if known else None
