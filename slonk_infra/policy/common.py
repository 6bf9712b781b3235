"""What several policies of the pack share: configuration access, the shared schema pieces, machine
families, and the Slurm objects of a stack (config ConfigMaps and worker workloads)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from pulumi_policy import PolicyResource, ResourceValidationArgs, StackValidationArgs

from slonk_infra.clouds.registry import targets
from slonk_infra.policy.props import get, is_list, is_slurm, items, kind_of, known, pod_spec, worker_group
from slonk_infra.vocab import CONFIG_MAP as SLURM_CONFIG_MAP

# Where a team's image, registries and digests live: its own copy of the packaged policy-config.json,
# passed to both runners; never the copy inside the installed package.
CONFIG_FILE_HINT = (
    "the policy configuration the check ran with (`slonk-infra check --policy-config FILE`, "
    "`pulumi preview --policy-pack-config FILE`)"
)
STRING_LIST: dict[str, Any] = {"type": "array", "items": {"type": "string"}}

# The clouds' own resource types, from every registered target's descriptor (slonk_infra.clouds):
# a new target's clusters, filesystems and node pools are judged as soon as its descriptor names them.
_POLICY_TYPES = [t.policy_types for t in targets().values()]
MANAGED_CLUSTER_TYPES = frozenset(token for t in _POLICY_TYPES for token in t.managed_clusters)
STATEFUL_CLOUD_TYPES = {token: what for t in _POLICY_TYPES for token, what in t.stateful.items()}
ACCELERATOR_POOL_TYPES = {token: shape for t in _POLICY_TYPES for token, shape in t.accelerator_pools.items()}
TPU_SLICE_POOL_TYPES = frozenset(token for t in _POLICY_TYPES for token in t.tpu_slice_pools)

# Machine families by name: GKE GPU and TPU machine types, EKS GPU and Neuron instance types. The
# pack keeps its own families rather than reading the catalog: it also judges node pools the
# library did not create, whose machines the catalog need not list.
GKE_GPU_MACHINE_RE = re.compile(r"^(a2|a3|a4|a4x|g2|g4)-")
GKE_TPU_MACHINE_RE = re.compile(r"^(ct\d+[a-z]*|tpu\d+[a-z]*)-")
EKS_GPU_INSTANCE_RE = re.compile(r"^(p\d+[a-z]*|g\d+[a-z]*)\.")
EKS_NEURON_INSTANCE_RE = re.compile(r"^(trn\d+[a-z]*|inf\d+[a-z]*)\.")


def setting(args: ResourceValidationArgs | StackValidationArgs, key: str, default: Any = None) -> Any:
    """A policy configuration value; the CLI fills schema defaults, hand-built args may not."""
    value = args.get_config().get(key)
    return default if value is None else value


def strings(value: Any) -> list[str]:
    """A list of strings from a configured or property list; anything else is empty."""
    return [str(v) for v in value] if is_list(value) else []


def of_kind(resources: Iterable[PolicyResource], kind: str) -> list[PolicyResource]:
    """The Kubernetes resources of one kind."""
    return [r for r in resources if kind_of(r.resource_type) == kind]


def namespace_of(resource: PolicyResource) -> str:
    """A namespaced object's namespace (Kubernetes' default when unset)."""
    return str(known(resource.props, "metadata", "namespace", default="default"))


def slurm_configs(resources: list[PolicyResource]) -> dict[str, tuple[PolicyResource, str, str]]:
    """Namespace -> (ConfigMap, slurm.conf, gres.conf) of the Slurm config ConfigMaps."""
    out: dict[str, tuple[PolicyResource, str, str]] = {}
    for cm in of_kind(resources, "ConfigMap"):
        if get(cm.props, "metadata", "name") != SLURM_CONFIG_MAP:
            continue
        slurm_conf = get(cm.props, "data", "slurm.conf", default="")
        gres_conf = get(cm.props, "data", "gres.conf", default="")
        out[namespace_of(cm)] = (cm, str(slurm_conf), str(gres_conf))
    return out


def slurm_workers(resources: list[PolicyResource]) -> Iterable[tuple[PolicyResource, str, Any]]:
    """(resource, worker group, pod spec) of every Slurm worker workload."""
    for resource in resources:
        spec = pod_spec(resource.resource_type, resource.props)
        if spec is None or not is_slurm(resource.props):
            continue
        group = worker_group(resource.props)
        if group is not None:
            yield resource, group, spec


def node_selector(spec: Any) -> dict[str, str]:
    """A pod spec's nodeSelector as plain strings."""
    return {k: str(v) for k, v in items(get(spec, "nodeSelector"))}
