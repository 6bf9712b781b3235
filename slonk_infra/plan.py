"""Resolve a declaration against the catalog into a plan every renderer and component reads.

:func:`build_plan` is the one gate: it validates the raw stack config (shape with pydantic, then
everything that needs the catalog or the whole declaration) and returns a :class:`ClusterPlan`,
or raises :class:`~slonk_infra.errors.DeclarationError` listing every problem with its field path.
Nothing downstream re-derives a name, a count or a machine figure.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from slonk_infra import naming
from slonk_infra.catalog import Catalog, MachineType, load_catalog, tpu_vms
from slonk_infra.declaration import (
    ClusterDeclaration,
    PartitionSpec,
    PoolSpec,
    Reservation,
    StorageSpec,
    Taint,
    TpuSliceSpec,
)
from slonk_infra.errors import DeclarationError, Problem, choice, from_validation_error
from slonk_infra.slurm_versions import MIN_SUPPORTED, SlurmVersion, minimum_for

STORAGE_CLOUDS: dict[str, tuple[str, ...]] = {
    "filestore": ("gcp",),
    "efs": ("aws",),
    "fsx-lustre": ("aws",),
    "nfs-server": ("gcp", "aws", "local"),
    "nfs-export": ("gcp", "aws", "local"),
}
# Service tiers a volume's ``tier`` may name (Filestore tiers; FSx for Lustre deployment types).
STORAGE_TIERS: dict[str, tuple[str, ...]] = {
    "filestore": ("BASIC_HDD", "BASIC_SSD", "HIGH_SCALE_SSD", "ZONAL", "REGIONAL", "ENTERPRISE", "STANDARD", "PREMIUM"),
    "fsx-lustre": ("SCRATCH_1", "SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2"),
}
GPU_TAINT = Taint(key="nvidia.com/gpu", value="present", effect="NoSchedule")
TPU_TAINT = Taint(key="google.com/tpu", value="present", effect="NoSchedule")
POOL_LABEL = "slonk.dev/pool"


@dataclass(frozen=True)
class NodeShape:
    """What one worker node gives Slurm and asks of Kubernetes after the node's own reservations.

    Kubernetes keeps part of every node for the kubelet, the container runtime, eviction headroom and
    the DaemonSets every node runs (device plugin, CSI, logging). Slurm must not promise jobs what the
    worker pod cannot get, so RealMemory and the schedulable cores are the VM's minus that share. The
    memory share follows GKE's published reservation formula (the larger of the two clouds' defaults,
    so one figure is safe on both) plus DaemonSet headroom; CPU reservations are rounded up to whole
    cores and handed to Slurm as CoreSpecCount, Slurm's own mechanism for cores it must not schedule.
    """

    sockets: int
    cores_per_socket: int
    threads_per_core: int
    core_spec: int
    real_memory_mib: int

    @property
    def cpus(self) -> int:
        """Schedulable CPUs (hardware threads) after core specialization."""
        return (self.sockets * self.cores_per_socket - self.core_spec) * self.threads_per_core


def kube_reserved_memory_mib(memory_mib: int) -> int:
    """Memory Kubernetes keeps on a node of ``memory_mib`` (GKE formula + eviction + DaemonSets)."""
    tiers = [(4096, 0.25), (4096, 0.20), (8192, 0.10), (114688, 0.06), (math.inf, 0.02)]
    left, reserved = float(memory_mib), 0.0
    for size, share in tiers:
        take = min(left, size)
        reserved += take * share
        left -= take
        if left <= 0:
            break
    eviction = 100
    daemonsets = min(2048, memory_mib // 20)
    return math.ceil(reserved) + eviction + daemonsets


def kube_reserved_millicores(vcpus: int) -> int:
    """CPU Kubernetes keeps on a node (GKE formula) plus 250m per 16 vCPUs for DaemonSets (max 2000m)."""
    reserved = 60.0 + (10 if vcpus > 1 else 0) + 5 * min(max(vcpus - 2, 0), 2) + 2.5 * max(vcpus - 4, 0)
    return math.ceil(reserved) + min(2000, 250 * math.ceil(vcpus / 16))


def node_shape(machine: MachineType) -> NodeShape:
    """Slurm's view of one node of ``machine`` once Kubernetes has taken its share."""
    cores = machine.sockets * machine.cores_per_socket
    core_ms = 1000 * machine.threads_per_core
    spec = min(cores - 1, math.ceil(kube_reserved_millicores(machine.vcpus) / core_ms))
    memory = machine.memory_gib * 1024
    return NodeShape(
        sockets=machine.sockets,
        cores_per_socket=machine.cores_per_socket,
        threads_per_core=machine.threads_per_core,
        core_spec=spec,
        real_memory_mib=memory - kube_reserved_memory_mib(memory),
    )


