"""The cluster declaration: one typed model read from a stack's structured config.

This is the single source of truth. Everything else (node pools, StatefulSets, Slurm files,
topology, policies) is derived from a validated :class:`ClusterDeclaration` through
:mod:`slonk_infra.plan`. Field names are camelCase in YAML (Pulumi config style) and snake_case
in Python. Checks that need only one field live here; checks that need the catalog or the whole
declaration live in :mod:`slonk_infra.plan`. Fields typed :data:`CloudRef`
name an existing cloud object and may be given as a Pulumi Output (:mod:`slonk_infra.declaration.inputs`).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter, model_validator
from pydantic.alias_generators import to_camel

from slonk_infra.catalog import Cloud, PoolKind
from slonk_infra.declaration.accounting import AccountingSpec, read_legacy
from slonk_infra.declaration.users import DirectorySpec, Users
from slonk_infra.health.config import HealthSpec
from slonk_infra.ops.config import OperationsSpec

DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# OCI distribution reference: [registry[:port]/]path[:tag][@sha256:<64 hex>]
IMAGE_REFERENCE = re.compile(
    r"^(?P<name>(?:(?P<registry>[a-zA-Z0-9.-]+(?::[0-9]+)?)/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
    r"(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*)"
    r"(?::(?P<tag>[\w][\w.-]{0,127}))?"
    r"(?:@(?P<digest>sha256:[a-f0-9]{64}))?$"
)
VERSION = re.compile(r"^\d+\.\d+(\.\d+)?$")
# Slurm's time string, as slurmctld reads MaxTime (slurm.conf(5); src/common/parse_time.c): MINUTES,
# MINUTES:SECONDS, HOURS:MINUTES:SECONDS, DAYS-HOURS, DAYS-HOURS:MINUTES, DAYS-HOURS:MINUTES:SECONDS.
SLURM_TIME = re.compile(r"^(\d+-\d+(:\d+(:\d+)?)?|\d+(:\d+(:\d+)?)?)$")
SLURM_TIME_FORMS = "MINUTES, MM:SS, HH:MM:SS, DAYS-HH, DAYS-HH:MM, DAYS-HH:MM:SS or UNLIMITED"
MAX_POOL_NAME = 30


def _dns_label(max_len: int) -> AfterValidator:
    def check(value: str) -> str:
        if len(value) > max_len:
            raise ValueError(f"{value!r} is {len(value)} characters; at most {max_len} are allowed")
        if not DNS_LABEL.match(value):
            raise ValueError(
                f"{value!r} is not a DNS-1123 label: use lowercase letters, digits and '-', "
                "starting with a letter and ending with a letter or digit"
            )
        return value

    return AfterValidator(check)


def _version(value: str) -> str:
    if not VERSION.match(value):
        raise ValueError(f"{value!r} is not a version like 25.05 or 12.8")
    return value


def _slurm_time(value: str) -> str:
    # slurmctld refuses to start on a MaxTime it cannot parse ("48h"), so it is refused here, by field.
    if value.upper() in ("UNLIMITED", "INFINITE") or SLURM_TIME.match(value):
        return value
    raise ValueError(f"{value!r} is not a Slurm time: use {SLURM_TIME_FORMS}")


def _cidr(value: str) -> str:
    try:
        ipaddress.ip_network(value, strict=True)
    except ValueError as exc:
        raise ValueError(f"{value!r} is not a CIDR range like 203.0.113.0/24 ({exc})") from None
    return value


def _image(value: str) -> str:
    if not IMAGE_REFERENCE.match(value):
        raise ValueError(
            f"{value!r} is not a parseable image reference; expected registry/repository[:tag][@sha256:<digest>]"
        )
    return value


PoolName = Annotated[str, _dns_label(MAX_POOL_NAME)]


@dataclass(frozen=True)
class AcceptsOutput:
    """The mark of a field that a program may give as a Pulumi Output (:mod:`slonk_infra.declaration.inputs`)."""


ACCEPTS_OUTPUT = AcceptsOutput()
CloudRef = Annotated[str, ACCEPTS_OUTPUT]
"""A string naming an existing cloud object (a project, VPC, subnet, reservation, kubeconfig); a program may
give it as a Pulumi Output, held as a stand-in through validation (:mod:`slonk_infra.declaration.inputs`)."""
Version = Annotated[str, AfterValidator(_version)]


class Model(BaseModel):
    """Base for declaration models: camelCase aliases, unknown keys rejected, immutable."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


