"""Problem collection: every check of a declaration that needs the catalog or the whole declaration.

Checks append to a :class:`Problems` list rather than raising, so one run reports every problem with
its field path. Resolution (:mod:`slonk_infra.plan.resolve`) calls them in a fixed order, so messages
come out in the same order every time.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Iterable, Sequence

from slonk_infra.catalog import load_catalog
from slonk_infra.catalog.fabrics import gke_version_key
from slonk_infra.catalog.regions import (
    AWS_AZ_ID,
    AWS_OTHER_PARTITIONS,
    AWS_REGION,
    GCP_REGION,
    GCP_ZONE_SUFFIX,
    az_id_prefix,
)
from slonk_infra.catalog.slurm_versions import (
    HEALTH_CHECK_TIMEOUT_S,
    MIN_SUPPORTED,
    TOPOLOGY_BLOCK,
    TOPOLOGY_YAML,
    SlurmVersion,
)
from slonk_infra.declaration.accounting import accounting_problems
from slonk_infra.declaration.errors import DeclarationError, Problem, choice
from slonk_infra.declaration.model import ClusterDeclaration
from slonk_infra.health.budget import checks_deadline_seconds, interval_run_seconds, what_it_is_made_of
from slonk_infra.plan import naming
from slonk_infra.plan.model import WorkerGroup
from slonk_infra.plan.target import Target


class Problems:
    """Problems found so far, each with the field path it concerns."""

    def __init__(self) -> None:
        self.items: list[Problem] = []

    def add(self, path: str, message: str) -> None:
        """Record one problem."""
        self.items.append(Problem(path, message))

    def __bool__(self) -> bool:
        return bool(self.items)

    def raise_if_any(self) -> None:
        """Raise :class:`DeclarationError` listing every problem, if there is one."""
        if self.items:
            raise DeclarationError(self.items)


def check_some_workers(decl: ClusterDeclaration, problems: Problems) -> None:
    """A cluster needs at least one pool or TPU slice."""
    if not decl.pools and not decl.tpu_slices:
        problems.add("pools", "declare at least one pool or TPU slice")


def check_features(decl: ClusterDeclaration, problems: Problems) -> None:
    """Declared features are Slurm feature names."""
    feature_lists = [(f"pools[{i}]", p.features) for i, p in enumerate(decl.pools)]
    feature_lists += [(f"tpuSlices[{i}]", t.features) for i, t in enumerate(decl.tpu_slices)]
    for where, features in feature_lists:
        for j, feat in enumerate(features):
            if not naming.SLURM_FEATURE.match(feat):
                problems.add(f"{where}.features[{j}]", f"{feat!r} is not a Slurm feature name (letters, digits, _ . -)")


def check_names(decl: ClusterDeclaration, groups: Sequence[WorkerGroup], problems: Problems) -> None:
    """Group names neither reserved nor repeated; node names unique and short enough for pod names."""
    seen: dict[str, str] = {}
    sources = [(f"pools[{i}].name", p.name) for i, p in enumerate(decl.pools)]
    for i, s in enumerate(decl.tpu_slices):
        sources += [(f"tpuSlices[{i}].name", naming.slice_group(s.name, k)) for k in range(s.slices)]
    for path, name in sources:
        if name in naming.RESERVED:
            problems.add(
                path, f"{name!r} is reserved for the Slurm layer; reserved: {', '.join(sorted(naming.RESERVED))}"
            )
        elif name in seen:
            problems.add(path, f"{name!r} collides with {seen[name]}; pool and slice names must be unique")
        else:
            seen[name] = path
    nodes = Counter(n for g in groups for n in g.node_names)
    dupes = sorted(n for n, c in nodes.items() if c > 1)
    if dupes:
        problems.add("pools", f"Slurm node names collide: {', '.join(dupes[:5])}")
    for g in groups:
        if not naming.is_dns_label(naming.pod(g.name, g.slurm_nodes - 1), naming.MAX_STATEFULSET):
            problems.add(
                "pools", f"pod name {naming.pod(g.name, g.slurm_nodes - 1)!r} is too long for a StatefulSet pod"
            )


def check_storage(decl: ClusterDeclaration, target: Target, problems: Problems) -> None:
    """Volume kinds the target offers, unique names and mount paths, the target's tier and size rules,
    a shared /home."""
    names: set[str] = set()
    paths: set[str] = set()
    for i, vol in enumerate(decl.storage):
        if vol.kind not in target.storage_kinds:
            problems.add(
                f"storage[{i}].kind",
                f"{vol.kind!r} is not available on {decl.cloud}; allowed: {', '.join(target.storage_kinds)}",
            )
        else:
            problems.items += target.storage_problems(i, vol)
        if vol.name in names:
            problems.add(f"storage[{i}].name", f"duplicate volume name {vol.name!r}")
        if vol.mount_path in paths:
            problems.add(f"storage[{i}].mountPath", f"{vol.mount_path!r} is already mounted by another volume")
        names.add(vol.name)
        paths.add(vol.mount_path)
    if "/home" not in paths:
        problems.add("storage", "no volume mounts at /home; login and workers need a shared home")


def check_cloud(decl: ClusterDeclaration, target: Target, problems: Problems) -> None:
    """What only the declared target checks: region / zone, cluster creation, placement it cannot honour."""
    problems.items += target.declaration_problems(decl)


def check_location(decl: ClusterDeclaration, problems: Problems) -> None:
    """Region and zone names that cannot be right: not shaped like the cloud's names, a zone of another
    region, an AWS partition the adapter does not write ARNs for.

    A well-formed name missing from the catalog's dated list is only a warning (:mod:`slonk_infra.plan.lint`):
    the cloud may have opened it since, and a stale list must never block a deploy.
    """
    locations = load_catalog().locations
    known = locations.regions(decl.cloud)
    if not known or not decl.region:
        return
    region = decl.region
    if decl.cloud == "gcp":
        if not GCP_REGION.match(region):
            problems.add(
                "region", f"{region!r} is not a GCP region name (like us-central1){_hint(region, decl.zone, known)}"
            )
            return
        suffix = decl.zone.removeprefix(f"{region}-") if decl.zone else None
        if decl.zone and suffix == decl.zone and region not in known:
            # They disagree, and the region is the one the catalog does not know: the root cause.
            problems.add("region", f"{region!r} does not match zone {decl.zone!r}{_hint(region, decl.zone, known)}")
        elif decl.zone and (suffix == decl.zone or not GCP_ZONE_SUFFIX.match(str(suffix))):
            problems.add(
                "zone",
                f"{decl.zone!r} is not a zone of region {region} (its zones are named {region}-a, {region}-b, ...; "
                f"listed: {', '.join(locations.zones('gcp', region)) or '(none)'})",
            )
        return
    partition = next((name for prefix, name in AWS_OTHER_PARTITIONS.items() if region.startswith(prefix)), None)
    if partition is not None:
        problems.add(
            "region",
            f"{region!r} is in the {partition} partition, which this release does not deploy to (its IAM policy "
            "ARNs are written for the aws partition)",
        )
    elif not AWS_REGION.match(region):
        problems.add(
            "region", f"{region!r} is not an AWS Region name (like us-east-1){_hint(region, decl.zone, known)}"
        )
    elif decl.zone and AWS_AZ_ID.match(decl.zone):
        if not decl.zone.startswith(f"{az_id_prefix(region)}-"):
            problems.add(
                "zone",
                f"{decl.zone!r} is an AZ ID of another region: those of {region} start with {az_id_prefix(region)}-az",
            )
    elif decl.zone and not decl.zone.startswith(region) and region not in known:
        problems.add("region", f"{region!r} does not match zone {decl.zone!r}{_hint(region, decl.zone, known)}")
    elif decl.zone and not decl.zone.startswith(region):
        problems.add(
            "zone",
            f"{decl.zone!r} is not in region {region}: give an Availability Zone of it ({region}a, ...), a Local "
            "Zone of it, or an AZ ID (use1-az4)",
        )


def _hint(region: str, zone: str | None, known: Iterable[str]) -> str:
    """The region the zone belongs to, when it is a known one; else the closest names."""
    owner = next((r for r in sorted(known, key=len, reverse=True) if zone and zone.startswith(r)), None)
    return f"; did you mean {owner!r}, the region of {zone!r}?" if owner else nearest(region, known)


def nearest(name: str, known: Iterable[str]) -> str:
    """``; did you mean 'a' or 'b'?`` for the closest known names (up to three), or nothing."""
    near = difflib.get_close_matches(name, list(known), n=3, cutoff=0.6)
    return f"; did you mean {' or '.join(repr(n) for n in near)}?" if near else ""


def check_fabrics(decl: ClusterDeclaration, groups: Iterable[WorkerGroup], problems: Problems) -> None:
    """A GPU pool's fabric (GPUDirect-TCPXO, GPUDirect-RDMA) needs a GKE version that has it (catalog ``fabrics.yaml``).

    The catalog keeps the GKE version floors per machine (``min_gke``); a machine without one passes. A version naming only a minor is checked on the minor; GKE then picks the patch from
    the release channel, and the patch floor is in the catalog for the operator to check.
    """
    catalog = load_catalog()
    version = decl.kubernetes.version
    for i, pool in enumerate(decl.pools):
        group = next((g for g in groups if g.name == pool.name), None)
        fabric = catalog.fabric_of(group.machine) if group else None
        if group is None or fabric is None:
            continue
        problem = fabric.version_problem(group.machine, version)
        if problem is not None:
            problems.add("kubernetes.version", f"{problem} (pools[{i}] {pool.name!r})")


# The floor of this layer: the munged sidecar of every Slurm pod is a native sidecar (an init container
# with restartPolicy: Always), which needs the SidecarContainers feature (KEP-753), beta and on by
# default from Kubernetes 1.29 (https://kubernetes.io/docs/concepts/workloads/pods/sidecar-containers/,
# https://github.com/kubernetes/enhancements/issues/753). On 1.28 that init container never "completes",
# so no Slurm pod ever leaves Init.
MIN_KUBERNETES = "1.29"
# Clouds where the library creates a cluster with a public control-plane endpoint.
ENDPOINT_CLOUDS = ("gcp", "aws")


def check_kubernetes(decl: ClusterDeclaration, problems: Problems) -> None:
    """The Kubernetes floor (native sidecars), and who may reach a created cluster's endpoint.

    The floor also covers what a multi-host TPU slice needs: its hosts learn their index from the
    ``apps.kubernetes.io/pod-index`` pod label, on by default from 1.28 (catalog ``platform.yaml``).
    """
    k8s = decl.kubernetes
    if gke_version_key(k8s.version)[:2] < gke_version_key(MIN_KUBERNETES)[:2]:
        problems.add(
            "kubernetes.version",
            f"{k8s.version} is older than {MIN_KUBERNETES}, the oldest supported: every Slurm pod runs munged as a "
            f"native sidecar (an init container with restartPolicy: Always), which needs SidecarContainers "
            f"(KEP-753), on by default from {MIN_KUBERNETES}; on older clusters the pods never leave Init. "
            f"Use {MIN_KUBERNETES} or later",
        )
    if decl.cloud in ENDPOINT_CLOUDS and k8s.create and not k8s.authorized_networks:
        state = "is missing" if k8s.authorized_networks is None else "lists no range"
        problems.add(
            "kubernetes.authorizedNetworks",
            f"{state}: the created cluster's control-plane endpoint is public, so say who may reach it: the "
            "CIDRs of the machine that runs `pulumi up` and of your office, VPN or CI runners (e.g. "
            "['203.0.113.0/24']); ['0.0.0.0/0'] opens it to the whole internet on purpose",
        )


def check_operations(decl: ClusterDeclaration, problems: Problems) -> None:
    """The operations controller talks to Slurm through slurmrestd, so it needs the REST API."""
    if decl.operations.enabled and not decl.slurm.rest_api:
        problems.add(
            "operations.enabled", "true needs slurm.restApi: true (the controller reads Slurm through slurmrestd)"
        )


def check_version(decl: ClusterDeclaration, version: SlurmVersion, problems: Problems) -> None:
    """The image's Slurm is supported and has what the chosen topology needs."""
    if version < MIN_SUPPORTED:
        problems.add("image.slurmVersion", f"{version} is older than the oldest supported release {MIN_SUPPORTED}")
    needs = {"block": TOPOLOGY_BLOCK, "yaml": TOPOLOGY_YAML}
    topo = decl.slurm.topology
    if topo in needs and version < needs[topo]:
        problems.add("slurm.topology", f"{topo!r} needs Slurm >= {needs[topo]}; the image has {version}")