@dataclass(frozen=True)
class WorkerGroup:
    """A pool or one TPU slice: one node pool, one worker StatefulSet, one Slurm node set."""

    name: str
    kind: Literal["gpu", "tpu", "cpu"]
    base: str
    machine: MachineType
    replicas: int
    slurm_nodes: int
    features: tuple[str, ...]
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    spot: bool
    reservation: Reservation | None
    compact_placement: bool
    tpu_generation: str | None = None
    tpu_topology: str | None = None
    slice_index: int | None = None

    @property
    def node_names(self) -> list[str]:
        """Slurm node names (= pod hostnames) of every node record the group keeps."""
        return naming.slurm_nodes(self.name, self.slurm_nodes)

    @property
    def hostlist(self) -> str:
        """Hostlist expression of the group's Slurm node records."""
        return naming.node_hostlist(self.name, self.slurm_nodes)

    @property
    def shape(self) -> NodeShape:
        """CPU / memory Slurm may schedule on one node."""
        return node_shape(self.machine)

    @property
    def gres_name(self) -> str | None:
        """Slurm GRES name (gpu, tpu) or None for CPU nodes."""
        return {"gpu": "gpu", "tpu": "tpu", "cpu": None}[self.kind]

    @property
    def gres_type(self) -> str | None:
        """Slurm GRES type: the accelerator (h100) or the TPU generation (v5p)."""
        if self.kind == "tpu":
            return self.tpu_generation
        return self.machine.accelerator.type if self.machine.accelerator else None

    @property
    def gres_count(self) -> int:
        """Accelerators per node; equals the pod's nvidia.com/gpu or google.com/tpu limit."""
        return self.machine.accelerator.count if self.machine.accelerator else 0

    @property
    def gres(self) -> str | None:
        """Slurm ``Gres=`` value, e.g. ``gpu:h100:8``."""
        return f"{self.gres_name}:{self.gres_type}:{self.gres_count}" if self.gres_name else None

    @property
    def kube_resource(self) -> str | None:
        """Kubernetes extended resource the worker pod requests."""
        return {"gpu": "nvidia.com/gpu", "tpu": "google.com/tpu", "cpu": None}[self.kind]

    @property
    def node_labels(self) -> dict[str, str]:
        """Labels put on the group's Kubernetes nodes (the pool label selects them)."""
        return {POOL_LABEL: self.name, **self.labels}

    @property
    def node_selector(self) -> dict[str, str]:
        """Selector that pins the group's worker pods to the group's nodes."""
        selector = {POOL_LABEL: self.name}
        if self.kind == "tpu" and self.machine.label and self.tpu_topology:
            # GKE requires TPU pods to select both the accelerator and the topology.
            selector[self.machine.label.key] = self.machine.label.value
            selector["cloud.google.com/gke-tpu-topology"] = self.tpu_topology
        return selector

    @property
    def nvlink_domains(self) -> list[list[str]]:
        """Node names grouped by NVLink domain (one domain per VM unless the machine is rack-scale)."""
        size = self.machine.nvlink_domain
        names = self.node_names
        return [names[i : i + size] for i in range(0, len(names), size)]