class KubernetesSpec(Model):
    """Where the Slurm cluster's Kubernetes objects go."""

    create: bool = Field(default=False, description="Create a GKE/EKS cluster (false: use an existing one).")
    kubeconfig: CloudRef | None = Field(
        default=None, description="Kubeconfig (a path, or its contents) of an existing cluster."
    )
    context: CloudRef | None = Field(default=None, description="Kubeconfig context for an existing cluster.")
    version: Version = Field(
        default="1.33",
        description="Kubernetes minor version of a created cluster (of an existing one: the version it runs). "
        "1.29 or later: every Slurm pod runs munged as a native sidecar container (SidecarContainers, on by "
        "default from 1.29).",
    )
    namespace: Annotated[str, _dns_label(63)] = Field(
        default="slurm", description="Namespace holding every Slurm object."
    )
    system_nodes: int = Field(
        default=2,
        ge=1,
        le=10,
        description="gcp/aws: nodes of the system pool the library creates for the controller, login and "
        "slurmrestd pods (at least controller.replicas: two controllers never share a node).",
    )
    authorized_networks: list[Annotated[str, AfterValidator(_cidr)]] | None = Field(
        default=None,
        description="gcp/aws with create: the CIDRs that may reach the created cluster's public control-plane "
        "endpoint (GKE master authorized networks, EKS publicAccessCidrs): your office, VPN or CI runner, "
        "where `pulumi up` runs. Required when the library creates the cluster; ['0.0.0.0/0'] opens the "
        "endpoint to the internet on purpose.",
    )


class AcceleratorRequest(Model):
    """A portable accelerator request, resolved to a machine type per cloud through the catalog."""

    type: str = Field(description="Accelerator name from the catalog (h100, h200, b200, l4, ...).")
    count: int = Field(gt=0, description="Accelerators per node.")


class Taint(Model):
    """A Kubernetes node taint."""

    key: str = Field(min_length=1, description="Taint key.")
    value: str = Field(default="", description="Taint value.")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = Field(
        default="NoSchedule", description="Taint effect."
    )


class Reservation(Model):
    """Capacity to consume: a named reservation (GCP) or capacity reservation / block (AWS)."""

    name: CloudRef = Field(min_length=1, description="Reservation name (GCP) or capacity reservation id (AWS).")
    capacity_block: bool = Field(default=False, description="AWS: the reservation is a Capacity Block.")


