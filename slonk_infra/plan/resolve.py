"""Resolution: a validated declaration and the catalog into worker groups, partitions and a plan.

:func:`build_plan` is the one gate: it validates the raw stack config (shape with pydantic, then
everything :mod:`slonk_infra.plan.checks` collects, with the declared target's own rules) and returns
a :class:`ClusterPlan`, or raises :class:`~slonk_infra.declaration.errors.DeclarationError` listing
every problem with its field path. The targets are passed in (:mod:`slonk_infra.plan.target`);
:func:`slonk_infra.clouds.build_plan` passes every registered one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from pydantic import ValidationError

from slonk_infra.catalog import CLOUDS, Catalog, MachineType, load_catalog, tpu_vms
from slonk_infra.catalog.slurm_versions import SlurmVersion
from slonk_infra.declaration.errors import DeclarationError, Problem, choice, from_validation_error
from slonk_infra.declaration.inputs import hold_outputs
from slonk_infra.declaration.model import (
    CLOUD_TAGS,
    ClusterDeclaration,
    PartitionSpec,
    PoolSpec,
    Taint,
    TpuSliceSpec,
    parse_declaration,
)
from slonk_infra.declaration.networks import all_private
from slonk_infra.plan import checks, lint, naming
from slonk_infra.plan.checks import Problems
from slonk_infra.plan.model import ClusterPlan, Partition, WorkerGroup
from slonk_infra.plan.target import Target, Targets
from slonk_infra.vocab import GPU_RESOURCE, TPU_RESOURCE

GPU_TAINT = Taint(key=GPU_RESOURCE, value="present", effect="NoSchedule")
TPU_TAINT = Taint(key=TPU_RESOURCE, value="present", effect="NoSchedule")
# Who may reach a load balancer's SSH port when the declaration names nobody, on targets that
# restrict it: private networks (VPN, peered VPCs, interconnects), never the internet.
PRIVATE_RANGES = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")


def resolve_machine(
    decl: ClusterDeclaration, catalog: Catalog, i: int, pool: PoolSpec, problems: Problems
) -> MachineType | None:
    """The machine type of ``pools[i]``: named explicitly, or the catalog's first match of its accelerator."""
    cloud = decl.cloud
    path = f"pools[{i}]"
    wanted = pool.machine_type or pool.machine_types.get(cloud)
    if wanted is not None:
        key = "machineType" if pool.machine_type else f"machineTypes.{cloud}"
        machine = catalog.machines.get(wanted)
        if machine is None:
            problems.add(f"{path}.{key}", choice(wanted, catalog.machines, "machine type"))
            return None
        if machine.cloud != cloud:
            offered = [m.name for m in catalog.machines_on(cloud) if m.kind == pool.kind]
            problems.add(
                f"{path}.{key}",
                f"{wanted!r} is a {machine.cloud} machine type, not offered on {cloud}; "
                f"{pool.kind} machines on {cloud}: {', '.join(offered) or '(none)'}",
            )
            return None
        if machine.kind != pool.kind:
            problems.add(f"{path}.{key}", f"{wanted!r} is a {machine.kind} machine but the pool is kind {pool.kind}")
            return None
        acc = pool.accelerator
        if (
            acc
            and machine.accelerator
            and ((machine.accelerator.type, machine.accelerator.count) != (acc.type, acc.count))
        ):
            problems.add(
                f"{path}.{key}",
                f"{wanted!r} carries {machine.accelerator.type} x{machine.accelerator.count}, "
                f"not the requested {acc.type} x{acc.count}",
            )
            return None
        return machine
    acc = pool.accelerator
    if acc is None:
        problems.add(
            f"{path}.machineTypes",
            f"no machine type for {cloud}; machineTypes names: {', '.join(pool.machine_types) or '(none)'}",
        )
        return None
    if acc.type not in catalog.accelerator_types():
        problems.add(f"{path}.accelerator.type", choice(acc.type, catalog.accelerator_types(), "GPU type"))
        return None
    if acc.type not in catalog.accelerator_types(cloud):
        where = [c for c in CLOUDS if acc.type in catalog.accelerator_types(c)]
        problems.add(
            f"{path}.accelerator.type",
            f"{acc.type!r} is not offered on {cloud} (offered on: {', '.join(where)}); "
            f"GPU types on {cloud}: {', '.join(catalog.accelerator_types(cloud)) or '(none: CPU only)'}",
        )
        return None
    found = catalog.candidates(cloud, acc.type, acc.count)
    if not found:
        counts = ", ".join(str(c) for c in catalog.counts_for(cloud, acc.type))
        problems.add(
            f"{path}.accelerator.count", f"{acc.type} x{acc.count} is not offered on {cloud}; allowed counts: {counts}"
        )
        return None
    return found[0]


def pool_group(decl: ClusterDeclaration, pool: PoolSpec, machine: MachineType) -> WorkerGroup:
    """The worker group of a pool."""
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
        storage_kinds=frozenset(v.kind for v in decl.storage),
    )