@dataclass(frozen=True)
class Partition:
    """A resolved Slurm partition."""

    name: str
    groups: tuple[str, ...]
    priority_tier: int
    default: bool
    max_time: str
    preempt_mode: str | None


@dataclass(frozen=True)
class ClusterPlan:
    """A validated declaration with everything resolved: the input of every renderer."""

    declaration: ClusterDeclaration
    groups: tuple[WorkerGroup, ...]
    partitions: tuple[Partition, ...]
    slurm_version: SlurmVersion

    @property
    def name(self) -> str:
        """Cluster name."""
        return self.declaration.name

    @property
    def namespace(self) -> str:
        """Kubernetes namespace of the Slurm objects."""
        return self.declaration.kubernetes.namespace

    def group(self, name: str) -> WorkerGroup:
        """The worker group called ``name``."""
        return next(g for g in self.groups if g.name == name)

    def summary(self) -> dict[str, int]:
        """Counts a person checks first: groups, nodes, GPUs, TPU chips, storage volumes."""
        return {
            "worker_groups": len(self.groups),
            "nodes": sum(g.replicas for g in self.groups),
            "slurm_node_records": sum(g.slurm_nodes for g in self.groups),
            "gpus": sum(g.replicas * g.gres_count for g in self.groups if g.kind == "gpu"),
            "tpu_chips": sum(g.replicas * g.gres_count for g in self.groups if g.kind == "tpu"),
            "tpu_slices": sum(1 for g in self.groups if g.kind == "tpu"),
            "storage_volumes": len(self.declaration.storage),
            "partitions": len(self.partitions),
        }