class PoolSpec(Model):
    """A pool of identical GPU or CPU nodes; one Kubernetes node pool and one worker StatefulSet."""

    name: PoolName = Field(description="Pool name; node pool, StatefulSet and Slurm node names derive from it.")
    kind: Literal["gpu", "cpu"] = Field(description="gpu or cpu (TPUs are declared under tpuSlices).")
    accelerator: AcceleratorRequest | None = Field(
        default=None, description="Portable request, e.g. {type: h100, count: 8}; resolved per cloud."
    )
    machine_type: str | None = Field(default=None, description="Explicit machine type (overrides resolution).")
    machine_types: dict[Cloud, str] = Field(
        default_factory=dict, description="Per-cloud machine type choice among those the request matches."
    )
    nodes: int = Field(gt=0, description="Nodes in the pool (= worker pod replicas).")
    max_nodes: int | None = Field(
        default=None, gt=0, description="Slurm node records kept for the pool; scaling up to it needs no config change."
    )
    spot: bool = Field(default=False, description="Use spot / preemptible capacity.")
    reservation: Reservation | None = Field(default=None, description="Reserved capacity to consume.")
    compact_placement: bool | None = Field(
        default=None, description="Compact placement / cluster placement group (default: on for GPU pools)."
    )
    labels: dict[str, str] = Field(default_factory=dict, description="Extra node labels.")
    taints: list[Taint] = Field(default_factory=list, description="Extra node taints.")
    features: list[str] = Field(default_factory=list, description="Extra Slurm node Features.")

    @model_validator(mode="after")
    def _shape(self) -> PoolSpec:
        if self.max_nodes is not None and self.max_nodes < self.nodes:
            raise ValueError(f"maxNodes {self.max_nodes} is below nodes {self.nodes}")
        if self.kind == "cpu" and self.accelerator is not None:
            raise ValueError("a cpu pool cannot request an accelerator; use kind: gpu")
        if self.kind == "gpu" and self.accelerator is None and self.machine_type is None:
            raise ValueError("a gpu pool needs accelerator {type, count} or machineType")
        if self.kind == "cpu" and self.machine_type is None and not self.machine_types:
            raise ValueError("a cpu pool needs machineType (or machineTypes per cloud)")
        _spot_or_reservation(self.spot, self.reservation)
        return self

    @property
    def placement(self) -> bool:
        """Whether compact placement is requested."""
        return self.kind == "gpu" if self.compact_placement is None else self.compact_placement


class TpuSliceSpec(Model):
    """One or more identical TPU slices; each slice is its own node pool and worker StatefulSet."""

    name: Annotated[str, _dns_label(MAX_POOL_NAME - 4)] = Field(
        description="Base name; slices are named <name>-0, <name>-1, ..."
    )
    generation: str = Field(description="TPU generation (v4, v5e, v5p, v6e, tpu7x).")
    topology: str = Field(description="Slice topology, e.g. 4x4x4 (v5p) or 4x8 (v6e).")
    slices: int = Field(default=1, gt=0, description="Number of identical slices.")
    spot: bool = Field(default=False, description="Use spot capacity.")
    reservation: Reservation | None = Field(default=None, description="Reserved capacity to consume.")
    labels: dict[str, str] = Field(default_factory=dict, description="Extra node labels.")
    taints: list[Taint] = Field(default_factory=list, description="Extra node taints.")
    features: list[str] = Field(default_factory=list, description="Extra Slurm node Features.")

    @model_validator(mode="after")
    def _capacity(self) -> TpuSliceSpec:
        _spot_or_reservation(self.spot, self.reservation)
        return self


def _spot_or_reservation(spot: bool, reservation: Reservation | None) -> None:
    # Spot VMs never consume reserved capacity (Compute Engine reservations and EC2 capacity
    # reservations / Capacity Blocks are on-demand only), so the node pool or node group the
    # pair would render cannot be created.
    if spot and reservation is not None:
        raise ValueError(
            f"spot: true and reservation {reservation.name!r} cannot be combined: spot capacity never "
            "consumes a reservation; remove spot or the reservation"
        )


StorageKind = Literal["filestore", "efs", "fsx-lustre", "nfs-server", "nfs-export"]


class StorageSpec(Model):
    """A shared filesystem mounted on every Slurm pod (ReadWriteMany)."""

    name: Annotated[str, _dns_label(20)] = Field(description="Volume name (home, scratch, ...).")
    kind: StorageKind = Field(description="filestore (GCP), efs / fsx-lustre (AWS), nfs-server, nfs-export.")
    capacity_gib: int = Field(default=1024, gt=0, description="Capacity in GiB.")
    mount_path: str = Field(default="/home", pattern=r"^/[^\s:]*$", description="Mount path in every pod.")
    tier: str | None = Field(default=None, description="Filestore tier or FSx deployment type (cloud default).")
    server: str | None = Field(default=None, description="nfs-export: NFS server address.")
    export_path: str | None = Field(default=None, description="nfs-export: exported path.")

    @model_validator(mode="after")
    def _export(self) -> StorageSpec:
        if self.kind == "nfs-export" and not (self.server and self.export_path):
            raise ValueError("nfs-export needs server and exportPath")
        return self


