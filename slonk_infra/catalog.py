"""The machine catalog: machine types, accelerators and TPU generations, loaded from packaged YAML.

Everything hardware-shaped that the library derives (Slurm CPUs/memory/GRES, Kubernetes GPU/TPU
limits, node labels, EFA counts, TPU slice sizes) comes from here, and so do the cloud facts the
plan checks against: node allocatable models and DaemonSet reservations (:mod:`catalog_nodes`),
GPU fabrics (:mod:`catalog_fabrics`), storage limits and classes (:mod:`catalog_storage`) and
cluster-level settings (:mod:`catalog_platform`). The data lives in ``slonk_infra/data/*.yaml``
with the source of every figure; these modules only type and index it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from slonk_infra.catalog_fabrics import Fabric
from slonk_infra.catalog_nodes import DaemonSetProfile, DaemonSetReservation, NodeModel, daemonset_reservation
from slonk_infra.catalog_platform import Platform, TpuMultihostEnv
from slonk_infra.catalog_storage import StorageFacts
from slonk_infra.catalog_types import CLOUDS, Cloud, FabricName, PoolKind

__all__ = ["CLOUDS", "Catalog", "Cloud", "MachineType", "PoolKind", "TpuGeneration", "load_catalog"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class NodeLabel(_Frozen):
    """A Kubernetes node label the cloud sets on every node of a machine type."""

    key: str = Field(description="Label key, e.g. cloud.google.com/gke-accelerator.")
    value: str = Field(description="Label value for this machine type.")


class Accelerator(_Frozen):
    """Accelerators attached to one VM."""

    type: str = Field(description="Portable accelerator name; also the Slurm GRES type (h100, tpu-v5p, ...).")
    count: int = Field(gt=0, description="GPUs or TPU chips per VM.")
    memory_gib: int = Field(gt=0, description="Memory per accelerator in GiB.")


class MachineType(_Frozen):
    """One cloud machine type and the figures Slurm and Kubernetes need about it."""

    name: str = Field(description="The cloud's machine / instance type name.")
    cloud: Cloud = Field(description="Cloud that offers it.")
    kind: PoolKind = Field(description="gpu, tpu or cpu.")
    vcpus: int = Field(gt=0, description="vCPUs of the VM.")
    sockets: int = Field(gt=0, description="CPU sockets.")
    threads_per_core: int = Field(gt=0, description="Hardware threads per core.")
    memory_gib: int = Field(gt=0, description="VM memory in GiB.")
    accelerator: Accelerator | None = Field(default=None, description="Attached GPUs / TPU chips.")
    label: NodeLabel | None = Field(default=None, description="Accelerator (or machine) node label.")
    gpu_nics: int = Field(default=0, ge=0, description="GPU-direct / RDMA NICs (GCP).")
    efa_interfaces: int = Field(default=0, ge=0, description="EFA interfaces the instance supports (AWS).")
    network_cards: int = Field(default=0, ge=0, description="Network cards (AWS), one EFA per card.")
    nvlink_domain: int = Field(default=1, gt=0, description="VMs per NVLink domain (GB200-class racks).")
    fabric: FabricName | None = Field(default=None, description="GPU-to-GPU network the pod must be wired to.")
    memtotal_gap: float | None = Field(
        default=None, ge=0, lt=1, description="Measured fraction of memory_gib the kubelet does not report."
    )
    memtotal_gap_source: str | None = Field(default=None, description="Where the measured gap comes from.")
    hyperdisk_only: bool = Field(default=False, description="GCP: attaches Hyperdisk only, no pd-balanced.")
    eni_max_pods: int | None = Field(default=None, gt=0, description="AWS: maxPods by the VPC CNI ENI formula.")
    preferred: bool = Field(default=False, description="Default target of a portable accelerator request.")
    source: str = Field(description="Where the figures come from.")

    @model_validator(mode="after")
    def _consistent(self) -> MachineType:
        if (self.kind == "cpu") != (self.accelerator is None):
            raise ValueError(f"{self.name}: kind {self.kind} does not match accelerator {self.accelerator}")
        if self.vcpus % (self.sockets * self.threads_per_core):
            raise ValueError(f"{self.name}: {self.vcpus} vCPUs do not split into {self.sockets} sockets")
        if (self.memtotal_gap is None) != (self.memtotal_gap_source is None):
            raise ValueError(f"{self.name}: a measured memtotal_gap needs memtotal_gap_source, and only then")
        if (self.cloud == "aws") != (self.eni_max_pods is not None):
            raise ValueError(f"{self.name}: eni_max_pods is required on AWS machines and only there")
        if self.fabric == "efa" and (self.cloud != "aws" or self.efa_interfaces == 0):
            raise ValueError(f"{self.name}: fabric efa needs an AWS machine with efa_interfaces")
        if (
            self.fabric is not None
            and self.fabric.startswith("gpudirect")
            and (self.cloud != "gcp" or not self.gpu_nics)
        ):
            raise ValueError(f"{self.name}: fabric {self.fabric} needs a GCP machine with gpu_nics")
        return self

    @property
    def cores_per_socket(self) -> int:
        """Physical cores per socket, as Slurm's CoresPerSocket."""
        return self.vcpus // (self.sockets * self.threads_per_core)


