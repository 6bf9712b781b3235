"""Pods and Slurm agree on accelerators: every worker's GPU / TPU limit equals the GRES count slurm.conf
gives its group's nodes, and gres.conf defines as many devices."""

from __future__ import annotations

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)

from slonk_infra.policy import slurmconf
from slonk_infra.policy.common import (
    namespace_of,
    slurm_configs,
    slurm_workers,
)
from slonk_infra.policy.props import (
    accelerator_container,
    accelerator_limits,
    describe,
)
from slonk_infra.vocab import CONFIG_MAP as SLURM_CONFIG_MAP
from slonk_infra.vocab import GPU_RESOURCE, TPU_RESOURCE


def _validate_gres(args: StackValidationArgs, report: ReportViolation) -> None:
    configs = slurm_configs(list(args.resources))
    for resource, group, spec in slurm_workers(args.resources):
        where = describe(resource.resource_type, resource.props, resource.name)
        limits = accelerator_limits(spec)
        container = accelerator_container(spec)
        found = configs.get(namespace_of(resource))
        if found is None:
            if limits:
                report(
                    f"{where} container {container}: requests {limits} but namespace {namespace_of(resource)} has "
                    f"no {SLURM_CONFIG_MAP} ConfigMap declaring the group's GRES",
                    resource.urn,
                )
            continue
        cm, slurm_conf, gres_conf = found
        nodes = slurmconf.node_gres(slurm_conf)
        members = slurmconf.group_nodes(nodes, group)
        if not members:
            if limits:
                report(
                    f"{where} container {container}: requests {limits} but slurm.conf has no NodeName line for "
                    f"group {group} (nodes {group}-N)",
                    resource.urn,
                )
            continue
        devices = slurmconf.gres_conf_counts(gres_conf)
        for gres, resource_name in (("gpu", GPU_RESOURCE), ("tpu", TPU_RESOURCE)):
            want = limits.get(gres, 0)
            declared = sorted({nodes[n].get(gres, 0) for n in members})
            if declared != [want]:
                report(
                    f"{where} container {container}: {resource_name} limit {want}, but slurm.conf gives nodes "
                    f"{slurmconf.compress(members)} Gres={gres}:{'/'.join(map(str, declared))}",
                    resource.urn,
                )
                continue
            if not want:
                continue
            in_gres_conf = sorted(
                {devices.get(n, {}).get(gres, 0) + devices.get(slurmconf.ALL_NODES, {}).get(gres, 0) for n in members}
            )
            if in_gres_conf != [want]:
                report(
                    f"{where}: slurm.conf gives {group} nodes {gres}:{want} but gres.conf in ConfigMap "
                    f"{describe(cm.resource_type, cm.props, cm.name)} defines {'/'.join(map(str, in_gres_conf))} "
                    f"{gres} devices for them; slurmd would register the node with the wrong count",
                    resource.urn,
                )


gpu_request_matches_gres = StackValidationPolicy(
    name="gpu-request-matches-gres",
    description=(
        "Every worker's nvidia.com/gpu / google.com/tpu limit equals the GRES count slurm.conf (ConfigMap "
        "slurm-config) gives that group's nodes, and gres.conf defines as many devices."
    ),
    validate=_validate_gres,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    remediation_steps=(
        "Change the pool's accelerator count in the cluster declaration, not the rendered objects: slonk-infra "
        "derives the pod limit, the NodeName Gres= and gres.conf from it. A worker edited by hand (or a "
        "StatefulSet from elsewhere) must request exactly the GRES its Slurm node advertises, or Slurm "
        "schedules jobs onto GPUs the pod does not hold."
    ),
)
