"""Capacity math: what one worker pod may request on its node, and what Slurm may promise jobs there.

The cloud's node model (:mod:`slonk_infra.catalog.nodes`, figures and sources in
``data/nodes.yaml``) gives the node's allocatable CPU and memory: capacity (the kernel's MemTotal,
below the nominal size) minus the kubelet reservation and the eviction threshold. The system pods
every node runs (``data/daemonsets.yaml``: device plugins, CSI nodes, logging, the fabric
installers) take their requests from that, and the worker pod's own sidecars take theirs from
the pod's share. What is left is slurmd's container request, and Slurm's ``RealMemory`` is exactly
that: a job can never be promised memory the pod cannot get. CPUs go to Slurm in whole cores; the
cores the node keeps are Slurm's ``CoreSpecCount``. A partition's ``DefMemPerCPU`` is the leanest
member node's RealMemory per schedulable CPU, so a job that names no memory never takes a whole
node's memory.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from slonk_infra.catalog import Catalog, MachineType, load_catalog


@dataclass(frozen=True)
class Request:
    """A CPU and memory request (a container, a DaemonSet pod, a sum of them)."""

    cpu_m: int
    memory_mib: int


# munged, the worker pod's native sidecar (its requests in the Slurm layer's pod spec).
MUNGED = Request(cpu_m=50, memory_mib=64)


@dataclass(frozen=True)
class NodeShape:
    """What one worker node gives Slurm, and what slurmd's container requests from Kubernetes.

    Slurm schedules ``(cores - core_spec) * threads_per_core`` CPUs and ``real_memory_mib``; the
    slurmd container requests exactly that, so the pod fits wherever the node model says it does.
    """

    sockets: int
    cores_per_socket: int
    threads_per_core: int
    core_spec: int
    real_memory_mib: int

    @property
    def cpus(self) -> int:
        """Schedulable CPUs (hardware threads) after core specialization; slurmd's CPU request."""
        return (self.sockets * self.cores_per_socket - self.core_spec) * self.threads_per_core

    @property
    def mem_per_cpu_mib(self) -> int:
        """RealMemory per schedulable CPU, rounded down."""
        return self.real_memory_mib // self.cpus


@dataclass(frozen=True)
class NodeBudget:
    """How one node's allocatable resources divide between system pods, the worker's sidecars and slurmd."""

    machine: MachineType
    capacity_mib: int
    allocatable: Request
    daemonsets: Request
    sidecars: Request

    @property
    def pod(self) -> Request:
        """What the worker pod as a whole may request: allocatable minus the system pods."""
        return Request(
            self.allocatable.cpu_m - self.daemonsets.cpu_m, self.allocatable.memory_mib - self.daemonsets.memory_mib
        )

    @property
    def slurmd(self) -> Request:
        """What slurmd's container may request: the pod's share minus its sidecars."""
        return Request(self.pod.cpu_m - self.sidecars.cpu_m, self.pod.memory_mib - self.sidecars.memory_mib)

    @property
    def shape(self) -> NodeShape:
        """Slurm's view of the node: whole cores slurmd's request covers, and its memory."""
        m = self.machine
        cores = m.sockets * m.cores_per_socket
        usable = max(0, min(cores, self.slurmd.cpu_m // (1000 * m.threads_per_core)))
        if usable < 1 or self.slurmd.memory_mib < 1:
            raise ValueError(
                f"{m.name}: nothing left for slurmd after the system pods and sidecars "
                f"(allocatable {self.allocatable}, system pods {self.daemonsets}, sidecars {self.sidecars})"
            )
        return NodeShape(
            sockets=m.sockets,
            cores_per_socket=m.cores_per_socket,
            threads_per_core=m.threads_per_core,
            core_spec=cores - usable,
            real_memory_mib=self.slurmd.memory_mib,
        )


def node_budget(
    machine: MachineType,
    storage_kinds: Iterable[str] = (),
    sidecars: Iterable[Request] = (MUNGED,),
    catalog: Catalog | None = None,
) -> NodeBudget:
    """The budget of one node of ``machine`` in a cluster with shared filesystems of ``storage_kinds``."""
    cat = catalog or load_catalog()
    model = cat.node_model(machine)
    ds = cat.daemonset_reservation(machine, frozenset(storage_kinds))
    extra = list(sidecars)
    return NodeBudget(
        machine=machine,
        capacity_mib=model.capacity_mib(machine),
        allocatable=Request(model.allocatable_cpu_m(machine), model.allocatable_memory_mib(machine)),
        daemonsets=Request(ds.cpu_m, ds.memory_mib),
        sidecars=Request(sum(s.cpu_m for s in extra), sum(s.memory_mib for s in extra)),
    )


def worker_sidecars(machine: MachineType, catalog: Catalog | None = None) -> tuple[Request, ...]:
    """What the worker pod runs beside slurmd on ``machine``: munged, and the fabric's daemon if it has one."""
    fabric = (catalog or load_catalog()).fabric_of(machine)
    if fabric is None or fabric.sidecar is None or not fabric.wired:
        return (MUNGED,)
    side = fabric.sidecar.requests
    return (MUNGED, Request(side.cpu_m, side.memory_mib))


def node_shape(machine: MachineType, storage_kinds: Iterable[str] = (), catalog: Catalog | None = None) -> NodeShape:
    """Slurm's view of one node of ``machine`` once Kubernetes, the system pods and the sidecars have taken their share."""
    return node_budget(machine, storage_kinds, worker_sidecars(machine, catalog), catalog).shape


def def_mem_per_cpu(shapes: Iterable[NodeShape]) -> int | None:
    """A partition's DefMemPerCPU: the leanest member node's memory per CPU; None for no members."""
    return min((s.mem_per_cpu_mib for s in shapes), default=None)


def fits(budget: NodeBudget, slurmd: Request) -> bool:
    """Whether a worker pod whose slurmd container requests ``slurmd`` fits beside the node's system pods."""
    pod = Request(slurmd.cpu_m + budget.sidecars.cpu_m, slurmd.memory_mib + budget.sidecars.memory_mib)
    return (
        pod.cpu_m + budget.daemonsets.cpu_m <= budget.allocatable.cpu_m
        and pod.memory_mib + budget.daemonsets.memory_mib <= budget.allocatable.memory_mib
    )