class TpuGeneration(_Frozen):
    """A TPU generation: its VM type and the slice topologies GKE accepts."""

    name: str = Field(description="Generation name (v4, v5e, v5p, v6e, tpu7x).")
    machine: str = Field(description="Multi-host VM machine type.")
    dims: Literal[2, 3] = Field(description="Torus dimensions of a slice topology.")
    max_chips: int = Field(gt=0, description="Largest slice in chips.")
    topologies: tuple[str, ...] = Field(description="Valid slice topologies, e.g. 4x4x4.")
    workload_policy: bool = Field(default=False, description="Multi-host slices need a workload policy.")
    source: str = Field(description="Where the figures come from.")


@dataclass(frozen=True)
class Catalog:
    """Indexed machine catalog and the cloud facts that go with it."""

    machines: dict[str, MachineType]
    tpus: dict[str, TpuGeneration]
    nodes: dict[Cloud, NodeModel]
    daemonsets: dict[str, DaemonSetProfile]
    fabrics: dict[str, Fabric]
    storage: StorageFacts
    platform: Platform
    tpu_env: TpuMultihostEnv

    def node_model(self, machine: MachineType) -> NodeModel:
        """The allocatable model of the machine's cloud."""
        return self.nodes[machine.cloud]

    def daemonset_reservation(
        self, machine: MachineType, storage_kinds: frozenset[str] = frozenset()
    ) -> DaemonSetReservation:
        """What the system pods on one node of ``machine`` request (with these shared filesystem kinds)."""
        return daemonset_reservation(self.daemonsets, machine, storage_kinds)

    def fabric_of(self, machine: MachineType) -> Fabric | None:
        """The GPU fabric the machine's pods must be wired to, if any."""
        return self.fabrics[machine.fabric] if machine.fabric else None

    def machines_on(self, cloud: Cloud) -> list[MachineType]:
        """Machine types a cloud offers."""
        return [m for m in self.machines.values() if m.cloud == cloud]

    def accelerator_types(self, cloud: Cloud | None = None) -> list[str]:
        """Portable accelerator names, optionally only those offered on one cloud."""
        return sorted(
            {
                m.accelerator.type
                for m in self.machines.values()
                if m.accelerator and m.kind == "gpu" and (cloud is None or m.cloud == cloud)
            }
        )

    def candidates(self, cloud: Cloud, accelerator: str, count: int) -> list[MachineType]:
        """Machines on ``cloud`` carrying exactly ``count`` of ``accelerator``, preferred first."""
        found = [
            m
            for m in self.machines_on(cloud)
            if m.accelerator and m.accelerator.type == accelerator and m.accelerator.count == count
        ]
        return sorted(found, key=lambda m: (not m.preferred, m.name))

    def counts_for(self, cloud: Cloud, accelerator: str) -> list[int]:
        """Per-VM counts of ``accelerator`` available on ``cloud``."""
        return sorted(
            {
                m.accelerator.count
                for m in self.machines_on(cloud)
                if m.accelerator and m.accelerator.type == accelerator
            }
        )