class _Checker:
    """Collects problems so one run reports all of them."""

    def __init__(self, decl: ClusterDeclaration, catalog: Catalog) -> None:
        self.decl = decl
        self.catalog = catalog
        self.problems: list[Problem] = []

    def add(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message))

    # -- machines -------------------------------------------------------------------------------
    def resolve_pool(self, i: int, pool: PoolSpec) -> MachineType | None:
        cloud = self.decl.cloud
        path = f"pools[{i}]"
        wanted = pool.machine_type or pool.machine_types.get(cloud)
        if wanted is not None:
            key = "machineType" if pool.machine_type else f"machineTypes.{cloud}"
            machine = self.catalog.machines.get(wanted)
            if machine is None:
                self.add(f"{path}.{key}", choice(wanted, self.catalog.machines, "machine type"))
                return None
            if machine.cloud != cloud:
                offered = [m.name for m in self.catalog.machines_on(cloud) if m.kind == pool.kind]
                self.add(
                    f"{path}.{key}",
                    f"{wanted!r} is a {machine.cloud} machine type, not offered on {cloud}; "
                    f"{pool.kind} machines on {cloud}: {', '.join(offered) or '(none)'}",
                )
                return None
            if machine.kind != pool.kind:
                self.add(f"{path}.{key}", f"{wanted!r} is a {machine.kind} machine but the pool is kind {pool.kind}")
                return None
            acc = pool.accelerator
            if (
                acc
                and machine.accelerator
                and ((machine.accelerator.type, machine.accelerator.count) != (acc.type, acc.count))
            ):
                self.add(
                    f"{path}.{key}",
                    f"{wanted!r} carries {machine.accelerator.type} x{machine.accelerator.count}, "
                    f"not the requested {acc.type} x{acc.count}",
                )
                return None
            return machine
        acc = pool.accelerator
        if acc is None:
            self.add(
                f"{path}.machineTypes",
                f"no machine type for {cloud}; machineTypes names: {', '.join(pool.machine_types) or '(none)'}",
            )
            return None
        if acc.type not in self.catalog.accelerator_types():
            self.add(f"{path}.accelerator.type", choice(acc.type, self.catalog.accelerator_types(), "GPU type"))
            return None
        if acc.type not in self.catalog.accelerator_types(cloud):
            where = [c for c in ("gcp", "aws") if acc.type in self.catalog.accelerator_types(c)]
            self.add(
                f"{path}.accelerator.type",
                f"{acc.type!r} is not offered on {cloud} (offered on: {', '.join(where)}); "
                f"GPU types on {cloud}: {', '.join(self.catalog.accelerator_types(cloud)) or '(none: CPU only)'}",
            )
            return None
        found = self.catalog.candidates(cloud, acc.type, acc.count)
        if not found:
            counts = ", ".join(str(c) for c in self.catalog.counts_for(cloud, acc.type))
            self.add(
                f"{path}.accelerator.count",
                f"{acc.type} x{acc.count} is not offered on {cloud}; allowed counts: {counts}",
            )
            return None
        return found[0]

    def tpu_groups(self, i: int, spec: TpuSliceSpec) -> list[WorkerGroup]:
        path = f"tpuSlices[{i}]"
        if self.decl.cloud != "gcp":
            self.add(f"{path}", f"TPU slices are offered only on gcp, not on {self.decl.cloud}")
            return []
        gen = self.catalog.tpus.get(spec.generation)
        if gen is None:
            self.add(f"{path}.generation", choice(spec.generation, self.catalog.tpus, "TPU generation"))
            return []
        if spec.topology not in gen.topologies:
            self.add(
                f"{path}.topology",
                f"{spec.topology!r} is not a valid {gen.name} slice topology; allowed: {', '.join(gen.topologies)}",
            )
            return []
        machine = self.catalog.machines[gen.machine]
        assert machine.accelerator is not None
        vms = tpu_vms(gen, spec.topology, machine.accelerator.count)
        features = (spec.name, f"tpu-{gen.name}", f"topo-{spec.topology}")
        return [
            WorkerGroup(
                name=naming.slice_group(spec.name, s),
                kind="tpu",
                base=spec.name,
                machine=machine,
                replicas=vms,
                slurm_nodes=vms,
                features=_unique(*features, naming.slice_group(spec.name, s), "tpu", self.decl.cloud, *spec.features),
                labels=dict(spec.labels),
                taints=(TPU_TAINT, *spec.taints),
                spot=spec.spot,
                reservation=spec.reservation,
                compact_placement=vms > 1,
                tpu_generation=gen.name,
                tpu_topology=spec.topology,
                slice_index=s,
            )
            for s in range(spec.slices)
        ]

    # -- whole-declaration checks --------------------------------------------------------------
    def check_names(self, groups: list[WorkerGroup]) -> None:
        seen: dict[str, str] = {}
        sources = [(f"pools[{i}].name", p.name) for i, p in enumerate(self.decl.pools)]
        for i, s in enumerate(self.decl.tpu_slices):
            sources += [(f"tpuSlices[{i}].name", naming.slice_group(s.name, k)) for k in range(s.slices)]
        for path, name in sources:
            if name in naming.RESERVED:
                self.add(
                    path, f"{name!r} is reserved for the Slurm layer; reserved: {', '.join(sorted(naming.RESERVED))}"
                )
            elif name in seen:
                self.add(path, f"{name!r} collides with {seen[name]}; pool and slice names must be unique")
            else:
                seen[name] = path
        nodes = Counter(n for g in groups for n in g.node_names)
        dupes = sorted(n for n, c in nodes.items() if c > 1)
        if dupes:
            self.add("pools", f"Slurm node names collide: {', '.join(dupes[:5])}")
        for g in groups:
            if not naming.is_dns_label(naming.pod(g.name, g.slurm_nodes - 1), naming.MAX_STATEFULSET):
                self.add(
                    "pools", f"pod name {naming.pod(g.name, g.slurm_nodes - 1)!r} is too long for a StatefulSet pod"
                )

    def check_storage(self) -> None:
        cloud = self.decl.cloud
        names: set[str] = set()
        paths: set[str] = set()
        for i, vol in enumerate(self.decl.storage):
            if cloud not in STORAGE_CLOUDS[vol.kind]:
                allowed = [k for k, clouds in STORAGE_CLOUDS.items() if cloud in clouds]
                self.add(
                    f"storage[{i}].kind", f"{vol.kind!r} is not available on {cloud}; allowed: {', '.join(allowed)}"
                )
            if vol.name in names:
                self.add(f"storage[{i}].name", f"duplicate volume name {vol.name!r}")
            if vol.mount_path in paths:
                self.add(f"storage[{i}].mountPath", f"{vol.mount_path!r} is already mounted by another volume")
            names.add(vol.name)
            paths.add(vol.mount_path)
            self.check_capacity(i, vol)
            if vol.tier is not None:
                tiers = STORAGE_TIERS.get(vol.kind, ())
                if not tiers:
                    self.add(
                        f"storage[{i}].tier", f"{vol.kind} has no tiers; tier applies to {', '.join(STORAGE_TIERS)}"
                    )
                elif vol.tier.upper() not in tiers:
                    self.add(f"storage[{i}].tier", choice(vol.tier, tiers, f"{vol.kind} tier"))
        if "/home" not in paths:
            self.add("storage", "no volume mounts at /home; login and workers need a shared home")

    def check_capacity(self, i: int, vol: StorageSpec) -> None:
        limits = {"filestore": (1024, 102400), "fsx-lustre": (1200, 2_000_000)}
        if vol.kind in limits:
            low, high = limits[vol.kind]
            if not low <= vol.capacity_gib <= high:
                self.add(
                    f"storage[{i}].capacityGib",
                    f"{vol.capacity_gib} GiB is outside what {vol.kind} accepts: {low}..{high} GiB",
                )

    def check_cloud(self) -> None:
        d = self.decl
        if d.cloud in ("gcp", "aws") and not d.region:
            self.add("region", f"required on {d.cloud}")
        if d.cloud == "gcp" and d.gcp is None:
            self.add("gcp", "required when cloud is gcp (at least project)")
        if d.cloud == "aws" and d.aws is None:
            self.add("aws", "required when cloud is aws (at least vpcId and subnetIds)")
        if d.cloud != "gcp" and d.gcp is not None:
            self.add("gcp", f"given but cloud is {d.cloud}")
        if d.cloud != "aws" and d.aws is not None:
            self.add("aws", f"given but cloud is {d.cloud}")
        if d.cloud == "local" and d.kubernetes.create:
            self.add("kubernetes.create", "a local stack uses an existing cluster; set create: false")
        if d.cloud == "gcp" and not d.zone and (d.pools or d.tpu_slices):
            self.add("zone", "required on gcp: GPU and TPU capacity is zonal")

    def check_version(self, version: SlurmVersion) -> None:
        minimum = SlurmVersion(*MIN_SUPPORTED)
        if version < minimum:
            self.add("image.slurmVersion", f"{version} is older than the oldest supported release {minimum}")
        needs = {"block": "topology/block", "yaml": "topology.yaml"}
        topo = self.decl.slurm.topology
        if topo in needs and not version.has(needs[topo]):
            self.add(
                "slurm.topology",
                f"{topo!r} needs Slurm >= {minimum_for(needs[topo])}; the image has {version}",
            )

    def partitions(self, groups: list[WorkerGroup]) -> list[Partition]:
        specs = self.decl.slurm.partitions
        if specs is None:
            return default_partitions(groups)
        bases = {g.base for g in groups} | {g.name for g in groups}
        out: list[Partition] = []
        names: set[str] = set()
        for i, spec in enumerate(specs):
            if spec.name in names:
                self.add(f"slurm.partitions[{i}].name", f"duplicate partition {spec.name!r}")
            names.add(spec.name)
            for j, ref in enumerate(spec.pools):
                if ref != "*" and ref not in bases:
                    self.add(f"slurm.partitions[{i}].pools[{j}]", choice(ref, bases | {"*"}, "pool or TPU slice"))
            out.append(_partition(spec, groups))
        if specs and sum(p.default for p in out) > 1:
            self.add("slurm.partitions", "more than one partition has default: true")
        return out