class PartitionSpec(Model):
    """A Slurm partition over some pools / slices."""

    name: Annotated[str, _dns_label(30)] = Field(description="Partition name.")
    pools: list[str] = Field(
        default_factory=lambda: ["*"], description="Pool or TPU slice base names, or '*' for every node."
    )
    priority_tier: int = Field(default=1, ge=1, le=65533, description="Higher tiers preempt lower ones.")
    default: bool = Field(default=False, description="Default partition for jobs that name none.")
    max_time: Annotated[str, AfterValidator(_slurm_time)] = Field(
        default="UNLIMITED",
        description="Slurm MaxTime: MINUTES, MM:SS, HH:MM:SS, DAYS-HH, DAYS-HH:MM, DAYS-HH:MM:SS or UNLIMITED.",
    )
    preempt_mode: Literal["OFF", "REQUEUE", "CANCEL", "SUSPEND"] | None = Field(
        default=None, description="Per-partition PreemptMode (default: the cluster's)."
    )
    allow_qos: list[str] = Field(
        default_factory=list,
        description="QOS whose jobs may run here (AllowQos; declared in slurm.accounting.qos, or normal); "
        "default: every QOS.",
    )


def _also_boolean(schema: dict[str, Any]) -> None:
    schema.setdefault("anyOf", []).append({"type": "boolean"})


class SlurmSpec(Model):
    """Slurm settings that are not derived from hardware."""

    partitions: list[PartitionSpec] | None = Field(
        default=None,
        description="Partitions; default is the Slonk pattern (low / general / high plus one per accelerator).",
    )
    preempt_mode: Literal["OFF", "REQUEUE", "CANCEL", "SUSPEND,GANG"] = Field(
        default="REQUEUE", description="Cluster PreemptMode for partition_prio preemption."
    )
    accounting: AccountingSpec | None = Field(
        default=None,
        # The old boolean form still reads (the before-validator below): the schema must accept it too.
        json_schema_extra=_also_boolean,
        description="Job accounting through slurmdbd, fair share and quotas: the database, priority weights, "
        "accounts and QOS (docs/accounting.md); unset: none. The old `true` (with accountingHost) still reads, as "
        "an external slurmdbd that only records jobs; `false` is unset.",
    )
    accounting_host: str | None = Field(
        default=None,
        description="The old form: with accounting: true, the existing slurmdbd's host (read as "
        "accounting.database {kind: external, host}). New stacks use accounting.database.host.",
    )
    gres_autodetect: Literal["off", "nvml"] = Field(
        default="off", description="gres.conf AutoDetect (nvml needs an image built with NVML)."
    )
    topology: Literal["tree", "block", "yaml"] = Field(
        default="tree", description="tree (topology.conf switches), block (topology/block), yaml (topology.yaml)."
    )
    rest_api: bool = Field(default=False, description="Run slurmrestd (adds JWT auth).")

    @model_validator(mode="before")
    @classmethod
    def _accounting(cls, data: Any) -> Any:
        # Stacks written for `accounting: true` + accountingHost keep working (docs/accounting.md).
        return read_legacy(data)


class ImageSpec(Model):
    """The one container image every Slurm role runs."""

    reference: Annotated[str, AfterValidator(_image)] = Field(
        description="Image reference, pinned by digest: registry/repo[:tag]@sha256:..."
    )
    cuda_version: Version = Field(description="CUDA version the image carries.")
    slurm_version: Version = Field(description="Slurm version the image carries (decides what is rendered).")


class LoginSpec(Model):
    """Login nodes."""

    replicas: int = Field(default=1, ge=1, le=16, description="Login pods.")
    service_type: Literal["ClusterIP", "LoadBalancer"] = Field(
        default="ClusterIP", description="Type of the SSH Service."
    )
    load_balancer_source_ranges: list[Annotated[str, AfterValidator(_cidr)]] | None = Field(
        default=None,
        description="CIDRs that may reach a LoadBalancer login Service. Default on gcp/aws: the private "
        "ranges only (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16), never the whole internet; list your "
        "offices' or VPN's ranges, or ['0.0.0.0/0'] to open SSH to the world on purpose. When every range "
        "is private the load balancer is the cloud's internal one (reached from the VPC, a peered network "
        "or a VPN); a public range makes it internet-facing (on aws: in aws.publicSubnetIds).",
    )