def topology_chips(topology: str) -> int:
    """Chips in a TPU slice topology such as ``4x4x4``."""
    return math.prod(int(d) for d in topology.split("x"))


def tpu_vms(generation: TpuGeneration, topology: str, chips_per_vm: int) -> int:
    """VMs (= Kubernetes nodes = Slurm nodes) in one slice: chips / chips per VM."""
    chips = topology_chips(topology)
    if chips % chips_per_vm:
        raise ValueError(f"{generation.name} {topology}: {chips} chips is not a multiple of {chips_per_vm}")
    return chips // chips_per_vm


def _load_yaml(name: str) -> dict[str, Any]:
    text = resources.files("slonk_infra").joinpath("data").joinpath(name).read_text(encoding="utf-8")
    data: dict[str, Any] = yaml.safe_load(text)
    return data


@cache
def load_catalog() -> Catalog:
    """Load and validate the packaged catalog (cached: the data is immutable)."""
    machines = {
        name: MachineType.model_validate({"name": name, **body})
        for name, body in _load_yaml("machines.yaml")["machines"].items()
    }
    tpu_data = _load_yaml("tpus.yaml")
    tpus = {
        name: TpuGeneration.model_validate({"name": name, **body}) for name, body in tpu_data["generations"].items()
    }
    for gen in tpus.values():
        vm = machines[gen.machine]
        if vm.accelerator is None or vm.kind != "tpu":
            raise ValueError(f"TPU generation {gen.name}: machine {gen.machine} is not a TPU host")
        for topo in gen.topologies:
            if len(topo.split("x")) != gen.dims or topology_chips(topo) > gen.max_chips:
                raise ValueError(f"TPU generation {gen.name}: bad topology {topo}")
    nodes: dict[Cloud, NodeModel] = {
        cloud: NodeModel.model_validate({"cloud": cloud, **body})
        for cloud, body in _load_yaml("nodes.yaml")["clouds"].items()
    }
    daemonsets = {
        name: DaemonSetProfile.model_validate({"name": name, **body})
        for name, body in _load_yaml("daemonsets.yaml")["profiles"].items()
    }
    fabrics = {
        name: Fabric.model_validate({"name": name, **body})
        for name, body in _load_yaml("fabrics.yaml")["fabrics"].items()
    }
    catalog = Catalog(
        machines=machines,
        tpus=tpus,
        nodes=nodes,
        daemonsets=daemonsets,
        fabrics=fabrics,
        storage=StorageFacts.model_validate(_load_yaml("storage.yaml")),
        platform=Platform.model_validate(_load_yaml("platform.yaml")),
        tpu_env=TpuMultihostEnv.model_validate(tpu_data["multihost_env"]),
    )
    _cross_check(catalog)
    return catalog


def _cross_check(catalog: Catalog) -> None:
    """Fail on references that point nowhere: every fabric, floor and cloud must exist."""
    if set(catalog.nodes) != set(CLOUDS):
        raise ValueError(f"nodes.yaml must model every cloud {CLOUDS}, has {sorted(catalog.nodes)}")
    for m in catalog.machines.values():
        if m.fabric is not None and m.fabric not in catalog.fabrics:
            raise ValueError(f"{m.name}: fabric {m.fabric} is not in fabrics.yaml")
    for fabric in catalog.fabrics.values():
        for machine in fabric.min_gke:
            if catalog.machines.get(machine, None) is None or catalog.machines[machine].fabric != fabric.name:
                raise ValueError(f"fabrics.yaml {fabric.name}: {machine} is not a machine with that fabric")
        if fabric.wired and fabric.workload is None:
            raise ValueError(f"fabrics.yaml {fabric.name}: a wired fabric needs its workload section")
    for cloud in CLOUDS:
        if cloud not in catalog.storage.block_classes or cloud not in catalog.platform.clouds:
            raise ValueError(f"storage.yaml block_classes and platform.yaml clouds must cover {cloud}")