def _partition(spec: PartitionSpec, groups: list[WorkerGroup]) -> Partition:
    chosen = [g.name for g in groups if "*" in spec.pools or g.base in spec.pools or g.name in spec.pools]
    return Partition(spec.name, tuple(chosen), spec.priority_tier, spec.default, spec.max_time, spec.preempt_mode)


def default_partitions(groups: list[WorkerGroup]) -> list[Partition]:
    """The Slonk pattern: low / general / high on every node, and one partition per accelerator type."""
    every = tuple(g.name for g in groups)
    parts = [
        Partition("low", every, 1, False, "UNLIMITED", None),
        Partition("general", every, 2, True, "UNLIMITED", None),
        Partition("high", every, 3, False, "UNLIMITED", None),
    ]
    by_type: dict[str, list[str]] = {}
    for g in groups:
        key = g.gres_type if g.kind == "gpu" else (f"tpu-{g.gres_type}" if g.kind == "tpu" else "cpu")
        by_type.setdefault(str(key), []).append(g.name)
    taken = {p.name for p in parts}
    for key, names in sorted(by_type.items()):
        if key not in taken:
            parts.append(Partition(key, tuple(names), 2, False, "UNLIMITED", None))
    return parts


def _unique(*items: str) -> tuple[str, ...]:
    """Items in first-seen order without repeats (a pool named ``cpu`` of kind cpu has one feature)."""
    return tuple(dict.fromkeys(items))