CRON_FIELD = re.compile(r"^[0-9*,/-]+$")


def _cron(value: str) -> str:
    fields = value.split()
    if len(fields) != 5 or not all(CRON_FIELD.match(f) for f in fields):
        raise ValueError(
            f"{value!r} is not a five-field cron schedule (minute hour day-of-month month day-of-week) "
            "of digits, '*', ',', '-' and '/', like '*/30 * * * *'"
        )
    return value


class StateBackupSpec(Model):
    """Scheduled archives of slurmctld's state (StateSaveLocation) on a declared shared filesystem."""

    storage: str = Field(
        description="Name of the declared storage (storage[].name) the archives go to, under "
        ".slurm/<cluster>/backups; readable by the slurm user only."
    )
    schedule: Annotated[str, AfterValidator(_cron)] = Field(
        default="*/30 * * * *", description="When to archive, as a Kubernetes CronJob schedule (UTC)."
    )
    keep: int = Field(default=48, ge=1, le=10000, description="Archives kept; older ones are removed.")


class ControllerSpec(Model):
    """The Slurm controller."""

    state_gib: int = Field(default=100, gt=0, description="slurmctld state volume size in GiB.")
    storage_class: str | None = Field(default=None, description="StorageClass of the state volume.")
    replicas: int = Field(
        default=1,
        ge=1,
        le=2,
        description="slurmctld pods: 1, or 2 for a primary and a backup controller (Slurm HA) on different "
        "nodes (and zones where the system pool spans several); 2 needs stateStorage.",
    )
    state_storage: str | None = Field(
        default=None,
        description="Name of a declared shared filesystem (storage[].name) holding StateSaveLocation, under "
        ".slurm/<cluster>/state, so a backup controller can take over; required with replicas: 2. Unset: "
        "the state is on a volume of its own (stateGib, storageClass).",
    )
    takeover_seconds: int = Field(
        default=15,
        ge=10,
        le=600,
        description="With replicas: 2, how long the backup waits for a primary that neither answers nor writes "
        "its heartbeat before it takes control (SlurmctldTimeout; with one controller it is 120). Shorter "
        "fails over sooner; longer rides out a primary pod's restart or a network pause without a takeover "
        "and the hand-back that follows (docs/node-lifecycle.md).",
    )
    backup: StateBackupSpec | None = Field(
        default=None, description="Scheduled archives of the controller state (off when unset)."
    )


Weekday = Literal["MO", "TU", "WE", "TH", "FR", "SA", "SU"]
WEEKEND: tuple[Weekday, ...] = ("SA", "SU")


class GcpMaintenanceSpec(Model):
    """When GKE may upgrade a created cluster: a weekly window, and a hold on node upgrades.

    GKE requires at least 48 hours of maintenance availability in any 32 days, counted only in
    windows of 4 hours or more (https://cloud.google.com/kubernetes-engine/docs/how-to/maintenance-windows-and-exclusions);
    the check counts ``windowHours`` x days x 4 weeks.
    """

    window_start: str = Field(
        default="03:00",
        pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$",
        description="UTC time of day (HH:MM) the maintenance window opens on each of `days`.",
    )
    window_hours: int = Field(default=8, ge=4, le=24, description="Length of each window in hours (GKE: 4 or more).")
    days: list[Weekday] = Field(
        default_factory=lambda: list(WEEKEND),
        min_length=1,
        description="UTC weekdays the window recurs on (RFC 5545 BYDAY spelling).",
    )
    hold_node_upgrades: bool = Field(
        default=True,
        description="Hold every automatic minor and node upgrade (GKE maintenance exclusion "
        "NO_MINOR_OR_NODE_UPGRADES until the version's end of support): a GPU/TPU node is never upgraded in the "
        "middle of a run; the control plane still gets patches in the window. Upgrade nodes on purpose (docs/clouds.md, Maintenance).",
    )


