"""What a node lets pods request, per cloud, as the clouds document it (``data/nodes.yaml``, ``data/daemonsets.yaml``).

A node's memory capacity is the kernel's MemTotal, below the machine's nominal size; each cloud
then reserves memory and CPU for the kubelet and the runtime and keeps an eviction threshold, and
the per-node system pods (DaemonSets) take their requests from what is left. These models hold
the published formulas and figures; every figure in the YAML carries its source.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from slonk_infra.catalog.types import Cloud, PoolKind

if TYPE_CHECKING:
    from slonk_infra.catalog.machines import MachineType


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class MemoryTier(_Frozen):
    """A slice of capacity and the fraction of it reserved (GKE)."""

    up_to_mib: int | None = Field(description="Upper end of the slice in MiB; None for everything above.")
    fraction: float = Field(ge=0, le=1, description="Fraction of the slice reserved.")


class CpuTier(_Frozen):
    """A range of cores and the fraction of each core reserved."""

    up_to_cores: int | None = Field(description="Upper end of the range in cores; None for every core above.")
    fraction: float = Field(ge=0, le=1, description="Fraction of each core in the range reserved.")


class SmallNode(_Frozen):
    """GKE's flat reservation for very small machines."""

    below_mib: int = Field(gt=0, description="Capacity below which the flat figure applies.")
    reserved_mib: int = Field(ge=0, description="Memory reserved on such a node.")


class MaxPodsCap(_Frozen):
    """EKS managed node groups' cap on maxPods by vCPU count."""

    below_vcpus: int = Field(gt=0, description="Machines with fewer vCPUs get the small cap.")
    small: int = Field(gt=0, description="Cap below below_vcpus.")
    large: int = Field(gt=0, description="Cap from below_vcpus up.")


class ReservedMemory(_Frozen):
    """How a cloud reserves memory for the kubelet and the runtime."""

    basis: Literal["memtotal", "max_pods", "none"] = Field(description="What the formula is applied to.")
    small_node: SmallNode | None = Field(default=None, description="GKE: flat figure for tiny machines.")
    tiers: tuple[MemoryTier, ...] = Field(default=(), description="GKE: tiered fractions of capacity.")
    per_pod_mib: int = Field(default=0, ge=0, description="EKS: MiB reserved per schedulable pod.")
    base_mib: int = Field(default=0, ge=0, description="EKS: fixed MiB reserved.")
    max_pods_cap: MaxPodsCap | None = Field(default=None, description="EKS: maxPods the formula uses.")
    source: str = Field(description="Where the formula comes from.")


class ReservedCpu(_Frozen):
    """How a cloud reserves CPU for the kubelet and the runtime."""

    tiers: tuple[CpuTier, ...] = Field(description="Tiered fractions of each core.")
    source: str = Field(description="Where the formula comes from.")


