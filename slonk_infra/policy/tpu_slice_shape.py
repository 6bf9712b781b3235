"""TPU slices whole: a slice's node pool size, its StatefulSet's replicas and its topology selector
agree (chips = product of the topology's dimensions; hosts = chips / chips per host)."""

from __future__ import annotations

import re

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)

from slonk_infra.policy.common import (
    GKE_TPU_MACHINE_RE,
    TPU_SLICE_POOL_TYPES,
    node_selector,
    slurm_workers,
)
from slonk_infra.policy.props import (
    accelerator_container,
    accelerator_limits,
    as_int,
    describe,
    dims_product,
    get,
    known,
)
from slonk_infra.vocab import NODEPOOL_LABEL, POOL_LABEL, TPU_RESOURCE, TPU_TOPOLOGY_LABEL

TPU_CHIPS_PER_HOST_RE = re.compile(r"-(\d+)t$")
DEFAULT_TPU_CHIPS_PER_HOST = 4


def _validate_tpu_shape(args: StackValidationArgs, report: ReportViolation) -> None:  # noqa: C901  to split: one pass per TPU pool
    resources = list(args.resources)
    workloads = list(slurm_workers(resources))
    matched: set[str] = set()
    for pool in (r for r in resources if r.resource_type in TPU_SLICE_POOL_TYPES):
        config = get(pool.props, "nodeConfig")
        machine = str(get(config, "machineType", default=""))
        topology = get(pool.props, "placementPolicy", "tpuTopology")
        if not topology and not GKE_TPU_MACHINE_RE.match(machine):
            continue
        where = describe(pool.resource_type, pool.props, pool.name)
        found = TPU_CHIPS_PER_HOST_RE.search(machine)
        per_host = int(found.group(1)) if found else DEFAULT_TPU_CHIPS_PER_HOST
        nodes = as_int(get(pool.props, "nodeCount", default=get(pool.props, "initialNodeCount")))
        chips = dims_product(str(topology)) if topology else None
        expected_nodes = None
        if topology and chips is None:
            report(f"{where}: tpu_topology {topology} is not a topology (AxB or AxBxC)", pool.urn)
        elif chips is not None:
            if chips % per_host:
                report(
                    f"{where}: topology {topology} has {chips} chips, not a multiple of {per_host} per host", pool.urn
                )
            else:
                expected_nodes = chips // per_host
                if nodes != expected_nodes:
                    report(
                        f"{where}: node_count {nodes}, but topology {topology} is {chips} chips = "
                        f"{expected_nodes} hosts of {per_host} ({machine})",
                        pool.urn,
                    )
        pool_label = str(known(config, "labels", POOL_LABEL, default=""))
        pool_name = str(known(pool.props, "name", default=""))
        for resource, _group, spec in workloads:
            selector = node_selector(spec)
            if not (
                (pool_label and selector.get(POOL_LABEL) == pool_label)
                or (pool_name and selector.get(NODEPOOL_LABEL) == pool_name)
            ):
                continue
            matched.add(resource.urn)
            sts = describe(resource.resource_type, resource.props, resource.name)
            replicas = as_int(get(resource.props, "spec", "replicas", default=1))
            want = expected_nodes if expected_nodes is not None else nodes
            if want is not None and replicas != want:
                report(
                    f"{sts}: replicas {replicas}, but TPU slice pool {pool_name or pool_label} has "
                    f"{want} hosts (topology {topology})",
                    resource.urn,
                )
            selected = selector.get(TPU_TOPOLOGY_LABEL)
            if topology and selected != topology:
                report(
                    f"{sts}: nodeSelector {TPU_TOPOLOGY_LABEL}={selected} does not match the pool's tpu_topology "
                    f"{topology}",
                    resource.urn,
                )
            chips_per_pod = accelerator_limits(spec).get("tpu", 0)
            if chips_per_pod != per_host:
                report(
                    f"{sts} container {accelerator_container(spec)}: {TPU_RESOURCE} limit {chips_per_pod}, but each "
                    f"{machine} host has {per_host} chips; a multi-host slice pod must hold all of its host's chips",
                    resource.urn,
                )
    # Workloads that select a TPU topology without a node pool in this stack (an existing cluster, node
    # auto-provisioning): their own replicas and chips must still make up the slice.
    for resource, _group, spec in workloads:
        topology = node_selector(spec).get(TPU_TOPOLOGY_LABEL)
        if resource.urn in matched or not topology:
            continue
        sts = describe(resource.resource_type, resource.props, resource.name)
        chips = dims_product(topology)
        chips_per_pod = accelerator_limits(spec).get("tpu", 0)
        replicas = as_int(get(resource.props, "spec", "replicas", default=1)) or 0
        if chips is None or not chips_per_pod or replicas * chips_per_pod != chips:
            report(
                f"{sts}: {replicas} replicas x {TPU_RESOURCE} {chips_per_pod} = {replicas * chips_per_pod} chips, "
                f"but topology {topology} has {chips} chips",
                resource.urn,
            )


tpu_slice_shape = StackValidationPolicy(
    name="tpu-slice-shape",
    description=(
        "A TPU slice's GKE node pool node_count, its StatefulSet's replicas and its tpu_topology / "
        "cloud.google.com/gke-tpu-topology selector agree (chips = product of dims; hosts = chips / chips per host)."
    ),
    validate=_validate_tpu_shape,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    remediation_steps=(
        "Declare the slice by generation and topology (tpuSlices: [{generation, topology, slices}]) and let "
        "slonk-infra derive node_count and replicas. A multi-host slice only forms when every host is present: "
        "a node pool or StatefulSet of the wrong size leaves the whole slice idle."
    ),
)