class GcpSpec(Model):
    """GCP settings."""

    project: CloudRef = Field(min_length=1, description="GCP project id.")
    network: CloudRef = Field(default="default", description="VPC network.")
    subnetwork: CloudRef | None = Field(default=None, description="Subnetwork for nodes.")
    release_channel: Literal["RAPID", "REGULAR", "STABLE", "EXTENDED"] = Field(
        default="REGULAR", description="GKE release channel."
    )
    gpu_network_range: Annotated[str, AfterValidator(_cidr)] = Field(
        default="192.168.0.0/16",
        description="Private IPv4 range the GPU NIC subnets (GPUDirect-TCPXO/RDMA VPCs the library creates) are "
        "carved from, /8 to /19; must not overlap the cluster's own network (GKE's guides use 192.168.0.0/16).",
    )
    maintenance: GcpMaintenanceSpec = Field(
        default_factory=GcpMaintenanceSpec,
        description="Maintenance window and upgrade hold of a created GKE cluster.",
    )
    periodic_host_maintenance: bool = Field(
        default=True,
        description="Give GPU pools the host maintenance interval the catalog names for their machine (PERIODIC on "
        "A3 High and A3 Mega: announced, scheduled host maintenance). It selects the capacity pool the VMs come "
        "from; set false when your reservation or capacity is not in a periodic-maintenance pool.",
    )


class AwsSpec(Model):
    """AWS settings."""

    vpc_id: CloudRef = Field(min_length=1, description="VPC id.")
    subnet_ids: list[CloudRef] = Field(
        min_length=1,
        description="Private subnets of the VPC, one per Availability Zone: the cluster, the system and CPU groups "
        "and EFS use them all; GPU groups and FSx use the first one in `zone` (looked up at deploy time; a zone "
        "none of them is in stops the deploy), or the first subnet when `zone` is unset. Tagged "
        "kubernetes.io/role/internal-elb=1 when the login Service is a LoadBalancer.",
    )
    public_subnet_ids: list[CloudRef] = Field(
        default_factory=list,
        description="Public subnets (routed to an internet gateway) for an internet-facing login load balancer: "
        "required when login.loadBalancerSourceRanges lists a public range; tagged kubernetes.io/role/elb=1.",
    )
    node_role_arn: CloudRef | None = Field(default=None, description="Existing node IAM role (else one is created).")
    admin_role_arns: list[str] = Field(default_factory=list, description="Principals given cluster admin access.")


class ClusterDeclaration(Model):
    """A whole Slurm-on-Kubernetes cluster, declared once for any cloud."""

    name: Annotated[str, _dns_label(30)] = Field(description="Cluster name (Slurm ClusterName, cloud cluster).")
    cloud: Cloud = Field(description="gcp, aws or local.")
    region: str | None = Field(default=None, description="Cloud region.")
    zone: str | None = Field(
        default=None,
        description="GCP: the zone of the GPU/TPU pools (and the system pool, zonal Filestore). AWS: checked "
        "against the region only; GPU groups and FSx run in the Availability Zone of aws.subnetIds[0], which "
        "must be your reservation's.",
    )
    kubernetes: KubernetesSpec = Field(default_factory=KubernetesSpec, description="Target Kubernetes.")
    image: ImageSpec = Field(description="The one image for every Slurm role.")
    pools: list[PoolSpec] = Field(default_factory=list, description="GPU and CPU worker pools.")
    tpu_slices: list[TpuSliceSpec] = Field(default_factory=list, description="TPU slices.")
    storage: list[StorageSpec] = Field(min_length=1, description="Shared filesystems; one mounts at /home.")
    slurm: SlurmSpec = Field(default_factory=SlurmSpec, description="Slurm settings.")
    login: LoginSpec = Field(default_factory=LoginSpec, description="Login nodes.")
    controller: ControllerSpec = Field(default_factory=ControllerSpec, description="Controller.")
    gcp: GcpSpec | None = Field(default=None, description="GCP settings (cloud: gcp).")
    aws: AwsSpec | None = Field(default=None, description="AWS settings (cloud: aws).")
    health: HealthSpec = Field(
        default_factory=HealthSpec,
        description="Node health-check thresholds (slonk-health at pod start, on Slurm's interval, in prolog/epilog); "
        "GPU and TPU counts per node come from the catalog.",
    )
    users: Users = Field(
        default_factory=list,
        description="People who log in and run jobs: name, uid, gid, SSH keys, sudo; the same on every pod.",
    )
    directory: DirectorySpec | None = Field(
        default=None, description="An LDAP directory to resolve further users from through SSSD (optional)."
    )
    operations: OperationsSpec = Field(
        default_factory=OperationsSpec,
        description="The operations controller (Slurm <-> Kubernetes state sync, remediation, metrics); "
        "off by default, needs slurm.restApi.",
    )