def tpu_groups(
    decl: ClusterDeclaration, catalog: Catalog, i: int, spec: TpuSliceSpec, problems: Problems
) -> list[WorkerGroup]:
    """One worker group per slice of ``tpuSlices[i]`` (a multi-host slice is one group of its VMs)."""
    path = f"tpuSlices[{i}]"
    offered = tpu_clouds(catalog)
    if decl.cloud not in offered:
        problems.add(f"{path}", f"TPU slices are offered only on {', '.join(offered)}, not on {decl.cloud}")
        return []
    gen = catalog.tpus.get(spec.generation)
    if gen is None:
        problems.add(f"{path}.generation", choice(spec.generation, catalog.tpus, "TPU generation"))
        return []
    if spec.topology not in gen.topologies:
        problems.add(
            f"{path}.topology",
            f"{spec.topology!r} is not a valid {gen.name} slice topology; allowed: {', '.join(gen.topologies)}",
        )
        return []
    machine = catalog.machines[gen.machine]
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
            features=_unique(*features, naming.slice_group(spec.name, s), "tpu", decl.cloud, *spec.features),
            labels=dict(spec.labels),
            taints=(TPU_TAINT, *spec.taints),
            spot=spec.spot,
            reservation=spec.reservation,
            compact_placement=vms > 1,
            tpu_generation=gen.name,
            tpu_topology=spec.topology,
            slice_index=s,
            storage_kinds=frozenset(v.kind for v in decl.storage),
        )
        for s in range(spec.slices)
    ]


def tpu_clouds(catalog: Catalog) -> list[str]:
    """The clouds whose machines host a TPU generation of the catalog."""
    hosts = {catalog.machines[gen.machine].cloud for gen in catalog.tpus.values()}
    return [c for c in CLOUDS if c in hosts]


def declared_partition(spec: PartitionSpec, groups: list[WorkerGroup]) -> Partition:
    """A declared partition with its member groups (``*`` for all, a pool or slice name for its groups)."""
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


def partitions(decl: ClusterDeclaration, groups: list[WorkerGroup]) -> list[Partition]:
    """The declared partitions, or the default set when the declaration names none."""
    specs = decl.slurm.partitions
    if specs is None:
        return default_partitions(groups)
    return [declared_partition(spec, groups) for spec in specs]


def _unique(*items: str) -> tuple[str, ...]:
    """Items in first-seen order without repeats (a pool named ``cpu`` of kind cpu has one feature)."""
    return tuple(dict.fromkeys(items))


def login_source_ranges(decl: ClusterDeclaration, target: Target) -> tuple[str, ...] | None:
    """loadBalancerSourceRanges of the login Service: the declared ranges; else the private ranges on a
    target that restricts its load balancers; None (no restriction) for a ClusterIP Service or elsewhere."""
    login = decl.login
    if login.service_type != "LoadBalancer":
        return None
    if login.load_balancer_source_ranges is not None:
        return tuple(login.load_balancer_source_ranges)
    return PRIVATE_RANGES if target.restrict_load_balancers else None


@runtime_checkable
class LoginAnnotations(Protocol):
    """A target that says how its login LoadBalancer is made internal
    (:meth:`slonk_infra.clouds.target.CloudTarget.login_service_annotations`)."""

    def login_service_annotations(self, internal: bool, /) -> dict[str, str]:
        """The login Service's annotations; ``internal`` when every admitted range is private."""
        ...


def login_service_annotations(decl: ClusterDeclaration, ranges: Sequence[str] | None, target: Target) -> dict[str, str]:
    """The login Service's annotations from the target: a LoadBalancer whose admitted ranges are all private
    is internal (its clients have private addresses, which an internet-facing load balancer never sees);
    one admitting a public range, or none restricted, gets the target's external form (none on GKE/EKS)."""
    if decl.login.service_type != "LoadBalancer" or not isinstance(target, LoginAnnotations):
        return {}
    return dict(target.login_service_annotations(ranges is not None and all_private(ranges)))


def build_plan(
    raw: Mapping[str, Any] | ClusterDeclaration, *, targets: Targets, catalog: Catalog | None = None
) -> ClusterPlan:
    """Validate a declaration (raw stack config or model) for one of ``targets`` and resolve it; raise on any problem."""
    held: dict[str, Any] = {}
    if not isinstance(raw, ClusterDeclaration):
        # Outputs at the fields naming cloud objects are validated as stand-ins; the plan keeps the Outputs.
        raw, held = hold_outputs(raw)
    try:
        decl = parse_declaration(raw)
    except ValidationError as err:
        raise DeclarationError(from_validation_error(err, tagged=CLOUD_TAGS)) from None
    target = targets.get(decl.cloud)
    if target is None:
        raise DeclarationError([Problem("cloud", choice(decl.cloud, targets, "target"))])
    cat = catalog or load_catalog()
    problems = Problems()
    groups: list[WorkerGroup] = []
    for i, pool in enumerate(decl.pools):
        machine = resolve_machine(decl, cat, i, pool, problems)
        if machine is not None:
            groups.append(pool_group(decl, pool, machine))
    for i, spec in enumerate(decl.tpu_slices):
        groups.extend(tpu_groups(decl, cat, i, spec, problems))
    checks.check_some_workers(decl, problems)
    checks.check_features(decl, problems)
    checks.check_names(decl, groups, problems)
    checks.check_storage(decl, target, problems)
    checks.check_cloud(decl, target, problems)
    checks.check_location(decl, problems)
    checks.check_kubernetes(decl, problems)
    checks.check_operations(decl, problems)
    checks.check_controller(decl, problems)
    checks.check_fabrics(decl, groups, problems)
    version = SlurmVersion.parse(decl.image.slurm_version)
    checks.check_version(decl, version, problems)
    checks.check_health_budget(decl, problems)
    checks.check_partitions(decl, groups, problems)
    checks.check_accounting(decl, groups, problems)
    problems.raise_if_any()
    parts = partitions(decl, groups)
    warnings = (*lint.declaration_warnings(decl, groups, parts, cat), *target.declaration_warnings(decl))
    ranges = login_source_ranges(decl, target)
    return ClusterPlan(
        decl,
        tuple(groups),
        tuple(parts),
        version,
        ranges,
        warnings,
        login_service_annotations=login_service_annotations(decl, ranges, target),
        pulumi_inputs=held,
    )
