"""Accelerator node pools tainted: GKE node pools and EKS node groups with GPUs or TPUs carry the
NoSchedule taint of their accelerator, so only workloads that tolerate it land there."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
)

from slonk_infra.policy.common import (
    ACCELERATOR_POOL_TYPES,
    EKS_GPU_INSTANCE_RE,
    EKS_NEURON_INSTANCE_RE,
    GKE_GPU_MACHINE_RE,
    GKE_TPU_MACHINE_RE,
    strings,
)
from slonk_infra.policy.props import (
    as_int,
    describe,
    get,
    is_list,
)
from slonk_infra.vocab import GPU_RESOURCE, TPU_RESOURCE

NEURON_RESOURCE = "aws.amazon.com/neuron"

TaintCheck = tuple[str, str | None, set[str]]
"""(field holding the taints, the accelerator resource whose taint is needed or None, taint keys present)."""


def _no_schedule(effect: Any) -> bool:
    return isinstance(effect, str) and effect.replace("_", "").lower() == "noschedule"


def _taint_keys(taints: Any) -> set[str]:
    if not is_list(taints):
        return set()
    return {str(get(t, "key")) for t in taints if _no_schedule(get(t, "effect"))}


def _gke_needed_taint(node_config: Any, placement: Any) -> str | None:
    machine = str(get(node_config, "machineType", default=""))
    accelerators = get(node_config, "guestAccelerators", default=[])
    if get(placement, "tpuTopology") or GKE_TPU_MACHINE_RE.match(machine):
        return TPU_RESOURCE
    has_gpus = is_list(accelerators) and any((as_int(get(a, "count")) or 0) > 0 for a in accelerators)
    if has_gpus or GKE_GPU_MACHINE_RE.match(machine):
        return GPU_RESOURCE
    return None


def _gke_node_pool(props: Any) -> list[TaintCheck]:
    config = get(props, "nodeConfig")
    needed = _gke_needed_taint(config, get(props, "placementPolicy"))
    return [("nodeConfig.taints", needed, _taint_keys(get(config, "taints")))]


def _gke_cluster(props: Any) -> list[TaintCheck]:
    checks: list[TaintCheck] = []
    config = get(props, "nodeConfig")
    if config is not None:
        checks.append(("nodeConfig.taints", _gke_needed_taint(config, None), _taint_keys(get(config, "taints"))))
    for i, pool in enumerate(get(props, "nodePools", default=[])):
        pool_config = get(pool, "nodeConfig")
        needed = _gke_needed_taint(pool_config, get(pool, "placementPolicy"))
        checks.append((f"nodePools[{i}].nodeConfig.taints", needed, _taint_keys(get(pool_config, "taints"))))
    return checks


def _eks_node_group(props: Any) -> list[TaintCheck]:
    instances = strings(get(props, "instanceTypes"))
    ami = str(get(props, "amiType", default="")).upper()
    needed = None
    if "NEURON" in ami or any(EKS_NEURON_INSTANCE_RE.match(i) for i in instances):
        needed = NEURON_RESOURCE
    elif "NVIDIA" in ami or "GPU" in ami or any(EKS_GPU_INSTANCE_RE.match(i) for i in instances):
        needed = GPU_RESOURCE
    return [("taints", needed, _taint_keys(get(props, "taints")))]


# How each node pool shape a target's descriptor names (PolicyTypes.accelerator_pools) is read.
READERS: dict[str, Callable[[Any], list[TaintCheck]]] = {
    "gke-node-pool": _gke_node_pool,
    "gke-cluster": _gke_cluster,
    "eks-node-group": _eks_node_group,
}
# Resource type -> reader; a descriptor naming a shape without a reader fails here, on import.
ACCELERATOR_POOLS = {token: READERS[shape] for token, shape in ACCELERATOR_POOL_TYPES.items()}


def _validate_tainted(args: ResourceValidationArgs, report: ReportViolation) -> None:
    read = ACCELERATOR_POOLS.get(args.resource_type)
    if read is None:
        return
    where = describe(args.resource_type, args.props, args.name)
    for field, needed, present in read(args.props):
        if needed and needed not in present:
            report(
                f"{where}: accelerator nodes without the {needed} NoSchedule taint in {field} "
                f"(has {sorted(present) or 'none'}); any pod could land on them and hold the accelerators' CPUs "
                "and memory",
                None,
            )


gpu_node_pools_tainted = ResourceValidationPolicy(
    name="gpu-node-pools-tainted",
    description=(
        "GKE node pools and EKS node groups with GPUs or TPUs carry the nvidia.com/gpu (or google.com/tpu) "
        "NoSchedule taint, so only workloads that tolerate it land there."
    ),
    validate=_validate_tainted,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.MEDIUM,
    remediation_steps=(
        "Add the taint to the pool (GKE nodeConfig.taints / EKS taints): key nvidia.com/gpu (TPU: google.com/tpu), "
        "value present, effect NO_SCHEDULE. slonk-infra's adapters add it for every gpu/tpu pool and give the "
        "Slurm workers the matching toleration."
    ),
)