class GcpClusterDeclaration(ClusterDeclaration):
    """``cloud: gcp``: a cluster on GKE; the ``gcp`` settings are required, ``aws`` is not allowed."""

    cloud: Literal["gcp"] = Field(description="gcp.")
    gcp: GcpSpec = Field(description="GCP settings (at least project).")
    aws: None = Field(default=None, description="Not allowed with cloud: gcp.")


class AwsClusterDeclaration(ClusterDeclaration):
    """``cloud: aws``: a cluster on EKS; the ``aws`` settings are required, ``gcp`` is not allowed."""

    cloud: Literal["aws"] = Field(description="aws.")
    aws: AwsSpec = Field(description="AWS settings (at least vpcId and subnetIds).")
    gcp: None = Field(default=None, description="Not allowed with cloud: aws.")


class LocalClusterDeclaration(ClusterDeclaration):
    """``cloud: local``: an existing cluster (kind, k3d, minikube); no cloud settings."""

    cloud: Literal["local"] = Field(description="local.")
    gcp: None = Field(default=None, description="Not allowed with cloud: local.")
    aws: None = Field(default=None, description="Not allowed with cloud: local.")


# The declaration as read from a stack: one type per cloud, picked by ``cloud``. Adding a target adds
# its class here (and its rules and adapter in slonk_infra/clouds/).
TAGGED: TypeAdapter[GcpClusterDeclaration | AwsClusterDeclaration | LocalClusterDeclaration] = TypeAdapter(
    Annotated[
        GcpClusterDeclaration | AwsClusterDeclaration | LocalClusterDeclaration,
        Field(discriminator="cloud"),
    ]
)
CLOUD_TAGS: tuple[str, ...] = ("gcp", "aws", "local")


def parse_declaration(raw: Mapping[str, Any] | ClusterDeclaration) -> ClusterDeclaration:
    """The tagged declaration of ``raw`` (raises pydantic's ValidationError, locations led by the tag)."""
    if isinstance(raw, GcpClusterDeclaration | AwsClusterDeclaration | LocalClusterDeclaration):
        return raw
    if isinstance(raw, ClusterDeclaration):
        raw = raw.model_dump(by_alias=True, exclude_unset=True)
    return TAGGED.validate_python(dict(raw))


__all__ = [
    "ACCEPTS_OUTPUT",
    "AcceleratorRequest",
    "AcceptsOutput",
    "AwsClusterDeclaration",
    "AwsSpec",
    "Cloud",
    "CloudRef",
    "ClusterDeclaration",
    "ControllerSpec",
    "GcpClusterDeclaration",
    "GcpSpec",
    "ImageSpec",
    "KubernetesSpec",
    "LocalClusterDeclaration",
    "LoginSpec",
    "PartitionSpec",
    "PoolKind",
    "PoolSpec",
    "Reservation",
    "SlurmSpec",
    "StorageSpec",
    "Taint",
    "TpuSliceSpec",
    "parse_declaration",
]
