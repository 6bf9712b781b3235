"""EKS add-ons, device-plugin Helm releases and the block StorageClass of the AWS adapter (cluster-wide, created once).

From Kubernetes 1.30 EKS marks no StorageClass as default and the EBS CSI driver is an add-on, so
a claim on a new cluster stays Pending unless the add-on is installed and the claim names a class
it serves; both come from here. NetworkPolicies are only enforced once the vpc-cni add-on runs its
network policy agent, which is off by default (the setting is in the catalog, ``platform.yaml``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from slonk_infra import vocab
from slonk_infra.catalog import load_catalog
from slonk_infra.clouds.common import CloudComponent
from slonk_infra.plan import WorkerGroup

# Node DaemonSets: they run on whatever nodes join, so they need no node group to be created.
NODE_ADDONS = ("vpc-cni", "kube-proxy", "eks-pod-identity-agent")
# Add-ons with a Deployment: EKS reports them degraded until a node can run it.
DEPLOYMENT_ADDONS = ("coredns",)
STORAGE_ADDONS = {"efs": "aws-efs-csi-driver", "fsx-lustre": "aws-fsx-csi-driver"}
# Serves the block StorageClass every single-writer claim names (controller state, NFS server export).
EBS_CSI_ADDON = "aws-ebs-csi-driver"
EBS_CSI_CONTROLLER_SA = "ebs-csi-controller-sa"
EBS_CSI_POLICY = "arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"
# The EKS node monitoring agent: sets the AcceleratedHardwareReady, KernelReady, NetworkingReady... node
# conditions that node auto repair acts on (EKS user guide, "Detect node health issues with the EKS node
# monitoring agent", node-health-nma; "Automatically repair nodes in EKS clusters", node-repair). A DaemonSet:
# it needs no node group to be created.
NODE_MONITORING_ADDON = "eks-node-monitoring-agent"
# Its NVIDIA checks talk to a DCGM host engine, which the add-on runs as a second DaemonSet (dcgm-server)
# on GPU instance types with no tolerations by default (chart values.yaml `dcgmAgent.tolerations: []`),
# so it never lands on GPU nodes tainted nvidia.com/gpu; the agent then reports DCGMError, a fatal
# AcceleratedHardwareReady condition (pkg/reasons/reasons.go), on every GPU node. Tolerate every taint, as
# the agent itself does (`nodeAgent.tolerations: [{operator: Exists}]`). `dcgmAgent.tolerations` is in the
# add-on's configuration schema (charts/configuration.schema.json) of every published version
# (aws/eks-node-monitoring-agent, e939bff 2026-02-19 to 51af549 2026-08-18).
NODE_MONITORING_CONFIGURATION: dict[str, Any] = {"dcgmAgent": {"tolerations": [{"operator": "Exists"}]}}

NVIDIA_PLUGIN_CHART = ("nvidia-device-plugin", "0.20.0", "https://nvidia.github.io/k8s-device-plugin")
EFA_PLUGIN_CHART = ("aws-efa-k8s-device-plugin", "v0.5.30", "https://aws.github.io/eks-charts")
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"


def cluster_addons(
    owner: CloudComponent,
    cluster: aws.eks.Cluster,
    storage_kinds: set[str],
    system_group: pulumi.Resource,
    ebs_csi_role_arn: pulumi.Input[str],
    monitor_nodes: bool = False,
) -> dict[str, aws.eks.Addon]:
    """EKS add-ons: the node DaemonSets, coredns, the EBS CSI driver and the CSI drivers the declared storage needs.

    vpc-cni gets the network policy agent switched on (the NetworkPolicies the Slurm layer renders
    are otherwise ignored); the EBS CSI controller gets its AWS permissions through EKS Pod Identity.
    With ``monitor_nodes`` (node groups with node auto repair), the node monitoring agent too.
    """
    platform = load_catalog().platform.clouds["aws"]
    config = {
        platform.network_policy_addon: json.dumps(platform.network_policy_configuration, sort_keys=True),
        NODE_MONITORING_ADDON: json.dumps(NODE_MONITORING_CONFIGURATION, sort_keys=True),
    }
    wanted = [(a, False) for a in NODE_ADDONS] + [(a, True) for a in DEPLOYMENT_ADDONS]
    if monitor_nodes:
        wanted += [(NODE_MONITORING_ADDON, False)]
    wanted += [(EBS_CSI_ADDON, True)]
    wanted += [(STORAGE_ADDONS[k], True) for k in sorted(storage_kinds)]
    made: dict[str, aws.eks.Addon] = {}
    for addon, needs_nodes in wanted:
        made[addon] = aws.eks.Addon(
            owner.child_name("addon", addon),
            aws.eks.AddonArgs(
                cluster_name=cluster.name,
                addon_name=addon,
                configuration_values=config.get(addon),
                pod_identity_associations=(
                    [
                        aws.eks.AddonPodIdentityAssociationArgs(
                            role_arn=ebs_csi_role_arn, service_account=EBS_CSI_CONTROLLER_SA
                        )
                    ]
                    if addon == EBS_CSI_ADDON
                    else None
                ),
                # EKS pre-installs vpc-cni, kube-proxy and coredns as plain manifests; take them over.
                resolve_conflicts_on_create="OVERWRITE",
                resolve_conflicts_on_update="OVERWRITE",
            ),
            # A Deployment add-on stays DEGRADED (and the create times out) until a node can run it.
            opts=owner.child_opts(depends_on=[system_group] if needs_nodes else None),
        )
    return made


def block_storage_class(
    owner: CloudComponent, provider: k8s.Provider, depends_on: Sequence[pulumi.Resource] = ()
) -> k8s.storage.v1.StorageClass:
    """The gp3 StorageClass (catalog ``storage.yaml`` block_classes.aws) the Slurm layer's claims name.

    Volumes are kept when their claim goes (Retain): the controller's state outlives any redeploy.
    WaitForFirstConsumer creates each volume in the zone of the node its pod is scheduled to.
    """
    spec = load_catalog().storage.block_classes["aws"]
    if spec.name is None or spec.provisioner is None or spec.disk_type is None:
        raise ValueError("catalog storage.yaml block_classes.aws needs name, provisioner and disk_type")
    return k8s.storage.v1.StorageClass(
        owner.child_name("storageclass", spec.name),
        metadata=k8s.meta.v1.ObjectMetaArgs(name=spec.name, labels={vocab.PART_OF_LABEL: vocab.PART_OF}),
        provisioner=spec.provisioner,
        parameters={"type": spec.disk_type, "encrypted": "true"},
        reclaim_policy="Retain",
        volume_binding_mode="WaitForFirstConsumer",
        allow_volume_expansion=True,
        opts=owner.child_opts(provider=provider, depends_on=list(depends_on)),
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