def check_health_budget(decl: ClusterDeclaration, problems: Problems) -> None:
    """A health-check run fits the 60 s slurmd gives it (slonk_infra/catalog/slurm_versions.py): a run stopped
    there drains nothing, and slonk-health gives up on checks still running when only the time to drain is
    left (slonk_infra/health/budget.py), which a check the settings allow must never reach."""
    run_s = interval_run_seconds(decl.health)
    if run_s > HEALTH_CHECK_TIMEOUT_S:
        problems.add(
            "health",
            f"a health-check run may take up to {run_s} s ({what_it_is_made_of(decl.health)}), and slurmd stops "
            f"it after {HEALTH_CHECK_TIMEOUT_S} s: slonk-health gives up on its checks "
            f"{checks_deadline_seconds(HEALTH_CHECK_TIMEOUT_S)} s into a run to drain in time, so lower "
            "health.gpu.xidWaitMs or health.disk.timeoutSeconds",
        )


def check_partitions(decl: ClusterDeclaration, groups: Iterable[WorkerGroup], problems: Problems) -> None:
    """Declared partitions: unique names, members that exist, at most one default."""
    specs = decl.slurm.partitions
    if specs is None:
        return
    members = list(groups)
    # Declared names, not only resolved groups: a pool whose machine type was refused already has its
    # own error, and partitions naming it must not add a false "not a known pool" each.
    bases = {g.base for g in members} | {g.name for g in members}
    bases |= {p.name for p in decl.pools} | {s.name for s in decl.tpu_slices}
    names: set[str] = set()
    for i, spec in enumerate(specs):
        if spec.name in names:
            problems.add(f"slurm.partitions[{i}].name", f"duplicate partition {spec.name!r}")
        names.add(spec.name)
        for j, ref in enumerate(spec.pools):
            if ref != "*" and ref not in bases:
                problems.add(f"slurm.partitions[{i}].pools[{j}]", choice(ref, bases | {"*"}, "pool or TPU slice"))
    if specs and sum(p.default for p in specs) > 1:
        problems.add("slurm.partitions", "more than one partition has default: true")


