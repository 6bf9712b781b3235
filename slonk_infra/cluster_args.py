"""The cluster declaration as ``TypedDict`` types (generated: do not edit).

Generated from :mod:`slonk_infra.declaration` by ``python -m slonk_infra.typed_args``; a test fails
when this file is stale. Pydantic validates the values (allowed literals, ranges, cross-field rules)
when :class:`slonk_infra.Cluster` is constructed.
"""

# No ``from __future__ import annotations``: Pulumi's component analyzer reads these annotations.
from typing import NotRequired, TypedDict


class KubernetesArgs(TypedDict):
    """Where the Slurm cluster's Kubernetes objects go."""

    create: NotRequired[bool]
    """Create a GKE/EKS cluster (false: use an existing one). Default: False."""
    kubeconfig: NotRequired[str]
    """Kubeconfig path for an existing cluster."""
    context: NotRequired[str]
    """Kubeconfig context for an existing cluster."""
    version: NotRequired[str]
    """Kubernetes minor version of a created cluster. Default: 1.33."""
    namespace: NotRequired[str]
    """Namespace holding every Slurm object. Default: slurm."""


class ImageArgs(TypedDict):
    """The one container image every Slurm role runs."""

    reference: str
    """Image reference, pinned by digest: registry/repo[:tag]@sha256:..."""
    cuda_version: str
    """CUDA version the image carries."""
    slurm_version: str
    """Slurm version the image carries (decides what is rendered)."""


class AcceleratorRequestArgs(TypedDict):
    """A portable accelerator request, resolved to a machine type per cloud through the catalog."""

    type: str
    """Accelerator name from the catalog (h100, h200, b200, l4, ...)."""
    count: int
    """Accelerators per node."""


class ReservationArgs(TypedDict):
    """Capacity to consume: a named reservation (GCP) or capacity reservation / block (AWS)."""

    name: str
    """Reservation name (GCP) or capacity reservation id (AWS)."""
    capacity_block: NotRequired[bool]
    """AWS: the reservation is a Capacity Block. Default: False."""


class TaintArgs(TypedDict):
    """A Kubernetes node taint."""

    key: str
    """Taint key."""
    value: NotRequired[str]
    """Taint value."""
    effect: NotRequired[str]
    """Taint effect. One of: NoSchedule, PreferNoSchedule, NoExecute. Default: NoSchedule."""


class PoolArgs(TypedDict):
    """A pool of identical GPU or CPU nodes; one Kubernetes node pool and one worker StatefulSet."""

    name: str
    """Pool name; node pool, StatefulSet and Slurm node names derive from it."""
    kind: str
    """gpu or cpu (TPUs are declared under tpuSlices). One of: gpu, cpu."""
    accelerator: NotRequired[AcceleratorRequestArgs]
    """Portable request, e.g. {type: h100, count: 8}; resolved per cloud."""
    machine_type: NotRequired[str]
    """Explicit machine type (overrides resolution)."""
    machine_types: NotRequired[dict[str, str]]
    """Per-cloud machine type choice among those the request matches."""
    nodes: int
    """Nodes in the pool (= worker pod replicas)."""
    max_nodes: NotRequired[int]
    """Slurm node records kept for the pool; scaling up to it needs no config change."""
    spot: NotRequired[bool]
    """Use spot / preemptible capacity. Default: False."""
    reservation: NotRequired[ReservationArgs]
    """Reserved capacity to consume."""
    compact_placement: NotRequired[bool]
    """Compact placement / cluster placement group (default: on for GPU pools)."""
    labels: NotRequired[dict[str, str]]
    """Extra node labels."""
    taints: NotRequired[list[TaintArgs]]
    """Extra node taints."""
    features: NotRequired[list[str]]
    """Extra Slurm node Features."""


class TpuSliceArgs(TypedDict):
    """One or more identical TPU slices; each slice is its own node pool and worker StatefulSet."""

    name: str
    """Base name; slices are named <name>-0, <name>-1, ..."""
    generation: str
    """TPU generation (v4, v5e, v5p, v6e, tpu7x)."""
    topology: str
    """Slice topology, e.g. 4x4x4 (v5p) or 4x8 (v6e)."""
    slices: NotRequired[int]
    """Number of identical slices. Default: 1."""
    spot: NotRequired[bool]
    """Use spot capacity. Default: False."""
    reservation: NotRequired[ReservationArgs]
    """Reserved capacity to consume."""
    labels: NotRequired[dict[str, str]]
    """Extra node labels."""
    taints: NotRequired[list[TaintArgs]]
    """Extra node taints."""
    features: NotRequired[list[str]]
    """Extra Slurm node Features."""


