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
