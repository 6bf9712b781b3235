"""EKS add-ons and device-plugin Helm releases of the AWS adapter (cluster-wide, created once)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from slonk_infra.clouds.common import CloudComponent
from slonk_infra.plan import WorkerGroup

# Node DaemonSets: they run on whatever nodes join, so they need no node group to be created.
NODE_ADDONS = ("vpc-cni", "kube-proxy", "eks-pod-identity-agent")
# Add-ons with a Deployment: EKS reports them degraded until a node can run it.
DEPLOYMENT_ADDONS = ("coredns",)
STORAGE_ADDONS = {"efs": "aws-efs-csi-driver", "fsx-lustre": "aws-fsx-csi-driver"}

NVIDIA_PLUGIN_CHART = ("nvidia-device-plugin", "0.20.0", "https://nvidia.github.io/k8s-device-plugin")
EFA_PLUGIN_CHART = ("aws-efa-k8s-device-plugin", "v0.5.30", "https://aws.github.io/eks-charts")
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"


def cluster_addons(
    owner: CloudComponent, cluster: aws.eks.Cluster, storage_kinds: set[str], system_group: pulumi.Resource
) -> None:
    """EKS add-ons: the node DaemonSets, coredns and the CSI drivers the declared storage needs."""
    wanted = [(a, False) for a in NODE_ADDONS] + [(a, True) for a in DEPLOYMENT_ADDONS]
    wanted += [(STORAGE_ADDONS[k], True) for k in sorted(storage_kinds)]
    for addon, needs_nodes in wanted:
        aws.eks.Addon(
            owner.child_name("addon", addon),
            aws.eks.AddonArgs(
                cluster_name=cluster.name,
                addon_name=addon,
                # EKS pre-installs vpc-cni, kube-proxy and coredns as plain manifests; take them over.
                resolve_conflicts_on_create="OVERWRITE",
                resolve_conflicts_on_update="OVERWRITE",
            ),
            # A Deployment add-on stays DEGRADED (and the create times out) until a node can run it.
            opts=owner.child_opts(depends_on=[system_group] if needs_nodes else None),
        )


def device_plugins(
    owner: CloudComponent,
    provider: k8s.Provider,
    gpu_groups: Sequence[WorkerGroup],
    efa_groups: Sequence[WorkerGroup],
) -> None:
    """The NVIDIA device plugin on GPU instance types, and the EFA plugin where there are EFA groups."""
    if not gpu_groups:
        return
    tolerate_all = [{"operator": "Exists"}]
    gpu_types = sorted({g.machine.name for g in gpu_groups})
    chart, version, repo = NVIDIA_PLUGIN_CHART
    # The chart's default affinity waits for node-feature-discovery labels that EKS does not set.
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": INSTANCE_TYPE_LABEL, "operator": "In", "values": gpu_types}]}
                ]
            }
        }
    }
    _release(owner, chart, version, repo, {"affinity": affinity, "tolerations": tolerate_all}, provider)
    if efa_groups:
        chart, version, repo = EFA_PLUGIN_CHART
        efa_types = sorted({g.machine.name for g in efa_groups})
        values = {
            "supportedInstanceLabels": {"keys": [INSTANCE_TYPE_LABEL], "values": efa_types},
            "tolerations": tolerate_all,
        }
        _release(owner, chart, version, repo, values, provider)


def _release(
    owner: CloudComponent, chart: str, version: str, repo: str, values: Mapping[str, Any], provider: k8s.Provider
) -> k8s.helm.v3.Release:
    return k8s.helm.v3.Release(
        owner.child_name(chart),
        k8s.helm.v3.ReleaseArgs(
            name=chart,
            chart=chart,
            version=version,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=repo),
            namespace="kube-system",
            values=dict(values),
            # GPU nodes may not exist yet (a Capacity Block that starts later); do not wait for pods.
            skip_await=True,
        ),
        opts=owner.child_opts(provider=provider),
    )
