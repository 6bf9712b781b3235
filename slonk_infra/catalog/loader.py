"""The machine catalog: machine types, accelerators and TPU generations, loaded from packaged YAML.

Everything hardware-shaped that the library derives (Slurm CPUs/memory/GRES, Kubernetes GPU/TPU
limits, node labels, EFA counts, TPU slice sizes) comes from here, and so do the cloud facts the
plan checks against: node allocatable models and DaemonSet reservations (:mod:`.nodes`),
GPU fabrics (:mod:`.fabrics`), storage limits and classes (:mod:`.storage`) and
cluster-level settings (:mod:`.platform`), regions, zones and where accelerators are offered
(:mod:`.regions`); the types themselves are in :mod:`.machines`. The data lives in ``slonk_infra/data/*.yaml``
with the source of every figure; these modules only type and index it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import yaml

from slonk_infra.catalog.fabrics import Fabric
from slonk_infra.catalog.machines import MachineType, TpuGeneration
from slonk_infra.catalog.nodes import DaemonSetProfile, DaemonSetReservation, NodeModel, daemonset_reservation
from slonk_infra.catalog.platform import Platform, TpuMultihostEnv
from slonk_infra.catalog.regions import Locations
from slonk_infra.catalog.storage import StorageFacts
from slonk_infra.catalog.types import CLOUDS, Cloud, PoolKind

__all__ = ["CLOUDS", "Catalog", "Cloud", "MachineType", "PoolKind", "TpuGeneration", "load_catalog"]


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
    locations: Locations

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
    # libyaml's loader where PyYAML has it (the pinned wheels do): the catalog parses in a tenth of the time,
    # to the same data.
    data: dict[str, Any] = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
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
        locations=Locations.model_validate(_load_yaml("regions.yaml")),
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
