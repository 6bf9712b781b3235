"""Capacity math: what one node of a machine type gives Slurm once Kubernetes has taken its share.

Kubernetes keeps part of every node for the kubelet, the container runtime, eviction headroom and the
DaemonSets every node runs (device plugin, CSI, logging). Slurm must not promise jobs what the worker
pod cannot get, so RealMemory and the schedulable cores are the VM's minus that share:

* memory: GKE's published reservation formula (the larger of the two clouds' defaults, so one figure
  is safe on both): 25% of the first 4 GiB, 20% of the next 4 GiB, 10% of the next 8 GiB, 6% of the
  next 112 GiB and 2% of the rest; plus 100 MiB eviction threshold; plus DaemonSet headroom of 5% of
  the node, at most 2 GiB. RealMemory = node memory - all of that.
* CPU: GKE's formula, 6% of the first core, 1% of the next, 0.5% of the next 2 and 0.25% of the rest
  (in millicores: 60 + 10 + 5 x 2 + 2.5 per core above 4), plus 250m per 16 vCPUs (at most 2000m)
  for DaemonSets, rounded up to whole cores and handed to Slurm as CoreSpecCount, Slurm's own
  mechanism for cores it must not schedule (at least one core is always left to jobs).
* DefMemPerCPU of a partition: the leanest member node's RealMemory per schedulable CPU, so a job
  that names no memory never takes a whole node's memory.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from slonk_infra.catalog import MachineType

MIB_PER_GIB = 1024
EVICTION_MIB = 100
DAEMONSET_MEMORY_SHARE = 20  # one twentieth (5%) of the node
DAEMONSET_MEMORY_MAX_MIB = 2048
# (MiB in the tier, share reserved): GKE's node memory reservation.
MEMORY_TIERS: tuple[tuple[float, float], ...] = (
    (4096, 0.25),
    (4096, 0.20),
    (8192, 0.10),
    (114688, 0.06),
    (math.inf, 0.02),
)
DAEMONSET_MILLICORES_PER_16_VCPUS = 250
DAEMONSET_MILLICORES_MAX = 2000


@dataclass(frozen=True)
class NodeShape:
    """What one worker node gives Slurm and asks of Kubernetes after the node's own reservations."""

    sockets: int
    """Slurm ``Sockets``."""
    cores_per_socket: int
    """Slurm ``CoresPerSocket``."""
    threads_per_core: int
    """Slurm ``ThreadsPerCore``."""
    core_spec: int
    """Slurm ``CoreSpecCount``: whole cores kept for Kubernetes, never given to jobs."""
    real_memory_mib: int
    """Slurm ``RealMemory``, and the worker pod's memory request."""

    @property
    def cpus(self) -> int:
        """Schedulable CPUs (hardware threads) after core specialization; the worker pod's CPU request."""
        return (self.sockets * self.cores_per_socket - self.core_spec) * self.threads_per_core

    @property
    def mem_per_cpu_mib(self) -> int:
        """RealMemory per schedulable CPU, rounded down."""
        return self.real_memory_mib // self.cpus


def kube_reserved_memory_mib(memory_mib: int) -> int:
    """Memory Kubernetes keeps on a node of ``memory_mib`` (GKE formula + eviction + DaemonSets)."""
    left, reserved = float(memory_mib), 0.0
    for size, share in MEMORY_TIERS:
        take = min(left, size)
        reserved += take * share
        left -= take
        if left <= 0:
            break
    daemonsets = min(DAEMONSET_MEMORY_MAX_MIB, memory_mib // DAEMONSET_MEMORY_SHARE)
    return math.ceil(reserved) + EVICTION_MIB + daemonsets


def kube_reserved_millicores(vcpus: int) -> int:
    """CPU Kubernetes keeps on a node (GKE formula) plus 250m per 16 vCPUs for DaemonSets (max 2000m)."""
    reserved = 60.0 + (10 if vcpus > 1 else 0) + 5 * min(max(vcpus - 2, 0), 2) + 2.5 * max(vcpus - 4, 0)
    daemonsets = min(DAEMONSET_MILLICORES_MAX, DAEMONSET_MILLICORES_PER_16_VCPUS * math.ceil(vcpus / 16))
    return math.ceil(reserved) + daemonsets


def node_shape(machine: MachineType) -> NodeShape:
    """Slurm's view of one node of ``machine`` once Kubernetes has taken its share."""
    cores = machine.sockets * machine.cores_per_socket
    core_ms = 1000 * machine.threads_per_core
    spec = min(cores - 1, math.ceil(kube_reserved_millicores(machine.vcpus) / core_ms))
    memory = machine.memory_gib * MIB_PER_GIB
    return NodeShape(
        sockets=machine.sockets,
        cores_per_socket=machine.cores_per_socket,
        threads_per_core=machine.threads_per_core,
        core_spec=spec,
        real_memory_mib=memory - kube_reserved_memory_mib(memory),
    )


def def_mem_per_cpu(shapes: Iterable[NodeShape]) -> int | None:
    """A partition's DefMemPerCPU: the leanest member node's memory per CPU; None for no members."""
    return min((s.mem_per_cpu_mib for s in shapes), default=None)