class NodeModel(_Frozen):
    """One cloud's node allocatable model."""

    cloud: Cloud = Field(description="The cloud.")
    reserved_memory: ReservedMemory = Field(description="Memory reservation formula.")
    reserved_cpu: ReservedCpu = Field(description="CPU reservation formula.")
    eviction_hard_mib: int = Field(ge=0, description="Hard eviction threshold memory.available in MiB.")
    eviction_source: str = Field(description="Where the eviction threshold comes from.")
    default_memtotal_gap: float = Field(ge=0, lt=1, description="Nominal-to-capacity gap for unmeasured machines.")
    default_memtotal_gap_estimate: bool = Field(description="Whether that default is an estimate.")
    default_memtotal_gap_source: str = Field(description="Where that default comes from.")
    gap_margin: float = Field(ge=0, lt=1, description="Added to a measured gap.")
    gap_margin_estimate: bool = Field(default=True, description="Whether the margin is an estimate.")

    def memtotal_gap(self, machine: MachineType) -> float:
        """Fraction of the machine's nominal memory the kubelet does not report."""
        if machine.memtotal_gap is not None:
            return machine.memtotal_gap + self.gap_margin
        return self.default_memtotal_gap

    def capacity_mib(self, machine: MachineType) -> int:
        """Memory capacity the kubelet reports (MemTotal), conservatively rounded down."""
        return math.floor(machine.memory_gib * 1024 * (1 - self.memtotal_gap(machine)))

    def max_pods(self, machine: MachineType) -> int:
        """maxPods the EKS reservation formula uses for ``machine``: the larger of the ENI formula and the cap.

        The reservation grows with maxPods, so the larger figure is the safe one whichever the node
        group ends up with (the ENI-limited default, or the managed node group cap).
        """
        cap = self.reserved_memory.max_pods_cap
        if cap is None:
            return 0
        capped = cap.small if machine.vcpus < cap.below_vcpus else cap.large
        return max(capped, machine.eni_max_pods or 0)

    def reserved_memory_mib(self, capacity_mib: int, max_pods: int = 0) -> int:
        """kube-reserved memory (without the eviction threshold) on a node of this capacity and maxPods."""
        rule = self.reserved_memory
        if rule.basis == "max_pods":
            return rule.per_pod_mib * max_pods + rule.base_mib
        if rule.basis == "none":
            return 0
        if rule.small_node is not None and capacity_mib < rule.small_node.below_mib:
            return rule.small_node.reserved_mib
        reserved, low = 0.0, 0
        for tier in rule.tiers:
            high = capacity_mib if tier.up_to_mib is None else min(capacity_mib, tier.up_to_mib)
            if high > low:
                reserved += (high - low) * tier.fraction
            low = tier.up_to_mib if tier.up_to_mib is not None else capacity_mib
            if low >= capacity_mib:
                break
        return math.ceil(reserved)

    def reserved_cpu_m(self, vcpus: int) -> int:
        """kube-reserved CPU in millicores on a node of ``vcpus``."""
        reserved, low = 0.0, 0
        for tier in self.reserved_cpu.tiers:
            high = vcpus if tier.up_to_cores is None else min(vcpus, tier.up_to_cores)
            if high > low:
                reserved += (high - low) * 1000 * tier.fraction
            low = tier.up_to_cores if tier.up_to_cores is not None else vcpus
            if low >= vcpus:
                break
        return math.ceil(reserved)

    def allocatable_memory_mib(self, machine: MachineType) -> int:
        """Node allocatable memory: capacity - kube-reserved - eviction threshold."""
        capacity = self.capacity_mib(machine)
        return capacity - self.reserved_memory_mib(capacity, self.max_pods(machine)) - self.eviction_hard_mib

    def allocatable_cpu_m(self, machine: MachineType) -> int:
        """Node allocatable CPU in millicores."""
        return machine.vcpus * 1000 - self.reserved_cpu_m(machine.vcpus)


class DaemonSetPod(_Frozen):
    """A per-node system pod and its effective request."""

    name: str = Field(description="DaemonSet or static pod name.")
    cpu_m: int = Field(ge=0, description="CPU request in millicores.")
    memory_mib: int = Field(ge=0, description="Memory request in MiB.")
    source: str = Field(description="Where the figure comes from.")
    estimate: bool = Field(default=False, description="True when the figure is a judgement, not published or measured.")


class Applies(_Frozen):
    """Which nodes a DaemonSet profile covers."""

    cloud: Cloud = Field(description="Cloud of the node.")
    kind: PoolKind | None = Field(default=None, description="Only nodes of this kind.")
    fabric: str | None = Field(default=None, description="Only machines with this fabric.")
    storage: str | None = Field(default=None, description="Only when a shared filesystem of this kind is declared.")


class DaemonSetProfile(_Frozen):
    """A group of per-node system pods that run on the nodes it applies to."""

    name: str = Field(description="Profile name.")
    applies: Applies = Field(description="Which nodes run these pods.")
    pods: tuple[DaemonSetPod, ...] = Field(description="The pods.")

    def covers(self, machine: MachineType, storage_kinds: frozenset[str]) -> bool:
        """Whether every node of ``machine`` runs this profile's pods."""
        a = self.applies
        return (
            a.cloud == machine.cloud
            and (a.kind is None or a.kind == machine.kind)
            and (a.fabric is None or a.fabric == machine.fabric)
            and (a.storage is None or a.storage in storage_kinds)
        )


class DaemonSetReservation(_Frozen):
    """What the system pods of one node request, with the pods it sums."""

    cpu_m: int = Field(description="Summed CPU requests in millicores.")
    memory_mib: int = Field(description="Summed memory requests in MiB.")
    pods: tuple[DaemonSetPod, ...] = Field(description="Every pod counted.")


def daemonset_reservation(
    profiles: dict[str, DaemonSetProfile], machine: MachineType, storage_kinds: frozenset[str] = frozenset()
) -> DaemonSetReservation:
    """Sum of every profile that applies to ``machine`` (with shared filesystems of ``storage_kinds``)."""
    pods = tuple(p for prof in profiles.values() if prof.covers(machine, storage_kinds) for p in prof.pods)
    return DaemonSetReservation(cpu_m=sum(p.cpu_m for p in pods), memory_mib=sum(p.memory_mib for p in pods), pods=pods)