def check_controller(decl: ClusterDeclaration, problems: Problems) -> None:
    """Controller HA and state backups name declared shared filesystems, and two controllers get two nodes."""
    ctl = decl.controller
    names = {vol.name for vol in decl.storage}
    for path, ref in (
        ("controller.stateStorage", ctl.state_storage),
        ("controller.backup.storage", ctl.backup.storage if ctl.backup else None),
    ):
        if ref is not None and ref not in names:
            problems.add(path, choice(ref, names, "storage"))
    if ctl.replicas > 1 and ctl.state_storage is None:
        problems.add(
            "controller.stateStorage",
            f"replicas: {ctl.replicas} needs the controller state on a shared filesystem both controllers mount "
            f"(the backup reads the primary's StateSaveLocation when it takes over); name one of {sorted(names)}, "
            "or use replicas: 1",
        )
    if ctl.replicas > decl.kubernetes.system_nodes:
        problems.add(
            "kubernetes.systemNodes",
            f"{decl.kubernetes.system_nodes} system node(s) cannot hold controller.replicas: {ctl.replicas}: the "
            "controllers never share a node (a node lost must not take both); use systemNodes >= "
            f"{ctl.replicas}",
        )


def check_accounting(decl: ClusterDeclaration, groups: Iterable[WorkerGroup], problems: Problems) -> None:
    """``slurm.accounting`` and the partitions' ``allowQos``: names that refer to one another exist, every
    declared user is in an account, GPU limits fit the cluster (:func:`accounting_problems`)."""
    slurm = decl.slurm
    gpus = sum(g.replicas * g.gres_count for g in groups if g.kind == "gpu")
    parts = None if slurm.partitions is None else [(p.name, p.allow_qos) for p in slurm.partitions]
    for path, message in accounting_problems(
        slurm.accounting,
        user_names=[u.name for u in decl.users],
        directory=decl.directory is not None,
        partitions=parts,
        cluster_gpus=gpus,
    ):
        problems.add(path, message)