def _pool_group(decl: ClusterDeclaration, pool: PoolSpec, machine: MachineType) -> WorkerGroup:
    extra_taints = (GPU_TAINT,) if pool.kind == "gpu" else ()
    accel = (machine.accelerator.type,) if machine.accelerator else ()
    return WorkerGroup(
        name=pool.name,
        kind=pool.kind,
        base=pool.name,
        machine=machine,
        replicas=pool.nodes,
        slurm_nodes=pool.max_nodes or pool.nodes,
        features=_unique(pool.name, pool.kind, *accel, decl.cloud, *pool.features),
        labels=dict(pool.labels),
        taints=(*extra_taints, *pool.taints),
        spot=pool.spot,
        reservation=pool.reservation,
        compact_placement=pool.placement,
    )


def build_plan(raw: Mapping[str, Any] | ClusterDeclaration, catalog: Catalog | None = None) -> ClusterPlan:
    """Validate a declaration (raw stack config or model) and resolve it; raise on any problem."""
    if isinstance(raw, ClusterDeclaration):
        decl = raw
    else:
        try:
            decl = ClusterDeclaration.model_validate(dict(raw))
        except ValidationError as err:
            raise DeclarationError(from_validation_error(err)) from None
    cat = catalog or load_catalog()
    check = _Checker(decl, cat)
    groups: list[WorkerGroup] = []
    for i, pool in enumerate(decl.pools):
        machine = check.resolve_pool(i, pool)
        if machine is not None:
            groups.append(_pool_group(decl, pool, machine))
    for i, spec in enumerate(decl.tpu_slices):
        groups.extend(check.tpu_groups(i, spec))
    if not decl.pools and not decl.tpu_slices:
        check.add("pools", "declare at least one pool or TPU slice")
    feature_lists = [(f"pools[{i}]", p.features) for i, p in enumerate(decl.pools)]
    feature_lists += [(f"tpuSlices[{i}]", t.features) for i, t in enumerate(decl.tpu_slices)]
    for where, features in feature_lists:
        for j, feat in enumerate(features):
            if not naming.SLURM_FEATURE.match(feat):
                check.add(f"{where}.features[{j}]", f"{feat!r} is not a Slurm feature name (letters, digits, _ . -)")
    check.check_names(groups)
    check.check_storage()
    check.check_cloud()
    version = SlurmVersion.parse(decl.image.slurm_version)
    check.check_version(version)
    partitions = check.partitions(groups)
    if check.problems:
        raise DeclarationError(check.problems)
    return ClusterPlan(decl, tuple(groups), tuple(partitions), version)