class StorageArgs(TypedDict):
    """A shared filesystem mounted on every Slurm pod (ReadWriteMany)."""

    name: str
    """Volume name (home, scratch, ...)."""
    kind: str
    """filestore (GCP), efs / fsx-lustre (AWS), nfs-server, nfs-export. One of: filestore, efs, fsx-lustre, nfs-server, nfs-export."""
    capacity_gib: NotRequired[int]
    """Capacity in GiB. Default: 1024."""
    mount_path: NotRequired[str]
    """Mount path in every pod. Default: /home."""
    tier: NotRequired[str]
    """Filestore tier or FSx deployment type (cloud default)."""
    server: NotRequired[str]
    """nfs-export: NFS server address."""
    export_path: NotRequired[str]
    """nfs-export: exported path."""


class PartitionArgs(TypedDict):
    """A Slurm partition over some pools / slices."""

    name: str
    """Partition name."""
    pools: NotRequired[list[str]]
    """Pool or TPU slice base names, or '*' for every node."""
    priority_tier: NotRequired[int]
    """Higher tiers preempt lower ones. Default: 1."""
    default: NotRequired[bool]
    """Default partition for jobs that name none. Default: False."""
    max_time: NotRequired[str]
    """Slurm MaxTime. Default: UNLIMITED."""
    preempt_mode: NotRequired[str]
    """Per-partition PreemptMode (default: the cluster's). One of: OFF, REQUEUE, CANCEL, SUSPEND."""


class SlurmArgs(TypedDict):
    """Slurm settings that are not derived from hardware."""

    partitions: NotRequired[list[PartitionArgs]]
    """Partitions; default is the Slonk pattern (low / general / high plus one per accelerator)."""
    preempt_mode: NotRequired[str]
    """Cluster PreemptMode for partition_prio preemption. One of: OFF, REQUEUE, CANCEL, SUSPEND,GANG. Default: REQUEUE."""
    accounting: NotRequired[bool]
    """Job accounting through slurmdbd. Default: False."""
    accounting_host: NotRequired[str]
    """slurmdbd host when accounting is on."""
    gres_autodetect: NotRequired[str]
    """gres.conf AutoDetect (nvml needs an image built with NVML). One of: off, nvml. Default: off."""
    topology: NotRequired[str]
    """tree (topology.conf switches), block (topology/block), yaml (topology.yaml). One of: tree, block, yaml. Default: tree."""
    rest_api: NotRequired[bool]
    """Run slurmrestd (adds JWT auth). Default: False."""


class LoginArgs(TypedDict):
    """Login nodes."""

    replicas: NotRequired[int]
    """Login pods. Default: 1."""
    service_type: NotRequired[str]
    """Type of the SSH Service. One of: ClusterIP, LoadBalancer. Default: ClusterIP."""


class ControllerArgs(TypedDict):
    """The Slurm controller."""

    state_gib: NotRequired[int]
    """slurmctld state volume size in GiB. Default: 100."""
    storage_class: NotRequired[str]
    """StorageClass of the state volume."""


class GcpArgs(TypedDict):
    """GCP settings."""

    project: str
    """GCP project id."""
    network: NotRequired[str]
    """VPC network. Default: default."""
    subnetwork: NotRequired[str]
    """Subnetwork for nodes."""
    release_channel: NotRequired[str]
    """GKE release channel. One of: RAPID, REGULAR, STABLE, EXTENDED. Default: REGULAR."""


class AwsArgs(TypedDict):
    """AWS settings."""

    vpc_id: str
    """VPC id."""
    subnet_ids: list[str]
    """Private subnets; GPU groups use the first."""
    node_role_arn: NotRequired[str]
    """Existing node IAM role (else one is created)."""
    admin_role_arns: NotRequired[list[str]]
    """Principals given cluster admin access."""


class ClusterArgs(TypedDict):
    """A whole Slurm-on-Kubernetes cluster, declared once for any cloud."""

    name: str
    """Cluster name (Slurm ClusterName, cloud cluster)."""
    cloud: str
    """gcp, aws or local. One of: gcp, aws, local."""
    region: NotRequired[str]
    """Cloud region."""
    zone: NotRequired[str]
    """Zone (GCP) or availability zone (AWS) for GPU capacity."""
    kubernetes: NotRequired[KubernetesArgs]
    """Target Kubernetes."""
    image: ImageArgs
    """The one image for every Slurm role."""
    pools: NotRequired[list[PoolArgs]]
    """GPU and CPU worker pools."""
    tpu_slices: NotRequired[list[TpuSliceArgs]]
    """TPU slices."""
    storage: list[StorageArgs]
    """Shared filesystems; one mounts at /home."""
    slurm: NotRequired[SlurmArgs]
    """Slurm settings."""
    login: NotRequired[LoginArgs]
    """Login nodes."""
    controller: NotRequired[ControllerArgs]
    """Controller."""
    gcp: NotRequired[GcpArgs]
    """GCP settings (cloud: gcp)."""
    aws: NotRequired[AwsArgs]
    """AWS settings (cloud: aws)."""
